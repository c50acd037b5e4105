/* The Perfetto reader: decodes a trace file (plain, compressed_packets chunks, whole-file gzip)
 * the way trace_processor imports it, checks it against TP's rules, and replays it into a sink. */
#include "format/formats.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* How it works (see shared/reference/perfetto-format.md):
 *  1. tokenize, in file order, as TP does: sequences and their incremental state (interning,
 *     defaults, sequence clocks), track descriptors, clock snapshots; every TrackEvent becomes a
 *     record with its names resolved and its time on a builtin clock;
 *  2. convert times to ns relative to the first global clock snapshot, sort by (ts, file order);
 *  3. rebuild slices with one stack per track (END closes the innermost open slice) and flows
 *     (the ends of each flow id in time order, like TP's FlowTracker);
 *  4. replay: begin, tracks parents first, events in time order, meta.
 * The input is hostile: the decoder is hand written over the wire format, never recursive
 * beyond a fixed depth, and every allocation is bounded by the input's size. Strings are copied
 * into one string table; ids index it (0 = none). */

#define CLOCK_REALTIME_ID 1
#define CLOCK_BOOTTIME_ID 6
#define SEQ_CLEARED       1
#define SEQ_NEEDS         2
#define MAX_DEPTH         512 /* TP's kMaxDepth for slice stacks */
#define MAX_ANN_DEPTH     8   /* nested debug annotations flattened this deep */
#define MAX_SNAP_CLOCKS   64
#define MAX_PACKET        (1u << 30)

#define META_CAT     "cuptrace"
#define META_INFO    "cuptrace: trace info"
#define META_SUMMARY "cuptrace: summary"

enum { TE_BEGIN = 1, TE_END = 2, TE_INSTANT = 3, TE_COUNTER = 4 };
enum { IT_NAME, IT_CAT, IT_KEY, IT_VAL, IT_N };

/* ---- wire format ---- */

struct pb {
	const uint8_t *p, *end;
};

struct pbf {
	uint32_t id;
	int wt;
	uint64_t v;       /* varint, fixed64, fixed32 */
	const uint8_t *b; /* LEN */
	size_t n;
};

/* 0 ok, 1 need more bytes, -1 malformed (more than 10 bytes). */
static int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		if (p == end)
			return 1;
		uint8_t b = *p++;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			*pp = p;
			return 0;
		}
	}
	return -1;
}

/* 1 a field, 0 the end, -1 malformed or cut (inside a message both are corruption). */
static int pb_next(struct pb *m, struct pbf *f)
{
	uint64_t tag, v;

	if (m->p == m->end)
		return 0;
	if (get_varint(&m->p, m->end, &tag) || tag >> 32 || !(tag >> 3))
		return -1;
	f->id = (uint32_t)(tag >> 3);
	f->wt = (int)(tag & 7);
	switch (f->wt) {
	case 0:
		return get_varint(&m->p, m->end, &f->v) ? -1 : 1;
	case 1:
		if (m->end - m->p < 8)
			return -1;
		memcpy(&v, m->p, 8); /* little-endian hosts only, like the rest of cuptrace */
		f->v = v;
		m->p += 8;
		return 1;
	case 5: {
		uint32_t w;
		if (m->end - m->p < 4)
			return -1;
		memcpy(&w, m->p, 4);
		f->v = w;
		m->p += 4;
		return 1;
	}
	case 2:
		if (get_varint(&m->p, m->end, &v) || v > (uint64_t)(m->end - m->p))
			return -1;
		f->b = m->p;
		f->n = (size_t)v;
		m->p += v;
		return 1;
	default:
		return -1; /* groups and reserved wire types: protozero does not take them either */
	}
}

static struct pb pb_of(const uint8_t *b, size_t n)
{
	return (struct pb){b, b + n};
}

/* ---- reader state ---- */

struct rclock { /* a sequence-scoped clock (64..127), from its latest snapshot */
	uint32_t id;
	int incremental;
	uint64_t snap, last, mult;
	uint32_t ref_clock; /* builtin clock the snapshot pairs it with; 0 if none */
	uint64_t ref_val;
};

struct rseq {
	uint32_t id;
	int valid;         /* incremental state valid */
	int first_cleared; /* its first packet cleared the state */
	int reported;      /* seq_first_not_cleared counted */
	int has_def_clock, has_def_track;
	uint32_t def_clock;
	uint64_t def_track;
	struct cuptrace_u64map tab[IT_N]; /* iid -> string id */
	struct rclock *clocks;
	size_t nclocks;
};

struct rarg {
	uint32_t key;
	uint8_t type;
	union {
		int64_t i;
		uint64_t u;
		double d;
		uint32_t s;
	} v;
};

struct rev {
	int64_t ts;  /* raw value on clock dom, then ns relative to the trace start */
	uint64_t fo; /* file order */
	uint64_t track;
	uint64_t corr;
	uint32_t dom; /* builtin clock of the raw ts; 0 = the trace clock */
	uint8_t type;
	uint8_t is_double;
	uint8_t dropped; /* clock error or invalid time: not replayed */
	uint32_t name, cat;
	uint32_t arg0, nargs;
	uint32_t flow0, nflows, nterm; /* flow_ids then terminating ids, in flows[] */
	uint32_t slice;                /* BEGIN: its slice index + 1, 0 if none */
	union {
		int64_t i;
		double d;
	} val;
};

struct rslice {
	uint32_t ev; /* index of its BEGIN in evs (sorted) */
	int64_t dur; /* -1 while open */
	uint32_t out0, nout, in0, nin;
};

struct rtrack {
	uint64_t uuid, parent;
	int has_process, has_thread, has_counter, has_order, has_pid, has_tid, has_parent;
	int32_t pid, rank;
	int64_t tid;
	int unit;
	uint32_t name, desc;
	uint32_t cmd0, ncmd; /* string ids in cmds[] */
	/* resolved at replay */
	int valid, kind, emitted, mark, has_children;
	uint64_t rparent;
	uint32_t lane;
};

struct rmeta {
	uint32_t key, s;
	int is_int;
	int64_t i;
};

