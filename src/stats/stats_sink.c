/* The stats sink: counts what a trace holds (per track, per slice name, flows, metadata) for
 * `cuptrace stats` and the tests (printing is in stats_print.c). Like every sink, used by one
 * thread at a time. */
#include "stats/busy.h"
#include "stats/stats.h"
#include "common/saturate.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct span {
	int64_t ts, dur;
};

/* Per-track accumulator. Busy time and overlaps need the whole track in time order and events
 * come in any order, so every slice's (ts, dur) is kept until finish: 16 bytes a slice. */
struct trk_acc {
	struct cuptrace_stats_track st; /* st.name and st.cmdline owned until moved to the result */
	struct span *spans;
	size_t nspans, cap;
	struct cuptrace_busy_span *work; /* the slices that are GPU work (busy.h): busy time */
	size_t nwork, workcap;
};

struct name_acc {
	uint32_t cat, name; /* ids in stats_sink.strs */
	uint64_t count;
	int64_t total, min, max;
	int on_gpu;
};

/* An incoming flow id of a GPU slice; seq numbers the slice so that a slice with several ids
 * is counted once. Whether the out end exists is known only at finish (any event order). */
struct flow_in {
	uint64_t seq, id;
};

enum { FLOW_OUT = 1, FLOW_IN = 2 };

struct stats_sink {
	struct cuptrace_sink base;
	struct cuptrace_stats *out; /* borrowed; written only at finish */
	int err;                    /* first error, sticky */
	int finished;
	int have_ts;
	/* Totals and metadata accumulate here; meta (and its strings) is owned until finish. */
	struct cuptrace_stats tot;
	size_t metacap;
	struct trk_acc *trk;
	size_t ntrk, trkcap;
	struct cuptrace_u64map trk_index; /* uuid -> index + 1 in trk */
	struct name_acc *names;
	size_t nnames, namecap;
	struct cuptrace_u64map name_index; /* cat id << 32 | name id -> index + 1 in names */
	struct cuptrace_strtab strs;       /* slice names and categories */
	struct cuptrace_u64map flows;      /* flow id -> FLOW_OUT | FLOW_IN */
	struct flow_in *flow_in;
	size_t nflow_in, flow_in_cap;
};

static struct stats_sink *to_stats(struct cuptrace_sink *s)
{
	return (struct stats_sink *)s;
}

static int fail(struct stats_sink *s, int err)
{
	if (!s->err)
		s->err = err;
	return s->err;
}

static struct trk_acc *find_track(struct stats_sink *s, uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(&s->trk_index, uuid);
	return v ? &s->trk[*v - 1] : NULL;
}

static void free_meta(struct cuptrace_meta *m, size_t n)
{
	/* The strings are our copies; struct cuptrace_meta says const for its borrowers. */
	for (size_t i = 0; i < n; i++) {
		free((void *)m[i].key);
		free((void *)m[i].s);
	}
	free(m);
}

/* Later values replace earlier ones in place, so the order stays first-seen. Metadata is tens of
 * entries: a linear search is enough. */
static int meta_set(struct stats_sink *s, const char *key, int is_int, int64_t i, const char *str)
{
	struct cuptrace_stats *t = &s->tot;
	struct cuptrace_meta *m = NULL;
	char *v = NULL;

	if (!key)
		return 0;
	if (!is_int && !(v = strdup(str ? str : "")))
		return -ENOMEM;
	for (size_t k = 0; k < t->nmeta && !m; k++)
		if (!strcmp(t->meta[k].key, key))
			m = &t->meta[k];
	if (!m) {
		struct cuptrace_meta *arr =
		    cuptrace_grow(t->meta, &s->metacap, t->nmeta + 1, sizeof(*arr));
		char *k = arr ? strdup(key) : NULL;
		if (arr)
			t->meta = arr;
		if (!k) {
			free(v);
			return -ENOMEM;
		}
		m = &t->meta[t->nmeta++];
		*m = (struct cuptrace_meta){.key = k};
	}
	free((void *)m->s);
	m->is_int = is_int;
	m->i = is_int ? i : 0;
	m->s = v;
	return 0;
}

