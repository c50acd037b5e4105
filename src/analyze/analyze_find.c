/* GPU time per op (self and total, through the launch call's enclosing ranges) and the findings
 * of `cuptrace analyze`, from the computation state of analyze_ctx.h. Called by analyze_run.c;
 * calls only analyze_query.c. */
#include "analyze/analyze_ctx.h"
#include "analyze/step_name.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_step_name(const struct anx *x, uint32_t name)
{
	const char *n = anx_str(x, name);
	return !strncmp(n, "ProfilerStep#", 13) || (x->step_ranges && strcmp(n, x->step_ranges) &&
	                                            cuptrace_step_name_matches(n, x->step_ranges));
}

/* The innermost range around a launch, numbered step ranges (ProfilerStep#N, or those the steps
 * came from: "step N") skipped: they would make a row per step. */
static uint32_t op_range(const struct anx *x, uint32_t launch)
{
	uint32_t r = anx_range_of(x, launch);
	while (r && is_step_name(x, x->an->host[r - 1].name))
		r = x->an->host[r - 1].parent;
	return r;
}

struct share {
	uint32_t op; /* index in ops */
	uint32_t work_name;
	int64_t ns;
	uint64_t count;
};

static int op_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_op *a = pa, *b = pb;
	if (a->self_ns != b->self_ns)
		return a->self_ns > b->self_ns ? -1 : 1;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	return strcmp(a->name, b->name);
}

static void top_insert(struct cuptrace_an_op *op, const char *name, int64_t ns, uint64_t count)
{
	int k = 3;
	while (k > 0 && (!op->top[k - 1].name || op->top[k - 1].ns < ns))
		k--;
	if (k >= 3)
		return;
	memmove(&op->top[k + 1], &op->top[k], (size_t)(2 - k) * sizeof(op->top[0]));
	op->top[k] = (struct cuptrace_an_kernel_share){name, ns, count};
}

int anx_ops(struct anx *x)
{
	const struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	struct cuptrace_u64map of, sh;
	struct share *shares = NULL;
	size_t nshares = 0, sharecap = 0, opcap = 0;
	uint32_t seen[64];
	int err = -ENOMEM;

	cuptrace_u64map_init(&of);
	cuptrace_u64map_init(&sh);
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		uint32_t r = op_range(x, w->launch);
		if (!r) {
			o->unattributed_ns += w->dur;
			continue;
		}
		/* Every distinct name on the chain of ranges gets the work's time once. */
		size_t nseen = 0;
		for (uint32_t c = r; c; c = x->an->host[c - 1].parent) {
			uint32_t name = an->host[c - 1].name;
			if (is_step_name(x, name))
				continue;
			size_t k = 0;
			while (k < nseen && seen[k] != name)
				k++;
			if (k < nseen)
				continue;
			if (nseen < 64)
				seen[nseen++] = name;
			int created;
			uint64_t *v = cuptrace_u64map_put(&of, name, &created);
			if (!v)
				goto out;
			if (created) {
				struct cuptrace_an_op *ops =
				    cuptrace_grow(o->ops, &opcap, o->nops + 1, sizeof(*ops));
				if (!ops)
					goto out;
				o->ops = ops;
				o->ops[o->nops] = (struct cuptrace_an_op){.name = anx_str(x, name)};
				*v = ++o->nops;
			}
			struct cuptrace_an_op *op = &o->ops[*v - 1];
			op->total_ns += w->dur;
			if (c == r) {
				op->self_ns += w->dur;
				op->self_count++;
				int cr;
				uint64_t *s =
				    cuptrace_u64map_put(&sh, (*v - 1) << 32 | w->name, &cr);
				if (!s)
					goto out;
				if (cr) {
					struct share *a = cuptrace_grow(shares, &sharecap,
					                                nshares + 1, sizeof(*a));
					if (!a)
						goto out;
					shares = a;
					shares[nshares] =
					    (struct share){(uint32_t)(*v - 1), w->name, 0, 0};
					*s = ++nshares;
				}
				shares[*s - 1].ns += w->dur;
				shares[*s - 1].count++;
			}
		}
	}
	for (size_t i = 0; i < nshares; i++)
		top_insert(&o->ops[shares[i].op], anx_str(x, shares[i].work_name), shares[i].ns,
		           shares[i].count);
	if (o->nops)
		qsort(o->ops, o->nops, sizeof(*o->ops), op_cmp);
	err = 0;
