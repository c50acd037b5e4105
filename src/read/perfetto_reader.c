/* The Perfetto reader: decodes a trace file (plain, compressed_packets chunks, whole-file gzip)
 * the way trace_processor imports it, checks it against TP's rules, and replays it into a sink. */
#include "common/log.h"
#include "common/util.h"
#include "read/flow_table.h"
#include "read/perfetto_reader.h"
#include "read/perfetto_state.h"
#include "read/read_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How it works (see shared/reference/perfetto-format.md):
 *  1. tokenize, in file order, as TP does: sequences and their incremental state (interning,
 *     defaults, sequence clocks), track descriptors, clock snapshots; every TrackEvent becomes a
 *     record with its names resolved and its time on a builtin clock (perfetto_decode.c and
 *     perfetto_decode_payload.c);
 *  2. convert times to ns relative to the first global clock snapshot (the end of pf_decode),
 *     sort by (ts, file order);
 *  3. rebuild slices with one stack per track (END closes the innermost open slice) and flows
 *     (the ends of each flow id in time order, like TP's FlowTracker);
 *  4. replay: begin, tracks parents first, events in time order, meta.
 * The input is hostile: the decoder is hand written over the wire format, never recursive
 * beyond a fixed depth, and every allocation is bounded by the input's size. Strings are copied
 * into one string table; ids index it (0 = none). */

#define MAX_DEPTH 512 /* TP's kMaxDepth for slice stacks */

/* ---- replay ---- */

struct rslice {
	uint32_t ev; /* index of its BEGIN in evs (sorted) */
	int64_t dur; /* -1 while open */
	uint32_t out0, nout, in0, nin;
};

static uint64_t snap_value(const struct reader *r, uint32_t clock)
{
	for (size_t i = 0; i < r->nsnap; i++)
		if (r->snap_id[i] == clock)
			return r->snap_val[i];
	return 0;
}

/* BOOTTIME's reading at relative 0 for the trace info: trace_processor reads the snapshot's
 * uint64 as int64, and a negative reading (a merge of old wrote some) is no reading at all, so
 * "not known" (event.h), not a value that a writer would carry on and lose events with. REALTIME
 * goes as the file says (merge --ranks places files without BOOTTIME by its differences). */
static int64_t info_boottime(const struct reader *r)
{
	uint64_t v = snap_value(r, CLOCK_BOOTTIME_ID);
	return v <= INT64_MAX ? (int64_t)v : 0;
}

/* A sort key: the event's time and its index in file order (evs is filled in file order). */
struct skey {
	int64_t ts;
	uint32_t i;
};

/* Merges the sorted runs a[lo..mid) and a[mid..hi) into b[lo..hi); ties keep file order. */
static void merge_runs(const struct skey *a, struct skey *b, size_t lo, size_t mid, size_t hi)
{
	size_t i = lo, j = mid, k = lo;
	while (i < mid && j < hi)
		b[k++] = a[j].ts < a[i].ts ? a[j++] : a[i++];
	while (i < mid)
		b[k++] = a[i++];
	while (j < hi)
		b[k++] = a[j++];
}

/* Sorts evs by (ts, file order). Events come in per-sequence chunks, each nearly in time order,
 * so this is a natural merge sort over the runs already there, on 16-byte keys; the events move
 * once, in place, by following the permutation's cycles. A generic qsort on the 80-byte records
 * took a fifth of the time of `stats` on a 1 M-kernel trace and a second copy of evs. */
static int sort_events(struct reader *r)
{
	size_t n = r->nevs, i;
	for (i = 1; i < n && r->evs[i - 1].ts <= r->evs[i].ts; i++)
		;
	if (i >= n)
		return 0; /* already in order */
	if (n > UINT32_MAX)
		return r->err = -ENOMEM; /* cannot happen: events are bounded by the input */
	struct skey *a = malloc(n * sizeof(*a)), *b = malloc(n * sizeof(*b));
	if (!a || !b) {
		free(a);
		free(b);
		return r->err = -ENOMEM;
	}
	for (i = 0; i < n; i++)
		a[i] = (struct skey){r->evs[i].ts, (uint32_t)i};
	for (;;) {
		size_t lo = 0, runs = 0;
		while (lo < n) {
			size_t mid = lo + 1, hi;
			while (mid < n && a[mid - 1].ts <= a[mid].ts)
				mid++;
			hi = mid < n ? mid + 1 : n;
			while (hi < n && a[hi - 1].ts <= a[hi].ts)
				hi++;
			merge_runs(a, b, lo, mid, hi);
			runs++;
			lo = hi;
		}
		struct skey *t = a;
		a = b;
		b = t;
		if (runs == 1)
			break;
	}
	/* evs[k] = old evs[a[k].i]; a[k].i = k marks a placed slot. */
	for (size_t k = 0; k < n; k++) {
		if (a[k].i == k)
			continue;
		struct rev tmp = r->evs[k];
		size_t j = k;
		while (a[j].i != k) {
			size_t src = a[j].i;
			r->evs[j] = r->evs[src];
			a[j].i = (uint32_t)j;
			j = src;
		}
		r->evs[j] = tmp;
		a[j].i = (uint32_t)j;
	}
	free(a);
	free(b);
	return 0;
}

/* A flow between two slices, in TP's terms: out is the earlier one. */
struct rflow {
	uint32_t out, in; /* slice indices */
	uint64_t id;
};

struct replay {
	struct rslice *sl;
	size_t nsl, slcap;
	struct rflow *fl;
	size_t nfl, flcap;
	uint64_t *fids; /* per-slice flow lists */
	uint32_t **stacks;
	size_t *depth, *stcap, nstacks, stackscap;
	struct cuptrace_u64map stack_of; /* track -> index + 1 */
	struct flow_table active;        /* flow id -> slice index + 1 | had_row << 63 */
};

static int flow_touch(struct reader *r, struct replay *p, uint64_t id, uint32_t slice, int term)
{
	int created;
	uint64_t *v = flow_table_put(&p->active, id, &created);
	if (!v)
		return r->err = -ENOMEM;
	if (created) {
		if (term) {
			/* TP ignores a terminating id that is not active. */
			flow_table_del(&p->active, v);
			return 0;
		}
		*v = slice + 1;
		return 0;
	}
	uint32_t prev = (uint32_t)((*v & ~(1ull << 63)) - 1);
	void *a = cuptrace_grow(p->fl, &p->flcap, p->nfl + 1, sizeof(*p->fl));
	if (!a)
		return r->err = -ENOMEM;
	p->fl = a;
	/* Rows go from the earlier slice to the later; at equal times, in processing order. */
	int64_t tp = r->evs[p->sl[prev].ev].ts, tn = r->evs[p->sl[slice].ev].ts;
	p->fl[p->nfl++] =
	    tn < tp ? (struct rflow){slice, prev, id} : (struct rflow){prev, slice, id};
	if (term)
		flow_table_del(&p->active, v);
	else
		*v = (slice + 1) | (1ull << 63);
	return 0;
}

static int event_flows(struct reader *r, struct replay *p, const struct rev *e, uint32_t slice)
{
	for (uint32_t i = 0; i < e->nflows + e->nterm && !r->err; i++)
		flow_touch(r, p, r->flows[e->flow0 + i], slice, i >= e->nflows);
	return r->err;
}

/* Finds or makes the stack of a track; 0 or -ENOMEM. */
static int stack_for(struct reader *r, struct replay *p, uint64_t track, size_t *si)
{
	int created;
	uint64_t *v = cuptrace_u64map_put(&p->stack_of, track, &created);
	if (!v)
		return r->err = -ENOMEM;
	if (created) {
		size_t cap = p->stackscap;
		uint32_t **s = cuptrace_grow(p->stacks, &cap, p->nstacks + 1, sizeof(*s));
		if (s)
			p->stacks = s;
		size_t c2 = p->stackscap;
		size_t *d = s ? cuptrace_grow(p->depth, &c2, p->nstacks + 1, sizeof(*d)) : NULL;
		if (d)
			p->depth = d;
		size_t c3 = p->stackscap;
		size_t *c = d ? cuptrace_grow(p->stcap, &c3, p->nstacks + 1, sizeof(*c)) : NULL;
		if (!c) {
			cuptrace_u64map_del(&p->stack_of, track);
			return r->err = -ENOMEM;
		}
		p->stcap = c;
		p->stackscap = cap;
		p->stacks[p->nstacks] = NULL;
		p->depth[p->nstacks] = p->stcap[p->nstacks] = 0;
		*v = ++p->nstacks;
	}
	*si = *v - 1;
	return 0;
}

/* Pass 1, over the sorted events: slices from BEGIN/END with a stack per track, and flows. */
static int build_slices(struct reader *r, struct replay *p)
{
	for (size_t i = 0; i < r->nevs && !r->err; i++) {
		struct rev *e = &r->evs[i];
		size_t si;
		if (e->dropped || (e->type != TE_BEGIN && e->type != TE_END))
			continue;
		if (stack_for(r, p, e->track, &si))
			break;
		size_t *d = &p->depth[si];
		if (e->type == TE_BEGIN) {
			if (*d >= MAX_DEPTH) {
				r->ck.depth_exceeded++;
				continue;
			}
			uint32_t *st =
			    cuptrace_grow(p->stacks[si], &p->stcap[si], *d + 1, sizeof(*st));
			struct rslice *s =
			    st ? cuptrace_grow(p->sl, &p->slcap, p->nsl + 1, sizeof(*s)) : NULL;
			if (st)
				p->stacks[si] = st;
			if (!s) {
				r->err = -ENOMEM;
				break;
			}
			p->sl = s;
			p->sl[p->nsl] = (struct rslice){.ev = (uint32_t)i, .dur = -1};
			st[(*d)++] = (uint32_t)p->nsl;
			e->slice = (uint32_t)++p->nsl;
			event_flows(r, p, e, (uint32_t)p->nsl - 1);
			continue;
		}
		if (!*d) {
			r->ck.end_without_begin++;
			continue;
		}
		/* END closes the innermost open slice whose name and category match (an unnamed END
		 * matches any). Matching one further down means misnesting: like TP, the slices
		 * above it end there too, and it counts; matching none, the END is ignored. */
		size_t k = *d;
		while (k) {
			const struct rev *b = &r->evs[p->sl[p->stacks[si][k - 1]].ev];
			if ((!e->name || e->name == b->name) && (!e->cat || e->cat == b->cat))
				break;
			k--;
		}
		if (k != *d)
			r->ck.partial_overlaps++;
		if (!k)
			continue;
		uint32_t match = p->stacks[si][k - 1];
		while (*d >= k) {
			uint32_t top = p->stacks[si][--(*d)];
			const struct rev *b = &r->evs[p->sl[top].ev];
			p->sl[top].dur = (int64_t)((uint64_t)e->ts - (uint64_t)b->ts);
		}
		event_flows(r, p, e, match);
	}
	for (size_t i = 0; i < p->nstacks; i++)
		r->ck.unterminated_slices += p->depth[i];
	return r->err;
}

static int slice_replayed(struct reader *r, const struct replay *p, uint32_t s)
{
	const struct rev *e = &r->evs[p->sl[s].ev];
	const struct rtrack *t = track_of(r, e->track);
	if (p->sl[s].dur < 0 || e->ts < 0)
		return 0;
	return t && t->valid && t->kind != CUPTRACE_TRACK_COUNTER;
}

/* Per-slice flow lists, from the rows both of whose slices are replayed. */
static int assign_flows(struct reader *r, struct replay *p)
{
	size_t total = 0;

	for (size_t i = 0; i < p->active.cap; i++)
		if (p->active.s[i].v && !(p->active.s[i].v >> 63))
			r->ck.flows_dangling++;
	for (size_t i = 0; i < p->nfl; i++) {
		if (!slice_replayed(r, p, p->fl[i].out) || !slice_replayed(r, p, p->fl[i].in)) {
			p->fl[i].id = 0, p->fl[i].out = p->fl[i].in = UINT32_MAX;
			continue;
		}
		p->sl[p->fl[i].out].nout++;
		p->sl[p->fl[i].in].nin++;
		total += 2;
	}
	if (total && !(p->fids = malloc(total * sizeof(uint64_t))))
		return r->err = -ENOMEM;
	size_t off = 0;
	for (size_t i = 0; i < p->nsl; i++) {
		p->sl[i].out0 = (uint32_t)off;
		off += p->sl[i].nout;
		p->sl[i].in0 = (uint32_t)off;
		off += p->sl[i].nin;
		p->sl[i].nout = p->sl[i].nin = 0;
	}
	for (size_t i = 0; i < p->nfl; i++) {
		struct rflow *f = &p->fl[i];
		if (f->out == UINT32_MAX)
			continue;
		p->fids[p->sl[f->out].out0 + p->sl[f->out].nout++] = f->id;
		p->fids[p->sl[f->in].in0 + p->sl[f->in].nin++] = f->id;
	}
	return 0;
}

/* Kinds, parents and lanes, the way the writer maps them (and sensibly for other traces). */
static void resolve_tracks(struct reader *r)
{
	for (size_t i = 0; i < r->ntrk; i++) {
		struct rtrack *t = &r->trk[i], *pt = t->has_parent ? track_of(r, t->parent) : NULL;
		if (pt && pt != t)
			pt->has_children = 1;
	}
	for (size_t i = 0; i < r->ntrk; i++) {
		struct rtrack *t = &r->trk[i];
		t->valid = 1;
		if (t->has_thread) {
			t->kind = CUPTRACE_TRACK_THREAD;
			t->valid = t->has_pid && t->has_tid; /* TP drops it otherwise */
		} else if (t->has_process) {
			t->kind = CUPTRACE_TRACK_PROCESS;
			t->valid = t->has_pid;
		} else if (t->has_counter) {
			t->kind = CUPTRACE_TRACK_COUNTER;
		} else if (t->has_order || t->has_children) {
			t->kind = CUPTRACE_TRACK_GROUP;
		} else {
			t->kind = CUPTRACE_TRACK_SLICES;
		}
	}
	for (size_t i = 0; i < r->ntrk; i++) {
		struct rtrack *t = &r->trk[i], *pt;
		t->rparent = 0;
		if (!t->valid || t->kind == CUPTRACE_TRACK_PROCESS)
			continue;
		pt = t->has_parent ? track_of(r, t->parent) : NULL;
		if (t->kind == CUPTRACE_TRACK_THREAD &&
		    (!pt || pt->kind != CUPTRACE_TRACK_PROCESS)) {
			uint64_t *v = cuptrace_u64map_get(&r->pid_of, (uint64_t)(uint32_t)t->pid);
			pt = v ? track_of(r, *v) : NULL;
		}
		if (pt && pt != t && pt->valid && pt->kind != CUPTRACE_TRACK_COUNTER)
			t->rparent = pt->uuid;
	}
	/* Groups, slice and counter tracks carry no pid on the wire: they belong to the process
	 * of their nearest process or thread ancestor (bounded walk: parents may form a cycle). */
	for (size_t i = 0; i < r->ntrk; i++) {
		struct rtrack *t = &r->trk[i], *a = t;
		if (!t->valid || t->kind == CUPTRACE_TRACK_PROCESS ||
		    t->kind == CUPTRACE_TRACK_THREAD)
			continue;
		for (int hops = 0; a && hops < 64; hops++) {
			a = a->rparent ? track_of(r, a->rparent) : NULL;
			if (a && (a->kind == CUPTRACE_TRACK_PROCESS ||
			          a->kind == CUPTRACE_TRACK_THREAD)) {
				t->pid = a->pid;
				break;
			}
		}
	}
	/* Same-name slice tracks under one parent are lanes of the first (the writer names lanes
	 * like their main track; the UI merges them). Quadratic only in same-parent siblings. */
	struct cuptrace_u64map seen;
	cuptrace_u64map_init(&seen);
	for (size_t i = 0; i < r->ntrk; i++) {
		struct rtrack *t = &r->trk[i];
		if (!t->valid || t->kind != CUPTRACE_TRACK_SLICES || !t->name)
			continue;
		uint64_t key = cuptrace_hash64(t->rparent ^ cuptrace_hash64(t->name));
		int created;
		uint64_t *v = cuptrace_u64map_put(&seen, key, &created);
		if (!v) {
			r->err = -ENOMEM;
			break;
		}
		*v += 1;
		t->lane = (uint32_t)(*v - 1);
	}
	cuptrace_u64map_free(&seen);
}

static int emit_track(struct reader *r, struct cuptrace_sink *sink, struct rtrack *t)
{
	const char **cmd = NULL;
	int err;

	if (t->ncmd && !(cmd = calloc(t->ncmd, sizeof(*cmd))))
		return -ENOMEM;
	for (uint32_t i = 0; i < t->ncmd; i++)
		cmd[i] = str(r, r->cmds[t->cmd0 + i]);
	const char *name = str(r, t->name);
	struct cuptrace_track d = {
	    .uuid = t->uuid,
	    .kind = t->kind,
	    .parent_uuid = t->rparent,
	    .pid = t->pid,
	    .tid = t->tid,
	    .name = name ? name : "",
	    .description = str(r, t->desc),
	    .sort_rank = t->rank,
	    .lane = t->lane,
	    .unit = t->kind == CUPTRACE_TRACK_COUNTER && t->unit >= 0 && t->unit <= 3
	                ? (enum cuptrace_counter_unit)t->unit
	                : CUPTRACE_UNIT_NONE,
	    .cmdline = cmd,
	    .cmdline_len = t->ncmd,
	};
	err = sink->ops->track(sink, &d);
	free(cmd);
	t->emitted = 1;
	return err;
}

/* Parents first, iteratively (a chain may be as long as the file allows); a cycle is cut. */
static int emit_tracks(struct reader *r, struct cuptrace_sink *sink)
{
	struct rtrack **chain = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < r->ntrk && !err; i++) {
		size_t n = 0;
		struct rtrack *t = &r->trk[i];
		int mark = (int)(i + 1);
		while (t && t->valid && !t->emitted && t->mark != mark) {
			struct rtrack **c = cuptrace_grow(chain, &cap, n + 1, sizeof(*chain));
			if (!c) {
				err = -ENOMEM;
				break;
			}
			chain = c;
			t->mark = mark;
			chain[n++] = t;
			t = t->rparent ? track_of(r, t->rparent) : NULL;
		}
		if (t && t->mark == mark && !t->emitted && n)
			chain[n - 1]->rparent = 0; /* its parent closes a cycle */
		while (n && !err)
			err = emit_track(r, sink, chain[--n]);
	}
	free(chain);
	return err;
}

