/* The normalized timeline model: what `convert` produces and every sink (Perfetto, Chrome JSON,
 * stats, merge) consumes. No CUPTI type appears here, so everything from here down builds and is
 * tested without a GPU.
 *
 * Ownership: every pointer in these structs is borrowed for the duration of the call only; a sink
 * that keeps a string copies or interns it. Threading: a sink is used by one thread at a time.
 *
 * Ordering contract (what a producer guarantees, what a sink may rely on):
 *  - a track is declared (sink->ops->track) before any event refers to it, and its parent before
 *    it; uuids are unique in the trace and never 0;
 *  - slices on one track never partially overlap: they are disjoint or strictly nested (the
 *    producer puts truly overlapping work on lane tracks that share a name);
 *  - events may otherwise arrive in any time order (CUPTI delivers buffers late and out of order);
 *  - every timestamp is in nanoseconds relative to the trace's start (info->start_boottime_ns is
 *    the CLOCK_BOOTTIME value at relative 0) and is >= 0; dur >= 0;
 *  - the clock readings at relative 0 are >= 0, and 0 means "not known" (a torch.profiler trace
 *    has no BOOTTIME): Perfetto's time is start_boottime_ns + ts and must not be negative.
 */
#ifndef CUPTRACE_FORMAT_EVENT_H
#define CUPTRACE_FORMAT_EVENT_H

#include <stddef.h>
#include <stdint.h>

enum cuptrace_track_kind {
	CUPTRACE_TRACK_PROCESS = 1, /* pid, name */
	CUPTRACE_TRACK_THREAD,      /* pid, tid, name: API calls, NVTX push/pop */
	CUPTRACE_TRACK_GROUP,       /* a named group under the process, e.g. "GPU 0: NVIDIA H200" */
	CUPTRACE_TRACK_SLICES,  /* a slice track under a group or process: a GPU stream, a lane */
	CUPTRACE_TRACK_COUNTER, /* a counter track under a group or process */
};

enum cuptrace_counter_unit {
	CUPTRACE_UNIT_NONE = 0,
	CUPTRACE_UNIT_NS = 1,
	CUPTRACE_UNIT_COUNT = 2,
	CUPTRACE_UNIT_BYTES = 3,
};

struct cuptrace_track {
	uint64_t uuid;
	enum cuptrace_track_kind kind;
	uint64_t parent_uuid; /* 0 for the process track; the process or a group otherwise */
	int32_t pid;
	int64_t tid;             /* THREAD only */
	const char *name;        /* process name, thread name, group or track name; never NULL */
	const char *description; /* optional */
	int32_t sort_rank;       /* order among siblings, ascending (streams in stream order); on
	                          * PROCESS tracks, non-zero ranks order the processes of a trace
	                          * that holds several (cuptrace merge) */
	uint32_t lane; /* SLICES: 0 for the main track, n>0 for the n-th overflow lane; lanes
	                * of one track share its name so the UI shows them as one */
	enum cuptrace_counter_unit unit; /* COUNTER only */
	/* PROCESS only */
	const char *const *cmdline;
	size_t cmdline_len;
};

enum cuptrace_arg_type {
	CUPTRACE_ARG_INT = 1,
	CUPTRACE_ARG_UINT,
	CUPTRACE_ARG_DOUBLE,
	CUPTRACE_ARG_STRING,
	CUPTRACE_ARG_POINTER,
	CUPTRACE_ARG_BOOL,
};

struct cuptrace_arg {
	const char *key; /* short, stable: "grid", "block", "bytes", "kind", ... */
	enum cuptrace_arg_type type;
	union {
		int64_t i;
		uint64_t u; /* UINT, POINTER */
		double d;
		const char *s; /* may be any bytes (invalid UTF-8 too): sinks escape or replace */
		int b;
	} v;
};

/* A flow id is unique in the trace. A slice lists the flows it starts (out) and the flows it
 * ends (in); one API call may start many flows (a graph launch fans out to every node). */