struct reader {
	struct cuptrace_pf_check ck;
	int err; /* first hard error (ENOMEM), sticky */
	struct cuptrace_strtab strs;
	struct rseq *seqs;
	size_t nseqs, seqcap;
	struct cuptrace_u64map seq_of; /* seq id -> index + 1 */
	struct rev *evs;
	size_t nevs, evcap;
	struct rarg *args;
	size_t nargs, argcap;
	uint64_t *flows;
	size_t nflows, flowcap;
	struct rtrack *trk;
	size_t ntrk, trkcap;
	struct cuptrace_u64map trk_of; /* uuid -> index + 1 */
	struct cuptrace_u64map pid_of; /* pid -> process uuid */
	struct cuptrace_u64map tid_of; /* hash(pid, tid) -> thread uuid */
	uint32_t *cmds;
	size_t ncmds, cmdcap;
	/* the first global clock snapshot */
	int have_snap;
	uint32_t snap_primary;
	uint32_t snap_id[MAX_SNAP_CLOCKS];
	uint64_t snap_val[MAX_SNAP_CLOCKS];
	size_t nsnap;
	uint32_t hostname;
	uint64_t uuid_hi, uuid_lo;
	struct rmeta *meta0, *meta; /* the first TraceAttributes; every key, last value */
	size_t nmeta0, nmeta, meta0cap, metacap;
	int have_meta0;
	uint8_t *zbuf; /* inflated chunk */
	size_t zcap;
	uint64_t fo;
};


/* Returns arr grown to hold n elements, or arr itself with r->err set. */
static void *grow_r(struct reader *r, void *arr, size_t *cap, size_t n, size_t size)
{
	void *p = cuptrace_grow(arr, cap, n, size);
	if (!p)
		r->err = -ENOMEM;
	return p ? p : arr;
}

/* Appends one element to r->arr and returns it, or NULL once r->err is set. */
#define PUSH(r, arr, n, cap)                                                                       \
	(((r)->arr = grow_r(r, (r)->arr, &(r)->cap, (r)->n + 1, sizeof(*(r)->arr))), !(r)->err)    \
	    ? &(r)->arr[(r)->n++]                                                                  \
	    : NULL

static uint32_t sid(struct reader *r, const void *p, size_t n)
{
	uint32_t id = cuptrace_strtab_intern(&r->strs, p, n);
	if (!id)
		r->err = -ENOMEM;
	return id;
}

static const char *str(const struct reader *r, uint32_t id)
{
	return cuptrace_strtab_str(&r->strs, id);
}

/* ---- sequences, interning, clocks ---- */

static void seq_clear(struct rseq *q)
{
	for (int k = 0; k < IT_N; k++) {
		cuptrace_u64map_free(&q->tab[k]);
		cuptrace_u64map_init(&q->tab[k]);
	}
	q->has_def_clock = q->has_def_track = 0;
}

static struct rseq *seq_get(struct reader *r, uint32_t id, int *created)
{
	uint64_t *v = cuptrace_u64map_get(&r->seq_of, id);
	*created = 0;
	if (v)
		return &r->seqs[*v - 1];
	struct rseq *q = PUSH(r, seqs, nseqs, seqcap);
	if (!q)
		return NULL;
	if (!(v = cuptrace_u64map_put(&r->seq_of, id, NULL))) {
		r->nseqs--;
		r->err = -ENOMEM;
		return NULL;
	}
	*v = r->nseqs;
	memset(q, 0, sizeof(*q));
	q->id = id;
	*created = 1;
	r->ck.sequences++;
	return q;
}

static uint32_t lookup_iid(struct reader *r, struct rseq *q, int k, uint64_t iid)
{
	uint64_t *v = q ? cuptrace_u64map_get(&q->tab[k], iid) : NULL;
	if (!v) {
		r->ck.unknown_iid++;
		return 0;
	}
	return (uint32_t)*v;
}

/* InternedData: {iid 1, name/str 2} entries in fields 1 (categories), 2 (names), 3 (arg names)
 * and 29 (string values). Other tables are not used by what we replay. */
static int parse_interned(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc, k;

	while ((rc = pb_next(&m, &f)) > 0) {
		switch (f.id) {
		case 1:
			k = IT_CAT;
			break;
		case 2:
			k = IT_NAME;
			break;
		case 3:
			k = IT_KEY;
			break;
		case 29:
			k = IT_VAL;
			break;
		default:
			continue;
		}
		if (f.wt != 2)
			continue;
		uint64_t iid = 0;
		const uint8_t *s = NULL;
		size_t sn = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.id == 1 && g.wt == 0)
				iid = g.v;
			else if (g.id == 2 && g.wt == 2)
				s = g.b, sn = g.n;
		}
		if (rc < 0)
			return -1;
		if (!iid)
			continue;
		uint32_t id = sid(r, s ? (const void *)s : "", sn);
		uint64_t *v = id ? cuptrace_u64map_put(&q->tab[k], iid, NULL) : NULL;
		if (!v) {
			r->err = -ENOMEM;
			return 0;
		}
		*v = id;
	}
	return rc;
}

static int parse_defaults(struct rseq *q, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == 58 && f.wt == 0) {
			q->has_def_clock = 1;
			q->def_clock = (uint32_t)f.v;
		} else if (f.id == 11 && f.wt == 2) {
			e = pb_of(f.b, f.n);
			while ((rc = pb_next(&e, &g)) > 0) {
				if (g.id == 11 && g.wt == 0) {
					q->has_def_track = 1;
					q->def_track = g.v;
				}
			}
			if (rc < 0)
				return -1;
		}
	}
	return rc;
}

struct snapclock {
	uint32_t id;
	uint64_t ts, mult;
	int incremental;
};

/* A snapshot with a sequence clock (64..127) defines it on its sequence; the first one with
 * builtin clocks only is the trace's: it maps relative time 0 to BOOTTIME and REALTIME. */