out:
	free(shares);
	cuptrace_u64map_free(&of);
	cuptrace_u64map_free(&sh);
	return err;
}

/* ---- findings ---- */

struct fset {
	struct cuptrace_an_finding *f;
	size_t n, cap;
};

static struct cuptrace_an_finding *finding(struct fset *fs, const char *id, const char *title,
                                           const char *advice)
{
	for (size_t i = 0; i < fs->n; i++)
		if (!strcmp(fs->f[i].id, id))
			return &fs->f[i];
	struct cuptrace_an_finding *f = cuptrace_grow(fs->f, &fs->cap, fs->n + 1, sizeof(*f));
	if (!f)
		return NULL;
	fs->f = f;
	f = &fs->f[fs->n++];
	*f = (struct cuptrace_an_finding){.id = id, .title = title, .advice = advice};
	return f;
}

/* Keeps the CUPTRACE_AN_WORST longest instances, longest first. */
static void worst(struct cuptrace_an_finding *f, const struct cuptrace_an_instance *in)
{
	size_t k = f->nworst;
	if (k == CUPTRACE_AN_WORST && f->worst[k - 1].dur >= in->dur)
		return;
	if (k < CUPTRACE_AN_WORST)
		f->nworst++;
	else
		k--;
	while (k > 0 && f->worst[k - 1].dur < in->dur) {
		f->worst[k] = f->worst[k - 1];
		k--;
	}
	f->worst[k] = *in;
}

static void add(struct cuptrace_an_finding *f, const struct cuptrace_an_instance *in, int64_t t)
{
	f->count++;
	f->total_ns += t;
	worst(f, in);
}

/* An instance for host slice h (index + 1). */
static struct cuptrace_an_instance host_inst(const struct anx *x, uint32_t h, int64_t ts,
                                             int64_t dur, const char *what, uint64_t bytes)
{
	struct cuptrace_an_instance in = {.ts = ts, .dur = dur, .what = what, .bytes = bytes};
	if (h) {
		const struct an_host *s = &x->an->host[h - 1];
		uint32_t r = op_range(x, h);
		in.tid = x->an->threads[s->thread].tid;
		in.op = r ? anx_str(x, x->an->host[r - 1].name) : NULL;
	}
	return in;
}

#define F_OR_FAIL(var, ...)                                                                        \
	do {                                                                                       \
		if (!(var = finding(fs, __VA_ARGS__)))                                             \
			return -ENOMEM;                                                            \
	} while (0)

/* ---- the steady state ---- */

/* A process's steady state, what the findings look at: with steps, steps_find.c's (from the
 * end of its start-up steps to its last step's completion; with one step, that step); without
 * steps, from the end of its start-up (or its first GPU work) on.
 * alloc_steady starts there with steps, else after the first fifth of the traced span: the
 * caching allocators grow through the first iterations, and the first GPU work is too early. */
static struct anx_win steady_of(const struct anx *x, size_t file, int32_t pid)
{
	const struct cuptrace_analysis *o = x->out;
	struct anx_win w = {INT64_MIN, INT64_MAX, o->min_ts + (o->max_ts - o->min_ts) / 5, 0, 0};
	const struct anx_proc *p = anx_proc_find(x, file, pid);
	if (p && p->steps) { /* steps_find.c's window */
		w.from = p->steady_from;
		w.to = p->steady_to;
		w.alloc_from = w.from;
		w.steps = 1;
		return w;
	}
	/* Without steps, from the end of its start-up where one was found (steps_find.c). */
	if (p && p->niv)
		w.from = p->startup_end ? p->startup_end : p->iv[0].ts;
	w.startup = p && p->startup_end;
	if (w.alloc_from < w.from)
		w.alloc_from = w.from;
	return w;
}