struct cuptrace_slice {
	uint64_t track_uuid;
	int64_t ts;
	int64_t dur;
	const char *name;
	const char *category; /* "cuda_runtime", "cuda_driver", "kernel", "memcpy", "memset", ... */
	uint64_t correlation_id; /* CUPTI correlation id, 0 if none */
	const struct cuptrace_arg *args;
	size_t nargs;
	const uint64_t *flows_out;
	size_t nflows_out;
	const uint64_t *flows_in;
	size_t nflows_in;
	uint64_t stack_id; /* the call stack at the launch (struct cuptrace_stack), 0 if none */
};

/* Call stacks (issue 27). A stack is sent once through the sink's stack() op, before the first
 * slice that names it by id; ids are unique in the trace and never 0. Frames are ordered
 * outermost first (main ... innermost), as Perfetto's callstacks are. A native frame is a module
 * and an address in it: `rel_pc` is the address minus the module's load bias, i.e. the ELF
 * virtual address that symbolizers look up in the file named by `module` (or found by
 * `build_id`); `function`, `file` and `line` are NULL/0 until symbolized. A Python frame has
 * `function`, `file` and `line` and no module. */
enum cuptrace_frame_kind {
	CUPTRACE_FRAME_NATIVE = 0,
	CUPTRACE_FRAME_PYTHON = 1,
};

struct cuptrace_frame {
	enum cuptrace_frame_kind kind;
	const char *function; /* NULL when unknown (not yet symbolized) */
	const char *file;     /* source file, NULL when unknown */
	uint32_t line;        /* 1-based, 0 when unknown */
	const char *module;   /* NATIVE: path of the mapped file; NULL otherwise */
	const char *build_id; /* NATIVE: GNU build id as lowercase hex, NULL if it has none */
	uint64_t rel_pc;      /* NATIVE: address minus the module's load bias */
};

struct cuptrace_stack {
	uint64_t id;
	const struct cuptrace_frame *frames; /* outermost first */
	size_t nframes;
};

struct cuptrace_instant {
	uint64_t track_uuid;
	int64_t ts;
	const char *name;
	const char *category;
	uint64_t correlation_id;
	const struct cuptrace_arg *args;
	size_t nargs;
};

struct cuptrace_counter {
	uint64_t track_uuid; /* a COUNTER track */
	int64_t ts;
	int is_double;
	int64_t i;
	double d;
};

/* One key/value of trace metadata: GPU model, versions, host, command line, dropped counts. */
struct cuptrace_meta {
	const char *key;
	int is_int;
	int64_t i;
	const char *s;
};

/* A host stack sample (issue 46): what thread tid (on its thread track) was doing at ts. Its
 * stack is sent through stack() before the first sample that names it. */
struct cuptrace_sample {
	uint64_t track_uuid; /* the thread's track */
	int64_t ts;
	int32_t pid, tid;
	uint64_t stack_id;
};

struct cuptrace_trace_info {
	int32_t pid;
	const char *process_name;
	const char *hostname;
	int64_t start_realtime_ns; /* CLOCK_REALTIME at relative time 0; 0 if not known */
	int64_t start_boottime_ns; /* CLOCK_BOOTTIME at relative time 0; 0 if not known */
	uint64_t trace_uuid_hi, trace_uuid_lo;
	const struct cuptrace_meta *meta;
	size_t nmeta;
};

/* Where a format has no better place for the trace's metadata, the writers put it into
 * instants of this category and these names (the Chrome JSON writer: all of it; the Perfetto
 * writer: a copy that the UI shows). The readers recognize them and do not replay them as
 * instants: the info becomes begin()'s, the last summary meta()'s. */
#define CUPTRACE_META_CATEGORY "cuptrace"
/* Metadata key of a per-node trace whose process instantiated CUDA graphs for launch from the
 * GPU (their count): CUPTI recorded none of their work (collect_callbacks.c); stats and analyze
 * say so. */