static int set_metas(struct stats_sink *s, const struct cuptrace_meta *m, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		int err = meta_set(s, m[k].key, m[k].is_int, m[k].i, m[k].s);
		if (err)
			return err;
	}
	return 0;
}

static int st_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct stats_sink *s = to_stats(sk);
	int err;

	if (s->err)
		return s->err;
	/* Synthesized first, so that explicit entries of the same key win. */
	if ((err = meta_set(s, "pid", 1, info->pid, NULL)) ||
	    (info->process_name && (err = meta_set(s, "process_name", 0, 0, info->process_name))) ||
	    (info->hostname && *info->hostname &&
	     (err = meta_set(s, "hostname", 0, 0, info->hostname))) ||
	    (err = meta_set(s, "start_realtime_ns", 1, info->start_realtime_ns, NULL)) ||
	    (err = set_metas(s, info->meta, info->nmeta)))
		return fail(s, err);
	return 0;
}

static int st_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct stats_sink *s = to_stats(sk);
	int err;

	if (s->err)
		return s->err;
	if ((err = set_metas(s, m, n)))
		return fail(s, err);
	return 0;
}

static char *join_cmdline(const char *const *argv, size_t argc)
{
	size_t len = 1;
	for (size_t i = 0; i < argc; i++)
		len += strlen(argv[i] ? argv[i] : "") + 1;
	char *p = malloc(len), *q = p;
	if (!p)
		return NULL;
	*q = 0;
	for (size_t i = 0; i < argc; i++) {
		const char *a = argv[i] ? argv[i] : "";
		size_t n = strlen(a);
		if (i)
			*q++ = ' ';
		memcpy(q, a, n + 1);
		q += n;
	}
	return p;
}

/* A second declaration of a uuid (the contract forbids it) updates the description and keeps
 * the counts. */
static int st_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct stats_sink *s = to_stats(sk);
	struct trk_acc *a;
	char *name = NULL, *cmdline = NULL;
	int created, err = -ENOMEM;

	if (s->err)
		return s->err;
	if (!(name = strdup(t->name ? t->name : "")))
		goto out;
	if (t->kind == CUPTRACE_TRACK_PROCESS && t->cmdline_len &&
	    !(cmdline = join_cmdline(t->cmdline, t->cmdline_len)))
		goto out;
	struct trk_acc *arr = cuptrace_grow(s->trk, &s->trkcap, s->ntrk + 1, sizeof(*arr));
	if (!arr)
		goto out;
	s->trk = arr;
	/* Looked up after cuptrace_grow(), which may move s->trk. */
	struct trk_acc *parent = find_track(s, t->parent_uuid);
	uint64_t group = !parent                                   ? 0
	                 : parent->st.kind == CUPTRACE_TRACK_GROUP ? parent->st.uuid
	                                                           : parent->st.group_uuid;
	uint64_t *slot = cuptrace_u64map_put(&s->trk_index, t->uuid, &created);
	if (!slot)
		goto out;
	if (created) {
		*slot = ++s->ntrk;
		a = &s->trk[s->ntrk - 1];
		memset(a, 0, sizeof(*a));
	} else {
		a = &s->trk[*slot - 1];
		free(a->st.name);
		free(a->st.cmdline);
	}
	a->st.uuid = t->uuid;
	a->st.kind = t->kind;
	a->st.parent_uuid = t->parent_uuid;
	a->st.group_uuid = group;
	a->st.pid = t->pid;
	a->st.tid = t->tid;
	a->st.lane = t->lane;
	a->st.sort_rank = t->sort_rank;
	a->st.name = name;
	a->st.cmdline = cmdline;
	return 0;
out:
	free(name);
	free(cmdline);
	return fail(s, err);
}

/* Time bookkeeping shared by every event kind; returns its track or NULL if undeclared. */
static struct trk_acc *note_event(struct stats_sink *s, uint64_t uuid, int64_t ts, int64_t end)
{
	struct cuptrace_stats *t = &s->tot;
	struct trk_acc *a = find_track(s, uuid);

