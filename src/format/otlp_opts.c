/* The OTLP sink's options from the settings table's values (one parser for the command line and
 * the injected library's environment: common/options.c) and its summary line (otlp.h). */
#include <errno.h>
#include <stdio.h>

#include "format/otlp.h"

int cuptrace_otlp_opts_set(struct cuptrace_otlp_opts *o, enum cuptrace_setting_id id,
                           const struct cuptrace_setting_value *v)
{
	switch (id) {
	case CUPTRACE_SET_OTLP_URL:
		o->url = v->s;
		return 0;
	case CUPTRACE_SET_OTLP_SERVICE:
		o->service = v->s;
		return 0;
	case CUPTRACE_SET_OTLP_TRACE_PER:
		o->trace_per = v->s;
		return 0;
	case CUPTRACE_SET_OTLP_BATCH:
		o->batch_spans = (size_t)v->i;
		return 0;
	case CUPTRACE_SET_OTLP_INTERVAL:
		o->interval_ms = (int)v->i;
		return 0;
	case CUPTRACE_SET_OTLP_WINDOW:
		o->window_ms = (int)v->i;
		return 0;
	case CUPTRACE_SET_OTLP_TIMEOUT:
		o->http.timeout_ms = (int)v->i;
		return 0;
	default:
		return -ENOENT;
	}
}

void cuptrace_otlp_stats_line(char *buf, size_t n, const char *url,
                              const struct cuptrace_otlp_stats *st)
{
	snprintf(buf, n,
	         "OTLP %s: %llu spans: %llu sent in %llu requests (%llu bytes), %llu dropped; "
	         "%llu failed requests, %llu retries",
	         url && *url ? url : "(callback)", (unsigned long long)st->spans,
	         (unsigned long long)st->spans_sent,
	         (unsigned long long)(st->requests - st->requests_failed),
	         (unsigned long long)st->bytes_sent, (unsigned long long)st->spans_dropped,
	         (unsigned long long)st->requests_failed, (unsigned long long)st->retries);
}
