/* GPU work: kernels, memcpys and memsets on their streams' tracks, and synchronization records.
 *
 * A batch is one CUPTI buffer. Within it, GPU work is sorted per stream and placed on the
 * stream's first lane whose last slice ended at or before it starts; truly overlapping work
 * (graph branches) and work that arrives out of order across buffers get further lanes that
 * share the stream's name, so no track ever holds partially overlapping slices. The flow from
 * each activity's API call, and the drawing of syncs under their API call, are convert_corr.c's. */
#define _GNU_SOURCE
#include "convert/convert_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gwork {
	const CUpti_Activity *r;
	uint32_t stream; /* index into c->streams */
	int64_t ts, dur;
	uint32_t corr;
};

static struct stream *get_stream(struct cuptrace_converter *c, uint32_t dev, uint32_t ctx,
                                 uint32_t id, uint32_t *idx_out)
{
	uint64_t key = ((uint64_t)ctx << 32) | id;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&c->stream_idx, key, &created);
	if (!slot) {
		c->err = -ENOMEM;
		return NULL;
	}
	if (created) {
		if (c->nstreams == c->streams_cap) {
			size_t cap = c->streams_cap ? c->streams_cap * 2 : 16;
			struct stream *ns = realloc(c->streams, cap * sizeof(*ns));
			if (!ns) {
				c->err = -ENOMEM;
				return NULL;
			}
			c->streams = ns;
			c->streams_cap = cap;
		}
		struct stream *s = &c->streams[c->nstreams];
		memset(s, 0, sizeof(*s));
		s->dev = dev;
		s->ctx = ctx;
		s->id = id;
		*slot = ++c->nstreams;
	}
	*idx_out = (uint32_t)(*slot - 1);
	return &c->streams[*slot - 1];
}

static void name_stream(struct cuptrace_converter *c, struct stream *s)
{
	uint64_t *nm = cuptrace_u64map_get(&c->stream_names, ((uint64_t)s->ctx << 32) | s->id);
	/* Unique per GPU ("Stream 7"): same-named siblings would be merged by the UI. A second
	 * context on one device keeps its streams apart with the context id. */
	int other_ctx = 0;
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i].dev == s->dev && c->streams[i].ctx != s->ctx &&
		    c->streams[i].declared)
			other_ctx = 1;
	if (nm)
		snprintf(s->name, sizeof(s->name), "%s (stream %u)", conv_str(c, (uint32_t)*nm),
		         s->id);
	else if (other_ctx)
		snprintf(s->name, sizeof(s->name), "Stream %u (context %u)", s->id, s->ctx);
	else
		snprintf(s->name, sizeof(s->name), "Stream %u", s->id);
	s->declared = 1;
}

static const char *demangle(struct cuptrace_converter *c, const char *mangled)
{
	typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
	static demangle_fn fn;
	static int looked;
	uint32_t mid = conv_intern(c, mangled);
	uint64_t *slot = cuptrace_u64map_get(&c->demangled, mid);
	if (slot)
		return conv_str(c, (uint32_t)*slot);
	if (!looked) {
		/* libstdc++ is in every CUDA process and on every machine cuptrace runs on; looked
		 * up at run time so nothing links against it. Names stay mangled without it. */
		looked = 1;
		fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		if (!fn) {
			void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
			fn = h ? (demangle_fn)dlsym(h, "__cxa_demangle") : NULL;
		}
	}
	uint32_t did = mid;
	if (fn && mangled[0] == '_' && mangled[1] == 'Z') {
		int status = -1;
		char *d = fn(mangled, NULL, NULL, &status);
		if (d && !status)
			did = conv_intern(c, d);
		free(d);
	}
	uint64_t *ns = cuptrace_u64map_put(&c->demangled, mid, NULL);
	if (ns)
		*ns = did;
	return conv_str(c, did);
}

/* The same kernel name pointer comes back for every launch: remember what it demangled to.
 * CUPTI may reuse a pointer for another name after a module reload, so a hit is confirmed by
 * comparing the text with the interned mangled name (cheaper than hashing it again). */
static const char *demangle_cached(struct cuptrace_converter *c, const char *mangled)
{
	size_t slot = (size_t)(cuptrace_hash64((uint64_t)(uintptr_t)mangled) % NAME_CACHE);
	struct name_cache *e = &c->names[slot];
	if (e->ptr == mangled && !strcmp(conv_str(c, e->mangled), mangled))
		return conv_str(c, e->demangled);
	const char *d = demangle(c, mangled);
	e->ptr = mangled;
	e->mangled = conv_intern(c, mangled);
	e->demangled = conv_intern(c, d);
	return d;
}

/* "(x, y, z)" for grid and block; launch loops repeat one shape, so the last is kept. */
static void launch_dims(struct cuptrace_converter *c, const CUpti_ActivityKernel10 *k, char *grid,
                        char *block)
{
	int32_t d[6] = {k->gridX, k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ};
	if (memcmp(d, c->dims, sizeof(d)) || !c->dims_valid) {
		memcpy(c->dims, d, sizeof(d));
		c->dims_valid = 1;
		snprintf(c->dims_grid, sizeof(c->dims_grid), "(%d, %d, %d)", d[0], d[1], d[2]);
		snprintf(c->dims_block, sizeof(c->dims_block), "(%d, %d, %d)", d[3], d[4], d[5]);
	}
	memcpy(grid, c->dims_grid, sizeof(c->dims_grid));
	memcpy(block, c->dims_block, sizeof(c->dims_block));
}

