/* Writer-thread throughput benchmark (no GPU): synthesizes the records of a launch-bound loop
 * (T threads, each a cudaLaunchKernel record and a kernel record per launch, with jittered
 * times), in CUPTI-sized batches, and times the converter plus each output format.
 *   convert_bench [launches per thread] [threads] [out dir] [only this output, e.g. bench.json]
 *                 [compression: chunks, gzip or none; default: as the output's name says]
 *                 [compression level: 1 to 12; default 5] [kernels per launch: G]
 *                 [kernels per batch: default 20000]
 * With G > 1 each launch is a cudaGraphLaunch of a graph of G kernels (graph nodes share the
 * launch's correlation id, as CUPTI reports them): the records of a graph replay loop.
 * Prints records per second of wall time, records per CPU second (every thread of the process:
 * the converter's and the compressors'; "per core"), and bytes per kernel for each format. */
#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/util.h"
#include "convert/convert.h"
#include "format/formats.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* User and system time of every thread of the process, joined or running. */
static double cpu_seconds(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char **argv)
{
	int launches = argc > 1 ? atoi(argv[1]) : 20000;
	int threads = argc > 2 ? atoi(argv[2]) : 4;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	int per = argc > 7 && atoi(argv[7]) > 1 ? atoi(argv[7]) : 1;
	size_t n = (size_t)launches * threads * per; /* kernels */
	size_t na = (size_t)launches * threads;      /* launches */
	CUpti_ActivityAPI *api = calloc(na, sizeof(*api));
	CUpti_ActivityKernel10 *k = calloc(n, sizeof(*k));
	if (!api || !k)
		return 1;
	const uint64_t t0 = 1000000000ull;
	uint64_t host[64] = {0}, gpu[64] = {0};
	uint32_t corr = 100;
	for (int i = 0; i < launches; i++)
		for (int t = 0; t < threads; t++) {
			size_t j = (size_t)i * threads + t;
			uint64_t s = t0 + host[t] + 1500 + rnd(600);
			uint64_t d = 4000 + rnd(3000);
			api[j] = (CUpti_ActivityAPI){
			    .kind = CUPTI_ACTIVITY_KIND_RUNTIME,
			    .cbid = per > 1 ? CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000
			                    : CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
			    .start = s,
			    .end = s + d,
			    .processId = 1,
			    .threadId = 100 + (uint32_t)t,
			    .correlationId = corr};
			host[t] = s + d - t0;
			for (int g = 0; g < per; g++) {
				CUpti_ActivityKernel10 *kk = &k[j * per + g];
				uint64_t ks = t0 + (gpu[t] > host[t] ? gpu[t] : host[t]) +
				              (g ? 300 : 800) + rnd(200);
				kk->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
				kk->start = ks;
				kk->end = ks + 704 + rnd(3);
				gpu[t] = kk->end - t0;
				kk->deviceId = 0;
				kk->contextId = 1;
				kk->streamId = 13 + (uint32_t)t;
				kk->correlationId = corr;
				kk->gridX = kk->gridY = kk->gridZ = 1;
				kk->blockX = 32, kk->blockY = kk->blockZ = 1;
				kk->registersPerThread = 16;
				kk->name = "_Z4tinyPi";
				if (per > 1)
					kk->graphId = 7, kk->graphNodeId = 1000 + (uint64_t)g;
			}
			corr++;
		}
	/* Batches like CUPTI's per-thread buffers: a run of one thread's API records, then the
	 * kernels. */
	/* Launches a batch: 20,000 kernels' worth, or argv[8] kernels' (a 1 MiB CUPTI buffer holds
	 * about 4,800 kernel records; a flush hands over fewer). */
	size_t bk = argc > 8 && atoi(argv[8]) > 0 ? (size_t)atoi(argv[8]) : 20000;
	const size_t batch = bk / (size_t)per ? bk / (size_t)per : 1;
	const CUpti_Activity **recs = malloc(batch * (1 + (size_t)per) * sizeof(*recs));
	static const char *const outs[] = {"bench.pftrace", "bench.pftrace.gz", "bench.json",
	                                   "bench.json.gz"};
	printf("convert_bench: %d threads x %d launches%s = %zu kernels, %zu records\n", threads,
	       launches, per > 1 ? " of graphs" : "", n, n + na);
	printf("%-18s %10s %14s %14s %12s\n", "output", "seconds", "records/s", "records/cpu-s",
	       "bytes/kernel");
	for (size_t o = 0; o < sizeof(outs) / sizeof(outs[0]); o++) {
		if (argc > 4 && strcmp(argv[4], outs[o]))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir, outs[o]);
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		double cpu0 = cpu_seconds();
		struct cuptrace_sink *sink = cuptrace_sink_open_recorder(
		    path, path, NULL, argc > 5 ? argv[5] : NULL, argc > 6 ? atoi(argv[6]) : 0);
		if (!sink) {
			perror(path);
			return 1;
		}
		struct cuptrace_trace_info info = {
		    .pid = 1, .process_name = "bench", .start_boottime_ns = (int64_t)t0};
		struct cuptrace_converter *c = cuptrace_converter_new(sink, &info, NULL);
		for (size_t i = 0; i < na; i += batch) {
			size_t m = 0, end = i + batch < na ? i + batch : na;
			for (size_t j = i; j < end; j++)
				recs[m++] = (const CUpti_Activity *)&api[j];
			for (size_t j = i * per; j < end * per; j++)
				recs[m++] = (const CUpti_Activity *)&k[j];
			cuptrace_converter_add(c, recs, m);
		}
		cuptrace_converter_finish(c);
		int r = sink->ops->finish(sink);
		cuptrace_sink_destroy(sink);
		cuptrace_converter_free(c);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double cpu = cpu_seconds() - cpu0;
		double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
		FILE *f = fopen(path, "rb");
		long size = 0;
		if (f) {
			fseek(f, 0, SEEK_END);
			size = ftell(f);
			fclose(f);
		}
		double nrec = (double)(n + na);
		printf("%-18s %10.3f %14.0f %14.0f %12.2f%s\n", outs[o], secs, nrec / secs,
		       nrec / cpu, (double)size / (double)n, r ? "  (write error)" : "");
	}
	free(recs);
	free(api);
	free(k);
	return 0;
}
