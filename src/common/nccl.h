/* What an NCCL kernel's name says about the collective it runs.
 *
 * NCCL names its kernels after the work they do: since 2.19
 * "ncclDevKernel_AllReduce_Sum_f32_RING_LL" (collective, reduction, element type, algorithm,
 * protocol; the last four only where they apply, e.g. "ncclDevKernel_AllGather_RING_LL",
 * "ncclDevKernel_SendRecv"), before that "ncclKernel_AllReduce_RING_LL_Sum_float".
 * "ncclDevKernel_Generic" runs whatever the host queued and says nothing more. Demangled names
 * carry an argument list, which is ignored.
 *
 * Used by the converter (arguments on the kernel's slice) and by `merge --ranks` (which kernels
 * end together on every rank). Pure string work, no NCCL needed. */
#ifndef CUPTRACE_COMMON_NCCL_H
#define CUPTRACE_COMMON_NCCL_H

#include <stddef.h>

struct cuptrace_nccl_kernel {
	char collective[32]; /* "AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce",
	                      * "SendRecv", ...; "Generic" for the generic kernel */
	char reduction[16];  /* "Sum", "Prod", "Max", "Min", "PreMulSum", "SumPostDiv"; or "" */
	char dtype[16];      /* "f32", "bf16", "float", ...; or "" */
	char algorithm[24];  /* "RING", "TREE", "NVLS", "COLLNET_DIRECT", ...; or "" */
	char protocol[16];   /* "LL", "LL128", "SIMPLE"; or "" */
};

/* 1 and *k filled when name is an NCCL kernel's, 0 otherwise (k zeroed). */
int cuptrace_nccl_parse(const char *name, struct cuptrace_nccl_kernel *k);

/* 1 for a symmetric collective: all-reduce, all-gather, reduce-scatter, all-to-all. Every rank
 * sends and receives its share, so none can finish before the last rank joined: their ends
 * line up across ranks to the link latency. 0 for the others: broadcast and reduce (the root
 * of a broadcast, or a rank that only sends, may finish as soon as its data left, while a rank
 * that joined late is still receiving: at start-up, tens of milliseconds apart), send/recv, and
 * the generic kernel (which runs whatever the host queued). */
int cuptrace_nccl_symmetric(const struct cuptrace_nccl_kernel *k);

#endif