/* The event's args into *buf; *nargs their number, *stack its call stack (0 if none). */
static struct cuptrace_arg *make_args(struct reader *r, const struct rev *e,
                                      struct cuptrace_arg **buf, size_t *cap, size_t *nargs,
                                      uint32_t *stack)
{
	struct cuptrace_arg *a = cuptrace_grow(*buf, cap, e->nargs ? e->nargs : 1, sizeof(**buf));
	if (!a)
		return NULL;
	*buf = a;
	*stack = 0;
	size_t i = 0;
	for (uint32_t j = 0; j < e->nargs; j++) {
		const struct rarg *s = &r->args[e->arg0 + j];
		if (s->type == RARG_STACK) {
			*stack = (uint32_t)s->v.u;
			continue;
		}
		const char *k = str(r, s->key);
		a[i] = (struct cuptrace_arg){.key = k ? k : "", .type = s->type};
		switch (s->type) {
		case CUPTRACE_ARG_STRING: {
			const char *v = str(r, s->v.s);
			a[i].v.s = v ? v : "";
			break;
		}
		case CUPTRACE_ARG_BOOL:
			a[i].v.b = (int)s->v.i;
			break;
		case CUPTRACE_ARG_DOUBLE:
			a[i].v.d = s->v.d;
			break;
		default:
			a[i].v.u = s->v.u;
			break;
		}
		i++;
	}
	*nargs = i;
	return a;
}

