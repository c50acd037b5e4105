/* JSON reader, second pass: what each JSON process and thread becomes in event.h's model
 * (process, GPU group, stream, host thread), times made relative, overlapping slices moved to
 * lanes, flow events bound to slices and paired into arrows. */
#include "read/json_state.h"
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUPTRACE_GROUP_PID_BASE 1000000000ll /* chrome_writer.c: a group's synthetic pid */
#define CUPTRACE_GROUP_PID_STEP 10000000ll
#define CUPTRACE_SYNTH_TID_BASE 500000000ll /* chrome_writer.c: a SLICES track's tid */
#define SORT_STEP               1024        /* chrome_writer.c: sort index per rank */

/* ---- processes ---- */

static int32_t synthetic_pid(struct jr *r)
{
	while (cuptrace_u64map_get(&r->pids, (uint64_t)r->next_pid))
		r->next_pid++;
	return r->next_pid++;
}

static int use_pid(struct jr *r, int64_t pid)
{
	int created;
	if (!cuptrace_u64map_put(&r->pids, (uint64_t)pid, &created)) {
		r->err = -ENOMEM;
		return -1;
	}
	return 0;
}

/* "GPU 3" (Kineto's process_labels of a device; "MTIA 3" for Meta's accelerator): 3, else -1. */
static int gpu_label(const char *s)
{
	int n, used = 0;
	const char *num = !s                        ? NULL
	                  : !strncmp(s, "GPU ", 4)  ? s + 4
	                  : !strncmp(s, "MTIA ", 5) ? s + 5
	                                            : NULL;
	if (!num || sscanf(num, "%d%n", &n, &used) != 1 || num[used] || n < 0)
		return -1;
	return n;
}

static struct jr_proc *proc_in(struct jr *r, const struct cuptrace_u64map *m, int64_t key)
{
	uint64_t *v = cuptrace_u64map_get(m, (uint64_t)key);
	return v ? &r->procs[*v - 1] : NULL;
}

/* The PROCESSes by int pid and by process_sort_index: the owners of groups. */
static void index_processes(struct jr *r)
{
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct jr_proc *p = &r->procs[i];
		uint64_t *v;
		if (p->kind != CUPTRACE_TRACK_PROCESS)
			continue;
		if (!p->id.is_str && (v = cuptrace_u64map_put(&r->by_pid, (uint64_t)p->id.i, NULL)))
			*v = i + 1;
		if (p->has_sort &&
		    (v = cuptrace_u64map_put(&r->by_sort, (uint64_t)p->sort_index, NULL)))
			*v = i + 1;
	}
}

/* Each JSON process: a PROCESS (its own pid where it is a real one) or a GPU's GROUP.
 *  - cuptrace's file: its writer's pid scheme (chrome_writer.c) says which is which, and which
 *    process a group belongs to (1000000000 + 10000000 n + owner pid; others: the traced one);
 *  - another tool's: a pid whose process_labels is "GPU N" (Kineto), or, without labels, whose
 *    slices are all of Kineto's GPU categories, is GPU N (N: the label, else the pid), in the
 *    process with the most events. String, negative and zero pids get synthetic ones. */
