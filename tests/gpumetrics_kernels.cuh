// Workloads whose GPU metrics are known in advance, shared by the PM sampling probe
// (tests/gpu/pm_probe.cu) and the GPU metrics test program (tests/gpumetrics_work.cu):
//   - mm_bf16: a bf16 matrix multiply on the tensor cores (WMMA), tensor activity high;
//   - saxpy: an elementwise kernel, memory-bound, no tensor-core work at all;
//   - spin_kernel: every SM busy for a fixed time read from %globaltimer, with sharp edges
//     (for lining sample times up with kernel times) and the timer values it saw;
//   - a device-to-device cudaMemcpy of a few GB: every byte read once and written once.
#ifndef CUPTRACE_GPUMETRICS_KERNELS_CUH
#define CUPTRACE_GPUMETRICS_KERNELS_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define GM_CHECK(call)                                                                             \
	do {                                                                                       \
		cudaError_t e_ = (call);                                                           \
		if (e_ != cudaSuccess) {                                                           \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,              \
			        cudaGetErrorString(e_));                                           \
			exit(2);                                                                   \
		}                                                                                  \
	} while (0)

__device__ static inline unsigned long long gm_globaltimer(void)
{
	unsigned long long t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

// Each block spins until spin_ns have passed since its own start; block 0 records the first
// and last %globaltimer it read in out[0], out[1].
__global__ void spin_kernel(unsigned long long *out, unsigned long long spin_ns)
{
	unsigned long long t0 = gm_globaltimer(), t = t0;
	while (t - t0 < spin_ns)
		t = gm_globaltimer();
	if (blockIdx.x == 0 && threadIdx.x == 0) {
		out[0] = t0;
		out[1] = t;
	}
}

// C = A * B, n x n, row-major bf16 inputs, fp32 output. One warp computes a 32x32 tile of C as
// 2x2 WMMA fragments, straight from global memory (L2 holds the reused rows): no shared-memory
// tiling, so not the fastest matmul, but its time goes to the tensor pipe.
__global__ void mm_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B, float *C, int n)
{
	using namespace nvcuda;
	int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) / 32);
	int tiles = n / 32;
	int tm = warp / tiles, tn = warp % tiles;
	if (tm >= tiles)
		return;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			wmma::fill_fragment(acc[i][j], 0.0f);
	for (int k = 0; k < n; k += 16) {
		wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
		wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b[2];
		for (int i = 0; i < 2; i++)
			wmma::load_matrix_sync(a[i], A + (size_t)(tm * 32 + i * 16) * n + k, n);
		for (int j = 0; j < 2; j++)
			wmma::load_matrix_sync(b[j], B + (size_t)k * n + tn * 32 + j * 16, n);
		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 2; j++)
				wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
	}
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			wmma::store_matrix_sync(C + (size_t)(tm * 32 + i * 16) * n + tn * 32 +
			                            j * 16,
			                        acc[i][j], n, wmma::mem_row_major);
}

__global__ void saxpy(size_t n, float a, const float *x, float *y)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		y[i] = a * x[i] + y[i];
}

__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, float v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = __float2bfloat16(v * (float)((i * 2654435761u) % 17) / 17.0f);
}

__global__ void fill_f32(float *p, size_t n, float v)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = v;
}

// Sizes of the phases; the defaults give about 1.5 s of work on an H100.
struct gm_work {
	int mm_n;                   // matrix size (multiple of 32)
	int mm_reps;                // matmul launches back to back
	size_t saxpy_n;             // floats per saxpy vector
	int saxpy_reps;             // saxpy launches back to back
	size_t copy_bytes;          // bytes of each device-to-device copy
	int copy_reps;              // copies back to back
	int idle_ms;                // the idle gap after the matmul
	unsigned long long spin_ns; // length of each spin kernel
	int spin_reps;              // spin kernels, each followed by an idle gap of spin_ns
};

