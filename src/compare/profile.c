/* The aggregating sink of `cuptrace diff` (diff.h): per family and name, slice counts and total
 * times, plus the run's header numbers. Wall span and GPU busy time come from a stats sink that
 * sees every event too, so they are the numbers `cuptrace stats` shows. Like every sink, used by
 * one thread at a time. */
#include "names/step_name.h"
#include "stats/busy.h"
#include "compare/diff.h"
#include "format/forward.h"
#include "lines/lines.h"
#include "names/base_name.h"
#include "stats/stats.h"
#include "stats/stats_meta.h"
#include "stats/stats_summary.h"
#include "common/saturate.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Track flags, as values of the track map (0 means undeclared). */
enum { TRK_KNOWN = 1, TRK_GPU = 2, TRK_GROUP = 4 };

struct name_acc {
	uint32_t name; /* id in profile_sink.strs */
	uint64_t count;
	int64_t total;
};

struct profile_sink {
	struct fwd_sink fwd;          /* inner: the stats sink (span and busy times); err */
	struct cuptrace_profile *out; /* borrowed; written only at finish */
	struct cuptrace_profile_opts opts;
	int finished;
	struct cuptrace_stats st;     /* filled by the stats sink at its finish */
	struct cuptrace_lines lines;  /* group_by_line: filled by the lines sink at its finish */
	struct cuptrace_u64map trk;   /* uuid -> TRK_* */
	struct cuptrace_strtab strs;  /* names (after base reduction) */
	struct cuptrace_u64map index; /* family << 32 | name id -> index + 1 in acc[family] */
	struct name_acc *acc[CUPTRACE_FAM_N];
	size_t nacc[CUPTRACE_FAM_N], cap[CUPTRACE_FAM_N];
	char *scratch; /* base names are written here */
	size_t scratch_cap;
	uint64_t kernels, bytes, per_count;
	/* group_by_op: what attributes GPU work to its op, resolved at finish (a reader may
	 * replay out of time order, a capture does) */
	struct op_range {
		uint64_t track;
		int64_t ts, end;
		uint32_t name; /* id in strs */
	} * ranges;
	struct op_launch {
		uint64_t track, flow;
		int64_t ts;
	} * launches;
	struct op_work {
		uint64_t flow; /* its first incoming flow; 0 if none */
		int64_t dur;
		uint32_t name;
		int fam;
	} * works;
	size_t nranges, rangecap, nlaunches, launchcap, nworks, workcap;
	/* A thread's lanes (the slice tracks of its name under its parent, where a reader put
	 * the slices that overlap partially) are the thread for finding its ops. */
	struct cuptrace_u64map thread_named; /* hash(parent, name) -> thread uuid */
	struct cuptrace_u64map lane_of;      /* lane uuid -> thread uuid */
};

static struct profile_sink *to_profile(struct cuptrace_sink *s)
{
	return (struct profile_sink *)s;
}

static int pr_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct profile_sink *s = to_profile(sk);
	int err;

	if ((err = fwd_track(sk, t)))
		return err;
	uint64_t *p = t->parent_uuid ? cuptrace_u64map_get(&s->trk, t->parent_uuid) : NULL;
	uint64_t flags = TRK_KNOWN;
	if (p && (*p & (TRK_GPU | TRK_GROUP)))
		flags |= TRK_GPU;
	if (t->kind == CUPTRACE_TRACK_GROUP)
		flags |= TRK_GROUP;
	uint64_t *v = cuptrace_u64map_put(&s->trk, t->uuid, NULL);
	if (!v)
		return fwd_fail(&s->fwd, -ENOMEM);
	*v = flags;
	if (!s->opts.group_by_op || !t->name || (flags & TRK_GPU))
		return 0;
	uint64_t key =
	    cuptrace_hash64(t->parent_uuid ^ cuptrace_hash_bytes(t->name, strlen(t->name)));
	if (t->kind == CUPTRACE_TRACK_THREAD) {
		v = cuptrace_u64map_put(&s->thread_named, key, NULL);
	} else if (t->kind == CUPTRACE_TRACK_SLICES &&
	           (p = cuptrace_u64map_get(&s->thread_named, key))) {
		uint64_t thread = *p;
		if ((v = cuptrace_u64map_put(&s->lane_of, t->uuid, NULL)))
			*v = thread;
		return v ? 0 : fwd_fail(&s->fwd, -ENOMEM);
	} else {
		return 0;
	}
	if (!v)
		return fwd_fail(&s->fwd, -ENOMEM);
	*v = t->uuid;
	return 0;
}

