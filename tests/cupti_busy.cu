// Test helper: a program that holds the CUPTI subscriber slot itself (as torch.profiler,
// Nsight tools or compute-sanitizer would) before CUDA initializes, then does CUDA work. Under
// `cuptrace record`, cuptrace must say CUPTI is in use, write no trace, and let the program
// run to its normal end.
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>

static void CUPTIAPI cb(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
}

__global__ void k(int *x)
{
	*x = 1;
}

int main(void)
{
	CUpti_SubscriberHandle h;
	if (cuptiSubscribe(&h, cb, NULL) != CUPTI_SUCCESS) {
		fprintf(stderr, "cupti_busy: could not subscribe\n");
		return 2;
	}
	int *d;
	if (cudaMalloc(&d, sizeof(int)) != cudaSuccess)
		return 3;
	k<<<1, 1>>>(d);
	cudaDeviceSynchronize();
	cudaFree(d);
	cuptiUnsubscribe(h);
	printf("cupti_busy: ran to the end\n");
	return 0;
}
