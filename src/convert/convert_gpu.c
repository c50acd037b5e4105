/* GPU work: kernels, memcpys and memsets (or whole CUDA graph launches, --cuda-graphs graph) on
 * their streams' tracks, and synchronization records.
 *
 * A batch is one CUPTI buffer, and one stream's work can arrive out of time order across
 * buffers. So GPU work waits in a reorder window (in drawing order, records copied) until
 * the watermark passes it (no earlier record can still arrive: CONV_WATERMARK_NS behind the
 * newest end seen) or the window is full (then the earliest goes first), and is drawn in start
 * order: each slice goes on the stream's first lane whose last slice ended at or before it
 * starts. Only truly overlapping work (graph branches), or work later than the window allows,
 * gets further lanes that share the stream's name, so no track ever holds partially
 * overlapping slices. The window holds GPU_WINDOW records between batches, and at most one
 * batch's more while a batch is taken in.
 *
 * The flow from each activity's API call is handed out at the end of its batch, as when work
 * was drawn at once, so convert_corr.c sees GPU records arrive as before; an API call it held
 * back for this work is handed over and written just before it. Flows and the drawing of syncs
 * under their API call are convert_corr.c's. */
#define _GNU_SOURCE
#include "common/nccl.h"
#include "convert/conv_state.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One GPU activity, from its arrival until it is drawn: the record itself is copied into a slot
 * of c->slots, since the batch's buffer goes away. */
struct gwork {
	int64_t ts, dur;
	uint64_t seq;  /* arrival order: ties are drawn as they came */
	uint64_t flow; /* the flow in from its API call (0: none), handed out at the batch's end */
	uint32_t stream; /* index into c->streams */
	uint32_t corr;
	uint32_t slot;    /* in c->slots */
	uint32_t name_id; /* a kernel's demangled name, interned; 0: none */
};

/* What drawing a GPU activity needs of its record, copied out of the batch's buffer (which
 * goes away): 88 bytes of a kernel record's 216, so the window's slots stay small. A graph
 * launched from the GPU keeps its launch mode in mem_kind and its launcher graph in src_dev. */
struct gpu_rec {
	uint8_t kind;
	uint8_t copy_kind, src_kind, dst_kind, async; /* copies */
	uint8_t mem_kind;                             /* memsets */
	uint16_t regs;                                /* kernels, and below */
	int32_t dims[6];                              /* grid x y z, block x y z */
	int32_t smem_static, smem_dyn;
	uint32_t local_mem, cluster[3];
	uint32_t src_dev, dst_dev; /* peer copies */
	uint32_t value;            /* memsets */
	uint32_t graph_id;         /* all but peer copies */
	uint64_t graph_node, bytes;
};

struct gpu_slot {
	struct gpu_rec r;
	/* The API call that was held back for this work, written just before it (api.used). */
	struct pending_api api;
};

/* GPU records the window holds between batches (about 280 bytes each: its 184-byte slot, and
 * 48 bytes in the window and as many in the merge's spare array: 2.3 MB):
 * the kernel records of about four 1 MiB CUPTI buffers, the default size; records arrive out of
 * order by about one buffer's worth. */
#define GPU_WINDOW (1u << 13)

/* Graphs launched from the GPU on a stream of the device runtime's own (fire and forget), which
 * no host stream's id names, get a track of their own under their GPU. */
#define DEVICE_LAUNCH_STREAM UINT32_MAX
#define DEVICE_LAUNCH_TRACK  "Graphs launched from the GPU"

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
		if (CUPTRACE_GROW(c->streams, c->streams_cap, c->nstreams + 1)) {
			c->err = -ENOMEM;
			return NULL;
		}
		struct stream *s = &c->streams[c->nstreams];
		memset(s, 0, sizeof(*s));
		s->dev = dev;
		s->ctx = ctx;
		s->id = id;
		*slot = ++c->nstreams;
		conv_gpu_used(c, dev); /* work on it, drawn or not (a capture window) */
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
	if (s->id == DEVICE_LAUNCH_STREAM)
		snprintf(s->name, sizeof(s->name), other_ctx ? "%s (context %u)" : "%s",
		         DEVICE_LAUNCH_TRACK, s->ctx);
	else if (nm)
		snprintf(s->name, sizeof(s->name), "%s (stream %u)", conv_str(c, (uint32_t)*nm),
		         s->id);
	else if (other_ctx)
		snprintf(s->name, sizeof(s->name), "Stream %u (context %u)", s->id, s->ctx);
	else
		snprintf(s->name, sizeof(s->name), "Stream %u", s->id);
	s->declared = 1;
}

