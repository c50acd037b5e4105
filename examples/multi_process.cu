// multi_process [children]: the parent runs 1 kernel, then starts `children` copies of itself
// (fork + exec, as launchers and Python's multiprocessing "spawn" do), each running 2 kernels
// on its own CUDA context. Traced with `cuptrace record -o mp.pftrace`, this gives mp.pftrace
// for the parent and mp-<pid>.pftrace for each child, none overwritten.
#include <cuda_runtime.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "common.h"

__global__ void step(float *x)
{
	x[threadIdx.x] += 1.0f;
}

static void work(int kernels)
{
	float *d;
	CK(cudaMalloc(&d, 256 * sizeof(float)));
	for (int i = 0; i < kernels; i++)
		step<<<1, 256>>>(d);
	CK(cudaDeviceSynchronize());
	CK(cudaFree(d));
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "child")) {
		work(2);
		return 0;
	}
	int children = argc > 1 ? atoi(argv[1]) : 2;
	work(1);
	for (int i = 0; i < children; i++) {
		pid_t p = fork();
		if (p == 0) {
			execl("/proc/self/exe", argv[0], "child", (char *)NULL);
			_exit(127);
		}
	}
	int ok = 1, st;
	while (wait(&st) > 0)
		ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	printf("multi_process: %d children %s\n", children, ok ? "ok" : "FAILED");
	return ok ? 0 : 1;
}
