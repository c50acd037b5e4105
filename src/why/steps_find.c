/* The steps of `cuptrace analyze`: where they come from, per process, in this order (README
 * "Why is it slow", Steps): --step NAME ranges; torch.profiler's ProfilerStep#N; another
 * numbered family of ranges that forms steps ("step 0", "iter 12"); optimizer.step() marks
 * (record's default hook) or --pytorch's "Optimizer.step#" ranges; else the iterations of the
 * GPU work itself (steps_period.c). Then each step's period, GPU extent, busy, host gap,
 * outliers and what made each one slow; and, for a process with no steps, where its start-up
 * ends. Called by analyze_run.c; calls analyze_query.c and steps_period.c.
 * Cost: linear passes and sorts; the period finder is O(n log n). */
#include "why/compute_state.h"
#include "names/step_name.h"
#include "why/steps_period.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *const cuptrace_step_cause_names[CUPTRACE_STEP_NCAUSES] = {NULL, "gpu_work", "host_gap",
                                                                      "host_sync", "collective"};

/* Step sources, by precedence. */
enum { S_NONE = 0, S_OPTION, S_PROFILER, S_FAMILY, S_OPT_MARK, S_OPT_RANGE, S_PERIOD, S_N };

static const char *const kind_names[S_N] = {
    NULL, "option", "profiler_step", "nvtx_family", "optimizer", "optimizer", "gpu_period"};

/* A step's mark on a thread: a range, an optimizer.step(), or an iteration's launches. */
struct mark {
	int64_t ts, end;
	uint32_t thread;
	uint32_t name;  /* string id */
	int64_t number; /* from the name; -1: none */
	uint32_t proc;  /* index in x->procs */
};

struct mlist {
	struct mark *v;
	size_t n, cap;
};

static int mpush(struct mlist *l, struct mark m)
{
	if (CUPTRACE_GROW(l->v, l->cap, l->n + 1))
		return -ENOMEM;
	l->v[l->n++] = m;
	return 0;
}

/* A numbered family on one thread ("step N" on the main thread). */
struct fam {
	uint32_t thread, family; /* family: the name without its number, a string id */
	struct mlist marks;
	int64_t last_end; /* the outermost instance so far ends here */
	uint64_t covered; /* launch calls of its process inside its instances */
	int ok;
};

/* A launch call's start and end. */
struct launch_at {
	int64_t ts, end;
};

/* GPU work of a process by launch time, for the steps' figures. */
struct pw {
	int64_t lts, ts, end;
	int nccl;
};
struct pwl {
	struct pw *v;
	size_t n, cap;
};

struct st {
	struct anx *x;
	uint32_t *fam_of; /* per string id: family id + 1, 1: none, 0: not looked at */
	int64_t *num_of;  /* per string id: its number */
	size_t nnames;
	struct mlist cat[S_N]; /* S_OPTION, S_PROFILER, S_OPT_MARK, S_OPT_RANGE (and S_PERIOD) */
	struct fam *fams;
	size_t nfams, famcap;
	struct cuptrace_u64map fam_idx; /* (thread, family) -> fams index + 1 */
	uint8_t *src;                   /* per process: the source chosen */
	size_t *fam_pick;               /* per process: the family chosen (S_FAMILY) */
	struct pwl *work;               /* per process */
	uint32_t *proc_of;              /* per thread: its process (index in x->procs), or
	                                 * UINT32_MAX */
	struct launch_at *lat;          /* launch calls by process, then start (launch_lists) */
	size_t *lat_first;
	uint32_t iteration; /* the string "iteration" */
	double conf_steps;  /* the period finder's, lowest over processes it found */
	double conf_try;    /* its best try anywhere */
	size_t stepcap;
};

static uint32_t find_proc(const struct anx *x, uint32_t t)
{
	const struct an_thread *th = &x->an->threads[t];
	const struct anx_proc *p = anx_proc_find(x, th->file, th->pid);
	return p ? (uint32_t)(p - x->procs) : UINT32_MAX;
}

/* The family of string id name (0: none) and its number. */
static uint32_t family_of(struct st *s, uint32_t name, int64_t *num)
{
	if (name >= s->nnames)
		return 0;
	if (!s->fam_of[name]) {
		const char *str = anx_str(s->x, name);
		size_t len;
		int64_t v;
		uint32_t id = 0;
		if (cuptrace_step_family(str, &len, &v))
			id = cuptrace_strtab_intern(&s->x->priv->strs, str, len);
		s->fam_of[name] = id ? id + 1 : 1;
		s->num_of[name] = id ? v : -1;
	}
	*num = s->num_of[name];
	return s->fam_of[name] - 1;
}

/* The number a name carries after want's family name, or -1 ("step 12" -> 12). */
static int64_t number_in(const char *name)
{
	size_t len;
	int64_t v;
	return cuptrace_step_family(name, &len, &v) ? v : -1;
}

