// steps [--steps N] [--slow] [--extra]: a training-loop shape for `cuptrace diff`: each step is
// an NVTX range "step" holding a copy in, three kernels (scale, add, reduce_sum) and a copy
// out. --slow makes "add" do 8x the work (a regression to find); --extra launches one more
// kernel, "extra_bias", per step (an added kernel). Recorded on a GPU into tests/data as
// steps_base (10 steps), steps_changed (10 steps, --slow --extra) and steps_long (20 steps),
// so the diff tests compare real captures.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <string.h>
#include "common.h"

__global__ void scale(float *x, int n, float a)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= a;
}

__global__ void add(float *x, const float *y, int n, int reps)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		for (int r = 0; r < reps; r++)
			x[i] = x[i] * 0.999f + y[i];
}

__global__ void reduce_sum(const float *x, int n, float *out)
{
	__shared__ float part[256];
	float s = 0;
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
		s += x[i];
	part[threadIdx.x] = s;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			part[threadIdx.x] += part[threadIdx.x + w];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(out, part[0]);
}

__global__ void extra_bias(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += 0.5f;
}

int main(int argc, char **argv)
{
	int steps = 10, slow = 0, extra = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--slow"))
			slow = 1;
		else if (!strcmp(argv[i], "--extra"))
			extra = 1;
		else {
			fprintf(stderr, "usage: steps [--steps N] [--slow] [--extra]\n");
			return 2;
		}
	}
	const int n = 1 << 20;
	float *h, *x, *y, *out;
	CK(cudaMallocHost(&h, n * sizeof(float)));
	CK(cudaMalloc(&x, n * sizeof(float)));
	CK(cudaMalloc(&y, n * sizeof(float)));
	CK(cudaMalloc(&out, sizeof(float)));
	for (int i = 0; i < n; i++)
		h[i] = 1.0f;
	CK(cudaMemcpy(y, h, n * sizeof(float), cudaMemcpyHostToDevice));
	for (int s = 0; s < steps; s++) {
		nvtxRangePushA("step");
		CK(cudaMemcpyAsync(x, h, n * sizeof(float), cudaMemcpyHostToDevice, 0));
		scale<<<n / 256, 256>>>(x, n, 2.0f);
		add<<<n / 256, 256>>>(x, y, n, slow ? 64 : 8);
		if (extra)
			extra_bias<<<n / 256, 256>>>(x, n);
		CK(cudaMemsetAsync(out, 0, sizeof(float), 0));
		reduce_sum<<<264, 256>>>(x, n, out);
		CK(cudaMemcpyAsync(h, x, n * sizeof(float), cudaMemcpyDeviceToHost, 0));
		CK(cudaStreamSynchronize(0));
		nvtxRangePop();
	}
	printf("steps: %d steps%s%s\n", steps, slow ? ", slow add" : "",
	       extra ? ", extra kernel" : "");
	CK(cudaFreeHost(h));
	CK(cudaFree(x));
	CK(cudaFree(y));
	CK(cudaFree(out));
	return 0;
}
