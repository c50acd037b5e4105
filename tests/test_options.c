/* The settings table (common/options.h): each kind's good and bad values, the one message a bad
 * value gets from the command line and from the library, an option and its variable giving the
 * same value, the library's warn-once-and-default, and durations. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "common/log.h"
#include "common/options.h"

static const struct cuptrace_setting *get(enum cuptrace_setting_id id)
{
	return cuptrace_setting_get(id);
}

/* Parses text as an option; returns the message ("" when good). */
static const char *opt(enum cuptrace_setting_id id, const char *text,
                       struct cuptrace_setting_value *v)
{
	static char err[512];
	struct cuptrace_setting_value scratch;
	err[0] = 0;
	if (cuptrace_setting_parse(get(id), text, CUPTRACE_FROM_OPTION, v ? v : &scratch, err,
	                           sizeof(err)))
		return err[0] ? err : "(no message)";
	return "";
}

static void test_table(void)
{
	/* Every id has its row; names are unique and say where they come from. */
	for (int i = 0; i < CUPTRACE_NSETTINGS; i++) {
		const struct cuptrace_setting *s = get((enum cuptrace_setting_id)i);
		CHECK(s && (int)s->id == i);
		CHECK(s && !strncmp(s->env, "CUPTRACE_", 9));
		CHECK(cuptrace_setting_by_env(s->env) == s);
		if (s->option)
			CHECK(cuptrace_setting_by_option(s->option) == s);
		/* A default parses as a value of its own setting. */
		struct cuptrace_setting_value v;
		char err[256];
		if (s->def)
			CHECK_EQ_INT(cuptrace_setting_parse(s, s->def, CUPTRACE_FROM_ENV, &v, err,
			                                    sizeof(err)),
			             0);
	}
	CHECK(get(CUPTRACE_NSETTINGS) == NULL);
	CHECK(cuptrace_setting_by_option("no-such-option") == NULL);
	CHECK(cuptrace_setting_by_env("CUPTRACE_NOPE") == NULL);
	CHECK(cuptrace_setting_by_option("driver") == get(CUPTRACE_SET_DRIVER));
	CHECK(cuptrace_setting_by_env("CUPTRACE_RUNTIME") == get(CUPTRACE_SET_RUNTIME));
}

