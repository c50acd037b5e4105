/* What the Perfetto reader's files share: struct reader, the decoded trace that perfetto_decode.c
 * and perfetto_decode_payload.c fill and perfetto_reader.c replays (the wire-format cursor is in
 * pb_cursor.h). Private to src/read; the pipeline is described at the top of perfetto_reader.c. */
#ifndef CUPTRACE_READ_PERFETTO_STATE_H
#define CUPTRACE_READ_PERFETTO_STATE_H

#include "common/util.h"
#include "format/event.h"
#include "format/perfetto_fields.h"
#include "format/perfetto_wire.h"
#include "read/pb_cursor.h"
#include "read/read_check.h"
#include "read/read_util.h"
#include "read/stacktab.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#define MAX_SNAP_CLOCKS 64

enum { CT_FN, CT_SRC, CT_BUILD, CT_MPATH, CT_MAP, CT_FRAME, CT_STACK, CT_N };

/* An rarg of this type is no argument: it carries the event's call stack (v.u: an id in r->stk),
 * kept among the args so that struct rev stays one cache line. */
#define RARG_STACK 0xFF

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
	/* Call stacks' interned tables: iid -> string id (function names, source paths, build ids,
	 * mapping paths), -> index + 1 in r->maps / r->frames (mappings, frames), -> stack id in
	 * r->stk (callstacks). */
	struct cuptrace_u64map ctab[CT_N];
	struct rclock *clocks;
	size_t nclocks, clocks_cap;
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

/* struct rev's type for a host stack sample (TrackEvent's types are 1 to 4). */
#define REV_SAMPLE 100

struct rev {
	int64_t ts; /* raw value on clock dom, then ns relative to the trace start */
	/* No file-order field: evs is filled in file order, and the sort keeps ties in it. */
	uint64_t track;
	uint32_t dom; /* builtin clock of the raw ts; 0 = the trace clock */
	uint8_t type;
	uint8_t is_double;
	uint8_t dropped; /* clock error or invalid time: not replayed */
	uint32_t name, cat;
	uint32_t arg0, nargs;
	uint32_t flow0, nflows, nterm; /* flow_ids then terminating ids, in flows[] */
	uint32_t slice;                /* BEGIN: its slice index + 1, 0 if none */
	/* A counter's value, or a slice's or instant's correlation id: one record is 64 bytes,
	 * a cache line (a trace of 1 M kernels holds 4 M of them). */
	union {
		int64_t i;
		double d;
		uint64_t corr;
	} val;
};

_Static_assert(sizeof(struct rev) <= 64, "an event record fits a cache line");

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
	int used; /* an event on it (1) or on a descendant (2): tracks_without_events */
	uint64_t rparent;
	uint32_t lane;
};

struct rmeta {
	uint32_t key, s;
	int is_int;
	int64_t i;
};

struct rmapping { /* string ids */
	uint32_t build_id, path;
};

struct rframe { /* string ids; map is an index + 1 in r->maps, 0 if none */
	uint32_t fn, file, line, map;
	uint64_t rel_pc;
};

struct reader {
	struct cuptrace_pf_check ck;
	uint64_t view_raw; /* the last service event "all data sources started": BOOTTIME */
	int has_view;
	int err;           /* first hard error (ENOMEM), sticky */
	uint64_t pkt_off;  /* where the top-level packet being parsed starts (see damage_at) */
	uint64_t base_off; /* where the buffer parse_stream reads starts in the trace */
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
	struct rmapping *maps;
	size_t nmaps, mapcap;
	struct rframe *frames;
	size_t nframes, framecap;
	struct cuptrace_stacktab stk; /* every distinct stack of the trace */
	uint8_t *zbuf;                /* inflated chunk */
	size_t zcap;
};

/* One packet's header fields, as do_packet found them, for the payload's parser. */
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

/* Appends one element to r->arr and returns it, or NULL once r->err is set. */
#define PUSH(r, arr, n, cap) CUPTRACE_READ_PUSH(r, arr, n, cap)

static inline uint32_t sid(struct reader *r, const void *p, size_t n)
{
	return cuptrace_read_intern(&r->strs, p, n, &r->err);
}

static inline const char *str(const struct reader *r, uint32_t id)
{
	return cuptrace_strtab_str(&r->strs, id);
}

