/* cuptrace top's aggregator (top.h): a sink per process adds each event to the interval's
 * counters; cuptrace_top_tick closes the interval. Definitions in top.h. */
#include "top/top.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/saturate.h"
#include "stats/busy.h"

/* GPU work that reached top since the last tick, for the idle sweep: its launch link. */
struct top_work {
	int64_t ts, end;
	uint64_t flow, corr; /* flow id in, correlation id; 0: none */
	uint32_t stream;
};

/* A GPU's work spans not yet behind a closed window, and its work not yet swept for gaps. */
struct top_busy_spans {
	struct cuptrace_busy_span *v;
	size_t n, cap;
	struct top_work *w;
	size_t nw, wcap;
};

/* A process's host calls that idle causes need (idle_cause.h): the launch calls by flow and
 * correlation id (a queue by arrival, dropped LAUNCH_KEEP_NS of trace time behind the
 * process's frontier), and per thread its blocking calls (synchronize, synchronous copies),
 * dropped once every GPU's swept union is past their end. Memory: bounded by the launches of
 * LAUNCH_KEEP_NS and the blocking calls of about one interval. */
#define LAUNCH_KEEP_NS 30000000000ll
struct top_launch {
	int64_t ts;
	uint64_t thread;
	uint64_t key; /* flow id or correlation id */
	int is_flow;
};
struct top_block {
	int64_t ts, end;
};
struct top_blocks {
	struct top_block *v; /* by start */
	size_t n, cap;
};
struct top_hosts {
	struct cuptrace_u64map flow, corr; /* id -> seq + 1 */
	struct top_launch *q;              /* seq = base + index */
	size_t n, cap, head;
	uint64_t base;
	struct cuptrace_u64map thr; /* tid -> index + 1 in th */
	struct top_blocks *th;
	size_t nth, thcap;
};

enum trk_kind { TK_OTHER, TK_GPU, TK_STREAM, TK_MEM, TK_THREAD };

struct trk {
	enum trk_kind kind;
	uint32_t gpu;    /* TK_GPU, TK_STREAM, TK_MEM: index in t->gpus */
	uint32_t stream; /* TK_STREAM: row in t->streams */
	uint64_t thread; /* TK_THREAD: its tid */
};

struct top_sink {
	struct cuptrace_sink base;
	struct cuptrace_top *t;
	int proc; /* -1 until begin */
	struct trk *trk;
	size_t ntrk, trkcap;
	struct cuptrace_u64map index; /* uuid -> trk + 1 */
};

const char *const cuptrace_top_sort_names[TOP_NSORTS] = {"time", "calls", "avg", "total", "name"};

static int fail(struct cuptrace_top *t, int err)
{
	if (!t->err)
		t->err = err;
	return t->err;
}

static void hosts_free(struct top_hosts *h)
{
	if (!h)
		return;
	cuptrace_u64map_free(&h->flow);
	cuptrace_u64map_free(&h->corr);
	cuptrace_u64map_free(&h->thr);
	free(h->q);
	for (size_t i = 0; i < h->nth; i++)
		free(h->th[i].v);
	free(h->th);
	free(h);
}

static struct top_hosts *hosts_new(void)
{
	struct top_hosts *h = calloc(1, sizeof(*h));
	if (h) {
		cuptrace_u64map_init(&h->flow);
		cuptrace_u64map_init(&h->corr);
		cuptrace_u64map_init(&h->thr);
	}
	return h;
}

