/* `cuptrace analyze`: why a run is slow. A sink fed by the readers (read/read.h) keeps the GPU
 * work (kernels, copies, memsets) and the host slices (API calls, op and NVTX ranges), then
 * computes steps, GPU busy and idle by cause, GPU time per op, and findings (analyze_run.c);
 * analyze_print.c prints them (text, markdown, JSON), analyze_annotate.c draws them into a trace.
 * README "Why is it slow: analyze" defines every figure.
 *
 * Ownership: the result belongs to the caller (cuptrace_analysis_free). Threading: one thread. */
#ifndef CUPTRACE_WHY_ANALYZE_H
#define CUPTRACE_WHY_ANALYZE_H

#include "format/event.h"
#include "stats/idle_cause.h"

#include <stdint.h>
#include <stdio.h>

struct cuptrace_analyze_opts {
	const char *step_name; /* --step NAME: ranges of this name (or numbered: "NAME 3") are the
	                        * steps; NULL: the first source found (README, Steps) */
	int64_t gap_ns;        /* a GPU gap at least this long is a finding (default 100 us) */
	int64_t tiny_ns;       /* a kernel shorter than this is tiny (default 10 us) */
	int top;               /* rows of the longer tables (default 10) */
	int by_line;           /* --group-by line: host wait per line from host stack samples */
};

/* What the launching thread was doing at a time: innermost range and API call (NULL: none). */
struct cuptrace_an_host_ctx {
	const char *range, *api;
	int64_t tid;
};

/* Where the launching thread's host stack samples (record --sample, issue 46) fell inside a GPU
 * idle interval: a frame of the program's own code ("load_batch (train.py:13)": the innermost
 * frame outside Python's library and installed packages) and how many samples it had. */
#define CUPTRACE_AN_HOST_FRAMES 3
struct cuptrace_an_host_frame {
	const char *frame;
	uint32_t samples;
};
/* A finding keeps more of its frames than it shows (CUPTRACE_AN_HOST_FRAMES), so that the top
 * ones of a job stay right when its files' findings are merged. */
#define CUPTRACE_AN_FINDING_FRAMES 8

struct cuptrace_an_idle {
	int64_t ts, dur;
	/* The launching thread's samples inside the interval, and their top frames (most first). */
	uint32_t host_samples;
	struct cuptrace_an_host_frame host_frames[CUPTRACE_AN_HOST_FRAMES];
	size_t nhost_frames;
	enum cuptrace_idle_cause cause; /* the cause holding most of the interval */
	int64_t by_cause[CUPTRACE_IDLE_NCAUSES];
	size_t gpu;                       /* index in gpus */
	const char *next_work;            /* the work that ended the gap */
	struct cuptrace_an_host_ctx host; /* on the launching thread of next_work, at ts */
	size_t rank;                      /* index in ranks */
};

struct cuptrace_an_gap {
	int64_t ts, dur;
	uint32_t gpu;
	uint32_t cause; /* the cause holding most of it */
};

struct cuptrace_an_stream {
	const char *name;
	size_t gpu;
	uint64_t ops;
	int64_t first_ts, last_end; /* the stream's window: first work start, last work end */
	int64_t busy_ns;            /* union of its kernels, copies, memsets */
	int64_t idle_ns;            /* window minus busy */
	int64_t idle_by_cause[CUPTRACE_IDLE_NCAUSES];
};

struct cuptrace_an_gpu {
	const char *name; /* the group's name, "GPU 0: NVIDIA H200" */
	int32_t pid;
	size_t file;
	size_t rank;                       /* index in ranks */
	uint64_t group_key;                /* internal: the group track's key */
	uint64_t kernels, copies, memsets; /* in the window below */
	uint64_t graphs;                   /* whole CUDA graph launches, likewise */
	/* The window of the figures below: its first work start, its last work end, inside its
	 * process's steady state where that has steps (README); the whole trace otherwise. */
	int64_t first_ts, last_end;
	int64_t busy_ns; /* union over all its streams */
	int64_t idle_ns;
	int64_t idle_by_cause[CUPTRACE_IDLE_NCAUSES];
	int64_t comm_ns, compute_ns,
	    overlap_ns; /* NCCL kernels' union, the rest's, their overlap */
	/* Start-up, left out of the figures above: from its first work to the end of its
	 * process's first step (0 without steps), and the GPU idle in it. */
	int64_t startup_ns, startup_idle_ns;
};