static inline struct rtrack *track_of(struct reader *r, uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(&r->trk_of, uuid);
	return v ? &r->trk[*v - 1] : NULL;
}

/* ---- perfetto_decode.c ---- */

/* Decodes the trace in data[0..len) into r, which it initializes first: every record in file
 * order, event times made relative to the first global clock snapshot (an event whose clock is
 * not in it is marked dropped and counted). Returns 0 or a negative errno (-EINVAL: not a trace
 * it can read, with a message in the log). r holds the counts in either case, and must be freed
 * with pf_reader_free. */
int pf_decode(struct reader *r, const void *data, size_t len);
void pf_reader_free(struct reader *r);

/* ---- trace time: what trace_processor drops (inline: both decoders use it) ---- */

static inline int pf_snap_find(const struct reader *r, uint32_t clock, uint64_t *v)
{
	for (size_t i = 0; i < r->nsnap; i++)
		if (r->snap_id[i] == clock) {
			*v = r->snap_val[i];
			return 1;
		}
	return 0;
}

/* The time trace_processor gives abs, a time on builtin clock dom (0: no clock given): converted
 * to its trace clock through the first global snapshot seen so far. 0 and *t, or -1 where that
 * cannot be told yet (dom is another clock and no snapshot has it). A negative *t is what TP
 * drops. Its trace clock is the snapshot's primary_trace_clock, else BOOTTIME (inferred from a
 * snapshot that has it, and what a trace without one is taken to be on). */
static inline int pf_trace_time(const struct reader *r, uint64_t abs, uint32_t dom, int64_t *t)
{
	uint32_t tc = r->have_snap && r->snap_primary ? r->snap_primary : CLOCK_BOOTTIME_ID;
	uint64_t from, to = 0;

	/* No clock id anywhere: the trace's default clock, which is the trace clock, or no
	 * conversion at all where no snapshot set one. Either way the value as it is. */
	if (!dom || dom == tc) {
		*t = (int64_t)abs; /* TP casts the uint64 to int64 */
		return 0;
	}
	if (!r->have_snap || !pf_snap_find(r, dom, &from))
		return -1;
	/* The snapshot ties dom to the trace clock; a snapshot without the trace clock (no
	 * BOOTTIME, no primary) is taken to start trace time at 0. Unsigned: wraps, never traps,
	 * like TP's int64 arithmetic on the same bits. */
	pf_snap_find(r, tc, &to);
	*t = (int64_t)(abs - from + to);
	return 0;
}

/* ---- perfetto_decode_payload.c ----
 * Each parses one packet payload into r. 0, or -1 for a malformed message (the caller counts
 * the packet as corrupt); an allocation failure sets r->err instead. */

int pf_parse_track(struct reader *r, const uint8_t *b, size_t n);
int pf_parse_attributes(struct reader *r, const uint8_t *b, size_t n);
int pf_parse_sysinfo(struct reader *r, const uint8_t *b, size_t n);
int pf_parse_uuid(struct reader *r, const uint8_t *b, size_t n);
/* The TrackEvent in k's payload, on sequence q (NULL if the packet has none); its time is k's,
 * already resolved to a builtin clock (k->abs_ts, k->dom) or failed (k->time_err). */
int pf_parse_event(struct reader *r, struct rseq *q, const struct pkt *k);

/* ---- perfetto_decode_stacks.c ---- */

/* The call-stack tables of one InternedData message, into q's tables and r->stk. 0 or -1. */
int pf_parse_interned_stacks(struct reader *r, struct rseq *q, const uint8_t *b, size_t n);
/* The stack id (in r->stk) of TrackEvent.callstack_iid on q; 0 (counted) if unknown. */
uint32_t pf_callstack_iid(struct reader *r, struct rseq *q, uint64_t iid);
/* A PerfSample (host stack sample, issue 46) with a callstack, on a sequence with a default
 * track: an event of type REV_SAMPLE (stack id in .slice, pid << 32 | tid in .val.i). Others
 * (perf's own, with no track of ours) are passed over. */
int pf_parse_perf_sample(struct reader *r, struct rseq *q, const struct pkt *k);
/* TrackEvent.callstack (InlineCallstack) into r->stk; *out its id. 0 or -1. */
int pf_parse_inline_callstack(struct reader *r, const uint8_t *b, size_t n, uint32_t *out);

#endif
