/* NVTX ranges and marks, device memory (allocations and a counter per GPU), memory pools and
 * CUPTI's own overhead. Private to the converter (see convert_internal.h).
 *
 * NVTX: CUPTI reports push/pop and start/end ranges alike (a START and an END record sharing an
 * id). A range whose END closes the innermost open range of the thread it started on nests
 * like a push/pop range and goes on that thread's track; any other (crossing threads, or
 * overlapping) goes on the process's "NVTX ranges" lanes, where overlap is allowed. */
#include "convert/convert_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

/* Per-thread stack of open range ids (few threads use NVTX: a linear search is enough). */
static struct tstack *thread_stack(struct cuptrace_converter *c, int64_t tid)
{
	for (size_t i = 0; i < c->nstacks; i++)
		if (c->stacks[i].tid == tid)
			return &c->stacks[i];
	struct tstack *ns = realloc(c->stacks, (c->nstacks + 1) * sizeof(*ns));
	if (!ns)
		return NULL;
	c->stacks = ns;
	c->stacks[c->nstacks] = (struct tstack){.tid = tid};
	return &c->stacks[c->nstacks++];
}

static void stack_remove(struct tstack *s, uint32_t id, int *was_top)
{
	*was_top = 0;
	for (size_t i = s->n; i-- > 0;) {
		if (s->ids[i] != id)
			continue;
		*was_top = i == s->n - 1;
		memmove(&s->ids[i], &s->ids[i + 1], (s->n - i - 1) * sizeof(uint32_t));
		s->n--;
		return;
	}
}

static struct nvtx_range *range_slot(struct cuptrace_converter *c, uint32_t id, int create)
{
	uint64_t *slot = cuptrace_u64map_get(&c->nvtx_open, id);
	if (slot)
		return &c->nvtx[*slot - 1];
	if (!create)
		return NULL;
	size_t i;
	for (i = 0; i < c->nnvtx && c->nvtx[i].used; i++)
		;
	if (i == c->nnvtx) {
		if (c->nnvtx == c->nvtx_cap) {
			size_t cap = c->nvtx_cap ? c->nvtx_cap * 2 : 64;
			struct nvtx_range *nr = realloc(c->nvtx, cap * sizeof(*nr));
			if (!nr)
				return NULL;
			c->nvtx = nr;
			c->nvtx_cap = cap;
		}
		c->nnvtx++;
	}
	memset(&c->nvtx[i], 0, sizeof(c->nvtx[i]));
	c->nvtx[i].used = 1;
	c->nvtx[i].id = id;
	uint64_t *ns = cuptrace_u64map_put(&c->nvtx_open, id, NULL);
	if (!ns)
		return NULL;
	*ns = i + 1;
	return &c->nvtx[i];
}

static size_t nvtx_args(struct cuptrace_converter *c, uint32_t id, char *colorbuf, size_t n)
{
	uint64_t *slot = cuptrace_u64map_get(&c->nvtx_data, id);
	size_t na = 0;
	if (!slot)
		return 0;
	struct mdata *d = &c->mdatas[*slot - 1];
	if (d->has_color) {
		snprintf(colorbuf, n, "#%06x", d->color & 0xFFFFFFu);
		c->args[na++] = (struct cuptrace_arg){
		    .key = "color", .type = CUPTRACE_ARG_STRING, .v.s = colorbuf};
	}
	if (d->category)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "nvtx_category", .type = CUPTRACE_ARG_UINT, .v.u = d->category};
	/* CUPTI reports a payload of UINT64 0 for attributes without one: a zero payload is not
	 * shown. */
	if (d->payload_kind == CUPTI_METRIC_VALUE_KIND_DOUBLE && d->payload.d != 0)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "payload", .type = CUPTRACE_ARG_DOUBLE, .v.d = d->payload.d};
	else if (d->payload_kind == CUPTI_METRIC_VALUE_KIND_UINT64 && d->payload.u)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "payload", .type = CUPTRACE_ARG_UINT, .v.u = d->payload.u};
	else if (d->payload_kind == CUPTI_METRIC_VALUE_KIND_INT64 && d->payload.i)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "payload", .type = CUPTRACE_ARG_INT, .v.i = d->payload.i};
	return na;
}

static uint64_t async_track(struct cuptrace_converter *c, int64_t *ts, int64_t *dur)
{
	return conv_lane_assign(c, c->nvtx_lanes, &c->nnvtx_lanes, ts, dur, "NVTX ranges",
	                        c->process_uuid, 50);
}

