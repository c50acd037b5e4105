// graph_replay: the inference-loop shape of issue 24. A CUDA graph of N small elementwise
// kernels (captured from one stream) replayed R times with cudaGraphLaunch, timed in-process.
//   graph_replay [nodes=50] [replays=2000] [blocks=5] [nvtx]
// With "nvtx" each replay sits in an NVTX range "replay" (issue 23: what following ranges for a
// capture window costs while none opens).
// Prints one JSON line like tools/bench/torch_workload.py: the median time per replay over
// `blocks` equal blocks (each synchronized at both ends), the blocks' times, a CPU probe per
// block (how fast the shared machine runs just then), and the kernels launched, so that
// torch_bench.py can time it beside the PyTorch workloads and check the tracers' counts.
// GRAPH_REPLAY_DETAIL=1 adds each block's start (CLOCK_REALTIME, to line blocks up with GPU
// clock samples taken beside it) and the host time spent inside cudaGraphLaunch per replay.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "common.h"

__global__ void scale(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * 1.0001f;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The same fixed integer loop each time: its duration tells the machine's current speed.
static double cpu_probe(void)
{
	volatile uint64_t x = 0;
	double t0 = now_s();
	for (uint64_t i = 0; i < 2000000; i++)
		x += i & 7;
	return now_s() - t0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int nodes = argc > 1 ? atoi(argv[1]) : 50;
	int replays = argc > 2 ? atoi(argv[2]) : 2000;
	int blocks = argc > 3 ? atoi(argv[3]) : 5;
	int ranges = argc > 4 && !strcmp(argv[4], "nvtx");
	if (nodes < 1 || replays < 1 || blocks < 1 || blocks > 64) {
		fprintf(stderr, "usage: graph_replay [nodes>0] [replays>0] [blocks 1-64]\n");
		return 2;
	}
	const int n = 1024;
	float *x;
	CK(cudaMalloc(&x, n * sizeof(float)));
	CK(cudaMemset(x, 0, n * sizeof(float)));
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaGraph_t g;
	CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
	for (int k = 0; k < nodes; k++)
		scale<<<n / 256, 256, 0, s>>>(x, n);
	CK(cudaStreamEndCapture(s, &g));
	cudaGraphExec_t ge;
	CK(cudaGraphInstantiate(&ge, g, 0));
	int warm = replays / 10 > 10 ? replays / 10 : 10;
	for (int i = 0; i < warm; i++)
		CK(cudaGraphLaunch(ge, s));
	CK(cudaStreamSynchronize(s));
	int per = replays / blocks > 0 ? replays / blocks : 1;
	const char *dv = getenv("GRAPH_REPLAY_DETAIL");
	int detail = dv && *dv == '1';
	double t[64], probe[64], at[64], in_launch[64];
	for (int b = 0; b < blocks; b++) {
		probe[b] = cpu_probe();
		struct timespec rt;
		clock_gettime(CLOCK_REALTIME, &rt);
		at[b] = (double)rt.tv_sec + rt.tv_nsec * 1e-9;
		in_launch[b] = 0;
		double t0 = now_s();
		for (int i = 0; i < per; i++) {
			if (ranges)
				nvtxRangePushA("replay");
			double l0 = detail ? now_s() : 0;
			CK(cudaGraphLaunch(ge, s));
			if (detail)
				in_launch[b] += now_s() - l0;
			if (ranges)
				nvtxRangePop();
		}
		CK(cudaStreamSynchronize(s));
		t[b] = (now_s() - t0) / per;
		in_launch[b] /= per;
	}
	printf("{\"workload\": \"cgraph%d%s\", \"steps\": %d, \"kernels_launched\": %lld, "
	       "\"blocks_s\": [",
	       nodes, ranges ? "n" : "", per * blocks, (long long)nodes * (warm + per * blocks));
	for (int b = 0; b < blocks; b++)
		printf("%s%.9f", b ? ", " : "", t[b]);
	printf("], \"probe_s\": [");
	for (int b = 0; b < blocks; b++)
		printf("%s%.9f", b ? ", " : "", probe[b]);
	if (detail) {
		printf("], \"block_at_unix_s\": [");
		for (int b = 0; b < blocks; b++)
			printf("%s%.6f", b ? ", " : "", at[b]);
		printf("], \"in_launch_s\": [");
		for (int b = 0; b < blocks; b++)
			printf("%s%.9f", b ? ", " : "", in_launch[b]);
	}
	qsort(t, (size_t)blocks, sizeof(t[0]), cmp_d);
	printf("], \"step_s\": %.9f}\n", t[blocks / 2]);
	CK(cudaGraphExecDestroy(ge));
	CK(cudaGraphDestroy(g));
	CK(cudaStreamDestroy(s));
	CK(cudaFree(x));
	return 0;
}