/* The window of every GPU and every thread (its process's), into x (freed by anx_free); and the
 * span severity is judged against: from the earliest window start to the latest end of the
 * processes with steps, else from the earliest end of a start-up (or the trace's start) on. */
int anx_steady_windows(struct anx *x)
{
	const struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	o->steady_from = o->startup_end && !o->nsteps ? o->startup_end : o->min_ts;
	o->steady_to = o->max_ts;
	for (size_t i = 0; i < x->nprocs; i++) {
		const struct anx_proc *p = &x->procs[i];
		if (!p->steps)
			continue;
		if (!o->steady_steps || p->steady_from < o->steady_from)
			o->steady_from = p->steady_from;
		if (!o->steady_steps || p->steady_to > o->steady_to)
			o->steady_to = p->steady_to;
		o->steady_steps = 1;
	}
	if ((an->ngpus && !(x->win_gpu = malloc(an->ngpus * sizeof(*x->win_gpu)))) ||
	    (an->nthreads && !(x->win_thread = malloc(an->nthreads * sizeof(*x->win_thread)))))
		return -ENOMEM;
	for (size_t i = 0; i < an->ngpus; i++)
		x->win_gpu[i] = steady_of(x, an->gpus[i].file, an->gpus[i].pid);
	for (size_t i = 0; i < an->nthreads; i++)
		x->win_thread[i] = steady_of(x, an->threads[i].file, an->threads[i].pid);
	return 0;
}

/* Does something starting at ts fall in the window? */
static int at_steady(const struct anx_win *w, int64_t ts)
{
	return ts >= w->from && ts < w->to;
}

static int host_findings(struct anx *x, struct fset *fs)
{
	const struct an *an = x->an;
	struct cuptrace_an_finding *f;
	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		const struct anx_win *win = &x->win_thread[h->thread];
		uint32_t hi = (uint32_t)i + 1;
		if (h->cls == H_COPY_SYNC && at_steady(win, h->ts)) {
			F_OR_FAIL(
			    f, "sync_copy", "Synchronous copies and memsets",
			    "use cudaMemcpyAsync/cudaMemsetAsync on a stream (tensor.to(..., "
			    "non_blocking=True) from pinned memory) so the host does not wait");
			struct cuptrace_an_instance in =
			    host_inst(x, hi, h->ts, h->dur, anx_str(x, h->name), 0);
			add(f, &in, h->dur);
		} else if (h->cls == H_ALLOC && h->ts >= win->alloc_from && h->ts < win->to) {
			F_OR_FAIL(f, "alloc_steady", "Allocation calls in the steady state",
			          "allocate once before the loop and reuse buffers (a caching "
			          "allocator, preallocated tensors, cudaMallocAsync pools)");
			struct cuptrace_an_instance in =
			    host_inst(x, hi, h->ts, h->dur, anx_str(x, h->name), 0);
			add(f, &in, h->dur);
		}
	}
	return 0;
}

struct run {
	size_t first, last; /* work indices */
	size_t n;
	int64_t maxdur; /* launch-bound: the longest kernel before the last */
};

/* The time spans of the reported runs (tiny kernels, launch-bound), per GPU: a GPU gap inside one
 * is the run's, not a gpu_gap of its own. Sorted by (gpu, from) with a running max of to. */
struct span {
	int64_t from, to, maxto;
	size_t gpu;
};
struct spans {
	struct span *v;
	size_t n, cap;
};

