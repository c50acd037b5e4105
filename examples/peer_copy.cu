// peer_copy: every copy direction. With two GPUs, a peer-to-peer copy GPU0 -> GPU1; with one,
// a device-to-device copy in its place. Plus: pageable and pinned host-to-device, device-to-
// host into pinned memory, host-to-host through cudaMemcpy. Exactly 5 copies, 16 MiB each.
#include <cuda_runtime.h>
#include <string.h>
#include "common.h"

#define SZ (16u * 1024u * 1024u)

int main(void)
{
	int ndev = 0;
	CK(cudaGetDeviceCount(&ndev));
	char *pageable = (char *)malloc(SZ), *pageable2 = (char *)malloc(SZ), *pinned, *d0, *d1;
	memset(pageable, 1, SZ);
	CK(cudaMallocHost(&pinned, SZ));
	CK(cudaSetDevice(0));
	CK(cudaMalloc(&d0, SZ));
	CK(cudaMemcpy(d0, pageable, SZ, cudaMemcpyHostToDevice)); // pageable HtoD
	CK(cudaMemcpy(d0, pinned, SZ, cudaMemcpyHostToDevice));   // pinned HtoD
	CK(cudaMemcpy(pinned, d0, SZ, cudaMemcpyDeviceToHost));   // DtoH into pinned
	CK(cudaMemcpy(pageable2, pageable, SZ, cudaMemcpyHostToHost));
	if (ndev >= 2) {
		CK(cudaSetDevice(1));
		CK(cudaMalloc(&d1, SZ));
		CK(cudaSetDevice(0));
		CK(cudaMemcpyPeer(d1, 1, d0, 0, SZ));
		printf("peer_copy: peer copy between GPU 0 and GPU 1\n");
	} else {
		CK(cudaMalloc(&d1, SZ));
		CK(cudaMemcpy(d1, d0, SZ, cudaMemcpyDeviceToDevice));
		printf("peer_copy: one GPU, device-to-device copy instead of peer\n");
	}
	CK(cudaDeviceSynchronize());
	CK(cudaFree(d0));
	CK(cudaFree(d1));
	CK(cudaFreeHost(pinned));
	free(pageable);
	free(pageable2);
	printf("peer_copy: ok\n");
	return 0;
}
