/* The analysis proper, from what analyze_sink.c kept: links GPU work to its launch call, sorts
 * host slices into per-thread nesting, computes busy and idle (by cause) per stream and GPU. The
 * steps are steps_find.c's, GPU time per op and the findings analyze_find.c's, called from here;
 * the look-ups all use are in analyze_query.c.
 * Cost: two sorts (host slices, GPU work) and linear passes; no quadratic step. */
#include "why/compute_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int host_cmp(const void *pa, const void *pb)
{
	const struct an_host *a = pa, *b = pb;
	if (a->thread != b->thread)
		return a->thread < b->thread ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	/* A range encloses an API call of the same extent. */
	if (a->cls != b->cls)
		return a->cls == H_RANGE ? -1 : b->cls == H_RANGE;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static const struct an_stream_in *cmp_streams;

static int work_cmp(const void *pa, const void *pb)
{
	const struct an_work *a = pa, *b = pb;
	size_t ga = cmp_streams[a->stream].gpu, gb = cmp_streams[b->stream].gpu;
	if (ga != gb)
		return ga < gb ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->stream != b->stream)
		return a->stream < b->stream ? -1 : 1;
	return a->dur < b->dur ? -1 : a->dur > b->dur;
}

/* Per-thread nesting: each slice's innermost enclosing range, with a stack of open ranges. */
static int nest(struct anx *x)
{
	struct an *an = x->an;
	uint32_t *stack = NULL;
	size_t n = 0, cap = 0;

	for (size_t i = 0; i < an->nhost; i++) {
		struct an_host *h = &an->host[i];
		if (i == 0 || h->thread != an->host[i - 1].thread) {
			n = 0;
			an->threads[h->thread].first = i;
		}
		an->threads[h->thread].n++;
		while (n) {
			const struct an_host *t = &an->host[stack[n - 1]];
			if (t->ts + t->dur > h->ts ||
			    (t->ts == h->ts && t->dur >= h->dur && h->dur))
				break;
			n--;
		}
		h->parent = n ? stack[n - 1] + 1 : 0;
		if (h->cls == H_RANGE) {
			uint32_t *s = cuptrace_grow(stack, &cap, n + 1, sizeof(*s));
			if (!s) {
				free(stack);
				return -ENOMEM;
			}
			stack = s;
			stack[n++] = (uint32_t)i;
		}
	}
	free(stack);
	return 0;
}

/* Flow ends and correlation ids -> the launching host slice. */
static int link(struct anx *x)
{
	struct an *an = x->an;
	struct cuptrace_u64map flows, corr;
	uint32_t *pos = an->nhost ? malloc(an->nhost * sizeof(*pos)) : NULL;
	int err = -ENOMEM;

	cuptrace_u64map_init(&flows);
	cuptrace_u64map_init(&corr);
	if (an->nhost && !pos)
		goto out;
	for (size_t i = 0; i < an->nhost; i++) {
		const struct an_host *h = &an->host[i];
		pos[h->seq] = (uint32_t)i;
		if (h->corr && h->cls != H_RANGE) {
			const struct an_thread *t = &an->threads[h->thread];
			uint64_t *v = cuptrace_u64map_put(
			    &corr, an_key(t->file, (uint64_t)t->pid, h->corr), NULL);
			if (!v)
				goto out;
			*v = i + 1;
		}
	}
	for (size_t i = 0; i < an->nflows; i++) {
		uint64_t *v = cuptrace_u64map_put(&flows, an->flows[i].key, NULL);
		if (!v)
			goto out;
		*v = pos[an->flows[i].seq] + 1;
	}
	for (size_t i = 0; i < an->nwork; i++) {
		struct an_work *w = &an->work[i];
		uint64_t *v = w->flow ? cuptrace_u64map_get(&flows, w->flow) : NULL;
		if (!v && w->corr) {
			const struct an_gpu_in *g = &an->gpus[an->streams[w->stream].gpu];
			v = cuptrace_u64map_get(&corr, an_key(g->file, (uint64_t)g->pid, w->corr));
		}
		if (v) {
			w->launch = (uint32_t)*v;
			an->host[*v - 1].launched = 1;
			if ((w->flags & WF_DTOH) && w->bytes && w->bytes <= AN_ITEM_BYTES)
				an->host[*v - 1].flags |= HF_ITEM;
			else if (w->flags & WF_PAGEABLE)
				an->host[*v - 1].flags |= HF_PAGEABLE;
			x->out->linked++;
		}
	}
	err = 0;
out:
	free(pos);
	cuptrace_u64map_free(&flows);
	cuptrace_u64map_free(&corr);
	return err;
}