/* What made an outlier step slow: the part of it that grew most over its process's median. */
enum cuptrace_step_cause {
	CUPTRACE_STEP_CAUSE_NONE = 0,
	CUPTRACE_STEP_CAUSE_GPU_WORK,  /* its GPU work took longer */
	CUPTRACE_STEP_CAUSE_HOST_GAP,  /* the host launched nothing for longer, busy outside CUDA */
	CUPTRACE_STEP_CAUSE_HOST_SYNC, /* ... sitting in blocking CUDA calls (synchronize, ...) */
	CUPTRACE_STEP_CAUSE_COLLECTIVE, /* its collectives (NCCL kernels) took longer: a wait */
	CUPTRACE_STEP_NCAUSES
};
extern const char *const cuptrace_step_cause_names[CUPTRACE_STEP_NCAUSES]; /* NULL, "gpu_work" */

struct cuptrace_an_step {
	const char *name; /* its mark's name ("step 3", "optimizer.step"), or "iteration" */
	int64_t number;   /* from its name ("step 12": 12), else its place on its thread (0, 1..) */
	int32_t pid;
	size_t file;
	int64_t tid; /* the thread whose marks (or launches) delimit it */
	/* Its period (README): from the previous step's completion on its thread (its own mark's
	 * start for the first) to its own completion: the later of its mark's end and the end of
	 * the GPU work launched in it. In an async loop that is when the GPU finished it, so a
	 * step slowed by its own GPU work or a host stall is the one that takes longer, not the
	 * later step whose host waits for it. */
	int64_t ts, dur;
	int64_t host_ts, host_dur; /* its host part: from the previous step's mark's end (its own
	                            * mark's start for the first) to its own mark's end; what
	                            * was launched in it is the step's */
	int64_t mark_ts, mark_dur; /* its mark: the range, optimizer.step(), or the iteration's
	                            * launches (first start to last end) */
	int64_t gpu_ts, gpu_end;   /* GPU extent: first start, last end of the work launched in it
	                            * (from any thread of its process); both 0 without work */
	int64_t busy_ns;           /* GPU work of the step's process inside the period, union */
	int64_t idle_ns;           /* dur - busy_ns */
	int64_t gpu_work_ns;       /* GPU time of the work launched in it, NCCL kernels left out */
	int64_t comm_ns;           /* GPU time of the NCCL kernels launched in it */
	int64_t host_gap_ts, host_gap_ns; /* the longest stretch of its host part in which no
	                                   * launch call of the process ran */
	int64_t host_gap_blocked_ns;      /* of it, the step's thread in blocking CUDA calls
	                                   * (synchronize, synchronous copies, allocations) */
	uint64_t kernels;                 /* GPU work launched from inside the step */
	uint64_t launches;                /* API calls inside the step that launched GPU work */
	int startup;                      /* its thread's first step: start-up, not judged */
	int tail;    /* its thread's last step whose period ends with its GPU work, after
	              * its mark: measured unlike the others, not judged */
	int outlier; /* period beyond its process's median + max(20% median, 5 MAD) */
	enum cuptrace_step_cause cause; /* outliers: what grew most */
	int64_t cause_ns;               /* by how much that part grew over the process's median */
	/* Its rank (index in ranks). */
	size_t rank;
	/* Host time in collective calls (README, collective_wait) starting inside it; arrive_ns:
	 * from its start to its first collective (NCCL kernel start, else collective call; -1:
	 * none). */
	int64_t host_comm_ns, arrive_ns;
	/* The gaps of the gpu_gap finding that end inside it: how many, their GPU idle, and of
	 * that the host outside CUDA (where it held up the others, the straggler's). */
	uint64_t gaps;
	int64_t gap_idle_ns, gap_host_ns;
};

