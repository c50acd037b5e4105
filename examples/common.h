/* Shared by the examples: fail loudly on any CUDA error (examples are also test programs). */
#ifndef CUPTRACE_EXAMPLES_COMMON_H
#define CUPTRACE_EXAMPLES_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#define CK(call)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
			        cudaGetErrorString(e_));                                           \
			exit(1);                                                                   \
		}                                                                                  \
	} while (0)

#endif
