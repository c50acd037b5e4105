// drill MODE ...: the programs tests/gpu_drills_test.sh traces, each doing one awkward thing a
// real program does (see the test for what the trace must hold afterwards).
//   threads T S K    T host threads, each with S streams; per stream: a copy in, K kernels, a
//                    copy out (pinned memory, async), all concurrently
//   fork-first N     no CUDA in the parent; N forked children (no exec) each run 2 kernels
//                    and end with _exit, as Python multiprocessing's forked workers do
//   fork-after       1 kernel; a forked child that uses no CUDA returns through exit();
//                    then 1 more kernel in the parent
//   exec-chain N     1 kernel, then exec itself with N-1 (same pid), down to 1
//   reset            2 kernels, cudaDeviceReset, 3 kernels
//   none STATUS      uses no CUDA at all and exits with STATUS
//   burst T K        T threads launching K tiny kernels each, as fast as possible
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "../examples/common.h"

__global__ void bump(float *x, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] += 1.0f;
}

static void work(int kernels)
{
	float *d;
	CK(cudaMalloc(&d, 256 * sizeof(float)));
	for (int i = 0; i < kernels; i++)
		bump<<<1, 256>>>(d, 256);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(d));
}

struct targ {
	int streams, kernels;
};

static void *thread_main(void *p)
{
	const struct targ *a = (const struct targ *)p;
	const int n = 1024;
	cudaStream_t s[64];
	float *h[64], *d[64];
	for (int i = 0; i < a->streams; i++) {
		CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
		CK(cudaMallocHost(&h[i], n * sizeof(float)));
		CK(cudaMalloc(&d[i], n * sizeof(float)));
		memset(h[i], 0, n * sizeof(float));
	}
	for (int i = 0; i < a->streams; i++) {
		CK(cudaMemcpyAsync(d[i], h[i], n * sizeof(float), cudaMemcpyHostToDevice, s[i]));
		for (int k = 0; k < a->kernels; k++)
			bump<<<n / 256, 256, 0, s[i]>>>(d[i], n);
		CK(cudaMemcpyAsync(h[i], d[i], n * sizeof(float), cudaMemcpyDeviceToHost, s[i]));
	}
	for (int i = 0; i < a->streams; i++) {
		CK(cudaStreamSynchronize(s[i]));
		if (h[i][0] != (float)a->kernels) {
			fprintf(stderr, "drill: wrong result %f\n", h[i][0]);
			exit(1);
		}
		CK(cudaStreamDestroy(s[i]));
		CK(cudaFreeHost(h[i]));
		CK(cudaFree(d[i]));
	}
	return NULL;
}

static void *burst_main(void *p)
{
	int k = *(const int *)p;
	float *d;
	CK(cudaMalloc(&d, 256 * sizeof(float)));
	for (int i = 0; i < k; i++)
		bump<<<1, 256>>>(d, 256);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(d));
	return NULL;
}

static int run_threads(int nt, void *(*fn)(void *), void *arg)
{
	pthread_t t[256];
	for (int i = 0; i < nt; i++)
		if (pthread_create(&t[i], NULL, fn, arg))
			return 1;
	for (int i = 0; i < nt; i++)
		pthread_join(t[i], NULL);
	return 0;
}

static int wait_all(void)
{
	int ok = 1, st;
	while (wait(&st) > 0)
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int a = argc > 2 ? atoi(argv[2]) : 0;
	if (!strcmp(mode, "threads") && argc > 4) {
		struct targ t = {atoi(argv[3]), atoi(argv[4])};
		if (a < 1 || a > 256 || t.streams < 1 || t.streams > 64)
			return 2;
		CK(cudaFree(0));
		int r = run_threads(a, thread_main, &t);
		printf("drill threads: %d kernels, %d copies\n", a * t.streams * t.kernels,
		       2 * a * t.streams);
		return r;
	}
	if (!strcmp(mode, "burst") && argc > 3) {
		int k = atoi(argv[3]);
		if (a < 1 || a > 256)
			return 2;
		CK(cudaFree(0));
		int r = run_threads(a, burst_main, &k);
		printf("drill burst: %d kernels\n", a * k);
		return r;
	}
	if (!strcmp(mode, "fork-first")) {
		fflush(stdout);
		for (int i = 0; i < a; i++)
			if (fork() == 0) {
				work(2);
				_exit(0); // skips atexit, like multiprocessing's forked workers
			}
		int r = wait_all();
		printf("drill fork-first: %d children %s\n", a, r ? "FAILED" : "ok");
		return r;
	}
	if (!strcmp(mode, "fork-after")) {
		work(1);
		fflush(stdout);
		pid_t p = fork();
		if (p == 0) {
			// runs the inherited atexit handlers: they must leave the trace alone
			exit(0);
		}
		int r = wait_all();
		work(1);
		printf("drill fork-after: %s\n", r ? "FAILED" : "ok");
		return r;
	}
	if (!strcmp(mode, "exec-chain")) {
		work(1);
		printf("drill exec-chain: %d (pid %d)\n", a, (int)getpid());
		fflush(stdout);
		if (a <= 1)
			return 0;
		char next[16];
		snprintf(next, sizeof(next), "%d", a - 1);
		execl("/proc/self/exe", argv[0], "exec-chain", next, (char *)NULL);
		perror("drill: exec");
		return 1;
	}
	if (!strcmp(mode, "reset")) {
		work(2);
		CK(cudaDeviceReset());
		work(3);
		printf("drill reset: 5 kernels\n");
		return 0;
	}
	if (!strcmp(mode, "none")) {
		printf("drill none: no CUDA\n");
		return a;
	}
	fprintf(stderr, "usage: drill threads T S K | burst T K | fork-first N | fork-after | "
	                "exec-chain N | reset | none STATUS\n");
	return 2;
}
