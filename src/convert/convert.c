/* CUPTI records -> timeline events: tracks, API calls, GPU work, API->GPU flows (see convert.h).
 *
 * A batch is one CUPTI buffer. Within it, GPU work is sorted per stream and placed on the
 * stream's first lane whose last slice ended at or before it starts; truly overlapping work
 * (graph branches) and work that arrives out of order across buffers get further lanes that
 * share the stream's name, so no track ever holds partially overlapping slices. Every GPU
 * activity gets its own flow id (corr << 16 | k); the API slice lists all of them, which is why
 * a launch-like API call whose GPU records have not arrived yet is held back (bounded). */
#define _GNU_SOURCE
#include "convert/convert_internal.h"
#include "convert/runtime_filter.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"

#define CORR_RING (1u << 17) /* correlation states kept: ~9 MB */

/* ---- small helpers shared with convert_extra.c ---- */

uint64_t conv_uuid(const struct cuptrace_converter *c, enum uuid_type t, uint64_t idx)
{
	return ((uint64_t)(uint32_t)c->pid << 40) | ((uint64_t)t << 36) | (idx & 0xFFFFFFFFFull);
}

uint32_t conv_intern(struct cuptrace_converter *c, const char *s)
{
	uint32_t id = cuptrace_strtab_intern(&c->strs, s, strlen(s));
	if (!id && !c->err)
		c->err = -ENOMEM;
	return id;
}

const char *conv_str(const struct cuptrace_converter *c, uint32_t id)
{
	const char *s = cuptrace_strtab_str(&c->strs, id);
	return s ? s : "?";
}

const char *conv_resolve(struct cuptrace_converter *c, const char *ptr)
{
	if (!ptr)
		return NULL;
	return c->resolve ? c->resolve(c->resolve_ctx, ptr) : ptr;
}

int64_t conv_rel(struct cuptrace_converter *c, uint64_t ts)
{
	/* Nothing CUPTI records predates the start timestamp; clamp rather than emit a
	 * negative time, which Perfetto would drop. */
	return (int64_t)ts > c->start ? (int64_t)ts - c->start : 0;
}

static int declare(struct cuptrace_converter *c, const struct cuptrace_track *t)
{
	if (c->err)
		return c->err;
	int r = c->sink->ops->track(c->sink, t);
	if (r && !c->err)
		c->err = r;
	return c->err;
}

int conv_emit_slice(struct cuptrace_converter *c, const struct cuptrace_slice *s)
{
	if (c->err)
		return c->err;
	int r = c->sink->ops->slice(c->sink, s);
	if (r && !c->err)
		c->err = r;
	return c->err;
}

void conv_meta_set(struct cuptrace_converter *c, const char *key, const char *s, int64_t i,
                   int is_int)
{
	for (size_t k = 0; k < c->nmeta; k++) {
		if (!strcmp(c->meta[k].key, key)) {
			c->meta[k].is_int = is_int;
			c->meta[k].i = i;
			c->meta[k].s = is_int ? NULL : conv_str(c, conv_intern(c, s));
			return;
		}
	}
	if (c->nmeta == c->meta_cap) {
		size_t cap = c->meta_cap ? c->meta_cap * 2 : 32;
		struct cuptrace_meta *m = realloc(c->meta, cap * sizeof(*m));
		if (!m) {
			c->err = -ENOMEM;
			return;
		}
		c->meta = m;
		c->meta_cap = cap;
	}
	c->meta[c->nmeta++] = (struct cuptrace_meta){
	    .key = conv_str(c, conv_intern(c, key)),
	    .is_int = is_int,
	    .i = i,
	    .s = is_int ? NULL : conv_str(c, conv_intern(c, s)),
	};
}

