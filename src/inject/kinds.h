/* The CUPTI activity kinds cuptrace records, shared with the benchmark's CUPTI floor so both
 * enable exactly the same set. */
#ifndef CUPTRACE_INJECT_KINDS_H
#define CUPTRACE_INJECT_KINDS_H

#include <cupti_activity.h>

#include "common/options.h"

/* Bytes per CUPTI activity buffer unless CUPTRACE_BUFFER_SIZE says otherwise (the floor uses
 * the same). 1 MiB: a 4 MiB buffer took no less time per record on a launch-bound loop, and the
 * buffers waiting for the writer in a burst are most of what the tracer's memory is. */
#define CUPTRACE_DEFAULT_BUFFER_SIZE (1u << 20)

/* Activity kinds recorded. CONCURRENT_KERNEL (not KERNEL, which serializes the GPU). DEVICE
 * and CONTEXT name the GPU tracks; the rest are the timeline. */
static const CUpti_ActivityKind cuptrace_kinds[] = {
    CUPTI_ACTIVITY_KIND_DEVICE,
    CUPTI_ACTIVITY_KIND_CONTEXT,
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_STREAM,
    CUPTI_ACTIVITY_KIND_NAME,
    CUPTI_ACTIVITY_KIND_MARKER,
    CUPTI_ACTIVITY_KIND_MARKER_DATA,
    CUPTI_ACTIVITY_KIND_MEMORY2,
    CUPTI_ACTIVITY_KIND_MEMORY_POOL,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
    CUPTI_ACTIVITY_KIND_CUDA_EVENT,
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE,
};

#define CUPTRACE_NKINDS (sizeof(cuptrace_kinds) / sizeof(cuptrace_kinds[0]))

/* MEMCPY2 (peer-to-peer copies, with both devices) is switched on only once the process has
 * contexts on two devices (a peer copy needs both): with it on, CUPTI 13.0 makes every CUDA
 * graph replay slower (measured on an H100, a graph of 50 kernels: 82.6 us per replay with it,
 * 71.5 without, 51.3 untraced; README "CUDA graphs"), for copies a one-GPU process never has. */
static inline int cuptrace_kind_needs_two_gpus(CUpti_ActivityKind k)
{
	return k == CUPTI_ACTIVITY_KIND_MEMCPY2;
}

/* Whether kind k is on by the settings. GRAPH_TRACE (one record per CUDA graph launch, and none for
 * its nodes) is on only with
 * --cuda-graphs graph (CUPTRACE_CUDA_GRAPHS): per node, CUPTI's host work inside cudaGraphLaunch
 * made a replay of 50 kernels host-bound (H100: 55 to 82 us of host time a launch under CUPTI,
 * 24.6 untraced, against 61.5 us of GPU time), per graph it costs next to nothing (25.2 us of
 * host time; README "CUDA graphs"). */
static inline int cuptrace_kind_by_setting(CUpti_ActivityKind k)
{
	struct cuptrace_setting_value v;
	if (k == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION) {
		/* SYNCHRONIZATION unless --sync-records callback (CUPTRACE_SYNC_RECORDS), where
		 * callbacks on the synchronizing calls time them (inject/sync_watch.h): measured
		 * inside one process the two cost the same (tools/bench/README.md). */
		cuptrace_setting_env(CUPTRACE_SET_SYNC_RECORDS, &v);
		return v.i == CUPTRACE_SYNC_RECORDS_CUPTI;
	}
	if (k != CUPTI_ACTIVITY_KIND_GRAPH_TRACE)
		return 1;
	cuptrace_setting_env(CUPTRACE_SET_CUDA_GRAPHS, &v);
	return v.i == CUPTRACE_CUDA_GRAPHS_GRAPH;
}

/* How the API kinds (RUNTIME, DRIVER) are switched on. By cbid (the default;
 * CUPTRACE_API_ENABLE=cbid): the kind stays off and every call that is not filtered is switched
 * on by itself, so CUPTI need not look at the filtered ones at all; inside one process it
 * saved 6% of a DDP and of a transformer step, 4% of a launch, against the kind
 * (tools/bench/README.md, "cuptrace's own time"). By kind: cuptiActivityEnable, then the
 * filtered calls off one by one. Shared with the benchmark's floor so both do the same. */
static inline int cuptrace_api_by_cbid(void)
{
	struct cuptrace_setting_value v;
	cuptrace_setting_env(CUPTRACE_SET_API_ENABLE, &v);
	return v.i == 1;
}

#endif
