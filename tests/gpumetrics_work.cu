// GPU metrics test program (tests/gpu_metrics_test.sh): runs the workloads of
// gpumetrics_kernels.cuh once under `cuptrace record --gpu-metrics`: spin kernels, a bf16
// tensor-core matmul, an idle gap, an elementwise kernel, device-to-device copies of a few GB.
// Prints the phase layout so that a failing check can be read against it.
//   gpumetrics_work [COPY_MIB [reset]]
// reset: then cudaDeviceReset() (the sampled context is destroyed mid-run) and two more spin
// kernels on the new context, for the test that sampling ends there and the program goes on.
#include <string.h>

#include "gpumetrics_kernels.cuh"

int main(int argc, char **argv)
{
	struct gm_work w = gm_work_default();
	if (argc > 1)
		w.copy_bytes = (size_t)strtoull(argv[1], NULL, 10) << 20;
	unsigned long long *spin;
	GM_CHECK(cudaMalloc(&spin, 2 * w.spin_reps * sizeof(*spin)));
	gm_run(&w, spin, NULL);
	GM_CHECK(cudaFree(spin));
	if (argc > 2 && !strcmp(argv[2], "reset")) {
		GM_CHECK(cudaDeviceReset());
		GM_CHECK(cudaMalloc(&spin, 4 * sizeof(*spin)));
		for (int i = 0; i < 2; i++) {
			spin_kernel<<<1, 32>>>(spin + 2 * i, w.spin_ns);
			GM_CHECK(cudaDeviceSynchronize());
		}
		GM_CHECK(cudaFree(spin));
		printf("gpumetrics_work: reset, then 2 spin kernels\n");
	}
	printf("gpumetrics_work: %d matmuls of %d^2 bf16, idle %d ms, %d saxpy of %zu floats, %d "
	       "copies of %zu MiB\n",
	       w.mm_reps, w.mm_n, w.idle_ms, w.saxpy_reps, w.saxpy_n, w.copy_reps,
	       w.copy_bytes >> 20);
	return 0;
}
