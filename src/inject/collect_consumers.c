/* The session's consumers as one consumer (collect_state.h, convert/consumer.h): the writer
 * calls one thing, and a consumer added to the list (the trace's file today; a host sampler's
 * side output or a live view later) gets the whole stream without a new branch in the writer.
 *
 * Threading: as the members' (the writer thread, then the finishing thread). The list is set
 * while the session starts, before the writer thread runs. */
#include <errno.h>

#include "inject/collect_state.h"

int collect_consumers_add(struct collect_consumers *l, struct cuptrace_consumer *c)
{
	if (l->n == COLLECT_MAX_CONSUMERS)
		return -ENOSPC;
	l->c[l->n++] = c;
	return 0;
}

/* Every member's result folded into the first error. */
#define EACH(l, call)                                                                              \
	do {                                                                                       \
		int err_ = 0;                                                                      \
		for (size_t i_ = 0; i_ < (l)->n; i_++) {                                           \
			const struct cuptrace_consumer *c = (l)->c[i_];                            \
			int e_ = (call);                                                           \
			err_ = err_ ? err_ : e_;                                                   \
		}                                                                                  \
		return err_;                                                                       \
	} while (0)

static int all_records(void *self, const CUpti_Activity *const *recs, const uint32_t *sizes,
                       size_t n)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_records(c, recs, sizes, n));
}

static int all_thread_name(void *self, int64_t tid, const char *name)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_thread_name(c, tid, name));
}

static int all_meta(void *self, const char *key, const char *value)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_meta(c, key, value));
}

static int all_dropped(void *self, uint64_t cupti, uint64_t cuptrace)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_dropped(c, cupti, cuptrace));
}

static int all_nvtx_startend(void *self, const uint64_t *ids, size_t n)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_nvtx_startend(c, ids, n));
}

static int all_gpu_metrics(void *self, const struct cuptrace_gm_config *cfg)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_gpu_metrics(c, cfg));
}

static int all_gpu_samples(void *self, uint32_t device, size_t nmetrics, const uint64_t *times,
                           const double *values, size_t n)
{
	EACH((struct collect_consumers *)self,
	     cuptrace_consumer_gpu_samples(c, device, nmetrics, times, values, n));
}

static int all_flush(void *self)
{
	EACH((struct collect_consumers *)self, cuptrace_consumer_flush(c));
}

static const struct cuptrace_consumer_ops all_ops = {.records = all_records,
                                                     .thread_name = all_thread_name,
                                                     .meta = all_meta,
                                                     .dropped = all_dropped,
                                                     .nvtx_startend = all_nvtx_startend,
                                                     .gpu_metrics = all_gpu_metrics,
                                                     .gpu_samples = all_gpu_samples,
                                                     .flush = all_flush};

struct cuptrace_consumer collect_consumers_as_one(struct collect_consumers *l)
{
	return (struct cuptrace_consumer){.ops = &all_ops, .self = l};
}
