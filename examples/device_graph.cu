// device_graph: CUDA graphs launched from the GPU (device graph launch, CUDA 12+). A "worker"
// graph of K small kernels is instantiated for device launch; a "launcher" graph holds one
// kernel that launches the worker with cudaGraphLaunch(..., MODE's stream):
//   fire     cudaStreamGraphFireAndForget: a child of the launcher's execution (the default)
//   tail     cudaStreamGraphTailLaunch: runs once the launcher's graph has finished
//   sibling  cudaStreamGraphFireAndForgetAsSibling: a child of the launcher's parent (the
//            host launch's stream), not of the launcher
// The host replays the launcher R times.
//   device_graph [K=4] [R=20] [MODE=fire]
// What a tracer must show: R host launches (cudaGraphLaunch of the launcher) and, per replay,
// the launcher's kernel and the worker's K kernels, which no host call launched. Per node that
// is R * (1 + K) kernels; with --cuda-graphs graph, R slices of the launcher graph and R of the
// device-launched worker graph.
// Prints one line: K, R and the kernels the GPU ran by its own count (a device counter), so
// the GPU tests compare the trace with what really ran.
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common.h"

__device__ unsigned long long ran; // kernels that ran, counted by the kernels themselves

__global__ void work(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * 1.0001f + 1.0f;
	if (i == 0)
		atomicAdd(&ran, 1ull);
}

// Runs as the launcher graph's only node: device launches are allowed only from a kernel that
// itself runs in a graph.
__global__ void launcher(cudaGraphExec_t worker, int mode)
{
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		atomicAdd(&ran, 1ull);
		cudaStream_t how = mode == 1   ? cudaStreamGraphTailLaunch
		                   : mode == 2 ? cudaStreamGraphFireAndForgetAsSibling
		                               : cudaStreamGraphFireAndForget;
		cudaError_t e = cudaGraphLaunch(worker, how);
		if (e != cudaSuccess)
			printf("device_graph: device cudaGraphLaunch failed: %d\n", (int)e);
	}
}

int main(int argc, char **argv)
{
	int k = argc > 1 ? atoi(argv[1]) : 4;
	int r = argc > 2 ? atoi(argv[2]) : 20;
	const char *how = argc > 3 ? argv[3] : "fire";
	int mode = !strcmp(how, "fire")      ? 0
	           : !strcmp(how, "tail")    ? 1
	           : !strcmp(how, "sibling") ? 2
	                                     : -1;
	if (k < 1 || r < 1 || mode < 0) {
		fprintf(stderr, "usage: device_graph [kernels per worker graph] [replays] "
		                "[fire|tail|sibling]\n");
		return 2;
	}
	const int n = 1 << 16;
	float *x;
	cudaStream_t s;
	CK(cudaMalloc(&x, n * sizeof(float)));
	CK(cudaMemset(x, 0, n * sizeof(float)));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

	// The worker: K kernels in a chain, built from nodes (captures cannot be instantiated for
	// device launch from a legacy stream).
	cudaGraph_t wg;
	CK(cudaGraphCreate(&wg, 0));
	cudaGraphNode_t prev = NULL;
	void *wargs[] = {&x, (void *)&n};
	for (int i = 0; i < k; i++) {
		cudaKernelNodeParams p = {};
		p.func = (void *)work;
		p.gridDim = dim3((n + 255) / 256);
		p.blockDim = dim3(256);
		p.kernelParams = wargs;
		cudaGraphNode_t node;
		CK(cudaGraphAddKernelNode(&node, wg, prev ? &prev : NULL, prev ? 1 : 0, &p));
		prev = node;
	}
	cudaGraphExec_t wexec;
	CK(cudaGraphInstantiate(&wexec, wg, cudaGraphInstantiateFlagDeviceLaunch));
	CK(cudaGraphUpload(wexec, s));

	// The launcher: one kernel node that launches the worker.
	cudaGraph_t lg;
	CK(cudaGraphCreate(&lg, 0));
	void *largs[] = {&wexec, &mode};
	cudaKernelNodeParams lp = {};
	lp.func = (void *)launcher;
	lp.gridDim = dim3(1);
	lp.blockDim = dim3(32);
	lp.kernelParams = largs;
	cudaGraphNode_t lnode;
	CK(cudaGraphAddKernelNode(&lnode, lg, NULL, 0, &lp));
	cudaGraphExec_t lexec;
	CK(cudaGraphInstantiate(&lexec, lg, 0));

	for (int i = 0; i < r; i++) {
		CK(cudaGraphLaunch(lexec, s));
		// A fire-and-forget launch belongs to its launcher's execution, which ends only
		// when the launched graph has (a tail launch runs after it, a sibling in the
		// stream's): the stream's work is done when the worker is. One replay at a time
		// keeps the order simple to check.
		CK(cudaStreamSynchronize(s));
	}
	unsigned long long count = 0;
	CK(cudaMemcpyFromSymbol(&count, ran, sizeof(count)));
	printf("device_graph: %s, worker kernels %d, replays %d, kernels ran %llu\n", how, k, r,
	       count);
	CK(cudaGraphExecDestroy(lexec));
	CK(cudaGraphExecDestroy(wexec));
	CK(cudaGraphDestroy(lg));
	CK(cudaGraphDestroy(wg));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(x));
	return count == (unsigned long long)r * (1 + k) ? 0 : 1;
}