/* One pass over the ranges (sorted by thread, then start, outer first): the marks of every
 * source, the outermost of each kind per thread (a range of the kind inside another one is not
 * a step of its own). */
static int collect(struct st *s)
{
	struct anx *x = s->x;
	const struct an *an = x->an;
	const char *want = an->opts.step_name;
	int64_t last_end[S_N];
	uint32_t thr = UINT32_MAX, proc = UINT32_MAX;
	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		if (h->cls != H_RANGE)
			continue;
		if (h->thread != thr) {
			thr = h->thread;
			proc = s->proc_of[thr];
			for (int k = 0; k < S_N; k++)
				last_end[k] = INT64_MIN;
		}
		if (proc == UINT32_MAX)
			continue; /* a process with no GPU work and no launches */
		const char *name = anx_str(x, h->name);
		struct mark m = {h->ts, h->ts + h->dur, h->thread, h->name, -1, proc};
		int k = S_NONE;
		if (want) {
			if (cuptrace_step_name_matches(name, want)) {
				k = S_OPTION;
				m.number = number_in(name);
			}
		} else if (!strncmp(name, "ProfilerStep#", 13)) {
			k = S_PROFILER;
			m.number = number_in(name);
		} else if (!strcmp(name, "optimizer.step")) {
			k = S_OPT_MARK;
		} else if (!strncmp(name, "Optimizer.step#", 15)) {
			k = S_OPT_RANGE;
		}
		if (k != S_NONE) {
			if (h->ts >= last_end[k]) {
				if (mpush(&s->cat[k], m))
					return -ENOMEM;
				last_end[k] = m.end;
			}
			continue;
		}
		if (want)
			continue;
		uint32_t fam = family_of(s, h->name, &m.number);
		if (!fam)
			continue;
		int created;
		uint64_t *v = cuptrace_u64map_put(&s->fam_idx, (uint64_t)thr << 32 | fam, &created);
		if (!v)
			return -ENOMEM;
		if (created) {
			if (CUPTRACE_GROW(s->fams, s->famcap, s->nfams + 1))
				return -ENOMEM;
			s->fams[s->nfams] =
			    (struct fam){.thread = thr, .family = fam, .last_end = INT64_MIN};
			*v = ++s->nfams;
		}
		struct fam *f = &s->fams[*v - 1];
		if (h->ts < f->last_end)
			continue;
		f->last_end = m.end;
		if (mpush(&f->marks, m))
			return -ENOMEM;
	}
	return 0;
}