#define CUPTRACE_META_UNRECORDED_DEVICE_GRAPHS "graphs_for_device_launch_unrecorded"
/* Metadata key of a trace read from a damaged file: what could not be read, with the file's
 * name and the byte offset (read/read.c); stats shows it in its header. */
#define CUPTRACE_META_READ_DAMAGE "read_damage"
/* Metadata key of where ui.perfetto.dev should open (ns, relative to the trace's start): the
 * Perfetto writer turns it into a TracingServiceEvent at that time, which the UI takes as the
 * start of its first view (src/format/TIMELINE.md). The converter and cuptrace merge set it
 * where the GPU work begins, so that start-up does not fill the first screen. */
#define CUPTRACE_META_VIEW_START "view_start_ns"
/* The rule for CUPTRACE_META_VIEW_START, shared by the converter (one recorded or converted
 * trace: convert/convert_view.c) and cuptrace merge: given the trace's span [lo, hi] and where
 * its GPU work begins (work: the first kernel or CUDA graph, or the copies leading up to it;
 * INT64_MAX if none), where the first view should start, or 0 for the whole trace. Start-up
 * (host calls, module loading, a model's copies to the GPU) fills the first screen only when
 * the work begins late, so a view start is set only where it comes after the first fifth of the
 * span; it is 1% of what follows before the work, so that the first of it is not on the
 * screen's edge. */
static inline int64_t cuptrace_view_start_rule(int64_t lo, int64_t hi, int64_t work)
{
	if (work == INT64_MAX || hi <= lo || work <= lo || work - lo <= (hi - lo) / 5)
		return 0;
	int64_t at = work - (hi - work) / 100;
	return at > 0 ? at : 0;
}
#define CUPTRACE_META_INFO    "cuptrace: trace info"
#define CUPTRACE_META_SUMMARY "cuptrace: summary"

struct cuptrace_sink;

/* Every op returns 0 or a negative errno. After an error the sink stays safe to call and to
 * destroy; further events are ignored and finish() returns the first error. */
struct cuptrace_sink_ops {
	const char *name;
	/* Called once, first. */
	int (*begin)(struct cuptrace_sink *s, const struct cuptrace_trace_info *info);
	int (*track)(struct cuptrace_sink *s, const struct cuptrace_track *t);
	int (*slice)(struct cuptrace_sink *s, const struct cuptrace_slice *e);
	int (*instant)(struct cuptrace_sink *s, const struct cuptrace_instant *e);
	int (*counter)(struct cuptrace_sink *s, const struct cuptrace_counter *e);
	/* Optional (may be NULL: the sink ignores stacks): a call stack, sent before the first
	 * slice whose stack_id names it. */
	int (*stack)(struct cuptrace_sink *s, const struct cuptrace_stack *st);
	/* Optional (may be NULL: the sink drops samples): a host stack sample, whose stack was
	 * sent through stack() before. */
	int (*sample)(struct cuptrace_sink *s, const struct cuptrace_sample *e);
	/* Metadata known only later (dropped counts, record counts); may be called several times,
	 * a later value for a key replaces the earlier one. */
	int (*meta)(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n);
	/* Optional (may be NULL): hands buffered bytes to the file if the output's flush interval
	 * has passed. Called by the writer thread when idle, so a killed process loses little. */
	int (*tick)(struct cuptrace_sink *s);
	/* Writes everything still buffered and closes the output. Called once. */
	int (*finish)(struct cuptrace_sink *s);
	/* Frees the sink; accepts a sink whose finish() was not called (then it just releases). */
	void (*destroy)(struct cuptrace_sink *s);
};

/* Every sink embeds this first. */
struct cuptrace_sink {
	const struct cuptrace_sink_ops *ops;
};

static inline void cuptrace_sink_destroy(struct cuptrace_sink *s)
{
	if (s)
		s->ops->destroy(s);
}

#endif
