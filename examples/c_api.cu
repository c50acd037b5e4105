// c_api: a program that links libcuptrace and traces only the part it cares about, through
// the C API of cuptrace.h. Exactly 5 kernels are traced; the warm-up kernel before
// cuptrace_start() is not.
#include <cuda_runtime.h>
#include "common.h"
#include "cuptrace.h"

__global__ void work(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * 0.5f + 1.0f;
}

int main(int argc, char **argv)
{
	const char *out = argc > 1 ? argv[1] : "c_api.pftrace";
	const int n = 1 << 20;
	float *d;
	CK(cudaMalloc(&d, n * sizeof(float)));
	work<<<n / 256, 256>>>(d, n); // warm-up: not traced
	CK(cudaDeviceSynchronize());
	if (cuptrace_start(out)) {
		fprintf(stderr, "c_api: cuptrace_start failed\n");
		return 1;
	}
	for (int i = 0; i < 5; i++)
		work<<<n / 256, 256>>>(d, n);
	CK(cudaDeviceSynchronize());
	cuptrace_flush();
	int r = cuptrace_stop();
	CK(cudaFree(d));
	printf("c_api: traced into %s (%d)\n", out, r);
	return r ? 1 : 0;
}