static int i64_cmp(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

/* A family forms steps when it has 3 or more instances, mostly with numbers of their own (the
 * layers of a model, "layer_0" .. "layer_11" in every step, repeat theirs), and GPU work is
 * launched inside them. */
static int judge_families(struct st *s)
{
	struct anx *x = s->x;
	for (size_t i = 0; i < s->nfams; i++) {
		struct fam *f = &s->fams[i];
		if (f->marks.n < 3)
			continue;
		int64_t *v = malloc(f->marks.n * sizeof(*v));
		if (!v)
			return -ENOMEM;
		for (size_t k = 0; k < f->marks.n; k++)
			v[k] = f->marks.v[k].number;
		qsort(v, f->marks.n, sizeof(*v), i64_cmp);
		size_t distinct = 1;
		for (size_t k = 1; k < f->marks.n; k++)
			distinct += v[k] != v[k - 1];
		free(v);
		const struct anx_proc *p = &x->procs[f->marks.v[0].proc];
		for (size_t k = 0; k < f->marks.n; k++)
			f->covered += anx_count_in(p->launch, p->nlaunch, f->marks.v[k].ts,
			                           f->marks.v[k].end + 1);
		f->ok = distinct * 2 >= f->marks.n && f->covered > 0;
	}
	return 0;
}

/* The family of process proc that clearly forms its steps: the one whose instances hold the
 * most launches; a finer one that holds nearly as many (80%) in at least twice as many
 * instances wins over it ("step N" inside "epoch N"). SIZE_MAX: none. */
static size_t pick_family(const struct st *s, uint32_t proc)
{
	size_t best = SIZE_MAX;
	for (size_t i = 0; i < s->nfams; i++) {
		const struct fam *f = &s->fams[i];
		if (f->ok && f->marks.v[0].proc == proc &&
		    (best == SIZE_MAX || f->covered > s->fams[best].covered ||
		     (f->covered == s->fams[best].covered && f->marks.n > s->fams[best].marks.n)))
			best = i;
	}
	for (int changed = best != SIZE_MAX; changed;) {
		changed = 0;
		for (size_t i = 0; i < s->nfams; i++) {
			const struct fam *f = &s->fams[i], *b = &s->fams[best];
			if (f->ok && f->marks.v[0].proc == proc && f->marks.n >= 2 * b->marks.n &&
			    f->covered * 5 >= b->covered * 4) {
				best = i;
				changed = 1;
			}
		}
	}
	return best;
}

/* ---- iterations from the GPU work (processes without marks) ---- */

/* Per launch call: the name of its earliest work (the token), whether it launched compute
 * (a kernel or graph), and its work's GPU time. */
struct call_tok {
	uint32_t name;
	int compute;
	int64_t first, w;
};

struct thr_n {
	uint32_t thread;
	size_t n;
};

static int thr_n_cmp(const void *pa, const void *pb)
{
	const struct thr_n *a = pa, *b = pb;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	return a->thread < b->thread ? -1 : a->thread > b->thread;
}

/* The iterations of one launching thread (host slices of it that launched work, in order), into
 * *r with item positions turned into host slice indices. */
static int thread_period(struct st *s, uint32_t t, const struct call_tok *ct,
                         const struct launch_at *pl, size_t npl, uint32_t *dense, size_t nstr,
                         struct cuptrace_period *r)
{
	const struct an *an = s->x->an;
	const struct an_thread *th = &an->threads[t];
	size_t n = 0, k = 0;
	for (size_t i = th->first; i < th->first + th->n; i++)
		n += an->host[i].launched && ct[i].name;
	size_t *idx = malloc((n + 1) * sizeof(*idx));
	uint32_t *tok = malloc((n + 1) * sizeof(*tok));
	uint8_t *compute = calloc(n + 1, 1);
	int64_t *w = malloc((n + 1) * sizeof(*w)), *gap = malloc((n + 1) * sizeof(*gap));
	int err = -ENOMEM;
	memset(r, 0, sizeof(*r));
	if (!idx || !tok || !w || !gap || !compute)
		goto out;
	memset(dense, 0xff, nstr * sizeof(*dense));
	uint32_t ntok = 0;
	size_t lo = 0;
	for (size_t i = th->first; i < th->first + th->n; i++) {
		const struct an_host *h = &an->host[i];
		if (!h->launched || !ct[i].name)
			continue;
		uint32_t nm = ct[i].name < nstr ? ct[i].name : 0;
		if (dense[nm] == UINT32_MAX)
			dense[nm] = ntok++;
		/* The host time before it in which no launch call of the process ran (the
		 * thread's calls come in time order: the position only moves on). */
		while (lo < npl && pl[lo].ts < h->ts)
			lo++;
		int64_t g = lo ? h->ts - pl[lo - 1].end : 0;
		idx[k] = i;
		tok[k] = dense[nm];
		compute[dense[nm]] |= (uint8_t)ct[i].compute;
		w[k] =
		    ct[i].w + 1000; /* a launch counts for a little even when its work is short */
		gap[k] = g > 0 ? g : 0;
		k++;
	}
	struct cuptrace_period_in in = {tok, w, gap, compute, k, ntok};
	if ((err = cuptrace_period_find(&in, r)))
		goto out;
	for (size_t j = 0; j < r->nstarts; j++)
		r->starts[j] = idx[r->starts[j]];
	r->end = r->nstarts ? idx[r->end - 1] + 1 : 0;
out:
	free(idx);
	free(tok);
	free(compute);
	free(w);
	free(gap);
	return err;
}

/* The iterations of process proc's busiest launching threads (those with a fifth of its launch
 * calls or more, at most 3), the most confident kept, as marks: from the first launch call of
 * an iteration to the end of its last. pl: the process's launch calls by start. */
static int period_marks(struct st *s, uint32_t proc, const struct call_tok *ct,
                        const struct launch_at *pl, size_t npl)
{
	struct anx *x = s->x;
	const struct an *an = x->an;
	const struct anx_proc *p = &x->procs[proc];
	struct thr_n *tn = NULL;
	size_t ntn = 0, tncap = 0, nstr = x->priv->strs.n + 1;
	uint32_t *dense = NULL;
	struct cuptrace_period best = {0}, r;
	uint32_t best_thread = 0;
	int err = -ENOMEM;
	for (size_t t = 0; t < an->nthreads; t++) {
		const struct an_thread *th = &an->threads[t];
		if (th->file != p->file || th->pid != p->pid)
			continue;
		size_t n = 0;
		for (size_t i = th->first; i < th->first + th->n; i++)
			n += an->host[i].launched && ct[i].name;
		if (!n || n * 5 < p->nlaunch)
			continue;
		if (CUPTRACE_GROW(tn, tncap, ntn + 1))
			goto out;
		tn[ntn++] = (struct thr_n){(uint32_t)t, n};
	}
	if (ntn)
		qsort(tn, ntn, sizeof(*tn), thr_n_cmp);
	if (ntn > 3)
		ntn = 3;
	if (ntn && !(dense = malloc(nstr * sizeof(*dense))))
		goto out;
	for (size_t c = 0; c < ntn; c++) {
		if ((err = thread_period(s, tn[c].thread, ct, pl, npl, dense, nstr, &r)))
			goto out;
		if (r.confidence > s->conf_try)
			s->conf_try = r.confidence;
		if (r.nstarts && (!best.nstarts || r.confidence > best.confidence)) {
			cuptrace_period_free(&best);
			best = r;
			best_thread = tn[c].thread;
		} else {
			cuptrace_period_free(&r);
		}
	}
	err = 0;
	if (!best.nstarts)
		goto out;
	if (best.confidence < s->conf_steps)
		s->conf_steps = best.confidence;
	for (size_t j = 0; j < best.nstarts; j++) {
		size_t a = best.starts[j], b = j + 1 < best.nstarts ? best.starts[j + 1] : best.end;
		/* The iteration's last launch call: the last launching slice before b. */
		size_t e = b - 1;
		while (e > a && !(an->host[e].launched && ct[e].name))
			e--;
		const struct an_host *h0 = &an->host[a], *h1 = &an->host[e];
		struct mark m = {h0->ts,       h1->ts + h1->dur, best_thread,
		                 s->iteration, (int64_t)j,       proc};
		if ((err = mpush(&s->cat[S_PERIOD], m)))
			goto out;
	}
out:
	cuptrace_period_free(&best);
	free(tn);
	free(dense);
	return err;
}

static int lat_cmp(const void *pa, const void *pb)
{
	const struct launch_at *a = pa, *b = pb;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* Every process's launch calls by start, their ends a running maximum (so "no launch call ran
 * between" is the stretch from one's end to the next's start): s->lat, process p's from
 * s->lat_first[p] to s->lat_first[p + 1]. */
static int launch_lists(struct st *s)
{
	struct anx *x = s->x;
	const struct an *an = x->an;
	size_t *fill = NULL;
	if (!(s->lat_first = calloc(x->nprocs + 2, sizeof(*s->lat_first))))
		return -ENOMEM;
	for (size_t i = 0; i < an->nhost; i++) {
		uint32_t p = s->proc_of[an->host[i].thread];
		if (an->host[i].launched && p != UINT32_MAX)
			s->lat_first[p + 1]++;
	}
	for (size_t p = 0; p < x->nprocs; p++)
		s->lat_first[p + 1] += s->lat_first[p];
	size_t n = s->lat_first[x->nprocs];
	if (!(fill = malloc((x->nprocs + 1) * sizeof(*fill))) ||
	    (n && !(s->lat = malloc(n * sizeof(*s->lat))))) {
		free(fill);
		return -ENOMEM;
	}
	memcpy(fill, s->lat_first, (x->nprocs + 1) * sizeof(*fill));
	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		uint32_t p = s->proc_of[h->thread];
		if (h->launched && p != UINT32_MAX)
			s->lat[fill[p]++] = (struct launch_at){h->ts, h->ts + h->dur};
	}
	free(fill);
	for (size_t p = 0; p < x->nprocs; p++) {
		struct launch_at *l = s->lat + s->lat_first[p];
		size_t m = s->lat_first[p + 1] - s->lat_first[p];
		if (m) /* in order already where the process has one launching thread */
			an_sort(l, m, sizeof(*l), lat_cmp);
		for (size_t i = 1; i < m; i++)
			if (l[i].end < l[i - 1].end)
				l[i].end = l[i - 1].end;
	}
	return 0;
}

/* The launch calls' tokens, then period_marks for each process without marks. */
static int periods(struct st *s)
{
	struct anx *x = s->x;
	const struct an *an = x->an;
	int need = 0;
	for (size_t p = 0; p < x->nprocs; p++)
		need |= s->src[p] == S_NONE;
	if (!need || an->opts.step_name)
		return 0;
	struct call_tok *ct = calloc(an->nhost + 1, sizeof(*ct));
	int err = 0;
	if (!ct)
		return -ENOMEM;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		if (!w->launch)
			continue;
		struct call_tok *c = &ct[w->launch - 1];
		if (!c->name || w->ts < c->first) {
			c->name = w->name;
			c->first = w->ts;
		}
		c->compute |= w->kind == W_KERNEL || w->kind == W_GRAPH;
		c->w += w->dur;
	}
	for (size_t p = 0; p < x->nprocs && !err; p++) {
		size_t a = s->lat_first[p], n = s->lat_first[p + 1] - a;
		if (s->src[p] != S_NONE || !n)
			continue;
		size_t before = s->cat[S_PERIOD].n;
		err = period_marks(s, (uint32_t)p, ct, s->lat + a, n);
		if (!err && s->cat[S_PERIOD].n > before)
			s->src[p] = S_PERIOD;
	}
	free(ct);
	return err;
}

