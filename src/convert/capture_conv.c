/* A capture's META items, the converter made from them and the replay's callbacks into it
 * (capture_conv.h). */
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

int cuptrace_capture_conv_start(struct cuptrace_capture_conv *c)
{
	if (c->conv)
		return 0;
	const struct cuptrace_capture_meta *m = &c->meta;
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
	c->opts.sz = sizeof(c->opts);
	c->conv = cuptrace_converter_new(c->sink, &info, &c->opts);
	if (!c->conv)
		return -ENOMEM;
	cuptrace_converter_set_resolver(c->conv, cuptrace_capture_resolve, c->reader);
	return 0;
}

void cuptrace_capture_conv_free(struct cuptrace_capture_conv *c)
{
	cuptrace_converter_free(c->conv);
	c->conv = NULL;
	cuptrace_capture_meta_free(&c->meta);
}

/* ---- the replay's callbacks (ctx: the struct cuptrace_capture_conv) ---- */

static int on_meta(void *ctx, const char *k, const char *v)
{
	struct cuptrace_capture_conv *c = ctx;
	/* META after the records: what the run learnt at its end (convert.h). */
	if (c->conv) {
		cuptrace_converter_meta(c->conv, k, v);
		return 0;
	}
	return cuptrace_capture_meta_add(&c->meta, k, v);
}

static int on_thread(void *ctx, int64_t tid, const char *name)
{
	struct cuptrace_capture_conv *c = ctx;
	int r = cuptrace_capture_conv_start(c);
	return r ? r : cuptrace_converter_thread_name(c->conv, tid, name);
}

static int on_records(void *ctx, const CUpti_Activity *const *recs, size_t n)
{
	struct cuptrace_capture_conv *c = ctx;
	int r = cuptrace_capture_conv_start(c);
	return r ? r : cuptrace_converter_add(c->conv, recs, n);
}

static int on_startend(void *ctx, const uint64_t *ids, size_t n)
{
	struct cuptrace_capture_conv *c = ctx;
	int r = cuptrace_capture_conv_start(c);
	return r ? r : cuptrace_converter_nvtx_startend(c->conv, ids, n);
}

int cuptrace_capture_conv_dropped(void *ctx, uint64_t cupti, uint64_t cuptrace)
{
	struct cuptrace_capture_conv *c = ctx;
	int r = cuptrace_capture_conv_start(c);
	if (!r)
		cuptrace_converter_dropped(c->conv, cupti, cuptrace);
	return r;
}

static int on_gpu_metrics(void *ctx, const struct cuptrace_gm_config *cfg)
{
	struct cuptrace_capture_conv *c = ctx;
	int r = cuptrace_capture_conv_start(c);
	return r ? r : cuptrace_converter_gpu_metrics(c->conv, cfg);
}

static int on_gpu_samples(void *ctx, uint32_t dev, size_t nmetrics, const uint64_t *times,
                          const double *values, size_t n)
{
	struct cuptrace_capture_conv *c = ctx;
	int r = cuptrace_capture_conv_start(c);
	return r ? r : cuptrace_converter_gpu_samples(c->conv, dev, nmetrics, times, values, n);
}

void cuptrace_capture_conv_ops(struct cuptrace_capture_conv *c, struct cuptrace_capture_ops *ops)
{
	*ops = (struct cuptrace_capture_ops){
	    .ctx = c,
	    .meta = on_meta,
	    .thread = on_thread,
	    .records = on_records,
	    .dropped = cuptrace_capture_conv_dropped,
	    .nvtx_startend = on_startend,
	    .gpu_metrics = on_gpu_metrics,
	    .gpu_samples = on_gpu_samples,
	};
}