static int gwork_cmp(const void *a, const void *b)
{
	const struct gwork *x = a, *y = b;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->dur > y->dur ? -1 : x->dur < y->dur;
}

/* Which graph and node launched the work (none outside graphs). */
static size_t graph_args(struct cuptrace_arg *A, size_t na, uint32_t graph, uint64_t node)
{
	if (graph) {
		A[na++] = (struct cuptrace_arg){
		    .key = "graph_id", .type = CUPTRACE_ARG_UINT, .v.u = graph};
		A[na++] = (struct cuptrace_arg){
		    .key = "graph_node_id", .type = CUPTRACE_ARG_UINT, .v.u = node};
	}
	return na;
}

/* A copy's name and first args, alike for MEMCPY and MEMCPY2 (peer) records. */
static size_t copy_args(struct cuptrace_arg *A, char *name, size_t n, uint8_t kind, uint8_t src,
                        uint8_t dst, uint64_t bytes)
{
	snprintf(name, n, "Memcpy %s (%s -> %s)", conv_copy_kind_name(kind),
	         conv_mem_kind_name(src), conv_mem_kind_name(dst));
	A[0] = (struct cuptrace_arg){.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = bytes};
	A[1] = (struct cuptrace_arg){
	    .key = "kind", .type = CUPTRACE_ARG_STRING, .v.s = conv_copy_kind_name(kind)};
	return 2;
}

static int emit_gwork(struct cuptrace_converter *c, struct gwork *w)
{
	struct stream *s = &c->streams[w->stream];
	if (!s->declared) {
		conv_declare_gpu(c, s->dev);
		name_stream(c, s);
	}
	int64_t ts = w->ts, dur = w->dur;
	uint64_t track = conv_lane_assign(c, s->lanes, &s->nlanes, &ts, &dur, s->name,
	                                  c->gpus[s->dev % MAX_GPUS].uuid, (int32_t)s->id);
	char name[256], grid[48], block[48], cl[48];
	const char *nm = name, *cat = "kernel";
	size_t na = 0;
	struct cuptrace_arg *A = c->args;
	double gbps = 0;
	switch (w->r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)w->r;
		const char *kn = conv_resolve(c, k->name);
		nm = kn ? demangle_cached(c, kn) : "kernel";
		launch_dims(c, k, grid, block);
		A[na++] =
		    (struct cuptrace_arg){.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = grid};
		A[na++] = (struct cuptrace_arg){
		    .key = "block", .type = CUPTRACE_ARG_STRING, .v.s = block};
		A[na++] = (struct cuptrace_arg){
		    .key = "registers", .type = CUPTRACE_ARG_INT, .v.i = k->registersPerThread};
		A[na++] = (struct cuptrace_arg){.key = "shared_memory",
		                                .type = CUPTRACE_ARG_INT,
		                                .v.i = (int64_t)k->staticSharedMemory +
		                                       k->dynamicSharedMemory};
		if (k->dynamicSharedMemory)
			A[na++] = (struct cuptrace_arg){.key = "dynamic_shared_memory",
			                                .type = CUPTRACE_ARG_INT,
			                                .v.i = k->dynamicSharedMemory};
		if (k->localMemoryPerThread)
			A[na++] = (struct cuptrace_arg){.key = "local_memory_per_thread",
			                                .type = CUPTRACE_ARG_INT,
			                                .v.i = k->localMemoryPerThread};
		if (k->clusterX * k->clusterY * k->clusterZ > 1) {
			snprintf(cl, sizeof(cl), "(%u, %u, %u)", k->clusterX, k->clusterY,
			         k->clusterZ);
			A[na++] = (struct cuptrace_arg){
			    .key = "cluster", .type = CUPTRACE_ARG_STRING, .v.s = cl};
		}
		na = graph_args(A, na, k->graphId, k->graphNodeId);
		c->counts.kernels++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)w->r;
		na =
		    copy_args(A, name, sizeof(name), m->copyKind, m->srcKind, m->dstKind, m->bytes);
		cat = "memcpy";
		A[na++] = (struct cuptrace_arg){.key = "src",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = conv_mem_kind_name(m->srcKind)};
		A[na++] = (struct cuptrace_arg){.key = "dst",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = conv_mem_kind_name(m->dstKind)};
		A[na++] =
		    (struct cuptrace_arg){.key = "async",
		                          .type = CUPTRACE_ARG_BOOL,
		                          .v.b = !!(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC)};
		na = graph_args(A, na, m->graphId, m->graphNodeId);
		gbps = w->dur > 0 ? (double)m->bytes / (double)w->dur : 0;
		c->counts.memcpys++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)w->r;
		na =
		    copy_args(A, name, sizeof(name), m->copyKind, m->srcKind, m->dstKind, m->bytes);
		cat = "memcpy";
		A[na++] = (struct cuptrace_arg){
		    .key = "src_device", .type = CUPTRACE_ARG_UINT, .v.u = m->srcDeviceId};
		A[na++] = (struct cuptrace_arg){
		    .key = "dst_device", .type = CUPTRACE_ARG_UINT, .v.u = m->dstDeviceId};
		gbps = w->dur > 0 ? (double)m->bytes / (double)w->dur : 0;
		c->counts.memcpys++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)w->r;
		snprintf(name, sizeof(name), "Memset (%s)",
		         conv_mem_kind_name((uint8_t)m->memoryKind));
		cat = "memset";
		A[na++] = (struct cuptrace_arg){
		    .key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = m->bytes};
		A[na++] = (struct cuptrace_arg){
		    .key = "value", .type = CUPTRACE_ARG_UINT, .v.u = m->value};
		na = graph_args(A, na, m->graphId, m->graphNodeId);
		gbps = w->dur > 0 ? (double)m->bytes / (double)w->dur : 0;
		c->counts.memsets++;
		break;
	}
	default:
		return 0;
	}
	if (gbps > 0)
		A[na++] = (struct cuptrace_arg){
		    .key = "bandwidth_gbps", .type = CUPTRACE_ARG_DOUBLE, .v.d = gbps};
	/* The flow into this activity; the API call lists it among its flows out. */
	uint64_t flow = conv_corr_flow_in(c, w->corr);
	struct cuptrace_slice sl = {
	    .track_uuid = track,
	    .ts = ts,
	    .dur = dur,
	    .name = nm,
	    .category = cat,
	    .correlation_id = w->corr,
	    .args = A,
	    .nargs = na,
	    .flows_in = flow ? &flow : NULL,
	    .nflows_in = flow ? 1 : 0,
	};
	return conv_emit_slice(c, &sl);
}