static void test_enums(void)
{
	struct cuptrace_setting_value v;
	CHECK_EQ_STR(opt(CUPTRACE_SET_DRIVER, "all", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_DRIVER_ALL);
	CHECK_EQ_STR(opt(CUPTRACE_SET_DRIVER, "user", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_DRIVER_USER);
	CHECK_EQ_STR(opt(CUPTRACE_SET_DRIVER, "work", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_DRIVER_WORK);
	/* The default (issue 45): only the driver calls that do GPU work. */
	CHECK_EQ_STR(get(CUPTRACE_SET_DRIVER)->def, "work");
	CHECK_EQ_STR(opt(CUPTRACE_SET_SYNC_RECORDS, "cupti", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_SYNC_RECORDS_CUPTI);
	CHECK_EQ_STR(opt(CUPTRACE_SET_SYNC_RECORDS, "callback", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_SYNC_RECORDS_CALLBACK);
	CHECK_EQ_STR(opt(CUPTRACE_SET_SYNC_RECORDS, "callbacks", &v), ""); /* alias */
	CHECK_EQ_INT(v.i, CUPTRACE_SYNC_RECORDS_CALLBACK);
	CHECK_EQ_STR(opt(CUPTRACE_SET_SYNC_RECORDS, "kind", NULL),
	             "bad value for --sync-records: 'kind' (takes callback or cupti)");
	CHECK(cuptrace_setting_by_option("sync-records") == get(CUPTRACE_SET_SYNC_RECORDS));
	CHECK(cuptrace_setting_by_env("CUPTRACE_SYNC_RECORDS") == get(CUPTRACE_SET_SYNC_RECORDS));
	CHECK_EQ_STR(opt(CUPTRACE_SET_DRIVER, "some", NULL),
	             "bad value for --driver: 'some' (takes work, user or all)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_DRIVER, "", NULL),
	             "bad value for --driver: '' (takes work, user or all)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_DRIVER, "ALL", NULL),
	             "bad value for --driver: 'ALL' (takes work, user or all)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_RUNTIME, "watch", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_RUNTIME_MODE_WATCH);
	CHECK_EQ_STR(opt(CUPTRACE_SET_RUNTIME, "all", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_RUNTIME_MODE_ALL);
	/* An alias is taken, but not offered. */
	CHECK_EQ_STR(opt(CUPTRACE_SET_RUNTIME, "default", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_RUNTIME_MODE_FILTERED);
	CHECK_EQ_STR(opt(CUPTRACE_SET_RUNTIME, "some", NULL),
	             "bad value for --runtime: 'some' (takes filtered, watch or all)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_COMPRESS, "gz", &v), "");
	CHECK_EQ_INT(v.i, 1);
	CHECK_EQ_STR(opt(CUPTRACE_SET_COMPRESS, "lz4", NULL),
	             "bad value for --compress: 'lz4' (takes chunks, gzip or none)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_FORMAT, "xml", NULL),
	             "bad value for --format: 'xml' (takes perfetto, chrome or capture)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_FORMAT, "capture", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_OUTFMT_CAPTURE);
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS_CLOCK, "boottime", &v), "");
	CHECK_EQ_INT(v.i, CLOCK_BOOTTIME);
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS_CLOCK, "auto", &v), "");
	CHECK_EQ_INT(v.i, -1);
	/* A variable only: the message names the variable, even asked as an option. */
	CHECK_EQ_STR(opt(CUPTRACE_SET_LOG, "loud", NULL),
	             "bad value for CUPTRACE_LOG: 'loud' (takes error, warn, info or debug)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_LOG, "debug", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_LOG_DEBUG);
}

static void test_numbers(void)
{
	struct cuptrace_setting_value v;
	CHECK_EQ_STR(opt(CUPTRACE_SET_BUFFER_SIZE, "8192", &v), "");
	CHECK_EQ_INT(v.i, 8192);
	CHECK_EQ_STR(opt(CUPTRACE_SET_BUFFER_SIZE, "1073741824", &v), "");
	CHECK_EQ_INT(v.i, 1073741824);
	static const char *const bad_sizes[] = {
	    "12",    "0",     "2G",     "1073741825", "-8192",
	    " 8192", "8192 ", "0x2000", "+8192",      "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
		char want[256];
		snprintf(want, sizeof(want),
		         "bad value for --buffer-size: '%s' (a byte count from 8192 to 1073741824)",
		         bad_sizes[i]);
		CHECK_EQ_STR(opt(CUPTRACE_SET_BUFFER_SIZE, bad_sizes[i], NULL), want);
	}
	CHECK_EQ_STR(opt(CUPTRACE_SET_FLUSH_MS, "0", &v), "");
	CHECK_EQ_INT(v.i, 0);
	CHECK_EQ_STR(opt(CUPTRACE_SET_FLUSH_MS, "-5", NULL),
	             "bad value for --flush-ms: '-5' (milliseconds, 0 to 3600000)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_FLUSH_MS, "3600001", NULL),
	             "bad value for --flush-ms: '3600001' (milliseconds, 0 to 3600000)");
	/* A count may be negative where its range says so. */
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS_NICE, "-5", &v), "");
	CHECK_EQ_INT(v.i, -5);
	CHECK(strstr(opt(CUPTRACE_SET_GPU_METRICS_NICE, "20", NULL), "-20 to 19") != NULL);
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS_RATE, "1e4", &v), "");
	CHECK(v.r == 10000.0);
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS_RATE, "0.5", NULL),
	             "bad value for --gpu-metrics-rate: '0.5' (Hz, 1 to 1000000)");
	CHECK(*opt(CUPTRACE_SET_GPU_METRICS_RATE, "10k", NULL));
	CHECK(*opt(CUPTRACE_SET_GPU_METRICS_RATE, "", NULL));
	CHECK(*opt(CUPTRACE_SET_GPU_METRICS_RATE, "nan", NULL));
	/* --stacks-every: 1 (every call) up to a million. */
	CHECK_EQ_STR(opt(CUPTRACE_SET_STACKS_EVERY, "4", &v), "");
	CHECK_EQ_INT(v.i, 4);
	CHECK_EQ_STR(opt(CUPTRACE_SET_STACKS_EVERY, "0", NULL),
	             "bad value for --stacks-every: '0' (a count from 1 to 1000000)");
	CHECK(*opt(CUPTRACE_SET_STACKS_EVERY, "1000001", NULL));
	CHECK(*opt(CUPTRACE_SET_STACKS_EVERY, "-2", NULL));
}

static void test_bools_lists(void)
{
	struct cuptrace_setting_value v;
	static const char *const on[] = {"1", "true", "yes", "on"};
	static const char *const off[] = {"0", "false", "no", "off"};
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_STR(opt(CUPTRACE_SET_SIGNALS, on[i], &v), "");
		CHECK_EQ_INT(v.i, 1);
		CHECK_EQ_STR(opt(CUPTRACE_SET_SIGNALS, off[i], &v), "");
		CHECK_EQ_INT(v.i, 0);
	}
	CHECK_EQ_STR(opt(CUPTRACE_SET_SUMMARY, "2", NULL),
	             "bad value for CUPTRACE_SUMMARY: '2' (takes 1 or 0)");
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS, "1", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_GPU_METRICS_DEFAULT);
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS, "0", &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_GPU_METRICS_OFF);
	const char *list = "sm__a.sum,dram__b.sum";
	CHECK_EQ_STR(opt(CUPTRACE_SET_GPU_METRICS, list, &v), "");
	CHECK_EQ_INT(v.i, CUPTRACE_GPU_METRICS_LIST);
	CHECK(v.s == list);
	static const char *const bad[] = {"", ",a", "a,", "a,,b"};
	for (int i = 0; i < 4; i++)
		CHECK(strstr(opt(CUPTRACE_SET_GPU_METRICS, bad[i], NULL), "needs metric names"));
	CHECK_EQ_STR(opt(CUPTRACE_SET_OUTPUT, "", NULL), "bad value for --output: '' (a path)");
}

