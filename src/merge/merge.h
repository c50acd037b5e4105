/* `cuptrace merge --side-by-side A B ...`: several traces in one timeline, one above the other.
 *
 * Two passes over the inputs, each a replay of a file into a sink through a caller's function
 * (so any format the readers take works, and this layer reads no file itself):
 *  1. cuptrace_merge_plan: finds each input's earliest event, its pids and metadata and, with an
 *     alignment name, the start of the K-th slice of that name; then each input's shift and the
 *     pid it gets in the output;
 *  2. cuptrace_merge_write: replays every input again into the output sink, shifted.
 *
 * What the output holds: every track, slice (with its arguments), instant, counter value and
 * flow of every input. Track uuids and flow ids are renumbered so that they stay unique; each
 * input's processes get pids no other input uses (the original pid where it is free: Perfetto
 * merges processes of one pid), keep the original pid in their description, are named
 * "<label>: <process name>" and ranked in input order (sort_rank; the Perfetto writer asks the
 * UI to follow it); root tracks that are not processes or threads get the "<label>: " prefix
 * too. Each input's metadata is kept under "<label>: <key>", with "<label>: merge_file" and
 * "<label>: merge_offset_ns", and its own trace info and summary as instants on its first
 * process (merge/merge_meta.h); the output's clocks are those of the first input (shifted), so
 * its wall-clock times are exact and the others' are not.
 *
 * Shift: with align_name, the K-th slice named align_name (by start time; an NVTX range, an op,
 * any slice) starts at the same moment in every input. Without it (and unless no_auto_align),
 * the inputs are aligned at their first step when every input with events has one (its first
 * ProfilerStep#N range; else the end of its first Optimizer.step#N, where analyze's first whole
 * step begins), else at their first GPU work when every one has some, else each input's
 * earliest event goes to 0 (struct cuptrace_merge's auto_align says which). Aligned, everything
 * is then shifted so that the earliest event of all is at 0: no timestamp is negative.
 *
 * Threading: one thread; the replay function is called from it. */
#ifndef CUPTRACE_MERGE_MERGE_H
#define CUPTRACE_MERGE_MERGE_H

#include "merge/align.h"
#include "format/event.h"

#include <stddef.h>
#include <stdint.h>

/* Replays the trace at path into sink (not finishing it): 0 or a negative errno. */
typedef int (*cuptrace_replay_fn)(void *ctx, const char *path, struct cuptrace_sink *sink);

struct cuptrace_merge_input {
	const char *path;  /* borrowed until cuptrace_merge_free */
	const char *label; /* NULL: the file's name (made unique with " (2)", " (3)", ...) */
};

struct cuptrace_merge_opts {
	size_t sz;              /* sizeof(struct cuptrace_merge_opts) */
	const char *align_name; /* NULL: each input starts at 0; borrowed during the plan */
	uint64_t align_k;       /* 1-based occurrence; 0 means 1 */
	/* Ranks of one job (--ranks): inputs ordered by their "rank" metadata, labelled
	 * "rank R @ host", placed on one axis by their clocks (merge/align.h) as ranks_align
	 * says; align_name is then ignored. */
	int ranks;
	enum cuptrace_align_mode ranks_align;
	int no_auto_align; /* without align_name: each input from its earliest event */
};

/* How the plan aligned the inputs when no align_name was given (see Shift above). */
enum cuptrace_merge_auto {
	CUPTRACE_MERGE_AUTO_NONE = 0,  /* each from its earliest event */
	CUPTRACE_MERGE_AUTO_STEP,      /* first ProfilerStep#N */
	CUPTRACE_MERGE_AUTO_OPTIMIZER, /* end of the first Optimizer.step#N */
	CUPTRACE_MERGE_AUTO_GPU,       /* first kernel, copy or memset */
	CUPTRACE_MERGE_AUTO_N
};
/* "first step (ProfilerStep#N)", ...: for the user's message. */
const char *cuptrace_merge_auto_name(enum cuptrace_merge_auto a);