/* Blocking calls per thread (anx_blocker_kind), for "what kept the launching thread from
 * launching": first the synchronizes that wait for a small DtoH copy just launched by their thread
 * in the same op (.item(): cudaMemcpyAsync, then cudaStreamSynchronize) are marked, so that the
 * GPU idle after them is the item copy's, not a second finding's. */
static int index_blockers(struct anx *x)
{
	struct an *an = x->an;
	size_t n = 0;
	for (size_t i = 0; i < an->nhost; i++) {
		struct an_host *h = &an->host[i];
		if (h->cls == H_SYNC) {
			for (size_t k = i, back = 0; k > 0 && back < 8; k--, back++) {
				const struct an_host *p = &an->host[k - 1];
				if (p->thread != h->thread)
					break;
				if (p->cls == H_RANGE)
					continue;
				if ((p->flags & HF_ITEM) && p->parent == h->parent)
					h->flags |= HF_ITEM_SYNC;
				break;
			}
		}
		n += anx_blocker_kind(h) >= 0;
	}
	if (n && !(x->blk = malloc(n * sizeof(*x->blk))))
		return -ENOMEM;
	if (!(x->blk_first = calloc(an->nthreads + 1, sizeof(*x->blk_first))))
		return -ENOMEM;
	n = 0;
	for (size_t t = 0; t < an->nthreads; t++) {
		x->blk_first[t] = n;
		const struct an_thread *th = &an->threads[t];
		for (size_t i = th->first; i < th->first + th->n; i++)
			if (anx_blocker_kind(&an->host[i]) >= 0)
				x->blk[n++] = (uint32_t)i;
	}
	x->blk_first[an->nthreads] = n;
	return 0;
}

/* Did thread t sit in a synchronize (or a synchronous copy) during [a, b)? */
static int in_sync(const struct anx *x, uint32_t t, int64_t a, int64_t b)
{
	int64_t by[B_N] = {0};
	anx_blocked(x, t, a, b, by);
	return by[B_SYNC] + by[B_ITEM] + by[B_SYNC_COPY] > 0;
}

struct gpu_state {
	int64_t max_end, max_end_other; /* latest end, and latest of the other streams */
	uint32_t max_stream;
	int have;
};

struct sync_ctx {
	const struct anx *x;
	uint32_t thread;
};

static int synced(const void *ctx, int64_t a, int64_t b)
{
	const struct sync_ctx *c = ctx;
	return in_sync(c->x, c->thread, a, b);
}

/* Splits the idle interval [g0, g1) before work w by cause into by[] (idle_cause.h). */
static void classify(const struct anx *x, int64_t g0, int64_t g1, const struct an_work *w,
                     int64_t other_end, int64_t by[CUPTRACE_IDLE_NCAUSES])
{
	const struct an_host *l = w->launch ? &x->an->host[w->launch - 1] : NULL;
	struct sync_ctx c = {x, l ? l->thread : 0};
	cuptrace_idle_split(g0, g1, l != NULL, l ? l->ts : 0, synced, &c, other_end, by);
}

static uint32_t main_cause(const int64_t by[CUPTRACE_IDLE_NCAUSES])
{
	uint32_t c = 0;
	for (uint32_t k = 1; k < CUPTRACE_IDLE_NCAUSES; k++)
		if (by[k] > by[c])
			c = k;
	return c;
}