/* ---- the steps' figures ---- */

static int pw_cmp(const void *pa, const void *pb)
{
	const struct pw *a = pa, *b = pb;
	return a->lts < b->lts ? -1 : a->lts > b->lts;
}

/* Each process's GPU work with its launch call's start, sorted by that. */
static int work_lists(struct st *s)
{
	struct anx *x = s->x;
	const struct an *an = x->an;
	if (!(s->work = calloc(x->nprocs + 1, sizeof(*s->work))))
		return -ENOMEM;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		uint32_t p;
		int64_t lts;
		if (w->launch) {
			const struct an_host *h = &an->host[w->launch - 1];
			p = s->proc_of[h->thread];
			lts = h->ts;
		} else {
			/* No launch known (a trace without flows or correlation ids): its GPU's
			 * process, and its start stands for its launch. */
			const struct an_gpu_in *g = &an->gpus[an->streams[w->stream].gpu];
			const struct anx_proc *q = anx_proc_find(x, g->file, g->pid);
			p = q ? (uint32_t)(q - x->procs) : UINT32_MAX;
			lts = w->ts;
		}
		if (p == UINT32_MAX)
			continue;
		struct pwl *l = &s->work[p];
		if (CUPTRACE_GROW(l->v, l->cap, l->n + 1))
			return -ENOMEM;
		l->v[l->n++] = (struct pw){lts, w->ts, w->ts + w->dur, (w->flags & WF_NCCL) != 0};
	}
	for (size_t p = 0; p < x->nprocs; p++)
		if (s->work[p].n)
			an_sort(s->work[p].v, s->work[p].n, sizeof(*s->work[p].v), pw_cmp);
	return 0;
}

