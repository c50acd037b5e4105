/* GPU time per op (self and total, through the launch call's enclosing ranges) and the findings
 * of one file, per rank (analyze_job.c folds them into the job's and adds the rank findings),
 * from the computation state of compute_state.h. Called by analyze_run.c; calls analyze_rank.c
 * and analyze_query.c. */
#include "why/compute_state.h"
#include "names/step_name.h"

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

int anx_op_cmp(const void *pa, const void *pb)
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
		qsort(o->ops, o->nops, sizeof(*o->ops), anx_op_cmp);
	err = 0;
out:
	free(shares);
	cuptrace_u64map_free(&of);
	cuptrace_u64map_free(&sh);
	return err;
}

/* ---- findings ---- */

/* The findings of one file, one record per (finding, rank); analyze_job.c folds them by id into
 * the job's. Each keeps its figures apart: the host time in its calls, the GPU time of the work
 * involved, the GPU idle of the gaps it explains (of which the launching thread was in no CUDA
 * call); severity is judged on one of them, per finding (README, the table of findings). */
enum {
	K_SYNC_COPY,
	K_PAGEABLE,
	K_HOST_SYNC,
	K_ITEM,
	K_GPU_GAP,
	K_LAUNCH_BOUND,
	K_TINY,
	K_ALLOC,
	K_OUTSIDE,
	K_N
};
enum judge {
	J_IDLE,      /* the GPU idle it explains */
	J_WORK_IDLE, /* the GPU time of its work and the GPU idle it explains */
	J_WALL,      /* the wall time of its runs (their kernels and the idle between them) */
	J_NOTE       /* a note, never severe: total is its idle */
};

/* Said first where the GPU idle a finding explains came mostly while the launching thread was
 * busy outside CUDA: then that host work, not the calls, is what to fix first. */
#define HOST_FIRST                                                                                 \
	"most of the GPU idle here came while the host was busy outside CUDA before the next "     \
	"launch (data loading, preprocessing, Python), not in these calls: overlap that host "     \
	"work with GPU work (DataLoader workers, prefetching, moving it off the step); then "

static const struct kind {
	const char *id, *title, *count_of;
	enum judge judge;
	const char *advice;
	const char *advice_host; /* when the idle while the host was outside CUDA dominates */
} kinds[K_N] = {
    [K_SYNC_COPY] = {"sync_copy", "Synchronous copies and memsets (the host waits for each)",
                     "calls", J_IDLE,
                     "use cudaMemcpyAsync/cudaMemsetAsync on a stream (tensor.to(..., "
                     "non_blocking=True) from pinned memory) so the host does not wait",
                     HOST_FIRST "use cudaMemcpyAsync/cudaMemsetAsync so the host does not wait"},
    [K_PAGEABLE] = {"pageable_copy", "Copies from or to pageable memory", "copies", J_WORK_IDLE,
                    "pin the host buffer (pin_memory=True, cudaHostAlloc) so the copy is "
                    "truly asynchronous and runs at full bandwidth",
                    HOST_FIRST "pin the host buffer (pin_memory=True, cudaHostAlloc)"},
    [K_HOST_SYNC] = {"host_sync_idle", "Host synchronization leaving the GPU idle", "gaps", J_IDLE,
                     "remove synchronize calls from the loop (or move them after enqueuing "
                     "the next step's work); use events to wait for one result",
                     HOST_FIRST "remove synchronize calls from the loop"},
    [K_ITEM] = {"item_copy", "Small device-to-host copies (.item(), printing)", "copies", J_IDLE,
                "keep scalars on the GPU (loss.detach() accumulated, logged every N steps); "
                "each .item() waits for all queued work",
                HOST_FIRST "keep scalars on the GPU (loss.detach() accumulated, logged every "
                           "N steps)"},
    [K_GPU_GAP] = {"gpu_gap", "GPU idle gaps (at least --gap-us) no other finding explains", "gaps",
                   J_IDLE,
                   "look at what the host does in the gap (data loading, Python, logging) and "
                   "overlap it with GPU work",
                   "the host was busy outside CUDA in these gaps (data loading, "
                   "preprocessing, Python, logging): overlap that work with GPU work "
                   "(DataLoader workers, prefetching, CUDA graphs)"},
    [K_LAUNCH_BOUND] = {"launch_bound", "Launch-bound stretches", "stretches", J_WALL,
                        "kernels finish faster than the host launches them: batch work, "
                        "use CUDA graphs, or move Python overhead off the hot loop",
                        NULL},
    [K_TINY] = {"tiny_kernels", "Floods of tiny kernels", "runs", J_WALL,
                "fuse the small kernels (torch.compile, fused optimizers, vectorized ops) or "
                "capture them in a CUDA graph",
                NULL},
    [K_ALLOC] = {"alloc_steady", "Allocation calls in the steady state", "calls", J_IDLE,
                 "allocate once before the loop and reuse buffers (a caching allocator, "
                 "preallocated tensors, cudaMallocAsync pools)",
                 HOST_FIRST "allocate once before the loop and reuse buffers"},
    [K_OUTSIDE] = {"outside_steady",
                   "GPU idle outside the steady state (start-up, first step, after the last "
                   "step)",
                   "gaps", J_NOTE,
                   "left out of the other findings; to trace the loop alone, record with "
                   "--steps or --capture-range (README, Tracing part of a run)",
                   NULL},
};