static uint32_t demangle(struct cuptrace_converter *c, const char *mangled)
{
	typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
	static demangle_fn fn;
	static int looked;
	uint32_t mid = conv_intern(c, mangled);
	uint64_t *slot = cuptrace_u64map_get(&c->demangled, mid);
	if (slot)
		return (uint32_t)*slot;
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
	return did;
}

/* The same kernel name pointer comes back for every launch: remember what it demangled to.
 * CUPTI may reuse a pointer for another name after a module reload, so a hit is confirmed by
 * comparing the text with the interned mangled name (cheaper than hashing it again). */
static uint32_t demangle_cached(struct cuptrace_converter *c, const char *mangled)
{
	size_t slot = (size_t)(cuptrace_hash64((uint64_t)(uintptr_t)mangled) % NAME_CACHE);
	struct name_cache *e = &c->names[slot];
	if (e->ptr == mangled && !strcmp(conv_str(c, e->mangled), mangled))
		return e->demangled;
	uint32_t d = demangle(c, mangled);
	e->ptr = mangled;
	e->mangled = conv_intern(c, mangled);
	e->demangled = d;
	return d;
}

/* "(x, y, z)" for grid and block; launch loops repeat one shape, so the last is kept. */
static void launch_dims(struct cuptrace_converter *c, const int32_t d[6], char *grid, char *block)
{
	if (memcmp(d, c->dims, sizeof(c->dims)) || !c->dims_valid) {
		memcpy(c->dims, d, sizeof(c->dims));
		c->dims_valid = 1;
		snprintf(c->dims_grid, sizeof(c->dims_grid), "(%d, %d, %d)", d[0], d[1], d[2]);
		snprintf(c->dims_block, sizeof(c->dims_block), "(%d, %d, %d)", d[3], d[4], d[5]);
	}
	memcpy(grid, c->dims_grid, sizeof(c->dims_grid));
	memcpy(block, c->dims_block, sizeof(c->dims_block));
}

/* Drawn first on a stream: earlier start, then the longer (so the shorter nests), then the
 * first come. A total order (seq is unique), so every sort and merge below agrees on it. */
static int gwork_before(const struct gwork *x, const struct gwork *y)
{
	if (x->ts != y->ts)
		return x->ts < y->ts;
	if (x->dur != y->dur)
		return x->dur > y->dur;
	return x->seq < y->seq;
}

