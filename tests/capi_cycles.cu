// capi_cycles N DIR: N cuptrace_start/cuptrace_stop cycles in one process, 3 kernels traced in
// each (DIR/cycle-<i>.pftrace). Prints what the process holds after the first cycle and after
// the last: open file descriptors, threads, heap bytes in use (mallinfo2) and RSS. The test
// (tests/gpu_drills_test.sh) asserts that nothing grows with the number of cycles.
#include <cuda_runtime.h>
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../examples/common.h"
#include "cuptrace.h"

__global__ void bump(float *x)
{
	x[threadIdx.x] += 1.0f;
}

static long count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; // ".", ".." and the directory's own descriptor
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t n = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':')
			v = atol(line + n + 1);
	if (f)
		fclose(f);
	return v;
}

struct usage {
	long fds, threads, rss_kb;
	size_t heap;
};

static struct usage measure(void)
{
	struct mallinfo2 mi = mallinfo2();
	struct usage u = {count_fds(), status_kb("Threads"), status_kb("VmRSS"),
	                  mi.uordblks + mi.hblkhd};
	return u;
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 100;
	const char *dir = argc > 2 ? argv[2] : ".";
	float *d;
	CK(cudaMalloc(&d, 256 * sizeof(float)));
	struct usage first = {0, 0, 0, 0}, mid = first, last = first;
	for (int i = 1; i <= cycles; i++) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/cycle-%d.pftrace", dir, i);
		int r = cuptrace_start(path);
		if (r) {
			fprintf(stderr, "capi_cycles: cuptrace_start failed in cycle %d: %d\n", i,
			        r);
			return 1;
		}
		for (int k = 0; k < 3; k++)
			bump<<<1, 256>>>(d);
		CK(cudaDeviceSynchronize());
		if ((r = cuptrace_stop())) {
			fprintf(stderr, "capi_cycles: cuptrace_stop failed in cycle %d: %d\n", i,
			        r);
			return 1;
		}
		// The first cycles load what CUPTI keeps for the process's life; compare from 10.
		if (i == (cycles >= 20 ? 10 : 1))
			first = measure();
		if (i == cycles / 2)
			mid = measure();
	}
	last = measure();
	CK(cudaFree(d));
	printf(
	    "capi_cycles: %d cycles; after cycle %d / %d / %d: fds %ld / %ld / %ld, threads %ld / "
	    "%ld / %ld, heap %zu / %zu / %zu bytes, rss %ld / %ld / %ld kB\n",
	    cycles, cycles >= 20 ? 10 : 1, cycles / 2, cycles, first.fds, mid.fds, last.fds,
	    first.threads, mid.threads, last.threads, first.heap, mid.heap, last.heap, first.rss_kb,
	    mid.rss_kb, last.rss_kb);
	return 0;
}