/* The longest stretch of [a, b) in which no launch call of the process ran (l[0..n): its
 * launch calls, ends a running maximum; a launch call blocked on a full queue is the GPU's time,
 * not the host's), into st's host gap. */
static void host_gap(const struct launch_at *l, size_t n, int64_t a, int64_t b,
                     struct cuptrace_an_step *st)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l[mid].ts < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	int64_t prev = lo && l[lo - 1].end > a ? l[lo - 1].end : a;
	st->host_gap_ns = 0;
	st->host_gap_ts = a;
	for (size_t i = lo;; i++) {
		int64_t t = i < n && l[i].ts < b ? l[i].ts : b;
		if (prev < b && t - prev > st->host_gap_ns) {
			st->host_gap_ns = t - prev;
			st->host_gap_ts = prev;
		}
		if (t == b)
			break;
		if (l[i].end > prev)
			prev = l[i].end;
	}
}

/* The steps of one thread's marks m[0..n), of source k: host parts, completions, periods
 * (README), then figures. */
static int add_steps(struct st *s, const struct mark *m, size_t n, int k)
{
	struct anx *x = s->x;
	struct cuptrace_analysis *o = x->out;
	const struct an_thread *th = &x->an->threads[m[0].thread];
	const struct anx_proc *p = &x->procs[m[0].proc];
	const struct pwl *wl = &s->work[m[0].proc];
	const struct launch_at *lat = s->lat + s->lat_first[m[0].proc];
	size_t nlat = s->lat_first[m[0].proc + 1] - s->lat_first[m[0].proc];
	if (CUPTRACE_GROW(o->steps, s->stepcap, o->nsteps + n))
		return -ENOMEM;
	/* Numbers from the marks' names where every one has a number and they increase (one
	 * number is one step of the job over its ranks), else their places. */
	int named = k != S_PERIOD;
	for (size_t i = 0; i < n && named; i++)
		named = m[i].number >= 0 && (!i || m[i].number > m[i - 1].number);
	/* A step's host part runs from where the previous one's mark ended on this thread (the
	 * host left it) to the end of its own; it completes when that has ended and the GPU work
	 * launched in it has too; its period runs from the previous completion to its own. */
	int64_t h = m[0].ts, done = m[0].ts;
	for (size_t i = 0; i < n; i++) {
		int64_t hend =
		    i + 1 < n ? (m[i].end < m[i + 1].ts ? m[i].end : m[i + 1].ts) : m[i].end;
		if (hend < h)
			hend = h; /* overlapping marks: an empty host part, never a negative one */
		/* Work launched inside: before the next step's host part (the last: up to its
		 * mark's end). */
		int64_t wend = i + 1 < n ? hend : m[i].end + 1;
		struct cuptrace_an_step *st = &o->steps[o->nsteps++];
		*st = (struct cuptrace_an_step){.name = anx_str(x, m[i].name),
		                                .number = named ? m[i].number : (int64_t)i,
		                                .pid = th->pid,
		                                .file = th->file,
		                                .tid = th->tid,
		                                .host_ts = h,
		                                .host_dur = hend - h,
		                                .mark_ts = m[i].ts,
		                                .mark_dur = m[i].end - m[i].ts,
		                                .startup = i == 0};
		size_t lo = 0, hi = wl->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (wl->v[mid].lts < h)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (size_t j = lo; j < wl->n && wl->v[j].lts < wend; j++) {
			const struct pw *w = &wl->v[j];
			if (!st->kernels || w->ts < st->gpu_ts)
				st->gpu_ts = w->ts;
			if (!st->kernels || w->end > st->gpu_end)
				st->gpu_end = w->end;
			*(w->nccl ? &st->comm_ns : &st->gpu_work_ns) += w->end - w->ts;
			st->kernels++;
		}
		int64_t end = m[i].end > hend ? m[i].end : hend;
		if (st->kernels && st->gpu_end > end)
			end = st->gpu_end;
		if (end < done)
			end = done; /* completions in order: never a negative period */
		st->ts = i ? done : m[0].ts;
		st->dur = end - st->ts;
		st->busy_ns = anx_busy_in(p, st->ts, end);
		st->idle_ns = st->dur - st->busy_ns;
		st->launches = anx_count_in(p->launch, p->nlaunch, h, wend);
		host_gap(lat, nlat, h, hend, st);
		int64_t by[B_N] = {0};
		if (st->host_gap_ns > 0)
			anx_blocked(x, m[i].thread, st->host_gap_ts,
			            st->host_gap_ts + st->host_gap_ns, by);
		st->host_gap_blocked_ns = by[B_SYNC] + by[B_ITEM] + by[B_SYNC_COPY] + by[B_ALLOC];
		if (st->host_gap_blocked_ns > st->host_gap_ns)
			st->host_gap_blocked_ns = st->host_gap_ns;
		h = hend;
		done = end;
	}
	return 0;
}

