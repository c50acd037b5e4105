// multi_gpu: every visible GPU (up to 8) gets its own stream work: a memset and 2 kernels.
// With two or more GPUs, also a peer-to-peer copy from GPU 0 to GPU 1 (through
// cudaMemcpyPeerAsync, with peer access enabled when possible). One GPU: no peer copy.
#include <cuda_runtime.h>
#include "common.h"

__global__ void fill(float *x, float v, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = v;
}

int main(void)
{
	int ndev = 0;
	CK(cudaGetDeviceCount(&ndev));
	if (ndev > 8)
		ndev = 8;
	const int n = 1 << 20;
	float *buf[8];
	for (int d = 0; d < ndev; d++) {
		CK(cudaSetDevice(d));
		CK(cudaMalloc(&buf[d], n * sizeof(float)));
		CK(cudaMemsetAsync(buf[d], 0, n * sizeof(float)));
		fill<<<n / 256, 256>>>(buf[d], (float)d, n);
		fill<<<n / 256, 256>>>(buf[d], (float)d + 1, n);
	}
	if (ndev >= 2) {
		CK(cudaSetDevice(1));
		int can = 0;
		CK(cudaDeviceCanAccessPeer(&can, 1, 0));
		if (can)
			CK(cudaDeviceEnablePeerAccess(0, 0));
		CK(cudaSetDevice(0));
		CK(cudaMemcpyPeerAsync(buf[1], 1, buf[0], 0, n * sizeof(float)));
	}
	for (int d = 0; d < ndev; d++) {
		CK(cudaSetDevice(d));
		CK(cudaDeviceSynchronize());
		CK(cudaFree(buf[d]));
	}
	printf("multi_gpu: %d GPUs%s\n", ndev, ndev >= 2 ? ", peer copy 0 -> 1" : "");
	return 0;
}