static int parse_snapshot(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	struct snapclock c[MAX_SNAP_CLOCKS];
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	size_t nc = 0;
	uint32_t primary = 0;
	int rc, seq_clocks = 0;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == 2 && f.wt == 0)
			primary = (uint32_t)f.v;
		if (f.id != 1 || f.wt != 2 || nc == MAX_SNAP_CLOCKS)
			continue;
		struct snapclock k = {.mult = 1};
		int has_id = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.wt != 0)
				continue;
			if (g.id == 1)
				k.id = (uint32_t)g.v, has_id = 1;
			else if (g.id == 2)
				k.ts = g.v;
			else if (g.id == 3)
				k.incremental = !!g.v;
			else if (g.id == 4 && g.v)
				k.mult = g.v;
		}
		if (rc < 0)
			return -1;
		if (!has_id)
			continue;
		seq_clocks |= k.id >= 64;
		c[nc++] = k;
	}
	if (rc < 0)
		return -1;
	if (!seq_clocks) {
		if (r->have_snap || !nc)
			return 0;
		r->have_snap = 1;
		for (size_t i = 0; i < nc; i++) {
			r->snap_id[i] = c[i].id;
			r->snap_val[i] = c[i].ts;
		}
		r->nsnap = nc;
		r->snap_primary = primary;
		return 0;
	}
	if (!q) {
		r->ck.clock_errors++;
		return 0;
	}
	/* The builtin clock the sequence clocks are tied to: BOOTTIME if there, else the first. */
	const struct snapclock *ref = NULL;
	for (size_t i = 0; i < nc && (!ref || ref->id != CLOCK_BOOTTIME_ID); i++)
		if (c[i].id < 64 && (!ref || c[i].id == CLOCK_BOOTTIME_ID))
			ref = &c[i];
	for (size_t i = 0; i < nc; i++) {
		if (c[i].id < 64 || c[i].id > 127)
			continue;
		struct rclock *k = NULL;
		for (size_t j = 0; j < q->nclocks && !k; j++)
			if (q->clocks[j].id == c[i].id)
				k = &q->clocks[j];
		if (!k) {
			size_t cap = q->nclocks;
			struct rclock *arr = realloc(q->clocks, (cap + 1) * sizeof(*arr));
			if (!arr) {
				r->err = -ENOMEM;
				return 0;
			}
			q->clocks = arr;
			k = &q->clocks[q->nclocks++];
		}
		*k = (struct rclock){.id = c[i].id,
		                     .incremental = c[i].incremental,
		                     .snap = c[i].ts,
		                     .last = c[i].ts,
		                     .mult = c[i].mult,
		                     .ref_clock = ref ? ref->id : 0,
		                     .ref_val = ref ? ref->ts : 0};
	}
	return 0;
}

/* The packet's time on a builtin clock (dom 0: the trace clock). Sequence clocks are resolved
 * here, in file order, because incremental deltas chain in file order. 0 or -1 (clock error). */
static int packet_time(struct reader *r, struct rseq *q, int has_clock, uint32_t clock, uint64_t ts,
                       uint64_t *out, uint32_t *dom)
{
	if (!has_clock && q && q->has_def_clock) {
		has_clock = 1;
		clock = q->def_clock;
	}
	if (!has_clock || clock < 64) {
		*out = ts;
		*dom = has_clock ? clock : 0;
		return 0;
	}
	struct rclock *k = NULL;
	for (size_t j = 0; q && j < q->nclocks && !k; j++)
		if (q->clocks[j].id == clock)
			k = &q->clocks[j];
	if (!k || !k->ref_clock)
		return -1;
	uint64_t v = k->incremental ? k->last + ts : ts;
	if (k->incremental)
		k->last = v;
	*out = k->ref_val + (v - k->snap) * k->mult; /* wraps on garbage, never traps */
	*dom = k->ref_clock;
	return 0;
}

/* ---- descriptors and metadata ---- */

static int parse_track(struct reader *r, const uint8_t *b, size_t n)
{
	struct rtrack t = {0};
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc, has_uuid = 0;
	size_t cmd_start = r->ncmds;

	while ((rc = pb_next(&m, &f)) > 0) {
		switch (f.id) {
		case 1:
			t.uuid = f.v;
			has_uuid = f.wt == 0;
			break;
		case 2:
		case 10:
		case 13:
			if (f.wt == 2 && !t.name)
				t.name = sid(r, f.b, f.n);
			break;
		case 5:
			t.has_parent = f.wt == 0;
			t.parent = f.v;
			break;
		case 11:
			t.has_order = f.wt == 0;
			break;
		case 12:
			t.rank = (int32_t)f.v;
			break;
		case 14:
			if (f.wt == 2)
				t.desc = sid(r, f.b, f.n);
			break;
		case 3:
		case 4:
		case 8:
			if (f.wt != 2)
				break;
			t.has_process |= f.id == 3;
			t.has_thread |= f.id == 4;
			t.has_counter |= f.id == 8;
			e = pb_of(f.b, f.n);
			while ((rc = pb_next(&e, &g)) > 0) {
				if (f.id == 8) {
					if (g.id == 3 && g.wt == 0)
						t.unit = (int)g.v;
					continue;
				}
				if (g.id == 1 && g.wt == 0) {
					t.pid = (int32_t)g.v;
					t.has_pid = 1;
				} else if (f.id == 4 && g.id == 2 && g.wt == 0) {
					t.tid = (int64_t)g.v;
					t.has_tid = 1;
				} else if (g.wt == 2 &&
				           ((f.id == 3 && g.id == 6) || (f.id == 4 && g.id == 5))) {
					t.name = sid(r, g.b, g.n);
				} else if (f.id == 3 && g.id == 2 && g.wt == 2) {
					uint32_t *c = PUSH(r, cmds, ncmds, cmdcap);
					if (c)
						*c = sid(r, g.b, g.n);
				}
			}
			if (rc < 0)
				goto bad;
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if (!has_uuid || !t.uuid || cuptrace_u64map_get(&r->trk_of, t.uuid))
		goto skip; /* TP drops a uuid-less descriptor; a repeated one adds nothing we keep
		            */
	t.cmd0 = (uint32_t)cmd_start;
	t.ncmd = (uint32_t)(r->ncmds - cmd_start);
	if (t.has_thread && t.has_pid && t.has_tid) {
		uint64_t key =
		    cuptrace_hash64((uint64_t)(uint32_t)t.pid ^ cuptrace_hash64((uint64_t)t.tid));
		int created;
		uint64_t *v = cuptrace_u64map_put(&r->tid_of, key, &created);
		if (v && created)
			*v = t.uuid;
		else if (v && *v != t.uuid)
			r->ck.duplicate_thread_uuid++;
	} else if (t.has_process && t.has_pid && !t.has_thread) {
		int created;
		uint64_t *v = cuptrace_u64map_put(&r->pid_of, (uint64_t)(uint32_t)t.pid, &created);
		if (v && created)
			*v = t.uuid;
		else if (v && *v != t.uuid)
			r->ck.duplicate_process_uuid++;
	}
	struct rtrack *slot = PUSH(r, trk, ntrk, trkcap);
	uint64_t *v = slot ? cuptrace_u64map_put(&r->trk_of, t.uuid, NULL) : NULL;
	if (!v) {
		r->err = -ENOMEM;
		return 0;
	}
	*slot = t;
	*v = r->ntrk;
	return 0;
skip:
	r->ncmds = cmd_start;
	return 0;
bad:
	r->ncmds = cmd_start;
	return -1;
}

static struct rtrack *track_of(struct reader *r, uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(&r->trk_of, uuid);
	return v ? &r->trk[*v - 1] : NULL;
}

static int meta_put(struct reader *r, struct rmeta **arr, size_t *n, size_t *cap,
                    const struct rmeta *m)
{
	for (size_t i = 0; i < *n; i++) {
		if ((*arr)[i].key == m->key) {
			(*arr)[i] = *m;
			return 0;
		}
	}
	struct rmeta *a = cuptrace_grow(*arr, cap, *n + 1, sizeof(*a));
	if (!a)
		return r->err = -ENOMEM;
	*arr = a;
	a[(*n)++] = *m;
	return 0;
}

static int parse_attributes(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc, first = !r->have_meta0;

	r->have_meta0 = 1;
	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id != 1 || f.wt != 2)
			continue;
		struct rmeta a = {0};
		int has_key = 0, has_val = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.id == 1 && g.wt == 2) {
				a.key = sid(r, g.b, g.n);
				has_key = 1;
			} else if (g.id == 2 && g.wt == 0) {
				a.is_int = 1;
				a.i = (int64_t)g.v;
				a.s = 0;
				has_val = 1;
			} else if (g.id == 3 && g.wt == 2) {
				a.is_int = 0;
				a.s = sid(r, g.b, g.n);
				has_val = 1;
			}
		}
		if (rc < 0)
			return -1;
		if (!has_key || !has_val || r->err)
			continue;
		if (first)
			meta_put(r, &r->meta0, &r->nmeta0, &r->meta0cap, &a);
		meta_put(r, &r->meta, &r->nmeta, &r->metacap, &a);
	}
	return rc;
}