static int is_meta_instant(const struct reader *r, const struct rev *e)
{
	const char *c = str(r, e->cat), *n = str(r, e->name);
	return c && n && !strcmp(c, CUPTRACE_META_CATEGORY) &&
	       (!strcmp(n, CUPTRACE_META_INFO) || !strcmp(n, CUPTRACE_META_SUMMARY));
}

/* Replays into sink, or only finishes the counts if sink is NULL. */
static int replay(struct reader *r, struct replay *p, struct cuptrace_sink *sink)
{
	struct cuptrace_arg *args = NULL;
	struct cuptrace_meta *meta = NULL;
	size_t argcap = 0;
	int err = 0;

	/* begin(): the trace's identity from its metadata. */
	const struct rtrack *proc = NULL;
	for (size_t i = 0; i < r->ntrk && !proc; i++)
		if (r->trk[i].valid && r->trk[i].kind == CUPTRACE_TRACK_PROCESS)
			proc = &r->trk[i];
	if ((r->nmeta0 || r->nmeta) &&
	    !(meta = calloc(r->nmeta0 > r->nmeta ? r->nmeta0 : r->nmeta, sizeof(*meta))))
		return -ENOMEM;
	for (size_t i = 0; i < r->nmeta0; i++)
		meta[i] = (struct cuptrace_meta){str(r, r->meta0[i].key), r->meta0[i].is_int,
		                                 r->meta0[i].i, str(r, r->meta0[i].s)};
	struct cuptrace_trace_info info = {
	    .pid = proc ? proc->pid : 0,
	    .process_name = proc ? str(r, proc->name) : NULL,
	    .hostname = str(r, r->hostname),
	    .start_realtime_ns = (int64_t)snap_value(r, CLOCK_REALTIME_ID),
	    .start_boottime_ns = info_boottime(r),
	    .trace_uuid_hi = r->uuid_hi,
	    .trace_uuid_lo = r->uuid_lo,
	    .meta = meta,
	    .nmeta = r->nmeta0,
	};
	if (sink && ((err = sink->ops->begin(sink, &info)) || (err = emit_tracks(r, sink))))
		goto out;

	for (size_t i = 0; i < r->nevs && !err; i++) {
		const struct rev *e = &r->evs[i];
		const struct rtrack *t;
		if (e->dropped || e->type == TE_END || (e->type == TE_BEGIN && !e->slice))
			continue;
		if (e->type == TE_BEGIN && p->sl[e->slice - 1].dur < 0)
			continue; /* never ended: counted in unterminated_slices */
		if (e->ts < 0) {
			r->ck.before_snapshot++;
			continue;
		}
		t = track_of(r, e->track);
		if (!t || !t->valid ||
		    (t->kind == CUPTRACE_TRACK_COUNTER) != (e->type == TE_COUNTER)) {
			r->ck.event_on_unknown_track++;
			continue;
		}
		if (e->type == REV_SAMPLE) {
			struct cuptrace_sample sm = {
			    .track_uuid = e->track,
			    .ts = e->ts,
			    .pid = (int32_t)((uint64_t)e->val.i >> 32),
			    .tid = (int32_t)(uint32_t)e->val.i,
			    .stack_id = e->slice,
			};
			if (sink && sink->ops->sample &&
			    !(err = cuptrace_stacktab_send(&r->stk, e->slice, sink, 0)))
				err = sink->ops->sample(sink, &sm);
			continue;
		}
		if (e->type == TE_COUNTER) {
			struct cuptrace_counter c = {
			    .track_uuid = e->track, .ts = e->ts, .is_double = e->is_double};
			if (e->is_double)
				c.d = e->val.d;
			else
				c.i = e->val.i;
			err = sink ? sink->ops->counter(sink, &c) : 0;
			continue;
		}
		if (e->type == TE_INSTANT && is_meta_instant(r, e))
			continue;
		size_t nargs;
		uint32_t stack;
		if (!make_args(r, e, &args, &argcap, &nargs, &stack)) {
			err = -ENOMEM;
			break;
		}
		const char *name = str(r, e->name);
		if (e->type == TE_INSTANT) {
			struct cuptrace_instant in = {
			    .track_uuid = e->track,
			    .ts = e->ts,
			    .name = name ? name : "",
			    .category = str(r, e->cat),
			    .correlation_id = e->val.corr,
			    .args = args,
			    .nargs = nargs,
			};
			err = sink ? sink->ops->instant(sink, &in) : 0;
			continue;
		}
		const struct rslice *s = &p->sl[e->slice - 1];
		struct cuptrace_slice sl = {
		    .track_uuid = e->track,
		    .ts = e->ts,
		    .dur = s->dur,
		    .name = name ? name : "",
		    .category = str(r, e->cat),
		    .correlation_id = e->val.corr,
		    .args = args,
		    .nargs = nargs,
		    .stack_id = stack,
		    .flows_out = s->nout ? p->fids + s->out0 : NULL,
		    .nflows_out = s->nout,
		    .flows_in = s->nin ? p->fids + s->in0 : NULL,
		    .nflows_in = s->nin,
		};
		if (stack && sink && (err = cuptrace_stacktab_send(&r->stk, stack, sink, 0)))
			break;
		err = sink ? sink->ops->slice(sink, &sl) : 0;
	}
	if (err)
		goto out;

	/* meta(): what changed or came after the first attributes. */
	size_t n = 0;
	for (size_t i = 0; i < r->nmeta; i++) {
		const struct rmeta *m = &r->meta[i];
		int same = 0;
		for (size_t j = 0; j < r->nmeta0 && !same; j++) {
			const struct rmeta *o = &r->meta0[j];
			same = o->key == m->key && o->is_int == m->is_int &&
			       (m->is_int ? o->i == m->i : o->s == m->s);
		}
		if (!same)
			meta[n++] =
			    (struct cuptrace_meta){str(r, m->key), m->is_int, m->i, str(r, m->s)};
	}
	if (n && sink)
		err = sink->ops->meta(sink, meta, n);
out:
	free(args);
	free(meta);
	return err;
}