/* Steps for each process from its chosen source, thread by thread. */
static int make_steps(struct st *s)
{
	for (int k = S_OPTION; k < S_N; k++) {
		const struct mlist *l = &s->cat[k];
		for (size_t i = 0, j; i < l->n; i = j) {
			for (j = i + 1; j < l->n && l->v[j].thread == l->v[i].thread; j++)
				;
			if (s->src[l->v[i].proc] != k)
				continue;
			int err = add_steps(s, l->v + i, j - i, k);
			if (err)
				return err;
		}
	}
	for (size_t p = 0; p < s->x->nprocs; p++) {
		if (s->src[p] != S_FAMILY)
			continue;
		const struct fam *f = &s->fams[s->fam_pick[p]];
		int err = add_steps(s, f->marks.v, f->marks.n, S_FAMILY);
		if (err)
			return err;
	}
	return 0;
}

static int64_t median(int64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), i64_cmp);
	return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

static int step_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_step *a = pa, *b = pb;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->tid < b->tid ? -1 : a->tid > b->tid;
}

/* Warm-up: on each thread, the slow steps right after its first (outliers by the limit lim,
 * at most 3 or a tenth of its steps) are start-up too: the first iterations that allocate,
 * autotune or compile are no slow step of the loop. */
static void warmup(struct cuptrace_an_step *st, size_t a, size_t b, int64_t lim)
{
	for (size_t i = a; i < b; i++) {
		int first = 1;
		for (size_t j = a; j < i && first; j++)
			first = st[j].tid != st[i].tid;
		if (!first || !st[i].startup)
			continue;
		size_t n = 0, max, left = 0;
		for (size_t j = i + 1; j < b; j++)
			n += st[j].tid == st[i].tid;
		max = n / 10 > 3 ? n / 10 : 3;
		for (size_t j = i + 1; j < b && left < max; j++) {
			if (st[j].tid != st[i].tid)
				continue;
			if (st[j].dur <= lim)
				break;
			st[j].startup = 1;
			left++;
		}
	}
}

/* Outliers per process, over its steps but the start-up ones: a period beyond the median by
 * more than 20% of it and 5 MADs (jitter of +-10% is no outlier), with 3 such steps or more.
 * The cause: what of the period grew most over its process's median: the GPU work launched in
 * it, its collectives (NCCL kernels: a wait for another rank), or the GPU's idle time, which is
 * the host's (busy outside CUDA, or in blocking calls where those hold most of its longest
 * launch-free stretch; a host that waited for its own GPU work leaves no GPU idle). */