static int close_run(struct anx *x, struct fset *fs, struct spans *sp, struct run *r, int tiny,
                     uint8_t *mark)
{
	const struct an *an = x->an;
	size_t min = tiny ? 100 : 10;
	if (r->n >= min) {
		struct cuptrace_an_finding *f = NULL;
		const struct an_work *a = &an->work[r->first], *b = &an->work[r->last];
		/* A run that starts outside the steady state (start-up: compilation, warm-up) is
		 * no finding; its span still holds its gaps (they are outside_steady's). */
		const struct anx_win *win = &x->win_gpu[an->streams[a->stream].gpu];
		if (a->ts < win->from || a->ts >= win->to)
			;
		else if (tiny)
			F_OR_FAIL(f, "tiny_kernels", "Floods of tiny kernels",
			          "fuse the small kernels (torch.compile, fused optimizers, "
			          "vectorized ops) or capture them in a CUDA graph");
		else
			F_OR_FAIL(f, "launch_bound", "Launch-bound stretches",
			          "kernels finish faster than the host launches them: batch work, "
			          "use CUDA graphs, or move Python overhead off the hot loop");
		/* A launch-bound run's last kernel started late, like the others, but only they are
		 * known to have been shorter than the host's launch cadence: a long one (a GEMM the
		 * host then queued work behind) ends the stretch at its start. */
		int64_t end = b->ts + (tiny || b->dur <= r->maxdur ? b->dur : 0);
		int64_t wall = end - a->ts;
		struct cuptrace_an_instance in = host_inst(x, a->launch, a->ts, wall, NULL, 0);
		in.what = tiny ? "run of tiny kernels" : "run of launch-bound kernels";
		if (f)
			add(f, &in, wall);
		struct span *v = cuptrace_grow(sp->v, &sp->cap, sp->n + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		sp->v = v;
		v[sp->n++] = (struct span){a->ts, end, 0, an->streams[a->stream].gpu};
		/* The tiny run's kernels are its own: no launch-bound run counts them again. */
		for (size_t i = r->first; mark && i <= r->last; i++)
			if (an->work[i].stream == a->stream)
				mark[i] = 1;
	}
	r->n = 0;
	return 0;
}

/* Per stream, in time order: floods of tiny kernels, then launch-bound runs (each kernel shorter
 * than the time between its launch and the next one's, the stream idle between them) among the
 * kernels no tiny run holds: one stretch is one finding. */
static int stream_findings(struct anx *x, struct fset *fs, struct spans *sp)
{
	const struct an *an = x->an;
	struct run *lb = calloc(an->nstreams + 1, sizeof(*lb));
	struct run *tk = calloc(an->nstreams + 1, sizeof(*tk));
	size_t *prev = calloc(an->nstreams + 1, sizeof(*prev)); /* last kernel + 1 */
	uint8_t *tiny = calloc(an->nwork + 1, 1);
	int err = -ENOMEM;
	if (!lb || !tk || !prev || !tiny)
		goto out;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		if (w->kind != W_KERNEL)
			continue;
		uint32_t s = w->stream;
		if (w->dur < an->opts.tiny_ns) {
			if (!tk[s].n)
				tk[s].first = i;
			tk[s].last = i;
			tk[s].n++;
		} else if ((err = close_run(x, fs, sp, &tk[s], 1, tiny))) {
			goto out;
		}
	}
	for (size_t s = 0; s < an->nstreams; s++)
		if ((err = close_run(x, fs, sp, &tk[s], 1, tiny)))
			goto out;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		if (w->kind != W_KERNEL)
			continue;
		uint32_t s = w->stream;
		if (tiny[i]) {
			if ((err = close_run(x, fs, sp, &lb[s], 0, NULL)))
				goto out;
			prev[s] = 0;
			continue;
		}
		if (prev[s]) {
			const struct an_work *p = &an->work[prev[s] - 1];
			int ok = p->launch && w->launch && w->ts > p->ts + p->dur &&
			         w->ts - (p->ts + p->dur) < an->opts.gap_ns &&
			         p->dur < an->host[w->launch - 1].ts - an->host[p->launch - 1].ts;
			if (ok) {
				if (!lb[s].n) {
					lb[s].first = prev[s] - 1;
					lb[s].n = 1;
					lb[s].maxdur = 0;
				}
				if (p->dur > lb[s].maxdur)
					lb[s].maxdur = p->dur;
				lb[s].last = i;
				lb[s].n++;
			} else if ((err = close_run(x, fs, sp, &lb[s], 0, NULL))) {
				goto out;
			}
		}
		prev[s] = i + 1;
	}
	for (size_t s = 0; s < an->nstreams; s++)
		if ((err = close_run(x, fs, sp, &lb[s], 0, NULL)))
			goto out;
	err = 0;
