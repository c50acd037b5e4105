/* CUPTI activity records -> the timeline model of format/event.h.
 *
 * The converter owns the track registry (process, host threads, GPUs, streams and their lanes),
 * correlates GPU activity with the API call that caused it (flows, fan-out for graph launches),
 * and hands finished events to a sink. Records arrive in buffers, late and out of order; each
 * buffer is one batch. An API call whose GPU work has not arrived yet is held back (bounded) so
 * its slice can carry every flow it starts.
 *
 * Threading: a converter is used by one thread (the writer thread, or `cuptrace convert`).
 * Ownership: the converter borrows the sink; the caller finishes and destroys it after
 * cuptrace_converter_finish(). */
#ifndef CUPTRACE_CONVERT_CONVERT_H
#define CUPTRACE_CONVERT_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "format/event.h"

/* Maps a string pointer found in a record to its text. Live tracing: the identity (the pointer
 * is valid while the buffer is handled). Converting a capture: a lookup in its string table. */
typedef const char *(*cuptrace_resolve_fn)(void *ctx, const char *ptr);

struct cuptrace_convert_opts {
	size_t sz;
	int driver_all;     /* 1: keep the runtime's internal driver calls too */
	int runtime_all;    /* 1: keep trivial runtime calls too (convert/runtime_filter.h) */
	size_t max_pending; /* API calls held back waiting for their GPU records (default 64K) */
	/* 1: CUPTI's overhead on a track per thread ("CUPTI overhead: <thread> (<tid>)"); 0: on
	 * one track "CUPTI overhead" per process, each slice's thread in its arg "tid" */
	int overhead_per_thread;
};

/* Per-kind counts of what went in and what came out, for the summary and the trace's metadata. */
struct cuptrace_convert_counts {
	uint64_t records;
	uint64_t runtime, driver, driver_filtered, runtime_filtered, kernels, memcpys, memsets,
	    syncs, markers;
	uint64_t graph_launches;        /* whole CUDA graph launches (--cuda-graphs graph) */
	uint64_t device_graph_launches; /* of those, launched from a kernel */
	uint64_t graph_nodes; /* kernels, copies and memsets drawn that ran as graph nodes */
	uint64_t memory, overheads, other;
	uint64_t static_memory;  /* module globals reported as allocations: not drawn */
	uint64_t nvtx_startend;  /* start/end range ids reported by the NVTX callbacks */
	uint64_t pytorch_ops;    /* NVTX ranges named like PyTorch ops (convert/opname.h) */
	uint64_t no_timestamp;   /* GPU records CUPTI gave no start/end (unfinished, or lost) */
	uint64_t flows;          /* API->GPU links */
	uint64_t unlinked_gpu;   /* GPU activities whose API record never arrived */
	uint64_t pending_forced; /* API calls written before all their GPU work arrived */
	uint64_t lanes;          /* extra lane tracks created for overlapping work */
	uint64_t window_peak;    /* most GPU records the reorder window held at once */
	uint64_t stacks;         /* distinct call stacks received (convert/stackrec.h) */
	uint64_t stacks_bad;     /* malformed stack records, or ones naming an unknown stack */
	uint64_t samples;        /* host stack samples written (inject/sampler.h) */
	/* Of unlinked_gpu, why (CUPTRACE_LOG=info): their correlation slot went to an id 65,536
	 * later; their API call was already written; they ended before the call with their id
	 * began (an id CUPTI got wrong); still waiting at the finish. */
	uint64_t unlinked_evicted, unlinked_late, unlinked_before_call, unlinked_at_finish;
};

struct cuptrace_converter;

/* info is copied (strings too). The converter calls sink->ops->begin and declares the process. */
struct cuptrace_converter *cuptrace_converter_new(struct cuptrace_sink *sink,
                                                  const struct cuptrace_trace_info *info,
                                                  const struct cuptrace_convert_opts *opts);
void cuptrace_converter_set_resolver(struct cuptrace_converter *c, cuptrace_resolve_fn fn,
                                     void *ctx);