/* The timeline's shape as trace_processor imports it (read_check.h): which descriptors hold
 * events, on themselves or below, by their declared parents (TP nests by those). */
static void count_layout(struct reader *r)
{
	for (size_t i = 0; i < r->nevs; i++) {
		const struct rev *e = &r->evs[i];
		struct rtrack *t = e->dropped || e->type == TE_END ? NULL : track_of(r, e->track);
		if (!t)
			continue;
		r->ck.process_track_events += t->has_process && !t->has_thread;
		if (e->type == TE_INSTANT && is_meta_instant(r, e)) {
			r->ck.meta_instants++;
			r->ck.meta_track = t->uuid;
		}
		if (t->used == 1)
			continue;
		t->used = 1;
		struct rtrack *a = t;
		for (int hops = 0; hops < 64 && a->has_parent; hops++) {
			if (!(a = track_of(r, a->parent)) || a->used)
				break;
			a->used = 2;
		}
	}
	for (size_t i = 0; i < r->ntrk; i++)
		r->ck.tracks_without_events +=
		    !r->trk[i].used && !r->trk[i].has_process && r->trk[i].uuid;
}

static void replay_free(struct replay *p)
{
	for (size_t i = 0; i < p->nstacks; i++)
		free(p->stacks[i]);
	free(p->stacks);
	free(p->depth);
	free(p->stcap);
	free(p->sl);
	free(p->fl);
	free(p->fids);
	cuptrace_u64map_free(&p->stack_of);
	flow_table_free(&p->active);
}