uint64_t conv_thread_track(struct cuptrace_converter *c, int64_t tid)
{
	int created;
	uint64_t *slot = cuptrace_u64map_put(&c->threads, (uint64_t)tid, &created);
	if (!slot) {
		c->err = -ENOMEM;
		return 0;
	}
	if (!created)
		return *slot;
	*slot = conv_uuid(c, U_THREAD, (uint64_t)tid);
	uint64_t *nm = cuptrace_u64map_get(&c->thread_names, (uint64_t)tid);
	char buf[48];
	snprintf(buf, sizeof(buf), "thread %" PRId64, tid);
	struct cuptrace_track t = {
	    .uuid = *slot,
	    .kind = CUPTRACE_TRACK_THREAD,
	    .parent_uuid = c->process_uuid,
	    .pid = c->pid,
	    .tid = tid,
	    .name = nm ? conv_str(c, (uint32_t)*nm) : buf,
	    .sort_rank = tid == c->pid ? 0 : 1,
	};
	declare(c, &t);
	return t.uuid;
}

int conv_declare_gpu(struct cuptrace_converter *c, uint32_t dev)
{
	struct gpu *g = &c->gpus[dev % MAX_GPUS];
	if (g->declared)
		return 0;
	g->declared = 1;
	g->uuid = conv_uuid(c, U_GPU, dev);
	char name[200];
	if (g->known)
		snprintf(name, sizeof(name), "GPU %u: %s", dev, g->name);
	else
		snprintf(name, sizeof(name), "GPU %u", dev);
	struct cuptrace_track t = {
	    .uuid = g->uuid,
	    .kind = CUPTRACE_TRACK_GROUP,
	    .parent_uuid = c->process_uuid,
	    .pid = c->pid,
	    .name = name,
	    .sort_rank = 100 + (int32_t)dev, /* after the host threads */
	};
	return declare(c, &t);
}

/* First lane whose last slice ended at or before ts; a new lane if none. When every lane is
 * taken, the least-busy one is used and the slice is clamped to start after it (counted). */
uint64_t conv_lane_assign(struct cuptrace_converter *c, struct lane *lanes, size_t *nlanes,
                          int64_t *ts, int64_t *dur, const char *name, uint64_t parent,
                          int32_t rank)
{
	for (size_t i = 0; i < *nlanes; i++) {
		if (lanes[i].last_end <= *ts) {
			lanes[i].last_end = *ts + *dur;
			return lanes[i].uuid;
		}
	}
	if (*nlanes < MAX_LANES) {
		struct lane *l = &lanes[(*nlanes)++];
		l->uuid = conv_uuid(c, U_LANE, c->next_lane_idx++);
		l->last_end = *ts + *dur;
		struct cuptrace_track t = {
		    .uuid = l->uuid,
		    .kind = CUPTRACE_TRACK_SLICES,
		    .parent_uuid = parent,
		    .pid = c->pid,
		    .name = name,
		    .sort_rank = rank,
		    .lane = (uint32_t)(*nlanes - 1),
		};
		if (*nlanes > 1)
			c->counts.lanes++;
		declare(c, &t);
		return l->uuid;
	}
	size_t best = 0;
	for (size_t i = 1; i < *nlanes; i++)
		if (lanes[i].last_end < lanes[best].last_end)
			best = i;
	int64_t end = *ts + *dur;
	*ts = lanes[best].last_end;
	*dur = end > *ts ? end - *ts : 0;
	lanes[best].last_end = *ts + *dur;
	return lanes[best].uuid;
}

/* ---- correlation state ---- */

static struct corr_state *corr_get(struct cuptrace_converter *c, uint32_t corr, int create);
static int emit_pending(struct cuptrace_converter *c, size_t idx, int forced);

static void corr_release(struct cuptrace_converter *c, struct corr_state *s)
{
	free(s->orphans);
	free(s->syncs);
	memset(s, 0, sizeof(*s));
	s->pending = -1;
}

static struct corr_state *corr_get(struct cuptrace_converter *c, uint32_t corr, int create)
{
	uint64_t *slot = cuptrace_u64map_get(&c->corr_idx, corr);
	if (slot)
		return &c->corr[*slot - 1];
	if (!create)
		return NULL;
	/* Reuse the oldest slot of the ring: its correlation id is a million calls old. */
	size_t i = c->corr_head;
	c->corr_head = (c->corr_head + 1) % c->corr_cap;
	struct corr_state *s = &c->corr[i];
	if (s->corr || s->api_seen || s->norphans) {
		if (s->pending >= 0)
			emit_pending(c, (size_t)s->pending, 1);
		c->counts.unlinked_gpu += s->norphans;
		cuptrace_u64map_del(&c->corr_idx, s->corr);
		corr_release(c, s);
	}
	s->corr = corr;
	s->pending = -1;
	uint64_t *ns = cuptrace_u64map_put(&c->corr_idx, corr, NULL);
	if (!ns) {
		c->err = -ENOMEM;
		return NULL;
	}
	*ns = i + 1;
	return s;
}

