/* The converter's public entry points (see convert.h): its life cycle, and the switch that hands
 * each record of a batch to its family (conv_state.h lists the files and their layers). */
#include "convert/conv_state.h"
#include "convert/consumer.h"
#include "convert/stackrec.h"

#include <stdlib.h>

int cuptrace_converter_add(struct cuptrace_converter *c, const CUpti_Activity *const *recs,
                           size_t n)
{
	if (c->err)
		return c->err;
	/* Call stacks come in batches of their own (inject/stacks.c, or a capture's item): they
	 * are no CUPTI buffer, so they leave the batch bookkeeping alone. */
	if (n && cuptrace_stackrec_kind((uint32_t)recs[0]->kind)) {
		for (size_t i = 0; i < n && !c->err; i++)
			if ((uint32_t)recs[i]->kind == CUPTRACE_REC_SAMPLES)
				conv_samples_record(c, recs[i]);
			else if (cuptrace_stackrec_kind((uint32_t)recs[i]->kind))
				conv_stacks_record(c, recs[i]);
		return c->err;
	}
	c->batch++;
	/* Names and devices first: they decide how tracks are named when first declared. */
	for (size_t i = 0; i < n; i++) {
		switch (recs[i]->kind) {
		case CUPTI_ACTIVITY_KIND_DEVICE:
			conv_device(c, (const CUpti_ActivityDevice5 *)recs[i]);
			break;
		case CUPTI_ACTIVITY_KIND_NAME:
			conv_name(c, (const CUpti_ActivityName *)recs[i]);
			break;
		case CUPTI_ACTIVITY_KIND_CONTEXT:
			conv_context(c, (const CUpti_ActivityContext3 *)recs[i]);
			break;
		default:
			break;
		}
	}
	if (conv_gpu_batch_begin(c, n))
		return c->err;
	for (size_t i = 0; i < n && !c->err; i++) {
		const CUpti_Activity *r = recs[i];
		c->counts.records++;
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_RUNTIME:
		case CUPTI_ACTIVITY_KIND_DRIVER:
		case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
			conv_api_record(c, (const CUpti_ActivityAPI *)r);
			break;
		case CUPTI_ACTIVITY_KIND_KERNEL:
		case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		case CUPTI_ACTIVITY_KIND_MEMCPY:
		case CUPTI_ACTIVITY_KIND_MEMCPY2:
		case CUPTI_ACTIVITY_KIND_MEMSET:
		case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
		case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE:
			/* Collected here, drawn below once the batch's API calls are in. */
			conv_gpu_work(c, r);
			break;
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
			conv_gpu_sync(c, (const CUpti_ActivitySynchronization2 *)r);
			break;
		case CUPTI_ACTIVITY_KIND_MARKER:
			c->counts.markers++;
			conv_marker(c, r);
			break;
		case CUPTI_ACTIVITY_KIND_MARKER_DATA:
			conv_marker_data(c, r);
			break;
		case CUPTI_ACTIVITY_KIND_MEMORY2:
			c->counts.memory++;
			conv_memory(c, r);
			break;
		case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
			conv_memory_pool(c, r);
			break;
		case CUPTI_ACTIVITY_KIND_OVERHEAD:
			c->counts.overheads++;
			conv_overhead(c, r);
			break;
		default:
			c->counts.other++;
			break;
		}
	}
	conv_gpu_batch_end(c);
	conv_memory_flush(c, 0);
	conv_corr_batch_end(c);
	return c->err;
}

struct cuptrace_converter *cuptrace_converter_new(struct cuptrace_sink *sink,
                                                  const struct cuptrace_trace_info *info,
                                                  const struct cuptrace_convert_opts *opts)
{
	struct cuptrace_converter *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sink = sink;
	c->opts.max_pending = 1u << 16;
	if (opts && opts->sz >= sizeof(*opts)) {
		c->opts.driver_all = opts->driver_all;
		c->opts.runtime_all = opts->runtime_all;
		c->opts.overhead_per_thread = opts->overhead_per_thread;
		if (opts->max_pending)
			c->opts.max_pending = opts->max_pending;
	}
	c->pid = info->pid;
	c->start = info->start_boottime_ns;
	conv_core_init(c);
	conv_gpu_init(c);
	conv_nvtx_init(c);
	conv_meta_init(c);
	conv_view_init(c);
	if (conv_corr_init(c) || conv_api_init(c)) {
		cuptrace_converter_free(c);
		return NULL;
	}
	conv_core_begin(c, info);
	return c;
}

void cuptrace_converter_set_resolver(struct cuptrace_converter *c, cuptrace_resolve_fn fn,
                                     void *ctx)
{
	c->resolve = fn;
	c->resolve_ctx = ctx;
}