struct cuptrace_an_kernel_share {
	const char *name;
	int64_t ns;
	uint64_t count;
};

struct cuptrace_an_op {
	const char *name;
	int64_t self_ns;  /* GPU work whose launch's innermost range has this name */
	int64_t total_ns; /* GPU work with this name anywhere among its launch's ranges (once) */
	uint64_t self_count;
	struct cuptrace_an_kernel_share top[3]; /* by self time */
};

struct cuptrace_an_instance {
	int64_t ts, dur;
	int64_t tid;
	const char *what; /* the call or work */
	const char *op;   /* innermost range on the launching thread */
	uint64_t bytes;
	size_t rank; /* index in ranks; SIZE_MAX: none */
	/* Host stack samples of thread tid inside [ts, ts + dur], and the frame most of them were
	 * in (NULL: none) with its count. */
	uint32_t host_samples, host_frame_samples;
	const char *host_frame;
};

enum { CUPTRACE_AN_WORST = 5 };

/* A finding keeps its figures apart (README "Why is it slow", the table of findings): the host
 * time in the calls it counts, the GPU time of the work involved, the GPU idle in the gaps it
 * explains (of which: the launching thread was busy outside any CUDA call); total_ns is the one
 * it is judged on, per finding (judged_on), severe when it is at least 5% of its rank's steady
 * state on some rank. */
struct cuptrace_an_finding {
	const char *id; /* stable: "sync_copy", "pageable_copy", "host_sync_idle", "item_copy",
	                 * "gpu_gap", "launch_bound", "tiny_kernels", "alloc_steady", "straggler",
	                 * "collective_wait" and "outside_steady" (notes, never severe) */
	const char *title;
	const char *advice;    /* follows what dominates (dominant) */
	const char *count_of;  /* what count counts: "copies", "calls", "gaps", "runs", ... */
	const char *judged_on; /* what total_ns is, in words; NULL: a note, never severe */
	const char *dominant;  /* "call", "gpu_work", "gpu_idle", "host_outside_cuda" (of the
	                        * idle), "wait" */
	int severe;
	uint64_t count;
	int64_t total_ns;     /* what it is judged on */
	int64_t call_ns;      /* host time in its calls */
	int64_t work_ns;      /* GPU time of the work involved */
	int64_t idle_ns;      /* GPU idle in the gaps it explains (README) */
	int64_t idle_host_ns; /* of idle_ns: the launching thread in no CUDA call */
	double share;         /* the largest, over ranks, of total / that rank's steady state */
	size_t nranks;        /* ranks it was found on */
	size_t top_rank;      /* the rank holding the most of it (index in ranks; SIZE_MAX: none) */
	int64_t top_rank_ns;
	struct cuptrace_an_instance worst[CUPTRACE_AN_WORST];
	size_t nworst;
	/* What the launching threads were doing in its instances' intervals (every instance, not
	 * only the worst: the gaps it owns, its calls, its runs), from the host stack samples of
	 * each instance's thread inside it: how many, and the top frames (most first). */
	uint32_t host_samples;
	struct cuptrace_an_host_frame host_frames[CUPTRACE_AN_FINDING_FRAMES];
	size_t nhost_frames;
	/* Of host_samples, those this finding owns: a sample inside the intervals of several
	 * findings (a pageable copy's gap holding an allocation call, a run holding a synchronize's
	 * gap) is counted by each in host_samples and host_frames, but owned by one (the finding
	 * holding the GPU idle interval it is in, else the run, else the call or copy that came
	 * first: src/inject/SAMPLING.md), so that the owned counts add up over findings to the
	 * analysis's findings_host_samples. */
	uint32_t host_samples_owned;
};

/* Host wait by source line (--group-by line, host stack samples): the GPU idle of cause
 * host_wait in the tables' gaps, each gap's share split evenly over the launching thread's
 * samples in its host_wait part, summed by their frame. */