/* Notes a launch call's id (flow or correlation). 0 or -ENOMEM. */
static int launch_add(struct top_hosts *h, int is_flow, uint64_t key, int64_t ts, uint64_t thread)
{
	struct top_launch *q = cuptrace_grow(h->q, &h->cap, h->n + 1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	h->q = q;
	uint64_t *v = cuptrace_u64map_put(is_flow ? &h->flow : &h->corr, key, NULL);
	if (!v)
		return -ENOMEM;
	q[h->n] = (struct top_launch){ts, thread, key, is_flow};
	*v = h->base + h->n + 1;
	h->n++;
	return 0;
}

static const struct top_launch *launch_get(const struct top_hosts *h, int is_flow, uint64_t key)
{
	uint64_t *v = key ? cuptrace_u64map_get(is_flow ? &h->flow : &h->corr, key) : NULL;
	if (!v || *v - 1 < h->base + h->head)
		return NULL;
	return &h->q[*v - 1 - h->base];
}

/* Drops the launches that began before cut (the queue is by arrival, close to by time). */
static void launch_prune(struct top_hosts *h, int64_t cut)
{
	while (h->head < h->n && h->q[h->head].ts < cut) {
		const struct top_launch *l = &h->q[h->head];
		struct cuptrace_u64map *m = l->is_flow ? &h->flow : &h->corr;
		uint64_t *v = cuptrace_u64map_get(m, l->key);
		if (v && *v == h->base + h->head + 1)
			cuptrace_u64map_del(m, l->key);
		h->head++;
	}
	if (h->head > 4096 && h->head > h->n / 2) {
		memmove(h->q, h->q + h->head, (h->n - h->head) * sizeof(*h->q));
		h->n -= h->head;
		h->base += h->head;
		h->head = 0;
	}
}

static struct top_blocks *blocks_of(struct top_hosts *h, uint64_t thread, int make)
{
	uint64_t *v = cuptrace_u64map_get(&h->thr, thread);
	if (v || !make)
		return v ? &h->th[*v - 1] : NULL;
	struct top_blocks *th = cuptrace_grow(h->th, &h->thcap, h->nth + 1, sizeof(*th));
	if (!th || !(v = cuptrace_u64map_put(&h->thr, thread, NULL)))
		return NULL;
	h->th = th;
	th[h->nth] = (struct top_blocks){0};
	*v = ++h->nth;
	return &th[h->nth - 1];
}

/* A blocking call of a thread, kept in start order (they arrive nearly so). */
static int block_add(struct top_hosts *h, uint64_t thread, int64_t ts, int64_t end)
{
	struct top_blocks *b = blocks_of(h, thread, 1);
	if (!b)
		return -ENOMEM;
	struct top_block *v = cuptrace_grow(b->v, &b->cap, b->n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	b->v = v;
	size_t i = b->n++;
	while (i > 0 && v[i - 1].ts > ts) {
		v[i] = v[i - 1];
		i--;
	}
	v[i] = (struct top_block){ts, end};
	return 0;
}

struct sync_q {
	const struct top_hosts *h;
	uint64_t thread;
};

/* Did the thread sit in a blocking call during [a, b)? As analyze walks them (analyze_query.c):
 * back from the last one starting before b, stopping after two in a row that end before a. */
static int synced(const void *ctx, int64_t a, int64_t b)
{
	const struct sync_q *q = ctx;
	uint64_t *v = cuptrace_u64map_get(&q->h->thr, q->thread);
	if (!v)
		return 0;
	const struct top_blocks *bl = &q->h->th[*v - 1];
	size_t lo = 0, hi = bl->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (bl->v[mid].ts < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	int before = 0;
	for (size_t i = lo, n = 0; i > 0 && before < 2 && n < 64; i--, n++) {
		const struct top_block *k = &bl->v[i - 1];
		int64_t s = k->ts > a ? k->ts : a, e = k->end < b ? k->end : b;
		if (e > s)
			return 1;
		before++;
	}
	return 0;
}

/* Drops the blocking calls that ended before cut. */
static void blocks_prune(struct top_hosts *h, int64_t cut)
{
	for (size_t t = 0; t < h->nth; t++) {
		struct top_blocks *b = &h->th[t];
		size_t k = 0;
		for (size_t i = 0; i < b->n; i++)
			if (b->v[i].end >= cut)
				b->v[k++] = b->v[i];
		b->n = k;
	}
}

int cuptrace_top_init(struct cuptrace_top *t)
{
	memset(t, 0, sizeof(*t));
	t->top_cpu_pct = -1;
	cuptrace_strtab_init(&t->strs);
	cuptrace_u64map_init(&t->kernels.index);
	cuptrace_u64map_init(&t->api.index);
	cuptrace_u64map_init(&t->streams.index);
	cuptrace_u64map_init(&t->nccl.index);
	return 0;
}

static void tab_free(struct top_tab *tab)
{
	free(tab->v);
	cuptrace_u64map_free(&tab->index);
}

void cuptrace_top_free(struct cuptrace_top *t)
{
	tab_free(&t->kernels);
	tab_free(&t->api);
	tab_free(&t->streams);
	tab_free(&t->nccl);
	for (size_t i = 0; i < t->ngpus; i++) {
		if (t->gpus[i].spans) {
			free(t->gpus[i].spans->v);
			free(t->gpus[i].spans->w);
		}
		free(t->gpus[i].spans);
	}
	free(t->gpus);
	for (size_t i = 0; i < t->nprocs; i++) {
		free(t->procs[i].name);
		hosts_free(t->procs[i].hosts);
	}
	free(t->procs);
	cuptrace_strtab_free(&t->strs);
	memset(t, 0, sizeof(*t));
}

/* The row of name (key: a further distinction, the process of a stream) in tab, made if new;
 * NULL when out of memory. */
static struct top_row *tab_row(struct cuptrace_top *t, struct top_tab *tab, const char *name,
                               size_t len, uint32_t key)
{
	uint32_t id = cuptrace_strtab_intern(&t->strs, name, len);
	if (!id)
		return NULL;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&tab->index, (uint64_t)key << 32 | id, &created);
	if (!slot)
		return NULL;
	if (created) {
		struct top_row *v = cuptrace_grow(tab->v, &tab->cap, tab->n + 1, sizeof(*v));
		if (!v) {
			cuptrace_u64map_del(&tab->index, (uint64_t)key << 32 | id);
			return NULL;
		}
		tab->v = v;
		tab->v[tab->n] =
		    (struct top_row){.name = cuptrace_strtab_str(&t->strs, id), .proc = key};
		*slot = ++tab->n;
	}
	return &tab->v[*slot - 1];
}

static void stat_add(struct top_stat *s, int64_t ns)
{
	s->calls++;
	s->ns = sat_add(s->ns, ns);
}

static void stat_roll(struct top_stat *cur, struct top_stat *last, struct top_stat *tot)
{
	*last = *cur;
	tot->calls += cur->calls;
	tot->ns = sat_add(tot->ns, cur->ns);
	*cur = (struct top_stat){0};
}

static struct top_sink *to_sink(struct cuptrace_sink *s)
{
	return (struct top_sink *)s;
}

static struct trk *find_trk(struct top_sink *s, uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(&s->index, uuid);
	return v ? &s->trk[*v - 1] : NULL;
}

static int tk_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct top_sink *s = to_sink(sk);
	struct cuptrace_top *t = s->t;
	struct top_proc *p = cuptrace_grow(t->procs, &t->proccap, t->nprocs + 1, sizeof(*p));
	if (!p)
		return fail(t, -ENOMEM);
	t->procs = p;
	p = &t->procs[t->nprocs];
	*p = (struct top_proc){.pid = info->pid, .tracer_cpu_pct = -1};
	s->proc = (int)t->nprocs++;
	if (!(p->name = strdup(info->process_name ? info->process_name : "")) ||
	    !(p->hosts = hosts_new()))
		return fail(t, -ENOMEM);
	return 0;
}

static int tk_track(struct cuptrace_sink *sk, const struct cuptrace_track *tr)
{
	struct top_sink *s = to_sink(sk);
	struct cuptrace_top *t = s->t;
	struct trk k = {TK_OTHER, 0, 0, 0};
	struct trk *parent = find_trk(s, tr->parent_uuid);
	const char *name = tr->name ? tr->name : "";
	if (tr->kind == CUPTRACE_TRACK_GROUP) {
		struct top_gpu *g = cuptrace_grow(t->gpus, &t->gpucap, t->ngpus + 1, sizeof(*g));
		uint32_t id = cuptrace_strtab_intern(&t->strs, name, strlen(name));
		if (!g || !id)
			return fail(t, -ENOMEM);
		t->gpus = g;
		g = &t->gpus[t->ngpus];
		*g = (struct top_gpu){.name = cuptrace_strtab_str(&t->strs, id),
		                      .proc = s->proc < 0 ? 0 : (uint32_t)s->proc};
		if (!(g->spans = calloc(1, sizeof(*g->spans))))
			return fail(t, -ENOMEM);
		k = (struct trk){TK_GPU, (uint32_t)t->ngpus++, 0, 0};
	} else if (parent && parent->kind == TK_GPU && tr->kind == CUPTRACE_TRACK_COUNTER) {
		k = (struct trk){strcmp(name, "Device memory in use") ? TK_OTHER : TK_MEM,
		                 parent->gpu, 0, 0};
	} else if (parent && (parent->kind == TK_GPU || parent->kind == TK_STREAM) &&
	           tr->kind == CUPTRACE_TRACK_SLICES) {
		/* A stream's lanes share its name: one row per GPU and name. */
		char buf[256];
		const char *gname = t->gpus[parent->gpu].name;
		size_t glen = strcspn(gname, ":");
		int n = snprintf(buf, sizeof(buf), "%.*s %s", (int)glen, gname, name);
		size_t len = n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1;
		struct top_row *row =
		    tab_row(t, &t->streams, buf, len, s->proc < 0 ? 0 : (uint32_t)s->proc);
		if (!row)
			return fail(t, -ENOMEM);
		k = (struct trk){TK_STREAM, parent->gpu, (uint32_t)(row - t->streams.v), 0};
	} else if (tr->kind == CUPTRACE_TRACK_THREAD) {
		k.kind = TK_THREAD;
		k.thread = (uint64_t)tr->tid;
	}
	int created;
	uint64_t *slot = cuptrace_u64map_put(&s->index, tr->uuid, &created);
	if (!slot)
		return fail(t, -ENOMEM);
	if (created) {
		struct trk *v = cuptrace_grow(s->trk, &s->trkcap, s->ntrk + 1, sizeof(*v));
		if (!v) {
			cuptrace_u64map_del(&s->index, tr->uuid);
			return fail(t, -ENOMEM);
		}
		s->trk = v;
		*slot = ++s->ntrk;
	}
	s->trk[*slot - 1] = k;
	return 0;
}

static struct top_proc *proc_of(struct top_sink *s)
{
	return s->proc < 0 ? NULL : &s->t->procs[s->proc];
}

/* The process's clock: its frontier, and where its first window starts. Only GPU work moves
 * it: the converter draws GPU work once its watermark (3 s of trace time behind the latest
 * record) passes it, while other events come sooner; a frontier they moved would close windows
 * before their GPU work arrived. */
static void note_time(struct top_proc *p, int64_t ts, int64_t end)
{
	if (!p)
		return;
	if (!p->have_window) {
		p->have_window = 1;
		p->win_start = ts;
		p->frontier = p->clocked ? ts : end;
	}
	if (ts < p->win_start && !p->win_last && !p->kern_tot.calls)
		p->win_start = ts; /* before the first window closed: widen it */
	if (end > p->frontier && !p->clocked)
		p->frontier = end;
}

static const char *arg_str(const struct cuptrace_slice *e, const char *key)
{
	for (size_t i = 0; i < e->nargs; i++)
		if (e->args[i].type == CUPTRACE_ARG_STRING && !strcmp(e->args[i].key, key))
			return e->args[i].v.s;
	return NULL;
}

static uint64_t arg_uint(const struct cuptrace_slice *e, const char *key)
{
	for (size_t i = 0; i < e->nargs; i++)
		if (!strcmp(e->args[i].key, key))
			return e->args[i].type == CUPTRACE_ARG_INT ? (uint64_t)e->args[i].v.i
			                                           : e->args[i].v.u;
	return 0;
}

/* "ncclDevKernel_AllReduce_Sum_f32_RING_LL" -> "AllReduce"; else the name whole. */
static const char *nccl_collective(const char *name, size_t *len)
{
	const char *p = name;
	if (!strncmp(p, "ncclDevKernel_", 14))
		p += 14;
	else if (!strncmp(p, "ncclKernel_", 11))
		p += 11;
	else {
		*len = strlen(name);
		return name;
	}
	*len = strcspn(p, "_(<");
	return *len ? p : name;
}

static int is_step(const char *name)
{
	return name && (!strncmp(name, "ProfilerStep#", 13) || !strcmp(name, "optimizer.step"));
}

static int gpu_work(struct cuptrace_top *t, struct top_gpu *g, const struct cuptrace_slice *e,
                    int64_t dur, uint32_t stream)
{
	struct top_busy_spans *b = g->spans;
	struct cuptrace_busy_span *v = cuptrace_grow(b->v, &b->cap, b->n + 1, sizeof(*v));
	if (!v)
		return fail(t, -ENOMEM);
	b->v = v;
	b->v[b->n++] = (struct cuptrace_busy_span){e->ts, dur};
	struct top_work *w = cuptrace_grow(b->w, &b->wcap, b->nw + 1, sizeof(*w));
	if (!w)
		return fail(t, -ENOMEM);
	b->w = w;
	b->w[b->nw++] =
	    (struct top_work){e->ts, sat_add(e->ts, dur), e->nflows_in ? e->flows_in[0] : 0,
	                      e->correlation_id, stream};
	return 0;
}

/* A host slice that idle causes need: a launch (an API call with ids) or a blocking call. */
static int host_call(struct cuptrace_top *t, struct top_proc *p, const struct trk *k,
                     const struct cuptrace_slice *e, int64_t dur)
{
	int cls = cuptrace_host_class(e->category, e->name);
	if (!p || cls <= CUPTRACE_HOST_RANGE)
		return 0;
	int r = 0;
	for (size_t i = 0; i < e->nflows_out && !r; i++)
		r = launch_add(p->hosts, 1, e->flows_out[i], e->ts, k->thread);
	if (!r && e->correlation_id)
		r = launch_add(p->hosts, 0, e->correlation_id, e->ts, k->thread);
	if (!r && (cls == CUPTRACE_HOST_SYNC || cls == CUPTRACE_HOST_COPY_SYNC))
		r = block_add(p->hosts, k->thread, e->ts, sat_add(e->ts, dur));
	return r ? fail(t, r) : 0;
}

static int tk_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct top_sink *s = to_sink(sk);
	struct cuptrace_top *t = s->t;
	if (t->err)
		return t->err;
	int64_t dur = e->dur < 0 ? 0 : e->dur;
	struct top_proc *p = proc_of(s);
	struct trk *k = find_trk(s, e->track_uuid);
	if (p && sat_add(e->ts, dur) > p->latest)
		p->latest = sat_add(e->ts, dur);
	const char *cat = e->category ? e->category : "";
	const char *name = e->name ? e->name : "";
	if (is_step(name) && !(k && k->kind == TK_STREAM)) {
		stat_add(&t->step_cur, dur);
		return 0;
	}
	if (!k)
		return 0;
	if (k->kind == TK_STREAM) {
		struct top_gpu *g = &t->gpus[k->gpu];
		if (cuptrace_busy_is_work(cat)) {
			note_time(p, e->ts, sat_add(e->ts, dur));
			if (gpu_work(t, g, e, dur, k->stream))
				return t->err;
			stat_add(&t->streams.v[k->stream].cur, dur);
		}
		if (!strcmp(cat, "kernel")) {
			struct top_row *r = tab_row(t, &t->kernels, name, strlen(name), 0);
			if (!r)
				return fail(t, -ENOMEM);
			stat_add(&r->cur, dur);
			stat_add(&g->kern_cur, dur);
			if (p)
				stat_add(&p->kern_cur, dur);
			if (!strncmp(name, "nccl", 4)) {
				size_t len;
				const char *c = nccl_collective(name, &len);
				if (!(r = tab_row(t, &t->nccl, c, len, 0)))
					return fail(t, -ENOMEM);
				stat_add(&r->cur, dur);
			}
		} else if (!strcmp(cat, "memcpy")) {
			uint64_t bytes = arg_uint(e, "bytes");
			const char *kind = arg_str(e, "kind"), *src = arg_str(e, "src"),
			           *dst = arg_str(e, "dst");
			struct top_copy *c = &t->copy_cur;
			if (kind && !strcmp(kind, "HtoD"))
				c->htod += bytes;
			else if (kind && !strcmp(kind, "DtoH"))
				c->dtoh += bytes;
			else
				c->other += bytes;
			if ((src && !strcmp(src, "pageable")) || (dst && !strcmp(dst, "pageable")))
				c->pageable += bytes;
			c->count++;
		}
	} else if (k->kind == TK_THREAD && host_call(t, p, k, e, dur)) {
		return t->err;
	} else if (k->kind == TK_THREAD &&
	           (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver"))) {
		struct top_row *r = tab_row(t, &t->api, name, strlen(name), 0);
		if (!r)
			return fail(t, -ENOMEM);
		stat_add(&r->cur, dur);
		if (p)
			stat_add(&p->api_cur, dur);
	}
	return 0;
}

static int tk_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct top_sink *s = to_sink(sk);
	if (is_step(e->name))
		stat_add(&s->t->step_cur, 0);
	return s->t->err;
}

