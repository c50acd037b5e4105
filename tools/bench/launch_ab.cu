// launch_ab: the C launch loop of the overhead benchmark (examples/multi_stream's tiny kernel,
// launched back to back on one stream), timed in blocks inside one process under the CUPTI
// floor, with the floor's recording switched between blocks (issue 45: what each activity kind
// and each API record type costs, free of the process-to-process spread of a shared machine).
//
//   CUDA_INJECTION64_PATH=BUILD/libcupti_floor.so launch_ab PAIRS LAUNCHES SPEC [SPEC...]
//
// For each pair and each SPEC (in an order rotated every pair), two blocks of LAUNCHES
// launches and one cudaStreamSynchronize: one with the floor's default set (spec ""), one with
// SPEC switched off (cuptrace_floor_ab in tools/bench/cupti_floor.c), which first in
// alternate pairs; a SPEC "A>B" pairs a block with A against one with B. Prints one JSON line:
// {"workload": "launch", "abk": {SPEC: [[default s, SPEC s] per launch, ...]}}
// (tools/bench/kinds_ab.py reads it).
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h" /* examples/: CK, the examples' error check */

__global__ void tiny(int *x)
{
	if (threadIdx.x == 0 && x)
		atomicAdd(x, 1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The floor's switch, or cuptrace's own under `record` (src/inject/collect_bench.c).
static int (*find_ab(void *h))(const char *)
{
	void *f = dlsym(h, "cuptrace_floor_ab");
	if (!f)
		f = dlsym(h, "cuptrace_bench_ab");
	return (int (*)(const char *))f;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr,
		        "usage: launch_ab PAIRS LAUNCHES SPEC [SPEC...] (under the floor)\n");
		return 2;
	}
	int pairs = atoi(argv[1]), launches = atoi(argv[2]), nspec = argc - 3;
	const char *lib = getenv("CUDA_INJECTION64_PATH");
	void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
	int (*ab)(const char *) = h ? find_ab(h) : NULL;
	int *counter;
	cudaStream_t s;
	CK(cudaMalloc(&counter, sizeof(int)));
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	// CUDA is up, so the driver has loaded the injection library by now
	if (!ab) {
		h = lib ? dlopen(lib, RTLD_NOW | RTLD_NOLOAD) : NULL;
		ab = h ? find_ab(h) : NULL;
	}
	if (!ab) {
		fprintf(stderr, "launch_ab: no cuptrace_floor_ab or cuptrace_bench_ab: run it with "
		                "CUDA_INJECTION64_PATH=BUILD/libcupti_floor.so or under cuptrace "
		                "record\n");
		return 2;
	}
	double *res = (double *)calloc((size_t)pairs * nspec * 2, sizeof(double));
	for (int i = 0; i < 2 * launches; i++) // warm-up
		tiny<<<1, 32, 0, s>>>(counter);
	CK(cudaStreamSynchronize(s));
	for (int p = 0; p < pairs; p++) {
		for (int j = 0; j < nspec; j++) {
			int v = (j + p) % nspec;
			for (int half = 0; half < 2; half++) {
				int off =
				    (half == 0) == (p % 2 == 0); // default first in even pairs
				// "A>B": the pair's blocks are A and B instead of "" and the spec
				char spec[512];
				snprintf(spec, sizeof(spec), "%s", argv[3 + v]);
				char *gt = strchr(spec, '>');
				const char *first = "", *second = spec;
				if (gt) {
					*gt = 0;
					first = spec;
					second = gt + 1;
				}
				if (ab(off ? second : first) < 0) {
					fprintf(stderr, "launch_ab: cannot read spec '%s'\n",
					        argv[3 + v]);
					return 2;
				}
				double t0 = now();
				for (int i = 0; i < launches; i++)
					tiny<<<1, 32, 0, s>>>(counter);
				CK(cudaStreamSynchronize(s));
				res[((size_t)p * nspec + v) * 2 + off] = (now() - t0) / launches;
			}
		}
	}
	ab("");
	printf("{\"workload\": \"launch\", \"launches\": %d, \"abk\": {", launches);
	for (int v = 0; v < nspec; v++) {
		printf("%s\"%s\": [", v ? ", " : "", argv[3 + v]);
		for (int p = 0; p < pairs; p++)
			printf("%s[%.9e, %.9e]", p ? ", " : "", res[((size_t)p * nspec + v) * 2],
			       res[((size_t)p * nspec + v) * 2 + 1]);
		printf("]");
	}
	printf("}}\n");
	return 0;
}
