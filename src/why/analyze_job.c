/* The job's analysis from its files' (sink_state.h). an_fold moves what the job keeps of
 * one file's analysis into the job's when the next file begins: its strings copied into the
 * job's table, its rank and GPU indices moved past the job's, its findings kept as records (one
 * per finding and rank), its ops merged by name, its largest idle intervals into the job's top
 * N; the file's events are then freed by the sink. an_job_finish labels the ranks and adds what
 * needs them all: the job's steps by number, the straggler (the rank the others waited for in
 * the collectives: in which steps, by how much, why; with its rank's own gaps of those steps),
 * the records merged by id, the time in collectives per rank, the findings' order. Works on the
 * result's public structs. */
#include "why/compute_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct jctx {
	struct an *an;
	struct cuptrace_analysis *j;
	struct anx_priv *priv;
	int err;
};

/* The job's stable copy of s (NULL stays NULL). */
static const char *jstr(struct jctx *c, const char *s)
{
	if (!s)
		return NULL;
	uint32_t id = cuptrace_strtab_intern(&c->priv->strs, s, strlen(s));
	if (!id) {
		c->err = -ENOMEM;
		return NULL;
	}
	return cuptrace_strtab_str(&c->priv->strs, id);
}

static size_t moved(size_t i, size_t base)
{
	return i == SIZE_MAX ? SIZE_MAX : i + base;
}

static void inst_move(struct jctx *c, struct cuptrace_an_instance *in, size_t r0)
{
	in->what = jstr(c, in->what);
	in->op = jstr(c, in->op);
	in->host_frame = jstr(c, in->host_frame);
	in->rank = moved(in->rank, r0);
}

static struct cuptrace_an_finding *job_finding(struct jctx *c, const char *id)
{
	struct cuptrace_analysis *j = c->j;
	for (size_t i = 0; i < j->nfindings; i++)
		if (!strcmp(j->findings[i].id, id))
			return &j->findings[i];
	struct cuptrace_an_finding *f =
	    cuptrace_grow(j->findings, &c->an->fold.findcap, j->nfindings + 1, sizeof(*f));
	if (!f) {
		c->err = -ENOMEM;
		return NULL;
	}
	j->findings = f;
	f = &j->findings[j->nfindings++];
	*f = (struct cuptrace_an_finding){.id = id, .top_rank = SIZE_MAX};
	return f;
}

/* src's host frames into f's (both the job's strings): counts of one frame added, the top
 * CUPTRACE_AN_FINDING_FRAMES kept, most first (a tie: f's first). */
static void merge_frames(struct cuptrace_an_finding *f, const struct cuptrace_an_finding *src)
{
	struct cuptrace_an_host_frame all[2 * CUPTRACE_AN_FINDING_FRAMES];
	size_t n = f->nhost_frames;
	memcpy(all, f->host_frames, n * sizeof(*all));
	for (size_t k = 0; k < src->nhost_frames; k++) {
		size_t i = 0;
		while (i < n && strcmp(all[i].frame, src->host_frames[k].frame))
			i++;
		if (i == n)
			all[n++] = (struct cuptrace_an_host_frame){src->host_frames[k].frame, 0};
		all[i].samples += src->host_frames[k].samples;
	}
	f->host_samples += src->host_samples;
	f->host_samples_owned += src->host_samples_owned; /* the files' samples are distinct */
	/* Insertion sort, stable: few entries. */
	for (size_t i = 1; i < n; i++) {
		struct cuptrace_an_host_frame v = all[i];
		size_t k = i;
		while (k > 0 && all[k - 1].samples < v.samples) {
			all[k] = all[k - 1];
			k--;
		}
		all[k] = v;
	}
	f->nhost_frames = n < CUPTRACE_AN_FINDING_FRAMES ? n : CUPTRACE_AN_FINDING_FRAMES;
	memcpy(f->host_frames, all, f->nhost_frames * sizeof(*all));
}

/* One record (one finding on one rank, or already merged) into the job's finding of its id. */
static void merge_finding(struct jctx *c, const struct cuptrace_an_finding *src, size_t r0)
{
	struct cuptrace_an_finding *f = job_finding(c, src->id);
	if (!f)
		return;
	if (!f->count && !f->nranks) {
		f->title = src->title;
		f->advice = src->advice;
		f->count_of = src->count_of;
		f->judged_on = src->judged_on;
		f->dominant = src->dominant;
	}
	f->severe |= src->severe;
	f->count += src->count;
	f->total_ns += src->total_ns;
	f->call_ns += src->call_ns;
	f->work_ns += src->work_ns;
	f->idle_ns += src->idle_ns;
	f->idle_host_ns += src->idle_host_ns;
	f->nranks += src->nranks;
	if (src->share > f->share)
		f->share = src->share;
	/* What dominates it, and its advice: the rank holding the most of it says. */
	if (f->top_rank == SIZE_MAX || src->top_rank_ns > f->top_rank_ns) {
		f->top_rank = moved(src->top_rank, r0);
		f->top_rank_ns = src->top_rank_ns;
		f->dominant = src->dominant;
		f->advice = src->advice;
	}
	for (size_t k = 0; k < src->nworst; k++) {
		struct cuptrace_an_instance in = src->worst[k];
		inst_move(c, &in, r0);
		anx_worst_add(f, &in);
	}
	merge_frames(f, src);
}

