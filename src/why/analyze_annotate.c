/* `cuptrace analyze --annotate`: a pass-through sink that, before finishing the writer it wraps,
 * draws the analysis into the trace as an "Analysis" group (analyze.h says what it holds). Uses
 * only the sink interface of format/event.h, so any writer works. */
#include "why/analyze.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ann {
	struct cuptrace_sink base;
	struct cuptrace_sink *inner;
	const struct cuptrace_analysis *a;
	uint64_t max_uuid, proc_uuid;
	int32_t pid;
	int err;
};

static struct ann *to_ann(struct cuptrace_sink *s)
{
	return (struct ann *)s;
}

static int an_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *i)
{
	struct ann *n = to_ann(s);
	n->pid = i->pid;
	return n->inner->ops->begin(n->inner, i);
}

static int an_track(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	struct ann *n = to_ann(s);
	if (t->uuid > n->max_uuid)
		n->max_uuid = t->uuid;
	if (t->kind == CUPTRACE_TRACK_PROCESS && !n->proc_uuid) {
		n->proc_uuid = t->uuid;
		n->pid = t->pid;
	}
	return n->inner->ops->track(n->inner, t);
}

static int an_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	return to_ann(s)->inner->ops->slice(to_ann(s)->inner, e);
}

static int an_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	return to_ann(s)->inner->ops->instant(to_ann(s)->inner, e);
}

static int an_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	return to_ann(s)->inner->ops->counter(to_ann(s)->inner, e);
}

static int an_stack(struct cuptrace_sink *s, const struct cuptrace_stack *st)
{
	struct cuptrace_sink *in = to_ann(s)->inner;
	return in->ops->stack ? in->ops->stack(in, st) : 0;
}

static int an_sample(struct cuptrace_sink *s, const struct cuptrace_sample *e)
{
	struct cuptrace_sink *in = to_ann(s)->inner;
	return in->ops->sample ? in->ops->sample(in, e) : 0;
}

static int an_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t k)
{
	return to_ann(s)->inner->ops->meta(to_ann(s)->inner, m, k);
}

static int an_tick(struct cuptrace_sink *s)
{
	struct cuptrace_sink *in = to_ann(s)->inner;
	return in->ops->tick ? in->ops->tick(in) : 0;
}

static int track(struct ann *n, uint64_t uuid, enum cuptrace_track_kind kind, uint64_t parent,
                 const char *name, int32_t rank, enum cuptrace_counter_unit unit)
{
	struct cuptrace_track t = {.uuid = uuid,
	                           .kind = kind,
	                           .parent_uuid = parent,
	                           .pid = n->pid,
	                           .name = name,
	                           .sort_rank = rank,
	                           .unit = unit};
	return n->inner->ops->track(n->inner, &t);
}

static int slice(struct ann *n, uint64_t trk, int64_t ts, int64_t dur, const char *name,
                 const struct cuptrace_arg *args, size_t nargs)
{
	struct cuptrace_slice e = {.track_uuid = trk,
	                           .ts = ts,
	                           .dur = dur,
	                           .name = name,
	                           .category = "analysis",
	                           .args = args,
	                           .nargs = nargs};
	return n->inner->ops->slice(n->inner, &e);
}

/* "load_batch (train.py:13) 75%, ... of 20 samples" (the top CUPTRACE_AN_HOST_FRAMES), into
 * buf; empty without samples. */
static void frames_text(const struct cuptrace_an_host_frame *fr, size_t n, uint32_t samples,
                        char *buf, size_t size)
{
	size_t k = 0;
	buf[0] = 0;
	if (!samples)
		return;
	for (size_t j = 0; j < n && j < CUPTRACE_AN_HOST_FRAMES && k < size; j++) {
		int w = snprintf(buf + k, size - k, "%s%s %.0f%%", j ? ", " : "", fr[j].frame,
		                 100.0 * fr[j].samples / samples);
		k += w > 0 ? (size_t)w : 0;
	}
	if (k < size)
		snprintf(buf + k, size - k, " of %u samples", samples);
}

/* For one of the largest idle intervals (GPU g, starting at ts) with host stack samples: the
 * args host_thread and host_was ("load_batch (train.py:13) 75%, ... of 20 samples"), into
 * args[0..2) with the text in buf; how many (0 for any other interval). */
static size_t host_was(const struct cuptrace_analysis *a, size_t g, int64_t ts, char *buf,
                       size_t size, struct cuptrace_arg *args)
{
	for (size_t i = 0; i < a->nidle; i++) {
		const struct cuptrace_an_idle *d = &a->idle[i];
		if (d->gpu != g || d->ts != ts || !d->host_samples)
			continue;
		frames_text(d->host_frames, d->nhost_frames, d->host_samples, buf, size);
		args[0] = (struct cuptrace_arg){
		    .key = "host_thread", .type = CUPTRACE_ARG_INT, .v.i = d->host.tid};
		args[1] = (struct cuptrace_arg){
		    .key = "host_was", .type = CUPTRACE_ARG_STRING, .v.s = buf};
		return 2;
	}
	return 0;
}