static int tk_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct top_sink *s = to_sink(sk);
	struct trk *k = find_trk(s, e->track_uuid);
	if (k && k->kind == TK_MEM) {
		struct top_gpu *g = &s->t->gpus[k->gpu];
		int64_t v = e->is_double ? (int64_t)e->d : e->i;
		g->have_mem = 1;
		g->mem = v;
		if (v > g->mem_peak)
			g->mem_peak = v;
	}
	return s->t->err;
}

static int tk_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	(void)m;
	(void)n;
	return to_sink(sk)->t->err;
}

static int tk_finish(struct cuptrace_sink *sk)
{
	struct top_proc *p = proc_of(to_sink(sk));
	if (p)
		p->ended = 1;
	return to_sink(sk)->t->err;
}

static void tk_destroy(struct cuptrace_sink *sk)
{
	struct top_sink *s = to_sink(sk);
	free(s->trk);
	cuptrace_u64map_free(&s->index);
	free(s);
}

static const struct cuptrace_sink_ops top_sink_ops = {
    .name = "top",
    .begin = tk_begin,
    .track = tk_track,
    .slice = tk_slice,
    .instant = tk_instant,
    .counter = tk_counter,
    .meta = tk_meta,
    .finish = tk_finish,
    .destroy = tk_destroy,
};