static int emit_range(struct cuptrace_converter *c, struct nvtx_range *rg, uint32_t id,
                      uint64_t track, int64_t start, int64_t dur)
{
	char color[16];
	size_t na = nvtx_args(c, id, color, sizeof(color));
	struct cuptrace_slice sl = {
	    .track_uuid = track,
	    .ts = start,
	    .dur = dur,
	    .name = conv_str(c, rg->name_id),
	    .category = conv_str(c, rg->domain_id),
	    .args = c->args,
	    .nargs = na,
	};
	cuptrace_u64map_del(&c->nvtx_open, id);
	cuptrace_u64map_del(&c->nvtx_data, id);
	rg->used = 0;
	return conv_emit_slice(c, &sl);
}

int conv_marker(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityMarker2 *m = (const CUpti_ActivityMarker2 *)r;
	int64_t tid =
	    m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? (int64_t)m->objectId.pt.threadId : 0;
	if (!m->timestamp)
		return 0;
	int64_t ts = conv_rel(c, m->timestamp);
	const char *name = conv_resolve(c, m->name);
	const char *domain = conv_resolve(c, m->domain);
	char color[16];
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
		size_t na = nvtx_args(c, m->id, color, sizeof(color));
		uint64_t track = tid ? conv_thread_track(c, tid) : c->process_uuid;
		struct cuptrace_instant e = {
		    .track_uuid = track,
		    .ts = ts,
		    .name = name ? name : "(mark)",
		    .category = domain ? domain : "nvtx",
		    .args = c->args,
		    .nargs = na,
		};
		int ret = c->err ? c->err : c->sink->ops->instant(c->sink, &e);
		if (ret && !c->err)
			c->err = ret;
		return c->err;
	}
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		struct nvtx_range *rg = range_slot(c, m->id, 1);
		if (!rg)
			return c->err = -ENOMEM;
		int64_t end_ts = rg->end_seen ? rg->ts : -1;
		rg->ts = ts;
		rg->tid = tid;
		rg->name_id = conv_intern(c, name ? name : "(range)");
		rg->domain_id = conv_intern(c, domain ? domain : "nvtx");
		if (end_ts >= 0) {
			/* Its END came first, from another thread's buffer: a range that crossed
			 * threads, so it goes on the NVTX ranges lanes. */
			int64_t start = ts, dur = end_ts > ts ? end_ts - ts : 0;
			return emit_range(c, rg, m->id, async_track(c, &start, &dur), start, dur);
		}
		struct tstack *s = tid ? thread_stack(c, tid) : NULL;
		if (s) {
			if (s->n == s->cap) {
				size_t cap = s->cap ? s->cap * 2 : 16;
				uint32_t *ni = realloc(s->ids, cap * sizeof(uint32_t));
				if (!ni)
					return c->err = -ENOMEM;
				s->ids = ni;
				s->cap = cap;
			}
			s->ids[s->n++] = m->id;
		}
		return 0;
	}
	if (!(m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END))
		return 0;
	struct nvtx_range *rg = range_slot(c, m->id, 0);
	if (!rg) {
		/* Before its START (another thread's buffer may come later), or the START was
		 * before tracing began: keep the END until the trace ends. */
		rg = range_slot(c, m->id, 1);
		if (!rg)
			return c->err = -ENOMEM;
		rg->end_seen = 1;
		rg->ts = ts;
		rg->tid = tid;
		return 0;
	}
	if (rg->end_seen)
		return 0; /* a second END for one id: ignore */
	int was_top = 0;
	struct tstack *s = rg->tid ? thread_stack(c, rg->tid) : NULL;
	if (s)
		stack_remove(s, m->id, &was_top);
	int64_t start = rg->ts, dur = ts > rg->ts ? ts - rg->ts : 0;
	uint64_t track;
	int startend = cuptrace_u64map_del(&c->nvtx_startend, m->id);
	if (was_top && rg->tid == tid && tid && !startend)
		track = conv_thread_track(c, tid);
	else
		track = async_track(c, &start, &dur);
	return emit_range(c, rg, m->id, track, start, dur);
}

int cuptrace_converter_nvtx_startend(struct cuptrace_converter *c, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!cuptrace_u64map_put(&c->nvtx_startend, ids[i], NULL))
			return c->err = -ENOMEM;
	c->counts.nvtx_startend += n;
	return 0;
}