struct cuptrace_an_line_wait {
	const char *line; /* "function (file:line)" as host_frames */
	int64_t wait_ns;
	uint64_t samples;
};

/* A process of the job (a rank): every process with GPU work, steps or host calls, in the order
 * the files and their processes came. */
struct cuptrace_an_rank {
	int32_t pid;
	size_t file;
	int rank;         /* from the trace's metadata (record's RANK, merge --ranks); -1: unsaid */
	const char *host; /* likewise; NULL: unsaid */
	const char *label; /* "rank 1 @ node1", "rank 1"; where no rank is said "input 2 (pid
	                    * 1234)" (several files) or "pid 1234" */
	int64_t steady_from, steady_to; /* its steady state (the traced span without steps) */
	int steady_steps;
	int64_t busy_ns, comm_ns, compute_ns, overlap_ns;
	int64_t step_median_ns; /* the mean of its steps */
	uint64_t nsteps;
	/* Host time inside collective calls (ranges c10d::..., nccl:..., gloo:..., names with
	 * all_reduce, all_gather, reduce_scatter, all_to_all, record_param_comms), once per
	 * thread where they nest: a job without NCCL kernels (gloo, ranks sharing a GPU) waits
	 * there. */
	int64_t host_comm_ns;
	/* The steps in which the others waited for it in the collectives (it came last), and
	 * their wait: per step the median over the others of their time in collectives less
	 * its own. */
	uint64_t last_steps;
	int64_t waited_ns;
};

/* One step number of the job, over the ranks that have it (README "Steps of a job"). */
struct cuptrace_an_job_step {
	int64_t number;
	size_t nranks;
	int64_t median_ns, max_ns; /* step wall over its ranks */
	size_t slowest;            /* the rank of max_ns (index in ranks) */
	/* The rank the others waited for in its collectives (index in ranks; SIZE_MAX: no
	 * collective), their wait (median over them), and what that rank's step had over its own
	 * median: GPU work, and time before its first collective that was not GPU work (a host
	 * stall, the GPU idle). */
	size_t waited_for;
	int64_t wait_ns, extra_gpu_ns, extra_host_ns;
	int outlier; /* the step is an outlier on some rank */
	int startup; /* the first step of some rank: start-up, never slow */
	int held_up; /* the others' wait beyond the job's usual: waited_for held them up */
	int slow;    /* an outlier, or held up (README) */
};