static void classify(struct jr *r)
{
	size_t ngroups = 0;

	for (size_t i = 0; i < r->nprocs; i++) {
		struct jr_proc *p = &r->procs[i];
		int64_t id = p->id.is_str ? -1 : p->id.i;
		p->kind = CUPTRACE_TRACK_PROCESS;
		if (r->flavor == JR_CUPTRACE) {
			/* The writer's process_sort_index: 1024 n for the n-th process, one of
			 * 1024 n + 1 ... 1024 n + 1023 for its groups. */
			if (p->has_sort ? p->sort_index % SORT_STEP != 0
			                : id >= CUPTRACE_GROUP_PID_BASE && id <= INT32_MAX)
				p->kind = CUPTRACE_TRACK_GROUP;
		} else {
			int n = gpu_label(jr_s(r, p->labels));
			/* pid 0 is no host process (Linux's idle task): Kineto's device 0. */
			if (n >= 0 ||
			    (!p->labels && p->gpu_events && (!p->host_events || id == 0))) {
				p->kind = CUPTRACE_TRACK_GROUP;
				p->device = n >= 0                    ? n
				            : id >= 0 && id < 1000000 ? (int)id
				                                      : (int)ngroups;
			}
		}
		if (p->kind == CUPTRACE_TRACK_GROUP)
			ngroups++;
		else if (id > 0 && id <= INT32_MAX && !use_pid(r, id))
			p->pid = (int32_t)id;
	}
	for (size_t i = 0; i < r->nprocs; i++) {
		struct jr_proc *p = &r->procs[i];
		if (p->kind == CUPTRACE_TRACK_PROCESS && !p->pid && !use_pid(r, r->next_pid))
			p->pid = synthetic_pid(r);
	}

	/* The traced process: the trace info's, else the real one with the most events. */
	struct jr_proc *main = NULL;
	index_processes(r);
	if (r->flavor == JR_CUPTRACE && r->have_info)
		main = proc_in(r, &r->by_pid, r->info_pid);
	for (size_t i = 0; i < r->nprocs && !main; i++) {
		struct jr_proc *q = &r->procs[i];
		if (q->kind == CUPTRACE_TRACK_PROCESS && !q->id.is_str && q->id.i > 0)
			for (size_t k = i; k < r->nprocs; k++) {
				struct jr_proc *o = &r->procs[k];
				if (o->kind == CUPTRACE_TRACK_PROCESS && !o->id.is_str &&
				    o->id.i > 0 && (!main || o->events > main->events))
					main = o;
			}
	}
	for (size_t i = 0; i < r->nprocs && !main; i++)
		if (r->procs[i].kind == CUPTRACE_TRACK_PROCESS)
			main = &r->procs[i];
	if (!main && ngroups) {
		/* GPU work only: the groups need a process to belong to. */
		struct jr_proc *p = JR_PUSH(r, procs, nprocs, proccap);
		if (!p)
			return;
		memset(p, 0, sizeof(*p));
		p->kind = CUPTRACE_TRACK_PROCESS;
		p->id.is_str = 1;
		p->id.s = p->name = jr_str(r, "process", 7);
		p->pid = synthetic_pid(r);
		main = p;
	}
	r->main_proc = main ? (uint32_t)(main - r->procs) + 1 : 0;

	for (size_t i = 0; i < r->nprocs; i++) {
		struct jr_proc *p = &r->procs[i], *owner = NULL;
		if (p->kind != CUPTRACE_TRACK_GROUP)
			continue;
		if (r->flavor == JR_CUPTRACE && p->has_sort)
			owner = proc_in(r, &r->by_sort, p->sort_index - p->sort_index % SORT_STEP);
		else if (r->flavor == JR_CUPTRACE && !p->id.is_str)
			owner = proc_in(r, &r->by_pid, p->id.i % CUPTRACE_GROUP_PID_STEP);
		if (!owner)
			owner = main;
		p->parent = (uint32_t)(owner - r->procs) + 1;
		p->pid = owner->pid;
	}
}

/* ---- tracks ---- */

static uint32_t add_track(struct jr *r, const struct jr_track *t)
{
	struct jr_track *n = JR_PUSH(r, trk, ntrk, trkcap);
	if (!n)
		return 0;
	*n = *t;
	return (uint32_t)r->ntrk;
}