out:
	free(lb);
	free(tk);
	free(prev);
	free(tiny);
	return err;
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct span *a = pa, *b = pb;
	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	return a->from < b->from ? -1 : a->from > b->from;
}

static void spans_index(struct spans *sp)
{
	if (sp->n)
		qsort(sp->v, sp->n, sizeof(*sp->v), span_cmp);
	for (size_t i = 0; i < sp->n; i++) {
		struct span *p = &sp->v[i];
		p->maxto = i && sp->v[i - 1].gpu == p->gpu && sp->v[i - 1].maxto > p->to
		               ? sp->v[i - 1].maxto
		               : p->to;
	}
}

/* Is [a, b) on GPU gpu inside a reported run? */
static int in_run(const struct spans *sp, size_t gpu, int64_t a, int64_t b)
{
	size_t lo = 0, hi = sp->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct span *p = &sp->v[mid];
		if (p->gpu < gpu || (p->gpu == gpu && p->from <= a))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && sp->v[lo - 1].gpu == gpu && sp->v[lo - 1].maxto >= b;
}

static struct cuptrace_an_finding *existing(struct fset *fs, const char *id)
{
	for (size_t i = 0; i < fs->n; i++)
		if (!strcmp(fs->f[i].id, id))
			return &fs->f[i];
	return NULL;
}

/* The end of the synchronize that waits for the item copy launched by host slice l (index + 1),
 * or 0: the next blocking-free slices on its thread are scanned for it (index_blockers marked). */
static int64_t item_sync_end(const struct anx *x, uint32_t l)
{
	const struct an *an = x->an;
	const struct an_host *h = &an->host[l - 1];
	const struct an_thread *t = &an->threads[h->thread];
	for (size_t i = l, n = 0; i < t->first + t->n && n < 8; i++, n++) {
		const struct an_host *s = &an->host[i];
		if (s->cls == H_SYNC && (s->flags & HF_ITEM_SYNC))
			return s->ts + s->dur;
		if (s->cls != H_RANGE)
			break;
	}
	return 0;
}

/* What explains a GPU gap (g's work launched by a known call): the blocking calls the launching
 * thread sat in between the gap's start and that launch, the kind holding most of it (B_*), with
 * how long it sat in them (*blocked); a gap before a pageable copy is the copy's; -1: none. */
static int gap_blocker(const struct anx *x, const struct anx_gap *g, int64_t *blocked)
{
	const struct an_work *w = &x->an->work[g->work];
	int64_t by[B_N] = {0};
	int kind = -1;
	*blocked = 0;
	if (w->launch) {
		const struct an_host *l = &x->an->host[w->launch - 1];
		int64_t g1 = g->ts + g->dur, hend = l->ts < g->ts ? g->ts : l->ts > g1 ? g1 : l->ts;
		if (hend > g->ts)
			anx_blocked(x, l->thread, g->ts, hend, by);
		for (int k = 0; k < B_N; k++)
			if (by[k] > 0 && (kind < 0 || by[k] > by[kind]))
				kind = k;
	}
	if (kind < 0 && (w->flags & WF_PAGEABLE))
		kind = B_PAGEABLE;
	*blocked = kind >= 0 ? by[kind] : 0;
	return kind;
}

