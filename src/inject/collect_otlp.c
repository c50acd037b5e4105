/* --otlp in the injected library (collect_otlp.h). */
#include "inject/collect_otlp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "format/otlp.h"

static const char *const vars[][2] = {
    {"url", "CUPTRACE_OTLP_URL"},
    {"service", "CUPTRACE_OTLP_SERVICE"},
    {"trace_per", "CUPTRACE_OTLP_TRACE_PER"},
    {"batch", "CUPTRACE_OTLP_BATCH"},
    {"interval_ms", "CUPTRACE_OTLP_INTERVAL_MS"},
    {"window_ms", "CUPTRACE_OTLP_WINDOW_MS"},
    {"timeout_ms", "CUPTRACE_OTLP_TIMEOUT_MS"},
};

int cuptrace_collect_otlp_wanted(void)
{
	const char *u = getenv("CUPTRACE_OTLP_URL");
	return u && *u;
}

struct cuptrace_sink *cuptrace_collect_otlp_open(void)
{
	/* The writer thread sends nothing itself: a sender thread does, and a full queue drops
	 * (http.block = 0), so a slow collector never holds the writer, let alone CUDA. */
	struct cuptrace_otlp_opts o = {.sz = sizeof(o), .live = 1};
	o.http.sz = sizeof(o.http);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i][1]), *range;
		if (v && *v && cuptrace_otlp_opts_set(&o, vars[i][0], v, &range))
			cuptrace_warn("ignoring %s=%s (expected %s)", vars[i][1], v, range);
	}
	return cuptrace_otlp_sink_new(&o);
}

int cuptrace_collect_otlp_check(const char *var, const char *value, char *why, size_t n)
{
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		if (strcmp(var, vars[i][1]))
			continue;
		struct cuptrace_otlp_opts o = {.sz = sizeof(o)};
		const char *range;
		int r = cuptrace_otlp_opts_set(&o, vars[i][0], value, &range);
		if (r && n)
			snprintf(why, n, "bad value for %s: '%s' (%s)", var, value, range);
		return r;
	}
	return -ENOENT;
}

void cuptrace_collect_otlp_summary(struct cuptrace_sink *otlp)
{
	struct cuptrace_otlp_stats st;
	char line[512];
	cuptrace_otlp_sink_stats(otlp, &st);
	cuptrace_otlp_stats_line(line, sizeof(line), cuptrace_otlp_sink_url(otlp), &st);
	fprintf(stderr, "cuptrace: %s\n", line);
}