	if (ts < 0)
		t->negative_ts++;
	if (!s->have_ts || ts < t->min_ts)
		t->min_ts = ts;
	if (!s->have_ts || end > t->max_ts)
		t->max_ts = end;
	s->have_ts = 1;
	if (!a) {
		t->unknown_track_events++;
		return NULL;
	}
	int first = !(a->st.slices + a->st.instants + a->st.counters);
	if (first || ts < a->st.first_ts)
		a->st.first_ts = ts;
	if (first || end > a->st.last_end)
		a->st.last_end = end;
	return a;
}

static int add_name(struct stats_sink *s, const char *cat, const char *name, int64_t dur, int gpu)
{
	cat = cat ? cat : "";
	name = name ? name : "";
	uint32_t c = cuptrace_strtab_intern(&s->strs, cat, strlen(cat));
	uint32_t n = cuptrace_strtab_intern(&s->strs, name, strlen(name));
	struct name_acc *arr = cuptrace_grow(s->names, &s->namecap, s->nnames + 1, sizeof(*arr));
	if (!c || !n || !arr)
		return -ENOMEM;
	s->names = arr;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&s->name_index, (uint64_t)c << 32 | n, &created);
	if (!slot)
		return -ENOMEM;
	if (created) {
		*slot = ++s->nnames;
		s->names[*slot - 1] =
		    (struct name_acc){.cat = c, .name = n, .min = dur, .max = dur};
	}
	struct name_acc *a = &s->names[*slot - 1];
	a->count++;
	a->total = sat_add(a->total, dur);
	a->min = dur < a->min ? dur : a->min;
	a->max = dur > a->max ? dur : a->max;
	a->on_gpu |= gpu;
	return 0;
}

static int add_flows(struct stats_sink *s, const uint64_t *ids, size_t n, int side)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *v = cuptrace_u64map_put(&s->flows, ids[i], NULL);
		if (!v)
			return -ENOMEM;
		*v |= side;
	}
	return 0;
}

static int st_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct stats_sink *s = to_stats(sk);
	int64_t dur = e->dur;
	int err;

	if (s->err)
		return s->err;
	if (dur < 0) {
		s->tot.negative_dur++;
		dur = 0;
	}
	struct trk_acc *a = note_event(s, e->track_uuid, e->ts, sat_add(e->ts, dur));
	int gpu = a && a->st.group_uuid;
	s->tot.slices++;
	if (a) {
		struct span *sp = cuptrace_grow(a->spans, &a->cap, a->nspans + 1, sizeof(*sp));
		if (!sp)
			return fail(s, -ENOMEM);
		a->spans = sp;
		a->spans[a->nspans++] = (struct span){e->ts, dur};
		a->st.slices++;
		if (gpu && cuptrace_busy_is_work(e->category)) {
			struct cuptrace_busy_span *w =
			    cuptrace_grow(a->work, &a->workcap, a->nwork + 1, sizeof(*w));
			if (!w)
				return fail(s, -ENOMEM);
			a->work = w;
			a->work[a->nwork++] = (struct cuptrace_busy_span){e->ts, dur};
		}
		if (gpu && e->category &&
		    (!strcmp(e->category, "kernel") || !strcmp(e->category, "graph")) &&
		    (!a->st.kernels++ || e->ts < a->st.first_kernel_ts))
			a->st.first_kernel_ts = e->ts;
	}
	if ((err = add_name(s, e->category, e->name, dur, gpu)) ||
	    (err = add_flows(s, e->flows_out, e->nflows_out, FLOW_OUT)) ||
	    (err = add_flows(s, e->flows_in, e->nflows_in, FLOW_IN)))
		return fail(s, err);
	if (!gpu)
		return 0;
	s->tot.gpu_slices++;
	if (!e->nflows_in)
		return 0; /* and cuptrace_grow() of an empty array to 0 would look like a failure */
	struct flow_in *fi =
	    cuptrace_grow(s->flow_in, &s->flow_in_cap, s->nflow_in + e->nflows_in, sizeof(*fi));
	if (!fi)
		return fail(s, -ENOMEM);
	s->flow_in = fi;
	for (size_t i = 0; i < e->nflows_in; i++)
		s->flow_in[s->nflow_in++] = (struct flow_in){s->tot.gpu_slices, e->flows_in[i]};
	return 0;
}

