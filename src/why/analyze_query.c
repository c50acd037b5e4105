/* Look-ups of an analysis computation (compute_state.h): strings, what a host thread was doing at a
 * time, per-process GPU busy intervals and launch times. Calls nothing of the other analyze
 * files. */
#include "why/compute_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *anx_str(const struct anx *x, uint32_t id)
{
	return id ? cuptrace_strtab_str(&x->priv->strs, id) : "";
}

/* What thread t was doing at time ts: innermost range and API call. */
void anx_host_ctx(const struct anx *x, uint32_t t, int64_t ts, struct cuptrace_an_host_ctx *c)
{
	const struct an *an = x->an;
	const struct an_thread *th = &an->threads[t];
	size_t lo = th->first, hi = th->first + th->n;
	memset(c, 0, sizeof(*c));
	c->tid = th->tid;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (an->host[mid].ts <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == th->first)
		return;
	size_t i = lo - 1;
	/* The API call: among the last few slices (API calls nest only in each other). */
	for (size_t k = 0; k < 4 && i + 1 > th->first + k; k++) {
		const struct an_host *h = &an->host[i - k];
		if (h->cls != H_RANGE && h->ts <= ts && h->ts + h->dur > ts) {
			c->api = anx_str(x, h->name);
			break;
		}
	}
	uint32_t r = an->host[i].cls == H_RANGE ? (uint32_t)i + 1 : an->host[i].parent;
	while (r && an->host[r - 1].ts + an->host[r - 1].dur <= ts)
		r = an->host[r - 1].parent;
	if (r)
		c->range = anx_str(x, an->host[r - 1].name);
}

uint32_t anx_range_of(const struct anx *x, uint32_t h)
{
	if (!h)
		return 0;
	const struct an_host *s = &x->an->host[h - 1];
	return s->cls == H_RANGE ? h : s->parent;
}

int anx_blocker_kind(const struct an_host *h)
{
	switch (h->cls) {
	case H_SYNC:
		return h->flags & HF_ITEM_SYNC ? B_ITEM : B_SYNC;
	case H_COPY_SYNC:
		return h->flags & HF_ITEM ? B_ITEM : B_SYNC_COPY;
	case H_ALLOC:
		return B_ALLOC;
	case H_API:
		return h->flags & HF_PAGEABLE ? B_PAGEABLE : -1;
	}
	return -1;
}

/* Blocking calls of a thread follow each other, or nest (a runtime call around its driver
 * call): walking back from the last one starting before b, the ones overlapping [a, b) come
 * first; the walk stops after two in a row that end before a (a bound of 64 keeps a long gap
 * full of calls linear). Nested calls count twice, so each kind is capped at b - a. */
