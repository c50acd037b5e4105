/* What the JSON reader's files share: the trace as json_events.c collects it from the file,
 * the tracks json_tracks.c derives from it, and the replay of json_reader.c. Private to
 * src/read; the whole pipeline is described at the top of json_reader.c. */
#ifndef CUPTRACE_READ_JSON_STATE_H
#define CUPTRACE_READ_JSON_STATE_H

#include "common/util.h"
#include "read/stacktab.h"
#include "format/event.h"
#include "read/json_parse.h"
#include "read/read_check.h"
#include "read/read_util.h"

#include <errno.h>
#include <stdint.h>

#define JR_MAX_DEVICES 64      /* deviceProperties entries kept */
#define JR_MAX_LANES   64      /* overflow lanes per thread; slices beyond are dropped, counted */
#define JR_SYNTH_BASE  4194304 /* 2^22: above every Linux pid and tid (PID_MAX_LIMIT) */
#define JR_MAX_META    1024    /* metadata entries kept per table (Kineto writes ~10) */

enum jr_flavor {
	JR_GENERIC = 0, /* another tool's Chrome JSON, torch.profiler's (Kineto) among them */
	JR_CUPTRACE,    /* written by cuptrace's Chrome writer: its layout is known exactly */
};

/* A pid or tid as the file writes it: a number or a string. */
struct jr_id {
	int is_str;
	int64_t i;  /* !is_str */
	uint32_t s; /* is_str: string id */
};

struct jr_arg {
	uint32_t key; /* string id */
	uint8_t type; /* enum cuptrace_arg_type */
	union {
		int64_t i;
		uint64_t u;
		double d;
		uint32_t s;
		int b;
	} v;
};

/* One event of the file that is replayed, or a flow end to bind. */
struct jr_ev {
	int64_t ts, dur; /* ns: as in the file until rebased, then relative to the trace start */
	uint32_t fo;     /* order in the file */
	uint32_t name, cat;
	uint32_t arg0, nargs;    /* in args[] */
	uint32_t thr;            /* 'X', 'i' on a thread, flows: thread index + 1 */
	uint32_t proc;           /* 'i' on a process, 'C': process index + 1 */
	uint32_t key;            /* flows: flow key id; 'C': counter track key id */
	uint32_t prev_x;         /* flows: the 'X' just before it in the file (index + 1), if any */
	uint32_t track;          /* resolved track index + 1 */
	uint32_t bound;          /* flows: the slice event it binds to (index + 1) */
	uint32_t fl0, nout, nin; /* 'X': its flows, out then in, from fids[fl0] */
	uint64_t corr;
	uint32_t stack; /* 'X': its call stack's id in r->stk, from the "stack" arg; 0 if none */
	union {
		int64_t i;
		double d;
	} val;        /* 'C' */
	char ph;      /* 'X', 'i', 'C', 's', 't', 'f' */
	char scope;   /* 'i': 't', 'p' or 'g' */
	uint8_t bp_e; /* 'f': binds to the enclosing slice (else to the next one) */
	uint8_t is_double;
	uint8_t dropped; /* not replayed (counted) */
};

struct jr_proc {
	struct jr_id id;
	uint32_t name, labels, desc; /* from 'M' events: process_name, process_labels */
	int64_t sort_index;
	int has_sort;
	uint32_t first_fo;
	uint64_t events;      /* events on it or on its threads */
	uint64_t gpu_events;  /* slices of Kineto's GPU categories on it */
	uint64_t host_events; /* slices of its host categories */
	/* classification */
	int kind; /* CUPTRACE_TRACK_PROCESS or _GROUP */
	int32_t pid;
	uint32_t parent; /* GROUP: its process (index + 1) */
	int device;      /* GROUP: the GPU's index */
	uint32_t track;  /* index + 1 */
};

struct jr_thread {
	uint32_t proc; /* index */
	struct jr_id id;
	uint32_t name, desc;
	int64_t sort_index;
	int has_sort;
	uint32_t first_fo;
	uint64_t events;
	uint32_t track;               /* main track, index + 1 */
	uint32_t lanes[JR_MAX_LANES]; /* lanes[k]: track of lane k + 1 (index + 1), 0 none yet */
	uint32_t nlanes;
};

struct jr_track {
	int kind;
	uint32_t parent; /* track index + 1 */
	int32_t pid;
	int64_t tid;
	uint32_t name, desc, cmdline; /* string ids */
	int32_t rank;
	uint32_t lane;
	int unit;
	uint32_t first_fo;
	int used, declared;
};

struct jr_counter {    /* a counter track: (process, event name, arg key) */
	uint32_t proc; /* index */
	uint32_t name; /* the event's name */
	uint32_t key;  /* the arg's key */
	int unit;
	uint32_t first_fo;
	uint32_t track;
};

struct jr_device {
	int64_t id;
	uint32_t name;
	int64_t major, minor, sms, mem;
	int has;
};

struct jr_meta {
	uint32_t key, s;
	int is_int;
	int64_t i;
};