static int push_gap(struct anx_gap **arr, size_t *n, size_t *cap, int64_t ts, int64_t dur,
                    size_t gpu, uint32_t cause, size_t work)
{
	struct anx_gap *g = cuptrace_grow(*arr, cap, *n + 1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	*arr = g;
	g[(*n)++] = (struct anx_gap){ts, dur, (uint32_t)gpu, cause, (uint32_t)work};
	return 0;
}

/* One pass over the work in (GPU, time) order. tables 0: every GPU gap of the whole trace (for
 * the findings and --annotate) and each GPU's start-up (from its first work to the end of its
 * process's first step, or without steps of its start-up: length, and busy there). tables 1:
 * the per-stream and per-GPU unions, idle by cause, the gaps of the tables, all cut to the
 * steady state where the process has steps or a start-up (work is clipped to the window; work
 * outside it is left out). */
static int sweep(struct anx *x, int tables)
{
	struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	int64_t *s_end = calloc(an->nstreams + 1, sizeof(*s_end));
	int64_t *first = calloc(an->ngpus + 1, sizeof(*first));
	struct gpu_state gs = {0};
	size_t gpu = (size_t)-1;
	int64_t g_end = 0, comm_end = 0, comp_end = 0, lo = INT64_MIN, hi = INT64_MAX;
	int started = 0, err = -ENOMEM;

	if (!s_end || !first)
		goto out;
	for (size_t i = 0; i < an->nwork; i++) {
		const struct an_work *w = &an->work[i];
		struct cuptrace_an_stream *st = &o->streams[w->stream];
		size_t gi = an->streams[w->stream].gpu;
		struct cuptrace_an_gpu *g = &o->gpus[gi];
		const struct anx_win *win = &x->win_gpu[gi];
		if (gi != gpu) {
			gpu = gi;
			memset(&gs, 0, sizeof(gs));
			started = 0;
			lo = tables && (win->steps || win->startup) ? win->from : INT64_MIN;
			hi = tables && win->steps ? win->to : INT64_MAX;
			comm_end = comp_end = INT64_MIN;
		}
		int64_t ts = w->ts, end = w->ts + w->dur;
		if (ts >= hi || end <= lo)
			continue;
		ts = ts < lo ? lo : ts;
		end = end > hi ? hi : end;
		if (!started) {
			started = 1;
			g_end = ts;
			first[gi] = ts;
			if (tables)
				g->first_ts = ts;
		}
		/* The GPU. */
		if (ts > g_end) {
			int64_t by[CUPTRACE_IDLE_NCAUSES] = {0};
			classify(x, g_end, ts, w, INT64_MIN, by);
			if (tables)
				for (int k = 0; k < CUPTRACE_IDLE_NCAUSES; k++)
					g->idle_by_cause[k] += by[k];
			if (tables ? push_gap(&x->tgaps, &x->ntgaps, &x->tgapcap, g_end, ts - g_end,
			                      gi, main_cause(by), i)
			           : push_gap(&x->gaps, &x->ngaps, &x->gapcap, g_end, ts - g_end,
			                      gi, main_cause(by), i))
				goto out;
		}
		if (end > g_end) {
			int64_t from = ts > g_end ? ts : g_end;
			if (tables)
				g->busy_ns += end - from;
			else if ((win->steps || win->startup) &&
			         from < win->from) /* start-up busy */
				g->startup_idle_ns += (end < win->from ? end : win->from) - from;
			g_end = end;
		}
		if (!tables)
			continue;
		int64_t other = gs.max_stream != w->stream ? gs.max_end : gs.max_end_other;
		if (!gs.have)
			other = INT64_MIN;
		/* The stream. */
		if (!st->ops) {
			st->first_ts = ts;
			s_end[w->stream] = ts;
		} else if (ts > s_end[w->stream]) {
			classify(x, s_end[w->stream], ts, w, other, st->idle_by_cause);
		}
		if (end > s_end[w->stream]) {
			int64_t from = ts > s_end[w->stream] ? ts : s_end[w->stream];
			st->busy_ns += end - from;
			s_end[w->stream] = end;
		}
		st->ops++;
		st->last_end = s_end[w->stream];
		g->last_end = g_end;
		g->kernels += w->kind == W_KERNEL;
		g->copies += w->kind == W_COPY;
		g->memsets += w->kind == W_SET;
		g->graphs += w->kind == W_GRAPH;
		/* Communication (NCCL kernels) and compute unions, and their overlap: the two
		 * unions are swept side by side, each in start order. */
		int64_t *mine = w->flags & WF_NCCL ? &comm_end : &comp_end;
		int64_t *theirs = w->flags & WF_NCCL ? &comp_end : &comm_end;
		int64_t *sum = w->flags & WF_NCCL ? &g->comm_ns : &g->compute_ns;
		int64_t from = ts > *mine ? ts : *mine;
		if (end > from) {
			*sum += end - from;
			int64_t ov_end = end < *theirs ? end : *theirs;
			if (ov_end > from)
				g->overlap_ns += ov_end - from;
			*mine = end;
		}
		/* Latest ends per stream, for "another stream was busy". */
		if (!gs.have || end > gs.max_end) {
			if (gs.have && gs.max_stream != w->stream)
				gs.max_end_other = gs.max_end;
			gs.max_end = end;
			gs.max_stream = w->stream;
		} else if (w->stream != gs.max_stream && end > gs.max_end_other) {
			gs.max_end_other = end;
		}
		gs.have = 1;
	}
	if (tables) {
		for (size_t s = 0; s < o->nstreams; s++) {
			struct cuptrace_an_stream *st = &o->streams[s];
			st->idle_ns = st->last_end - st->first_ts - st->busy_ns;
		}
		for (size_t k = 0; k < o->ngpus; k++)
			o->gpus[k].idle_ns =
			    o->gpus[k].last_end - o->gpus[k].first_ts - o->gpus[k].busy_ns;
	} else {
		/* Start-up: from the GPU's first work to the end of the first step. */
		for (size_t k = 0; k < o->ngpus; k++) {
			struct cuptrace_an_gpu *g = &o->gpus[k];
			const struct anx_win *win = &x->win_gpu[k];
			int64_t len = (win->steps || win->startup) && win->from > first[k]
			                  ? win->from - first[k]
			                  : 0;
			g->startup_ns = len;
			g->startup_idle_ns = len - g->startup_idle_ns;
		}
	}
	err = 0;
out:
	free(s_end);
	free(first);
	return err;
}

static int busy_idle(struct anx *x)
{
	int err = sweep(x, 0);
	return err ? err : sweep(x, 1);
}

static int host_frames(struct anx *x, struct cuptrace_an_idle *d);
static const struct anx_gap *cmp_gaps;

static int gap_dur_cmp(const void *pa, const void *pb)
{
	const struct anx_gap *a = &cmp_gaps[*(const size_t *)pa],
	                     *b = &cmp_gaps[*(const size_t *)pb];
	if (a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* Every GPU gap into the result (compact), and the longest ones with their causes and what the
 * launching thread was doing when the GPU went idle. */
static int idle_table(struct anx *x)
{
	struct cuptrace_analysis *o = x->out;
	size_t n = x->ntgaps, top = (size_t)x->an->opts.top;
	size_t *idx = n ? malloc(n * sizeof(*idx)) : NULL;
	if ((n && !idx) || (x->ngaps && !(o->gaps = malloc(x->ngaps * sizeof(*o->gaps))))) {
		free(idx);
		return -ENOMEM;
	}
	for (size_t i = 0; i < x->ngaps; i++) {
		const struct anx_gap *g = &x->gaps[i];
		o->gaps[i] = (struct cuptrace_an_gap){g->ts, g->dur, g->gpu, g->cause};
	}
	o->ngaps = x->ngaps;
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	cmp_gaps = x->tgaps;
	if (n)
		qsort(idx, n, sizeof(*idx), gap_dur_cmp);
	if (top > n)
		top = n;
	if (top && !(o->idle = calloc(top, sizeof(*o->idle)))) {
		free(idx);
		return -ENOMEM;
	}
	for (size_t k = 0; k < top; k++) {
		const struct anx_gap *g = &x->tgaps[idx[k]];
		const struct an_work *w = &x->an->work[g->work];
		struct cuptrace_an_idle *d = &o->idle[o->nidle++];
		d->ts = g->ts;
		d->dur = g->dur;
		d->gpu = g->gpu;
		d->next_work = anx_str(x, w->name);
		classify(x, g->ts, g->ts + g->dur, w, INT64_MIN, d->by_cause);
		d->cause = main_cause(d->by_cause);
		if (w->launch) {
			anx_host_ctx(x, x->an->host[w->launch - 1].thread, g->ts, &d->host);
			if (host_frames(x, d)) {
				free(idx);
				return -ENOMEM;
			}
		}
	}
	free(idx);
	return 0;
}

static int sample_ts_cmp(const void *a, const void *b)
{
	const struct an_sample *x = a, *y = b;
	return (x->ts > y->ts) - (x->ts < y->ts);
}

/* The launching thread's samples inside idle interval d, counted by frame: the top ones. The
 * samples are in time order (sorted once by an_compute). */
static int host_frames(struct anx *x, struct cuptrace_an_idle *d)
{
	struct anx_fcount c = {0};
	int err = anx_samples_count(x, d->host.tid, d->ts, d->ts + d->dur, &c);
	d->host_samples = c.samples;
	d->nhost_frames = anx_fcount_top(x, &c, d->host_frames, CUPTRACE_AN_HOST_FRAMES);
	anx_fcount_free(&c);
	return err;
}

static int line_wait_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_line_wait *a = pa, *b = pb;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns > b->wait_ns ? -1 : 1;
	return strcmp(a->line, b->line);
}

/* Host wait by line (--group-by line, README): for each GPU gap of the tables, its host_wait
 * part (from the gap's start to the launch of the work ending it, where the launching thread
 * sat in no synchronize) split evenly over that thread's samples in it, each share added to the
 * sample's frame; a part without a sample is counted apart. */
static int line_waits(struct anx *x)
{
	struct an *an = x->an;
	struct cuptrace_analysis *o = x->out;
	struct cuptrace_u64map row_of; /* frame string id -> row + 1 */
	struct anx_fcount c = {0};
	size_t cap = 0;
	int err = 0;
	o->by_line = 1;
	cuptrace_u64map_init(&row_of);
	for (size_t i = 0; i < x->ntgaps && !err; i++) {
		const struct anx_gap *g = &x->tgaps[i];
		const struct an_work *w = &an->work[g->work];
		int64_t by[CUPTRACE_IDLE_NCAUSES] = {0};
		classify(x, g->ts, g->ts + g->dur, w, INT64_MIN, by);
		int64_t wait = by[CUPTRACE_IDLE_HOST_WAIT];
		if (wait <= 0 || !w->launch)
			continue;
		o->line_wait_total_ns += wait;
		c.len = c.samples = 0;
		const struct an_host *l = &an->host[w->launch - 1];
		if ((err =
		         anx_samples_count(x, an->threads[l->thread].tid, g->ts, g->ts + wait, &c)))
			break;
		if (!c.samples) {
			o->line_wait_unsampled_ns += wait;
			continue;
		}
		for (size_t k = 0; k < c.len; k++) {
			int created;
			uint64_t *v = cuptrace_u64map_put(&row_of, c.id[k], &created);
			struct cuptrace_an_line_wait *r =
			    v && created
			        ? cuptrace_grow(o->line_waits, &cap, o->nline_waits + 1, sizeof(*r))
			        : o->line_waits;
			if (!v || !r) {
				err = -ENOMEM;
				break;
			}
			o->line_waits = r;
			if (created) {
				*v = ++o->nline_waits;
				r[*v - 1] =
				    (struct cuptrace_an_line_wait){anx_str(x, c.id[k]), 0, 0};
			}
			r[*v - 1].wait_ns += wait * c.n[k] / c.samples;
			r[*v - 1].samples += c.n[k];
		}
	}
	anx_fcount_free(&c);
	cuptrace_u64map_free(&row_of);
	if (o->nline_waits)
		qsort(o->line_waits, o->nline_waits, sizeof(*o->line_waits), line_wait_cmp);
	return err;
}

int an_compute(struct an *an)
{
	struct anx x = {.an = an, .out = an->out};
	struct cuptrace_analysis *o = an->out;
	int err = -ENOMEM;

	if (!(x.priv = calloc(1, sizeof(*x.priv))))
		return -ENOMEM;
	/* The strings move to the result, which the pointers of every row borrow. */
	x.priv->strs = an->strs;
	memset(&an->strs, 0, sizeof(an->strs));
	cuptrace_strtab_init(&an->strs);
	o->priv = x.priv;
	/* Samples come in time order from a sorted reader; a merge of files may interleave. */
	if (an->nsamples)
		qsort(an->samples, an->nsamples, sizeof(*an->samples), sample_ts_cmp);
	o->host_samples = an->nsamples;
	o->min_ts = an->min_ts;
	o->max_ts = an->max_ts;
	if (an->nhost)
		an_sort(an->host, an->nhost, sizeof(*an->host), host_cmp);
	if ((err = nest(&x)) || (err = link(&x)) || (err = index_blockers(&x)))
		goto out;
	cmp_streams = an->streams;
	if (an->nwork)
		an_sort(an->work, an->nwork, sizeof(*an->work), work_cmp);
	err = -ENOMEM;
	if (an->ngpus && !(o->gpus = calloc(an->ngpus, sizeof(*o->gpus))))
		goto out;
	if (an->nstreams && !(o->streams = calloc(an->nstreams, sizeof(*o->streams))))
		goto out;
	o->ngpus = an->ngpus;
	o->nstreams = an->nstreams;
	for (size_t i = 0; i < an->ngpus; i++)
		o->gpus[i] = (struct cuptrace_an_gpu){.name = anx_str(&x, an->gpus[i].name),
		                                      .pid = an->gpus[i].pid,
		                                      .file = an->gpus[i].file,
		                                      .group_key = an->gpus[i].key};
	for (size_t i = 0; i < an->nstreams; i++)
		o->streams[i] = (struct cuptrace_an_stream){
		    .name = anx_str(&x, an->streams[i].name), .gpu = an->streams[i].gpu};
	for (size_t i = 0; i < an->nwork; i++) {
		o->kernels += an->work[i].kind == W_KERNEL;
		o->copies += an->work[i].kind == W_COPY;
		o->memsets += an->work[i].kind == W_SET;
		o->graphs += an->work[i].kind == W_GRAPH;
	}
	for (size_t i = 0; i < an->nhost; i++)
		o->launches += an->host[i].launched;
	/* Steps first (steps_find.c): their steady state cuts the busy and idle tables. */
	if ((err = anx_steps(&x)) || (err = anx_steady_windows(&x)) || (err = busy_idle(&x)) ||
	    (err = idle_table(&x)) || (an->opts.by_line && (err = line_waits(&x))) ||
	    (err = anx_ops(&x)) || (err = anx_findings(&x)))
		goto out;
	err = 0;
out:
	anx_free(&x);
	return err;
}

void cuptrace_analysis_free(struct cuptrace_analysis *a)
{
	if (!a)
		return;
	free(a->damage);
	free(a->steps);
	free(a->gpus);
	free(a->streams);
	free(a->idle);
	free(a->line_waits);
	free(a->ops);
	free(a->findings);
	free(a->ranks);
	free(a->job_steps);
	free(a->gaps);
	struct anx_priv *p = a->priv;
	if (p) {
		cuptrace_strtab_free(&p->strs);
		free(p);
	}
	memset(a, 0, sizeof(*a));
}
