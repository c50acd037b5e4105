/* Device memory: allocation and free marks and pool events on a GPU's "Memory allocations"
 * track, and its "Device memory in use" counter, summed in time order behind a watermark. */
#include "convert/conv_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *mem_kind(uint32_t k)
{
	static const char *const n[] = {"unknown", "pageable", "pinned",        "device",
	                                "array",   "managed",  "device static", "managed static"};
	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "unknown";
}

static uint64_t gpu_child(struct cuptrace_converter *c, uint32_t dev, int counter)
{
	struct gpu *g = &c->gpus[dev % MAX_GPUS];
	conv_declare_gpu(c, dev);
	if (counter && !g->mem_uuid) {
		g->mem_uuid = conv_uuid(c, U_COUNTER, dev);
		struct cuptrace_track t = {
		    .uuid = g->mem_uuid,
		    .kind = CUPTRACE_TRACK_COUNTER,
		    .parent_uuid = g->uuid,
		    .pid = c->pid,
		    .name = "Device memory in use",
		    .sort_rank = -2,
		    .unit = CUPTRACE_UNIT_BYTES,
		};
		if (!c->err)
			c->err = c->sink->ops->track(c->sink, &t);
	}
	if (counter)
		return g->mem_uuid;
	uint64_t u = conv_uuid(c, U_COUNTER, 0x100000u + dev);
	if (!c->alloc_track_declared[dev % MAX_GPUS]) {
		c->alloc_track_declared[dev % MAX_GPUS] = 1;
		struct cuptrace_track t = {
		    .uuid = u,
		    .kind = CUPTRACE_TRACK_SLICES,
		    .parent_uuid = g->uuid,
		    .pid = c->pid,
		    .name = "Memory allocations",
		    .sort_rank = -1,
		};
		if (!c->err)
			c->err = c->sink->ops->track(c->sink, &t);
	}
	return u;
}

int conv_memory(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityMemory4 *m = (const CUpti_ActivityMemory4 *)r;
	if (!m->timestamp)
		return 0;
	int alloc = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
	if (!alloc && m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
		return 0;
	/* Module globals (__device__ variables of every library loaded: a PyTorch run has over a
	 * thousand) are not allocations the program made: counted, not drawn. */
	if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC ||
	    m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC) {
		c->counts.static_memory++;
		return 0;
	}
	int64_t ts = conv_rel(c, m->timestamp);
	uint32_t dev = m->deviceId;
	/* Not the static ones above: a PyTorch rank on GPU 1 reported module globals on GPU 0 too
	 * (tests/data/ddp2_rank1.cupti), where it had no context. */
	conv_gpu_used(c, dev);
	uint64_t track = gpu_child(c, dev, 0);
	size_t na = 0;
	struct cuptrace_arg *A = c->args;
	A[na++] = (struct cuptrace_arg){.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = m->bytes};
	A[na++] = (struct cuptrace_arg){
	    .key = "address", .type = CUPTRACE_ARG_POINTER, .v.u = m->address};
	A[na++] = (struct cuptrace_arg){
	    .key = "memory_kind", .type = CUPTRACE_ARG_STRING, .v.s = mem_kind(m->memoryKind)};
	A[na++] =
	    (struct cuptrace_arg){.key = "async", .type = CUPTRACE_ARG_BOOL, .v.b = !!m->isAsync};
	if (m->memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID)
		A[na++] = (struct cuptrace_arg){.key = "pool",
		                                .type = CUPTRACE_ARG_POINTER,
		                                .v.u = m->memoryPoolConfig.address};
	char name[64];
	snprintf(name, sizeof(name), "%s %s", alloc ? "alloc" : "free", mem_kind(m->memoryKind));
	struct cuptrace_instant e = {
	    .track_uuid = track,
	    .ts = ts,
	    .name = name,
	    .category = "memory",
	    .correlation_id = m->correlationId,
	    .args = A,
	    .nargs = na,
	};
	if (!c->err)
		c->err = c->sink->ops->instant(c->sink, &e);
	/* Device memory in use: cudaMalloc-style device allocations, pools included. */
	if (m->memoryKind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
		if (CUPTRACE_GROW(c->memev, c->memev_cap, c->nmemev + 1))
			return c->err = -ENOMEM;
		c->memev[c->nmemev++] = (struct memev){
		    .ts = ts, .dev = dev, .delta = alloc ? (int64_t)m->bytes : -(int64_t)m->bytes};
	}
	return c->err;
}

static int memev_cmp(const void *a, const void *b)
{
	const struct memev *x = a, *y = b;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

int conv_memory_flush(struct cuptrace_converter *c, int all)
{
	if (!c->nmemev)
		return c->err;
	qsort(c->memev, c->nmemev, sizeof(*c->memev), memev_cmp);
	/* An allocation older than the watermark behind the newest API call can no longer be
	 * overtaken by an earlier one. */
	int64_t mark = c->latest_ts - CONV_WATERMARK_NS;
	size_t i = 0;
	for (; i < c->nmemev && !c->err; i++) {
		struct memev *e = &c->memev[i];
		if (!all && e->ts > mark)
			break;
		struct gpu *g = &c->gpus[e->dev % MAX_GPUS];
		uint64_t cu = gpu_child(c, e->dev, 1);
		g->mem_used += e->delta;
		struct cuptrace_counter v = {.track_uuid = cu, .ts = e->ts, .i = g->mem_used};
		if (!c->err)
			c->err = c->sink->ops->counter(c->sink, &v);
	}
	memmove(c->memev, c->memev + i, (c->nmemev - i) * sizeof(*c->memev));
	c->nmemev -= i;
	return c->err;
}

int conv_memory_pool(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityMemoryPool3 *p = (const CUpti_ActivityMemoryPool3 *)r;
	if (!p->timestamp)
		return 0;
	static const char *const ops[] = {"pool ?", "pool created", "pool destroyed",
	                                  "pool trimmed"};
	uint32_t op = p->memoryPoolOperationType;
	size_t na = 0;
	struct cuptrace_arg *A = c->args;
	A[na++] =
	    (struct cuptrace_arg){.key = "pool", .type = CUPTRACE_ARG_POINTER, .v.u = p->address};
	A[na++] = (struct cuptrace_arg){.key = "size", .type = CUPTRACE_ARG_UINT, .v.u = p->size};
	A[na++] = (struct cuptrace_arg){
	    .key = "release_threshold", .type = CUPTRACE_ARG_UINT, .v.u = p->releaseThreshold};
	A[na++] = (struct cuptrace_arg){
	    .key = "utilized", .type = CUPTRACE_ARG_UINT, .v.u = p->utilizedSize};
	struct cuptrace_instant e = {
	    .track_uuid = gpu_child(c, p->deviceId, 0),
	    .ts = conv_rel(c, p->timestamp),
	    .name = ops[op < 4 ? op : 0],
	    .category = "memory",
	    .correlation_id = p->correlationId,
	    .args = A,
	    .nargs = na,
	};
	if (!c->err)
		c->err = c->sink->ops->instant(c->sink, &e);
	return c->err;
}

void conv_memory_free(struct cuptrace_converter *c)
{
	free(c->memev);
}