int cuptrace_perfetto_read_mem(const void *data, size_t len, struct cuptrace_sink *sink,
                               struct cuptrace_pf_check *check)
{
	struct reader r;
	struct replay p;
	int err;

	memset(&p, 0, sizeof(p));
	if ((err = pf_decode(&r, data, len)))
		goto out;
	if ((err = sort_events(&r)))
		goto out;
	resolve_tracks(&r);
	count_layout(&r);
	if ((err = build_slices(&r, &p)) || (err = assign_flows(&r, &p)))
		goto out;
	/* What replay no longer needs goes before the sink starts to fill, to lower the peak. */
	free(r.flows);
	r.flows = NULL;
	r.nflows = r.flowcap = 0;
	free(p.fl);
	p.fl = NULL;
	p.nfl = p.flcap = 0;
	flow_table_free(&p.active);
	err = replay(&r, &p, sink); /* with no sink, only counts */
	/* Said, not only counted: a reader of the trace would not see these either. */
	if (!err && r.ck.negative_timestamps)
		cuptrace_warn("%llu events at a negative time on Perfetto's trace clock: "
		              "ui.perfetto.dev drops them (track_event_invalid_timestamp), and so "
		              "does this reader",
		              (unsigned long long)r.ck.negative_timestamps);
	if (!err && r.ck.before_snapshot)
		cuptrace_warn(
		    "%llu events before the trace's clock snapshot, where its time starts: "
		    "not read",
		    (unsigned long long)r.ck.before_snapshot);
out:
	if (check)
		*check = r.ck;
	replay_free(&p);
	pf_reader_free(&r);
	return err;
}