static int parse_sysinfo(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0)
		if (f.id == 17 && f.wt == 2 && !r->hostname)
			r->hostname = sid(r, f.b, f.n);
	return rc;
}

static int parse_uuid(struct reader *r, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == 1 && f.wt == 0)
			r->uuid_hi = f.v;
		else if (f.id == 2 && f.wt == 0)
			r->uuid_lo = f.v;
	}
	return rc;
}

/* ---- track events ---- */

/* One DebugAnnotation as args; dicts and arrays are flattened to "a.b" and "a[0]" keys, as TP
 * names them (without its "debug." prefix), down to MAX_ANN_DEPTH. */
static int parse_annotation(struct reader *r, struct rseq *q, const uint8_t *b, size_t n,
                            const char *prefix, int depth)
{
	struct pb m = pb_of(b, n);
	struct pbf f;
	struct rarg a = {0};
	int rc, has_val = 0, has_name = 0;
	char key[256];

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.wt == 2 && (f.id == 10 || f.id == 6 || f.id == 9)) {
			uint32_t s = sid(r, f.b, f.n);
			if (f.id == 10) {
				a.key = s;
				has_name = 1;
			} else {
				a.type = CUPTRACE_ARG_STRING;
				a.v.s = s;
				has_val = 1;
			}
			continue;
		}
		if (f.wt == 1 && f.id == 5) {
			a.type = CUPTRACE_ARG_DOUBLE;
			memcpy(&a.v.d, &f.v, sizeof(double));
			has_val = 1;
			continue;
		}
		if (f.wt != 0)
			continue;
		switch (f.id) {
		case 1:
			a.key = lookup_iid(r, q, IT_KEY, f.v);
			has_name = 1;
			break;
		case 2:
			a.type = CUPTRACE_ARG_BOOL;
			a.v.i = !!f.v;
			has_val = 1;
			break;
		case 3:
		case 7:
			a.type = f.id == 3 ? CUPTRACE_ARG_UINT : CUPTRACE_ARG_POINTER;
			a.v.u = f.v;
			has_val = 1;
			break;
		case 4:
			a.type = CUPTRACE_ARG_INT;
			a.v.i = (int64_t)f.v;
			has_val = 1;
			break;
		case 17:
			a.type = CUPTRACE_ARG_STRING;
			a.v.s = lookup_iid(r, q, IT_VAL, f.v);
			has_val = a.v.s != 0;
			break;
		}
	}
	if (rc < 0)
		return -1;
	if (has_name && !a.key) /* an unknown name iid: already counted */
		return 0;
	const char *name = has_name ? str(r, a.key) : "";
	if (prefix)
		snprintf(key, sizeof(key), "%s%s%s", prefix, has_name ? "." : "", name);
	else
		snprintf(key, sizeof(key), "%s", name);
	if (has_val) {
		struct rarg *slot;
		a.key = prefix ? sid(r, key, strlen(key)) : a.key;
		if (!a.key && !has_name)
			a.key = sid(r, "", 0);
		if ((slot = PUSH(r, args, nargs, argcap)))
			*slot = a;
		return 0;
	}
	if (depth >= MAX_ANN_DEPTH)
		return 0;
	/* Children: dict entries carry their own names; array values get [i]. */
	size_t idx = 0;
	m = pb_of(b, n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		if (f.wt != 2 || (f.id != 11 && f.id != 12))
			continue;
		char sub[256];
		int w = f.id == 12 ? snprintf(sub, sizeof(sub), "%s[%zu]", key, idx++)
		                   : snprintf(sub, sizeof(sub), "%s", key);
		if (w < 0)
			continue; /* a long key is cut, which is fine */
		if (parse_annotation(r, q, f.b, f.n, sub, depth + 1) < 0)
			return -1;
	}
	return rc < 0 ? -1 : 0;
}