static int judge(struct anx *x, size_t a, size_t b)
{
	struct cuptrace_an_step *st = x->out->steps;
	size_t n = 0;
	for (size_t i = a; i < b; i++)
		n += !st[i].startup;
	if (n < 3)
		return 0;
	int64_t *v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	int64_t med[4];
	for (int f = 0; f < 4; f++) {
		size_t k = 0;
		for (size_t i = a; i < b; i++) {
			const struct cuptrace_an_step *s = &st[i];
			if (s->startup)
				continue;
			v[k++] = f == 0   ? s->dur
			         : f == 1 ? s->gpu_work_ns
			         : f == 2 ? s->idle_ns
			                  : s->comm_ns;
		}
		med[f] = median(v, n);
	}
	size_t k = 0;
	for (size_t i = a; i < b; i++)
		if (!st[i].startup)
			v[k++] = st[i].dur > med[0] ? st[i].dur - med[0] : med[0] - st[i].dur;
	int64_t mad = median(v, n);
	free(v);
	int64_t lim = med[0] / 5 > 5 * mad ? med[0] / 5 : 5 * mad;
	warmup(st, a, b, med[0] + lim);
	for (size_t i = a; i < b; i++) {
		struct cuptrace_an_step *s = &st[i];
		if (s->startup || s->dur <= med[0] + lim)
			continue;
		s->outlier = 1;
		/* What grew: the GPU's own work, its collectives, or its idle time (the host's:
		 * busy outside CUDA, or sitting in blocking calls, as in its longest launch-free
		 * stretch). */
		int64_t dgpu = s->gpu_work_ns - med[1], didle = s->idle_ns - med[2];
		int64_t dcomm = s->comm_ns - med[3];
		if (dgpu > 0 && dgpu >= didle && dgpu >= dcomm) {
			s->cause = CUPTRACE_STEP_CAUSE_GPU_WORK;
			s->cause_ns = dgpu;
		} else if (dcomm > 0 && dcomm >= didle) {
			s->cause = CUPTRACE_STEP_CAUSE_COLLECTIVE;
			s->cause_ns = dcomm;
		} else if (didle > 0) {
			s->cause = 2 * s->host_gap_blocked_ns >= s->host_gap_ns
			               ? CUPTRACE_STEP_CAUSE_HOST_SYNC
			               : CUPTRACE_STEP_CAUSE_HOST_GAP;
			s->cause_ns = didle;
		}
	}
	return 0;
}

/* The figures over all steps: median, min, max, MAD of the periods of the steps judged (not
 * start-up; all where every one is). */
static int summary(struct anx *x)
{
	struct cuptrace_analysis *o = x->out;
	size_t n = 0;
	for (size_t i = 0; i < o->nsteps; i++)
		n += !o->steps[i].startup;
	int all = n == 0;
	if (all)
		n = o->nsteps;
	if (!n)
		return 0;
	int64_t *v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < o->nsteps; i++)
		if (all || !o->steps[i].startup)
			v[k++] = o->steps[i].dur;
	o->step_median_ns = median(v, n);
	o->step_min_ns = v[0];
	o->step_max_ns = v[n - 1];
	for (size_t i = 0; i < n; i++)
		v[i] =
		    v[i] > o->step_median_ns ? v[i] - o->step_median_ns : o->step_median_ns - v[i];
	o->step_mad_ns = median(v, n);
	free(v);
	return 0;
}

/* Each process's steady state with steps: from the end of its start-up steps (the first ones,
 * and the warm-up after them, in time order; one step alone: that step) to its last step's
 * completion. */
static void steady_windows(struct anx *x)
{
	const struct cuptrace_analysis *o = x->out;
	for (size_t a = 0, b; a < o->nsteps; a = b) {
		const struct cuptrace_an_step *s = o->steps;
		for (b = a + 1; b < o->nsteps && s[b].file == s[a].file && s[b].pid == s[a].pid;
		     b++)
			;
		const struct anx_proc *cp = anx_proc_find(x, s[a].file, s[a].pid);
		if (!cp)
			continue;
		struct anx_proc *p = &x->procs[cp - x->procs];
		p->steps = 1;
		p->steady_from = s[a].ts;
		p->steady_to = INT64_MIN;
		size_t i = a;
		for (; i < b && s[i].startup; i++)
			if (s[i].ts + s[i].dur > p->steady_from)
				p->steady_from = s[i].ts + s[i].dur;
		if (i == b) /* every step is start-up: they are the window */
			p->steady_from = s[a].ts;
		for (i = a; i < b; i++)
			if (s[i].ts + s[i].dur > p->steady_to)
				p->steady_to = s[i].ts + s[i].dur;
	}
}

/* Without steps, a process's start-up ends after its last long one-off GPU idle: a gap of at
 * least 5% of its GPU span (first work to last end), starting in the first half, and longer
 * than twice every later gap (model load, compilation; not a gap the loop repeats). */
static void startups(struct st *s)
{
	struct anx *x = s->x;
	for (size_t p = 0; p < x->nprocs; p++) {
		struct anx_proc *q = &x->procs[p];
		q->startup_end = 0;
		if (q->steps || q->niv < 2)
			continue;
		int64_t span = q->iv[q->niv - 1].end - q->iv[0].ts, later = 0;
		for (size_t i = q->niv - 1; i > 0; i--) {
			int64_t g0 = q->iv[i - 1].end, g = q->iv[i].ts - g0;
			if (g * 20 >= span && g > 2 * later && g0 - q->iv[0].ts < span / 2) {
				q->startup_end = q->iv[i].ts;
				break;
			}
			if (g > later)
				later = g;
		}
		if (q->startup_end &&
		    (!x->out->startup_end || q->startup_end < x->out->startup_end))
			x->out->startup_end = q->startup_end;
	}
}