static uint32_t fmt_str(struct jr *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static uint32_t fmt_str(struct jr *r, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return jr_str(r, buf, n < 0 ? 0 : (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

static int32_t clamp32(int64_t v)
{
	return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

/* A name for what has none: the string id, or "pid N" / "thread N". */
static uint32_t id_name(struct jr *r, const struct jr_id *id, const char *what)
{
	return id->is_str ? id->s : fmt_str(r, "%s %" PRId64, what, id->i);
}

static void process_tracks(struct jr *r)
{
	/* Processes before groups: a group's parent must have its track. */
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < r->nprocs; i++) {
			struct jr_proc *p = &r->procs[i];
			struct jr_track t = {.kind = p->kind,
			                     .pid = p->pid,
			                     .desc = p->desc,
			                     .first_fo = p->first_fo};
			if ((pass == 0) != (p->kind == CUPTRACE_TRACK_PROCESS))
				continue;
			if (p->kind == CUPTRACE_TRACK_PROCESS) {
				t.name = p->name ? p->name : id_name(r, &p->id, "pid");
				if (r->flavor == JR_CUPTRACE)
					t.cmdline = p->labels;
				t.used = r->flavor == JR_CUPTRACE && (p->name || p->labels);
			} else {
				const struct jr_proc *o = &r->procs[p->parent - 1];
				t.parent = o->track;
				if (r->flavor == JR_CUPTRACE) {
					t.name = p->name ? p->name : fmt_str(r, "GPU");
					if (p->has_sort && o->has_sort)
						t.rank = clamp32(p->sort_index - o->sort_index - 1);
					t.used = !!p->name;
				} else {
					const struct jr_device *d =
					    p->device < JR_MAX_DEVICES ? &r->dev[p->device] : NULL;
					t.name = d && d->has && d->name
					             ? fmt_str(r, "GPU %d: %s", p->device,
					                       jr_s(r, d->name))
					             : fmt_str(r, "GPU %d", p->device);
					t.rank =
					    100 +
					    p->device; /* after the host threads, as convert does */
				}
			}
			p->track = add_track(r, &t);
		}
	}
}

static void thread_tracks(struct jr *r)
{
	for (size_t i = 0; i < r->nthr; i++) {
		struct jr_thread *th = &r->thr[i];
		const struct jr_proc *p = &r->procs[th->proc];
		int64_t tid = th->id.is_str ? -1 : th->id.i;
		struct jr_track t = {.parent = p->track,
		                     .pid = p->pid,
		                     .name = th->name,
		                     .desc = th->desc,
		                     .first_fo = th->first_fo};
		int slices = p->kind == CUPTRACE_TRACK_GROUP ||
		             (r->flavor == JR_CUPTRACE && tid >= CUPTRACE_SYNTH_TID_BASE);
		if (r->flavor == JR_CUPTRACE) {
			t.used = !!th->name;
			if (th->has_sort) {
				/* thread_sort_index = 1024 * sort_rank (+ lane for a SLICES track)
				 */
				int64_t q = th->sort_index / SORT_STEP,
				        m = th->sort_index % SORT_STEP;
				if (m < 0) {
					q--;
					m += SORT_STEP;
				}
				t.rank = clamp32(q);
				t.lane = slices ? (uint32_t)m : 0;
			}
		}
		if (slices) {
			t.kind = CUPTRACE_TRACK_SLICES;
			if (!t.name)
				t.name =
				    th->id.is_str ? th->id.s : fmt_str(r, "Stream %" PRId64, tid);
			if (r->flavor != JR_CUPTRACE) {
				/* Kineto names a stream "stream 7 ": cuptrace's name, in stream
				 * order. */
				if (!th->id.is_str)
					t.name = fmt_str(r, "Stream %" PRId64, tid);
				t.rank = clamp32(tid);
			}
		} else {
			t.kind = CUPTRACE_TRACK_THREAD;
			t.tid = tid > 0 && tid <= INT32_MAX ? tid : r->next_tid++;
			if (!t.name)
				t.name = id_name(r, &th->id, "thread");
			if (r->flavor != JR_CUPTRACE || !th->has_sort)
				t.rank = t.tid == p->pid
				             ? 0
				             : 1; /* the main thread first, as convert does */
		}
		th->track = add_track(r, &t);
	}
}

static int unit_of(const char *key)
{
	if (!key)
		return CUPTRACE_UNIT_NONE;
	if (!strcmp(key, "bytes"))
		return CUPTRACE_UNIT_BYTES;
	if (!strcmp(key, "ns"))
		return CUPTRACE_UNIT_NS;
	if (!strcmp(key, "count"))
		return CUPTRACE_UNIT_COUNT;
	return CUPTRACE_UNIT_NONE;
}

/* cuptrace's writer names a 'C' event after the track and keys its one value by the unit;
 * for other files the track is named as trace_processor names it: "<name> <key>". */
static void counter_tracks(struct jr *r)
{
	for (size_t i = 0; i < r->nctrs; i++) {
		struct jr_counter *c = &r->ctrs[i];
		const struct jr_proc *p = &r->procs[c->proc];
		const char *name = jr_s(r, c->name), *key = jr_s(r, c->key);
		struct jr_track t = {.kind = CUPTRACE_TRACK_COUNTER,
		                     .parent = p->track,
		                     .pid = p->pid,
		                     .first_fo = c->first_fo};
		if (r->flavor == JR_CUPTRACE) {
			t.name = c->name ? c->name : jr_str(r, "", 0);
			t.unit = unit_of(key);
		} else {
			t.name = fmt_str(r, "%s %s", name ? name : "", key ? key : "");
		}
		c->track = add_track(r, &t);
	}
}

/* ---- time ---- */

/* Relative to the earliest event: cuptrace's files start at their trace info, at 0. */
static void rebase(struct jr *r)
{
	int have = 0;
	for (size_t i = 0; i < r->nevs; i++)
		if (!have || r->evs[i].ts < r->base) {
			r->base = r->evs[i].ts;
			have = 1;
		}
	if (r->flavor == JR_CUPTRACE && r->have_info && r->base > 0)
		r->base = 0; /* the info instant is at 0 */
	for (size_t i = 0; i < r->nevs; i++) {
		struct jr_ev *e = &r->evs[i];
		if (__builtin_sub_overflow(e->ts, r->base, &e->ts)) {
			e->dropped = 1;
			r->ck.skipped++;
		}
	}
}

/* ---- slices, lanes, flows ---- */

struct stack {
	uint32_t *ev; /* open slices, innermost last (event index + 1) */
	size_t n, cap;
};

struct build {
	uint32_t *xs; /* slice events (index), by thread, start, longer first, file order */
	size_t nxs;
	uint32_t *t0, *tn; /* per thread: its range in xs */
	uint32_t *parent;  /* per event: the slice it nests in, on its track (index + 1) */
	struct stack st[JR_MAX_LANES + 1];
};

static int64_t end_of(const struct jr_ev *e)
{
	int64_t end;
	return __builtin_add_overflow(e->ts, e->dur, &end) ? INT64_MAX : end;
}

static const struct jr *sort_r; /* qsort has no context argument in C11 */

/* By group (a slice's thread, a flow event's flow key), start, longer first, file order. */
static int group_cmp(const void *pa, const void *pb)
{
	const struct jr_ev *a = &sort_r->evs[*(const uint32_t *)pa];
	const struct jr_ev *b = &sort_r->evs[*(const uint32_t *)pb];
	uint32_t ga = a->ph == 'X' ? a->thr : a->key, gb = b->ph == 'X' ? b->thr : b->key;
	if (ga != gb)
		return ga < gb ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return a->fo < b->fo ? -1 : a->fo > b->fo;
}

static int push(struct jr *r, struct stack *s, uint32_t ev)
{
	s->ev = jr_grow(r, s->ev, &s->cap, s->n + 1, sizeof(*s->ev));
	if (r->err)
		return -1;
	s->ev[s->n++] = ev;
	return 0;
}

static uint32_t lane_track(struct jr *r, struct jr_thread *th, uint32_t k, uint32_t fo)
{
	if (th->lanes[k - 1])
		return th->lanes[k - 1];
	const struct jr_track *m = &r->trk[th->track - 1];
	/* A lane has its track's name, so the UI shows the two as one (convert does the same).
	 * Lane numbers count the slice tracks of that name under the parent, as the Perfetto
	 * reader rebuilds them: a thread's first lane is 0, a stream's first 1. */
	struct jr_track t = {.kind = CUPTRACE_TRACK_SLICES,
	                     .parent = m->parent,
	                     .pid = m->pid,
	                     .name = m->name,
	                     .rank = m->rank,
	                     .lane = m->kind == CUPTRACE_TRACK_THREAD ? k - 1 : m->lane + k,
	                     .first_fo = fo};
	th->lanes[k - 1] = add_track(r, &t);
	if (th->lanes[k - 1]) {
		th->nlanes = k;
		r->ck.lanes++;
	}
	return th->lanes[k - 1];
}

/* Event order's contract: no two slices of a track partially overlap. Each thread's slices, by
 * start, go on the first of its lanes where they nest in or follow what is open; a slice that
 * fits none opens a new lane (a SLICES track of the thread's name); past JR_MAX_LANES it is
 * dropped and counted. */
static int assign_lanes(struct jr *r, struct build *b)
{
	for (size_t g = 0; g < b->nxs;) {
		uint32_t thr = r->evs[b->xs[g]].thr;
		struct jr_thread *th = &r->thr[thr - 1];
		size_t end = g;
		while (end < b->nxs && r->evs[b->xs[end]].thr == thr)
			end++;
		b->t0[thr - 1] = (uint32_t)g;
		b->tn[thr - 1] = (uint32_t)(end - g);
		for (int k = 0; k <= JR_MAX_LANES; k++)
			b->st[k].n = 0;
		for (; g < end; g++) {
			uint32_t x = b->xs[g];
			struct jr_ev *e = &r->evs[x];
			int64_t e_end = end_of(e);
			uint32_t k;
			for (k = 0; k <= JR_MAX_LANES; k++) {
				struct stack *s = &b->st[k];
				while (s->n && end_of(&r->evs[s->ev[s->n - 1] - 1]) <= e->ts)
					s->n--;
				if (!s->n || e_end <= end_of(&r->evs[s->ev[s->n - 1] - 1]))
					break;
			}
			if (k > JR_MAX_LANES) {
				e->dropped = 1;
				r->ck.overlaps_dropped++;
				continue;
			}
			struct stack *s = &b->st[k];
			b->parent[x] = s->n ? s->ev[s->n - 1] : 0;
			if (push(r, s, x + 1))
				return -1;
			e->track = k ? lane_track(r, th, k, e->fo) : th->track;
			if (!e->track)
				return -1;
		}
	}
	return 0;
}

static int contains(const struct jr_ev *s, int64_t ts)
{
	return !s->dropped && s->ts <= ts && ts <= end_of(s);
}

/* The innermost slice of thread thr (index + 1) open at ts, 0 if none. */
static uint32_t enclosing(const struct jr *r, const struct build *b, uint32_t thr, int64_t ts)
{
	size_t lo = b->t0[thr - 1], hi = lo + b->tn[thr - 1];
	if (lo == hi)
		return 0;
	/* The last slice starting at or before ts; failing it, the slices it nests in. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->evs[b->xs[mid]].ts <= ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == b->t0[thr - 1])
		return 0;
	/* Bounded: a pathological file (thousands of levels ended before ts) leaves the flow
	 * unbound rather than costing its depth per flow. */
	int steps = 0;
	for (uint32_t c = b->xs[lo - 1] + 1; c && steps < 4096; c = b->parent[c - 1], steps++)
		if (contains(&r->evs[c - 1], ts))
			return c;
	return 0;
}

/* The first slice of the thread starting at or after ts, 0 if none. */
static uint32_t next_slice(const struct jr *r, const struct build *b, uint32_t thr, int64_t ts)
{
	size_t lo = b->t0[thr - 1], hi = lo + b->tn[thr - 1];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->evs[b->xs[mid]].ts < ts)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < b->t0[thr - 1] + b->tn[thr - 1]; lo++)
		if (!r->evs[b->xs[lo]].dropped)
			return b->xs[lo] + 1;
	return 0;
}

/* Binds each flow event to a slice of its thread: the one written just before it when that
 * holds its time (cuptrace and Kineto write a slice's flow events right after it), else the
 * innermost slice open at its time ('s', and 'f' with "bp":"e"), or the next one to start
 * ('f' without). */
static void bind_flows(struct jr *r, const struct build *b)
{
	for (size_t i = 0; i < r->nevs; i++) {
		struct jr_ev *e = &r->evs[i];
		if ((e->ph != 's' && e->ph != 't' && e->ph != 'f') || e->dropped || e->bound)
			continue; /* v2 flows are bound to their slice as they are read */
		const struct jr_ev *prev = e->prev_x ? &r->evs[e->prev_x - 1] : NULL;
		if (e->bp_e && prev && prev->thr == e->thr && contains(prev, e->ts))
			e->bound = e->prev_x;
		else if (!e->bp_e)
			e->bound = next_slice(r, b, e->thr, e->ts);
		if (!e->bound)
			e->bound = enclosing(r, b, e->thr, e->ts);
		if (!e->bound)
			r->ck.flows_unbound++;
	}
}

/* Flow events of one id (cat, name, id), in time order, make arrows: 's' opens, 't' ends the
 * open one and opens the next, 'f' ends it. Each arrow gets its own flow id, listed on its two
 * slices (as flows_out and flows_in). */
static int pair_flows(struct jr *r)
{
	uint32_t *fl = NULL, (*seg)[2] = NULL;
	size_t nfl = 0, nseg = 0;
	int err = 0;

	for (size_t i = 0; i < r->nevs; i++) {
		char ph = r->evs[i].ph;
		nfl += (ph == 's' || ph == 't' || ph == 'f') && !r->evs[i].dropped;
	}
	if (!nfl)
		return 0;
	if (!(fl = malloc(nfl * sizeof(*fl))) || !(seg = malloc(nfl * sizeof(*seg)))) {
		err = -ENOMEM;
		goto out;
	}
	nfl = 0;
	for (size_t i = 0; i < r->nevs; i++) {
		char ph = r->evs[i].ph;
		if ((ph == 's' || ph == 't' || ph == 'f') && !r->evs[i].dropped)
			fl[nfl++] = (uint32_t)i;
	}
	sort_r = r;
	qsort(fl, nfl, sizeof(*fl), group_cmp);
	/* As Perfetto's flow tracker: an 'f' does not close its flow, so one launch feeding many
	 * kernels (a CUDA graph, MTIA) keeps every arrow; a second 's' of an open flow is
	 * ignored; a 't' moves the flow's source to its slice. */
	uint32_t src = 0, key = 0;
	int used = 0;
	for (size_t i = 0; i < nfl; i++) {
		const struct jr_ev *e = &r->evs[fl[i]];
		if (e->key != key) {
			r->ck.flows_dangling += src && !used;
			src = 0;
			key = e->key;
		}
		if (e->ph == 's') {
			if (!src) {
				src = e->bound;
				used = 0;
			} else {
				r->ck.flows_dangling++; /* a duplicate start */
			}
			continue;
		}
		if (src && e->bound && e->bound != src) {
			seg[nseg][0] = src;
			seg[nseg][1] = e->bound;
			r->evs[src - 1].nout++;
			r->evs[e->bound - 1].nin++;
			nseg++;
			used = 1;
			if (e->ph == 't')
				src = e->bound; /* its own arrow in: not dangling */
		} else {
			r->ck.flows_dangling++; /* an end with no start (or no slice) */
		}
	}
	r->ck.flows_dangling += src && !used;
	r->ck.flows = nseg;

	/* Each slice's flow ids: its outs, then its ins, from fl0. */
	size_t at = 0;
	for (size_t i = 0; i < r->nevs; i++) {
		struct jr_ev *e = &r->evs[i];
		if (e->ph == 'X' && (e->nout || e->nin)) {
			e->fl0 = (uint32_t)at;
			at += e->nout + e->nin;
			e->nout = e->nin = 0; /* refilled below */
		}
	}
	if (!(r->fids = malloc((at ? at : 1) * sizeof(*r->fids)))) {
		err = -ENOMEM;
		goto out;
	}
	r->nfids = at;
	for (size_t k = 0; k < nseg; k++) {
		struct jr_ev *o = &r->evs[seg[k][0] - 1];
		r->fids[o->fl0 + o->nout++] = k + 1;
	}
	for (size_t k = 0; k < nseg; k++) {
		struct jr_ev *in = &r->evs[seg[k][1] - 1];
		r->fids[in->fl0 + in->nout + in->nin++] = k + 1;
	}
out:
	free(fl);
	free(seg);
	return err;
}

static int slices(struct jr *r)
{
	struct build b;
	int err = 0;

	memset(&b, 0, sizeof(b));
	/* A slice belongs to a thread: one without (corrupt input) is skipped, never indexed. */
	for (size_t i = 0; i < r->nevs; i++)
		if (r->evs[i].ph == 'X' && !r->evs[i].dropped &&
		    (!r->evs[i].thr || r->evs[i].thr > r->nthr)) {
			r->evs[i].dropped = 1;
			r->ck.skipped++;
		}
	for (size_t i = 0; i < r->nevs; i++)
		b.nxs += r->evs[i].ph == 'X' && !r->evs[i].dropped;
	b.xs = malloc((b.nxs ? b.nxs : 1) * sizeof(*b.xs));
	b.t0 = calloc(r->nthr ? r->nthr : 1, sizeof(*b.t0));
	b.tn = calloc(r->nthr ? r->nthr : 1, sizeof(*b.tn));
	b.parent = calloc(r->nevs ? r->nevs : 1, sizeof(*b.parent));
	if (!b.xs || !b.t0 || !b.tn || !b.parent) {
		err = -ENOMEM;
		goto out;
	}
	b.nxs = 0;
	for (size_t i = 0; i < r->nevs; i++)
		if (r->evs[i].ph == 'X' && !r->evs[i].dropped)
			b.xs[b.nxs++] = (uint32_t)i;
	sort_r = r;
	qsort(b.xs, b.nxs, sizeof(*b.xs), group_cmp);
	if ((err = assign_lanes(r, &b)))
		goto out;
	bind_flows(r, &b);
	err = pair_flows(r);
out:
	for (int k = 0; k <= JR_MAX_LANES; k++)
		free(b.st[k].ev);
	free(b.xs);
	free(b.t0);
	free(b.tn);
	free(b.parent);
	return err ? err : r->err;
}

/* Instants and counter values onto their tracks; the tracks that are used, and their parents,
 * are declared. */
static void place(struct jr *r)
{
	uint32_t main = r->main_proc ? r->procs[r->main_proc - 1].track : 0;
	for (size_t i = 0; i < r->nevs; i++) {
		struct jr_ev *e = &r->evs[i];
		if (e->dropped)
			continue;
		switch (e->ph) {
		case 'i':
			e->track = e->scope == 't'   ? r->thr[e->thr - 1].track
			           : e->scope == 'p' ? r->procs[e->proc - 1].track
			                             : main;
			break;
		case 'C':
			e->track = r->ctrs[e->key - 1].track;
			break;
		case 'X':
			break; /* assign_lanes did */
		default:
			continue; /* flow events are not replayed */
		}
		if (!e->track) {
			e->dropped = 1;
			r->ck.skipped++;
			continue;
		}
		r->trk[e->track - 1].used = 1;
	}
	/* A used track's parents are used. */
	for (size_t i = 0; i < r->ntrk; i++)
		for (uint32_t p = r->trk[i].used ? r->trk[i].parent : 0; p;
		     p = r->trk[p - 1].parent)
			r->trk[p - 1].used = 1;
}

int jr_build(struct jr *r)
{
	int err;

	cuptrace_u64map_init(&r->pids);
	cuptrace_u64map_init(&r->by_pid);
	cuptrace_u64map_init(&r->by_sort);
	r->next_pid = JR_SYNTH_BASE;
	r->next_tid = JR_SYNTH_BASE;
	classify(r);
	if (!r->err)
		process_tracks(r);
	if (!r->err)
		thread_tracks(r);
	if (!r->err)
		counter_tracks(r);
	if (r->err)
		return r->err;
	rebase(r);
	if ((err = slices(r)))
		return err;
	place(r);
	return r->err;
}