static void test_duration(void)
{
	int64_t ns = -1;
	CHECK_EQ_INT(cuptrace_parse_duration("500ms", 1000000000, &ns), 0);
	CHECK_EQ_INT(ns, 500000000);
	CHECK_EQ_INT(cuptrace_parse_duration("2s", 1, &ns), 0);
	CHECK_EQ_INT(ns, 2000000000);
	CHECK_EQ_INT(cuptrace_parse_duration("1m", 1, &ns), 0);
	CHECK_EQ_INT(ns, 60000000000LL);
	CHECK_EQ_INT(cuptrace_parse_duration("1.5h", 1, &ns), 0);
	CHECK_EQ_INT(ns, 5400000000000LL);
	CHECK_EQ_INT(cuptrace_parse_duration("250us", 1, &ns), 0);
	CHECK_EQ_INT(ns, 250000);
	CHECK_EQ_INT(cuptrace_parse_duration("10ns", 1000, &ns), 0);
	CHECK_EQ_INT(ns, 10);
	CHECK_EQ_INT(cuptrace_parse_duration("0", 1000000000, &ns), 0);
	CHECK_EQ_INT(ns, 0);
	/* A bare number is in the setting's unit: seconds here, milliseconds there. */
	CHECK_EQ_INT(cuptrace_parse_duration("3", 1000000000, &ns), 0);
	CHECK_EQ_INT(ns, 3000000000LL);
	CHECK_EQ_INT(cuptrace_parse_duration("3", 1000000, &ns), 0);
	CHECK_EQ_INT(ns, 3000000);
	CHECK_EQ_INT(cuptrace_parse_duration("0.1s", 1, &ns), 0);
	CHECK_EQ_INT(ns, 100000000);
	static const char *const bad[] = {"",     "-1s",     "s",    "2 s", "2sec", "1d",
	                                  "ms",   "+2s",     " 2s",  "2s ", "nan",  "inf",
	                                  "1e30", "1e300ms", "2m3s", "0x",  NULL};
	for (int i = 0; i < 16; i++) {
		ns = 42;
		CHECK_EQ_INT(cuptrace_parse_duration(bad[i], 1, &ns), -EINVAL);
		CHECK_EQ_INT(ns, 42); /* untouched on failure */
	}
	CHECK_EQ_INT(cuptrace_parse_duration(NULL, 1, &ns), -EINVAL);
}

static char last_log[1200];
static int nlogs;
static void capture_log(enum cuptrace_log_level level, const char *msg)
{
	snprintf(last_log, sizeof(last_log), "%s", msg);
	nlogs++;
}