int cuptrace_perfetto_read(const char *path, struct cuptrace_sink *sink,
                           struct cuptrace_pf_check *check)
{
	uint8_t *buf = NULL;
	size_t len;
	struct cuptrace_pf_check ck = {0};
	int err = cuptrace_read_file_all(path, &buf, &len);
	if (!err && (err = cuptrace_perfetto_read_mem(buf, len, sink, &ck)) == -EINVAL)
		cuptrace_err("%s: cannot read this file as a Perfetto trace", path);
	char why[512];
	if (!err && cuptrace_pf_damage_text(&ck, why, sizeof(why)))
		cuptrace_warn("%s: %s", path, why);
	if (check)
		*check = ck;
	free(buf);
	return err;
}

int cuptrace_pf_damage_text(const struct cuptrace_pf_check *ck, char *buf, size_t n)
{
	unsigned long long at = ck->damage_at, size = ck->file_bytes, lost = ck->truncated_bytes,
	                   bad = ck->corrupt, packets = ck->packets;
	buf[0] = 0;
	if (!bad && !lost)
		return 0;
	if (ck->damage_in_gzip)
		snprintf(buf, n,
		         "the gzip stream is cut or corrupt after %llu bytes of trace (inflated): "
		         "%llu packets before that were read, nothing after",
		         at, packets);
	else if (!bad)
		snprintf(buf, n,
		         "cut at byte %llu of %llu: the last %llu bytes (an incomplete packet or "
		         "chunk) could not be read; the %llu packets before it were",
		         at, size, lost, packets);
	else {
		char tail[64] = "";
		if (lost)
			snprintf(tail, sizeof(tail), ", nor the last %llu bytes", lost);
		snprintf(buf, n,
		         "corrupt at byte %llu of %llu: %llu packet%s or chunk%s could not be "
		         "read%s; the %llu packets %s were",
		         at, size, bad, bad == 1 ? "" : "s", bad == 1 ? "" : "s", tail, packets,
		         lost       ? "before the damage"
		         : bad == 1 ? "around it"
		                    : "around them");
	}
	return 1;
}