/* ---- a batch: collected in record order, drawn sorted per stream ---- */

int conv_gpu_batch_begin(struct cuptrace_converter *c, size_t n)
{
	c->work = malloc((n ? n : 1) * sizeof(*c->work));
	c->nwork = 0;
	if (!c->work)
		return c->err = -ENOMEM;
	return 0;
}

int conv_gpu_work(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	uint32_t dev = 0, ctx = 0, sid = 0, corr = 0;
	uint64_t start = 0, end = 0;
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
		dev = k->deviceId, ctx = k->contextId, sid = k->streamId;
		corr = k->correlationId, start = k->start, end = k->end;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
		dev = m->deviceId, ctx = m->contextId, sid = m->streamId;
		corr = m->correlationId, start = m->start, end = m->end;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)r;
		dev = m->deviceId, ctx = m->contextId, sid = m->streamId;
		corr = m->correlationId, start = m->start, end = m->end;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
		dev = m->deviceId, ctx = m->contextId, sid = m->streamId;
		corr = m->correlationId, start = m->start, end = m->end;
		break;
	}
	default:
		return 0;
	}
	if (!conv_span_ok(start, end)) {
		/* Unfinished at a forced flush, or CUPTI ran out of device buffers. */
		c->counts.no_timestamp++;
		return 0;
	}
	uint32_t idx;
	if (!get_stream(c, dev, ctx, sid, &idx))
		return c->err;
	c->work[c->nwork++] = (struct gwork){
	    .r = r,
	    .stream = idx,
	    .ts = conv_rel(c, start),
	    .dur = (int64_t)(end - start),
	    .corr = corr,
	};
	return 0;
}

int conv_gpu_batch_end(struct cuptrace_converter *c)
{
	qsort(c->work, c->nwork, sizeof(*c->work), gwork_cmp);
	for (size_t i = 0; i < c->nwork && !c->err; i++)
		emit_gwork(c, &c->work[i]);
	free(c->work);
	c->work = NULL;
	c->nwork = 0;
	return c->err;
}

/* ---- synchronization: a child of the API call that waited, drawn by convert_corr.c ---- */

int conv_gpu_sync(struct cuptrace_converter *c, const CUpti_ActivitySynchronization2 *y)
{
	if (!conv_span_ok(y->start, y->end) || !y->correlationId) {
		c->counts.no_timestamp++;
		return 0;
	}
	struct orphan_sync o = {
	    .ts = conv_rel(c, y->start),
	    .end = conv_rel(c, y->end),
	    .type = (uint32_t)y->type,
	    .stream = y->streamId,
	    .event = y->cudaEventId,
	};
	return conv_corr_sync(c, y->correlationId, &o);
}

/* ---- life cycle ---- */

void conv_gpu_init(struct cuptrace_converter *c)
{
	cuptrace_u64map_init(&c->stream_idx);
	cuptrace_u64map_init(&c->demangled);
}

void conv_gpu_free(struct cuptrace_converter *c)
{
	free(c->work);
	free(c->streams);
	cuptrace_u64map_free(&c->stream_idx);
	cuptrace_u64map_free(&c->demangled);
}