/* Joins the category names of an event with ',' as TP does. */
static uint32_t join_cats(struct reader *r, const uint32_t *ids, size_t n)
{
	char buf[1024];
	size_t len = 0;

	if (n == 1)
		return ids[0];
	for (size_t i = 0; i < n; i++) {
		const char *s = str(r, ids[i]);
		int w = snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? "," : "", s ? s : "");
		if (w < 0 || (size_t)w >= sizeof(buf) - len) {
			len = sizeof(buf) - 1;
			break;
		}
		len += (size_t)w;
	}
	return sid(r, buf, len);
}

struct pkt {
	int has_ts, has_clock, has_seq;
	uint64_t ts;
	uint32_t clock, seq, flags;
	uint64_t dropped;
	int cleared_legacy;
	struct pbf interned, defaults, payload;
	int has_interned, has_defaults;
	uint32_t payload_id; /* field number of the payload, 0 if none */
	/* its time on a builtin clock (dom 0: the trace clock), or time_err */
	uint64_t abs_ts;
	uint32_t dom;
	int time_err;
};

static int parse_event(struct reader *r, struct rseq *q, const struct pkt *k)
{
	struct pb m = pb_of(k->payload.b, k->payload.n);
	struct pbf f;
	struct rev ev = {.fo = r->fo++};
	uint32_t cats[16];
	size_t ncat = 0;
	int rc, has_track = 0, has_val = 0, has47 = 0, has48 = 0;
	size_t arg0 = r->nargs, flow0 = r->nflows;

	/* TP reads the deprecated varint flow fields (36, 42) only when the fixed64 ones (47, 48)
	 * are absent. */
	while ((rc = pb_next(&m, &f)) > 0) {
		has47 |= f.id == 47 && f.wt == 1;
		has48 |= f.id == 48 && f.wt == 1;
	}
	if (rc < 0)
		return -1;
	/* The checks TP makes at tokenization (file order), before anything is resolved. */
	if (!k->has_seq) {
		r->ck.missing_sequence_id++;
		return 0;
	}
	if (!k->has_ts) {
		r->ck.missing_timestamp++;
		return 0;
	}
	ev.arg0 = (uint32_t)arg0;
	ev.flow0 = (uint32_t)flow0;
	m = pb_of(k->payload.b, k->payload.n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		switch (f.id) {
		case 9:
			ev.type = f.wt == 0 && f.v <= 5 ? (uint8_t)f.v : 0;
			break;
		case 11:
			ev.track = f.v;
			has_track = f.wt == 0;
			break;
		case 3:
			if (f.wt == 0 && ncat < 16)
				cats[ncat++] = lookup_iid(r, q, IT_CAT, f.v);
			break;
		case 22:
			if (f.wt == 2 && ncat < 16)
				cats[ncat++] = sid(r, f.b, f.n);
			break;
		case 10:
			if (f.wt == 0)
				ev.name = lookup_iid(r, q, IT_NAME, f.v);
			break;
		case 23:
			if (f.wt == 2)
				ev.name = sid(r, f.b, f.n);
			break;
		case 4:
			if (f.wt == 2 && parse_annotation(r, q, f.b, f.n, NULL, 0) < 0)
				goto bad;
			break;
		case 30:
			if (f.wt == 0) {
				ev.val.i = (int64_t)f.v;
				ev.is_double = 0;
				has_val = 1;
			}
			break;
		case 44:
			if (f.wt == 1) {
				memcpy(&ev.val.d, &f.v, sizeof(double));
				ev.is_double = 1;
				has_val = 1;
			}
			break;
		case 47:
		case 36:
			if ((has47 && f.id == 47 && f.wt == 1) || (!has47 && f.id == 36 && !f.wt)) {
				uint64_t *slot = PUSH(r, flows, nflows, flowcap);
				if (slot)
					*slot = f.v;
			}
			break;
		case 52:
			if (f.wt == 0)
				ev.corr = f.v;
			break;
		}
	}
	if (rc < 0)
		goto bad;
	if (r->err)
		return 0;
	ev.nargs = (uint32_t)(r->nargs - arg0);
	ev.nflows = (uint32_t)(r->nflows - flow0);
	m = pb_of(k->payload.b, k->payload.n);
	while ((rc = pb_next(&m, &f)) > 0 && !r->err) {
		if ((has48 && f.id == 48 && f.wt == 1) || (!has48 && f.id == 42 && !f.wt)) {
			uint64_t *slot = PUSH(r, flows, nflows, flowcap);
			if (slot)
				*slot = f.v;
		}
	}
	ev.nterm = (uint32_t)(r->nflows - flow0 - ev.nflows);
	if (!has_track && q && q->has_def_track) {
		ev.track = q->def_track;
		has_track = 1;
	}
	if (ncat)
		ev.cat = join_cats(r, cats, ncat);

	if (ev.type < TE_BEGIN || ev.type > TE_COUNTER)
		goto drop; /* legacy and TYPE_STATE events are not in our model */
	if (ev.type == TE_COUNTER) {
		struct rtrack *t = track_of(r, ev.track);
		if (!t || !t->has_counter) {
			r->ck.counter_before_descriptor++;
			goto drop;
		}
		if (!has_val)
			goto drop;
		r->nargs = arg0;
		r->nflows = flow0;
		ev.nargs = ev.nflows = ev.nterm = 0;
	}
	if (k->time_err) {
		r->ck.clock_errors++;
		goto drop;
	}
	if (k->abs_ts > INT64_MAX) {
		r->ck.negative_timestamps++; /* TP: track_event_invalid_timestamp */
		goto drop;
	}
	ev.ts = (int64_t)k->abs_ts;
	ev.dom = k->dom;
	struct rev *slot = PUSH(r, evs, nevs, evcap);
	if (slot)
		*slot = ev;
	return 0;
drop:
	r->nargs = arg0;
	r->nflows = flow0;
	return 0;
bad:
	r->nargs = arg0;
	r->nflows = flow0;
	return -1;
}

/* ---- packets and streams ---- */

static int parse_stream(struct reader *r, const uint8_t *b, size_t n, int depth, size_t *used);

