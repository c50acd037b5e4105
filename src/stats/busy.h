/* GPU busy time: which slices are GPU work (kernels, copies, memsets, in every reader's naming)
 * and the union of their intervals. Annotation and sync ranges on GPU rows are shown but never
 * counted as work. Private to the analyses (stats, lines, compare, merge). */
#ifndef CUPTRACE_STATS_BUSY_H
#define CUPTRACE_STATS_BUSY_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_busy_span {
	int64_t ts, dur; /* dur >= 0 */
};

/* 1 if a slice of this category is work done by the GPU: a kernel, a copy or a memset (as
 * cuptrace names them, as torch.profiler names them since 2021, and MTIA's device events);
 * 0 for anything else (gpu_user_annotation, cuda_sync, cuda_profiler_range, NVTX, ...). */
int cuptrace_busy_is_work(const char *category);

/* The family (family.h) of GPU work named exactly as cuptrace and torch.profiler
 * since 2022 name it: CUPTRACE_FAM_KERNEL for kernel and graph (a whole CUDA graph launch,
 * --cuda-graphs graph), CUPTRACE_FAM_COPY for memcpy, memset, gpu_memcpy and gpu_memset; -1
 * for anything else (NULL included). What diff, the profile and the lines file by. */
int cuptrace_busy_family(const char *category);

/* The length of the union of the intervals [ts, ts + dur). Sorts v in place (by ts). Saturates
 * at INT64_MAX. */
int64_t cuptrace_busy_union(struct cuptrace_busy_span *v, size_t n);

#endif