struct cuptrace_analysis {
	int64_t min_ts, max_ts;
	/* The steady state: from the end of the first step to the end of the last (over the
	 * processes with steps); the traced span without steps. steady_steps: 1 when it comes from
	 * steps. Severity is judged against each rank's own (ranks[].steady_*). */
	int64_t steady_from, steady_to;
	int steady_steps;
	uint64_t kernels, copies, memsets, launches;
	uint64_t graphs; /* whole CUDA graph launches (--cuda-graphs graph) */
	/* Graphs instantiated for launch from the GPU in a per-node trace (its metadata
	 * graphs_for_device_launch_unrecorded, summed over the files): their work is missing. */
	uint64_t unrecorded_device_graphs;
	/* What damaged inputs lost (their read_damage metadata, "; " between files); NULL for
	 * whole files. Owned. */
	char *damage;
	uint64_t linked; /* GPU work whose launch call was found */
	/* Where the steps come from (README, Steps): step_kind "option" (--step NAME; source the
	 * name), "profiler_step" ("ProfilerStep#"), "nvtx_family" (source the family: "step" for
	 * "step 0", "step 1"...), "optimizer" ("optimizer.step": record's marks, or
	 * "Optimizer.step#" ranges), "gpu_period" ("GPU work"), "mixed" (processes differ); NULL
	 * without steps. step_confidence: 1 for marks, the period finder's for gpu_period (also
	 * its best try when it found none). */
	const char *step_source, *step_kind;
	double step_confidence;
	/* Without steps: the earliest end of a process's start-up (0: none found). */
	int64_t startup_end;
	struct cuptrace_an_step *steps;
	size_t nsteps;
	int64_t step_median_ns, step_min_ns, step_max_ns, step_mad_ns;
	struct cuptrace_an_gpu *gpus;
	size_t ngpus;
	struct cuptrace_an_stream *streams;
	size_t nstreams;
	struct cuptrace_an_idle *idle; /* the largest GPU idle intervals, longest first */
	size_t nidle;
	uint64_t host_samples; /* host stack samples read (0: the trace has none) */
	/* Of them, those inside some finding's intervals, each once: the sum of the findings'
	 * host_samples_owned. */
	uint64_t findings_host_samples;
	/* With by_line: host wait by line (by wait_ns desc, then line), the host_wait idle of the
	 * gaps it comes from, and of that the part with no sample of its thread in it. */
	int by_line;
	struct cuptrace_an_line_wait *line_waits;
	size_t nline_waits;
	int64_t line_wait_total_ns, line_wait_unsampled_ns;
	struct cuptrace_an_op *ops; /* by self time desc */
	size_t nops;
	int64_t unattributed_ns;              /* GPU work with no range around its launch */
	struct cuptrace_an_finding *findings; /* severe first, then by total desc */
	size_t nfindings;
	struct cuptrace_an_rank *ranks; /* every process (README) */
	size_t nranks;
	/* Two ranks or more with GPU work: the tables and findings name the rank. */
	int multi_rank;
	size_t nfiles;
	struct cuptrace_an_job_step *job_steps; /* by number, with multi_rank and steps */
	size_t njob_steps;
	/* Every GPU idle interval (for --annotate, which takes one file), in time order per GPU;
	 * none when several files were analyzed (they are not summaries). */
	struct cuptrace_an_gap *gaps;
	size_t ngaps;
	void *priv; /* strings and tables the pointers above borrow */
};

/* A sink that analyzes what is replayed into it; several files may be replayed one after
 * another (a set of rank files): call cuptrace_analyze_next_file between them. Each file is
 * analyzed when the next begins and only its summaries are kept (steps, GPU and rank figures,
 * findings with their worst instances, ops), its events freed: memory holds about one file plus
 * the summaries. finish() analyzes the last and combines them into *out (zeroed first; the
 * caller frees it). opts may be NULL (defaults). */
struct cuptrace_sink *cuptrace_analyze_sink_new(struct cuptrace_analysis *out,
                                                const struct cuptrace_analyze_opts *opts);
void cuptrace_analyze_next_file(struct cuptrace_sink *sink);
void cuptrace_analysis_free(struct cuptrace_analysis *a);

/* The report: text (markdown 0) or GitHub markdown (1). */
void cuptrace_analysis_print(const struct cuptrace_analysis *a, FILE *f, int markdown);
/* One JSON object and a newline, schema "cuptrace-analyze/1" (README). 0 or -EIO. */
int cuptrace_analysis_print_json(const struct cuptrace_analysis *a, FILE *f);

/* The section "Host wait by source line" (by_line): text or markdown; JSON key
 * "host_wait_lines" of cuptrace_analysis_print_json. */
void cuptrace_analysis_print_line_waits(const struct cuptrace_analysis *a, FILE *f, int markdown);

/* A sink that passes everything to inner (owned: destroyed with it) and, at finish, adds the
 * "Analysis" group under the trace's first process before finishing inner: per GPU a track of
 * idle intervals named by cause, a track per finding with its worst instances (args: advice,
 * what, op, bytes, tid, count, total_ns, call_ns, gpu_work_ns, gpu_idle_ns, rank), a track of
 * steps per process (their periods, outliers named with their cause), counters of step period
 * and GPU busy % over it. a is borrowed and must outlive the sink. NULL and errno on failure
 * (inner is then destroyed). */
struct cuptrace_sink *cuptrace_annotate_sink_new(struct cuptrace_sink *inner,
                                                 const struct cuptrace_analysis *a);

#endif
