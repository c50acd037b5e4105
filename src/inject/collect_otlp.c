/* --otlp in the injected library (collect_otlp.h). */
#include "inject/collect_otlp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/options.h"
#include "format/otlp.h"

int cuptrace_collect_otlp_wanted(void)
{
	struct cuptrace_setting_value v;
	return cuptrace_setting_env(CUPTRACE_SET_OTLP_URL, &v);
}

struct cuptrace_sink *cuptrace_collect_otlp_open(void)
{
	/* The writer thread sends nothing itself: a sender thread does, and a full queue drops
	 * (http.block = 0), so a slow collector never holds the writer, let alone CUDA. A bad
	 * value is warned about once by the settings table; the sink's default is used then. */
	struct cuptrace_otlp_opts o = {.sz = sizeof(o), .live = 1};
	o.http.sz = sizeof(o.http);
	for (int i = CUPTRACE_SET_OTLP_URL; i <= CUPTRACE_SET_OTLP_TIMEOUT; i++) {
		struct cuptrace_setting_value v;
		if (cuptrace_setting_env((enum cuptrace_setting_id)i, &v))
			cuptrace_otlp_opts_set(&o, (enum cuptrace_setting_id)i, &v);
	}
	return cuptrace_otlp_sink_new(&o);
}

void cuptrace_collect_otlp_summary(struct cuptrace_sink *otlp)
{
	struct cuptrace_otlp_stats st;
	char line[512];
	cuptrace_otlp_sink_stats(otlp, &st);
	cuptrace_otlp_stats_line(line, sizeof(line), cuptrace_otlp_sink_url(otlp), &st);
	fprintf(stderr, "cuptrace: %s\n", line);
}
