// memory: allocation patterns. Device memory in use on GPU 0 goes
//   +64 MiB (cudaMalloc A) -> +32 MiB (B) -> -64 MiB (free A) -> +16 MiB (cudaMallocAsync C
//   from the default pool) -> -16 MiB (cudaFreeAsync C) -> -32 MiB (free B),
// plus 8 MiB of pinned host memory (cudaMallocHost/cudaFreeHost) and 1 MiB managed memory
// (cudaMallocManaged/cudaFree), each as allocation and free instants.
#include <cuda_runtime.h>
#include "common.h"

#define MiB (1024u * 1024u)

__global__ void touch(char *p, size_t n)
{
	size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (i < n)
		p[i] = 1;
}

int main(void)
{
	char *a, *b, *c, *h, *m;
	CK(cudaMalloc(&a, 64 * MiB));
	CK(cudaMalloc(&b, 32 * MiB));
	touch<<<(64 * MiB) / 256, 256>>>(a, 64 * MiB);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(a));
	cudaStream_t s;
	CK(cudaStreamCreate(&s));
	CK(cudaMallocAsync(&c, 16 * MiB, s));
	touch<<<(16 * MiB) / 256, 256, 0, s>>>(c, 16 * MiB);
	CK(cudaFreeAsync(c, s));
	CK(cudaStreamSynchronize(s));
	CK(cudaFree(b));
	CK(cudaMallocHost(&h, 8 * MiB));
	CK(cudaFreeHost(h));
	CK(cudaMallocManaged(&m, 1 * MiB));
	touch<<<MiB / 256, 256>>>(m, MiB);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(m));
	CK(cudaStreamDestroy(s));
	printf("memory: ok\n");
	return 0;
}
