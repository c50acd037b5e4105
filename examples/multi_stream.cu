// multi_stream [threads] [launches]: each host thread owns a stream and launches a tiny kernel
// `launches` times, then synchronizes its stream. Exactly threads*launches kernels. Also the
// launch-bound workload of the overhead benchmark (4 threads x 20000 launches).
#include <cuda_runtime.h>
#include <pthread.h>
#include "common.h"

__global__ void tiny(int *x)
{
	if (threadIdx.x == 0 && x)
		atomicAdd(x, 1);
}

static int launches = 1000;
static int *counter;

static void *worker(void *arg)
{
	char name[16];
	snprintf(name, sizeof(name), "worker-%d", (int)(long)arg);
	pthread_setname_np(pthread_self(), name);
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	for (int i = 0; i < launches; i++)
		tiny<<<1, 32, 0, s>>>(counter);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamDestroy(s));
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	launches = argc > 2 ? atoi(argv[2]) : 1000;
	if (threads < 1 || threads > 256 || launches < 0) {
		fprintf(stderr, "usage: multi_stream [threads 1..256] [launches]\n");
		return 2;
	}
	CK(cudaMalloc(&counter, sizeof(int)));
	CK(cudaMemset(counter, 0, sizeof(int)));
	pthread_t t[256];
	for (int i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	int total = 0;
	CK(cudaMemcpy(&total, counter, sizeof(int), cudaMemcpyDeviceToHost));
	CK(cudaFree(counter));
	if (total != threads * launches) {
		fprintf(stderr, "multi_stream: counted %d launches, expected %d\n", total,
		        threads * launches);
		return 1;
	}
	printf("multi_stream: %d threads x %d launches ok\n", threads, launches);
	return 0;
}
