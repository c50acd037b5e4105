/* The definitions of GPU idle by cause that `analyze` (analyze_run.c) and `top` (top_agg.c)
 * share (README "Why is it slow: analyze"): which host slices are API calls and which of them
 * block (synchronize, synchronous copies), and how one GPU gap before work W, launched by call L,
 * splits into causes. Pure functions; no state, any thread. */
#ifndef CUPTRACE_STATS_IDLE_CAUSE_H
#define CUPTRACE_STATS_IDLE_CAUSE_H

#include <stdint.h>

/* Idle causes, in this order everywhere (text columns, JSON keys, annotation slice names). */
enum cuptrace_idle_cause {
	CUPTRACE_IDLE_HOST_WAIT = 0, /* the next launch call began after the stream went idle */
	CUPTRACE_IDLE_LAUNCH,        /* the launch began in time, the work started late */
	CUPTRACE_IDLE_OTHER_STREAM,  /* waiting on work of another stream (event, dependency) */
	CUPTRACE_IDLE_HOST_SYNC,     /* the launching thread sat in a synchronize call */
	CUPTRACE_IDLE_OTHER,         /* no launch is known for the next work */
	CUPTRACE_IDLE_NCAUSES
};
extern const char *const cuptrace_idle_cause_names[CUPTRACE_IDLE_NCAUSES]; /* "host_wait", ... */

/* Host slice classes. */
enum cuptrace_host_class {
	CUPTRACE_HOST_RANGE = 0, /* not a CUDA API call: an op, an NVTX range */
	CUPTRACE_HOST_API,
	CUPTRACE_HOST_SYNC,      /* *Synchronize* */
	CUPTRACE_HOST_COPY_SYNC, /* synchronous copies and memsets (no Async) */
	CUPTRACE_HOST_ALLOC      /* cudaMalloc/cudaFree/cuMemAlloc/... without Async */
};
/* The class of a host slice from its category and name; -1: not kept (Python functions,
 * cuptrace's own metadata slices). */
int cuptrace_host_class(const char *cat, const char *name);

/* Splits the GPU gap [g0, g1) before work launched by a call that began at launch_ts (known:
 * 0 when no launch is linked: all of it is "other") into by[]: [g0, L) is host_sync when
 * synced(ctx, g0, L) says the launching thread sat in a synchronize or a synchronous copy
 * then, else host_wait; [L, g1) is other_stream when other_end (the latest end of another
 * stream's work of that GPU; INT64_MIN for a whole GPU) reaches L, else launch_latency; L
 * clamped to [g0, g1). */
void cuptrace_idle_split(int64_t g0, int64_t g1, int known, int64_t launch_ts,
                         int (*synced)(const void *ctx, int64_t a, int64_t b), const void *ctx,
                         int64_t other_end, int64_t by[CUPTRACE_IDLE_NCAUSES]);

#endif