static void free_st(struct st *s)
{
	free(s->fam_of);
	free(s->num_of);
	for (int k = 0; k < S_N; k++)
		free(s->cat[k].v);
	for (size_t i = 0; i < s->nfams; i++)
		free(s->fams[i].marks.v);
	free(s->fams);
	cuptrace_u64map_free(&s->fam_idx);
	free(s->src);
	free(s->fam_pick);
	if (s->work && s->x)
		for (size_t p = 0; p < s->x->nprocs; p++)
			free(s->work[p].v);
	free(s->work);
	free(s->lat);
	free(s->lat_first);
	free(s->proc_of);
}

int anx_steps(struct anx *x)
{
	struct cuptrace_analysis *o = x->out;
	struct st s = {.x = x, .conf_steps = 1.0};
	int err = anx_proc_tables(x);
	if (err)
		return err;
	cuptrace_u64map_init(&s.fam_idx);
	err = -ENOMEM;
	s.nnames = x->priv->strs.n + 1;
	if (!(s.fam_of = calloc(s.nnames, sizeof(*s.fam_of))) ||
	    !(s.num_of = calloc(s.nnames, sizeof(*s.num_of))) ||
	    !(s.src = calloc(x->nprocs + 1, 1)) ||
	    !(s.fam_pick = calloc(x->nprocs + 1, sizeof(*s.fam_pick))) ||
	    !(s.proc_of = malloc((x->an->nthreads + 1) * sizeof(*s.proc_of))) ||
	    !(s.iteration = cuptrace_strtab_intern(&x->priv->strs, "iteration", 9)))
		goto out;
	for (size_t t = 0; t < x->an->nthreads; t++)
		s.proc_of[t] = find_proc(x, (uint32_t)t);
	if ((err = collect(&s)) || (err = judge_families(&s)))
		goto out;
	/* Each process's source, by precedence. */
	for (int k = S_OPTION; k <= S_OPT_RANGE; k++) {
		if (k == S_FAMILY) {
			for (size_t p = 0; p < x->nprocs; p++) {
				if (s.src[p] != S_NONE)
					continue;
				s.fam_pick[p] = pick_family(&s, (uint32_t)p);
				if (s.fam_pick[p] != SIZE_MAX)
					s.src[p] = S_FAMILY;
			}
			continue;
		}
		for (size_t i = 0; i < s.cat[k].n; i++)
			if (s.src[s.cat[k].v[i].proc] == S_NONE)
				s.src[s.cat[k].v[i].proc] = (uint8_t)k;
	}
	if ((err = launch_lists(&s)) || (err = periods(&s)) || (err = work_lists(&s)) ||
	    (err = make_steps(&s)))
		goto out;
	if (o->nsteps)
		qsort(o->steps, o->nsteps, sizeof(*o->steps), step_cmp);
	for (size_t a = 0, b; a < o->nsteps; a = b) {
		for (b = a + 1; b < o->nsteps && o->steps[b].file == o->steps[a].file &&
		                o->steps[b].pid == o->steps[a].pid;
		     b++)
			;
		if ((err = judge(x, a, b)))
			goto out;
	}
	if ((err = summary(x)))
		goto out;
	steady_windows(x);
	startups(&s);
	/* What the report says of the source. */
	int kind = S_NONE;
	for (size_t p = 0; p < x->nprocs; p++) {
		if (s.src[p] == S_NONE)
			continue;
		int same = !kind || kind == s.src[p] ||
		           (kind == S_OPT_MARK && s.src[p] == S_OPT_RANGE) ||
		           (kind == S_OPT_RANGE && s.src[p] == S_OPT_MARK);
		if (!kind) {
			kind = s.src[p];
			o->step_kind = kind_names[kind];
			o->step_source = kind == S_OPTION     ? x->an->opts.step_name
			                 : kind == S_PROFILER ? "ProfilerStep#"
			                 : kind == S_FAMILY
			                     ? anx_str(x, s.fams[s.fam_pick[p]].family)
			                 : kind == S_OPT_MARK  ? "optimizer.step"
			                 : kind == S_OPT_RANGE ? "Optimizer.step#"
			                                       : "GPU work";
		} else if (!same ||
		           (kind == S_FAMILY &&
		            strcmp(o->step_source, anx_str(x, s.fams[s.fam_pick[p]].family)))) {
			o->step_kind = o->step_source = "mixed";
		}
	}
	if (!o->nsteps)
		o->step_kind = o->step_source = NULL;
	if (o->step_kind &&
	    (!strcmp(o->step_kind, "nvtx_family") || !strcmp(o->step_kind, "option")))
		x->step_ranges = o->step_source;
	o->step_confidence = kind == S_PERIOD ? s.conf_steps : o->nsteps ? 1.0 : s.conf_try;
	err = 0;
out:
	free_st(&s);
	return err;
}
