/* The CUPTI activity kinds cuptrace records, shared with the benchmark's CUPTI floor so both
 * enable exactly the same set. */
#ifndef CUPTRACE_COLLECT_KINDS_H
#define CUPTRACE_COLLECT_KINDS_H

#include <cupti_activity.h>

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
};

#define CUPTRACE_NKINDS (sizeof(cuptrace_kinds) / sizeof(cuptrace_kinds[0]))

#endif