static int inflate_chunk(struct reader *r, const uint8_t *b, size_t n, size_t *outn)
{
	z_stream z;
	int rc;
	/* A deflate stream expands at most ~1032:1; TP asks for chunks under 512 KB anyway. */
	size_t limit = n > (MAX_PACKET - 65536) / 1032 ? MAX_PACKET : n * 1032 + 65536;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK) {
		r->err = -ENOMEM;
		return -1;
	}
	z.next_in = (Bytef *)b;
	z.avail_in = (uInt)n;
	*outn = 0;
	for (;;) {
		if (*outn == r->zcap) {
			/* Chunks inflate ~4-10x; start near that, without a large first allocation.
			 */
			size_t cap = r->zcap ? r->zcap * 2 : n * 8 < 16384 ? 16384 : n * 8;
			if (r->zcap >= limit) {
				rc = Z_DATA_ERROR;
				break;
			}
			cap = cap > limit ? limit : cap;
			uint8_t *p = realloc(r->zbuf, cap);
			if (!p) {
				r->err = -ENOMEM;
				rc = Z_MEM_ERROR;
				break;
			}
			r->zbuf = p;
			r->zcap = cap;
		}
		z.next_out = r->zbuf + *outn;
		z.avail_out = (uInt)(r->zcap - *outn);
		rc = inflate(&z, Z_NO_FLUSH);
		*outn = r->zcap - z.avail_out;
		if (rc == Z_STREAM_END || (rc != Z_OK && !(rc == Z_BUF_ERROR && !z.avail_out)))
			break;
	}
	/* TP wants exactly one complete stream per field: no more, no less. */
	int ok = rc == Z_STREAM_END && !z.avail_in;
	inflateEnd(&z);
	return ok ? 0 : -1;
}

static int do_packet(struct reader *r, const uint8_t *b, size_t n, int depth)
{
	struct pkt k = {0};
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc, created = 0;

	while ((rc = pb_next(&m, &f)) > 0) {
		switch (f.id) {
		case 8:
			k.has_ts = f.wt == 0;
			k.ts = f.v;
			break;
		case 58:
			k.has_clock = f.wt == 0;
			k.clock = (uint32_t)f.v;
			break;
		case 10:
			k.has_seq = f.wt == 0 && f.v;
			k.seq = (uint32_t)f.v;
			break;
		case 13:
			k.flags = (uint32_t)f.v;
			break;
		case 41:
			k.cleared_legacy = !!f.v;
			break;
		case 42:
			k.dropped = f.v;
			break;
		case 12:
			k.interned = f;
			k.has_interned = f.wt == 2;
			break;
		case 59:
			k.defaults = f;
			k.has_defaults = f.wt == 2;
			break;
		case 6:
		case 11:
		case 45:
		case 50:
		case 60:
		case 89:
		case 126:
			if (f.wt == 2) {
				k.payload = f;
				k.payload_id = f.id;
			}
			break;
		}
	}
	if (rc < 0)
		return -1;
	if (k.payload_id == 50) {
		/* The outer packet's other fields are ignored, as TP does. */
		size_t zn, used;
		if (depth) {
			r->ck.corrupt++; /* no chunks inside chunks */
			return 0;
		}
		r->ck.chunks++;
		if (inflate_chunk(r, k.payload.b, k.payload.n, &zn)) {
			r->ck.corrupt++;
			return 0;
		}
		/* r->zbuf is reused by the next chunk; packets inside cannot be chunks, so nothing
		 * touches it while its packets are parsed. */
		if (parse_stream(r, r->zbuf, zn, depth + 1, &used) || used != zn)
			r->ck.corrupt++;
		return 0;
	}
	r->ck.packets++;
	struct rseq *q = NULL;
	int cleared = (k.flags & SEQ_CLEARED) || k.cleared_legacy;
	int needs = (k.flags & SEQ_NEEDS) || k.has_interned;
	if (k.has_seq) {
		if (!(q = seq_get(r, k.seq, &created)))
			return 0;
		if (created)
			q->first_cleared = cleared;
		if (k.dropped)
			q->valid = 0;
		if (cleared) {
			seq_clear(q);
			q->valid = 1;
		}
		if (needs && !q->first_cleared && !q->reported) {
			q->reported = 1;
			r->ck.seq_first_not_cleared++;
		}
	} else if (k.flags & SEQ_NEEDS) {
		r->ck.missing_sequence_id++; /* fatal in TP */
		return 0;
	}
	if (k.has_defaults && q && parse_defaults(q, k.defaults.b, k.defaults.n))
		return -1;
	if (k.has_interned && q) {
		if (!q->valid)
			r->ck.incremental_state_invalid++;
		else if (parse_interned(r, q, k.interned.b, k.interned.n))
			return -1;
	}
	/* In TP's order: attributes and clock snapshots are taken even from a packet that is then
	 * skipped for invalid incremental state. */
	if (k.payload_id == 126)
		return parse_attributes(r, k.payload.b, k.payload.n);
	if (k.payload_id == 6)
		return parse_snapshot(r, q, k.payload.b, k.payload.n);
	if ((k.flags & SEQ_NEEDS) && q && !q->valid) {
		r->ck.incremental_state_invalid++;
		return 0;
	}
	/* Every packet that gets this far has its time converted, which advances incremental
	 * clocks, whatever becomes of its payload. */
	if (k.has_ts)
		k.time_err = packet_time(r, q, k.has_clock, k.clock, k.ts, &k.abs_ts, &k.dom);
	switch (k.payload_id) {
	case 11:
		return parse_event(r, q, &k);
	case 45:
		return parse_sysinfo(r, k.payload.b, k.payload.n);
	case 60:
		return parse_track(r, k.payload.b, k.payload.n);
	case 89:
		return parse_uuid(r, k.payload.b, k.payload.n);
	}
	return 0;
}

/* Parses the complete framed packets at the start of b; *used says how far it got. Returns -1
 * on bytes that cannot be a Trace (the rest is unreadable), 0 otherwise (what is left is an
 * incomplete packet, for the caller to judge). */
