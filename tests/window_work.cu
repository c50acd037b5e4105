// The GPU workloads of tests/gpu_window_test.sh: known launches inside and outside NVTX ranges
// and cudaProfilerStart/Stop pairs, a loop to trigger from outside, a planted crash, a run that
// waits for SIGTERM, and one slow step among regular ones.
//
//   window_work nvtx ITERS       ITERS ranges "step"; iteration i (1-based) launches i % 3 + 1
//                                step_kernel inside its range and one outside_kernel after it
//   window_work profiler ITERS   the same, with cudaProfilerStart/Stop around iterations 3..5
//                                and again around 8..9
//   window_work spin SECONDS     a step every 20 ms (one step_kernel, cuptrace_step-free) for
//                                SECONDS, then exit 0; prints "ready" on stderr when running
//   window_work segv SECONDS     spin for SECONDS, then write through a null pointer
//   window_work bus|abrt|fpe SECONDS  the same, then touch a mapping past the end of its file
//                                (SIGBUS), call abort() (SIGABRT), divide by zero (SIGFPE)
//   window_work term             spin until SIGTERM (the default action: dies of it)
//   window_work slow STEPS K     STEPS ranges "step" of ~10 ms, step K (1-based) ~60 ms
//   window_work hang SECONDS     spin 2 s, then one kernel of SECONDS and a sync that waits
//                                for it: a process stuck in a sync, to trigger
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

__global__ void step_kernel(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = x[i] * 0.5f + 1.0f;
}

__global__ void outside_kernel(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += 2.0f;
}

// Spins on the GPU for about ns nanoseconds (a slow step that is slow on the GPU too).
__global__ void spin_kernel(long long ns)
{
	long long t0 = clock64();
	// clock64 ticks at the SM clock (~1.5-2 GHz): 2 ticks a nanosecond is about right.
	while (clock64() - t0 < ns * 2)
		;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&t, NULL);
}

static const int N = 1 << 16;

static void iteration(float *d, int i, int profile_from, int profile_to, int profile_from2,
                      int profile_to2)
{
	if (i == profile_from || i == profile_from2)
		cudaProfilerStart();
	nvtxRangePushA("step");
	for (int k = 0; k < i % 3 + 1; k++)
		step_kernel<<<N / 256, 256>>>(d, N);
	cudaDeviceSynchronize();
	nvtxRangePop();
	if (i == profile_to || i == profile_to2) {
		cudaDeviceSynchronize();
		cudaProfilerStop();
	}
	outside_kernel<<<N / 256, 256>>>(d, N);
	cudaDeviceSynchronize();
	sleep_ms(5);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: window_work nvtx|profiler|spin|segv|term|slow ...\n");
		return 2;
	}
	const char *mode = argv[1];
	float *d;
	if (cudaMalloc(&d, N * sizeof(float)) != cudaSuccess) {
		fprintf(stderr, "window_work: no GPU\n");
		return 1;
	}
	cudaMemset(d, 0, N * sizeof(float));
	cudaDeviceSynchronize();
	if (!strcmp(mode, "nvtx") || !strcmp(mode, "profiler")) {
		int iters = argc > 2 ? atoi(argv[2]) : 12;
		int prof = !strcmp(mode, "profiler");
		for (int i = 1; i <= iters; i++)
			iteration(d, i, prof ? 3 : -1, prof ? 5 : -1, prof ? 8 : -1, prof ? 9 : -1);
	} else if (!strcmp(mode, "spin") || !strcmp(mode, "segv") || !strcmp(mode, "term") ||
	           !strcmp(mode, "bus") || !strcmp(mode, "abrt") || !strcmp(mode, "fpe")) {
		double secs = argc > 2 ? atof(argv[2]) : 1e9;
		double t0 = now_s();
		fprintf(stderr, "ready\n");
		while (now_s() - t0 < secs) {
			nvtxRangePushA("step");
			step_kernel<<<N / 256, 256>>>(d, N);
			cudaDeviceSynchronize();
			nvtxRangePop();
			sleep_ms(20);
		}
		if (strcmp(mode, "spin") && strcmp(mode, "term"))
			fprintf(stderr, "window_work: crashing now (%s)\n", mode);
		if (!strcmp(mode, "segv")) {
			volatile int *p = NULL;
			*p = 1;
		} else if (!strcmp(mode, "abrt")) {
			abort();
		} else if (!strcmp(mode, "fpe")) {
			// Not 1 / zero: gcc computes that without a division. x86's idiv by zero
			// faults, and the kernel delivers SIGFPE.
			volatile int seven = 7, zero = 0;
			volatile int q = seven / zero;
			(void)q;
		} else if (!strcmp(mode, "bus")) {
			// A page of a file of size 0: touching it is SIGBUS, a real fault.
			char path[] = "/tmp/window_work_busXXXXXX";
			int fd = mkstemp(path);
			volatile char *m =
			    fd < 0 ? NULL
			           : (volatile char *)mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			                                   MAP_SHARED, fd, 0);
			unlink(path);
			if (m && m != MAP_FAILED)
				m[0] = 1;
			fprintf(stderr, "window_work: no SIGBUS\n");
			return 3;
		}
	} else if (!strcmp(mode, "hang")) {
		double secs = argc > 2 ? atof(argv[2]) : 10;
		double t0 = now_s();
		while (now_s() - t0 < 2) {
			step_kernel<<<N / 256, 256>>>(d, N);
			cudaDeviceSynchronize();
			sleep_ms(20);
		}
		fprintf(stderr, "hanging\n");
		spin_kernel<<<1, 1>>>((long long)(secs * 1e9));
		cudaDeviceSynchronize();
	} else if (!strcmp(mode, "slow")) {
		int steps = argc > 2 ? atoi(argv[2]) : 30, slow = argc > 3 ? atoi(argv[3]) : 20;
		for (int i = 1; i <= steps; i++) {
			nvtxRangePushA("step");
			spin_kernel<<<1, 1>>>(i == slow ? 60000000LL : 10000000LL);
			cudaDeviceSynchronize();
			nvtxRangePop();
		}
	} else {
		fprintf(stderr, "window_work: unknown mode %s\n", mode);
		return 2;
	}
	cudaFree(d);
	return 0;
}