static int st_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct stats_sink *s = to_stats(sk);

	if (s->err)
		return s->err;
	struct trk_acc *a = note_event(s, e->track_uuid, e->ts, e->ts);
	s->tot.instants++;
	if (a)
		a->st.instants++;
	return 0;
}

static int st_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct stats_sink *s = to_stats(sk);

	if (s->err)
		return s->err;
	struct trk_acc *a = note_event(s, e->track_uuid, e->ts, e->ts);
	s->tot.counters++;
	if (a)
		a->st.counters++;
	return 0;
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct span *a = pa, *b = pb;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->dur > b->dur ? -1 : a->dur < b->dur;
}

/* Partial overlaps of one track. In (ts, -dur) order every earlier slice starts at
 * or before the current one, so it contains it iff it ends at or after it, and overlaps it
 * partially iff it ends strictly inside it. ends[] holds the open slices' ends, largest at the
 * bottom: ended ones pop off the top, and the slices the current one partially overlaps are the
 * run just below them; the current one is inserted under that run, so the stack stays sorted.
 * Cost: O(1) amortized per slice plus one step per overlapping pair. */
static int sweep(struct trk_acc *a, int64_t **ends, size_t *cap)
{
	size_t n = 0;

	if (!a->nspans)
		return 0; /* qsort(NULL, 0) is undefined */
	/* Readers replay in time order, so the spans are nearly always sorted already: checking
	 * is one pass, sorting what is sorted was a tenth of `stats` on a 1 M-kernel trace. */
	size_t s = 1;
	while (s < a->nspans && span_cmp(&a->spans[s - 1], &a->spans[s]) <= 0)
		s++;
	if (s < a->nspans)
		qsort(a->spans, a->nspans, sizeof(*a->spans), span_cmp);
	for (size_t i = 0; i < a->nspans; i++) {
		int64_t ts = a->spans[i].ts, end = sat_add(ts, a->spans[i].dur);
		while (n && (*ends)[n - 1] <= ts)
			n--;
		size_t k = n;
		while (k && (*ends)[k - 1] < end)
			k--;
		a->st.partial_overlaps += n - k;
		int64_t *e = cuptrace_grow(*ends, cap, n + 1, sizeof(**ends));
		if (!e)
			return -ENOMEM;
		*ends = e;
		memmove(e + k + 1, e + k, (n - k) * sizeof(*e));
		e[k] = end;
		n++;
	}
	return 0;
}

static int name_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_stats_name *a = pa, *b = pb;
	int c;
	if (a->total_ns != b->total_ns)
		return a->total_ns > b->total_ns ? -1 : 1;
	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	if ((c = strcmp(a->category, b->category)))
		return c;
	return strcmp(a->name, b->name);
}

static void free_names(struct cuptrace_stats_name *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].category);
	}
	free(v);
}

struct grp_trk {
	size_t g, i; /* group's and track's indices in s->trk */
};

static int grp_trk_cmp(const void *pa, const void *pb)
{
	const struct grp_trk *a = pa, *b = pb;
	if (a->g != b->g)
		return a->g < b->g ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* Busy time is GPU work only, as a union: per track (a stream row), and per GPU over all its
 * tracks, so that concurrent streams count once. gpu_busy_ns sums the GPUs. Consumes the
 * tracks' work spans. The tracks are bucketed by group with one sort (a pass over every track
 * per group was quadratic where each GPU has a group of its own and there are many). */