static int inst_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_an_instance *a = pa, *b = pb;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

struct step_track {
	size_t file;
	int32_t pid;
	int64_t tid;
	uint64_t uuid;
};

/* One track of step slices per thread that has steps (their periods follow each other on it),
 * then the counters "Step period" and "Step GPU busy %" (over the period). */
static int draw_steps(struct ann *n, uint64_t group, uint64_t next)
{
	const struct cuptrace_analysis *a = n->a;
	char name[256];
	int err;
	struct step_track seen[64];
	size_t nseen = 0;
	for (size_t i = 0; i < a->nsteps; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		size_t k = 0;
		while (k < nseen &&
		       !(seen[k].file == s->file && seen[k].pid == s->pid && seen[k].tid == s->tid))
			k++;
		if (k == nseen) {
			if (nseen == 64)
				continue; /* more threads with steps than anyone reads */
			seen[nseen] = (struct step_track){s->file, s->pid, s->tid, next++};
			snprintf(name, sizeof(name), "Steps: pid %d, tid %lld (%s)", s->pid,
			         (long long)s->tid, a->step_source ? a->step_source : "");
			if ((err = track(n, seen[nseen].uuid, CUPTRACE_TRACK_SLICES, group, name,
			                 1900 + (int32_t)nseen, 0)))
				return err;
			nseen++;
		}
		const char *cause = cuptrace_step_cause_names[s->cause];
		struct cuptrace_arg args[] = {
		    {.key = "number", .type = CUPTRACE_ARG_INT, .v.i = s->number},
		    {.key = "gpu_extent_ns",
		     .type = CUPTRACE_ARG_INT,
		     .v.i = s->gpu_end - s->gpu_ts},
		    {.key = "busy_ns", .type = CUPTRACE_ARG_INT, .v.i = s->busy_ns},
		    {.key = "host_gap_ns", .type = CUPTRACE_ARG_INT, .v.i = s->host_gap_ns},
		    {.key = "cause",
		     .type = CUPTRACE_ARG_STRING,
		     .v.s = s->startup ? "start-up"
		            : cause    ? cause
		                       : ""},
		};
		snprintf(name, sizeof(name), "%s%s", s->name, s->outlier ? " (outlier)" : "");
		if ((err = slice(n, seen[k].uuid, s->ts, s->dur, name, args, 5)))
			return err;
	}
	uint64_t wall = next++, busy = next++;
	if ((err = track(n, wall, CUPTRACE_TRACK_COUNTER, group, "Step period", 2000,
	                 CUPTRACE_UNIT_NS)) ||
	    (err = track(n, busy, CUPTRACE_TRACK_COUNTER, group, "Step GPU busy %", 2001,
	                 CUPTRACE_UNIT_NONE)))
		return err;
	for (size_t i = 0; i < a->nsteps; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		struct cuptrace_counter c = {.track_uuid = wall, .ts = s->ts, .i = s->dur};
		struct cuptrace_counter b = {
		    .track_uuid = busy,
		    .ts = s->ts,
		    .is_double = 1,
		    .d = s->dur > 0 ? 100.0 * (double)s->busy_ns / (double)s->dur : 0};
		if ((err = n->inner->ops->counter(n->inner, &c)) ||
		    (err = n->inner->ops->counter(n->inner, &b)))
			return err;
	}
	return 0;
}