static int gwork_cmp(const void *a, const void *b)
{
	const struct gwork *x = a, *y = b;
	return gwork_before(x, y) ? -1 : gwork_before(y, x);
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

/* An NCCL kernel: the collective its name says, as arguments (common/nccl.h); k holds the
 * strings the arguments point to. */
static size_t nccl_args(struct cuptrace_arg *A, size_t na, const char *name,
                        struct cuptrace_nccl_kernel *k)
{
	if (!cuptrace_nccl_parse(name, k))
		return na;
	const struct {
		const char *key, *v;
	} f[] = {{"nccl_collective", k->collective},
	         {"nccl_reduction", k->reduction},
	         {"nccl_dtype", k->dtype},
	         {"nccl_algorithm", k->algorithm},
	         {"nccl_protocol", k->protocol}};
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if (*f[i].v)
			A[na++] = (struct cuptrace_arg){
			    .key = f[i].key, .type = CUPTRACE_ARG_STRING, .v.s = f[i].v};
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

static const char *device_launch_mode(uint8_t mode)
{
	switch (mode) {
	case CUPTI_DEVICE_GRAPH_LAUNCH_MODE_FIRE_AND_FORGET:
		return "fire and forget";
	case CUPTI_DEVICE_GRAPH_LAUNCH_MODE_TAIL:
		return "tail";
	case CUPTI_DEVICE_GRAPH_LAUNCH_MODE_FIRE_AND_FORGET_AS_SIBLING:
		return "fire and forget, as sibling";
	default:
		return "unknown";
	}
}

static int emit_gwork(struct cuptrace_converter *c, const struct gwork *w)
{
	struct gpu_slot *slot = &c->slots[w->slot];
	const struct gpu_rec *r = &slot->r;
	/* Its API call first, if it was held back for this work (c->args is free again after). */
	conv_corr_write_taken(c, &slot->api);
	struct stream *s = &c->streams[w->stream];
	if (!s->declared) {
		conv_declare_gpu(c, s->dev);
		name_stream(c, s);
	}
	int64_t ts = w->ts, dur = w->dur;
	uint64_t track = conv_lane_assign(c, s->lanes, &s->nlanes, &ts, &dur, s->name,
	                                  c->gpus[s->dev % MAX_GPUS].uuid, (int32_t)s->id);
	char name[256], grid[48], block[48], cl[48];
	struct cuptrace_nccl_kernel nccl;
	const char *nm = name, *cat = "kernel";
	size_t na = 0;
	struct cuptrace_arg *A = c->args;
	double gbps = 0;
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		nm = w->name_id ? conv_str(c, w->name_id) : "kernel";
		launch_dims(c, r->dims, grid, block);
		A[na++] =
		    (struct cuptrace_arg){.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = grid};
		A[na++] = (struct cuptrace_arg){
		    .key = "block", .type = CUPTRACE_ARG_STRING, .v.s = block};
		A[na++] = (struct cuptrace_arg){
		    .key = "registers", .type = CUPTRACE_ARG_INT, .v.i = r->regs};
		A[na++] = (struct cuptrace_arg){.key = "shared_memory",
		                                .type = CUPTRACE_ARG_INT,
		                                .v.i = (int64_t)r->smem_static + r->smem_dyn};
		if (r->smem_dyn)
			A[na++] = (struct cuptrace_arg){.key = "dynamic_shared_memory",
			                                .type = CUPTRACE_ARG_INT,
			                                .v.i = r->smem_dyn};
		if (r->local_mem)
			A[na++] = (struct cuptrace_arg){.key = "local_memory_per_thread",
			                                .type = CUPTRACE_ARG_INT,
			                                .v.i = r->local_mem};
		if (r->cluster[0] * r->cluster[1] * r->cluster[2] > 1) {
			snprintf(cl, sizeof(cl), "(%u, %u, %u)", r->cluster[0], r->cluster[1],
			         r->cluster[2]);
			A[na++] = (struct cuptrace_arg){
			    .key = "cluster", .type = CUPTRACE_ARG_STRING, .v.s = cl};
		}
		na = graph_args(A, na, r->graph_id, r->graph_node);
		na = nccl_args(A, na, nm, &nccl);
		c->counts.kernels++;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY:
		na = copy_args(A, name, sizeof(name), r->copy_kind, r->src_kind, r->dst_kind,
		               r->bytes);
		cat = "memcpy";
		A[na++] = (struct cuptrace_arg){.key = "src",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = conv_mem_kind_name(r->src_kind)};
		A[na++] = (struct cuptrace_arg){.key = "dst",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = conv_mem_kind_name(r->dst_kind)};
		A[na++] = (struct cuptrace_arg){
		    .key = "async", .type = CUPTRACE_ARG_BOOL, .v.b = r->async};
		na = graph_args(A, na, r->graph_id, r->graph_node);
		gbps = w->dur > 0 ? (double)r->bytes / (double)w->dur : 0;
		c->counts.memcpys++;
		break;
	case CUPTI_ACTIVITY_KIND_MEMCPY2:
		na = copy_args(A, name, sizeof(name), r->copy_kind, r->src_kind, r->dst_kind,
		               r->bytes);
		cat = "memcpy";
		A[na++] = (struct cuptrace_arg){
		    .key = "src_device", .type = CUPTRACE_ARG_UINT, .v.u = r->src_dev};
		A[na++] = (struct cuptrace_arg){
		    .key = "dst_device", .type = CUPTRACE_ARG_UINT, .v.u = r->dst_dev};
		gbps = w->dur > 0 ? (double)r->bytes / (double)w->dur : 0;
		c->counts.memcpys++;
		break;
	case CUPTI_ACTIVITY_KIND_MEMSET:
		snprintf(name, sizeof(name), "Memset (%s)", conv_mem_kind_name(r->mem_kind));
		cat = "memset";
		A[na++] = (struct cuptrace_arg){
		    .key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = r->bytes};
		A[na++] = (struct cuptrace_arg){
		    .key = "value", .type = CUPTRACE_ARG_UINT, .v.u = r->value};
		na = graph_args(A, na, r->graph_id, r->graph_node);
		gbps = w->dur > 0 ? (double)r->bytes / (double)w->dur : 0;
		c->counts.memsets++;
		break;
	case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
	case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE:
		/* Named by graph, so that launches of one graph group together in the analyses
		 * and in diff, as one kernel's do; launched from the GPU or from the host alike. */
		snprintf(name, sizeof(name), "CUDA graph %u", r->graph_id);
		cat = "graph";
		A[na++] = (struct cuptrace_arg){
		    .key = "graph_id", .type = CUPTRACE_ARG_UINT, .v.u = r->graph_id};
		c->counts.graph_launches++;
		if (r->kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE)
			break;
		/* Launched by a kernel of another graph (no API call, so no flow in): who
		 * launched it and how. */
		A[na++] = (struct cuptrace_arg){
		    .key = "launched_by_graph", .type = CUPTRACE_ARG_UINT, .v.u = r->src_dev};
		A[na++] = (struct cuptrace_arg){.key = "device_launch",
		                                .type = CUPTRACE_ARG_STRING,
		                                .v.s = device_launch_mode(r->mem_kind)};
		c->counts.device_graph_launches++;
		break;
	default:
		return 0;
	}
	if (r->kind != CUPTI_ACTIVITY_KIND_GRAPH_TRACE &&
	    r->kind != CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE && r->graph_id)
		c->counts.graph_nodes++;
	if (gbps > 0)
		A[na++] = (struct cuptrace_arg){
		    .key = "bandwidth_gbps", .type = CUPTRACE_ARG_DOUBLE, .v.d = gbps};
	/* The flow into this activity; the API call lists it among its flows out. */
	uint64_t flow = w->flow;
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

/* ---- ordering: drawing order, stream by stream ----
 *
 * CUPTI writes each stream's work in start order almost always, and a window's worth of it is
 * already in drawing order, so the sorts here check before they sort, and merge what is sorted
 * instead of sorting it again: a comparison sort of every record (twice, with the heap it
 * replaced) was a sixth of the converter's time. */

/* Puts a[0..n) in drawing order: left as it is when it already is (the usual case). */
static void sort_drawing(struct gwork *a, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (gwork_before(&a[i], &a[i - 1])) {
			qsort(a, n, sizeof(*a), gwork_cmp);
			return;
		}
}

/* Merges the drawing-ordered runs x[0..nx) and y[0..ny) into out. */
static void merge_drawing(struct gwork *out, const struct gwork *x, size_t nx,
                          const struct gwork *y, size_t ny)
{
	size_t i = 0, j = 0, k = 0;
	while (i < nx && j < ny)
		out[k++] = gwork_before(&y[j], &x[i]) ? y[j++] : x[i++];
	memcpy(out + k, x + i, (nx - i) * sizeof(*x));
	memcpy(out + k + (nx - i), y + j, (ny - j) * sizeof(*y));
}

/* Room for n entries in c->spare: 0 or -ENOMEM (in c->err). */
static int spare_room(struct cuptrace_converter *c, size_t n)
{
	return CUPTRACE_GROW(c->spare, c->spare_cap, n ? n : 1) ? (c->err = -ENOMEM) : 0;
}

/* Groups a[0..n) stream by stream (by index into c->streams), keeping the order within each
 * stream: a stable counting sort through c->spare. Leaves in c->stream_at[s] the start of
 * stream s's run, for s up to c->nstreams (the end). */
static int group_by_stream(struct cuptrace_converter *c, struct gwork *a, size_t n)
{
	size_t ns = c->nstreams;
	if (CUPTRACE_GROW(c->stream_at, c->stream_at_cap, ns + 1) || spare_room(c, n))
		return c->err = -ENOMEM;
	uint32_t *at = c->stream_at;
	memset(at, 0, (ns + 1) * sizeof(*at));
	int one = 1;
	for (size_t i = 0; i < n; i++) {
		at[a[i].stream + 1]++;
		one &= a[i].stream == a[0].stream;
	}
	for (size_t s = 0; s < ns; s++)
		at[s + 1] += at[s];
	if (one || n < 2)
		return 0;
	uint32_t *next = at; /* each bucket's next free place; restored below */
	for (size_t i = 0; i < n; i++)
		c->spare[next[a[i].stream]++] = a[i];
	for (size_t s = ns; s > 0; s--)
		at[s] = at[s - 1];
	at[0] = 0;
	memcpy(a, c->spare, n * sizeof(*a));
	return 0;
}

/* c->work, grouped by stream with each stream in drawing order (c->stream_at: the runs), back
 * into one drawing order: runs merged two by two between c->work and c->spare (as many passes
 * as the log of the streams in the batch). */
static int merge_streams(struct cuptrace_converter *c)
{
	size_t n = c->nwork, ns = c->nstreams, nr = 0;
	if (spare_room(c, n))
		return c->err;
	/* Run bounds, compacted in place in stream_at: empty streams dropped. */
	uint32_t *b = c->stream_at;
	for (size_t s = 0; s < ns; s++)
		if (b[s + 1] > b[s])
			b[nr++] = b[s];
	b[nr] = (uint32_t)n;
	struct gwork *src = c->work, *dst = c->spare;
	while (nr > 1) {
		size_t m = 0;
		for (size_t r = 0; r < nr; r += 2) {
			size_t lo = b[r], mid = b[r + 1], hi = r + 2 <= nr ? b[r + 2] : mid;
			merge_drawing(dst + lo, src + lo, mid - lo, src + mid, hi - mid);
			b[m++] = (uint32_t)lo;
		}
		b[m] = (uint32_t)n;
		nr = m;
		struct gwork *t = src;
		src = dst;
		dst = t;
	}
	if (src != c->work) { /* the result is in spare: the two change places */
		size_t cap = c->work_cap;
		c->work = c->spare, c->work_cap = c->spare_cap;
		c->spare = dst, c->spare_cap = cap;
	}
	return 0;
}

/* Merges the batch (c->work, in drawing order) into the window. */
static int window_add(struct cuptrace_converter *c)
{
	size_t n = c->nwork, total = c->nwin + n;
	/* c->win is NULL until the first batch: no pointer into it before it holds work. */
	if (!c->nwin || !gwork_before(&c->work[0], &c->win[c->win_head + c->nwin - 1])) {
		/* All of it after the window (work arriving in order): appended. */
		if (c->win_head && c->win_head + total > c->win_cap) {
			memmove(c->win, c->win + c->win_head, c->nwin * sizeof(*c->win));
			c->win_head = 0;
		}
		if (CUPTRACE_GROW(c->win, c->win_cap, c->win_head + total))
			return c->err = -ENOMEM;
		memcpy(c->win + c->win_head + c->nwin, c->work, n * sizeof(*c->win));
	} else {
		if (spare_room(c, total))
			return c->err;
		merge_drawing(c->spare, c->win + c->win_head, c->nwin, c->work, n);
		struct gwork *t = c->win;
		size_t cap = c->win_cap;
		c->win = c->spare, c->win_cap = c->spare_cap;
		c->spare = t, c->spare_cap = cap;
		c->win_head = 0;
	}
	c->nwin = total;
	if (total > c->counts.window_peak)
		c->counts.window_peak = total;
	return 0;
}

/* A free slot of c->slots (more when none is free), or UINT32_MAX. */
static uint32_t get_slot(struct cuptrace_converter *c)
{
	if (!c->nslots_free) {
		/* The free list has room for every slot: grown first, to the slots' new size. */
		size_t old = c->slots_cap, fcap = old;
		uint32_t *nf = old < UINT32_MAX / 2
		                   ? cuptrace_grow(c->slots_free, &fcap, old + 1, sizeof(*nf))
		                   : NULL;
		if (nf)
			c->slots_free = nf;
		struct gpu_slot *ns =
		    nf ? cuptrace_grow(c->slots, &c->slots_cap, fcap, sizeof(*ns)) : NULL;
		if (!ns) {
			c->err = -ENOMEM;
			return UINT32_MAX;
		}
		c->slots = ns;
		for (size_t i = c->slots_cap; i > old; i--)
			c->slots_free[c->nslots_free++] = (uint32_t)(i - 1);
	}
	return c->slots_free[--c->nslots_free];
}

/* Draws the work that started before the watermark, and the earliest while the window is over
 * its bound (there late work can still open a lane, as it would without the window); all of it
 * at the end. What leaves together is drawn stream by stream, each in start order. */
static int window_drain(struct cuptrace_converter *c, int all)
{
	if (!c->nwin)
		return c->err;
	int64_t now = c->latest_ts > c->gpu_latest ? c->latest_ts : c->gpu_latest;
	int64_t mark = now - CONV_WATERMARK_NS;
	struct gwork *out = c->win + c->win_head;
	size_t n = 0;
	while (n < c->nwin && (all || c->nwin - n > GPU_WINDOW || out[n].ts <= mark))
		n++;
	if (!n)
		return c->err;
	/* out is in drawing order: grouped by stream, each stream stays in it. On an error
	 * (c->err) the loop below only frees. */
	group_by_stream(c, out, n);
	for (size_t i = 0; i < n; i++) {
		/* The slots were last touched when their batch came in, a window ago, and are
		 * read in an order of their own: fetched ahead, they are in cache when drawn. */
		if (i + 4 < n) {
			const struct gpu_slot *ahead = &c->slots[out[i + 4].slot];
			__builtin_prefetch(&ahead->api);
			__builtin_prefetch(&ahead->r);
			__builtin_prefetch((const char *)&ahead->r + 64);
		}
		if (!c->err)
			emit_gwork(c, &out[i]);
		conv_corr_write_taken(c, &c->slots[out[i].slot].api); /* frees it after an error */
		c->slots_free[c->nslots_free++] = out[i].slot;
	}
	c->nwin -= n;
	c->win_head = c->nwin ? c->win_head + n : 0;
	return c->err;
}

/* ---- a batch: collected in record order, then into the window ---- */

int conv_gpu_batch_begin(struct cuptrace_converter *c, size_t n)
{
	c->nwork = 0;
	if (CUPTRACE_GROW(c->work, c->work_cap, n ? n : 1))
		return c->err = -ENOMEM;
	return 0;
}

int conv_gpu_work(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	uint32_t dev = 0, ctx = 0, sid = 0, corr = 0;
	uint64_t start = 0, end = 0;
	const char *kname = NULL;
	struct gpu_rec g = {.kind = (uint8_t)r->kind};
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
		dev = k->deviceId, ctx = k->contextId, sid = k->streamId;
		corr = k->correlationId, start = k->start, end = k->end;
		g.dims[0] = k->gridX, g.dims[1] = k->gridY, g.dims[2] = k->gridZ;
		g.dims[3] = k->blockX, g.dims[4] = k->blockY, g.dims[5] = k->blockZ;
		g.regs = k->registersPerThread;
		g.smem_static = k->staticSharedMemory, g.smem_dyn = k->dynamicSharedMemory;
		g.local_mem = k->localMemoryPerThread;
		g.cluster[0] = k->clusterX, g.cluster[1] = k->clusterY, g.cluster[2] = k->clusterZ;
		g.graph_id = k->graphId, g.graph_node = k->graphNodeId;
		kname = k->name;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)r;
		dev = m->deviceId, ctx = m->contextId, sid = m->streamId;
		corr = m->correlationId, start = m->start, end = m->end;
		g.copy_kind = m->copyKind, g.src_kind = m->srcKind, g.dst_kind = m->dstKind;
		g.async = !!(m->flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC);
		g.bytes = m->bytes, g.graph_id = m->graphId, g.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)r;
		dev = m->deviceId, ctx = m->contextId, sid = m->streamId;
		corr = m->correlationId, start = m->start, end = m->end;
		g.copy_kind = m->copyKind, g.src_kind = m->srcKind, g.dst_kind = m->dstKind;
		g.bytes = m->bytes, g.src_dev = m->srcDeviceId, g.dst_dev = m->dstDeviceId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)r;
		dev = m->deviceId, ctx = m->contextId, sid = m->streamId;
		corr = m->correlationId, start = m->start, end = m->end;
		g.mem_kind = (uint8_t)m->memoryKind, g.bytes = m->bytes, g.value = m->value;
		g.graph_id = m->graphId, g.graph_node = m->graphNodeId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
		/* A whole graph launch (--cuda-graphs graph). Its device and context are where its
		 * first node ran, INT_MAX when that was a host node: then where its last one ran.
		 */
		const CUpti_ActivityGraphTrace2 *t = (const CUpti_ActivityGraphTrace2 *)r;
		dev = t->deviceId, ctx = t->contextId, sid = t->streamId;
		if (dev >= INT32_MAX)
			dev = t->endDeviceId, ctx = t->endContextId;
		if (dev >= INT32_MAX) {
			c->counts.other++; /* host nodes only: no GPU time to draw */
			return 0;
		}
		corr = t->correlationId, start = t->start, end = t->end;
		g.graph_id = t->graphId;
		break;
	}
	case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE: {
		/* A graph launched from a kernel (--cuda-graphs graph). Its stream id is 64 bits:
		 * fire-and-forget launches came with 1 << 57 on an H200 (a stream of the device
		 * runtime's, no host stream's id); one that fits 32 bits names a host stream. */
		const CUpti_ActivityDeviceGraphTrace *t = (const CUpti_ActivityDeviceGraphTrace *)r;
		dev = t->deviceId, ctx = t->contextId;
		sid = t->streamId && t->streamId < UINT32_MAX ? (uint32_t)t->streamId
		                                              : DEVICE_LAUNCH_STREAM;
		start = t->start, end = t->end;
		g.graph_id = t->graphId;
		g.src_dev = t->launcherGraphId;
		g.mem_kind = (uint8_t)t->deviceLaunchMode;
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
	uint32_t idx, slot;
	if (!get_stream(c, dev, ctx, sid, &idx) || (slot = get_slot(c)) == UINT32_MAX)
		return c->err;
	struct gpu_slot *sl = &c->slots[slot];
	sl->r = g;
	memset(&sl->api, 0, sizeof(sl->api));
	uint32_t name_id = 0;
	if (kname) {
		/* The name pointer is good only while the batch is handled. */
		const char *kn = conv_resolve(c, kname);
		name_id = kn ? demangle_cached(c, kn) : 0;
	}
	struct gwork *w = &c->work[c->nwork++];
	*w = (struct gwork){
	    .ts = conv_rel(c, start),
	    .dur = (int64_t)(end - start),
	    .seq = c->gpu_seq++,
	    .stream = idx,
	    .corr = corr,
	    .slot = slot,
	    .name_id = name_id,
	};
	if (w->ts + w->dur > c->gpu_latest)
		c->gpu_latest = w->ts + w->dur;
	return 0;
}