/* Categories that are not ranges although they sit on host tracks (see diff.h). */
static int is_range_category(const char *cat)
{
	static const char *const not_ranges[] = {
	    "cuda_runtime",
	    "cuda_driver",
	    "kernel",
	    "graph",
	    "memcpy",
	    "memset",
	    "gpu_memcpy",
	    "gpu_memset",
	    "cpu_op",
	    "sync",
	    "memory",
	    "cupti_overhead",
	    "overhead",
	    "python_function",
	    "gpu_user_annotation",
	    "cuda_profiler_range",
	    "Trace",
	    "cuptrace",
	};
	for (size_t i = 0; i < sizeof(not_ranges) / sizeof(not_ranges[0]); i++)
		if (!strcmp(cat, not_ranges[i]))
			return 0;
	return 1;
}

static int has_arg(const struct cuptrace_slice *e, const char *key)
{
	for (size_t i = 0; i < e->nargs; i++)
		if (e->args[i].key && !strcmp(e->args[i].key, key))
			return 1;
	return 0;
}

/* The family of a slice, or -1 for none. */
static int family_of(const struct cuptrace_slice *e, int host)
{
	const char *cat = e->category ? e->category : "", *name = e->name ? e->name : "";

	int gpu = cuptrace_busy_family(cat);
	if (gpu >= 0)
		return gpu;
	if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver"))
		return CUPTRACE_FAM_API;
	if (!strcmp(cat, "cpu_op"))
		return CUPTRACE_FAM_OP;
	if (!host || !is_range_category(cat))
		return -1;
	if (!strncmp(name, "aten::", 6) || !strncmp(name, "nn.Module: ", 11) || has_arg(e, "seq"))
		return CUPTRACE_FAM_OP;
	return CUPTRACE_FAM_NVTX;
}

static uint64_t bytes_arg(const struct cuptrace_slice *e)
{
	for (size_t i = 0; i < e->nargs; i++) {
		const struct cuptrace_arg *a = &e->args[i];
		if (!a->key || strcmp(a->key, "bytes"))
			continue;
		if (a->type == CUPTRACE_ARG_UINT)
			return a->v.u;
		if (a->type == CUPTRACE_ARG_INT && a->v.i > 0)
			return (uint64_t)a->v.i;
		if (a->type == CUPTRACE_ARG_DOUBLE && a->v.d > 0 && a->v.d < 1.8e19)
			return (uint64_t)a->v.d;
		return 0;
	}
	return 0;
}

static int add_n(struct profile_sink *s, int fam, const char *name, uint64_t count, int64_t dur)
{
	size_t len = strlen(name);
	if (s->opts.group_by_base) {
		char *b = cuptrace_grow(s->scratch, &s->scratch_cap, len + 1, 1);
		if (!b)
			return -ENOMEM;
		s->scratch = b;
		len = cuptrace_name_base(name, b, len + 1);
		name = b;
	}
	uint32_t id = cuptrace_strtab_intern(&s->strs, name, len);
	int created;
	uint64_t *slot =
	    id ? cuptrace_u64map_put(&s->index, (uint64_t)fam << 32 | id, &created) : NULL;
	if (!slot)
		return -ENOMEM;
	if (created) {
		struct name_acc *a =
		    cuptrace_grow(s->acc[fam], &s->cap[fam], s->nacc[fam] + 1, sizeof(*a));
		if (!a) {
			cuptrace_u64map_del(&s->index, (uint64_t)fam << 32 | id);
			return -ENOMEM;
		}
		s->acc[fam] = a;
		a[s->nacc[fam]] = (struct name_acc){.name = id};
		*slot = ++s->nacc[fam];
	}
	struct name_acc *a = &s->acc[fam][*slot - 1];
	a->count += count;
	a->total = sat_add(a->total, dur);
	return 0;
}

static int add(struct profile_sink *s, int fam, const char *name, int64_t dur)
{
	return add_n(s, fam, name, 1, dur);
}

/* group_by_line: the lines sink's rows, kernels and copies apart. */
static int add_by_line(struct profile_sink *s)
{
	int err = 0;
	for (size_t i = 0; i < s->lines.nrows && !err; i++) {
		const struct cuptrace_line_row *r = &s->lines.rows[i];
		if (r->kernel_count)
			err = add_n(s, CUPTRACE_FAM_KERNEL, r->line, r->kernel_count, r->kernel_ns);
		if (!err && r->copy_count)
			err = add_n(s, CUPTRACE_FAM_COPY, r->line, r->copy_count, r->copy_ns);
	}
	return err;
}