static int push_u64(uint64_t **v, uint32_t *n, uint32_t *cap, uint64_t x)
{
	if (*n == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 4;
		uint64_t *nv = realloc(*v, nc * sizeof(uint64_t));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = x;
	return 0;
}

/* ---- API calls ---- */

static int emit_api(struct cuptrace_converter *c, uint64_t track, int64_t ts, int64_t dur,
                    uint32_t name_id, uint32_t cat_id, uint32_t corr, int32_t ret,
                    const uint64_t *flows, size_t nflows)
{
	size_t na = 0;
	if (ret) {
		c->args[na++] = (struct cuptrace_arg){
		    .key = "return_value", .type = CUPTRACE_ARG_INT, .v.i = ret};
	}
	struct cuptrace_slice s = {
	    .track_uuid = track,
	    .ts = ts,
	    .dur = dur,
	    .name = conv_str(c, name_id),
	    .category = conv_str(c, cat_id),
	    .correlation_id = corr,
	    .args = c->args,
	    .nargs = na,
	    .flows_out = flows,
	    .nflows_out = nflows,
	};
	return conv_emit_slice(c, &s);
}

static int emit_sync_child(struct cuptrace_converter *c, struct corr_state *st,
                           const struct orphan_sync *o);

static int emit_pending(struct cuptrace_converter *c, size_t idx, int forced)
{
	struct pending_api *p = &c->pending[idx];
	if (!p->used)
		return 0;
	if (forced && (p->expect < 0 ? p->nflows == 0 : p->nflows < (uint32_t)p->expect))
		c->counts.pending_forced++;
	int r = emit_api(c, p->track, p->ts, p->dur, p->name_id, p->cat_id, p->corr, p->ret,
	                 p->flows, p->nflows);
	struct corr_state *st = corr_get(c, p->corr, 0);
	if (st) {
		st->pending = -1;
		st->api_emitted = 1;
	}
	free(p->flows);
	memset(p, 0, sizeof(*p));
	c->npending--;
	c->pending_free[c->npending_free++] = idx;
	return r;
}

static int hold_api(struct cuptrace_converter *c, struct corr_state *st, uint64_t track, int64_t ts,
                    int64_t dur, uint32_t name_id, uint32_t cat_id, int expect, int32_t ret)
{
	if (!c->npending_free) {
		/* Full: write the oldest-looking entry (lowest correlation id) as it is. */
		size_t victim = 0;
		for (size_t i = 1; i < c->pending_cap; i++)
			if (c->pending[i].corr < c->pending[victim].corr)
				victim = i;
		emit_pending(c, victim, 1);
	}
	size_t idx = c->pending_free[--c->npending_free];
	struct pending_api *p = &c->pending[idx];
	*p = (struct pending_api){
	    .used = 1,
	    .corr = st->corr,
	    .expect = expect,
	    .batch_added = c->batch,
	    .track = track,
	    .ts = ts,
	    .dur = dur,
	    .name_id = name_id,
	    .cat_id = cat_id,
	    .ret = ret,
	};
	for (uint32_t i = 0; i < st->norphans; i++)
		push_u64(&p->flows, &p->nflows, &p->flows_cap, st->orphans[i]);
	st->norphans = 0;
	st->pending = (int32_t)idx;
	c->npending++;
	return 0;
}

static int handle_api(struct cuptrace_converter *c, const CUpti_ActivityAPI *a)
{
	int driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
	if (driver)
		c->counts.driver++;
	else
		c->counts.runtime++;
	int8_t expect = 0;
	if (a->kind == CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API)
		expect = 1;
	else if (driver && a->cbid < cuptrace_driver_cbid_names_len)
		expect = c->driver_expect[a->cbid];
	else if (!driver && a->cbid < cuptrace_runtime_cbid_names_len)
		expect = c->runtime_expect[a->cbid];
	if (driver && !c->opts.driver_all && expect == 0 && a->cbid < 8192 &&
	    (c->driver_noise[a->cbid / 8] & (1u << (a->cbid % 8)))) {
		c->counts.driver_filtered++;
		return 0;
	}
	if (!driver && !c->opts.runtime_all && a->kind == CUPTI_ACTIVITY_KIND_RUNTIME &&
	    !cuptrace_runtime_keep(a->cbid, (int32_t)a->returnValue, a->end - a->start)) {
		c->counts.runtime_filtered++;
		return 0;
	}
	if (!conv_span_ok(a->start, a->end))
		return 0;
	/* Names are per (domain, cbid): looked up and interned once. */
	uint32_t *cache = driver ? c->driver_name_ids : c->runtime_name_ids;
	uint32_t cache_len =
	    driver ? cuptrace_driver_cbid_names_len : cuptrace_runtime_cbid_names_len;
	uint32_t name_id = a->kind != CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API && a->cbid < cache_len
	                       ? cache[a->cbid]
	                       : 0;
	if (!name_id) {
		char buf[128];
		name_id = conv_intern(c, conv_api_name(a, buf, sizeof(buf)));
		if (a->kind != CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API && a->cbid < cache_len)
			cache[a->cbid] = name_id;
	}
	uint32_t cat_id = driver ? c->cat_driver : c->cat_runtime;
	uint64_t track = conv_thread_track(c, (int64_t)a->threadId);
	int64_t ts = conv_rel(c, a->start), dur = (int64_t)(a->end - a->start);
	if (ts + dur > c->latest_ts)
		c->latest_ts = ts + dur;
	if (!a->correlationId)
		return emit_api(c, track, ts, dur, name_id, cat_id, 0, (int32_t)a->returnValue,
		                NULL, 0);
	struct corr_state *st = corr_get(c, a->correlationId, 1);
	if (!st)
		return c->err;
	st->api_seen = 1;
	st->api_track = track;
	st->api_ts = ts;
	st->api_end = ts + dur;
	int r;
	if (a->returnValue == 0 && expect != 0 && (expect < 0 || st->norphans < (uint32_t)expect)) {
		r = hold_api(c, st, track, ts, dur, name_id, cat_id, expect,
		             (int32_t)a->returnValue);
	} else {
		r = emit_api(c, track, ts, dur, name_id, cat_id, a->correlationId,
		             (int32_t)a->returnValue, st->orphans, st->norphans);
		st->norphans = 0;
		st->api_emitted = 1;
	}
	for (uint32_t i = 0; i < st->nsyncs; i++)
		emit_sync_child(c, st, &st->syncs[i]);
	st->nsyncs = 0;
	return r;
}

/* ---- GPU work ---- */

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
		if (k->graphId) {
			A[na++] = (struct cuptrace_arg){
			    .key = "graph_id", .type = CUPTRACE_ARG_UINT, .v.u = k->graphId};
			A[na++] = (struct cuptrace_arg){.key = "graph_node_id",
			                                .type = CUPTRACE_ARG_UINT,
			                                .v.u = k->graphNodeId};
		}
		c->counts.kernels++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)w->r;
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)",
		         conv_copy_kind_name(m->copyKind), conv_mem_kind_name(m->srcKind),
		         conv_mem_kind_name(m->dstKind));
		cat = "memcpy";
		A[na++] = (struct cuptrace_arg){
		    .key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = m->bytes};
		A[na++] = (struct cuptrace_arg){.key = "kind",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = conv_copy_kind_name(m->copyKind)};
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
		if (m->graphId) {
			A[na++] = (struct cuptrace_arg){
			    .key = "graph_id", .type = CUPTRACE_ARG_UINT, .v.u = m->graphId};
			A[na++] = (struct cuptrace_arg){.key = "graph_node_id",
			                                .type = CUPTRACE_ARG_UINT,
			                                .v.u = m->graphNodeId};
		}
		gbps = w->dur > 0 ? (double)m->bytes / (double)w->dur : 0;
		c->counts.memcpys++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)w->r;
		snprintf(name, sizeof(name), "Memcpy %s (%s -> %s)",
		         conv_copy_kind_name(m->copyKind), conv_mem_kind_name(m->srcKind),
		         conv_mem_kind_name(m->dstKind));
		cat = "memcpy";
		A[na++] = (struct cuptrace_arg){
		    .key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = m->bytes};
		A[na++] = (struct cuptrace_arg){.key = "kind",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = conv_copy_kind_name(m->copyKind)};
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
		if (m->graphId) {
			A[na++] = (struct cuptrace_arg){
			    .key = "graph_id", .type = CUPTRACE_ARG_UINT, .v.u = m->graphId};
			A[na++] = (struct cuptrace_arg){.key = "graph_node_id",
			                                .type = CUPTRACE_ARG_UINT,
			                                .v.u = m->graphNodeId};
		}
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
	uint64_t flow = 0;
	if (w->corr) {
		struct corr_state *st = corr_get(c, w->corr, 1);
		if (st) {
			flow = ((uint64_t)w->corr << 16) | st->nflows;
			if (st->nflows < 0xFFFF)
				st->nflows++;
			c->counts.flows++;
			if (st->pending >= 0) {
				struct pending_api *p = &c->pending[st->pending];
				push_u64(&p->flows, &p->nflows, &p->flows_cap, flow);
				p->batch_added = c->batch;
				if (p->expect > 0 && p->nflows >= (uint32_t)p->expect)
					emit_pending(c, (size_t)st->pending, 0);
			} else if (st->api_emitted) {
				/* The API slice is already written: more GPU work than expected
				 * (e.g. a copy split in two). No arrow can be added any more. */
				c->counts.unlinked_gpu++;
				c->counts.flows--;
				flow = 0;
			} else if (push_u64(&st->orphans, &st->norphans, &st->orphans_cap, flow)) {
				c->err = -ENOMEM;
			}
		}
	}
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