struct cuptrace_sink *cuptrace_top_sink_new(struct cuptrace_top *t)
{
	struct top_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->base.ops = &top_sink_ops;
	s->t = t;
	s->proc = -1;
	cuptrace_u64map_init(&s->index);
	return &s->base;
}

int cuptrace_top_sink_proc(const struct cuptrace_sink *s)
{
	return ((const struct top_sink *)s)->proc;
}

void cuptrace_top_dropped(struct cuptrace_top *t, int proc, uint64_t cupti, uint64_t cuptrace)
{
	if (proc < 0 || (size_t)proc >= t->nprocs)
		return;
	t->procs[proc].dropped_cupti = cupti;
	t->procs[proc].dropped_cuptrace = cuptrace;
}

void cuptrace_top_advance(struct cuptrace_top *t, int proc, int64_t ts)
{
	if (proc < 0 || (size_t)proc >= t->nprocs)
		return;
	struct top_proc *p = &t->procs[proc];
	if (p->have_window && ts > p->frontier)
		p->frontier = ts;
}

void cuptrace_top_clocked(struct cuptrace_top *t, int proc)
{
	if (proc >= 0 && (size_t)proc < t->nprocs)
		t->procs[proc].clocked = 1;
}

static int work_cmp(const void *pa, const void *pb)
{
	const struct top_work *a = pa, *b = pb;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	int64_t da = a->end - a->ts, db = b->end - b->ts;
	return da < db ? -1 : da > db;
}

