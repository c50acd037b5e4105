/* A capture's META items and the converter made from them (capture_conv.h). */
#include "convert/capture_conv.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int cuptrace_capture_meta_add(struct cuptrace_capture_meta *m, const char *k, const char *v)
{
	if (m->n == CUPTRACE_CAPTURE_META_MAX)
		return 0;
	char *key = strdup(k), *val = strdup(v);
	if (!key || !val) {
		free(key);
		free(val);
		return -ENOMEM;
	}
	m->keys[m->n] = key;
	m->vals[m->n++] = val;
	return 0;
}

void cuptrace_capture_meta_free(struct cuptrace_capture_meta *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->keys[i]);
		free(m->vals[i]);
	}
	m->n = 0;
}

static const char *meta_get(const struct cuptrace_capture_meta *m, const char *k, const char *def)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->keys[i], k))
			return m->vals[i];
	return def;
}

struct cuptrace_converter *cuptrace_capture_converter_new(const struct cuptrace_capture_meta *m,
                                                          struct cuptrace_sink *sink,
                                                          const struct cuptrace_convert_opts *o,
                                                          struct cuptrace_capture_reader *r)
{
	struct cuptrace_meta meta[CUPTRACE_CAPTURE_META_MAX];
	for (size_t i = 0; i < m->n; i++)
		meta[i] = (struct cuptrace_meta){.key = m->keys[i], .s = m->vals[i]};
	struct cuptrace_trace_info info = {
	    .pid = (int32_t)atoi(meta_get(m, "pid", "1")),
	    .process_name = meta_get(m, "process_name", "process"),
	    .hostname = meta_get(m, "hostname", "?"),
	    .start_realtime_ns = strtoll(meta_get(m, "start_realtime_ns", "0"), NULL, 10),
	    .start_boottime_ns = strtoll(meta_get(m, "start_boottime_ns", "0"), NULL, 10),
	    .meta = meta,
	    .nmeta = m->n,
	};
	info.trace_uuid_hi = (uint64_t)info.start_realtime_ns ^ ((uint64_t)info.pid << 32);
	info.trace_uuid_lo = (uint64_t)info.start_boottime_ns * 0x9e3779b97f4a7c15ull;
	struct cuptrace_converter *c = cuptrace_converter_new(sink, &info, o);
	if (c)
		cuptrace_converter_set_resolver(c, cuptrace_capture_resolve, r);
	return c;
}
