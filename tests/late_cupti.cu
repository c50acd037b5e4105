// What starting CUPTI in the middle of a run does to GPU-side launches (gpu_late_cupti_test.sh;
// README "Tracing part of a run"). Capture windows start CUPTI only when the first window opens;
// CUPTI 13.0 then makes the launches from the GPU of graphs instantiated before it started fail.
// This program shows which launches, and which CUPTI calls, do that, without cuptrace.
//   late_cupti WORK WHEN CALLS [REPLAYS=20000]
//   WORK   graph: a host-launched graph whose one kernel launches (from the GPU) a graph of 4
//                 kernels instantiated for device launch
//          cdp:   a kernel that launches a kernel (dynamic parallelism)
//          while: a graph with a conditional WHILE node whose body runs 3 times
//   WHEN   early: CALLS before CUDA starts; late: at replay REPLAYS/2; never
//   CALLS  subscribe | unsubscribe (subscribe, then unsubscribe) | buffers (activity buffer
//          callbacks only, no subscriber) | kernels (buffers, then kernel records on) |
//          version (cuptiGetVersion: starts nothing)
// Prints "ok WORK: N kernels ran of M", or "failed at replay R: ERROR"; exit 0 if every kernel
// ran, 1 if a CUDA call failed, 2 on a usage error.
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__device__ unsigned long long ran; // kernels that ran, counted by the kernels themselves

__global__ void work(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * 1.0001f + 1.0f;
	if (i == 0)
		atomicAdd(&ran, 1ull);
}

__global__ void launcher(cudaGraphExec_t g)
{
	if (threadIdx.x == 0) {
		atomicAdd(&ran, 1ull);
		cudaGraphLaunch(g, cudaStreamGraphFireAndForget);
	}
}

__global__ void child(void)
{
	if (threadIdx.x == 0)
		atomicAdd(&ran, 1ull);
}

__global__ void parent(void)
{
	atomicAdd(&ran, 1ull);
	child<<<1, 32>>>();
}

__global__ void set_count(int *c)
{
	*c = 3;
	atomicAdd(&ran, 1ull);
}

__global__ void body(cudaGraphConditionalHandle h, int *c)
{
	atomicAdd(&ran, 1ull);
	if (--*c == 0)
		cudaGraphSetConditional(h, 0);
}

static void CUPTIAPI on_callback(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *p)
{
	(void)u, (void)d, (void)id, (void)p;
}

static long records;

static void CUPTIAPI on_request(uint8_t **b, size_t *size, size_t *max)
{
	*size = 1 << 20;
	*b = (uint8_t *)aligned_alloc(8, *size);
	*max = 0;
}

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t *b, size_t size,
                                 size_t valid)
{
	(void)ctx, (void)stream, (void)size;
	CUpti_Activity *r = NULL;
	while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		records++;
	free(b);
}

static int start_cupti(const char *calls)
{
	CUpti_SubscriberHandle sub;
	CUptiResult r = CUPTI_SUCCESS;
	uint32_t v;
	if (!strcmp(calls, "subscribe")) {
		r = cuptiSubscribe(&sub, on_callback, NULL);
	} else if (!strcmp(calls, "unsubscribe")) {
		r = cuptiSubscribe(&sub, on_callback, NULL);
		if (r == CUPTI_SUCCESS)
			r = cuptiUnsubscribe(sub);
	} else if (!strcmp(calls, "buffers") || !strcmp(calls, "kernels")) {
		r = cuptiActivityRegisterCallbacks(on_request, on_complete);
		if (r == CUPTI_SUCCESS && !strcmp(calls, "kernels"))
			r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	} else if (!strcmp(calls, "version")) {
		r = cuptiGetVersion(&v);
	} else {
		return -1;
	}
	if (r != CUPTI_SUCCESS) {
		const char *s = "";
		cuptiGetResultString(r, &s);
		printf("late_cupti: CUPTI call failed: %s\n", s);
	}
	return r == CUPTI_SUCCESS ? 0 : 1;
}

#define CK(x)                                                                                      \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			printf("failed at replay %d: %s (%s)\n", i, cudaGetErrorString(e_), #x);   \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