/* The gaps in g's work union before the work that arrived since the last sweep, by cause
 * (idle_cause.h), into g->idle_cur; the work is then forgotten. */
static void sweep_gpu(struct top_gpu *g, const struct top_hosts *h)
{
	struct top_busy_spans *b = g->spans;
	if (b->nw > 1)
		qsort(b->w, b->nw, sizeof(*b->w), work_cmp);
	for (size_t i = 0; i < b->nw; i++) {
		const struct top_work *w = &b->w[i];
		if (!g->have_end) {
			g->have_end = 1;
			g->g_end = w->ts;
		}
		if (w->ts > g->g_end) {
			const struct top_launch *l = launch_get(h, 1, w->flow);
			if (!l)
				l = launch_get(h, 0, w->corr);
			struct sync_q q = {h, l ? l->thread : 0};
			cuptrace_idle_split(g->g_end, w->ts, l != NULL, l ? l->ts : 0, synced, &q,
			                    INT64_MIN, g->idle_cur);
		}
		if (w->end > g->g_end)
			g->g_end = w->end;
	}
	b->nw = 0;
}

/* The busy time of g's spans inside [w0, w1); the spans that end at or before w1 go. */
static int close_gpu(struct top_gpu *g, int64_t w0, int64_t w1, int64_t *busy)
{
	struct top_busy_spans *b = g->spans;
	*busy = 0;
	if (w1 <= w0 || !b->n)
		return 0;
	struct cuptrace_busy_span *c = malloc(b->n * sizeof(*c));
	if (!c)
		return -ENOMEM;
	size_t n = 0, keep = 0;
	for (size_t i = 0; i < b->n; i++) {
		int64_t s = b->v[i].ts, e = sat_add(s, b->v[i].dur);
		if (e > w1)
			b->v[keep++] = b->v[i];
		if (s < w0)
			s = w0;
		if (e > w1)
			e = w1;
		if (e > s)
			c[n++] = (struct cuptrace_busy_span){s, e - s};
	}
	b->n = keep;
	*busy = cuptrace_busy_union(c, n);
	free(c);
	return 0;
}

