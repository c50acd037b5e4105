/* A plain C program with CUDA calls in known functions, main -> a -> b -> c, for the native
 * call-stack tests (tests/gpu_stacks_test.sh, tests/stacks_capture.sh): built -O0 -g
 * -fno-omit-frame-pointer so each function keeps its frame. No kernels of its own: memset, copy
 * and synchronize reach the GPU through the runtime. */
#include <cuda_runtime.h>
#include <stdio.h>

__attribute__((noinline)) static int c(void *d, void *h, size_t n)
{
	if (cudaMemset(d, 7, n) != cudaSuccess)
		return 1;
	if (cudaMemcpy(h, d, n, cudaMemcpyDeviceToHost) != cudaSuccess)
		return 1;
	return cudaDeviceSynchronize() != cudaSuccess;
}

__attribute__((noinline)) static int b(void *d, void *h, size_t n)
{
	return c(d, h, n);
}

__attribute__((noinline)) int a(void *d, void *h, size_t n)
{
	int r = 0;
	for (int i = 0; i < 3; i++)
		r |= b(d, h, n);
	return r;
}

int main(void)
{
	static unsigned char host[1 << 20];
	void *d = NULL;
	if (cudaMalloc(&d, sizeof(host)) != cudaSuccess) {
		fprintf(stderr, "cudaMalloc failed\n");
		return 1;
	}
	int r = a(d, host, sizeof(host));
	cudaFree(d);
	printf("%s %d\n", r ? "failed" : "ok", host[12345]);
	return r;
}
