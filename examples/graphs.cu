// graphs: a CUDA graph captured from two streams, so two branches run concurrently:
//   memset -> kernel A -> (fork) kernel B1 on stream 1 || kernel B2 on stream 2 -> (join)
//   kernel C -> device-to-device copy.
// The graph is launched 3 times: exactly 12 kernels, 3 memsets, 3 copies, all from 3
// cudaGraphLaunch calls.
#include <cuda_runtime.h>
#include "common.h"

__global__ void spin(float *x, int n, int iters)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		for (int k = 0; k < iters; k++)
			x[i] = x[i] * 0.999f + 0.5f;
}

int main(void)
{
	const int n = 1 << 16;
	float *a, *b;
	CK(cudaMalloc(&a, 2 * n * sizeof(float)));
	CK(cudaMalloc(&b, 2 * n * sizeof(float)));
	cudaStream_t s1, s2;
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	cudaEvent_t fork, join;
	CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
	CK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));

	cudaGraph_t g;
	CK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	CK(cudaMemsetAsync(a, 0, 2 * n * sizeof(float), s1));
	spin<<<n / 256, 256, 0, s1>>>(a, n, 100);
	CK(cudaEventRecord(fork, s1));
	CK(cudaStreamWaitEvent(s2, fork, 0));
	// Few blocks each, long-running: the two branches overlap on the GPU.
	spin<<<4, 256, 0, s1>>>(a, 1024, 200000);
	spin<<<4, 256, 0, s2>>>(a + n, 1024, 200000);
	CK(cudaEventRecord(join, s2));
	CK(cudaStreamWaitEvent(s1, join, 0));
	spin<<<n / 256, 256, 0, s1>>>(a, n, 100);
	CK(cudaMemcpyAsync(b, a, 2 * n * sizeof(float), cudaMemcpyDeviceToDevice, s1));
	CK(cudaStreamEndCapture(s1, &g));
	cudaGraphExec_t ge;
	CK(cudaGraphInstantiate(&ge, g, 0));
	for (int i = 0; i < 3; i++)
		CK(cudaGraphLaunch(ge, s1));
	CK(cudaStreamSynchronize(s1));
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	CK(cudaEventDestroy(fork));
	CK(cudaEventDestroy(join));
	CK(cudaStreamDestroy(s1));
	CK(cudaStreamDestroy(s2));
	CK(cudaFree(a));
	CK(cudaFree(b));
	printf("graphs: ok\n");
	return 0;
}