static int work_findings(struct anx *x, struct fset *fs, const struct spans *sp)
{
	const struct an *an = x->an;
	struct cuptrace_an_finding *f;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		if (!at_steady(&x->win_gpu[an->streams[w->stream].gpu], w->ts))
			continue;
		int item = (w->flags & WF_DTOH) && w->bytes && w->bytes <= AN_ITEM_BYTES;
		if ((w->flags & WF_PAGEABLE) && !item) { /* an item copy is item_copy's alone */
			F_OR_FAIL(
			    f, "pageable_copy", "Copies from or to pageable memory",
			    "pin the host buffer (pin_memory=True, cudaHostAlloc) so the copy is "
			    "truly asynchronous and runs at full bandwidth");
			struct cuptrace_an_instance in =
			    host_inst(x, w->launch, w->ts, w->dur, anx_str(x, w->name), w->bytes);
			add(f, &in, w->dur);
		}
		if (item) {
			F_OR_FAIL(
			    f, "item_copy", "Small device-to-host copies (.item(), printing)",
			    "keep scalars on the GPU (loss.detach() accumulated, logged every N "
			    "steps); each .item() waits for all queued work");
			/* The host time blocked: the call, through the synchronize that waits
			 * for the copy where that is a call of its own. */
			const struct an_host *l = w->launch ? &an->host[w->launch - 1] : NULL;
			int64_t t = l && l->dur > w->dur ? l->dur : w->dur;
			int64_t se = l ? item_sync_end(x, w->launch) : 0;
			if (se && se - l->ts > t)
				t = se - l->ts;
			struct cuptrace_an_instance in = host_inst(
			    x, w->launch, l ? l->ts : w->ts, t, anx_str(x, w->name), w->bytes);
			add(f, &in, t);
		}
	}
	for (size_t i = 0; i < x->ngaps; i++) {
		const struct anx_gap *g = &x->gaps[i];
		const struct an_work *w = &an->work[g->work];
		struct cuptrace_an_instance in =
		    host_inst(x, w->launch, g->ts, g->dur, cuptrace_idle_cause_names[g->cause], 0);
		if (w->launch) {
			struct cuptrace_an_host_ctx c;
			anx_host_ctx(x, an->host[w->launch - 1].thread, g->ts, &c);
			in.op = c.range;
			if (c.api)
				in.what = c.api;
		}
		/* Gaps not wholly inside the steady state (start-up, warm-up, the first step,
		 * after the last step) go to a note of their own, never severe. */
		const struct anx_win *win = &x->win_gpu[g->gpu];
		if (g->ts < win->from || g->ts + g->dur > win->to) {
			if (g->dur >= an->opts.gap_ns || g->cause == CUPTRACE_IDLE_HOST_SYNC) {
				F_OR_FAIL(
				    f, "outside_steady",
				    "GPU idle outside the steady state (start-up, first step, "
				    "after the last step)",
				    "left out of the other findings; to trace the loop alone, "
				    "record with --steps or --capture-range (README, Tracing "
				    "part of a run)");
				in.what = cuptrace_idle_cause_names[g->cause];
				add(f, &in, g->dur);
			}
			continue;
		}
		/* A gap inside the steady state goes to the one finding that explains it (the
		 * blocking call the launching thread sat in, a pageable copy, a run of tiny or
		 * launch-bound kernels), its idle added to that finding's total (less the time
		 * already counted as the call's); gpu_gap holds the gaps nothing explains. */
		int64_t blocked;
		int kind = gap_blocker(x, g, &blocked);
		static const char *const owner[B_N] = {"host_sync_idle", "item_copy", "sync_copy",
		                                       "alloc_steady", "pageable_copy"};
		f = kind >= 0 ? existing(fs, owner[kind]) : NULL;
		if (kind == B_SYNC) {
			F_OR_FAIL(
			    f, "host_sync_idle", "Host synchronization leaving the GPU idle",
			    "remove synchronize calls from the loop (or move them after enqueuing "
			    "the next step's work); use events to wait for one result");
			add(f, &in, g->dur);
			f->idle_ns += g->dur;
			continue;
		}
		if (f) {
			/* host_sync_idle counts gaps; the others count calls or copies, and
			 * their total already holds the call's time (not a pageable copy's:
			 * its total is GPU time, which no gap overlaps). */
			int64_t add_ns = kind == B_PAGEABLE ? g->dur : g->dur - blocked;
			f->total_ns += add_ns;
			f->idle_ns += add_ns;
			continue;
		}
		if (in_run(sp, g->gpu, g->ts, g->ts + g->dur))
			continue; /* the run's wall holds it */
		if (g->dur >= an->opts.gap_ns) {
			F_OR_FAIL(f, "gpu_gap", "GPU gaps above the threshold",
			          "look at what the host does in the gap (data loading, Python, "
			          "logging) and overlap it with GPU work");
			in.what = cuptrace_idle_cause_names[g->cause];
			add(f, &in, g->dur);
		}
	}
	return 0;
}

