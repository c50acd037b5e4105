/* GPU hardware metrics in the traced process: CUPTI PM sampling of every GPU the program
 * creates a context on, from one sampler thread of its own (never an application thread), when
 * CUPTRACE_GPU_METRICS is set. Samples go to the writer thread, which hands them to the
 * converter or the capture (convert/gpumetrics.h turns them into counter tracks).
 *
 * Fails soft: any CUPTI or perf library error (no permission, unsupported GPU, a MIG slice,
 * counters held by another profiler, libnvperf_host.so missing: CUPTI loads it only when the
 * profiler host API is first used, so libcuptrace.so gains no load-time dependency) gives one
 * line on stderr saying why and the trace goes on without metrics.
 *
 * Run on an H100 (driver 580, CUPTI 13.0): the metric names, the sample clock and the known
 * answers of tests/gpu_metrics_test.sh were checked there (README, "GPU metrics"). */
#ifndef CUPTRACE_INJECT_GPUMETRICS_H
#define CUPTRACE_INJECT_GPUMETRICS_H

#include <stdint.h>
#include <stdio.h>

#include <cupti.h>

#include "convert/consumer.h"

/* Reads CUPTRACE_GPU_METRICS (unset, "" or "0": off; "1": the default set; else a
 * comma-separated list of CUPTI metric names) and CUPTRACE_GPU_METRICS_RATE (Hz, default
 * 10000). When on, asks the subscriber for context creation. 0, or a negative errno. */
int cuptrace_gm_setup(CUpti_SubscriberHandle sub);
/* From the subscriber callback (an application thread): queues the context's device for the
 * sampler thread and returns at once. */
void cuptrace_gm_on_callback(CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data);
/* Writer thread: hands what the sampler produced to the session's consumers. */
int cuptrace_gm_drain(const struct cuptrace_consumer *to);
/* Finishing thread: stops sampling, decodes what is left and ends the sampler thread (waiting
 * at most a few seconds for it). A GPU's PM sampling is never disabled once it ran (see
 * dev_finish in gpumetrics.c), so a later session in the same process does not sample it. */
void cuptrace_gm_stop(void);
/* A one-line status for the trace's metadata ("gpu_metrics"); NULL when off. */
const char *cuptrace_gm_status(void);
/* After cuptrace_gm_stop: the samples evaluated and the sampler thread's CPU time over the
 * run (what sampling cost the machine). 0 when there was no sampler thread or it did not end. */
int cuptrace_gm_cost(uint64_t *samples, int64_t *cpu_ns);
/* `cuptrace record --list-gpu-metrics`: every PM sampling metric of every GPU to out. */
int cuptrace_gm_list(FILE *out);

#endif