static int draw(struct ann *n)
{
	const struct cuptrace_analysis *a = n->a;
	uint64_t base = n->max_uuid + 1, group = base, next = base + 1;
	char name[256];
	int err;

	if (!n->proc_uuid)
		return 0; /* nothing to hang the group on: an empty trace */
	if ((err = track(n, group, CUPTRACE_TRACK_GROUP, n->proc_uuid, "Analysis", 1 << 20, 0)))
		return err;
	for (size_t g = 0; g < a->ngpus; g++) {
		uint64_t t = next++;
		snprintf(name, sizeof(name), "Idle: %s (pid %d)", a->gpus[g].name, a->gpus[g].pid);
		if ((err = track(n, t, CUPTRACE_TRACK_SLICES, group, name, (int32_t)g, 0)))
			return err;
		for (size_t i = 0; i < a->ngaps; i++) {
			const struct cuptrace_an_gap *p = &a->gaps[i];
			if (p->gpu != g)
				continue;
			struct cuptrace_arg args[3] = {
			    {.key = "gpu", .type = CUPTRACE_ARG_STRING, .v.s = a->gpus[g].name}};
			char was[512];
			size_t nargs = 1 + host_was(a, g, p->ts, was, sizeof(was), &args[1]);
			if ((err = slice(n, t, p->ts, p->dur, cuptrace_idle_cause_names[p->cause],
			                 args, nargs)))
				return err;
		}
	}
	for (size_t f = 0; f < a->nfindings; f++) {
		const struct cuptrace_an_finding *x = &a->findings[f];
		struct cuptrace_an_instance w[CUPTRACE_AN_WORST];
		uint64_t t = next++;
		snprintf(name, sizeof(name), "Finding: %s", x->title);
		if ((err = track(n, t, CUPTRACE_TRACK_SLICES, group, name, 1000 + (int32_t)f, 0)))
			return err;
		memcpy(w, x->worst, x->nworst * sizeof(*w));
		qsort(w, x->nworst, sizeof(*w), inst_cmp);
		int64_t end = INT64_MIN;
		for (size_t k = 0; k < x->nworst; k++) {
			if (w[k].ts < end)
				continue; /* one track: no partial overlaps */
			char was[256], fwas[512];
			struct cuptrace_arg args[] = {
			    {.key = "advice", .type = CUPTRACE_ARG_STRING, .v.s = x->advice},
			    {.key = "what",
			     .type = CUPTRACE_ARG_STRING,
			     .v.s = w[k].what ? w[k].what : ""},
			    {.key = "op",
			     .type = CUPTRACE_ARG_STRING,
			     .v.s = w[k].op ? w[k].op : ""},
			    {.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = w[k].bytes},
			    {.key = "tid", .type = CUPTRACE_ARG_INT, .v.i = w[k].tid},
			    {.key = "count", .type = CUPTRACE_ARG_UINT, .v.u = x->count},
			    {.key = "total_ns", .type = CUPTRACE_ARG_INT, .v.i = x->total_ns},
			    /* The figures the finding keeps apart (README). */
			    {.key = "call_ns", .type = CUPTRACE_ARG_INT, .v.i = x->call_ns},
			    {.key = "gpu_work_ns", .type = CUPTRACE_ARG_INT, .v.i = x->work_ns},
			    {.key = "gpu_idle_ns", .type = CUPTRACE_ARG_INT, .v.i = x->idle_ns},
			    {.key = "rank",
			     .type = CUPTRACE_ARG_STRING,
			     .v.s = w[k].rank < a->nranks && a->ranks[w[k].rank].label
			                ? a->ranks[w[k].rank].label
			                : ""},
			    {.key = "host_was", .type = CUPTRACE_ARG_STRING, .v.s = was},
			    {.key = "finding_host_was", .type = CUPTRACE_ARG_STRING, .v.s = fwas},
			};
			/* With host stack samples: what this instance's thread was doing in it,
			 * and what the finding's were over all its intervals. */
			size_t nargs = sizeof(args) / sizeof(args[0]);
			if (w[k].host_samples && w[k].host_frame)
				snprintf(was, sizeof(was), "%s %.0f%% of %u samples",
				         w[k].host_frame,
				         100.0 * w[k].host_frame_samples / w[k].host_samples,
				         w[k].host_samples);
			else
				was[0] = 0;
			frames_text(x->host_frames, x->nhost_frames, x->host_samples, fwas,
			            sizeof(fwas));
			if (!*fwas) /* no samples in the finding: neither arg */
				nargs -= 2;
			else if (!*was) { /* the finding's alone */
				args[nargs - 2] = args[nargs - 1];
				nargs--;
			}
			if ((err = slice(n, t, w[k].ts, w[k].dur, x->title, args, nargs)))
				return err;
			end = w[k].ts + w[k].dur;
		}
	}
	if (!a->nsteps)
		return 0;
	return draw_steps(n, group, next);
}

static int an_finish(struct cuptrace_sink *s)
{
	struct ann *n = to_ann(s);
	int err = draw(n);
	int f = n->inner->ops->finish(n->inner);
	return err ? err : f;
}

static void an_destroy(struct cuptrace_sink *s)
{
	if (!s)
		return;
	cuptrace_sink_destroy(to_ann(s)->inner);
	free(s);
}

static const struct cuptrace_sink_ops ann_ops = {
    .name = "annotate",
    .begin = an_begin,
    .track = an_track,
    .slice = an_slice,
    .instant = an_instant,
    .counter = an_counter,
    .stack = an_stack,
    .sample = an_sample,
    .meta = an_meta,
    .tick = an_tick,
    .finish = an_finish,
    .destroy = an_destroy,
};

struct cuptrace_sink *cuptrace_annotate_sink_new(struct cuptrace_sink *inner,
                                                 const struct cuptrace_analysis *a)
{
	struct ann *n = inner && a ? calloc(1, sizeof(*n)) : NULL;
	if (!n) {
		cuptrace_sink_destroy(inner);
		errno = inner && a ? ENOMEM : EINVAL;
		return NULL;
	}
	n->base.ops = &ann_ops;
	n->inner = inner;
	n->a = a;
	return &n->base;
}
