// GPU test helper: a CUDA graph whose middle node runs for about two seconds, while the host
// keeps launching small kernels on another stream, so that batches of other records reach the
// converter while the graph is half done. The converter writes a cudaGraphLaunch once a batch
// brings none of its nodes; every one of the 21 nodes must still get its arrow from that call.
// (On the H200 all of them did, with CUPTI flushed every 1000, 200 and 50 ms.) Prints the
// number of side launches so the test knows the exact kernel count: 21 + that number.
#include <cuda_runtime.h>
#include <stdio.h>
#include <unistd.h>

__global__ void small(float *x)
{
	x[threadIdx.x] += 1.0f;
}

__global__ void spin(long long cycles)
{
	long long t0 = clock64();
	while (clock64() - t0 < cycles) {
	}
}

#define CHECK(x)                                                                                   \
	do {                                                                                       \
		cudaError_t e_ = (x);                                                              \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "graph_slow_node: %s: %s\n", #x, cudaGetErrorString(e_));  \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(void)
{
	float *x, *z;
	cudaStream_t s1, s2;
	cudaGraph_t g;
	cudaGraphExec_t ge;
	int clock_khz = 0;

	CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
	CHECK(cudaMalloc(&x, 1024 * sizeof(float)));
	CHECK(cudaMalloc(&z, 1024 * sizeof(float)));
	CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
	for (int i = 0; i < 10; i++)
		small<<<1, 32, 0, s1>>>(x);
	spin<<<1, 1, 0, s1>>>(2LL * clock_khz * 1000); /* about 2 s */
	for (int i = 0; i < 10; i++)
		small<<<1, 32, 0, s1>>>(x);
	CHECK(cudaStreamEndCapture(s1, &g));
	CHECK(cudaGraphInstantiate(&ge, g, 0));
	CHECK(cudaGraphLaunch(ge, s1));
	/* While the graph runs: a small kernel on the other stream every millisecond, each waited
	 * for, so cuptrace sees complete records from every flush while the graph is half done. */
	long side = 0;
	while (cudaStreamQuery(s1) == cudaErrorNotReady) {
		small<<<1, 32, 0, s2>>>(z);
		CHECK(cudaStreamSynchronize(s2));
		side++;
		usleep(1000);
	}
	CHECK(cudaDeviceSynchronize());
	printf("graph_slow_node: %ld side launches\n", side);
	return 0;
}