static int busy_times(struct stats_sink *s, struct cuptrace_stats *r)
{
	struct cuptrace_busy_span *tmp = NULL;
	struct grp_trk *gt = NULL;
	size_t cap = 0, ngt = 0;

	if (s->ntrk && !(gt = malloc(s->ntrk * sizeof(*gt))))
		return -ENOMEM;
	for (size_t i = 0; i < s->ntrk; i++) {
		const struct trk_acc *a = &s->trk[i];
		const struct trk_acc *grp =
		    a->st.group_uuid ? find_track(s, a->st.group_uuid) : NULL;
		if (s->trk[i].st.kind == CUPTRACE_TRACK_GROUP)
			s->trk[i].st.busy_ns = 0;
		if (grp && grp->st.kind == CUPTRACE_TRACK_GROUP && a->nwork)
			gt[ngt++] = (struct grp_trk){(size_t)(grp - s->trk), i};
	}
	if (ngt)
		qsort(gt, ngt, sizeof(*gt), grp_trk_cmp);
	for (size_t k = 0; k < ngt;) {
		struct trk_acc *grp = &s->trk[gt[k].g];
		size_t n = 0;
		for (; k < ngt && &s->trk[gt[k].g] == grp; k++) {
			const struct trk_acc *a = &s->trk[gt[k].i];
			struct cuptrace_busy_span *v =
			    cuptrace_grow(tmp, &cap, n + a->nwork, sizeof(*v));
			if (!v) {
				free(tmp);
				free(gt);
				return -ENOMEM;
			}
			tmp = v;
			memcpy(tmp + n, a->work, a->nwork * sizeof(*tmp));
			n += a->nwork;
		}
		for (size_t i = 0; i < n; i++) {
			int64_t e = sat_add(tmp[i].ts, tmp[i].dur);
			if (!i || tmp[i].ts < grp->st.work_from)
				grp->st.work_from = tmp[i].ts;
			if (!i || e > grp->st.work_to)
				grp->st.work_to = e;
		}
		grp->st.busy_ns = cuptrace_busy_union(tmp, n);
		r->gpu_busy_ns = sat_add(r->gpu_busy_ns, grp->st.busy_ns);
	}
	free(tmp);
	free(gt);
	for (size_t i = 0; i < s->ntrk; i++) {
		struct trk_acc *a = &s->trk[i];
		if (a->st.group_uuid)
			a->st.busy_ns = cuptrace_busy_union(a->work, a->nwork);
		free(a->work);
		a->work = NULL;
		a->nwork = a->workcap = 0;
	}
	return 0;
}