/* Names a host thread; takes effect if called before the thread's first record is converted. */
int cuptrace_converter_thread_name(struct cuptrace_converter *c, int64_t tid, const char *name);
/* Marker ids of NVTX start/end ranges (as opposed to push/pop): those go on the process's
 * "NVTX ranges" tracks even where they happen to nest on one thread. Call before the buffer
 * holding their START records. */
int cuptrace_converter_nvtx_startend(struct cuptrace_converter *c, const uint64_t *ids, size_t n);
/* One CUPTI buffer's records, in buffer order. Returns 0 or the sink's first error. */
int cuptrace_converter_add(struct cuptrace_converter *c, const CUpti_Activity *const *recs,
                           size_t n);
/* Records lost before conversion (CUPTI's count, cuptrace's own count); cumulative values. */
void cuptrace_converter_dropped(struct cuptrace_converter *c, uint64_t cupti, uint64_t cuptrace);
/* Metadata learnt late (at the end of a run: PCI bus ids, the NCCL version, closing clock
 * readings); written with the final metadata. A later value for a key replaces the earlier. */
void cuptrace_converter_meta(struct cuptrace_converter *c, const char *key, const char *value);
/* GPU hardware metrics (PM sampling, convert/gpumetrics.h): one GPU's configuration, given
 * before its samples; a later one for the same GPU ends the earlier. Strings are copied. */
struct cuptrace_gm_config {
	uint32_t device;         /* CUDA device index, as in CUPTI's records */
	const char *device_name; /* names the GPU's group if no DEVICE record did; may be NULL */
	uint64_t interval_ns;
	int64_t clock_offset_ns; /* sampler clock - trace clock, in ns */
	size_t nmetrics;
	const char *const *metrics; /* CUPTI's metric names */
};
int cuptrace_converter_gpu_metrics(struct cuptrace_converter *c,
                                   const struct cuptrace_gm_config *cfg);
/* n samples of the device's configured metrics, in the order taken: times[2i] and times[2i+1]
 * are sample i's start and end (sampler clock), values[i * nmetrics + m] its metric m. */
int cuptrace_converter_gpu_samples(struct cuptrace_converter *c, uint32_t device, size_t nmetrics,
                                   const uint64_t *times, const double *values, size_t n);
/* Writes everything held back, then the final metadata (counts, dropped records). Does not
 * finish the sink. */
int cuptrace_converter_finish(struct cuptrace_converter *c);
const struct cuptrace_convert_counts *cuptrace_converter_counts(const struct cuptrace_converter *c);
void cuptrace_converter_free(struct cuptrace_converter *c);

/* The string-pointer fields of a record (kernel name, marker name and domain, ...): fills up to
 * 4 pointers to the fields and returns how many. Shared by the capture writer and the converter
 * so both agree on what must be resolved. */
size_t cuptrace_record_strings(const CUpti_Activity *r, const char *const **fields);

/* Driver API callback ids that the CUDA runtime calls on its own (device queries at init,
 * kernel lookups before a first launch): left out unless driver_all. Fills up to max ids and
 * returns how many. */
size_t cuptrace_driver_noise_cbids(uint32_t *out, size_t max);
int cuptrace_driver_cbid_is_noise(uint32_t cbid);
/* Driver calls recorded by default (--driver work): those that launch, copy, set, allocate or
 * free memory, record, wait for or query events and streams, synchronize, or load modules:
 * every call that a GPU, memory, event or synchronization record can name by its correlation
 * id, and the waits. The table and why: convert_records.c's driver_work. */
int cuptrace_driver_cbid_is_work(uint32_t cbid);

/* An API call's display name: CUPTI's name for (kind, cbid) without its _vNNNN suffix
 * (cudaMalloc_v3020 -> cudaMalloc), written into buf or a static string; "runtime API N" for
 * a cbid these headers do not name. */
const char *cuptrace_api_name(CUpti_ActivityKind kind, uint32_t cbid, char *buf, size_t n);

/* Size of the record struct cuptrace reads for a kind, 0 for kinds it ignores. */
size_t cuptrace_record_min_size(CUpti_ActivityKind kind);

#endif
