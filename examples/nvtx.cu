// nvtx: every kind of NVTX annotation cuptrace shows. On the main thread: a push/pop range
// "outer" holding "inner" (nested), each around one kernel; a mark "checkpoint"; a domain
// "cuptrace-demo" range with a color (0xFF00FF00), category 7 and payload 77; a registered
// string range "registered"; a start/end range "async-range" started on the main thread and
// ended on a worker thread; a start/end range "nested-start-end" that begins and ends on the
// main thread around a kernel (it nests, but is not a push/pop range). The main thread is named
// "main-loop", the stream "compute", GPU 0 "main-gpu".
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <nvtx3/nvToolsExtCudaRt.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "common.h"

__global__ void busy(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		for (int k = 0; k < 64; k++)
			x[i] = x[i] * 0.999f + 0.001f;
}

static nvtxRangeId_t async_id;

static void *ender(void *arg)
{
	nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "ender");
	nvtxRangeEnd(async_id);
	return NULL;
}

int main(void)
{
	const int n = 1 << 20;
	float *d;
	CK(cudaMalloc(&d, n * sizeof(float))); // CUDA (and cuptrace) initialize here
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	nvtxNameOsThreadA((uint32_t)syscall(SYS_gettid), "main-loop");
	nvtxNameCudaStreamA(s, "compute");
	nvtxNameCudaDeviceA(0, "main-gpu");

	async_id = nvtxRangeStartA("async-range");
	nvtxRangePushA("outer");
	busy<<<n / 256, 256, 0, s>>>(d, n);
	nvtxRangePushA("inner");
	busy<<<n / 256, 256, 0, s>>>(d, n);
	CK(cudaStreamSynchronize(s));
	nvtxRangePop(); // inner
	nvtxMarkA("checkpoint");
	nvtxRangePop(); // outer

	nvtxDomainHandle_t dom = nvtxDomainCreateA("cuptrace-demo");
	nvtxEventAttributes_t a = {};
	a.version = NVTX_VERSION;
	a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	a.colorType = NVTX_COLOR_ARGB;
	a.color = 0xFF00FF00;
	a.category = 7;
	a.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
	a.payload.ullValue = 77;
	a.messageType = NVTX_MESSAGE_TYPE_ASCII;
	a.message.ascii = "domain-range";
	nvtxDomainRangePushEx(dom, &a);
	busy<<<n / 256, 256, 0, s>>>(d, n);
	CK(cudaStreamSynchronize(s));
	nvtxDomainRangePop(dom);

	nvtxStringHandle_t reg = nvtxDomainRegisterStringA(dom, "registered");
	nvtxEventAttributes_t b = {};
	b.version = NVTX_VERSION;
	b.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
	b.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
	b.message.registered = reg;
	nvtxDomainRangePushEx(dom, &b);
	nvtxDomainRangePop(dom);

	nvtxRangeId_t nested = nvtxRangeStartA("nested-start-end");
	busy<<<n / 256, 256, 0, s>>>(d, n);
	CK(cudaStreamSynchronize(s));
	nvtxRangeEnd(nested);

	pthread_t t;
	pthread_create(&t, NULL, ender, NULL);
	pthread_join(t, NULL);
	CK(cudaStreamDestroy(s));
	CK(cudaFree(d));
	printf("nvtx: ok\n");
	return 0;
}
