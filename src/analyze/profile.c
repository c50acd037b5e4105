/* The aggregating sink of `cuptrace diff` (diff.h): per family and name, slice counts and total
 * times, plus the run's header numbers. Wall span and GPU busy time come from a stats sink that
 * sees every event too, so they are the numbers `cuptrace stats` shows. Like every sink, used by
 * one thread at a time. */
#include "analyze/step_name.h"
#include "analyze/diff.h"
#include "analyze/forward.h"
#include "analyze/names.h"
#include "analyze/stats.h"
#include "analyze/stats_internal.h"
#include "common/util.h"

#include <errno.h>
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
	struct cuptrace_u64map trk;   /* uuid -> TRK_* */
	struct cuptrace_strtab strs;  /* names (after base reduction) */
	struct cuptrace_u64map index; /* family << 32 | name id -> index + 1 in acc[family] */
	struct name_acc *acc[CUPTRACE_FAM_N];
	size_t nacc[CUPTRACE_FAM_N], cap[CUPTRACE_FAM_N];
	char *scratch; /* base names are written here */
	size_t scratch_cap;
	uint64_t kernels, bytes, per_count;
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
	return 0;
}

/* Categories that are not ranges although they sit on host tracks (see diff.h). */
static int is_range_category(const char *cat)
{
	static const char *const not_ranges[] = {
	    "cuda_runtime",
	    "cuda_driver",
	    "kernel",
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

	if (!strcmp(cat, "kernel"))
		return CUPTRACE_FAM_KERNEL;
	if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver"))
		return CUPTRACE_FAM_API;
	if (!strcmp(cat, "memcpy") || !strcmp(cat, "memset") || !strcmp(cat, "gpu_memcpy") ||
	    !strcmp(cat, "gpu_memset"))
		return CUPTRACE_FAM_COPY;
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

static int add(struct profile_sink *s, int fam, const char *name, int64_t dur)
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
	a->count++;
	a->total = sat_add(a->total, dur);
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
	if (fam < 0)
		return 0;
	if (fam == CUPTRACE_FAM_KERNEL)
		s->kernels++;
	if (fam == CUPTRACE_FAM_COPY && e->category && strstr(e->category, "memcpy"))
		s->bytes += bytes_arg(e);
	if ((err = add(s, fam, name, e->dur > 0 ? e->dur : 0)))
		return fwd_fail(&s->fwd, err);
	return 0;
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
	cuptrace_u64map_free(&s->trk);
	cuptrace_u64map_free(&s->index);
	cuptrace_strtab_free(&s->strs);
	for (int f = 0; f < CUPTRACE_FAM_N; f++)
		free(s->acc[f]);
	free(s->scratch);
	free(s);
}

static const struct cuptrace_sink_ops profile_ops = {
    .name = "profile",
    .begin = fwd_begin,
    .track = pr_track,
    .slice = pr_slice,
    .instant = fwd_instant,
    .counter = fwd_counter,
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
	cuptrace_strtab_init(&s->strs);
	if (!(s->fwd.inner = cuptrace_stats_sink_new(&s->st))) {
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