static int is_collective(const char *n)
{
	static const char *const words[] = {"allreduce",  "all_reduce",        "allgather",
	                                    "all_gather", "reduce_scatter",    "alltoall",
	                                    "all_to_all", "record_param_comms"};
	if (!strncmp(n, "c10d::", 6) || !strncmp(n, "nccl:", 5) || !strncmp(n, "gloo:", 5))
		return 1;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strstr(n, words[i]))
			return 1;
	return 0;
}

/* Each rank's host time in collective calls: per thread, the union of its collective ranges
 * (host is sorted by thread, then start, the outer first). rank_of maps procs to ranks. */
static void host_collectives(struct anx *x, const size_t *rank_of)
{
	const struct an *an = x->an;
	uint32_t thr = UINT32_MAX;
	int64_t end = INT64_MIN;
	struct cuptrace_an_rank *r = NULL;

	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		if (h->cls != H_RANGE || !is_collective(anx_str(x, h->name)))
			continue;
		if (h->thread != thr) {
			const struct an_thread *t = &an->threads[h->thread];
			const struct anx_proc *p = anx_proc_find(x, t->file, t->pid);
			size_t k = p ? rank_of[p - x->procs] : SIZE_MAX;
			r = k != SIZE_MAX ? &x->out->ranks[k] : NULL;
			thr = h->thread;
			end = INT64_MIN;
		}
		int64_t s = h->ts > end ? h->ts : end, e = h->ts + h->dur;
		if (!r || e <= s)
			continue;
		r->host_comm_ns += e - s;
		end = e;
	}
}