int cuptrace_converter_thread_name(struct cuptrace_converter *c, int64_t tid, const char *name)
{
	return conv_thread_name(c, tid, name);
}

int cuptrace_converter_nvtx_startend(struct cuptrace_converter *c, const uint64_t *ids, size_t n)
{
	return conv_nvtx_startend(c, ids, n);
}

void cuptrace_converter_dropped(struct cuptrace_converter *c, uint64_t cupti, uint64_t cuptrace)
{
	c->dropped_cupti = cupti;
	c->dropped_cuptrace = cuptrace;
}

void cuptrace_converter_meta(struct cuptrace_converter *c, const char *key, const char *value)
{
	if (key && *key && value)
		conv_meta_set(c, key, value, 0, 0);
}

int cuptrace_converter_gpu_metrics(struct cuptrace_converter *c,
                                   const struct cuptrace_gm_config *cfg)
{
	return conv_gpumetrics_config(c, cfg);
}

int cuptrace_converter_gpu_samples(struct cuptrace_converter *c, uint32_t device, size_t nmetrics,
                                   const uint64_t *times, const double *values, size_t n)
{
	return conv_gpumetrics_samples(c, device, nmetrics, times, values, n);
}

int cuptrace_converter_finish(struct cuptrace_converter *c)
{
	conv_gpumetrics_finish(c);
	conv_gpu_finish(c);
	conv_corr_finish(c);
	conv_memory_flush(c, 1);
	return conv_meta_finish(c);
}

const struct cuptrace_convert_counts *cuptrace_converter_counts(const struct cuptrace_converter *c)
{
	return &c->counts;
}

void cuptrace_converter_free(struct cuptrace_converter *c)
{
	if (!c)
		return;
	conv_corr_free(c);
	conv_api_free(c);
	conv_gpu_free(c);
	conv_nvtx_free(c);
	conv_memory_free(c);
	conv_gpumetrics_free(c);
	conv_meta_free(c);
	conv_view_free(c);
	conv_stacks_free(c);
	conv_core_free(c);
	free(c);
}

/* ---- the converter as a record consumer (consumer.h) ---- */

static int cons_records(void *self, const CUpti_Activity *const *recs, const uint32_t *sizes,
                        size_t n)
{
	(void)sizes; /* the converter reads each record by its kind's struct */
	return cuptrace_converter_add(self, recs, n);
}

static int cons_thread_name(void *self, int64_t tid, const char *name)
{
	return cuptrace_converter_thread_name(self, tid, name);
}

static int cons_meta(void *self, const char *key, const char *value)
{
	cuptrace_converter_meta(self, key, value);
	return 0;
}

static int cons_dropped(void *self, uint64_t cupti, uint64_t cuptrace)
{
	cuptrace_converter_dropped(self, cupti, cuptrace);
	return 0;
}

static int cons_nvtx_startend(void *self, const uint64_t *ids, size_t n)
{
	return cuptrace_converter_nvtx_startend(self, ids, n);
}

static int cons_gpu_metrics(void *self, const struct cuptrace_gm_config *cfg)
{
	return cuptrace_converter_gpu_metrics(self, cfg);
}

static int cons_gpu_samples(void *self, uint32_t device, size_t nmetrics, const uint64_t *times,
                            const double *values, size_t n)
{
	return cuptrace_converter_gpu_samples(self, device, nmetrics, times, values, n);
}

/* The sink's periodic work (chunks handed to its file), where it has any. */
static int cons_flush(void *self)
{
	struct cuptrace_converter *c = self;
	return c->sink && c->sink->ops->tick ? c->sink->ops->tick(c->sink) : 0;
}

static int cons_finish(void *self)
{
	return cuptrace_converter_finish(self);
}

static void cons_destroy(void *self)
{
	cuptrace_converter_free(self);
}

static const struct cuptrace_consumer_ops converter_consumer_ops = {.records = cons_records,
                                                                    .thread_name = cons_thread_name,
                                                                    .meta = cons_meta,
                                                                    .dropped = cons_dropped,
                                                                    .nvtx_startend =
                                                                        cons_nvtx_startend,
                                                                    .gpu_metrics = cons_gpu_metrics,
                                                                    .gpu_samples = cons_gpu_samples,
                                                                    .flush = cons_flush,
                                                                    .finish = cons_finish,
                                                                    .destroy = cons_destroy};

struct cuptrace_consumer cuptrace_converter_consumer(struct cuptrace_converter *c)
{
	return (struct cuptrace_consumer){.ops = c ? &converter_consumer_ops : NULL, .self = c};
}