int cuptrace_top_tick(struct cuptrace_top *t, int64_t dt_ns)
{
	if (t->err)
		return t->err;
	for (size_t i = 0; i < t->nprocs; i++) {
		struct top_proc *p = &t->procs[i];
		int64_t w0 = p->win_start, w1 = p->have_window ? p->frontier : w0;
		p->busy_last = 0;
		p->ngpus = 0;
		int64_t cut = 0;
		int have_cut = 0;
		p->win_last = w1 > w0 ? w1 - w0 : 0;
		for (size_t j = 0; j < t->ngpus; j++) {
			struct top_gpu *g = &t->gpus[j];
			if (g->proc != i)
				continue;
			int64_t busy;
			sweep_gpu(g, p->hosts);
			memcpy(g->idle_last, g->idle_cur, sizeof(g->idle_last));
			for (int c = 0; c < CUPTRACE_IDLE_NCAUSES; c++)
				g->idle_tot[c] = sat_add(g->idle_tot[c], g->idle_cur[c]);
			memset(g->idle_cur, 0, sizeof(g->idle_cur));
			if (g->have_end && (!have_cut || g->g_end < cut))
				cut = g->g_end, have_cut = 1;
			if (close_gpu(g, w0, w1, &busy))
				return fail(t, -ENOMEM);
			g->busy_last = busy;
			g->win_last = p->win_last;
			g->busy_tot = sat_add(g->busy_tot, busy);
			g->win_tot = sat_add(g->win_tot, g->win_last);
			p->busy_last = sat_add(p->busy_last, busy);
			p->ngpus++;
			stat_roll(&g->kern_cur, &g->kern_last, &g->kern_tot);
		}
		if (w1 > w0)
			p->win_start = w1;
		if (p->hosts) {
			/* Later gaps start at or after each GPU's swept end. */
			if (have_cut)
				blocks_prune(p->hosts, cut);
			if (p->have_window)
				launch_prune(p->hosts, p->frontier - LAUNCH_KEEP_NS);
		}
		stat_roll(&p->kern_cur, &p->kern_last, &p->kern_tot);
		stat_roll(&p->api_cur, &p->api_last, &p->api_tot);
	}
	struct top_tab *tabs[] = {&t->kernels, &t->api, &t->streams, &t->nccl};
	for (size_t k = 0; k < sizeof(tabs) / sizeof(tabs[0]); k++)
		for (size_t i = 0; i < tabs[k]->n; i++) {
			struct top_row *r = &tabs[k]->v[i];
			stat_roll(&r->cur, &r->last, &r->tot);
		}
	t->copy_last = t->copy_cur;
	t->copy_tot.htod += t->copy_cur.htod;
	t->copy_tot.dtoh += t->copy_cur.dtoh;
	t->copy_tot.other += t->copy_cur.other;
	t->copy_tot.pageable += t->copy_cur.pageable;
	t->copy_tot.count += t->copy_cur.count;
	t->copy_cur = (struct top_copy){0};
	stat_roll(&t->step_cur, &t->step_last, &t->step_tot);
	t->interval++;
	t->last_dt = dt_ns;
	t->tot_dt = sat_add(t->tot_dt, dt_ns);
	return 0;
}