/* Where a record counts host stack samples: thread tid's in [a, b]. The claims are resolved
 * once every finding is made (resolve_samples): a record counts a sample once however many of
 * its intervals hold it, and a sample that several records' intervals hold is owned by one, by
 * kind (a gap's owner first: the record holding that gap's GPU idle; then a run, whose wall holds
 * the idle of the gaps in it that nothing else explains; then a call or copy) and then by the
 * order the claims came (the gaps in x->gaps' order). */
enum claim_kind { C_GAP, C_RUN, C_CALL };
struct claim {
	int64_t tid, a, b;
	uint32_t rec, seq;
	enum claim_kind kind;
};

/* The records of one file: (kind, rank) -> index + 1 in idx. */
struct fset {
	struct cuptrace_an_finding *f;
	size_t n, cap;
	uint32_t *idx;
	size_t nranks;
	/* Per record (index in f): its instances' host stack samples by frame. */
	struct anx_fcount *hc;
	size_t hccap;
	struct claim *cl;
	size_t ncl, clcap;
};

static struct cuptrace_an_finding *finding(struct fset *fs, int kind, size_t rank)
{
	uint32_t *slot = &fs->idx[(size_t)kind * fs->nranks + rank];
	if (*slot)
		return &fs->f[*slot - 1];
	struct cuptrace_an_finding *f = cuptrace_grow(fs->f, &fs->cap, fs->n + 1, sizeof(*f));
	if (!f)
		return NULL;
	fs->f = f;
	f = &fs->f[fs->n++];
	const struct kind *k = &kinds[kind];
	*f = (struct cuptrace_an_finding){.id = k->id,
	                                  .title = k->title,
	                                  .advice = k->advice,
	                                  .count_of = k->count_of,
	                                  .top_rank = rank,
	                                  .nranks = 1};
	*slot = (uint32_t)fs->n;
	return f;
}

static struct cuptrace_an_finding *existing(const struct fset *fs, int kind, size_t rank)
{
	uint32_t i = fs->idx[(size_t)kind * fs->nranks + rank];
	return i ? &fs->f[i - 1] : NULL;
}

void anx_worst_add(struct cuptrace_an_finding *f, const struct cuptrace_an_instance *in)
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

/* The per-record sample counts, grown to hold record f's: NULL when out of memory. */
static struct anx_fcount *fcounts(struct fset *fs)
{
	size_t had = fs->hccap;
	struct anx_fcount *hc = cuptrace_grow(fs->hc, &fs->hccap, fs->n, sizeof(*hc));
	if (!hc)
		return NULL;
	memset(hc + had, 0, (fs->hccap - had) * sizeof(*hc)); /* the new slots */
	fs->hc = hc;
	return hc;
}