/* group_by_op: keeps what pr_finish needs to name each kernel and copy after its op. */
static int note_for_ops(struct profile_sink *s, const struct cuptrace_slice *e, int host, int fam,
                        const char *name, int64_t dur)
{
	if (fam == CUPTRACE_FAM_KERNEL || fam == CUPTRACE_FAM_COPY) {
		uint32_t id = cuptrace_strtab_intern(&s->strs, name, strlen(name));
		if (!id || CUPTRACE_GROW(s->works, s->workcap, s->nworks + 1))
			return -ENOMEM;
		s->works[s->nworks++] = (struct op_work){
		    .flow = e->nflows_in ? e->flows_in[0] : 0, .dur = dur, .name = id, .fam = fam};
		return 1; /* counted at finish */
	}
	if (!host)
		return 0;
	const uint64_t *lane = cuptrace_u64map_get(&s->lane_of, e->track_uuid);
	uint64_t track = lane ? *lane : e->track_uuid;
	/* ProfilerStep#N is skipped as analyze skips it: it would make a row per step. */
	if ((fam == CUPTRACE_FAM_OP || fam == CUPTRACE_FAM_NVTX) &&
	    strncmp(name, "ProfilerStep#", 13)) {
		uint32_t id = cuptrace_strtab_intern(&s->strs, name, strlen(name));
		if (!id || CUPTRACE_GROW(s->ranges, s->rangecap, s->nranges + 1))
			return -ENOMEM;
		s->ranges[s->nranges++] = (struct op_range){track, e->ts, sat_add(e->ts, dur), id};
	}
	for (size_t i = 0; i < e->nflows_out; i++) {
		if (CUPTRACE_GROW(s->launches, s->launchcap, s->nlaunches + 1))
			return -ENOMEM;
		s->launches[s->nlaunches++] = (struct op_launch){track, e->flows_out[i], e->ts};
	}
	return 0;
}

static int pr_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct profile_sink *s = to_profile(sk);
	int err;

	if ((err = fwd_slice(sk, e)))
		return err;
	uint64_t *t = cuptrace_u64map_get(&s->trk, e->track_uuid);
	int host = !t || !(*t & TRK_GPU); /* an undeclared track counts as the host's */
	const char *name = e->name ? e->name : "";
	/* "ProfilerStep" counts torch.profiler's "ProfilerStep#N" ranges. */
	if (host && s->opts.per_name && cuptrace_step_name_matches(name, s->opts.per_name))
		s->per_count++;
	int fam = family_of(e, host);
	if (fam == CUPTRACE_FAM_KERNEL)
		s->kernels++;
	if (fam == CUPTRACE_FAM_COPY && e->category && strstr(e->category, "memcpy"))
		s->bytes += bytes_arg(e);
	int64_t dur = e->dur > 0 ? e->dur : 0;
	if (s->opts.group_by_line && (fam == CUPTRACE_FAM_KERNEL || fam == CUPTRACE_FAM_COPY))
		return 0; /* counted at finish, from the lines sink */
	if (s->opts.group_by_op && (err = note_for_ops(s, e, host, fam, name, dur)))
		return err < 0 ? fwd_fail(&s->fwd, err) : 0;
	if (fam >= 0 && (err = add(s, fam, name, dur)))
		return fwd_fail(&s->fwd, err);
	return 0;
}

static int range_cmp(const void *pa, const void *pb)
{
	const struct op_range *a = pa, *b = pb;
	if (a->track != b->track)
		return a->track < b->track ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->end > b->end ? -1 : a->end < b->end; /* the outer first */
}

static int launch_cmp(const void *pa, const void *pb)
{
	const struct op_launch *a = pa, *b = pb;
	if (a->track != b->track)
		return a->track < b->track ? -1 : 1;
	return a->ts < b->ts ? -1 : a->ts > b->ts;
}

/* Each launch's op: the innermost range open on its thread when it began, by one sweep per
 * track over the ranges and launches in time order with a stack of the open ranges. Fills
 * op_of (flow id -> range name id). */
