/* The OTLP sink's options by name (one parser for the command line and the injected library's
 * environment) and its summary line (otlp.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/otlp.h"

static int number(const char *v, long long min, long long max, long long *out)
{
	char *end;
	errno = 0;
	long long x = v && *v ? strtoll(v, &end, 10) : 0;
	if (!v || !*v || errno || *end || x < min || x > max)
		return -EINVAL;
	*out = x;
	return 0;
}

int cuptrace_otlp_opts_set(struct cuptrace_otlp_opts *o, const char *key, const char *value,
                           const char **range)
{
	static const struct {
		const char *key, *range;
		long long min, max;
	} nums[] = {
	    {"batch", "a span count from 1 to 65536", 1, 65536},
	    {"interval_ms", "milliseconds, 1 to 3600000", 1, 3600000},
	    {"window_ms", "milliseconds, 1 to 3600000", 1, 3600000},
	    {"timeout_ms", "milliseconds, 1 to 600000", 1, 600000},
	};
	const char *dummy;
	range = range ? range : &dummy;
	*range = "";
	if (!strcmp(key, "url") || !strcmp(key, "service") || !strcmp(key, "trace_per")) {
		if (!value || !*value) {
			*range = "a non-empty string";
			return -EINVAL;
		}
		if (!strcmp(key, "url"))
			o->url = value;
		else if (!strcmp(key, "service"))
			o->service = value;
		else
			o->trace_per = value;
		return 0;
	}
	for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
		if (strcmp(key, nums[i].key))
			continue;
		long long x;
		*range = nums[i].range;
		if (number(value, nums[i].min, nums[i].max, &x))
			return -EINVAL;
		if (i == 0)
			o->batch_spans = (size_t)x;
		else if (i == 1)
			o->interval_ms = (int)x;
		else if (i == 2)
			o->window_ms = (int)x;
		else
			o->http.timeout_ms = (int)x;
		return 0;
	}
	return -ENOENT;
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