/* With several processes (ranks) with GPU work: the straggler and the collective wait. */
static int rank_findings(struct anx *x, struct fset *fs)
{
	struct cuptrace_analysis *o = x->out;
	size_t n = 0;
	for (size_t i = 0; i < x->nprocs; i++)
		n += x->procs[i].niv > 0;
	if (n < 2)
		return 0;
	size_t *rank_of = malloc(x->nprocs * sizeof(*rank_of));
	if (!rank_of || !(o->ranks = calloc(n, sizeof(*o->ranks)))) {
		free(rank_of);
		return -ENOMEM;
	}
	for (size_t i = 0; i < x->nprocs; i++) {
		const struct anx_proc *p = &x->procs[i];
		rank_of[i] = p->niv ? o->nranks : SIZE_MAX;
		if (!p->niv)
			continue;
		struct cuptrace_an_rank *r = &o->ranks[o->nranks++];
		*r = (struct cuptrace_an_rank){
		    .pid = p->pid, .file = p->file, .busy_ns = p->cum[p->niv]};
		for (size_t g = 0; g < o->ngpus; g++)
			if (o->gpus[g].file == p->file && o->gpus[g].pid == p->pid) {
				r->comm_ns += o->gpus[g].comm_ns;
				r->compute_ns += o->gpus[g].compute_ns;
				r->overlap_ns += o->gpus[g].overlap_ns;
			}
		int64_t sum = 0;
		size_t k = 0;
		for (size_t s = 0; s < o->nsteps; s++)
			if (o->steps[s].file == p->file && o->steps[s].pid == p->pid) {
				sum += o->steps[s].dur;
				k++;
			}
		r->step_median_ns = k ? sum / (int64_t)k : 0; /* the mean, for ranks */
	}
	host_collectives(x, rank_of);
	free(rank_of);
	/* Time in collectives: the NCCL kernels' GPU time; without any (gloo, ranks sharing one
	 * GPU), the host time in collective calls, where a rank waits for the others. */
	int gpu_comm = 0;
	for (size_t i = 0; i < o->nranks; i++)
		gpu_comm |= o->ranks[i].comm_ns > 0;
#define COMM(i) (gpu_comm ? o->ranks[i].comm_ns : o->ranks[i].host_comm_ns)
	size_t lo = 0, hi = 0;
	for (size_t i = 1; i < o->nranks; i++) {
		if (COMM(i) < COMM(lo))
			lo = i;
		if (COMM(i) > COMM(hi))
			hi = i;
	}
	struct cuptrace_an_finding *f;
	if (COMM(hi) > 0) {
		F_OR_FAIL(f, "collective_wait", "Time in collectives per rank",
		          "ranks that wait longest in collectives arrive first: balance the work "
		          "or overlap communication with compute");
		for (size_t i = 0; i < o->nranks; i++) {
			struct cuptrace_an_instance in = {
			    .dur = COMM(i),
			    .tid = o->ranks[i].pid,
			    .what = gpu_comm ? "collectives" : "collective calls (host)"};
			add(f, &in, COMM(i));
		}
		int64_t spread = COMM(hi) - COMM(lo);
		if (spread * 10 > COMM(hi)) {
			F_OR_FAIL(f, "straggler", "Straggler rank",
			          "the rank that waits least in collectives is the one the others "
			          "wait for: look at its data loading, host work or GPU");
			struct cuptrace_an_instance in = {
			    .dur = spread, .tid = o->ranks[lo].pid, .what = "straggler (pid)"};
			add(f, &in, spread);
			f->severe = 1;
		}
	}
#undef COMM
	return 0;
}

static int finding_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_finding *a = pa, *b = pb;
	if (a->severe != b->severe)
		return a->severe ? -1 : 1;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	return strcmp(a->id, b->id);
}

int anx_findings(struct anx *x)
{
	struct cuptrace_analysis *o = x->out;
	struct fset fs = {0};
	int err;
	struct spans sp = {0};
	if ((err = host_findings(x, &fs)) || (err = stream_findings(x, &fs, &sp)) ||
	    (spans_index(&sp), (err = work_findings(x, &fs, &sp))) ||
	    (err = rank_findings(x, &fs))) {
		free(sp.v);
		free(fs.f);
		return err;
	}
	free(sp.v);
	/* Severe: at least 5% of the steady state (the traced span without steps). */
	int64_t span = o->steady_to - o->steady_from;
	for (size_t i = 0; i < fs.n; i++)
		if (span > 0 && fs.f[i].total_ns * 20 >= span &&
		    strcmp(fs.f[i].id, "outside_steady"))
			fs.f[i].severe = 1;
	if (fs.n)
		qsort(fs.f, fs.n, sizeof(*fs.f), finding_cmp);
	o->findings = fs.f;
	o->nfindings = fs.n;
	return 0;
}