/* The library reads the same setting from its variable: same value, same message (naming the
 * variable), a warning only once, and the default for a bad value. */
static void test_env(void)
{
	cuptrace_log_set(capture_log);
	struct cuptrace_setting_value from_opt, from_env;
	static const struct {
		enum cuptrace_setting_id id;
		const char *text;
	} same[] = {
	    {CUPTRACE_SET_DRIVER, "all"},          {CUPTRACE_SET_RUNTIME, "watch"},
	    {CUPTRACE_SET_DRIVER, "user"},         {CUPTRACE_SET_SYNC_RECORDS, "cupti"},
	    {CUPTRACE_SET_BUFFER_SIZE, "65536"},   {CUPTRACE_SET_FLUSH_MS, "250"},
	    {CUPTRACE_SET_GPU_METRICS_RATE, "50"}, {CUPTRACE_SET_COMPRESS, "gzip"},
	    {CUPTRACE_SET_FORMAT, "chrome"},
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		const struct cuptrace_setting *s = get(same[i].id);
		CHECK_EQ_STR(opt(same[i].id, same[i].text, &from_opt), "");
		setenv(s->env, same[i].text, 1);
		nlogs = 0;
		CHECK_EQ_INT(cuptrace_setting_env(same[i].id, &from_env), 1);
		CHECK_EQ_INT(from_env.i, from_opt.i);
		CHECK(from_env.r == from_opt.r);
		CHECK_EQ_INT(nlogs, 0);
		unsetenv(s->env);
	}
	/* Unset or empty: the default, silently. */
	nlogs = 0;
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_BUFFER_SIZE, &from_env), 0);
	CHECK_EQ_INT(from_env.i, 1048576);
	setenv("CUPTRACE_FLUSH_MS", "", 1);
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_FLUSH_MS, &from_env), 0);
	CHECK_EQ_INT(from_env.i, 1000);
	CHECK_EQ_INT(nlogs, 0);
	/* Bad: one warning with the option's message, naming the variable; then the default. */
	setenv("CUPTRACE_DRIVER", "some", 1);
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_DRIVER, &from_env), 0);
	CHECK_EQ_INT(from_env.i, CUPTRACE_DRIVER_WORK);
	CHECK_EQ_INT(nlogs, 1);
	CHECK_EQ_STR(last_log,
	             "bad value for CUPTRACE_DRIVER: 'some' (takes work, user or all); using "
	             "the default, work");
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_DRIVER, &from_env), 0);
	CHECK_EQ_INT(nlogs, 1); /* once per process */
	setenv("CUPTRACE_RUNTIME", "everything", 1);
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_RUNTIME, &from_env), 0);
	CHECK_EQ_INT(from_env.i, CUPTRACE_RUNTIME_MODE_FILTERED);
	CHECK_EQ_STR(last_log,
	             "bad value for CUPTRACE_RUNTIME: 'everything' (takes filtered, watch "
	             "or all); using the default, filtered");
	setenv("CUPTRACE_BUFFER_SIZE", "12", 1);
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_BUFFER_SIZE, &from_env), 0);
	CHECK_EQ_INT(from_env.i, 1048576);
	CHECK(strstr(last_log, "CUPTRACE_BUFFER_SIZE: '12'") != NULL);
	/* No default: nothing set (the format then follows the file name). */
	setenv("CUPTRACE_FORMAT", "xml", 1);
	CHECK_EQ_INT(cuptrace_setting_env(CUPTRACE_SET_FORMAT, &from_env), 0);
	CHECK_EQ_INT(from_env.i, CUPTRACE_OUTFMT_AUTO);
	CHECK(from_env.s == NULL);
	CHECK_EQ_STR(last_log, "bad value for CUPTRACE_FORMAT: 'xml' (takes perfetto, chrome or "
	                       "capture); using the default");
	unsetenv("CUPTRACE_DRIVER");
	unsetenv("CUPTRACE_RUNTIME");
	unsetenv("CUPTRACE_BUFFER_SIZE");
	unsetenv("CUPTRACE_FORMAT");
	unsetenv("CUPTRACE_FLUSH_MS");
	cuptrace_log_set(NULL);
}

TEST_MAIN(T(test_table), T(test_enums), T(test_numbers), T(test_bools_lists), T(test_duration),
          T(test_env))