static int parse_stream(struct reader *r, const uint8_t *b, size_t n, int depth, size_t *used)
{
	const uint8_t *p = b, *end = b + n;

	*used = 0;
	while (p < end && !r->err) {
		const uint8_t *q = p;
		uint64_t tag, len;
		int rc = get_varint(&q, end, &tag);
		if (rc)
			return rc < 0 ? -1 : 0;
		/* Inside a chunk every record must be a packet (TP: "Expected TracePacket tag");
		 * at the top level other fields are skipped. */
		if ((tag != 0x0A && depth) || !(tag >> 3) || tag >> 32)
			return -1;
		switch (tag & 7) {
		case 0:
			if ((rc = get_varint(&q, end, &len)))
				return rc < 0 ? -1 : 0;
			break;
		case 1:
		case 5:
			if ((size_t)(end - q) < ((tag & 7) == 1 ? 8u : 4u))
				return 0;
			q += (tag & 7) == 1 ? 8 : 4;
			break;
		case 2:
			if ((rc = get_varint(&q, end, &len)))
				return rc < 0 ? -1 : 0;
			if (len > MAX_PACKET)
				return -1;
			if (len > (uint64_t)(end - q))
				return 0;
			if (tag == 0x0A && len && do_packet(r, q, (size_t)len, depth))
				r->ck.corrupt++; /* the framing holds: skip just this packet */
			q += len;
			break;
		default:
			return -1;
		}
		p = q;
		*used = (size_t)(p - b);
	}
	return 0;
}

/* Whole-file gzip (multi-member too), parsed as it inflates so that memory follows the largest
 * packet, not the file. A cut stream is read up to its last complete packet, but counted as
 * corrupt: trace_processor refuses such a file. */
static int read_gzip(struct reader *r, const uint8_t *data, size_t len)
{
	z_stream z;
	uint8_t *buf = NULL;
	size_t cap = 0, have = 0, used;
	uint64_t total = 0;
	int rc = Z_OK, ended = 0, err = 0, sniffed = 0, bad = 0;
	size_t limit = len > (MAX_PACKET - 65536) / 1032 ? MAX_PACKET : len * 1032 + 65536;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
	const uint8_t *in_end = data + len;
	for (;;) {
		if (have == cap) {
			size_t ncap = cap ? cap * 2 : len < 8192 ? 65536 : 1024 * 1024;
			if (cap >= limit) {
				bad = 1; /* a packet longer than the input could ever inflate to */
				break;
			}
			uint8_t *p = realloc(buf, ncap > limit ? limit : ncap);
			if (!p) {
				err = -ENOMEM;
				break;
			}
			buf = p;
			cap = ncap > limit ? limit : ncap;
		}
		if (!z.avail_in && z.next_in < in_end) {
			size_t left = (size_t)(in_end - z.next_in);
			z.avail_in = (uInt)(left > UINT32_MAX ? UINT32_MAX : left);
		}
		z.next_out = buf + have;
		z.avail_out = (uInt)(cap - have);
		rc = inflate(&z, Z_NO_FLUSH);
		total += (cap - have) - z.avail_out;
		have = cap - z.avail_out;
		if (!sniffed && have) {
			sniffed = 1;
			if (buf[0] != 0x0A) {
				cuptrace_err("gzip file does not hold a Perfetto protobuf trace "
				             "(first byte 0x%02x)",
				             buf[0]);
				err = -EINVAL;
				break;
			}
		}
		if (parse_stream(r, buf, have, 0, &used)) {
			bad = 1;
			have = 0;
			break;
		}
		memmove(buf, buf + used, have - used);
		have -= used;
		if (r->err)
			break;
		if (rc == Z_STREAM_END) {
			size_t left = (size_t)(in_end - z.next_in);
			if (!left) {
				ended = 1;
				break;
			}
			if (left >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
				inflateReset(&z); /* the next member */
				continue;
			}
			cuptrace_warn("%zu bytes of garbage after the gzip stream", left);
			ended = bad = 1;
			break;
		}
		if (rc == Z_BUF_ERROR && z.avail_out)
			break; /* input exhausted mid-stream */
		if (rc == Z_MEM_ERROR) {
			err = -ENOMEM;
			break;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			cuptrace_warn("gzip data is corrupt after %llu bytes of trace",
			              (unsigned long long)total);
			bad = 1;
			break;
		}
	}
	if (bad) {
		r->ck.corrupt++;
	} else if (!err && !r->err && !ended) {
		r->ck.corrupt++;
		cuptrace_warn("gzip stream is incomplete (the file was cut?): read up to the last "
		              "complete packet; ui.perfetto.dev refuses such a file");
	}
	r->ck.truncated_bytes += have;
	inflateEnd(&z);
	free(buf);
	if (!err && !sniffed && !total && !ended)
		return 0; /* cut within the gzip header: nothing to read */
	return err;
}

/* ---- replay ---- */

/* The ts of an event relative to the first global snapshot; -1 if its clock is not in it. */
static int to_rel(struct reader *r, struct rev *e)
{
	if (!r->have_snap) {
		if (e->dom && e->dom != CLOCK_BOOTTIME_ID)
			return -1;
		return 0;
	}
	uint32_t c = e->dom;
	if (!c) {
		c = r->snap_primary;
		if (!c) {
			c = r->snap_id[0];
			for (size_t i = 0; i < r->nsnap; i++)
				if (r->snap_id[i] == CLOCK_BOOTTIME_ID)
					c = CLOCK_BOOTTIME_ID;
		}
	}
	for (size_t i = 0; i < r->nsnap; i++) {
		if (r->snap_id[i] == c) {
			e->ts = (int64_t)((uint64_t)e->ts - r->snap_val[i]);
			return 0;
		}
	}
	return -1;
}

static uint64_t snap_value(const struct reader *r, uint32_t clock)
{
	for (size_t i = 0; i < r->nsnap; i++)
		if (r->snap_id[i] == clock)
			return r->snap_val[i];
	return 0;
}

static int ev_cmp(const void *pa, const void *pb)
{
	const struct rev *a = pa, *b = pb;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->fo < b->fo ? -1 : a->fo > b->fo;
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
	struct cuptrace_u64map active;   /* flow id -> slice index + 1 | had_row << 63 */
};