/* Metadata entries, one per key (a later value replaces the earlier), in first-seen order. */
struct jr_metas {
	struct jr_meta *m;
	size_t n, cap;
	struct cuptrace_u64map of; /* key string id -> index + 1 */
};

struct jr {
	struct jp jp;
	const char *name; /* file name for messages */
	int err;          /* first hard error (-ENOMEM, -EINVAL), sticky */
	enum jr_flavor flavor;
	struct cuptrace_json_check ck;
	struct cuptrace_strtab strs;
	struct cuptrace_stacktab stk; /* the call stacks of the "stack" args */
	struct cuptrace_strtab proc_keys, thread_keys, counter_keys, flow_keys; /* id = index + 1 */
	struct jr_ev *evs;
	size_t nevs, evcap;
	struct jr_arg *args;
	size_t nargs, argcap;
	struct jr_proc *procs;
	size_t nprocs, proccap;
	struct jr_thread *thr;
	size_t nthr, thrcap;
	struct jr_counter *ctrs;
	size_t nctrs, ctrcap;
	struct jr_track *trk;
	size_t ntrk, trkcap;
	struct jr_device dev[JR_MAX_DEVICES];
	struct jr_metas meta0; /* cuptrace's trace info, or the top-level keys */
	struct jr_metas meta;  /* cuptrace's last summary */
	uint32_t last_x;       /* index + 1 of the last 'X' parsed */
	uint64_t ph_seen;      /* elements of traceEvents with a "ph" */
	uint64_t elements;
	int have_base_time;
	int64_t base_time_ns; /* Kineto's baseTimeNanoseconds */
	/* torch.profiler's distributedInfo (rank, world_size, backend) and host name ("host_name"
	 * or "hostname" at the top level); -1 and 0 where the file does not say. */
	int64_t dist_rank, dist_world;
	uint32_t dist_backend, top_host;
	int64_t base; /* earliest time, subtracted from every event */
	/* cuptrace's trace info instant */
	int have_info;
	int32_t info_pid;
	uint32_t info_process, info_host, info_uuid;
	int64_t info_realtime, info_boottime;
	uint64_t uuid_hi, uuid_lo;
	uint32_t main_proc; /* index + 1 of the process of trace info and global instants */
	uint32_t *open_b;   /* 'B' slices not yet ended by their 'E' (event index + 1) */
	size_t nopen_b, open_b_cap;
	uint64_t *fids; /* the slices' flow ids (see jr_ev.fl0) */
	size_t nfids;
	struct cuptrace_u64map pids;    /* pids of PROCESS tracks, to keep synthetic ones apart */
	struct cuptrace_u64map by_pid;  /* int pid of a PROCESS -> process index + 1 */
	struct cuptrace_u64map by_sort; /* process_sort_index of a PROCESS -> index + 1 */
	int32_t next_pid;
	int64_t next_tid;
};

#define JR_PUSH(r, arr, n, cap) CUPTRACE_READ_PUSH(r, arr, n, cap)

static inline void *jr_grow(struct jr *r, void *arr, size_t *cap, size_t n, size_t size)
{
	return cuptrace_read_grow(arr, cap, n, size, &r->err);
}

static inline uint32_t jr_str(struct jr *r, const char *s, size_t n)
{
	return cuptrace_read_intern(&r->strs, s, n, &r->err);
}

static inline const char *jr_s(const struct jr *r, uint32_t id)
{
	return cuptrace_strtab_str(&r->strs, id);
}

/* ---- json_events.c ---- */

/* Parses the document in r->jp (set up by the caller) into r: events, processes, threads,
 * counters, devices, metadata. 0, or -EINVAL with the reason in the log (naming the file). */
int jr_parse(struct jr *r);
/* Sets m->key's entry in t; 0 or -1 (r->err set). */
int jr_meta_put(struct jr *r, struct jr_metas *t, const struct jr_meta *m);
/* The entry of key in t, or NULL. */
/* json_values.c: a trace event's id ("pid", "tid": number or string), its arguments, and one
 * argument by key among the event's [a0, a0 + n). */
int jr_parse_id(struct jr *r, struct jr_id *id);
int jr_parse_value(struct jr *r, struct jr_arg *a, size_t max);
int jr_parse_args(struct jr *r);
const struct jr_arg *jr_find_arg(const struct jr *r, uint32_t a0, uint32_t n, const char *key);
const struct jr_meta *jr_meta_get(const struct jr_metas *t, uint32_t key);
void jr_metas_free(struct jr_metas *t);
/* Interns a key of one of the key tables; 0 on allocation failure (r->err set). */
uint32_t jr_key(struct jr *r, struct cuptrace_strtab *t, const void *k, size_t n);

/* ---- json_tracks.c ---- */

/* Decides each process and thread's track (process, GPU group, stream, thread), rebases times,
 * puts overlapping slices on lanes, binds flows to slices. 0 or a negative errno. */
int jr_build(struct jr *r);

#endif
