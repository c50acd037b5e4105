// vector_add: the smallest complete picture. Exactly: 1 memset, 2 host-to-device copies,
// 1 kernel, 1 device-to-host copy, then a device synchronize.
#include <cuda_runtime.h>
#include "common.h"

__global__ void vector_add(const float *a, const float *b, float *c, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = a[i] + b[i];
}

int main(void)
{
	const int n = 1 << 20;
	size_t bytes = n * sizeof(float);
	float *ha = (float *)malloc(bytes), *hb = (float *)malloc(bytes),
	      *hc = (float *)malloc(bytes);
	for (int i = 0; i < n; i++) {
		ha[i] = (float)i;
		hb[i] = 2.0f * i;
	}
	float *da, *db, *dc;
	CK(cudaMalloc(&da, bytes));
	CK(cudaMalloc(&db, bytes));
	CK(cudaMalloc(&dc, bytes));
	CK(cudaMemset(dc, 0, bytes));
	CK(cudaMemcpy(da, ha, bytes, cudaMemcpyHostToDevice));
	CK(cudaMemcpy(db, hb, bytes, cudaMemcpyHostToDevice));
	vector_add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
	CK(cudaGetLastError());
	CK(cudaMemcpy(hc, dc, bytes, cudaMemcpyDeviceToHost));
	CK(cudaDeviceSynchronize());
	for (int i = 0; i < n; i++)
		if (hc[i] != 3.0f * i) {
			fprintf(stderr, "wrong result at %d\n", i);
			return 1;
		}
	CK(cudaFree(da));
	CK(cudaFree(db));
	CK(cudaFree(dc));
	free(ha);
	free(hb);
	free(hc);
	printf("vector_add: ok\n");
	return 0;
}