static int line_wait_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_line_wait *a = pa, *b = pb;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns > b->wait_ns ? -1 : 1;
	return strcmp(a->line, b->line);
}

static int idle_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_idle *a = pa, *b = pb;
	if (a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

static void fold_ops(struct jctx *c, const struct cuptrace_analysis *p)
{
	struct cuptrace_analysis *j = c->j;
	struct an_fold *f = &c->an->fold;
	for (size_t i = 0; i < p->nops && !c->err; i++) {
		const struct cuptrace_an_op *op = &p->ops[i];
		const char *name = jstr(c, op->name);
		int created;
		uint64_t *v =
		    name ? cuptrace_u64map_put(&f->op_of, (uint64_t)(uintptr_t)name, &created)
		         : NULL;
		if (!v) {
			c->err = -ENOMEM;
			return;
		}
		if (created) {
			struct cuptrace_an_op *o =
			    cuptrace_grow(j->ops, &f->opcap, j->nops + 1, sizeof(*o));
			if (!o) {
				cuptrace_u64map_del(&f->op_of, (uint64_t)(uintptr_t)name);
				c->err = -ENOMEM;
				return;
			}
			j->ops = o;
			j->ops[j->nops] = (struct cuptrace_an_op){.name = name};
			*v = ++j->nops;
		}
		struct cuptrace_an_op *d = &j->ops[*v - 1];
		d->self_ns += op->self_ns;
		d->total_ns += op->total_ns;
		d->self_count += op->self_count;
		/* Top kernels by self time: the files' own tops, merged by name (a kernel out of
		 * every file's top 3 is not seen). */
		for (int k = 0; k < 3 && op->top[k].name; k++) {
			const char *kn = jstr(c, op->top[k].name);
			int m = 0;
			while (m < 3 && d->top[m].name && d->top[m].name != kn)
				m++;
			struct cuptrace_an_kernel_share sh = {kn, op->top[k].ns, op->top[k].count};
			if (m < 3 && d->top[m].name) {
				sh.ns += d->top[m].ns;
				sh.count += d->top[m].count;
				memmove(&d->top[m], &d->top[m + 1],
				        (size_t)(2 - m) * sizeof(d->top[0]));
				memset(&d->top[2], 0, sizeof(d->top[2]));
			}
			int at = 0;
			while (at < 3 && d->top[at].name && d->top[at].ns >= sh.ns)
				at++;
			if (at >= 3)
				continue;
			memmove(&d->top[at + 1], &d->top[at], (size_t)(2 - at) * sizeof(d->top[0]));
			d->top[at] = sh;
		}
	}
}

#define JGROW(c, arr, cap, need)                                                                   \
	do {                                                                                       \
		if (!(c)->err && CUPTRACE_GROW(arr, cap, need))                                    \
			(c)->err = -ENOMEM;                                                        \
	} while (0)

int an_fold(struct an *an, struct cuptrace_analysis *p)
{
	struct cuptrace_analysis *j = an->job;
	struct an_fold *f = &an->fold;
	if (!f->priv) {
		struct anx_priv *pr = calloc(1, sizeof(*pr));
		if (!pr)
			return -ENOMEM;
		cuptrace_strtab_init(&pr->strs);
		cuptrace_u64map_init(&f->op_of);
		f->priv = j->priv = pr;
	}
	struct jctx c = {.an = an, .j = j, .priv = f->priv};
	size_t r0 = j->nranks, g0 = j->ngpus, first = !j->nfiles;
	j->nfiles++;
	if (an->have_ts) {
		if (!f->have_ts || p->min_ts < j->min_ts)
			j->min_ts = p->min_ts;
		if (!f->have_ts || p->max_ts > j->max_ts)
			j->max_ts = p->max_ts;
		f->have_ts = 1;
	}
	if (p->steady_steps && (!j->steady_steps || p->steady_from < j->steady_from))
		j->steady_from = p->steady_from;
	if (p->steady_steps && (!j->steady_steps || p->steady_to > j->steady_to))
		j->steady_to = p->steady_to;
	if (!p->steady_steps && !j->steady_steps) { /* no steps: after each start-up, if found */
		if (first || p->steady_from < j->steady_from)
			j->steady_from = p->steady_from;
		if (first || p->steady_to > j->steady_to)
			j->steady_to = p->steady_to;
	}
	j->steady_steps |= p->steady_steps;
	j->kernels += p->kernels;
	j->copies += p->copies;
	j->memsets += p->memsets;
	j->launches += p->launches;
	j->graphs += p->graphs;
	j->linked += p->linked;
	j->unattributed_ns += p->unattributed_ns;
	/* Where the steps came from: the first file's, "mixed" where files differ (as processes
	 * of one file do, steps_find.c). */
	if (p->step_kind && j->step_kind && strcmp(p->step_kind, j->step_kind))
		j->step_kind = j->step_source = "mixed";
	else if (p->step_kind && !j->step_kind) {
		j->step_source = jstr(&c, p->step_source);
		j->step_kind = jstr(&c, p->step_kind);
	}
	if (first || p->step_confidence < j->step_confidence)
		j->step_confidence = p->step_confidence;
	if (p->startup_end && (!j->startup_end || p->startup_end < j->startup_end))
		j->startup_end = p->startup_end;
	if (first) { /* the job's step figures are the file's; several files: an_job_finish */
		j->step_median_ns = p->step_median_ns;
		j->step_min_ns = p->step_min_ns;
		j->step_max_ns = p->step_max_ns;
		j->step_mad_ns = p->step_mad_ns;
	}
	JGROW(&c, j->ranks, f->rankcap, j->nranks + p->nranks);
	JGROW(&c, j->steps, f->stepcap, j->nsteps + p->nsteps);
	JGROW(&c, j->gpus, f->gpucap, j->ngpus + p->ngpus);
	JGROW(&c, j->streams, f->streamcap, j->nstreams + p->nstreams);
	JGROW(&c, j->idle, f->idlecap, j->nidle + p->nidle);
	if (c.err)
		return c.err;
	j->host_samples += p->host_samples;
	j->findings_host_samples += p->findings_host_samples;
	j->by_line |= p->by_line;
	j->line_wait_total_ns += p->line_wait_total_ns;
	j->line_wait_unsampled_ns += p->line_wait_unsampled_ns;
	for (size_t i = 0; i < p->nline_waits && !c.err; i++) {
		const char *line = jstr(&c, p->line_waits[i].line);
		size_t k = 0;
		while (k < j->nline_waits && j->line_waits[k].line != line)
			k++;
		if (k == j->nline_waits) {
			JGROW(&c, j->line_waits, f->linecap, j->nline_waits + 1);
			if (c.err)
				break;
			j->line_waits[j->nline_waits++] =
			    (struct cuptrace_an_line_wait){line, 0, 0};
		}
		j->line_waits[k].wait_ns += p->line_waits[i].wait_ns;
		j->line_waits[k].samples += p->line_waits[i].samples;
	}
	if (j->nline_waits > p->nline_waits)
		qsort(j->line_waits, j->nline_waits, sizeof(*j->line_waits), line_wait_cmp);
	for (size_t i = 0; i < p->nranks; i++) {
		struct cuptrace_an_rank r = p->ranks[i];
		r.host = jstr(&c, r.host);
		j->ranks[j->nranks++] = r;
	}
	for (size_t i = 0; i < p->nsteps; i++) {
		struct cuptrace_an_step s = p->steps[i];
		s.name = jstr(&c, s.name);
		s.rank = moved(s.rank, r0);
		j->steps[j->nsteps++] = s;
	}
	for (size_t i = 0; i < p->ngpus; i++) {
		struct cuptrace_an_gpu g = p->gpus[i];
		g.name = jstr(&c, g.name);
		g.rank = moved(g.rank, r0);
		j->gpus[j->ngpus++] = g;
	}
	for (size_t i = 0; i < p->nstreams; i++) {
		struct cuptrace_an_stream s = p->streams[i];
		s.name = jstr(&c, s.name);
		s.gpu += g0;
		j->streams[j->nstreams++] = s;
	}
	for (size_t i = 0; i < p->nidle; i++) {
		struct cuptrace_an_idle d = p->idle[i];
		d.next_work = jstr(&c, d.next_work);
		d.host.range = jstr(&c, d.host.range);
		d.host.api = jstr(&c, d.host.api);
		for (size_t k = 0; k < d.nhost_frames; k++)
			d.host_frames[k].frame = jstr(&c, d.host_frames[k].frame);
		d.gpu += g0;
		d.rank = moved(d.rank, r0);
		j->idle[j->nidle++] = d;
	}
	if (j->nidle > p->nidle) { /* the job's longest: top N over the files */
		qsort(j->idle, j->nidle, sizeof(*j->idle), idle_cmp);
		if (j->nidle > (size_t)an->opts.top)
			j->nidle = (size_t)an->opts.top;
	}
	fold_ops(&c, p);
	JGROW(&c, f->recs, f->reccap, f->nrecs + p->nfindings);
	for (size_t i = 0; i < p->nfindings && !c.err; i++) {
		struct cuptrace_an_finding r = p->findings[i];
		r.top_rank = moved(r.top_rank, r0);
		for (size_t k = 0; k < r.nworst; k++)
			inst_move(&c, &r.worst[k], r0);
		for (size_t k = 0; k < r.nhost_frames; k++)
			r.host_frames[k].frame = jstr(&c, r.host_frames[k].frame);
		f->recs[f->nrecs++] = r;
	}
	/* Every GPU gap is for --annotate, which takes one file: not a summary to keep. */
	if (first) {
		j->gaps = p->gaps;
		j->ngaps = p->ngaps;
		p->gaps = NULL;
		p->ngaps = 0;
	} else {
		free(j->gaps);
		j->gaps = NULL;
		j->ngaps = 0;
	}
	return c.err;
}

/* ---- the job ---- */

static int i64_cmp(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

/* The median of v[0..n) (sorted in place); 0 for none. */
static int64_t median(int64_t *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), i64_cmp);
	return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* "rank R @ host", "rank R", "input F (pid P)" (several files), "pid P"; made unique. */
static int labels(struct jctx *c)
{
	struct cuptrace_analysis *j = c->j;
	char buf[320];
	for (size_t i = 0; i < j->nranks; i++) {
		struct cuptrace_an_rank *r = &j->ranks[i];
		if (r->rank >= 0 && r->host)
			snprintf(buf, sizeof(buf), "rank %d @ %.256s", r->rank, r->host);
		else if (r->rank >= 0)
			snprintf(buf, sizeof(buf), "rank %d", r->rank);
		else if (j->nfiles > 1)
			snprintf(buf, sizeof(buf), "input %zu (pid %d)", r->file + 1, r->pid);
		else
			snprintf(buf, sizeof(buf), "pid %d", r->pid);
		r->label = jstr(c, buf);
	}
	/* Two processes said to be one rank (one file given twice, a rank's second process):
	 * told apart by input and pid. Labels are interned: equal ones are one pointer. */
	struct cuptrace_u64map seen;
	cuptrace_u64map_init(&seen);
	for (size_t i = 0; i < j->nranks && !c->err; i++) {
		uint64_t *v =
		    cuptrace_u64map_put(&seen, (uint64_t)(uintptr_t)j->ranks[i].label, NULL);
		if (!v)
			c->err = -ENOMEM;
		else
			(*v)++;
	}
	for (size_t i = 0; i < j->nranks && !c->err; i++) {
		struct cuptrace_an_rank *r = &j->ranks[i];
		uint64_t *v = cuptrace_u64map_get(&seen, (uint64_t)(uintptr_t)r->label);
		if (r->rank < 0 || !v || *v < 2)
			continue;
		snprintf(buf, sizeof(buf), "%.256s (input %zu, pid %d)", r->label, r->file + 1,
		         r->pid);
		r->label = jstr(c, buf);
	}
	cuptrace_u64map_free(&seen);
	return c->err;
}

/* Several files: the job's step figures over every step (each file had its own). */
static int step_stats(struct cuptrace_analysis *j)
{
	if (!j->nsteps)
		return 0;
	int64_t *v = malloc(j->nsteps * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < j->nsteps; i++)
		v[i] = j->steps[i].dur;
	j->step_median_ns = median(v, j->nsteps);
	j->step_min_ns = v[0];
	j->step_max_ns = v[j->nsteps - 1];
	for (size_t i = 0; i < j->nsteps; i++) {
		int64_t d = j->steps[i].dur - j->step_median_ns;
		v[i] = d < 0 ? -d : d;
	}
	j->step_mad_ns = median(v, j->nsteps);
	free(v);
	return 0;
}

static const struct cuptrace_an_step *cmp_steps;

static int by_number(const void *pa, const void *pb)
{
	const struct cuptrace_an_step *a = &cmp_steps[*(const size_t *)pa],
	                              *b = &cmp_steps[*(const size_t *)pb];
	if (a->number != b->number)
		return a->number < b->number ? -1 : 1;
	return a->rank < b->rank ? -1 : a->rank > b->rank;
}

/* Per rank: the median of its steps' GPU work (other than collectives) and of their time to
 * their first collective: what a step of it is compared with. */
struct rank_usual {
	int64_t compute, arrive;
};

static int usual(const struct cuptrace_analysis *j, struct rank_usual *u)
{
	int64_t *v = malloc((j->nsteps + 1) * sizeof(*v)),
	        *w = malloc((j->nsteps + 1) * sizeof(*w));
	if (!v || !w) {
		free(v);
		free(w);
		return -ENOMEM;
	}
	for (size_t s = 0, e; s < j->nsteps; s = e) { /* a rank's steps are contiguous */
		size_t n = 0, m = 0;
		for (e = s; e < j->nsteps && j->steps[e].rank == j->steps[s].rank; e++) {
			v[n++] = j->steps[e].gpu_work_ns;
			if (j->steps[e].arrive_ns >= 0)
				w[m++] = j->steps[e].arrive_ns;
		}
		u[j->steps[s].rank] = (struct rank_usual){median(v, n), median(w, m)};
	}
	free(v);
	free(w);
	return 0;
}

/* Steps found in the GPU work ("iteration") are numbered by their place, and the period finder
 * may leave out one more start-up iteration on one rank than on another: each such rank's
 * numbers are shifted (by at most 3) so that its steps start when the first rank's steps of the
 * same number do (the median distance of their starts, least). Ranks share a clock (merge
 * --ranks aligns them; one machine's ranks already do). */
static void align_iterations(struct cuptrace_analysis *j)
{
	size_t ref = SIZE_MAX, rs = 0, rn = 0;
	for (size_t s = 0, e; s < j->nsteps; s = e) {
		for (e = s; e < j->nsteps && j->steps[e].rank == j->steps[s].rank; e++)
			;
		if (ref == SIZE_MAX) {
			ref = j->steps[s].rank;
			rs = s;
			rn = e - s;
			continue;
		}
		if (strcmp(j->steps[s].name, "iteration"))
			continue;
		int best = 0;
		int64_t best_cost = INT64_MAX;
		for (int d = -3; d <= 3; d++) {
			int64_t diff[64];
			size_t nd = 0;
			for (size_t i = s; i < e && nd < 64; i++)
				for (size_t k = rs; k < rs + rn; k++)
					if (j->steps[k].number == j->steps[i].number + d) {
						int64_t x = j->steps[i].ts - j->steps[k].ts;
						diff[nd++] = x < 0 ? -x : x;
						break;
					}
			if (nd < 3)
				continue;
			int64_t m = median(diff, nd);
			if (m < best_cost) {
				best_cost = m;
				best = d;
			}
		}
		for (size_t i = s; i < e; i++)
			j->steps[i].number += best;
	}
}

/* The job's steps by number: over the ranks that have it, the step wall (median, slowest rank);
 * where its ranks met in collectives, the one the others waited for (the least time in them:
 * it came last) and their wait, the median over them; what that rank's step had over its own
 * usual (GPU work; time before its collective that was not GPU work). Slow: an outlier on some
 * rank, or a wait above the job's usual by max(3 x its MAD, 10% of the median step). A rank's
 * first step is start-up: never slow, and not counted for the straggler. */
static int job_steps(struct jctx *c, int gpu_comm, int *met_any)
{
	struct cuptrace_analysis *j = c->j;
	size_t n = j->nsteps, *idx = malloc((n + 1) * sizeof(*idx));
	int64_t *v = malloc((n + 1) * sizeof(*v)), *waits = malloc((n + 1) * sizeof(*waits));
	struct rank_usual *u = calloc(j->nranks + 1, sizeof(*u));
	int err = -ENOMEM;
	if (!idx || !v || !waits || !u || usual(j, u))
		goto out;
	align_iterations(j);
	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	cmp_steps = j->steps;
	qsort(idx, n, sizeof(*idx), by_number);
	size_t groups = 0;
	for (size_t i = 0; i < n; i++)
		groups += !i || j->steps[idx[i]].number != j->steps[idx[i - 1]].number;
	if (groups && !(j->job_steps = calloc(groups, sizeof(*j->job_steps))))
		goto out;
	size_t nw = 0;
	for (size_t s = 0, e; s < n; s = e) {
		const struct cuptrace_an_step *a = &j->steps[idx[s]];
		struct cuptrace_an_job_step *js = &j->job_steps[j->njob_steps++];
		*js = (struct cuptrace_an_job_step){
		    .number = a->number, .slowest = a->rank, .waited_for = SIZE_MAX};
		int startup = 0;
		size_t last = SIZE_MAX, met = 0;
		for (e = s; e < n && j->steps[idx[e]].number == a->number; e++) {
			const struct cuptrace_an_step *t = &j->steps[idx[e]];
			const struct cuptrace_an_rank *r = &j->ranks[t->rank];
			v[e - s] = t->dur;
			if (t->dur > js->max_ns) {
				js->max_ns = t->dur;
				js->slowest = t->rank;
			}
			js->outlier |= t->outlier;
			startup |= r->steady_steps && t->ts < r->steady_from;
			if (t->arrive_ns < 0)
				continue;
			met++;
			int64_t wt = gpu_comm ? t->comm_ns : t->host_comm_ns;
			int64_t wl = last == SIZE_MAX ? 0
			             : gpu_comm       ? j->steps[last].comm_ns
			                              : j->steps[last].host_comm_ns;
			if (last == SIZE_MAX || wt < wl)
				last = idx[e];
		}
		js->nranks = e - s;
		js->median_ns = median(v, e - s);
		js->startup = startup;
		if (met < 2)
			continue;
		const struct cuptrace_an_step *l = &j->steps[last];
		int64_t wl = gpu_comm ? l->comm_ns : l->host_comm_ns;
		size_t k = 0;
		for (size_t i = s; i < e; i++) {
			const struct cuptrace_an_step *t = &j->steps[idx[i]];
			if (idx[i] != last && t->arrive_ns >= 0)
				v[k++] = (gpu_comm ? t->comm_ns : t->host_comm_ns) - wl;
		}
		*met_any = 1;
		js->wait_ns = median(v, k);
		if (!startup)
			waits[nw++] = js->wait_ns;
		if (js->wait_ns <= 0)
			continue; /* they came together: nobody was waited for */
		js->waited_for = l->rank;
		js->extra_gpu_ns = l->gpu_work_ns - u[l->rank].compute;
		int64_t pre = l->arrive_ns - u[l->rank].arrive;
		js->extra_host_ns = pre - (js->extra_gpu_ns > 0 ? js->extra_gpu_ns : 0);
	}
	/* The usual wait, and what is beyond it. */
	int64_t mw = median(waits, nw);
	for (size_t i = 0; i < nw; i++)
		waits[i] = waits[i] > mw ? waits[i] - mw : mw - waits[i];
	int64_t lim = 3 * median(waits, nw);
	if (j->step_median_ns / 10 > lim)
		lim = j->step_median_ns / 10;
	for (size_t i = 0; i < j->njob_steps; i++) {
		struct cuptrace_an_job_step *js = &j->job_steps[i];
		if (js->startup)
			continue;
		js->held_up = js->waited_for != SIZE_MAX && js->wait_ns > mw + lim;
		js->slow = js->outlier || js->held_up;
		if (js->waited_for != SIZE_MAX && js->wait_ns > 0) {
			j->ranks[js->waited_for].last_steps++;
			j->ranks[js->waited_for].waited_ns += js->wait_ns;
		}
	}
	err = 0;
out:
	free(idx);
	free(v);
	free(waits);
	free(u);
	return err;
}

static double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

/* Rank s's step of a number among its steps [a, b) (their numbers increase), or SIZE_MAX. */
static size_t rank_step(const struct cuptrace_analysis *j, size_t a, size_t b, int64_t number)
{
	size_t lo = a, hi = b;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (j->steps[mid].number < number)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < b && j->steps[lo].number == number ? lo : SIZE_MAX;
}

/* The GPU gaps nothing else explained on the straggler's rank, in the steps it held up, are
 * why it was late: taken from its gpu_gap record (count, idle, the instances in those steps;
 * judged again) into the straggler's figures. */
static void take_gaps(struct jctx *c, struct cuptrace_an_finding *st, size_t s, size_t a, size_t b)
{
	struct cuptrace_analysis *j = c->j;
	struct an_fold *fo = &c->an->fold;
	struct cuptrace_an_finding *g = NULL;
	for (size_t i = 0; i < fo->nrecs && !g; i++)
		if (fo->recs[i].top_rank == s && !strcmp(fo->recs[i].id, "gpu_gap"))
			g = &fo->recs[i];
	for (size_t i = 0; i < j->njob_steps; i++) {
		const struct cuptrace_an_job_step *js = &j->job_steps[i];
		size_t k =
		    js->held_up && js->waited_for == s ? rank_step(j, a, b, js->number) : SIZE_MAX;
		if (k == SIZE_MAX)
			continue;
		const struct cuptrace_an_step *t = &j->steps[k];
		st->idle_ns += t->gap_idle_ns;
		st->idle_host_ns += t->gap_host_ns;
		if (!g)
			continue;
		g->count -= t->gaps < g->count ? t->gaps : g->count;
		g->idle_ns -= t->gap_idle_ns;
		g->idle_host_ns -= t->gap_host_ns;
		size_t n = 0;
		for (size_t w = 0; w < g->nworst; w++) { /* a gap is the step's it ends in */
			int64_t end = g->worst[w].ts + g->worst[w].dur;
			if (end <= t->ts || end > t->ts + t->dur)
				g->worst[n++] = g->worst[w];
		}
		g->nworst = n;
	}
	if (g) { /* judged on its idle, as analyze_find.c does */
		const struct cuptrace_an_rank *r = &j->ranks[s];
		int64_t span = r->steady_to - r->steady_from;
		g->total_ns = g->top_rank_ns = g->idle_ns;
		g->share = span > 0 ? (double)g->total_ns / (double)span : 0;
		g->severe = span > 0 && g->total_ns * 20 >= span;
	}
}

/* The straggler from the job's steps: the rank the others waited for the longest in all. Said
 * when that wait is at least 1% of its steady state or it held up some steps; severe at 5%.
 * Its instances: the steps it held up (else the steps it came last), each with what made it
 * late. */
static int straggler_steps(struct jctx *c)
{
	struct cuptrace_analysis *j = c->j;
	size_t s = SIZE_MAX;
	for (size_t i = 0; i < j->nranks; i++)
		if (j->ranks[i].waited_ns > 0 &&
		    (s == SIZE_MAX || j->ranks[i].waited_ns > j->ranks[s].waited_ns))
			s = i;
	if (s == SIZE_MAX)
		return 0;
	const struct cuptrace_an_rank *r = &j->ranks[s];
	int64_t span = r->steady_to - r->steady_from, gpu = 0, host = 0;
	int held = 0;
	for (size_t i = 0; i < j->njob_steps; i++)
		held |= j->job_steps[i].held_up && j->job_steps[i].waited_for == s;
#define MINE(js)                                                                                   \
	((js)->waited_for == s && !(js)->startup && (js)->wait_ns > 0 && (!held || (js)->held_up))
	for (size_t i = 0; i < j->njob_steps; i++) {
		const struct cuptrace_an_job_step *js = &j->job_steps[i];
		if (!MINE(js))
			continue;
		gpu += js->extra_gpu_ns > 0 ? js->extra_gpu_ns : 0;
		host += js->extra_host_ns > 0 ? js->extra_host_ns : 0;
	}
	if (!held && (span <= 0 || r->waited_ns * 100 < span))
		return 0;
	struct cuptrace_an_finding *f = job_finding(c, "straggler");
	if (!f)
		return c->err;
	f->title = "Straggler rank: the others waited for it in the collectives";
	f->count_of = "steps it came last";
	f->judged_on = "the others' wait for it (per step the median over them)";
	f->dominant = "wait";
	/* What made it late, over those steps: its GPU work, its host, or both. */
	f->advice = gpu > 2 * host
	                ? "its GPU work was longer in those steps: look at what differs there "
	                  "(its share of the data or model, input sizes, its GPU's clocks, another "
	                  "job on its GPU)"
	            : host > 2 * gpu
	                ? "its host was late to those steps' collectives (data loading, "
	                  "preprocessing, garbage collection, logging, checkpointing on that "
	                  "rank): look at its host work before them"
	                : "in some of those steps its GPU work was longer, in others its host was "
	                  "late to the collectives (each step says which): look at what differs "
	                  "on that rank there (its share of the work, its GPU; its data loading, "
	                  "garbage collection, logging)";
	f->count = r->last_steps;
	f->total_ns = f->top_rank_ns = r->waited_ns;
	f->top_rank = s;
	f->nranks = 1;
	f->share = span > 0 ? (double)r->waited_ns / (double)span : 0;
	f->severe = span > 0 && r->waited_ns * 20 >= span;
	size_t a = 0, b;
	while (a < j->nsteps && j->steps[a].rank != s)
		a++;
	for (b = a; b < j->nsteps && j->steps[b].rank == s; b++)
		;
	take_gaps(c, f, s, a, b);
	for (size_t i = 0; i < j->njob_steps; i++) {
		const struct cuptrace_an_job_step *js = &j->job_steps[i];
		if (!MINE(js))
			continue;
		size_t k = rank_step(j, a, b, js->number);
		struct cuptrace_an_instance in = {
		    .ts = k != SIZE_MAX ? j->steps[k].ts : 0, .dur = js->wait_ns, .rank = s};
		if (f->nworst == CUPTRACE_AN_WORST && f->worst[f->nworst - 1].dur >= in.dur)
			continue;
		char what[160];
		snprintf(what, sizeof(what),
		         "step %" PRId64 ": GPU work %+.3f ms, host %+.3f ms before its collective",
		         js->number, ms(js->extra_gpu_ns), ms(js->extra_host_ns));
		in.what = jstr(c, what);
		anx_worst_add(f, &in);
	}
#undef MINE
	return c->err;
}

/* Per rank, the time in collectives (a note); without steps to compare, the straggler from the
 * whole run: the rank with the least, when the ranks differ by more than 10%. */
static int collectives(struct jctx *c, int gpu_comm, int have_steps)
{
	struct cuptrace_analysis *j = c->j;
#define COMM(i) (gpu_comm ? j->ranks[i].comm_ns : j->ranks[i].host_comm_ns)
	size_t lo = SIZE_MAX, hi = SIZE_MAX;
	for (size_t i = 0; i < j->nranks; i++) {
		if (!j->ranks[i].busy_ns && !j->ranks[i].host_comm_ns)
			continue;
		if (lo == SIZE_MAX || COMM(i) < COMM(lo))
			lo = i;
		if (hi == SIZE_MAX || COMM(i) > COMM(hi))
			hi = i;
	}
	if (hi == SIZE_MAX || COMM(hi) <= 0)
		return 0;
	struct cuptrace_an_finding *f = job_finding(c, "collective_wait");
	if (!f)
		return c->err;
	f->title = "Time in collectives per rank";
	f->count_of = "ranks";
	f->judged_on = NULL;
	f->dominant = gpu_comm ? "gpu_work" : "call";
	f->advice = "ranks that wait longest in collectives arrive first: balance the work or "
	            "overlap communication with compute";
	f->top_rank = hi;
	f->top_rank_ns = COMM(hi);
	for (size_t i = 0; i < j->nranks; i++) {
		if (!j->ranks[i].busy_ns && !j->ranks[i].host_comm_ns)
			continue;
		struct cuptrace_an_instance in = {.dur = COMM(i),
		                                  .rank = i,
		                                  .what = gpu_comm ? "collectives"
		                                                   : "collective calls (host)"};
		f->count++;
		f->nranks++;
		f->total_ns += COMM(i);
		f->work_ns += j->ranks[i].comm_ns;
		f->call_ns += j->ranks[i].host_comm_ns;
		anx_worst_add(f, &in);
	}
	int64_t spread = COMM(hi) - COMM(lo);
	if (have_steps || spread * 10 <= COMM(hi))
		return 0;
	const struct cuptrace_an_rank *r = &j->ranks[lo];
	int64_t span = r->steady_to - r->steady_from;
	if (!(f = job_finding(c, "straggler")))
		return c->err;
	f->title = "Straggler rank: the others waited for it in the collectives";
	f->count_of = "runs";
	f->judged_on = "the others' wait for it (the most in collectives less its own)";
	f->dominant = "wait";
	f->advice = "the rank that waits least in collectives is the one the others wait for: "
	            "look at its data loading, host work or GPU";
	f->count = 1;
	f->total_ns = f->top_rank_ns = spread;
	f->top_rank = lo;
	f->nranks = 1;
	f->share = span > 0 ? (double)spread / (double)span : 0;
	f->severe = span > 0 && spread * 20 >= span;
	struct cuptrace_an_instance in = {.dur = spread, .rank = lo, .what = "straggler"};
	anx_worst_add(f, &in);
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

/* What holds most of a finding where its records did not say (the rank findings say their
 * own). */
static void dominance(struct cuptrace_an_finding *f)
{
	if (f->dominant)
		return;
	f->dominant = f->call_ns > f->work_ns && f->call_ns > f->idle_ns ? "call"
	              : f->work_ns > f->idle_ns                          ? "gpu_work"
	                                                                 : "gpu_idle";
}

int an_job_finish(struct an *an)
{
	struct cuptrace_analysis *j = an->job;
	struct jctx c = {.an = an, .j = j, .priv = an->fold.priv};
	if (!c.priv) /* nothing was read */
		return 0;
	int err = labels(&c);
	if (err)
		return err;
	size_t with = 0;
	int gpu_comm = 0, have_steps = 0;
	for (size_t i = 0; i < j->nranks; i++) {
		with += j->ranks[i].busy_ns > 0;
		gpu_comm |= j->ranks[i].comm_ns > 0;
	}
	j->multi_rank = with >= 2;
	if (j->nfiles > 1 && (err = step_stats(j)))
		return err;
	if (j->multi_rank && j->nsteps) {
		if ((err = job_steps(&c, gpu_comm, &have_steps)))
			return err;
		if (have_steps && (err = straggler_steps(&c)))
			return err;
	}
	/* The files' records by id, now that the straggler took what was its. */
	for (size_t i = 0; i < an->fold.nrecs && !c.err; i++)
		if (an->fold.recs[i].count)
			merge_finding(&c, &an->fold.recs[i], 0);
	if (c.err)
		return c.err;
	if (j->multi_rank && (err = collectives(&c, gpu_comm, have_steps)))
		return err;
	for (size_t i = 0; i < j->nfindings; i++)
		dominance(&j->findings[i]);
	if (j->nfindings)
		qsort(j->findings, j->nfindings, sizeof(*j->findings), finding_cmp);
	if (j->nops)
		qsort(j->ops, j->nops, sizeof(*j->ops), anx_op_cmp);
	return c.err;
}

void an_fold_free(struct an_fold *f)
{
	/* priv belongs to the result once made (cuptrace_analysis_free). */
	cuptrace_u64map_free(&f->op_of);
	free(f->recs);
	memset(f, 0, sizeof(*f));
}