static int launch_ops(struct profile_sink *s, struct cuptrace_u64map *op_of)
{
	uint32_t *stack = NULL;
	size_t cap = 0, i = 0;
	int err = 0;

	if (s->nranges)
		qsort(s->ranges, s->nranges, sizeof(*s->ranges), range_cmp);
	if (s->nlaunches)
		qsort(s->launches, s->nlaunches, sizeof(*s->launches), launch_cmp);
	for (size_t j = 0; j < s->nlaunches && !err;) {
		uint64_t track = s->launches[j].track;
		size_t n = 0;
		while (i < s->nranges && s->ranges[i].track < track)
			i++;
		for (; j < s->nlaunches && s->launches[j].track == track; j++) {
			const struct op_launch *l = &s->launches[j];
			for (; i < s->nranges && s->ranges[i].track == track &&
			       s->ranges[i].ts <= l->ts;
			     i++) {
				while (n && s->ranges[stack[n - 1]].end <= s->ranges[i].ts)
					n--;
				if (CUPTRACE_GROW(stack, cap, n + 1)) {
					err = -ENOMEM;
					break;
				}
				stack[n++] = (uint32_t)i;
			}
			while (n && s->ranges[stack[n - 1]].end <= l->ts)
				n--;
			uint64_t *v = n ? cuptrace_u64map_put(op_of, l->flow, NULL) : NULL;
			if (n && !v)
				err = -ENOMEM;
			else if (v)
				*v = s->ranges[stack[n - 1]].name;
		}
	}
	free(stack);
	return err;
}

/* group_by_op: every kernel and copy counted under its op's name ("(no op) " and its own name
 * where no launch or no range around it is known). */
static int add_by_op(struct profile_sink *s)
{
	struct cuptrace_u64map op_of;
	char *buf = NULL;
	size_t cap = 0;
	int err;

	cuptrace_u64map_init(&op_of);
	if ((err = launch_ops(s, &op_of)))
		goto out;
	for (size_t i = 0; i < s->nworks && !err; i++) {
		const struct op_work *w = &s->works[i];
		uint64_t *v = w->flow ? cuptrace_u64map_get(&op_of, w->flow) : NULL;
		const char *own = cuptrace_strtab_str(&s->strs, w->name);
		if (v) {
			err = add(s, w->fam, cuptrace_strtab_str(&s->strs, (uint32_t)*v), w->dur);
			continue;
		}
		size_t len = strlen(own) + sizeof("(no op) ");
		if (CUPTRACE_GROW(buf, cap, len)) {
			err = -ENOMEM;
			break;
		}
		snprintf(buf, len, "(no op) %s", own);
		err = add(s, w->fam, buf, w->dur);
	}
out:
	free(buf);
	cuptrace_u64map_free(&op_of);
	return err;
}

static int name_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_profile_name *a = pa, *b = pb;
	return strcmp(a->name, b->name);
}

/* Everything that can fail happens before *out is written; ownership then moves to *out. */
static int pr_finish(struct cuptrace_sink *sk)
{
	struct profile_sink *s = to_profile(sk);
	struct cuptrace_profile r = {0};
	struct stats_device *dev = NULL;
	size_t ndev = 0;
	int err;

	if (s->fwd.err || s->finished)
		return s->fwd.err ? s->fwd.err : -EINVAL;
	s->finished = 1;
	if ((err = fwd_finish(sk)) || (err = stats_devices(&s->st, &dev, &ndev)))
		goto out;
	if (s->opts.group_by_line)
		err = add_by_line(s);
	else if (s->opts.group_by_op)
		err = add_by_op(s);
	if (err)
		goto out;
	err = -ENOMEM;
	if (ndev && !(r.dev = calloc(ndev, sizeof(*r.dev))))
		goto out;
	for (; r.ndev < ndev; r.ndev++) {
		r.dev[r.ndev].busy_ns = dev[r.ndev].busy_ns;
		if (!(r.dev[r.ndev].name = strdup(dev[r.ndev].group->name)))
			goto out;
	}
	for (int f = 0; f < CUPTRACE_FAM_N; f++) {
		if (!s->nacc[f])
			continue;
		if (!(r.names[f] = calloc(s->nacc[f], sizeof(*r.names[f]))))
			goto out;
		for (; r.nnames[f] < s->nacc[f]; r.nnames[f]++) {
			const struct name_acc *a = &s->acc[f][r.nnames[f]];
			struct cuptrace_profile_name *n = &r.names[f][r.nnames[f]];
			n->count = a->count;
			n->total_ns = a->total;
			if (!(n->name = strdup(cuptrace_strtab_str(&s->strs, a->name))))
				goto out;
		}
		qsort(r.names[f], r.nnames[f], sizeof(*r.names[f]), name_cmp);
	}
	if (s->st.slices + s->st.instants + s->st.counters)
		r.span_ns = sat_sub(s->st.max_ts, s->st.min_ts);
	r.gpu_busy_ns = s->st.gpu_busy_ns;
	r.kernels = s->kernels;
	r.bytes_copied = s->bytes;
	r.per_count = s->per_count;
	/* The rank, as `merge --ranks` reads it (record's metadata, torch's distributedInfo). */
	const struct cuptrace_meta *rk = stats_meta_get(&s->st, "rank");
	r.has_rank = rk && stats_meta_int(rk, &r.rank) && r.rank >= 0;
	const struct cuptrace_meta *dm = stats_meta_get(&s->st, CUPTRACE_META_READ_DAMAGE);
	if (dm && !dm->is_int && dm->s && !(r.damage = strdup(dm->s))) {
		err = -ENOMEM;
		goto out;
	}
	cuptrace_profile_free(s->out);
	*s->out = r;
	memset(&r, 0, sizeof(r));
	err = 0;
out:
	free(dev);
	cuptrace_profile_free(&r);
	return err ? fwd_fail(&s->fwd, err) : 0;
}

