/* The settings table and its parsers (see options.h). */
#define _GNU_SOURCE
#include "common/options.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/wspec.h"

static const struct cuptrace_setting_name format_names[] = {
    {"perfetto", CUPTRACE_OUTFMT_PERFETTO, 0},
    {"chrome", CUPTRACE_OUTFMT_CHROME, 0},
    {"capture", CUPTRACE_OUTFMT_CAPTURE, 0},
    {NULL, 0, 0},
};
/* Values of enum cuptrace_compress (output/output.h): none 0, gzip 1, chunks 2. */
static const struct cuptrace_setting_name compress_names[] = {
    {"chunks", 2, 0}, {"gzip", 1, 0},  {"none", 0, 0}, {"zlib", 2, 1},
    {"gz", 1, 1},     {"plain", 0, 1}, {NULL, 0, 0},
};
static const struct cuptrace_setting_name driver_names[] = {
    {"work", CUPTRACE_DRIVER_WORK, 0},
    {"user", CUPTRACE_DRIVER_USER, 0},
    {"all", CUPTRACE_DRIVER_ALL, 0},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name sync_records_names[] = {
    {"callback", CUPTRACE_SYNC_RECORDS_CALLBACK, 0},
    {"cupti", CUPTRACE_SYNC_RECORDS_CUPTI, 0},
    {"callbacks", CUPTRACE_SYNC_RECORDS_CALLBACK, 1},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name runtime_names[] = {
    {"filtered", CUPTRACE_RUNTIME_MODE_FILTERED, 0},
    {"watch", CUPTRACE_RUNTIME_MODE_WATCH, 0},
    {"all", CUPTRACE_RUNTIME_MODE_ALL, 0},
    {"default", CUPTRACE_RUNTIME_MODE_FILTERED, 1},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name stacks_names[] = {
    {"none", CUPTRACE_STACKS_NONE, 0},
    {"python", CUPTRACE_STACKS_PYTHON, 0},
    {"native", CUPTRACE_STACKS_NATIVE, 0},
    {"all", CUPTRACE_STACKS_ALL, 0},
    {"python-held", CUPTRACE_STACKS_PYTHON | CUPTRACE_STACKS_HELD_ONLY, 0},
    {"all-held", CUPTRACE_STACKS_ALL | CUPTRACE_STACKS_HELD_ONLY, 0},
    {"0", CUPTRACE_STACKS_NONE, 1},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name clock_names[] = {
    {"auto", -1, 0},
    {"realtime", CLOCK_REALTIME, 0},
    {"boottime", CLOCK_BOOTTIME, 0},
    {"monotonic", CLOCK_MONOTONIC, 0},
    {"monotonic_raw", CLOCK_MONOTONIC_RAW, 0},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name log_names[] = {
    {"error", CUPTRACE_LOG_ERROR, 0},
    {"warn", CUPTRACE_LOG_WARN, 0},
    {"info", CUPTRACE_LOG_INFO, 0},
    {"debug", CUPTRACE_LOG_DEBUG, 0},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name overhead_names[] = {
    {"process", CUPTRACE_OVERHEAD_PROCESS, 0},
    {"thread", CUPTRACE_OVERHEAD_THREAD, 0},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name cuda_graphs_names[] = {
    {"node", CUPTRACE_CUDA_GRAPHS_NODE, 0},
    {"graph", CUPTRACE_CUDA_GRAPHS_GRAPH, 0},
    {"nodes", CUPTRACE_CUDA_GRAPHS_NODE, 1},
    {"graphs", CUPTRACE_CUDA_GRAPHS_GRAPH, 1},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name sample_threads_names[] = {
    {"cuda", CUPTRACE_SAMPLE_THREADS_CUDA, 0},
    {"all", CUPTRACE_SAMPLE_THREADS_ALL, 0},
    {NULL, 0, 0},
};
static const struct cuptrace_setting_name api_enable_names[] = {
    {"kind", 0, 0},
    {"cbid", 1, 0},
    {NULL, 0, 0},
};

/* --gpu-metrics: "0" off, "1" or "default" the default set, else CUPTI metric names. */
static int gpu_metrics_mode(const char *text, struct cuptrace_setting_value *v, char *err, size_t n)
{
	v->i = !strcmp(text, "0")                               ? CUPTRACE_GPU_METRICS_OFF
	       : !strcmp(text, "1") || !strcmp(text, "default") ? CUPTRACE_GPU_METRICS_DEFAULT
	                                                        : CUPTRACE_GPU_METRICS_LIST;
	return 0;
}

/* Capture window values, checked by the parsers the library uses (common/wspec.h). */
static int check_range(const char *text, struct cuptrace_setting_value *v, char *err, size_t n)
{
	struct cuptrace_wspec w = {0};
	char why[200];
	if (!cuptrace_wspec_parse_range(&w, text, why, sizeof(why)))
		return 0;
	snprintf(err, n, "%s", cuptrace_setting_get(CUPTRACE_SET_CAPTURE_RANGE)->expect);
	return -EINVAL;
}

static int check_steps(const char *text, struct cuptrace_setting_value *v, char *err, size_t n)
{
	struct cuptrace_wspec w = {0};
	char why[200];
	if (!cuptrace_wspec_parse_steps(&w, text, why, sizeof(why)))
		return 0;
	snprintf(err, n, "%s", cuptrace_setting_get(CUPTRACE_SET_STEPS)->expect);
	return -EINVAL;
}

static int check_repeat(const char *text, struct cuptrace_setting_value *v, char *err, size_t n)
{
	struct cuptrace_wspec w = {0};
	char why[200];
	if (!cuptrace_wspec_parse_repeat(&w, text, why, sizeof(why)))
		return 0;
	snprintf(err, n, "%s", cuptrace_setting_get(CUPTRACE_SET_CAPTURE_REPEAT)->expect);
	return -EINVAL;
}

static int check_slow(const char *text, struct cuptrace_setting_value *v, char *err, size_t n)
{
	if (v->r > 1.0)
		return 0;
	snprintf(err, n, "the factor must be above 1: 3 writes steps over 3x the median");
	return -EINVAL;
}

#define NO_NAMES NULL
#define SEC      1000000000LL
/* The OTLP sink's settings (format/otlp.h): a string or a count, no names, no default. */
#define OTLP_ROW(id_, opt_, var_, kind_, lo_, hi_, expect_)                                        \
	[CUPTRACE_SET_##id_] = {.id = CUPTRACE_SET_##id_,                                          \
	                        .option = opt_,                                                    \
	                        .env = var_,                                                       \
	                        .kind = CUPTRACE_SETTING_##kind_,                                  \
	                        .min = lo_,                                                        \
	                        .max = hi_,                                                        \
	                        .expect = expect_}
#define MS_3600000 "milliseconds, 1 to 3600000"
/* Rows: id, option, variable, kind, names, min, max, rmin, rmax, unit_ns, default, expect,
 * validate; each at its id (tests/test_options.c checks that none is missing). */
static const struct cuptrace_setting settings[CUPTRACE_NSETTINGS] = {
    [CUPTRACE_SET_OUTPUT] = {CUPTRACE_SET_OUTPUT, "output", "CUPTRACE_OUTPUT",
                             CUPTRACE_SETTING_STRING, NO_NAMES, 0, 0, 0, 0, 0, NULL, "a path",
                             NULL},
    [CUPTRACE_SET_FORMAT] = {CUPTRACE_SET_FORMAT, "format", "CUPTRACE_FORMAT",
                             CUPTRACE_SETTING_ENUM, format_names, 0, 0, 0, 0, 0, NULL, NULL, NULL},
    [CUPTRACE_SET_COMPRESS] = {CUPTRACE_SET_COMPRESS, "compress", "CUPTRACE_COMPRESS",
                               CUPTRACE_SETTING_ENUM, compress_names, 0, 0, 0, 0, 0, NULL, NULL,
                               NULL},
    [CUPTRACE_SET_DRIVER] = {CUPTRACE_SET_DRIVER, "driver", "CUPTRACE_DRIVER",
                             CUPTRACE_SETTING_ENUM, driver_names, 0, 0, 0, 0, 0, "work", NULL,
                             NULL},
    [CUPTRACE_SET_RUNTIME] = {CUPTRACE_SET_RUNTIME, "runtime", "CUPTRACE_RUNTIME",
                              CUPTRACE_SETTING_ENUM, runtime_names, 0, 0, 0, 0, 0, "filtered", NULL,
                              NULL},
    [CUPTRACE_SET_BUFFER_SIZE] = {CUPTRACE_SET_BUFFER_SIZE, "buffer-size", "CUPTRACE_BUFFER_SIZE",
                                  CUPTRACE_SETTING_SIZE, NO_NAMES, 8192, 1 << 30, 0, 0, 0,
                                  "1048576", "a byte count from 8192 to 1073741824", NULL},
    [CUPTRACE_SET_FLUSH_MS] = {CUPTRACE_SET_FLUSH_MS, "flush-ms", "CUPTRACE_FLUSH_MS",
                               CUPTRACE_SETTING_COUNT, NO_NAMES, 0, 3600000, 0, 0, 0, "1000",
                               "milliseconds, 0 to 3600000", NULL},
    [CUPTRACE_SET_SUMMARY] = {CUPTRACE_SET_SUMMARY, NULL, "CUPTRACE_SUMMARY", CUPTRACE_SETTING_BOOL,
                              NO_NAMES, 0, 0, 0, 0, 0, "1", NULL, NULL},
    [CUPTRACE_SET_GPU_METRICS] = {CUPTRACE_SET_GPU_METRICS, "gpu-metrics", "CUPTRACE_GPU_METRICS",
                                  CUPTRACE_SETTING_LIST, NO_NAMES, 0, 0, 0, 0, 0, "0",
                                  "needs metric names, comma-separated, or 1 for the default set",
                                  gpu_metrics_mode},
    [CUPTRACE_SET_GPU_METRICS_RATE] = {CUPTRACE_SET_GPU_METRICS_RATE, "gpu-metrics-rate",
                                       "CUPTRACE_GPU_METRICS_RATE", CUPTRACE_SETTING_REAL, NO_NAMES,
                                       0, 0, 1, 1000000, 0, "10000", "Hz, 1 to 1000000", NULL},
    [CUPTRACE_SET_GPU_METRICS_CLOCK] = {CUPTRACE_SET_GPU_METRICS_CLOCK, NULL,
                                        "CUPTRACE_GPU_METRICS_CLOCK", CUPTRACE_SETTING_ENUM,
                                        clock_names, 0, 0, 0, 0, 0, "auto", NULL, NULL},
    [CUPTRACE_SET_GPU_METRICS_NICE] = {CUPTRACE_SET_GPU_METRICS_NICE, NULL,
                                       "CUPTRACE_GPU_METRICS_NICE", CUPTRACE_SETTING_COUNT,
                                       NO_NAMES, -20, 19, 0, 0, 0, "10", "a nice value, -20 to 19",
                                       NULL},
    [CUPTRACE_SET_QUEUE] = {CUPTRACE_SET_QUEUE, NULL, "CUPTRACE_QUEUE", CUPTRACE_SETTING_COUNT,
                            NO_NAMES, 1, 1 << 20, 0, 0, 0, "64", "buffers, 1 to 1048576", NULL},
    [CUPTRACE_SET_FAULT_BUFFERS] = {CUPTRACE_SET_FAULT_BUFFERS, NULL, "CUPTRACE_FAULT_BUFFERS",
                                    CUPTRACE_SETTING_COUNT, NO_NAMES, 0, 1 << 30, 0, 0, 0, "0",
                                    "0, or refuse every N-th buffer", NULL},
    [CUPTRACE_SET_SIGNALS] = {CUPTRACE_SET_SIGNALS, NULL, "CUPTRACE_SIGNALS", CUPTRACE_SETTING_BOOL,
                              NO_NAMES, 0, 0, 0, 0, 0, "1", NULL, NULL},
    [CUPTRACE_SET_LOG] = {CUPTRACE_SET_LOG, NULL, "CUPTRACE_LOG", CUPTRACE_SETTING_ENUM, log_names,
                          0, 0, 0, 0, 0, "warn", NULL, NULL},
    [CUPTRACE_SET_API_ENABLE] = {CUPTRACE_SET_API_ENABLE, NULL, "CUPTRACE_API_ENABLE",
                                 CUPTRACE_SETTING_ENUM, api_enable_names, 0, 0, 0, 0, 0, "cbid",
                                 NULL, NULL},
    [CUPTRACE_SET_LIB] = {CUPTRACE_SET_LIB, "lib", "CUPTRACE_LIB", CUPTRACE_SETTING_STRING,
                          NO_NAMES, 0, 0, 0, 0, 0, NULL, "a path", NULL},
    [CUPTRACE_SET_DELAY] = {CUPTRACE_SET_DELAY, "delay", "CUPTRACE_DELAY",
                            CUPTRACE_SETTING_DURATION, NO_NAMES, 0, 1000000 * SEC, 0, 0, SEC, "0",
                            "a duration such as 500ms, 2s or 1m", NULL},
    [CUPTRACE_SET_DURATION] = {CUPTRACE_SET_DURATION, "duration", "CUPTRACE_DURATION",
                               CUPTRACE_SETTING_DURATION, NO_NAMES, 1, 1000000 * SEC, 0, 0, SEC,
                               NULL, "a duration above 0, such as 500ms, 2s or 1m", NULL},
    [CUPTRACE_SET_CAPTURE_RANGE] = {CUPTRACE_SET_CAPTURE_RANGE, "capture-range",
                                    "CUPTRACE_CAPTURE_RANGE", CUPTRACE_SETTING_STRING, NO_NAMES, 0,
                                    0, 0, 0, 0, NULL, "cuda-profiler-api or range:NAME[#K][,N]",
                                    check_range},
    [CUPTRACE_SET_STEPS] = {CUPTRACE_SET_STEPS, "steps", "CUPTRACE_STEPS", CUPTRACE_SETTING_STRING,
                            NO_NAMES, 0, 0, 0, 0, 0, NULL,
                            "K[,N]: the first step (1-based) and how many", check_steps},
    [CUPTRACE_SET_CAPTURE_REPEAT] = {CUPTRACE_SET_CAPTURE_REPEAT, "capture-repeat",
                                     "CUPTRACE_CAPTURE_REPEAT", CUPTRACE_SETTING_STRING, NO_NAMES,
                                     0, 0, 0, 0, 0, NULL, "a count above 0, or all", check_repeat},
    [CUPTRACE_SET_ON_DEMAND] = {CUPTRACE_SET_ON_DEMAND, "on-demand", "CUPTRACE_ON_DEMAND",
                                CUPTRACE_SETTING_BOOL, NO_NAMES, 0, 0, 0, 0, 0, "0", NULL, NULL},
    [CUPTRACE_SET_RING] = {CUPTRACE_SET_RING, "ring", "CUPTRACE_RING", CUPTRACE_SETTING_DURATION,
                           NO_NAMES, 1, 3600 * SEC, 0, 0, SEC, NULL,
                           "a duration above 0 and at most 1h, such as 10s", NULL},
    [CUPTRACE_SET_RING_SLOW] = {CUPTRACE_SET_RING_SLOW, "ring-slow", "CUPTRACE_RING_SLOW",
                                CUPTRACE_SETTING_REAL, NO_NAMES, 0, 0, 1, 1000, 0, NULL,
                                "a factor above 1, at most 1000", check_slow},
    [CUPTRACE_SET_RING_MAX] = {CUPTRACE_SET_RING_MAX, "ring-max", "CUPTRACE_RING_MAX",
                               CUPTRACE_SETTING_SIZE, NO_NAMES, 1 << 20, 1LL << 40, 0, 0, 0,
                               "1073741824", "a byte count from 1048576", NULL},
    [CUPTRACE_SET_STEP_RANGE] = {CUPTRACE_SET_STEP_RANGE, "step-range", "CUPTRACE_STEP_RANGE",
                                 CUPTRACE_SETTING_STRING, NO_NAMES, 0, 0, 0, 0, 0, NULL,
                                 "an NVTX range name", NULL},
    [CUPTRACE_SET_WINDOW_DRAIN] = {CUPTRACE_SET_WINDOW_DRAIN, NULL, "CUPTRACE_WINDOW_DRAIN",
                                   CUPTRACE_SETTING_DURATION, NO_NAMES, 0, 600 * SEC, 0, 0, 1000000,
                                   "500ms", "a duration, at most 10m", NULL},
    [CUPTRACE_SET_JOB] = {CUPTRACE_SET_JOB, NULL, "CUPTRACE_JOB", CUPTRACE_SETTING_COUNT, NO_NAMES,
                          0, 1LL << 40, 0, 0, 0, "0", "a pid", NULL},
    [CUPTRACE_SET_STACKS] = {CUPTRACE_SET_STACKS, "stacks", "CUPTRACE_STACKS",
                             CUPTRACE_SETTING_ENUM, stacks_names, 0, 0, 0, 0, 0, "none", NULL,
                             NULL},
    [CUPTRACE_SET_STACKS_EVERY] = {CUPTRACE_SET_STACKS_EVERY, "stacks-every",
                                   "CUPTRACE_STACKS_EVERY", CUPTRACE_SETTING_COUNT, NO_NAMES, 1,
                                   1000000, 0, 0, 0, "1", "a count from 1 to 1000000", NULL},
    [CUPTRACE_SET_COMPRESS_LEVEL] = {CUPTRACE_SET_COMPRESS_LEVEL, "compress-level",
                                     "CUPTRACE_COMPRESS_LEVEL", CUPTRACE_SETTING_COUNT, NO_NAMES, 1,
                                     12, 0, 0, 0, "5",
                                     "1 (least CPU) to 12 (smallest); zlib stops at 9", NULL},
    [CUPTRACE_SET_CUDA_GRAPHS] = {CUPTRACE_SET_CUDA_GRAPHS, "cuda-graphs", "CUPTRACE_CUDA_GRAPHS",
                                  CUPTRACE_SETTING_ENUM, cuda_graphs_names, 0, 0, 0, 0, 0, "node",
                                  NULL, NULL},
    [CUPTRACE_SET_CUPTI_EARLY] = {CUPTRACE_SET_CUPTI_EARLY, "cupti-early", "CUPTRACE_CUPTI_EARLY",
                                  CUPTRACE_SETTING_BOOL, NO_NAMES, 0, 0, 0, 0, 0, "0", NULL, NULL},
    [CUPTRACE_SET_SYNC_RECORDS] = {CUPTRACE_SET_SYNC_RECORDS, "sync-records",
                                   "CUPTRACE_SYNC_RECORDS", CUPTRACE_SETTING_ENUM,
                                   sync_records_names, 0, 0, 0, 0, 0, "cupti", NULL, NULL},
    [CUPTRACE_SET_SAMPLE] = {CUPTRACE_SET_SAMPLE, "sample", "CUPTRACE_SAMPLE",
                             CUPTRACE_SETTING_COUNT, NO_NAMES, 0, 1000, 0, 0, 0, "0",
                             "samples a second per thread, 1 to 1000 (0: off)", NULL},
    [CUPTRACE_SET_SAMPLE_THREADS] = {CUPTRACE_SET_SAMPLE_THREADS, "sample-threads",
                                     "CUPTRACE_SAMPLE_THREADS", CUPTRACE_SETTING_ENUM,
                                     sample_threads_names, 0, 0, 0, 0, 0, "cuda", NULL, NULL},
    [CUPTRACE_SET_SAMPLE_NATIVE] = {CUPTRACE_SET_SAMPLE_NATIVE, "sample-native",
                                    "CUPTRACE_SAMPLE_NATIVE", CUPTRACE_SETTING_BOOL, NO_NAMES, 0, 0,
                                    0, 0, 0, "0", NULL, NULL},
    [CUPTRACE_SET_OVERHEAD_TRACKS] = {CUPTRACE_SET_OVERHEAD_TRACKS, "overhead-tracks",
                                      "CUPTRACE_OVERHEAD_TRACKS", CUPTRACE_SETTING_ENUM,
                                      overhead_names, 0, 0, 0, 0, 0, "process", NULL, NULL},
    /* No defaults here: the OTLP sink keeps its own (format/otlp.h) for what is not given. The
     * URL's form is checked where it is used (output/otlp_http.h), above this layer. */
    OTLP_ROW(OTLP_URL, "otlp", "CUPTRACE_OTLP_URL", STRING, 0, 0,
             "a collector's URL, http://HOST:PORT"),
    OTLP_ROW(OTLP_SERVICE, "service", "CUPTRACE_OTLP_SERVICE", STRING, 0, 0, "a non-empty string"),
    OTLP_ROW(OTLP_TRACE_PER, "otlp-trace-per", "CUPTRACE_OTLP_TRACE_PER", STRING, 0, 0,
             "a non-empty string"),
    OTLP_ROW(OTLP_BATCH, "otlp-batch", "CUPTRACE_OTLP_BATCH", COUNT, 1, 65536,
             "a span count from 1 to 65536"),
    OTLP_ROW(OTLP_INTERVAL, "otlp-interval", "CUPTRACE_OTLP_INTERVAL_MS", COUNT, 1, 3600000,
             MS_3600000),
    OTLP_ROW(OTLP_WINDOW, "otlp-window", "CUPTRACE_OTLP_WINDOW_MS", COUNT, 1, 3600000, MS_3600000),
    OTLP_ROW(OTLP_TIMEOUT, "otlp-timeout", "CUPTRACE_OTLP_TIMEOUT_MS", COUNT, 1, 600000,
             "milliseconds, 1 to 600000"),
};

const struct cuptrace_setting *cuptrace_setting_get(enum cuptrace_setting_id id)
{
	return (unsigned)id < CUPTRACE_NSETTINGS ? &settings[id] : NULL;
}

const struct cuptrace_setting *cuptrace_setting_by_option(const char *option)
{
	for (size_t i = 0; i < CUPTRACE_NSETTINGS; i++)
		if (settings[i].option && !strcmp(settings[i].option, option))
			return &settings[i];
	return NULL;
}

const struct cuptrace_setting *cuptrace_setting_by_env(const char *env)
{
	for (size_t i = 0; i < CUPTRACE_NSETTINGS; i++)
		if (!strcmp(settings[i].env, env))
			return &settings[i];
	return NULL;
}

int cuptrace_parse_duration(const char *text, int64_t unit_ns, int64_t *ns)
{
	static const struct {
		const char *suffix;
		double ns;
	} units[] = {{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}};
	if (!text || !*text || *text == '-' || *text == '+' || *text == ' ')
		return -EINVAL;
	char *end;
	errno = 0;
	double x = strtod(text, &end);
	if (errno || end == text || !isfinite(x) || x < 0)
		return -EINVAL;
	double mul = (double)unit_ns;
	if (*end) {
		size_t i;
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
			if (!strcmp(end, units[i].suffix))
				break;
		if (i == sizeof(units) / sizeof(units[0]))
			return -EINVAL;
		mul = units[i].ns;
	}
	double v = x * mul;
	if (!(v < 9.2e18))
		return -EINVAL;
	*ns = (int64_t)(v + 0.5);
	return 0;
}

/* "takes a, b or c" for an enum's non-alias names. */
static void enum_expect(const struct cuptrace_setting_name *names, char *out, size_t n)
{
	size_t k = 0, count = 0, len = (size_t)snprintf(out, n, "takes ");
	for (k = 0; names[k].name; k++)
		count += !names[k].alias;
	size_t seen = 0;
	for (k = 0; names[k].name && len < n; k++) {
		if (names[k].alias)
			continue;
		seen++;
		const char *sep = seen == 1 ? "" : seen == count ? " or " : ", ";
		len += (size_t)snprintf(out + len, n - len, "%s%s", sep, names[k].name);
	}
}

static int parse_int(const char *text, int64_t *out)
{
	if (!*text || *text == ' ' || *text == '+')
		return -EINVAL;
	char *end;
	errno = 0;
	long long x = strtoll(text, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = x;
	return 0;
}

/* Parses text into v; on failure writes why (what a good value is) into why. */
static int parse_kind(const struct cuptrace_setting *s, const char *text,
                      struct cuptrace_setting_value *v, char *why, size_t n)
{
	switch (s->kind) {
	case CUPTRACE_SETTING_BOOL: {
		static const char *const on[] = {"1", "true", "yes", "on"};
		static const char *const off[] = {"0", "false", "no", "off"};
		for (size_t i = 0; i < 4; i++) {
			if (!strcmp(text, on[i]) || !strcmp(text, off[i])) {
				v->i = !strcmp(text, on[i]);
				return 0;
			}
		}
		snprintf(why, n, "takes 1 or 0");
		return -EINVAL;
	}
	case CUPTRACE_SETTING_ENUM:
		for (size_t i = 0; s->names[i].name; i++) {
			if (!strcmp(text, s->names[i].name)) {
				v->i = s->names[i].value;
				return 0;
			}
		}
		enum_expect(s->names, why, n);
		return -EINVAL;
	case CUPTRACE_SETTING_DURATION:
		if (cuptrace_parse_duration(text, s->unit_ns, &v->i) == 0 && v->i >= s->min &&
		    v->i <= s->max)
			return 0;
		break;
	case CUPTRACE_SETTING_SIZE:
	case CUPTRACE_SETTING_COUNT:
		if (parse_int(text, &v->i) == 0 && v->i >= s->min && v->i <= s->max &&
		    (s->kind != CUPTRACE_SETTING_SIZE || v->i >= 0))
			return 0;
		break;
	case CUPTRACE_SETTING_REAL: {
		char *end;
		errno = 0;
		v->r = strtod(text, &end);
		if (!errno && *text && !*end && v->r >= s->rmin && v->r <= s->rmax)
			return 0;
		break;
	}
	case CUPTRACE_SETTING_STRING:
		if (*text)
			return 0;
		break;
	case CUPTRACE_SETTING_LIST: {
		/* Non-empty items: "a,,b", ",a" and "a," are typos, not lists. */
		int ok =
		    *text && *text != ',' && text[strlen(text) - 1] != ',' && !strstr(text, ",,");
		if (ok)
			return 0;
		break;
	}
	}
	snprintf(why, n, "%s", s->expect ? s->expect : "see --help");
	return -EINVAL;
}

int cuptrace_setting_parse(const struct cuptrace_setting *s, const char *text,
                           enum cuptrace_setting_from from, struct cuptrace_setting_value *v,
                           char *err, size_t n)
{
	struct cuptrace_setting_value tmp = {.s = text};
	char why[256] = "";
	int r = text ? parse_kind(s, text, &tmp, why, sizeof(why)) : -EINVAL;
	if (!r && s->validate)
		r = s->validate(text, &tmp, why, sizeof(why));
	if (r) {
		if (from == CUPTRACE_FROM_OPTION && s->option)
			snprintf(err, n, "bad value for --%s: '%s' (%s)", s->option,
			         text ? text : "", why);
		else
			snprintf(err, n, "bad value for %s: '%s' (%s)", s->env, text ? text : "",
			         why);
		return -EINVAL;
	}
	*v = tmp;
	return 0;
}

/* One warning per setting per process: the C API may start many sessions. */
static atomic_uchar warned[CUPTRACE_NSETTINGS];

static void setting_default(const struct cuptrace_setting *s, struct cuptrace_setting_value *v)
{
	char err[8];
	struct cuptrace_setting_value d = {0};
	if (s->def)
		cuptrace_setting_parse(s, s->def, CUPTRACE_FROM_ENV, &d, err, sizeof(err));
	*v = d;
}

int cuptrace_setting_env(enum cuptrace_setting_id id, struct cuptrace_setting_value *v)
{
	const struct cuptrace_setting *s = cuptrace_setting_get(id);
	const char *text = s ? getenv(s->env) : NULL;
	if (!s) {
		*v = (struct cuptrace_setting_value){0};
		return 0;
	}
	if (text && *text) {
		char err[512];
		if (!cuptrace_setting_parse(s, text, CUPTRACE_FROM_ENV, v, err, sizeof(err)))
			return 1;
		if (!atomic_exchange(&warned[id], 1))
			cuptrace_warn("%s; using the default%s%s", err, s->def ? ", " : "",
			              s->def ? s->def : "");
	}
	setting_default(s, v);
	return 0;
}