/* ---- synchronization: a child of the API call that waited, on its thread ---- */

static int emit_sync_child(struct cuptrace_converter *c, struct corr_state *st,
                           const struct orphan_sync *o)
{
	/* Clamp into the API call: the sync record's times come from the same clock but a
	 * separate reading, and the child must nest. */
	int64_t ts = o->ts < st->api_ts ? st->api_ts : o->ts;
	int64_t end = o->end > st->api_end ? st->api_end : o->end;
	if (end < ts)
		end = ts;
	size_t na = 0;
	struct cuptrace_arg *A = c->args;
	if (o->stream != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		A[na++] = (struct cuptrace_arg){
		    .key = "stream", .type = CUPTRACE_ARG_UINT, .v.u = o->stream};
	if (o->event != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		A[na++] = (struct cuptrace_arg){
		    .key = "event", .type = CUPTRACE_ARG_UINT, .v.u = o->event};
	struct cuptrace_slice s = {
	    .track_uuid = st->api_track,
	    .ts = ts,
	    .dur = end - ts,
	    .name = conv_sync_name(o->type),
	    .category = "sync",
	    .correlation_id = st->corr,
	    .args = A,
	    .nargs = na,
	};
	c->counts.syncs++;
	return conv_emit_slice(c, &s);
}

static int handle_sync(struct cuptrace_converter *c, const CUpti_ActivitySynchronization2 *y)
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
	struct corr_state *st = corr_get(c, y->correlationId, 1);
	if (!st)
		return c->err;
	if (st->api_seen)
		return emit_sync_child(c, st, &o);
	struct orphan_sync *ns = realloc(st->syncs, (st->nsyncs + 1) * sizeof(*ns));
	if (!ns)
		return c->err = -ENOMEM;
	st->syncs = ns;
	st->syncs[st->nsyncs++] = o;
	return 0;
}

/* ---- metadata records ---- */

static void handle_device(struct cuptrace_converter *c, const CUpti_ActivityDevice5 *d)
{
	struct gpu *g = &c->gpus[d->id % MAX_GPUS];
	const char *n = conv_resolve(c, d->name);
	g->known = 1;
	snprintf(g->name, sizeof(g->name), "%s", n ? n : "GPU");
	char key[32], val[256];
	snprintf(key, sizeof(key), "gpu%u", d->id);
	snprintf(val, sizeof(val), "%s, compute capability %u.%u, %u SMs, %.1f GiB", g->name,
	         d->computeCapabilityMajor, d->computeCapabilityMinor, d->numMultiprocessors,
	         (double)d->globalMemorySize / (1024.0 * 1024 * 1024));
	conv_meta_set(c, key, val, 0, 0);
}

static void handle_name(struct cuptrace_converter *c, const CUpti_ActivityName *n)
{
	const char *s = conv_resolve(c, n->name);
	if (!s)
		return;
	if (n->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD) {
		cuptrace_converter_thread_name(c, n->objectId.pt.threadId, s);
	} else if (n->objectKind == CUPTI_ACTIVITY_OBJECT_STREAM) {
		uint64_t *slot = cuptrace_u64map_put(
		    &c->stream_names,
		    ((uint64_t)n->objectId.dcs.contextId << 32) | n->objectId.dcs.streamId, NULL);
		if (slot)
			*slot = conv_intern(c, s);
	} else if (n->objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE) {
		/* nvtxNameCudaDevice: "GPU 0: main-gpu (NVIDIA H200)"; a group already declared
		 * keeps its name (tracks are named once). */
		struct gpu *g = &c->gpus[n->objectId.dcs.deviceId % MAX_GPUS];
		if (!g->declared) {
			char model[160];
			snprintf(model, sizeof(model), "%s", g->name);
			if (g->known)
				snprintf(g->name, sizeof(g->name), "%.80s (%.70s)", s, model);
			else
				snprintf(g->name, sizeof(g->name), "%s", s);
			g->known = 1;
		}
	}
}

/* ---- batches ---- */

int cuptrace_converter_add(struct cuptrace_converter *c, const CUpti_Activity *const *recs,
                           size_t n)
{
	if (c->err)
		return c->err;
	c->batch++;
	/* Names and devices first: they decide how tracks are named when first declared. */
	for (size_t i = 0; i < n; i++) {
		switch (recs[i]->kind) {
		case CUPTI_ACTIVITY_KIND_DEVICE:
			handle_device(c, (const CUpti_ActivityDevice5 *)recs[i]);
			break;
		case CUPTI_ACTIVITY_KIND_NAME:
			handle_name(c, (const CUpti_ActivityName *)recs[i]);
			break;
		case CUPTI_ACTIVITY_KIND_CONTEXT: {
			const CUpti_ActivityContext3 *x = (const CUpti_ActivityContext3 *)recs[i];
			uint64_t *slot = cuptrace_u64map_put(&c->ctx_dev, x->contextId, NULL);
			if (slot)
				*slot = (uint64_t)x->deviceId + 1;
			break;
		}
		default:
			break;
		}
	}
	struct gwork *work = malloc((n ? n : 1) * sizeof(*work));
	if (!work)
		return c->err = -ENOMEM;
	size_t nw = 0;
	for (size_t i = 0; i < n && !c->err; i++) {
		const CUpti_Activity *r = recs[i];
		c->counts.records++;
		uint32_t dev = 0, ctx = 0, sid = 0, corr = 0;
		uint64_t start = 0, end = 0;
		switch (r->kind) {
		case CUPTI_ACTIVITY_KIND_RUNTIME:
		case CUPTI_ACTIVITY_KIND_DRIVER:
		case CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API:
			handle_api(c, (const CUpti_ActivityAPI *)r);
			continue;
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
		case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
			handle_sync(c, (const CUpti_ActivitySynchronization2 *)r);
			continue;
		case CUPTI_ACTIVITY_KIND_MARKER:
			c->counts.markers++;
			conv_marker(c, r);
			continue;
		case CUPTI_ACTIVITY_KIND_MARKER_DATA:
			conv_marker_data(c, r);
			continue;
		case CUPTI_ACTIVITY_KIND_MEMORY2:
			c->counts.memory++;
			conv_memory(c, r);
			continue;
		case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
			conv_memory_pool(c, r);
			continue;
		case CUPTI_ACTIVITY_KIND_OVERHEAD:
			c->counts.overheads++;
			conv_overhead(c, r);
			continue;
		default:
			c->counts.other++;
			continue;
		}
		if (!conv_span_ok(start, end)) {
			/* Unfinished at a forced flush, or CUPTI ran out of device buffers. */
			c->counts.no_timestamp++;
			continue;
		}
		uint32_t idx;
		if (!get_stream(c, dev, ctx, sid, &idx))
			break;
		work[nw++] = (struct gwork){
		    .r = r,
		    .stream = idx,
		    .ts = conv_rel(c, start),
		    .dur = (int64_t)(end - start),
		    .corr = corr,
		};
	}
	qsort(work, nw, sizeof(*work), gwork_cmp);
	for (size_t i = 0; i < nw && !c->err; i++)
		emit_gwork(c, &work[i]);
	free(work);
	conv_memory_flush(c, 0);
	/* Graph launches: their node count is unknown, so an API call with GPU work is written
	 * once a later batch brought it nothing more. */
	for (size_t i = 0; i < c->pending_cap && !c->err; i++) {
		struct pending_api *p = &c->pending[i];
		if (p->used && p->expect < 0 && p->nflows && p->batch_added < c->batch)
			emit_pending(c, i, 0);
	}
	return c->err;
}

/* ---- life cycle ---- */

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
		if (opts->max_pending)
			c->opts.max_pending = opts->max_pending;
	}
	c->pid = info->pid;
	c->start = info->start_boottime_ns;
	cuptrace_strtab_init(&c->strs);
	cuptrace_u64map_init(&c->thread_names);
	cuptrace_u64map_init(&c->threads);
	cuptrace_u64map_init(&c->demangled);
	cuptrace_u64map_init(&c->ctx_dev);
	cuptrace_u64map_init(&c->stream_idx);
	cuptrace_u64map_init(&c->stream_names);
	cuptrace_u64map_init(&c->corr_idx);
	cuptrace_u64map_init(&c->nvtx_open);
	cuptrace_u64map_init(&c->nvtx_data);
	cuptrace_u64map_init(&c->nvtx_startend);
	c->corr_cap = CORR_RING;
	c->corr = calloc(c->corr_cap, sizeof(*c->corr));
	c->pending_cap = c->opts.max_pending;
	c->pending = calloc(c->pending_cap, sizeof(*c->pending));
	c->pending_free = malloc(c->pending_cap * sizeof(size_t));
	c->runtime_name_ids = calloc(cuptrace_runtime_cbid_names_len + 1, sizeof(uint32_t));
	c->driver_name_ids = calloc(cuptrace_driver_cbid_names_len + 1, sizeof(uint32_t));
	c->runtime_expect =
	    conv_expect_table(cuptrace_runtime_cbid_names, cuptrace_runtime_cbid_names_len);
	c->driver_expect =
	    conv_expect_table(cuptrace_driver_cbid_names, cuptrace_driver_cbid_names_len);
	if (!c->corr || !c->pending || !c->pending_free || !c->runtime_expect ||
	    !c->driver_expect || !c->runtime_name_ids || !c->driver_name_ids) {
		cuptrace_converter_free(c);
		return NULL;
	}
	for (size_t i = 0; i < c->corr_cap; i++)
		c->corr[i].pending = -1;
	c->cat_runtime = conv_intern(c, "cuda_runtime");
	c->cat_driver = conv_intern(c, "cuda_driver");
	for (size_t i = 0; i < c->pending_cap; i++)
		c->pending_free[i] = c->pending_cap - 1 - i;
	c->npending_free = c->pending_cap;
	uint32_t noise[64];
	size_t nn = cuptrace_driver_noise_cbids(noise, 64);
	for (size_t i = 0; i < nn; i++)
		if (noise[i] < 8192)
			c->driver_noise[noise[i] / 8] |= (uint8_t)(1u << (noise[i] % 8));
	for (size_t i = 0; i < info->nmeta; i++)
		conv_meta_set(c, info->meta[i].key, info->meta[i].s, info->meta[i].i,
		              info->meta[i].is_int);
	c->err = sink->ops->begin(sink, info);
	c->process_uuid = conv_uuid(c, U_PROCESS, 0);
	struct cuptrace_track p = {
	    .uuid = c->process_uuid,
	    .kind = CUPTRACE_TRACK_PROCESS,
	    .pid = c->pid,
	    .name = info->process_name ? info->process_name : "process",
	};
	declare(c, &p);
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
	uint64_t *slot = cuptrace_u64map_put(&c->thread_names, (uint64_t)tid, NULL);
	if (!slot)
		return c->err = -ENOMEM;
	*slot = conv_intern(c, name);
	return 0;
}