/* Record f counts thread tid's samples in [t0, t1] (resolve_samples); 0 or -ENOMEM. */
static int claim(const struct anx *x, struct fset *fs, const struct cuptrace_an_finding *f,
                 enum claim_kind kind, int64_t tid, int64_t t0, int64_t t1)
{
	if (!x->an->nsamples || !tid)
		return 0;
	struct claim *c = cuptrace_grow(fs->cl, &fs->clcap, fs->ncl + 1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	fs->cl = c;
	fs->cl[fs->ncl] =
	    (struct claim){tid, t0, t1, (uint32_t)(f - fs->f), (uint32_t)fs->ncl, kind};
	fs->ncl++;
	return 0;
}

/* The host stack samples of thread tid in [t0, t1) added to record f's, without an instance:
 * the GPU idle a finding explains (the gap before a pageable copy, a blocking call's) is where
 * the launching thread's time went, while the instance itself is the call. The gap's idle is
 * f's, so are its samples (C_GAP). */
static int add_samples(const struct anx *x, struct fset *fs, struct cuptrace_an_finding *f,
                       int64_t tid, int64_t t0, int64_t t1)
{
	return claim(x, fs, f, C_GAP, tid, t0, t1);
}

/* One more instance of record f: counted, kept if among the worst, and its thread's host
 * stack samples inside it added to the record's (claimed as kind) and the instance's own top
 * frame noted. */
static int add(const struct anx *x, struct fset *fs, struct cuptrace_an_finding *f,
               struct cuptrace_an_instance *in, enum claim_kind kind)
{
	f->count++;
	if (x->an->nsamples && in->tid) {
		struct anx_fcount one = {0};
		int err = anx_samples_count(x, in->tid, in->ts, in->ts + in->dur, &one);
		if (!err && one.samples) {
			struct cuptrace_an_host_frame top;
			anx_fcount_top(x, &one, &top, 1);
			in->host_samples = one.samples;
			in->host_frame = top.frame;
			in->host_frame_samples = top.samples;
			err = claim(x, fs, f, kind, in->tid, in->ts, in->ts + in->dur);
		}
		anx_fcount_free(&one);
		if (err)
			return err;
	}
	anx_worst_add(f, in);
	return 0;
}

#define ADD(f, in, kind)                                                                           \
	do {                                                                                       \
		int add_err_ = add(x, fs, f, &(in), kind);                                         \
		if (add_err_)                                                                      \
			return add_err_;                                                           \
	} while (0)

static int claim_owner_cmp(const void *pa, const void *pb)
{
	const struct claim *a = pa, *b = pb;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int claim_rec_cmp(const void *pa, const void *pb)
{
	const struct claim *a = pa, *b = pb;
	if (a->rec != b->rec)
		return a->rec < b->rec ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The claims into each record's counts by frame (fs->hc), each sample once per record, and
 * its owned count; the samples any record holds into findings_host_samples. Two passes over
 * the claims: by ownership priority (owner[]: record + 1), then record by record (seen[]: the
 * last record + 1 that counted the sample). */
static int resolve_samples(const struct anx *x, struct fset *fs)
{
	const struct an *an = x->an;
	uint32_t *owner = NULL, *seen = NULL;
	struct anx_fcount *hc;
	int err = -ENOMEM;
	if (!fs->ncl)
		return 0;
	if (!(hc = fcounts(fs)) || !(owner = calloc(an->nsamples, sizeof(*owner))) ||
	    !(seen = calloc(an->nsamples, sizeof(*seen))))
		goto out;
	qsort(fs->cl, fs->ncl, sizeof(*fs->cl), claim_owner_cmp);
	for (size_t k = 0; k < fs->ncl; k++) {
		const struct claim *c = &fs->cl[k];
		for (size_t i = anx_samples_from(x, c->a);
		     i < an->nsamples && an->samples[i].ts <= c->b; i++)
			if (an->samples[i].tid == c->tid && !owner[i])
				owner[i] = c->rec + 1;
	}
	qsort(fs->cl, fs->ncl, sizeof(*fs->cl), claim_rec_cmp);
	for (size_t k = 0; k < fs->ncl; k++) {
		const struct claim *c = &fs->cl[k];
		for (size_t i = anx_samples_from(x, c->a);
		     i < an->nsamples && an->samples[i].ts <= c->b; i++) {
			if (an->samples[i].tid != c->tid || seen[i] == c->rec + 1)
				continue;
			seen[i] = c->rec + 1;
			if ((err = anx_fcount_add(&hc[c->rec], an->samples[i].frame)))
				goto out;
			fs->f[c->rec].host_samples_owned += owner[i] == c->rec + 1;
		}
	}
	for (size_t i = 0; i < an->nsamples; i++)
		x->out->findings_host_samples += owner[i] != 0;
	err = 0;
out:
	free(owner);
	free(seen);
	return err;
}

/* An instance for host slice h (index + 1) of rank. */
static struct cuptrace_an_instance host_inst(const struct anx *x, uint32_t h, int64_t ts,
                                             int64_t dur, const char *what, uint64_t bytes,
                                             size_t rank)
{
	struct cuptrace_an_instance in = {
	    .ts = ts, .dur = dur, .what = what, .bytes = bytes, .rank = rank};
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

/* How much of [a, b) thread t spent outside every CUDA call (its API slices, clipped, their
 * union). The calls are found walking back from the last one starting before b, as
 * anx_blocked does; at most 256 are taken (a gap full of calls is not the host outside CUDA
 * anyway). */
static int64_t outside_calls(const struct anx *x, uint32_t t, int64_t a, int64_t b)
{
	const struct an *an = x->an;
	const struct an_thread *th = &an->threads[t];
	struct anx_iv iv[256];
	size_t n = 0, lo = th->first, hi = th->first + th->n;
	if (b <= a)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (an->host[mid].ts < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	int before = 0;
	for (size_t i = lo, k = 0; i > th->first && before < 2 && k < 1024 && n < 256; i--, k++) {
		const struct an_host *h = &an->host[i - 1];
		if (h->cls == H_RANGE)
			continue;
		int64_t s = h->ts > a ? h->ts : a, e = h->ts + h->dur < b ? h->ts + h->dur : b;
		if (e <= s) {
			before++;
			continue;
		}
		before = 0;
		iv[n++] = (struct anx_iv){s, e};
	}
	/* Walked back by start: reversed, they are in start order. */
	int64_t in = 0, end = INT64_MIN;
	for (size_t i = n; i-- > 0;) {
		int64_t s = iv[i].ts > end ? iv[i].ts : end;
		if (iv[i].end > s)
			in += iv[i].end - s;
		if (iv[i].end > end)
			end = iv[i].end;
	}
	return b - a - (in < b - a ? in : b - a);
}

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

/* The ranks of the file (analyze_rank.c), then the window of every GPU, thread and rank (its
 * process's), into x (freed by anx_free); and the span severity is judged against: from the
 * earliest window start to the latest end of the processes with steps, else from the earliest
 * end of a start-up (or the trace's start) on. */
int anx_steady_windows(struct anx *x)
{
	const struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	int err = anx_ranks(x);
	if (err)
		return err;
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
	/* Each rank's: what its findings' severity is judged against (the traced span of the
	 * file without steps). */
	for (size_t i = 0; i < o->nranks; i++) {
		struct cuptrace_an_rank *r = &o->ranks[i];
		struct anx_win w = steady_of(x, r->file, r->pid);
		r->steady_steps = w.steps;
		r->steady_from = w.steps || w.startup ? w.from : o->min_ts;
		r->steady_to = w.steps ? w.to : o->max_ts;
	}
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
		size_t rank = x->rank_of_thread[h->thread];
		uint32_t hi = (uint32_t)i + 1;
		int kind;
		if (h->cls == H_COPY_SYNC && at_steady(win, h->ts))
			kind = K_SYNC_COPY;
		else if (h->cls == H_ALLOC && h->ts >= win->alloc_from && h->ts < win->to)
			kind = K_ALLOC;
		else
			continue;
		F_OR_FAIL(f, kind, rank);
		struct cuptrace_an_instance in =
		    host_inst(x, hi, h->ts, h->dur, anx_str(x, h->name), 0, rank);
		ADD(f, in, C_CALL);
		f->call_ns += h->dur;
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
		size_t gpu = an->streams[a->stream].gpu, rank = x->rank_of_gpu[gpu];
		/* A run that starts outside the steady state (start-up: compilation, warm-up) is
		 * no finding; its span still holds its gaps (they are outside_steady's). */
		const struct anx_win *win = &x->win_gpu[gpu];
		if (a->ts >= win->from && a->ts < win->to)
			F_OR_FAIL(f, tiny ? K_TINY : K_LAUNCH_BOUND, rank);
		/* A launch-bound run's last kernel started late, like the others, but only they are
		 * known to have been shorter than the host's launch cadence: a long one (a GEMM the
		 * host then queued work behind) ends the stretch at its start. */
		int64_t end = b->ts + (tiny || b->dur <= r->maxdur ? b->dur : 0);
		int64_t wall = end - a->ts, work = 0;
		for (size_t i = r->first; i <= r->last; i++) {
			const struct an_work *w = &an->work[i];
			if (w->stream == a->stream && w->kind == W_KERNEL && w->ts < end)
				work += (w->ts + w->dur < end ? w->ts + w->dur : end) - w->ts;
		}
		struct cuptrace_an_instance in =
		    host_inst(x, a->launch, a->ts, wall, NULL, 0, rank);
		in.what = tiny ? "run of tiny kernels" : "run of launch-bound kernels";
		if (f) {
			ADD(f, in, C_RUN);
			f->total_ns += wall;
			f->work_ns += work;
			f->idle_ns += wall > work ? wall - work : 0;
		}
		struct span *v = cuptrace_grow(sp->v, &sp->cap, sp->n + 1, sizeof(*v));
		if (!v)
			return -ENOMEM;
		sp->v = v;
		v[sp->n++] = (struct span){a->ts, end, 0, gpu};
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
			/* A flood is back to back: a gap of at least --gap-us that is also longer
			 * than the run so far ends it (a pause inside a long run does not). */
			if (tk[s].n) {
				const struct an_work *l = &an->work[tk[s].last];
				int64_t gap = w->ts - (l->ts + l->dur);
				if (gap >= an->opts.gap_ns &&
				    gap > l->ts + l->dur - an->work[tk[s].first].ts &&
				    (err = close_run(x, fs, sp, &tk[s], 1, tiny)))
					goto out;
			}
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

/* How long the launching thread of g's work was in no CUDA call between the gap's start and
 * that launch (0 where the launch is unknown). */
static int64_t gap_outside(const struct anx *x, const struct anx_gap *g)
{
	const struct an_work *w = &x->an->work[g->work];
	if (!w->launch)
		return 0;
	const struct an_host *l = &x->an->host[w->launch - 1];
	int64_t g1 = g->ts + g->dur, hend = l->ts < g->ts ? g->ts : l->ts > g1 ? g1 : l->ts;
	return outside_calls(x, l->thread, g->ts, hend);
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
		/* A blocking call explains the gap when the thread sat in it as the GPU went idle
		 * (a synchronize waiting for the work that ended there: .item(), cudaFree) or for
		 * at least half of the gap's host part; a call made late in a gap the host spent
		 * busy outside CUDA (an event wait after CPU preprocessing, returning at once)
		 * does not: that gap is the host's (gpu_gap). */
		if (kind >= 0 && 2 * by[kind] < hend - g->ts) {
			int64_t at[B_N] = {0};
			anx_blocked(x, l->thread, g->ts, g->ts + 1000, at);
			if (!at[kind])
				kind = -1;
		}
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
		size_t gpu = an->streams[w->stream].gpu, rank = x->rank_of_gpu[gpu];
		const struct an_host *l = w->launch ? &an->host[w->launch - 1] : NULL;
		/* The GPU time of a synchronous copy or memset is its call's finding's. */
		if (l && l->cls == H_COPY_SYNC && at_steady(&x->win_thread[l->thread], l->ts) &&
		    (f = existing(fs, K_SYNC_COPY, x->rank_of_thread[l->thread])))
			f->work_ns += w->dur;
		if (!at_steady(&x->win_gpu[gpu], w->ts))
			continue;
		int item = (w->flags & WF_DTOH) && w->bytes && w->bytes <= AN_ITEM_BYTES;
		if ((w->flags & WF_PAGEABLE) && !item) { /* an item copy is item_copy's alone */
			F_OR_FAIL(f, K_PAGEABLE, rank);
			struct cuptrace_an_instance in = host_inst(
			    x, w->launch, w->ts, w->dur, anx_str(x, w->name), w->bytes, rank);
			ADD(f, in, C_CALL);
			f->work_ns += w->dur;
			f->call_ns += l ? l->dur : 0;
		}
		if (item) {
			F_OR_FAIL(f, K_ITEM, rank);
			/* The host time blocked: the call, through the synchronize that waits
			 * for the copy where that is a call of its own. */
			int64_t t = l && l->dur > w->dur ? l->dur : w->dur;
			int64_t se = l ? item_sync_end(x, w->launch) : 0;
			if (se && se - l->ts > t)
				t = se - l->ts;
			struct cuptrace_an_instance in =
			    host_inst(x, w->launch, l ? l->ts : w->ts, t, anx_str(x, w->name),
			              w->bytes, rank);
			ADD(f, in, C_CALL);
			f->call_ns += t;
			f->work_ns += w->dur;
		}
	}
	for (size_t i = 0; i < x->ngaps; i++) {
		const struct anx_gap *g = &x->gaps[i];
		const struct an_work *w = &an->work[g->work];
		size_t rank = x->rank_of_gpu[g->gpu];
		struct cuptrace_an_instance in = host_inst(
		    x, w->launch, g->ts, g->dur, cuptrace_idle_cause_names[g->cause], 0, rank);
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
				F_OR_FAIL(f, K_OUTSIDE, rank);
				in.what = cuptrace_idle_cause_names[g->cause];
				ADD(f, in, C_GAP);
				f->idle_ns += g->dur;
				f->idle_host_ns += gap_outside(x, g);
			}
			continue;
		}
		int64_t blocked;
		int kind = gap_blocker(x, g, &blocked);
		/* A gap inside the steady state goes to the one finding that explains it (the
		 * blocking call the launching thread sat in, a pageable copy, a run of tiny or
		 * launch-bound kernels) as GPU idle it explains; gpu_gap holds the gaps nothing
		 * explains. */
		static const int owner[B_N] = {K_HOST_SYNC, K_ITEM, K_SYNC_COPY, K_ALLOC,
		                               K_PAGEABLE};
		if (kind == B_SYNC) {
			F_OR_FAIL(f, K_HOST_SYNC, rank);
			ADD(f, in, C_GAP);
			f->call_ns += blocked;
		} else if ((f = kind >= 0 ? existing(fs, owner[kind], rank) : NULL)) {
			/* explained by a call counted above: what the thread did in the gap */
			int err = add_samples(x, fs, f, in.tid, g->ts, g->ts + g->dur);
			if (err)
				return err;
		} else {
			if (in_run(sp, g->gpu, g->ts, g->ts + g->dur))
				continue; /* the run's wall holds it */
			if (g->dur < an->opts.gap_ns)
				continue;
			F_OR_FAIL(f, K_GPU_GAP, rank);
			in.what = cuptrace_idle_cause_names[g->cause];
			ADD(f, in, C_GAP);
			/* The step of the work that ended it: where its time was lost. */
			size_t k = anx_step_at(x, rank, g->ts + g->dur - 1);
			if (k != SIZE_MAX) {
				struct cuptrace_an_step *st = &x->out->steps[k];
				st->gaps++;
				st->gap_idle_ns += g->dur;
				st->gap_host_ns += gap_outside(x, g);
			}
		}
		f->idle_ns += g->dur;
		f->idle_host_ns += gap_outside(x, g);
	}
	return 0;
}

/* Each record's total, what it is judged on, and its severity on its rank: at least 5% of the
 * rank's steady state. Then what dominates it: the GPU idle while the host was busy outside
 * CUDA when that is most of the total, except where a finding that makes the host wait (a
 * synchronize, .item(), a synchronous copy, an allocation) left the GPU nothing queued: that
 * idle is the wait's doing unless the host work is more than the rank's GPU work (busy), when
 * removing the wait could not hide it. */
static void judge(struct cuptrace_analysis *o, struct cuptrace_an_finding *f, int kind,
                  int64_t busy)
{
	const struct cuptrace_an_rank *r = &o->ranks[f->top_rank];
	int64_t span = r->steady_to - r->steady_from;
	switch (kinds[kind].judge) {
	case J_IDLE:
		f->total_ns = f->idle_ns;
		f->judged_on = "the GPU idle it explains";
		break;
	case J_WORK_IDLE:
		f->total_ns = f->work_ns + f->idle_ns;
		f->judged_on = "its GPU time and the GPU idle it explains";
		break;
	case J_WALL:
		f->judged_on = "the runs' wall time (their kernels and the GPU idle between them)";
		break;
	case J_NOTE:
		f->total_ns = f->idle_ns;
		f->judged_on = NULL;
		break;
	}
	f->top_rank_ns = f->total_ns;
	f->share = span > 0 ? (double)f->total_ns / (double)span : 0;
	f->severe = f->judged_on && span > 0 && f->total_ns * 20 >= span;
	int waits = kind == K_HOST_SYNC || kind == K_ITEM || kind == K_SYNC_COPY || kind == K_ALLOC;
	if (kinds[kind].advice_host && f->idle_host_ns > 0 && f->idle_host_ns * 2 > f->total_ns &&
	    (!waits || f->idle_host_ns > busy)) {
		f->dominant = "host_outside_cuda";
		f->advice = kinds[kind].advice_host;
	} else {
		f->dominant = f->call_ns > f->work_ns && f->call_ns > f->idle_ns ? "call"
		              : f->work_ns > f->idle_ns                          ? "gpu_work"
		                                                                 : "gpu_idle";
	}
}

static void fcounts_free(struct fset *fs)
{
	for (size_t i = 0; i < fs->hccap; i++)
		anx_fcount_free(&fs->hc[i]);
	free(fs->hc);
	fs->hc = NULL;
	fs->hccap = 0;
}

int anx_findings(struct anx *x)
{
	struct cuptrace_analysis *o = x->out;
	struct fset fs = {.nranks = o->nranks};
	struct spans sp = {0};
	int err = anx_rank_figures(x);
	if (err)
		return err;
	if (!(fs.idx = calloc((size_t)K_N * (o->nranks + 1), sizeof(*fs.idx))))
		return -ENOMEM;
	if ((err = host_findings(x, &fs)) || (err = stream_findings(x, &fs, &sp)) ||
	    (spans_index(&sp), (err = work_findings(x, &fs, &sp))) ||
	    (err = resolve_samples(x, &fs))) {
		free(sp.v);
		free(fs.f);
		free(fs.idx);
		free(fs.cl);
		fcounts_free(&fs);
		return err;
	}
	free(sp.v);
	free(fs.cl);
	/* Each record's top frames from its instances' samples. */
	for (size_t i = 0; i < fs.n && i < fs.hccap; i++) {
		fs.f[i].host_samples = fs.hc[i].samples;
		fs.f[i].nhost_frames =
		    anx_fcount_top(x, &fs.hc[i], fs.f[i].host_frames, CUPTRACE_AN_FINDING_FRAMES);
	}
	fcounts_free(&fs);
	/* Each rank's GPU busy in the tables (its steady state where it has steps). */
	int64_t *busy = calloc(o->nranks + 1, sizeof(*busy));
	if (!busy) {
		free(fs.f);
		free(fs.idx);
		return -ENOMEM;
	}
	for (size_t g = 0; g < o->ngpus; g++)
		busy[o->gpus[g].rank] += o->gpus[g].busy_ns;
	for (size_t i = 0; i < fs.n; i++) {
		int kind = 0;
		while (kind < K_N - 1 && strcmp(kinds[kind].id, fs.f[i].id))
			kind++;
		judge(o, &fs.f[i], kind, busy[fs.f[i].top_rank]);
	}
	free(busy);
	free(fs.idx);
	o->findings = fs.f;
	o->nfindings = fs.n;
	return 0;
}