/* Everything that can fail happens before *out is written; ownership then moves to *out. */
static int st_finish(struct cuptrace_sink *sk)
{
	struct stats_sink *s = to_stats(sk);
	struct cuptrace_stats r = s->tot;
	struct cuptrace_stats_track *trk = NULL;
	struct cuptrace_stats_name *names = NULL;
	int64_t *ends = NULL;
	size_t endcap = 0;
	int err = 0;

	if (s->err || s->finished)
		return s->err ? s->err : -EINVAL;
	s->finished = 1;
	for (size_t i = 0; i < s->ntrk; i++) {
		struct trk_acc *a = &s->trk[i];
		if ((err = sweep(a, &ends, &endcap)))
			goto out;
		free(a->spans); /* the biggest part of the sink, and no longer needed */
		a->spans = NULL;
		a->nspans = a->cap = 0;
	}
	if ((err = busy_times(s, &r)))
		goto out;
	/* u64map has no iterator; its slots are public and used[] == 1 marks a live entry. */
	for (size_t i = 0; i < s->flows.cap; i++) {
		if (s->flows.used[i] != 1)
			continue;
		if (s->flows.vals[i] == (FLOW_OUT | FLOW_IN))
			r.flows++;
		else
			r.flows_dangling++;
	}
	for (size_t i = 0; i < s->nflow_in; i++) {
		uint64_t seq = s->flow_in[i].seq;
		uint64_t *v = cuptrace_u64map_get(&s->flows, s->flow_in[i].id);
		if (!v || !(*v & FLOW_OUT))
			continue;
		r.gpu_slices_with_flow_in++;
		while (i + 1 < s->nflow_in && s->flow_in[i + 1].seq == seq)
			i++;
	}
	err = -ENOMEM;
	if (s->ntrk && !(trk = malloc(s->ntrk * sizeof(*trk))))
		goto out;
	if (s->nnames && !(names = calloc(s->nnames, sizeof(*names))))
		goto out;
	for (size_t i = 0; i < s->nnames; i++) {
		struct name_acc *a = &s->names[i];
		names[i] = (struct cuptrace_stats_name){
		    .name = strdup(cuptrace_strtab_str(&s->strs, a->name)),
		    .category = strdup(cuptrace_strtab_str(&s->strs, a->cat)),
		    .count = a->count,
		    .total_ns = a->total,
		    .min_ns = a->min,
		    .max_ns = a->max,
		    .on_gpu = a->on_gpu,
		};
		if (!names[i].name || !names[i].category)
			goto out;
		if (names[i].on_gpu && cuptrace_busy_is_work(names[i].category))
			r.gpu_work_ns = sat_add(r.gpu_work_ns, names[i].total_ns);
	}
	if (names)
		qsort(names, s->nnames, sizeof(*names), name_cmp);
	for (size_t i = 0; i < s->ntrk; i++) {
		trk[i] = s->trk[i].st;
		s->trk[i].st.name = NULL;
		s->trk[i].st.cmdline = NULL;
	}
	r.tracks = s->ntrk;
	r.trk = trk;
	r.ntrk = s->ntrk;
	r.names = names;
	r.nnames = s->nnames;
	cuptrace_stats_free(s->out);
	*s->out = r;
	s->tot.meta = NULL;
	s->tot.nmeta = 0;
	trk = NULL;
	names = NULL;
	err = 0;
out:
	free(ends);
	free(trk);
	free_names(names, s->nnames);
	return err ? fail(s, err) : 0;
}

static void st_destroy(struct cuptrace_sink *sk)
{
	struct stats_sink *s = to_stats(sk);

	if (!s)
		return;
	for (size_t i = 0; i < s->ntrk; i++) {
		free(s->trk[i].st.name);
		free(s->trk[i].st.cmdline);
		free(s->trk[i].spans);
		free(s->trk[i].work);
	}
	free(s->trk);
	free(s->names);
	free(s->flow_in);
	free_meta(s->tot.meta, s->tot.nmeta);
	cuptrace_u64map_free(&s->trk_index);
	cuptrace_u64map_free(&s->name_index);
	cuptrace_u64map_free(&s->flows);
	cuptrace_strtab_free(&s->strs);
	free(s);
}

static const struct cuptrace_sink_ops stats_ops = {
    .name = "stats",
    .begin = st_begin,
    .track = st_track,
    .slice = st_slice,
    .instant = st_instant,
    .counter = st_counter,
    .meta = st_meta,
    .finish = st_finish,
    .destroy = st_destroy,
};

struct cuptrace_sink *cuptrace_stats_sink_new(struct cuptrace_stats *out)
{
	struct stats_sink *s;

	if (!out || !(s = calloc(1, sizeof(*s)))) {
		errno = out ? ENOMEM : EINVAL;
		return NULL;
	}
	memset(out, 0, sizeof(*out));
	s->base.ops = &stats_ops;
	s->out = out;
	cuptrace_u64map_init(&s->trk_index);
	cuptrace_u64map_init(&s->name_index);
	cuptrace_u64map_init(&s->flows);
	cuptrace_strtab_init(&s->strs);
	return &s->base;
}

void cuptrace_stats_free(struct cuptrace_stats *st)
{
	if (!st)
		return;
	for (size_t i = 0; st->trk && i < st->ntrk; i++) {
		free(st->trk[i].name);
		free(st->trk[i].cmdline);
	}
	free(st->trk);
	free_names(st->names, st->nnames);
	free_meta(st->meta, st->nmeta);
	memset(st, 0, sizeof(*st));
}