static void pr_destroy(struct cuptrace_sink *sk)
{
	struct profile_sink *s = to_profile(sk);

	if (!s)
		return;
	cuptrace_sink_destroy(s->fwd.inner);
	cuptrace_stats_free(&s->st);
	cuptrace_lines_free(&s->lines);
	cuptrace_u64map_free(&s->trk);
	cuptrace_u64map_free(&s->index);
	cuptrace_u64map_free(&s->thread_named);
	cuptrace_u64map_free(&s->lane_of);
	cuptrace_strtab_free(&s->strs);
	for (int f = 0; f < CUPTRACE_FAM_N; f++)
		free(s->acc[f]);
	free(s->scratch);
	free(s->ranges);
	free(s->launches);
	free(s->works);
	free(s);
}

static const struct cuptrace_sink_ops profile_ops = {
    .name = "profile",
    .begin = fwd_begin,
    .track = pr_track,
    .slice = pr_slice,
    .instant = fwd_instant,
    .counter = fwd_counter,
    .stack = fwd_stack,
    .sample = fwd_sample,
    .meta = fwd_meta,
    .finish = pr_finish,
    .destroy = pr_destroy,
};

struct cuptrace_sink *cuptrace_profile_sink_new(struct cuptrace_profile *out,
                                                const struct cuptrace_profile_opts *opts)
{
	struct profile_sink *s;

	if (!out) {
		errno = EINVAL;
		return NULL;
	}
	if (!(s = calloc(1, sizeof(*s)))) {
		errno = ENOMEM;
		return NULL;
	}
	memset(out, 0, sizeof(*out));
	s->fwd.base.ops = &profile_ops;
	s->out = out;
	if (opts) {
		size_t n = opts->sz && opts->sz < sizeof(s->opts) ? opts->sz : sizeof(s->opts);
		memcpy(&s->opts, opts, n);
	}
	cuptrace_u64map_init(&s->trk);
	cuptrace_u64map_init(&s->index);
	cuptrace_u64map_init(&s->thread_named);
	cuptrace_u64map_init(&s->lane_of);
	cuptrace_strtab_init(&s->strs);
	s->fwd.inner = cuptrace_stats_sink_new(&s->st);
	if (s->fwd.inner && s->opts.group_by_line)
		s->fwd.inner = cuptrace_lines_sink_new(&s->lines, s->opts.lines, s->fwd.inner);
	s->opts.lines = NULL; /* copied by the lines sink */
	if (!s->fwd.inner) {
		pr_destroy(&s->fwd.base);
		errno = ENOMEM;
		return NULL;
	}
	return &s->fwd.base;
}

void cuptrace_profile_free(struct cuptrace_profile *p)
{
	if (!p)
		return;
	free(p->damage);
	for (size_t i = 0; p->dev && i < p->ndev; i++)
		free(p->dev[i].name);
	free(p->dev);
	for (int f = 0; f < CUPTRACE_FAM_N; f++) {
		for (size_t i = 0; p->names[f] && i < p->nnames[f]; i++)
			free(p->names[f][i].name);
		free(p->names[f]);
	}
	memset(p, 0, sizeof(*p));
}
