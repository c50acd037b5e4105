/* What the analyze sink keeps of a trace (analyze_sink.c fills it, analyze_run.c computes the
 * analysis from it, analyze_job.c folds each file's analysis into the job's). Private to the
 * analyze files. Memory: about 64 bytes per GPU work item and per host slice of the file being
 * read, plus one string table; earlier files are summaries only. */
#ifndef CUPTRACE_WHY_SINK_STATE_H
#define CUPTRACE_WHY_SINK_STATE_H

#include "why/analyze.h"
#include "common/util.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* qsort, unless base is in order already (one pass of cmp): the readers replay in time order,
 * so per-thread and per-GPU arrays mostly are, and sorting them was a tenth of the analysis. */
static inline void an_sort(void *base, size_t n, size_t size,
                           int (*cmp)(const void *, const void *))
{
	const char *p = base;
	size_t i = 1;
	while (i < n && cmp(p + (i - 1) * size, p + i * size) <= 0)
		i++;
	if (i < n)
		qsort(base, n, size, cmp);
}

/* Host slice classes. */
enum {
	H_RANGE = CUPTRACE_HOST_RANGE,
	H_API = CUPTRACE_HOST_API,
	H_SYNC = CUPTRACE_HOST_SYNC,
	H_COPY_SYNC = CUPTRACE_HOST_COPY_SYNC,
	H_ALLOC = CUPTRACE_HOST_ALLOC
};
/* GPU work kinds. */
/* W_GRAPH: a whole CUDA graph launch (--cuda-graphs graph): GPU time like a kernel's, left out
 * of what is said of single kernels (tiny kernels, NCCL). */
enum { W_KERNEL = 0, W_COPY, W_SET, W_GRAPH };
/* GPU work flags. */
enum { WF_PAGEABLE = 1, WF_DTOH = 2, WF_NCCL = 4 };
/* Host slice flags (analyze_run.c): it launched a small DtoH copy (.item()) or a pageable copy;
 * a synchronize that waits for the small DtoH copy its thread launched just before (.item() in
 * PyTorch is cudaMemcpyAsync then cudaStreamSynchronize, both in one op). */
enum { HF_ITEM = 1, HF_PAGEABLE = 2, HF_ITEM_SYNC = 4 };
/* A small DtoH copy: what .item() and printing a tensor do. */
enum { AN_ITEM_BYTES = 64 };

struct an_thread {
	int32_t pid;
	int64_t tid;
	size_t file;
	size_t first, n; /* its slices in an.host, after sorting */
};

struct an_stream_in {
	uint32_t name;
	size_t gpu; /* index in an.gpus */
};

struct an_gpu_in {
	uint32_t name;
	int32_t pid;
	size_t file;
	uint64_t key;
};

struct an_host {
	int64_t ts, dur;
	uint64_t corr;
	uint32_t thread; /* index in an.threads */
	uint32_t name;
	uint32_t parent; /* innermost enclosing range + 1 (0: none), after sorting */
	uint32_t seq;    /* arrival order, to map flow ends to the sorted position */
	uint8_t cls;
	uint8_t launched; /* it launched GPU work */
	uint8_t flags;    /* HF_* */
};

struct an_work {
	int64_t ts, dur;
	uint64_t corr, bytes;
	uint64_t flow;   /* first incoming flow id, 0: none */
	uint32_t stream; /* index in an.streams */
	uint32_t name;
	uint32_t launch; /* the launching host slice + 1 in sorted an.host, 0: unknown */
	uint8_t kind, flags;
};

struct an_flow {
	uint64_t key; /* file-qualified flow id */
	uint32_t seq; /* host slice's arrival order */
};

/* Track keys are (file, uuid) hashed into one u64: uuids repeat across rank files. */
struct an_track {
	uint8_t kind; /* 1 thread, 2 gpu group, 3 stream, 4 process, 0 other */
	uint32_t idx; /* thread, gpu, stream or who index */
};

/* Who a process of the file is, where the trace says: a merged trace (merge --ranks) says it per
 * process (its "cuptrace: trace info" instant's rank and hostname, else the process's name
 * "rank R @ host: ..."); rank -1 and host 0 where unsaid. */
struct an_who {
	int32_t pid;
	int rank;
	uint32_t host; /* string id */
};

/* The job's state between files (analyze_job.c): the job's own strings (the result's priv), its
 * ops by name, and the capacities of its growing arrays. */
struct an_fold {
	void *priv;                   /* struct anx_priv of the job's result */
	struct cuptrace_u64map op_of; /* job string id of an op's name -> index + 1 */
	size_t stepcap, gpucap, streamcap, opcap, rankcap, findcap, idlecap, linecap;
	int have_ts; /* a file with events was folded: the job's span is set */
	/* The files' findings, one record per finding and rank, merged by id at the end (the
	 * straggler takes its rank's GPU gaps in the steps it held up first). */
	struct cuptrace_an_finding *recs;
	size_t nrecs, reccap;
};

struct an {
	struct cuptrace_analyze_opts opts;
	struct cuptrace_analysis *out; /* the file's analysis, while an_compute makes it */
	struct cuptrace_analysis *job; /* the caller's: every file folded in */
	struct an_fold fold;
	int err;
	size_t file;
	/* The file's own rank and host (begin()'s metadata: rank, hostname), -1 and 0 unsaid;
	 * its processes' (struct an_who), by (file, pid). */
	int file_rank;
	uint32_t file_host;
	struct an_who *who;
	size_t nwho, whocap;
	struct cuptrace_u64map who_of;
	struct cuptrace_strtab strs;
	struct cuptrace_u64map trk;       /* track key -> index + 1 in tracks */
	struct cuptrace_u64map thr_of;    /* (file, pid, tid) -> thread + 1 */
	struct cuptrace_u64map name_thr;  /* (file, pid, name) -> thread + 1: lanes of threads */
	struct cuptrace_u64map stream_of; /* (gpu, name) -> stream + 1: lanes of streams */
	struct an_track *tracks;
	size_t ntracks, trackcap;
	struct an_thread *threads;
	size_t nthreads, threadcap;
	struct an_gpu_in *gpus;
	size_t ngpus, gpucap;
	struct an_stream_in *streams;
	size_t nstreams, streamcap;
	struct an_host *host;
	size_t nhost, hostcap;
	struct an_work *work;
	size_t nwork, workcap;
	struct an_flow *flows;
	size_t nflows, flowcap;
	int64_t min_ts, max_ts;
	int have_ts;
	uint64_t max_uuid;
	/* Host stack samples (issue 46): each with its stack's frame in the program's code (a
	 * string id in strs), in time order as replayed; stack id -> that string id. */
	struct an_sample {
		int64_t ts;
		int64_t tid;
		uint32_t frame;
	} * samples;
	size_t nsamples, samplecap;
	struct cuptrace_u64map stack_frame;
};

/* analyze_run.c: computes an->out from what the sink kept. 0 or -ENOMEM. */
int an_compute(struct an *an);

/* analyze_job.c: moves what the job keeps of one file's analysis (*part, then freed) into
 * an->job; an_job_finish labels the ranks and adds what needs every rank: the job's steps, the
 * straggler, the collectives per rank; then orders the findings. 0 or -ENOMEM. */
int an_fold(struct an *an, struct cuptrace_analysis *part);
int an_job_finish(struct an *an);
void an_fold_free(struct an_fold *f);

static inline uint64_t an_key(size_t file, uint64_t a, uint64_t b)
{
	return cuptrace_hash64(cuptrace_hash64(a + 0x9e3779b97f4a7c15ull * (file + 1)) ^ b);
}

#endif
