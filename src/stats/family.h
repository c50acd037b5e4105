/* The families a slice is filed under (diff.h of src/compare says from which categories): GPU
 * busy time (busy.h) tells kernels from copies by them, the lines file GPU work by them, and the
 * diff compares per family. */
#ifndef CUPTRACE_STATS_FAMILY_H
#define CUPTRACE_STATS_FAMILY_H

enum cuptrace_family {
	CUPTRACE_FAM_KERNEL,
	CUPTRACE_FAM_API,
	CUPTRACE_FAM_COPY,
	CUPTRACE_FAM_NVTX,
	CUPTRACE_FAM_OP,
	CUPTRACE_FAM_N
};

#endif
