/* GPU busy time: the union of the GPU's work intervals (kernels, copies, memsets), so that
 * ranges drawn on GPU rows (annotations, syncs) and concurrent streams are not counted twice. */
#include "stats/busy.h"
#include "stats/family.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

int cuptrace_busy_is_work(const char *c)
{
	/* cuptrace: kernel, memcpy, memset, graph (a whole CUDA graph launch, --cuda-graphs
	 * graph). torch.profiler since 2022: kernel, gpu_memcpy, gpu_memset; its 2021 format:
	 * Kernel, Memcpy, Memset. MTIA: mtia_ccp_events. */
	static const char *const work[] = {"kernel",     "memcpy",     "memset",         "graph",
	                                   "gpu_memcpy", "gpu_memset", "mtia_ccp_events"};
	for (size_t i = 0; c && i < sizeof(work) / sizeof(work[0]); i++)
		if (!strcasecmp(c, work[i]))
			return 1;
	return 0;
}

int cuptrace_busy_family(const char *c)
{
	if (!c)
		return -1;
	if (!strcmp(c, "kernel") || !strcmp(c, "graph"))
		return CUPTRACE_FAM_KERNEL;
	if (!strcmp(c, "memcpy") || !strcmp(c, "memset") || !strcmp(c, "gpu_memcpy") ||
	    !strcmp(c, "gpu_memset"))
		return CUPTRACE_FAM_COPY;
	return -1;
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_busy_span *a = pa, *b = pb;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* busy += end - start; 1 on overflow. */
static int add_len(int64_t *busy, int64_t start, int64_t end)
{
	int64_t len;
	return __builtin_sub_overflow(end, start, &len) || __builtin_add_overflow(*busy, len, busy);
}

int64_t cuptrace_busy_union(struct cuptrace_busy_span *v, size_t n)
{
	int64_t busy = 0, start = 0, end = 0;
	int open = 0;

	if (!n)
		return 0; /* qsort(NULL, 0) is undefined */
	size_t s = 1;
	while (s < n && v[s - 1].ts <= v[s].ts)
		s++;
	if (s < n) /* one stream's work comes in time order: usually nothing to sort */
		qsort(v, n, sizeof(*v), span_cmp);
	for (size_t i = 0; i < n; i++) {
		int64_t ts = v[i].ts, e;
		if (__builtin_add_overflow(ts, v[i].dur < 0 ? 0 : v[i].dur, &e))
			e = INT64_MAX;
		if (open && ts <= end) {
			if (e > end)
				end = e;
			continue;
		}
		if (open && add_len(&busy, start, end))
			return INT64_MAX;
		start = ts;
		end = e;
		open = 1;
	}
	if (open && add_len(&busy, start, end))
		return INT64_MAX;
	return busy;
}
