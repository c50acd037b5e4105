/* cuptrace top's aggregator: what one refresh shows, computed from the timeline events
 * (format/event.h) of one or more processes, each fed through a sink of its own
 * (cuptrace_top_sink_new). Everything is kept per interval (what came since the last
 * cuptrace_top_tick) and since the start; memory is bounded by the number of distinct names,
 * GPUs, streams and processes, not by the run's length (GPU work spans are kept only until the
 * interval that covers them is closed).
 *
 * Definitions (README of src/top):
 *  - GPU work and its busy time are stats' (stats/busy.h: kernels, copies, memsets, the union
 *    of their intervals). An interval's busy % is that union clipped to the interval's window
 *    of trace time, [end of the previous window, the latest end of the process's GPU work so
 *    far (a replay: its clock)), over the window's length. Work that reaches top after its
 *    window was shown counts in kernels and times, not in busy %.
 *  - kernels: slices of category "kernel" on a GPU's tracks, by name (as stats counts them);
 *    API calls: cuda_runtime and cuda_driver slices, by name; NCCL: kernels whose name starts
 *    with "nccl", by collective (the word after ncclDevKernel_ / ncclKernel_); copies: memcpy
 *    slices' "bytes" by "kind" (HtoD, DtoH, other), pageable when "src" or "dst" is pageable.
 *  - device memory: the last and largest value of each GPU's "Device memory in use" counter.
 *  - steps: ProfilerStep#N ranges and optimizer.step marks (slices or instants).
 *  - idle by cause: analyze's (stats/idle_cause.h): each GPU gap (the GPU's work union, from its
 *    first work on) before work W counts once, whole, in the interval in which W reached top,
 *    split by W's launch call (linked by flow, else correlation id, as analyze links them)
 *    and whether the launching thread sat in a synchronize then. At each tick the GPU's work
 *    that arrived is swept in start order (a replay hands work out by start, a live capture
 *    in start order behind the converter's watermark), so summed over a whole replay the
 *    causes equal analyze's over the whole trace.
 *
 * Threading: one thread (the command's). Ownership: the aggregator owns its sinks' state; a
 * sink borrows the aggregator, which must outlive it. */
#ifndef CUPTRACE_TOP_TOP_H
#define CUPTRACE_TOP_TOP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/util.h"
#include "format/event.h"
#include "stats/idle_cause.h"

struct top_stat {
	uint64_t calls;
	int64_t ns;
};

/* One named row: a kernel, an API call, a stream, a collective. */
struct top_row {
	const char *name;               /* interned in the aggregator */
	uint32_t proc;                  /* streams: the process index; else 0 */
	struct top_stat cur, last, tot; /* accumulating, the last closed interval, since start */
};

struct top_tab {
	struct top_row *v;
	size_t n, cap;
	struct cuptrace_u64map index; /* name id (strs) -> row + 1 */
};

struct top_gpu {
	const char *name; /* the GPU's group name ("GPU 0: NVIDIA H100 ...") */
	uint32_t proc;
	struct top_busy_spans *spans; /* private */
	int64_t busy_last, win_last, busy_tot, win_tot;
	int have_mem;
	int64_t mem, mem_peak;
	struct top_stat kern_cur, kern_last, kern_tot;
	/* Idle by cause (top.h's definition): of the interval, the last, since the start. */
	int64_t idle_cur[CUPTRACE_IDLE_NCAUSES], idle_last[CUPTRACE_IDLE_NCAUSES],
	    idle_tot[CUPTRACE_IDLE_NCAUSES];
	int have_end;
	int64_t g_end; /* the end of its work union so far (swept) */
};

struct top_proc {
	int32_t pid;
	char *name;
	int have_window;
	int64_t frontier; /* the latest end of any of its events, trace ns */
	int64_t latest;   /* the latest end of any slice (host calls come sooner than GPU work) */
	int64_t win_start;
	uint64_t dropped_cupti, dropped_cuptrace;
	int ended; /* its trace is complete */
	struct top_stat kern_cur, kern_last, kern_tot, api_cur, api_last, api_tot;
	int64_t busy_last, win_last; /* busy summed over its GPUs; the window */
	uint32_t ngpus;              /* its GPUs (busy_pct: busy / (window x GPUs)) */
	int clocked;                 /* a replay: only cuptrace_top_advance moves the frontier */
	struct top_hosts *hosts;     /* private: launch calls and blocking calls (idle causes) */
	/* The tracer's own CPU in the process (cuptrace-* threads), percent of one core over
	 * the last interval; < 0: not known (a replay, /proc unreadable). Set by the caller. */
	double tracer_cpu_pct;
	int tracer_threads;
};

struct top_copy {
	uint64_t htod, dtoh, other, pageable, count;
};

struct cuptrace_top {
	struct top_tab kernels, api, streams, nccl;
	struct top_gpu *gpus;
	size_t ngpus, gpucap;
	struct top_proc *procs;
	size_t nprocs, proccap;
	struct top_copy copy_cur, copy_last, copy_tot;
	struct top_stat step_cur, step_last, step_tot; /* steps and their summed duration */
	uint64_t interval;                             /* closed intervals */
	int64_t last_dt, tot_dt; /* the last interval's length, the sum: wall (or replay) ns */
	struct cuptrace_strtab strs;
	double top_cpu_pct; /* top's own CPU (and its record process), < 0: not known */
	int err;            /* first error (-ENOMEM), sticky */
};

/* 0 or -ENOMEM. */
int cuptrace_top_init(struct cuptrace_top *t);
void cuptrace_top_free(struct cuptrace_top *t);
/* A sink for one process's events into t. NULL on failure. */
struct cuptrace_sink *cuptrace_top_sink_new(struct cuptrace_top *t);
/* The process index a sink's begin() made (-1 before begin). */
int cuptrace_top_sink_proc(const struct cuptrace_sink *s);
/* Cumulative drop counts of process proc (the capture's DROPPED items). */
void cuptrace_top_dropped(struct cuptrace_top *t, int proc, uint64_t cupti, uint64_t cuptrace);
/* Moves process proc's trace-time frontier to at least ts (a replay's clock). */
void cuptrace_top_advance(struct cuptrace_top *t, int proc, int64_t ts);
/* Process proc's clock is a replay's: only cuptrace_top_advance moves its frontier (its GPU
 * work comes by start, so that work running past the clock is clipped, not a reason to widen
 * the window). */
void cuptrace_top_clocked(struct cuptrace_top *t, int proc);
/* Closes the interval, which lasted dt_ns: busy per GPU, then the interval's values become
 * "last" and are added to the totals. 0 or -ENOMEM. */
int cuptrace_top_tick(struct cuptrace_top *t, int64_t dt_ns);

/* Sort orders of a table's rows (by the last interval's values, then the totals). */
enum top_sort {
	TOP_SORT_TIME,
	TOP_SORT_CALLS,
	TOP_SORT_AVG,
	TOP_SORT_TOTAL,
	TOP_SORT_NAME,
	TOP_NSORTS
};
extern const char *const cuptrace_top_sort_names[TOP_NSORTS];
/* Row indexes of tab sorted by sort, malloc'd (n rows); NULL if empty or out of memory. */
size_t *cuptrace_top_order(const struct top_tab *tab, enum top_sort sort);

/* One JSON object for the last closed interval and the totals, and a newline (--json): keys in
 * src/top/README.md. 0, or -1 for a failed write. */
int cuptrace_top_json(const struct cuptrace_top *t, FILE *f, double t_s);

#endif