static inline struct gm_work gm_work_default(void)
{
	struct gm_work w = {8192, 8, (size_t)1 << 28, 60, (size_t)4 << 30, 3, 200, 20000000ull, 3};
	return w;
}

static inline void gm_sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

// Runs the phases in order: spin kernels with gaps, matmul, the idle gap, saxpy, copies.
// spin_out (device, 2 * spin_reps entries) receives the spin kernels' timer values. mark, if
// given, is called with a phase name and 0/1 just before the phase is queued and just after
// it has finished (the device synchronized).
static inline void gm_run(const struct gm_work *w, unsigned long long *spin_out,
                          void (*mark)(const char *phase, int end))
{
	int sms = 0;
	GM_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
	size_t nn = (size_t)w->mm_n * w->mm_n;
	__nv_bfloat16 *A, *B;
	float *C, *x, *y;
	char *src, *dst;
	GM_CHECK(cudaMalloc(&A, nn * sizeof(*A)));
	GM_CHECK(cudaMalloc(&B, nn * sizeof(*B)));
	GM_CHECK(cudaMalloc(&C, nn * sizeof(*C)));
	GM_CHECK(cudaMalloc(&x, w->saxpy_n * sizeof(*x)));
	GM_CHECK(cudaMalloc(&y, w->saxpy_n * sizeof(*y)));
	GM_CHECK(cudaMalloc(&src, w->copy_bytes));
	GM_CHECK(cudaMalloc(&dst, w->copy_bytes));
	fill_bf16<<<sms * 8, 256>>>(A, nn, 1.0f);
	fill_bf16<<<sms * 8, 256>>>(B, nn, 0.5f);
	fill_f32<<<sms * 8, 256>>>(x, w->saxpy_n, 1.0f);
	fill_f32<<<sms * 8, 256>>>(y, w->saxpy_n, 2.0f);
	GM_CHECK(cudaMemset(src, 1, w->copy_bytes));
	GM_CHECK(cudaMemset(dst, 0, w->copy_bytes));
	GM_CHECK(cudaDeviceSynchronize());
	gm_sleep_ms(50);

	if (mark)
		mark("spin", 0);
	for (int i = 0; i < w->spin_reps; i++) {
		spin_kernel<<<sms * 4, 128>>>(spin_out + 2 * i, w->spin_ns);
		GM_CHECK(cudaDeviceSynchronize());
		gm_sleep_ms((int)(w->spin_ns / 1000000ull));
	}
	if (mark)
		mark("spin", 1);

	if (mark)
		mark("matmul", 0);
	int warps = (w->mm_n / 32) * (w->mm_n / 32);
	for (int i = 0; i < w->mm_reps; i++)
		mm_bf16<<<(warps + 3) / 4, 128>>>(A, B, C, w->mm_n);
	GM_CHECK(cudaDeviceSynchronize());
	if (mark)
		mark("matmul", 1);

	if (mark)
		mark("idle", 0);
	gm_sleep_ms(w->idle_ms);
	if (mark)
		mark("idle", 1);

	if (mark)
		mark("saxpy", 0);
	for (int i = 0; i < w->saxpy_reps; i++)
		saxpy<<<sms * 8, 256>>>(w->saxpy_n, 1.0001f, x, y);
	GM_CHECK(cudaDeviceSynchronize());
	if (mark)
		mark("saxpy", 1);
	gm_sleep_ms(20);

	if (mark)
		mark("copy", 0);
	for (int i = 0; i < w->copy_reps; i++)
		GM_CHECK(cudaMemcpy(dst, src, w->copy_bytes, cudaMemcpyDeviceToDevice));
	GM_CHECK(cudaDeviceSynchronize());
	if (mark)
		mark("copy", 1);
	gm_sleep_ms(20);

	GM_CHECK(cudaFree(A));
	GM_CHECK(cudaFree(B));
	GM_CHECK(cudaFree(C));
	GM_CHECK(cudaFree(x));
	GM_CHECK(cudaFree(y));
	GM_CHECK(cudaFree(src));
	GM_CHECK(cudaFree(dst));
}

#endif
