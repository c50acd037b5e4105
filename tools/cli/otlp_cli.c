/* The --otlp options of record and convert (otlp_cli.h). */
#include "otlp_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/otlp.h"
#include "output/otlp_http.h"

/* By option: its name, the sink option it sets, the library's variable. */
static const char *const names[][3] = {
    {"--otlp", "url", "CUPTRACE_OTLP_URL"},
    {"--service", "service", "CUPTRACE_OTLP_SERVICE"},
    {"--otlp-trace-per", "trace_per", "CUPTRACE_OTLP_TRACE_PER"},
    {"--otlp-batch", "batch", "CUPTRACE_OTLP_BATCH"},
    {"--otlp-interval", "interval_ms", "CUPTRACE_OTLP_INTERVAL_MS"},
    {"--otlp-window", "window_ms", "CUPTRACE_OTLP_WINDOW_MS"},
    {"--otlp-timeout", "timeout_ms", "CUPTRACE_OTLP_TIMEOUT_MS"},
};

int otlp_cli_take(struct otlp_cli *c, int opt, const char *arg)
{
	if (opt < OPT_OTLP || opt >= OPT_OTLP_END)
		return 0;
	c->v[opt - OPT_OTLP] = arg;
	return 1;
}

int otlp_cli_check(const struct otlp_cli *c, const char *cmd, struct cuptrace_otlp_opts *o)
{
	struct cuptrace_otlp_opts scratch = {.sz = sizeof(scratch)};
	for (int i = 0; i < OPT_OTLP_END - OPT_OTLP; i++) {
		if (!c->v[i])
			continue;
		if (i && !c->v[0]) {
			fprintf(stderr, "cuptrace %s: %s needs --otlp URL\n", cmd, names[i][0]);
			return -1;
		}
		const char *range;
		char *full = i ? NULL : cuptrace_otlp_http_full_url(c->v[0]);
		free(full);
		if (!i && !full) {
			fprintf(stderr,
			        "cuptrace %s: bad --otlp URL '%s' (expected http://HOST:PORT or "
			        "https://HOST:PORT, optionally with a path)\n",
			        cmd, c->v[0]);
			return -1;
		}
		if (cuptrace_otlp_opts_set(o ? o : &scratch, names[i][1], c->v[i], &range)) {
			fprintf(stderr, "cuptrace %s: bad value for %s: '%s' (%s)\n", cmd,
			        names[i][0], c->v[i], range);
			return -1;
		}
	}
	return 0;
}

void otlp_cli_setenv(const struct otlp_cli *c)
{
	for (int i = 0; i < OPT_OTLP_END - OPT_OTLP; i++)
		if (c->v[i])
			setenv(names[i][2], c->v[i], 1);
}