/* Into the window, with the flow from its API call: handed out now, in the batch's stream and
 * time order (once the batch's API calls are in), so API calls held back for their GPU work
 * and flow ids are as if it were drawn at once. */
int conv_gpu_batch_end(struct cuptrace_converter *c)
{
	size_t n = c->nwork;
	if (!n || c->err)
		goto out;
	if (group_by_stream(c, c->work, n))
		goto out;
	for (size_t s = 0; s < c->nstreams; s++)
		sort_drawing(c->work + c->stream_at[s], c->stream_at[s + 1] - c->stream_at[s]);
	for (size_t i = 0; i < n && !c->err; i++) {
		struct gwork *w = &c->work[i];
		w->flow = conv_corr_flow_in(c, w->corr, w->ts + w->dur, &c->slots[w->slot].api);
	}
	if (!c->err)
		merge_streams(c);
	if (!c->err && !window_add(c))
		n = 0; /* in the window now */
out:
	/* What did not get into the window (an error) is only freed. */
	for (size_t i = 0; i < n; i++) {
		conv_corr_write_taken(c, &c->slots[c->work[i].slot].api);
		c->slots_free[c->nslots_free++] = c->work[i].slot;
	}
	c->nwork = 0;
	return window_drain(c, 0);
}

int conv_gpu_finish(struct cuptrace_converter *c)
{
	return window_drain(c, 1);
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
	for (size_t i = 0; i < c->nwin; i++)
		free(c->slots[c->win[c->win_head + i].slot].api.flows);
	free(c->work);
	free(c->win);
	free(c->spare);
	free(c->stream_at);
	free(c->slots);
	free(c->slots_free);
	free(c->streams);
	cuptrace_u64map_free(&c->stream_idx);
	cuptrace_u64map_free(&c->demangled);
}
