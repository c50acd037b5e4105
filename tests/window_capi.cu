// The C API as capture windows (tests/gpu_window_test.sh): with CUPTRACE_ON_DEMAND=1 and no
// injection, cuptrace_start() starts the session and opens window 1, cuptrace_stop() closes
// it, the next start opens window 2. 3 kernels in window 1, 2 between, 4 in window 2, 1 after.
#include <cuda_runtime.h>
#include <stdio.h>

#include "cuptrace.h"

__global__ void inside_kernel(float *x)
{
	x[threadIdx.x] += 1.0f;
}
__global__ void between_kernel(float *x)
{
	x[threadIdx.x] -= 1.0f;
}

static void launch(int n, int inside, float *d)
{
	for (int i = 0; i < n; i++) {
		if (inside)
			inside_kernel<<<1, 32>>>(d);
		else
			between_kernel<<<1, 32>>>(d);
	}
	cudaDeviceSynchronize();
}

int main(void)
{
	float *d;
	if (cudaMalloc(&d, 32 * sizeof(float)) != cudaSuccess)
		return 1;
	int r[4];
	r[0] = cuptrace_start(NULL);
	launch(3, 1, d);
	r[1] = cuptrace_stop();
	launch(2, 0, d);
	r[2] = cuptrace_start(NULL);
	launch(4, 1, d);
	r[3] = cuptrace_stop();
	launch(1, 0, d);
	printf("window_capi: %d %d %d %d\n", r[0], r[1], r[2], r[3]);
	cudaFree(d);
	return r[0] || r[1] || r[2] || r[3];
}
