/* A stand-in for libcuptrace.so's C API (include/cuptrace.h) for the Python package's tests
 * (tests/python/): no CUDA, no CUPTI. Each call appends a line to the file named by
 * CUPTRACE_STUB_LOG ("start PATH", then "env NAME=VALUE" for every CUPTRACE_* variable it saw,
 * "stop", "step", ...), so the tests read back exactly what the package passed. cuptrace_stop
 * (or cuptrace_end, in a session of capture windows) copies CUPTRACE_STUB_TRACE, a real trace,
 * onto the session's path, standing in for the file the library would have written.
 * Built twice: plain, an older library (before cuptrace_range_push/pop, cuptrace_end and
 * cuptrace_setting_check: the package's fallbacks), and with -DSTUB_NEXT, today's API
 * (include/cuptrace.h), with the library's return values (a pop with no range open and an end
 * with no session: -EINVAL). Single-threaded tests. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuptrace.h"

extern char **environ;

static int running, windowed;
#ifdef STUB_NEXT
static int range_depth;
#endif
static char out_path[4096];

static void note(const char *fmt, const char *arg)
{
	const char *log = getenv("CUPTRACE_STUB_LOG");
	FILE *f = log ? fopen(log, "a") : NULL;
	if (!f)
		return;
	fprintf(f, fmt, arg);
	fputc('\n', f);
	fclose(f);
}

static int copy_trace(void)
{
	const char *src = getenv("CUPTRACE_STUB_TRACE");
	if (!src || !*out_path)
		return 0;
	FILE *in = fopen(src, "rb"), *out = in ? fopen(out_path, "wb") : NULL;
	char buf[65536];
	size_t n;
	int r = in && out ? 0 : -EIO;
	while (!r && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		if (fwrite(buf, 1, n, out) != n)
			r = -EIO;
	if (out && fclose(out))
		r = -EIO;
	if (in)
		fclose(in);
	return r;
}

static int is_window_var(const char *kv)
{
	static const char *const vars[] = {
	    "CUPTRACE_DELAY=",      "CUPTRACE_DURATION=",   "CUPTRACE_CAPTURE_RANGE=",
	    "CUPTRACE_STEPS=",      "CUPTRACE_STEP_RANGE=", "CUPTRACE_CAPTURE_REPEAT=",
	    "CUPTRACE_ON_DEMAND=1", "CUPTRACE_RING="};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (!strncmp(kv, vars[i], strlen(vars[i])))
			return 1;
	return 0;
}

/* Not the library's: lets one test process begin each test with no session. */
CUPTRACE_API void cuptrace_stub_reset(void);
CUPTRACE_API void cuptrace_stub_reset(void)
{
	running = windowed = 0;
#ifdef STUB_NEXT
	range_depth = 0;
#endif
}

CUPTRACE_API int cuptrace_start(const char *path)
{
	note("start %s", path ? path : "(null)");
	const char *rc = getenv("CUPTRACE_STUB_START_RC");
	if (rc && *rc)
		return atoi(rc);
	if (running)
		return -EALREADY;
	const char *o = getenv("CUPTRACE_OUTPUT");
	if (path)
		snprintf(out_path, sizeof(out_path), "%s", path);
	else if (o && *o)
		snprintf(out_path, sizeof(out_path), "%s", o);
	else
		snprintf(out_path, sizeof(out_path), "cuptrace-%d.pftrace", (int)getpid());
	windowed = 0;
	for (char **e = environ; *e; e++) {
		if (strncmp(*e, "CUPTRACE_", 9) || !strncmp(*e, "CUPTRACE_STUB_", 14))
			continue;
		note("env %s", *e);
		windowed |= is_window_var(*e);
	}
	running = 1;
	return 0;
}

CUPTRACE_API int cuptrace_stop(void)
{
	note("stop%s", "");
	if (!running)
		return -EINVAL;
	if (windowed)
		return 0; /* the library closes a window; the session goes on */
	running = 0;
	return copy_trace();
}

CUPTRACE_API int cuptrace_flush(void)
{
	note("flush%s", "");
	return running ? 0 : -EINVAL;
}

CUPTRACE_API int cuptrace_step(void)
{
	note("step%s", "");
	return 0;
}

CUPTRACE_API int cuptrace_stacks(int on)
{
	note("stacks %s", on ? "1" : "0");
	return -ENOTSUP;
}

#ifdef STUB_NEXT
/* The library checks with its settings table; the stub refuses the value "bad", and knows no
 * variable named by CUPTRACE_STUB_UNKNOWN (-ENOENT, as the library for one it does not read). */
CUPTRACE_API int cuptrace_setting_check(const char *var, const char *value, char *why, size_t n)
{
	const char *unknown = getenv("CUPTRACE_STUB_UNKNOWN");
	if (unknown && !strcmp(var, unknown)) {
		snprintf(why, n, "%s is not a setting of this library", var);
		return -ENOENT;
	}
	if (strcmp(value, "bad"))
		return 0;
	snprintf(why, n, "bad value for %s: '%s' (stub says no)", var, value);
	return -EINVAL;
}

CUPTRACE_API int cuptrace_range_push(const char *name)
{
	if (!name)
		return -EINVAL;
	note("range_push %s", name);
	range_depth++;
	return 0;
}

CUPTRACE_API int cuptrace_range_pop(void)
{
	note("range_pop%s", range_depth ? "" : " (none open)");
	if (!range_depth)
		return -EINVAL;
	range_depth--;
	return 0;
}

CUPTRACE_API int cuptrace_end(void)
{
	note("end%s", "");
	if (!running)
		return -EINVAL;
	running = 0;
	return copy_trace();
}
#endif