/* ---- sorting ---- */

static const struct top_tab *sort_tab;
static enum top_sort sort_by;

static int64_t avg(const struct top_stat *s)
{
	return s->calls ? s->ns / (int64_t)s->calls : 0;
}

static int cmp64(int64_t a, int64_t b)
{
	return a > b ? -1 : a < b;
}

/* qsort has no context argument: the table and order are file statics, set by the one
 * (single-threaded) caller for the duration of the sort. */
static int row_cmp(const void *pa, const void *pb)
{
	const struct top_row *a = &sort_tab->v[*(const size_t *)pa],
	                     *b = &sort_tab->v[*(const size_t *)pb];
	int c = 0;
	switch (sort_by) {
	case TOP_SORT_TIME:
		c = cmp64(a->last.ns, b->last.ns);
		break;
	case TOP_SORT_CALLS:
		c = cmp64((int64_t)a->last.calls, (int64_t)b->last.calls);
		break;
	case TOP_SORT_AVG:
		c = cmp64(avg(&a->last), avg(&b->last));
		break;
	case TOP_SORT_TOTAL:
		break;
	case TOP_SORT_NAME:
		c = strcmp(a->name, b->name);
		break;
	case TOP_NSORTS:
		break;
	}
	if (!c)
		c = cmp64(a->tot.ns, b->tot.ns);
	if (!c)
		c = strcmp(a->name, b->name);
	if (!c)
		c = a->proc < b->proc ? -1 : a->proc > b->proc;
	return c;
}

size_t *cuptrace_top_order(const struct top_tab *tab, enum top_sort sort)
{
	if (!tab->n)
		return NULL;
	size_t *o = malloc(tab->n * sizeof(*o));
	if (!o)
		return NULL;
	for (size_t i = 0; i < tab->n; i++)
		o[i] = i;
	sort_tab = tab;
	sort_by = sort;
	qsort(o, tab->n, sizeof(*o), row_cmp);
	sort_tab = NULL;
	return o;
}
