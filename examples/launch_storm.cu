// launch_storm [threads] [seconds] [count file]: each host thread owns a stream and launches a
// tiny kernel back to back until `seconds` have passed, then synchronizes. The launch storm of
// tools/bench/storm_60s.sh: as many records per second as the machine can issue. Prints the
// kernels launched to stderr ("launch_storm: N kernels launched") and, if given, to the count
// file; the kernels themselves count on the GPU and must agree. LAUNCH_STORM_RATE_S=T: the first
// thread also prints its launches per second every T seconds to stderr ("launch_storm: rate
// 12.0 s 410000 launches/s"; gpu_top_attach_test.sh compares them around a watch).
#include <cuda_runtime.h>
#include <pthread.h>
#include <time.h>
#include "common.h"

__global__ void tiny(unsigned long long *x)
{
	if (threadIdx.x == 0 && x)
		atomicAdd(x, 1ull);
}

static double seconds = 60;
static double rate_every; /* LAUNCH_STORM_RATE_S (0: no rates printed) */
static unsigned long long *counter;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	long *launched = (long *)arg;
	int first = *launched == 0;
	char name[16];
	snprintf(name, sizeof(name), "storm-%ld", *launched);
	*launched = 0;
	pthread_setname_np(pthread_self(), name);
	cudaStream_t s;
	CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
	double start = now_s(), end = start + seconds, t = start;
	double next = first && rate_every > 0 ? start + rate_every : 0, t_at = start;
	long n = 0, n_at = 0;
	do {
		/* The clock is read once per 256 launches: a launch costs about 2 us. */
		for (int i = 0; i < 256; i++)
			tiny<<<1, 32, 0, s>>>(counter);
		n += 256;
		t = now_s();
		if (next && t >= next) {
			fprintf(stderr, "launch_storm: rate %.1f s %.0f launches/s\n", t - start,
			        (double)(n - n_at) / (t - t_at));
			n_at = n;
			t_at = t;
			next = t + rate_every;
		}
	} while (t < end);
	CK(cudaGetLastError());
	CK(cudaStreamSynchronize(s));
	CK(cudaStreamDestroy(s));
	*launched = n;
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	seconds = argc > 2 ? atof(argv[2]) : 60;
	const char *count_file = argc > 3 ? argv[3] : NULL;
	const char *every = getenv("LAUNCH_STORM_RATE_S");
	rate_every = every ? atof(every) : 0;
	if (threads < 1 || threads > 256 || !(seconds >= 0)) {
		fprintf(stderr, "usage: launch_storm [threads 1..256] [seconds] [count file]\n");
		return 2;
	}
	CK(cudaMalloc(&counter, sizeof(*counter)));
	CK(cudaMemset(counter, 0, sizeof(*counter)));
	pthread_t t[256];
	long launched[256];
	for (int i = 0; i < threads; i++) {
		launched[i] = i;
		pthread_create(&t[i], NULL, worker, &launched[i]);
	}
	long total = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		total += launched[i];
	}
	unsigned long long ran = 0;
	CK(cudaMemcpy(&ran, counter, sizeof(ran), cudaMemcpyDeviceToHost));
	CK(cudaFree(counter));
	fprintf(stderr, "launch_storm: %ld kernels launched\n", total);
	if (count_file) {
		FILE *f = fopen(count_file, "w");
		if (f) {
			fprintf(f, "%ld\n", total);
			fclose(f);
		}
	}
	if (ran != (unsigned long long)total) {
		fprintf(stderr, "launch_storm: the GPU counted %llu kernels, %ld launched\n", ran,
		        total);
		return 1;
	}
	printf("launch_storm: %d threads, %.0f s, %ld kernels ok\n", threads, seconds, total);
	return 0;
}