void cuptrace_converter_dropped(struct cuptrace_converter *c, uint64_t cupti, uint64_t cuptrace)
{
	c->dropped_cupti = cupti;
	c->dropped_cuptrace = cuptrace;
}

int cuptrace_converter_finish(struct cuptrace_converter *c)
{
	for (size_t i = 0; i < c->pending_cap; i++)
		if (c->pending[i].used)
			emit_pending(c, i, 1);
	for (size_t i = 0; i < c->corr_cap; i++)
		c->counts.unlinked_gpu += c->corr[i].norphans;
	conv_extra_finish(c);
	const struct cuptrace_convert_counts *k = &c->counts;
	const struct {
		const char *key;
		uint64_t v;
	} m[] = {
	    {"records", k->records},
	    {"runtime_calls", k->runtime},
	    {"driver_calls", k->driver - k->driver_filtered},
	    {"driver_calls_filtered", k->driver_filtered},
	    {"kernels", k->kernels},
	    {"memcpys", k->memcpys},
	    {"memsets", k->memsets},
	    {"syncs", k->syncs},
	    {"nvtx_markers", k->markers},
	    {"nvtx_start_end_ranges", k->nvtx_startend},
	    {"module_static_allocations", k->static_memory},
	    {"flows", k->flows},
	    {"gpu_activities_without_api_record", k->unlinked_gpu},
	    {"gpu_records_without_timestamps", k->no_timestamp},
	    {"dropped_records_cupti", c->dropped_cupti},
	    {"dropped_records_cuptrace", c->dropped_cuptrace},
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		conv_meta_set(c, m[i].key, NULL, (int64_t)m[i].v, 1);
	if (!c->err && c->sink->ops->meta) {
		int r = c->sink->ops->meta(c->sink, c->meta, c->nmeta);
		if (r)
			c->err = r;
	}
	return c->err;
}

const struct cuptrace_convert_counts *cuptrace_converter_counts(const struct cuptrace_converter *c)
{
	return &c->counts;
}

void cuptrace_converter_free(struct cuptrace_converter *c)
{
	if (!c)
		return;
	if (c->corr)
		for (size_t i = 0; i < c->corr_cap; i++)
			corr_release(c, &c->corr[i]);
	if (c->pending)
		for (size_t i = 0; i < c->pending_cap; i++)
			free(c->pending[i].flows);
	conv_extra_free(c);
	free(c->corr);
	free(c->pending);
	free(c->pending_free);
	free(c->runtime_expect);
	free(c->runtime_name_ids);
	free(c->driver_name_ids);
	free(c->driver_expect);
	free(c->streams);
	free(c->meta);
	cuptrace_strtab_free(&c->strs);
	cuptrace_u64map_free(&c->thread_names);
	cuptrace_u64map_free(&c->threads);
	cuptrace_u64map_free(&c->demangled);
	cuptrace_u64map_free(&c->ctx_dev);
	cuptrace_u64map_free(&c->stream_idx);
	cuptrace_u64map_free(&c->stream_names);
	cuptrace_u64map_free(&c->corr_idx);
	cuptrace_u64map_free(&c->nvtx_open);
	cuptrace_u64map_free(&c->nvtx_data);
	cuptrace_u64map_free(&c->nvtx_startend);
	free(c);
}