/* Adds a kernel node of grid x block threads running func(args) to g, after dep (NULL: none). */
static cudaError_t add_kernel(cudaGraphNode_t *node, cudaGraph_t g, cudaGraphNode_t dep, void *func,
                              unsigned grid, unsigned block, void **args)
{
	cudaKernelNodeParams p = {};
	p.func = func;
	p.gridDim = dim3(grid);
	p.blockDim = dim3(block);
	p.kernelParams = args;
	return cudaGraphAddKernelNode(node, g, dep ? &dep : NULL, dep ? 1 : 0, &p);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	const char *when = argc > 2 ? argv[2] : "";
	const char *calls = argc > 3 ? argv[3] : "";
	int replays = argc > 4 ? atoi(argv[4]) : 20000;
	int graph = !strcmp(what, "graph"), cdp = !strcmp(what, "cdp"),
	    loop = !strcmp(what, "while");
	int early = !strcmp(when, "early"), late = !strcmp(when, "late");
	if (!(graph || cdp || loop) || !(early || late || !strcmp(when, "never")) || replays < 2 ||
	    !(!strcmp(calls, "subscribe") || !strcmp(calls, "unsubscribe") ||
	      !strcmp(calls, "buffers") || !strcmp(calls, "kernels") ||
	      !strcmp(calls, "version"))) {
		fprintf(stderr, "usage: late_cupti graph|cdp|while early|late|never "
		                "subscribe|unsubscribe|buffers|kernels|version [replays]\n");
		return 2;
	}
	int i = -1;
	if (early && start_cupti(calls))
		return 1;
	const int n = 1 << 16;
	float *x;
	int *count;
	cudaStream_t s;
	CK(cudaMalloc(&x, n * sizeof(float)));
	CK(cudaMalloc(&count, sizeof(int)));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	cudaGraphExec_t exec = NULL;
	int per_replay = 2; // cdp: parent and child
	if (graph) {
		// The worker: 4 kernels, instantiated for device launch and uploaded.
		cudaGraph_t wg;
		CK(cudaGraphCreate(&wg, 0));
		cudaGraphNode_t prev = NULL;
		void *wargs[] = {&x, (void *)&n};
		for (int k = 0; k < 4; k++)
			CK(add_kernel(&prev, wg, prev, (void *)work, n / 256, 256, wargs));
		cudaGraphExec_t wexec;
		CK(cudaGraphInstantiate(&wexec, wg, cudaGraphInstantiateFlagDeviceLaunch));
		CK(cudaGraphUpload(wexec, s));
		// The launcher the host replays: one kernel that launches the worker.
		cudaGraph_t lg;
		CK(cudaGraphCreate(&lg, 0));
		void *largs[] = {&wexec};
		cudaGraphNode_t lnode;
		CK(add_kernel(&lnode, lg, NULL, (void *)launcher, 1, 32, largs));
		CK(cudaGraphInstantiate(&exec, lg, 0));
		per_replay = 5;
	} else if (loop) {
		// set_count, then WHILE (count > 0) { body }: 1 + 3 kernels a replay.
		cudaGraph_t g;
		CK(cudaGraphCreate(&g, 0));
		cudaGraphConditionalHandle h;
		CK(cudaGraphConditionalHandleCreate(&h, g, 1, cudaGraphCondAssignDefault));
		void *a0[] = {&count};
		cudaGraphNode_t first;
		CK(add_kernel(&first, g, NULL, (void *)set_count, 1, 1, a0));
		cudaGraphNodeParams cp = {};
		cp.type = cudaGraphNodeTypeConditional;
		cp.conditional.handle = h;
		cp.conditional.type = cudaGraphCondTypeWhile;
		cp.conditional.size = 1;
		cudaGraphNode_t cond;
		CK(cudaGraphAddNode(&cond, g, &first, NULL, 1, &cp));
		void *a1[] = {&h, &count};
		cudaGraphNode_t bnode;
		CK(add_kernel(&bnode, cp.conditional.phGraph_out[0], NULL, (void *)body, 1, 1, a1));
		CK(cudaGraphInstantiate(&exec, g, 0));
		per_replay = 4;
	}
	for (i = 0; i < replays; i++) {
		if (late && i == replays / 2 && start_cupti(calls))
			return 1;
		if (cdp)
			parent<<<1, 1, 0, s>>>();
		else
			CK(cudaGraphLaunch(exec, s));
		CK(cudaGetLastError());
		CK(cudaStreamSynchronize(s)); // one replay at a time: a failure names its replay
	}
	unsigned long long got = 0;
	CK(cudaMemcpyFromSymbol(&got, ran, sizeof(got)));
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	printf("ok %s: %llu kernels ran of %d, %ld CUPTI records\n", what, got,
	       replays * per_replay, records);
	return got == (unsigned long long)replays * per_replay ? 0 : 1;
}
