/* A record consumer: whatever takes the stream a tracing session produces (CUPTI's records and
 * what comes with them: host thread names, metadata, drop counts, NVTX start/end ids, GPU
 * metrics). Two implement it today: the converter (convert.h, records -> events -> a sink) and
 * the capture writer (capture.h, records as they are -> a .cupti file). The injected library
 * (src/inject) holds its consumers in a list and calls them through these operations only, so a
 * further one (a host sampler's side output, a live view) plugs in without a new branch there.
 *
 * Every operation returns 0 or a negative errno (the first write error; later calls may keep
 * returning it). An operation left NULL is one the consumer has no use for: the
 * cuptrace_consumer_* helpers below skip it and return 0. records is required.
 *
 * Threading: a consumer is used by one thread at a time, and nothing in it is locked. In the
 * injected library that is the writer thread while the session runs (records, thread_name,
 * nvtx_startend, dropped, gpu_*, flush, and meta for a window's file), then the finishing thread
 * once the writer thread was joined (the last gpu_* and meta, finish, destroy).
 *
 * Ownership: whoever made the consumer (cuptrace_converter_consumer, cuptrace_capture_open)
 * owns it and ends it: finish once (nothing is called after it but destroy), then destroy, which
 * frees it; destroy without finish gives up on it (a file being discarded). The converter's
 * consumer borrows its sink: finishing and destroying the sink stay with the sink's owner.
 * Pointers passed to an operation are borrowed for the call. */
#ifndef CUPTRACE_CONVERT_CONSUMER_H
#define CUPTRACE_CONVERT_CONSUMER_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "convert/convert.h"

struct cuptrace_consumer_ops {
	/* One CUPTI buffer's records (or a batch made like one: call stacks, kept runtime calls,
	 * markers cuptrace draws), in buffer order; sizes[i] is recs[i]'s size in bytes. */
	int (*records)(void *self, const CUpti_Activity *const *recs, const uint32_t *sizes,
	               size_t n);
	/* A host thread's name, before the records that name the thread. */
	int (*thread_name)(void *self, int64_t tid, const char *name);
	/* Trace metadata; a later value for a key replaces the earlier one. */
	int (*meta)(void *self, const char *key, const char *value);
	/* Records lost before they came here (CUPTI's count, cuptrace's): cumulative values. */
	int (*dropped)(void *self, uint64_t cupti, uint64_t cuptrace);
	/* Ids of NVTX start/end ranges (not push/pop), before the records that use them. */
	int (*nvtx_startend)(void *self, const uint64_t *ids, size_t n);
	/* GPU hardware metrics: a GPU's configuration, then its samples (convert.h). */
	int (*gpu_metrics)(void *self, const struct cuptrace_gm_config *cfg);
	int (*gpu_samples)(void *self, uint32_t device, size_t nmetrics, const uint64_t *times,
	                   const double *values, size_t n);
	/* About once a flush period: what it holds goes to its file, so that a SIGKILL of the
	 * process loses at most that much. */
	int (*flush)(void *self);
	/* The end of the stream: everything held back, the final metadata, the file closed (a
	 * sink the consumer borrows is not finished). */
	int (*finish)(void *self);
	/* Frees the consumer (finished or not). */
	void (*destroy)(void *self);
};

struct cuptrace_consumer {
	const struct cuptrace_consumer_ops *ops; /* NULL: no consumer (the helpers do nothing) */
	void *self;
};

static inline int cuptrace_consumer_records(const struct cuptrace_consumer *c,
                                            const CUpti_Activity *const *recs,
                                            const uint32_t *sizes, size_t n)
{
	return c->ops ? c->ops->records(c->self, recs, sizes, n) : 0;
}

static inline int cuptrace_consumer_thread_name(const struct cuptrace_consumer *c, int64_t tid,
                                                const char *name)
{
	return c->ops && c->ops->thread_name ? c->ops->thread_name(c->self, tid, name) : 0;
}

static inline int cuptrace_consumer_meta(const struct cuptrace_consumer *c, const char *key,
                                         const char *value)
{
	return c->ops && c->ops->meta ? c->ops->meta(c->self, key, value) : 0;
}

static inline int cuptrace_consumer_dropped(const struct cuptrace_consumer *c, uint64_t cupti,
                                            uint64_t cuptrace)
{
	return c->ops && c->ops->dropped ? c->ops->dropped(c->self, cupti, cuptrace) : 0;
}

static inline int cuptrace_consumer_nvtx_startend(const struct cuptrace_consumer *c,
                                                  const uint64_t *ids, size_t n)
{
	return c->ops && c->ops->nvtx_startend ? c->ops->nvtx_startend(c->self, ids, n) : 0;
}

static inline int cuptrace_consumer_gpu_metrics(const struct cuptrace_consumer *c,
                                                const struct cuptrace_gm_config *cfg)
{
	return c->ops && c->ops->gpu_metrics ? c->ops->gpu_metrics(c->self, cfg) : 0;
}

static inline int cuptrace_consumer_gpu_samples(const struct cuptrace_consumer *c, uint32_t device,
                                                size_t nmetrics, const uint64_t *times,
                                                const double *values, size_t n)
{
	return c->ops && c->ops->gpu_samples
	           ? c->ops->gpu_samples(c->self, device, nmetrics, times, values, n)
	           : 0;
}

static inline int cuptrace_consumer_flush(const struct cuptrace_consumer *c)
{
	return c->ops && c->ops->flush ? c->ops->flush(c->self) : 0;
}

static inline int cuptrace_consumer_finish(const struct cuptrace_consumer *c)
{
	return c->ops && c->ops->finish ? c->ops->finish(c->self) : 0;
}

/* Destroys the consumer and empties *c. */
static inline void cuptrace_consumer_destroy(struct cuptrace_consumer *c)
{
	if (c->ops && c->ops->destroy)
		c->ops->destroy(c->self);
	c->ops = NULL;
	c->self = NULL;
}

/* finish, then destroy: the error of finish. */
static inline int cuptrace_consumer_close(struct cuptrace_consumer *c)
{
	int err = cuptrace_consumer_finish(c);
	cuptrace_consumer_destroy(c);
	return err;
}

/* The converter as a consumer: it owns the converter from here on (its destroy frees it), which
 * stays usable through its own functions (counts) until then. The capture writer is made as a
 * consumer (cuptrace_capture_open, capture.h). */
struct cuptrace_converter;
struct cuptrace_consumer cuptrace_converter_consumer(struct cuptrace_converter *c);

#endif