int conv_marker_data(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityMarkerData2 *d = (const CUpti_ActivityMarkerData2 *)r;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&c->nvtx_data, d->id, &created);
	if (!slot)
		return c->err = -ENOMEM;
	if (created) {
		struct mdata *nm = realloc(c->mdatas, (c->nmdatas + 1) * sizeof(*nm));
		if (!nm)
			return c->err = -ENOMEM;
		c->mdatas = nm;
		*slot = ++c->nmdatas;
	}
	struct mdata *md = &c->mdatas[*slot - 1];
	memset(md, 0, sizeof(*md));
	md->payload_kind = -1;
	md->has_color = !!(d->flags & CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB);
	md->color = d->color;
	md->category = d->category;
	switch (d->payloadKind) {
	case CUPTI_METRIC_VALUE_KIND_DOUBLE:
		md->payload_kind = CUPTI_METRIC_VALUE_KIND_DOUBLE;
		md->payload.d = d->payload.metricValueDouble;
		break;
	case CUPTI_METRIC_VALUE_KIND_UINT64:
		md->payload_kind = CUPTI_METRIC_VALUE_KIND_UINT64;
		md->payload.u = d->payload.metricValueUint64;
		break;
	case CUPTI_METRIC_VALUE_KIND_INT64:
		md->payload_kind = CUPTI_METRIC_VALUE_KIND_INT64;
		md->payload.i = d->payload.metricValueInt64;
		break;
	default:
		break;
	}
	return 0;
}

/* ---- device memory ---- */

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
		if (c->nmemev == c->memev_cap) {
			size_t cap = c->memev_cap ? c->memev_cap * 2 : 256;
			struct memev *nm = realloc(c->memev, cap * sizeof(*nm));
			if (!nm)
				return c->err = -ENOMEM;
			c->memev = nm;
			c->memev_cap = cap;
		}
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

/* Records reach cuptrace within about two flush periods of each other; an allocation older
 * than that behind the newest API call can no longer be overtaken by an earlier one. */
#define MEM_WATERMARK_NS 3000000000ll

int conv_memory_flush(struct cuptrace_converter *c, int all)
{
	if (!c->nmemev)
		return c->err;
	qsort(c->memev, c->nmemev, sizeof(*c->memev), memev_cmp);
	int64_t mark = c->latest_ts - MEM_WATERMARK_NS;
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

/* ---- CUPTI's own overhead: one lanes track per process, so it never splits API slices ---- */

static const char *overhead_name(uint32_t k)
{
	switch (k) {
	case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
		return "overhead: JIT compile";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
		return "overhead: CUPTI buffer flush";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
		return "overhead: CUPTI instrumentation";
	case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
		return "overhead: CUPTI resources";
	case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
		return "overhead: module loading";
	case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
		return "overhead: lazy function loading";
	case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
		return "overhead: command buffer full";
	case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
		return "overhead: activity buffer request";
	case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
		return "overhead: UVM activity init";
	default:
		return "overhead";
	}
}

/* CUPTI's overhead goes next to the thread it happened on: a track "CUPTI overhead: <thread>"
 * per thread (its own lanes, so it never splits the thread's API slices), or one for the
 * process when CUPTI names no thread. */
static struct ovh_track *overhead_track(struct cuptrace_converter *c, int64_t tid)
{
	for (size_t i = 0; i < c->novh; i++)
		if (c->ovh[i].tid == tid)
			return &c->ovh[i];
	struct ovh_track *n = realloc(c->ovh, (c->novh + 1) * sizeof(*n));
	if (!n)
		return NULL;
	c->ovh = n;
	memset(&c->ovh[c->novh], 0, sizeof(c->ovh[0]));
	c->ovh[c->novh].tid = tid;
	return &c->ovh[c->novh++];
}

int conv_overhead(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityOverhead3 *o = (const CUpti_ActivityOverhead3 *)r;
	if (!conv_span_ok(o->start, o->end))
		return 0;
	int64_t tid =
	    o->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? (int64_t)o->objectId.pt.threadId : 0;
	struct ovh_track *t = overhead_track(c, tid);
	if (!t)
		return c->err = -ENOMEM;
	char name[96];
	if (tid) {
		uint64_t *nm = cuptrace_u64map_get(&c->thread_names, (uint64_t)tid);
		snprintf(name, sizeof(name), "CUPTI overhead: %s (%" PRId64 ")",
		         nm ? conv_str(c, (uint32_t)*nm) : "thread", tid);
	} else {
		snprintf(name, sizeof(name), "CUPTI overhead");
	}
	int64_t ts = conv_rel(c, o->start), dur = (int64_t)(o->end - o->start);
	uint64_t track =
	    conv_lane_assign(c, t->lanes, &t->nlanes, &ts, &dur, name, c->process_uuid, 60);
	struct cuptrace_slice s = {
	    .track_uuid = track,
	    .ts = ts,
	    .dur = dur,
	    .name = overhead_name(o->overheadKind),
	    .category = "cupti_overhead",
	    .correlation_id = o->correlationId,
	};
	return conv_emit_slice(c, &s);
}

int conv_extra_finish(struct cuptrace_converter *c)
{
	return conv_memory_flush(c, 1);
}

void conv_extra_free(struct cuptrace_converter *c)
{
	for (size_t i = 0; i < c->nstacks; i++)
		free(c->stacks[i].ids);
	free(c->stacks);
	free(c->mdatas);
	free(c->nvtx);
	free(c->memev);
	free(c->ovh);
}