void anx_blocked(const struct anx *x, uint32_t t, int64_t a, int64_t b, int64_t by[B_N])
{
	size_t first = x->blk_first[t], lo = first, hi = x->blk_first[t + 1];
	int64_t got[B_N] = {0};
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (x->an->host[x->blk[mid]].ts < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	int before = 0;
	for (size_t i = lo, n = 0; i > first && before < 2 && n < 64; i--, n++) {
		const struct an_host *h = &x->an->host[x->blk[i - 1]];
		int64_t s = h->ts > a ? h->ts : a, e = h->ts + h->dur < b ? h->ts + h->dur : b;
		if (e <= s) {
			before++;
			continue;
		}
		before = 0;
		got[anx_blocker_kind(h)] += e - s;
	}
	for (int k = 0; k < B_N; k++)
		by[k] += got[k] < b - a ? got[k] : b - a;
}

const struct anx_proc *anx_proc_find(const struct anx *x, size_t file, int32_t pid)
{
	uint64_t *v = cuptrace_u64map_get(&x->proc_of, an_key(file, (uint64_t)pid, 3));
	return v ? &x->procs[*v - 1] : NULL;
}

static struct anx_proc *proc_get(struct anx *x, size_t file, int32_t pid)
{
	int created;
	uint64_t *v = cuptrace_u64map_put(&x->proc_of, an_key(file, (uint64_t)pid, 3), &created);
	if (!v)
		return NULL;
	if (created) {
		struct anx_proc *p =
		    cuptrace_grow(x->procs, &x->proccap, x->nprocs + 1, sizeof(*p));
		if (!p) {
			cuptrace_u64map_del(&x->proc_of, an_key(file, (uint64_t)pid, 3));
			return NULL;
		}
		x->procs = p;
		x->procs[x->nprocs] = (struct anx_proc){.file = file, .pid = pid};
		*v = ++x->nprocs;
	}
	return &x->procs[*v - 1];
}

static int iv_cmp(const void *pa, const void *pb)
{
	const struct anx_iv *a = pa, *b = pb;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static int i64_cmp(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

static int push_i64(int64_t **arr, size_t *n, size_t *cap, int64_t v)
{
	int64_t *a = cuptrace_grow(*arr, cap, *n + 1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	*arr = a;
	a[(*n)++] = v;
	return 0;
}

int anx_proc_tables(struct anx *x)
{
	const struct an *an = x->an;
	cuptrace_u64map_init(&x->proc_of);
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		const struct an_gpu_in *g = &an->gpus[an->streams[w->stream].gpu];
		struct anx_proc *p = proc_get(x, g->file, g->pid);
		if (!p)
			return -ENOMEM;
		struct anx_iv *iv = cuptrace_grow(p->iv, &p->ivcap, p->niv + 1, sizeof(*iv));
		if (!iv)
			return -ENOMEM;
		p->iv = iv;
		p->iv[p->niv++] = (struct anx_iv){w->ts, w->ts + w->dur};
		if (w->launch) {
			const struct an_host *h = &an->host[w->launch - 1];
			const struct an_thread *t = &an->threads[h->thread];
			struct anx_proc *q = proc_get(x, t->file, t->pid);
			if (!q || push_i64(&q->work_launch, &q->nwork_launch, &q->wlcap, h->ts))
				return -ENOMEM;
		}
	}
	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		if (!h->launched)
			continue;
		const struct an_thread *t = &an->threads[h->thread];
		struct anx_proc *q = proc_get(x, t->file, t->pid);
		if (!q || push_i64(&q->launch, &q->nlaunch, &q->lcap, h->ts))
			return -ENOMEM;
	}
	for (size_t k = 0; k < x->nprocs; k++) {
		struct anx_proc *p = &x->procs[k];
		if (p->niv)
			an_sort(p->iv, p->niv, sizeof(*p->iv), iv_cmp);
		size_t n = 0;
		for (size_t i = 0; i < p->niv; i++) {
			if (n && p->iv[i].ts <= p->iv[n - 1].end) {
				if (p->iv[i].end > p->iv[n - 1].end)
					p->iv[n - 1].end = p->iv[i].end;
			} else {
				p->iv[n++] = p->iv[i];
			}
		}
		p->niv = n;
		if (!(p->cum = malloc((n + 1) * sizeof(*p->cum))))
			return -ENOMEM;
		p->cum[0] = 0;
		for (size_t i = 0; i < n; i++)
			p->cum[i + 1] = p->cum[i] + (p->iv[i].end - p->iv[i].ts);
		if (p->nwork_launch)
			an_sort(p->work_launch, p->nwork_launch, sizeof(int64_t), i64_cmp);
		if (p->nlaunch)
			an_sort(p->launch, p->nlaunch, sizeof(int64_t), i64_cmp);
	}
	return 0;
}

/* The first interval ending after a; the first starting at or after b. */
int64_t anx_busy_in(const struct anx_proc *p, int64_t a, int64_t b)
{
	size_t lo = 0, hi = p->niv;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->iv[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t i = lo;
	hi = p->niv;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->iv[mid].ts < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t j = lo;
	if (j <= i)
		return 0;
	int64_t sum = p->cum[j] - p->cum[i];
	if (p->iv[i].ts < a)
		sum -= a - p->iv[i].ts;
	if (p->iv[j - 1].end > b)
		sum -= p->iv[j - 1].end - b;
	return sum;
}

uint64_t anx_count_in(const int64_t *v, size_t n, int64_t a, int64_t b)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t i = lo;
	hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < b)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - i;
}

void anx_free(struct anx *x)
{
	free(x->blk);
	free(x->blk_first);
	free(x->gaps);
	free(x->tgaps);
	for (size_t i = 0; i < x->nprocs; i++) {
		free(x->procs[i].iv);
		free(x->procs[i].cum);
		free(x->procs[i].work_launch);
		free(x->procs[i].launch);
	}
	free(x->procs);
	free(x->win_gpu);
	free(x->win_thread);
	cuptrace_u64map_free(&x->proc_of);
	free(x->rank_of_thread);
	free(x->rank_of_gpu);
	free(x->rank_step_first);
	free(x->rank_steps);
	cuptrace_u64map_free(&x->rank_of);
}

size_t anx_samples_from(const struct anx *x, int64_t a)
{
	const struct an *an = x->an;
	size_t lo = 0, hi = an->nsamples;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (an->samples[mid].ts < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int anx_fcount_add(struct anx_fcount *c, uint32_t frame)
{
	/* A few distinct frames per interval: a short list, searched from its end (the frame of
	 * the sample before is the likeliest). */
	size_t k = c->len;
	while (k > 0 && c->id[k - 1] != frame)
		k--;
	if (!k) {
		if (c->len == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 8;
			uint32_t *id = realloc(c->id, cap * sizeof(*id));
			if (!id)
				return -ENOMEM;
			c->id = id;
			uint32_t *n = realloc(c->n, cap * sizeof(*n));
			if (!n)
				return -ENOMEM;
			c->n = n;
			c->cap = cap;
		}
		c->id[c->len] = frame;
		c->n[c->len++] = 0;
		k = c->len;
	}
	c->n[k - 1]++;
	c->samples++;
	return 0;
}

int anx_samples_count(const struct anx *x, int64_t tid, int64_t a, int64_t b, struct anx_fcount *c)
{
	const struct an *an = x->an;
	for (size_t i = anx_samples_from(x, a); i < an->nsamples && an->samples[i].ts <= b; i++) {
		int err = an->samples[i].tid == tid ? anx_fcount_add(c, an->samples[i].frame) : 0;
		if (err)
			return err;
	}
	return 0;
}

size_t anx_fcount_top(const struct anx *x, const struct anx_fcount *c,
                      struct cuptrace_an_host_frame *out, size_t max)
{
	size_t n = 0;
	/* Selection of the top max, each pass the largest count not yet taken (the earliest of
	 * equal ones): max is small. */
	while (n < max && n < c->len) {
		size_t best = SIZE_MAX;
		for (size_t k = 0; k < c->len; k++) {
			int taken = 0;
			for (size_t t = 0; t < n && !taken; t++)
				taken = out[t].frame == anx_str(x, c->id[k]);
			if (!taken && (best == SIZE_MAX || c->n[k] > c->n[best]))
				best = k;
		}
		if (best == SIZE_MAX)
			break;
		out[n++] = (struct cuptrace_an_host_frame){anx_str(x, c->id[best]), c->n[best]};
	}
	return n;
}

void anx_fcount_free(struct anx_fcount *c)
{
	free(c->id);
	free(c->n);
	memset(c, 0, sizeof(*c));
}