static int flow_touch(struct reader *r, struct replay *p, uint64_t id, uint32_t slice, int term)
{
	int created;
	uint64_t *v = cuptrace_u64map_put(&p->active, id, &created);
	if (!v)
		return r->err = -ENOMEM;
	if (created) {
		if (term) {
			/* TP ignores a terminating id that is not active. */
			cuptrace_u64map_del(&p->active, id);
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
		cuptrace_u64map_del(&p->active, id);
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
			uint32_t *st = cuptrace_grow(p->stacks[si], &p->stcap[si], *d + 1, sizeof(*st));
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
		if (p->active.used[i] == 1 && !(p->active.vals[i] >> 63))
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

static struct cuptrace_arg *make_args(struct reader *r, const struct rev *e,
                                      struct cuptrace_arg **buf, size_t *cap)
{
	struct cuptrace_arg *a = cuptrace_grow(*buf, cap, e->nargs ? e->nargs : 1, sizeof(**buf));
	if (!a)
		return NULL;
	*buf = a;
	for (uint32_t i = 0; i < e->nargs; i++) {
		const struct rarg *s = &r->args[e->arg0 + i];
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
	}
	return a;
}

static int is_meta_instant(const struct reader *r, const struct rev *e)
{
	const char *c = str(r, e->cat), *n = str(r, e->name);
	return c && n && !strcmp(c, META_CAT) &&
	       (!strcmp(n, META_INFO) || !strcmp(n, META_SUMMARY));
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
	    .start_boottime_ns = (int64_t)snap_value(r, CLOCK_BOOTTIME_ID),
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
			r->ck.negative_timestamps++;
			continue;
		}
		t = track_of(r, e->track);
		if (!t || !t->valid ||
		    (t->kind == CUPTRACE_TRACK_COUNTER) != (e->type == TE_COUNTER)) {
			r->ck.event_on_unknown_track++;
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
		if (!make_args(r, e, &args, &argcap)) {
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
			    .correlation_id = e->corr,
			    .args = args,
			    .nargs = e->nargs,
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
		    .correlation_id = e->corr,
		    .args = args,
		    .nargs = e->nargs,
		    .flows_out = s->nout ? p->fids + s->out0 : NULL,
		    .nflows_out = s->nout,
		    .flows_in = s->nin ? p->fids + s->in0 : NULL,
		    .nflows_in = s->nin,
		};
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

static void reader_free(struct reader *r)
{
	for (size_t i = 0; i < r->nseqs; i++) {
		for (int k = 0; k < IT_N; k++)
			cuptrace_u64map_free(&r->seqs[i].tab[k]);
		free(r->seqs[i].clocks);
	}
	free(r->seqs);
	cuptrace_u64map_free(&r->seq_of);
	cuptrace_u64map_free(&r->trk_of);
	cuptrace_u64map_free(&r->pid_of);
	cuptrace_u64map_free(&r->tid_of);
	cuptrace_strtab_free(&r->strs);
	free(r->evs);
	free(r->args);
	free(r->flows);
	free(r->trk);
	free(r->cmds);
	free(r->meta0);
	free(r->meta);
	free(r->zbuf);
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
	cuptrace_u64map_free(&p->active);
}

int cuptrace_perfetto_read_mem(const void *data, size_t len, struct cuptrace_sink *sink,
                               struct cuptrace_pf_check *check)
{
	const uint8_t *b = data;
	struct reader r;
	struct replay p;
	int err = 0;

	memset(&r, 0, sizeof(r));
	memset(&p, 0, sizeof(p));
	cuptrace_strtab_init(&r.strs);
	if (!len) {
		cuptrace_info("empty trace file");
	} else if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		err = read_gzip(&r, b, len);
	} else if (b[0] == 0x0A) {
		size_t used;
		if (parse_stream(&r, b, len, 0, &used)) {
			r.ck.corrupt++;
			cuptrace_warn("corrupt data at byte %zu of the trace: the rest is ignored",
			              used);
		} else {
			r.ck.truncated_bytes += len - used;
		}
	} else if (len >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4)) {
		cuptrace_err("zstd-compressed traces are not supported: decompress it first");
		err = -EINVAL;
	} else {
		cuptrace_err("not a Perfetto protobuf trace (first byte 0x%02x; expected 0x0a, or "
		             "1f 8b for gzip)",
		             b[0]);
		err = -EINVAL;
	}
	if (!err)
		err = r.err;
	if (!err && r.ck.corrupt && !r.ck.packets) {
		cuptrace_err("not a Perfetto trace, or corrupt from its start");
		err = -EINVAL;
	}
	if (err)
		goto out;
	if (r.ck.truncated_bytes)
		cuptrace_info("trace ends with %llu bytes of an incomplete packet (cut file?)",
		              (unsigned long long)r.ck.truncated_bytes);

	for (size_t i = 0; i < r.nevs; i++)
		if (to_rel(&r, &r.evs[i])) {
			r.evs[i].dropped = 1;
			r.ck.clock_errors++;
		}
	if (r.nevs)
		qsort(r.evs, r.nevs, sizeof(*r.evs), ev_cmp);
	resolve_tracks(&r);
	if ((err = build_slices(&r, &p)) || (err = assign_flows(&r, &p)))
		goto out;
	err = replay(&r, &p, sink); /* with no sink, only counts */
out:
	if (check)
		*check = r.ck;
	replay_free(&p);
	reader_free(&r);
	return err;
}

int cuptrace_perfetto_read(const char *path, struct cuptrace_sink *sink,
                           struct cuptrace_pf_check *check)
{
	uint8_t *buf = NULL;
	size_t len = 0, cap = 1 << 20;
	struct stat st;
	int fd, err = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		err = -errno;
		cuptrace_err("%s: %s", path, strerror(errno));
		return err;
	}
	if (!fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_size > 0)
		cap = (size_t)st.st_size + 1; /* + 1: EOF shows without a second allocation */
	for (;;) {
		if (len == cap || !buf) {
			size_t ncap = buf ? cap * 2 : cap;
			uint8_t *p = ncap > cap || !buf ? realloc(buf, ncap) : NULL;
			if (!p) {
				err = -ENOMEM;
				goto out;
			}
			buf = p;
			cap = ncap;
		}
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = -errno;
			cuptrace_err("%s: %s", path, strerror(errno));
			goto out;
		}
		if (!n)
			break;
		len += (size_t)n;
	}
	err = cuptrace_perfetto_read_mem(buf, len, sink, check);
	if (err == -EINVAL)
		cuptrace_err("%s: cannot read this file as a Perfetto trace", path);
out:
	close(fd);
	free(buf);
	return err;
}