/* Per input, after the plan. */
struct cuptrace_merge_result {
	const char *path;
	char *label;          /* the label used (owned) */
	int has_events;       /* 0: the input holds no event, and is shifted by 0 */
	int64_t first_ts;     /* earliest event, before the shift */
	uint64_t align_found; /* slices named align_name */
	int64_t align_ts;     /* start of the K-th of them (or the auto_align mark), unshifted */
	int64_t offset_ns;    /* added to every timestamp of the input */
	int32_t orig_pid;     /* its first process's pid, and the pid that process gets */
	int32_t pid;
	/* --ranks: the whole mapping (offset_ns above is its offset), the rank (-1 if the trace
	 * does not say), the host it ran on (map.machine groups the inputs by machine), its
	 * collectives and its own clocks. */
	struct cuptrace_align_out map;
	int rank;
	int world;        /* the job's world size where the trace says it, else -1 */
	const char *host; /* owned by the merge */
	/* The GPUs its process used, "GPU 1: NVIDIA H200 (GPU-5865b8d5-..., PCI 0000:00:07.0)"
	 * (several joined by "; "), from its "gpus_used" metadata or else its GPU groups; NULL
	 * where the trace says neither. Owned by the merge. */
	const char *gpus;
	size_t collectives;
	int64_t start_boottime_ns, start_realtime_ns;
};

struct merge_state;

struct cuptrace_merge {
	struct cuptrace_merge_result *in;
	size_t n;
	/* With -ENOENT from the plan: the first input with fewer than K slices of the alignment
	 * name (its align_found says how many it has). */
	size_t bad;
	enum cuptrace_merge_auto auto_align; /* without align_name: what the inputs align on */
	/* --ranks: what the alignment left (the spread of collective ends). */
	struct cuptrace_align_summary align;
	/* For cuptrace_merge_write_each: 1 writes each input with its own clocks, unshifted (an
	 * archive whose manifest relates the clocks); 0 shifts all onto the first's. */
	int native_clocks;
	struct merge_state *st; /* private */
};

/* Pass 1. *m is zeroed first; free it with cuptrace_merge_free whatever the result. Returns 0,
 * -ENOENT (an input lacks the alignment slice: m->bad), -EINVAL (no input), -ENOMEM, or the
 * replay's error (m->bad says which input). */
int cuptrace_merge_plan(struct cuptrace_merge *m, const struct cuptrace_merge_input *inputs,
                        size_t n, const struct cuptrace_merge_opts *opts, cuptrace_replay_fn replay,
                        void *ctx);
/* Pass 2: begin() on out, then every input shifted. Does not finish out. Returns 0 or the first
 * error (of the replay, of out, -ENOMEM); m->bad says which input. */
int cuptrace_merge_write(struct cuptrace_merge *m, cuptrace_replay_fn replay, void *ctx,
                         struct cuptrace_sink *out);
/* Pass 2, one output per input (for an archive of files that ui.perfetto.dev opens together):
 * open(octx, i) gives input i's sink (NULL and errno on failure), close(octx, i, sink) finishes
 * and destroys it, returning 0 or an error. Each output gets the same clocks and metadata as
 * the single merged trace, and ids stay unique over all of them, so the files together show
 * what the merged trace shows. */
typedef struct cuptrace_sink *(*cuptrace_merge_open_fn)(void *octx, size_t i);
typedef int (*cuptrace_merge_close_fn)(void *octx, size_t i, struct cuptrace_sink *sink);
int cuptrace_merge_write_each(struct cuptrace_merge *m, cuptrace_replay_fn replay, void *ctx,
                              cuptrace_merge_open_fn open, cuptrace_merge_close_fn close,
                              void *octx);
void cuptrace_merge_free(struct cuptrace_merge *m);

/* Splits "NAME#K" into name and K (1-based): a trailing '#' and decimal digits are K, anything
 * else is the name (K = 1). Returns the name (malloc'd), or NULL for an empty name, K = 0 or
 * no memory. */
char *cuptrace_merge_parse_align(const char *spec, uint64_t *k);
/* "reference", "boottime", "realtime", "nccl", "none". */
const char *cuptrace_merge_clock_name(enum cuptrace_align_clock c);

#endif
