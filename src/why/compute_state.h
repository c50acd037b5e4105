/* The state of one analysis computation (one file), shared by analyze_run.c (which drives it),
 * steps_find.c (the steps and their figures), analyze_find.c (GPU time per op, findings),
 * analyze_rank.c (who each process is, its steps' collectives, its figures) and analyze_query.c
 * (the look-ups all use: host context at a time, per-process busy intervals). Calls go
 * run -> steps -> query, run -> find -> rank -> query, run -> query. */
#ifndef CUPTRACE_WHY_COMPUTE_STATE_H
#define CUPTRACE_WHY_COMPUTE_STATE_H

#include "why/sink_state.h"

/* What the result owns besides its arrays: the strings its rows point into. */
struct anx_priv {
	struct cuptrace_strtab strs;
};

/* A GPU idle interval; work: the work item (index in an.work) that ended it. */
struct anx_gap {
	int64_t ts, dur;
	uint32_t gpu, cause, work;
};

/* Per process (file, pid): the union of its GPUs' work as sorted disjoint intervals with prefix
 * sums, and the sorted times of launches. */
struct anx_iv {
	int64_t ts, end;
};
struct anx_proc {
	size_t file;
	int32_t pid;
	struct anx_iv *iv;
	int64_t *cum; /* cum[i]: busy of iv[0..i) */
	size_t niv, ivcap;
	int64_t *work_launch; /* launch times of its GPU work */
	size_t nwork_launch, wlcap;
	int64_t *launch; /* start times of its API calls that launched work */
	size_t nlaunch, lcap;
	/* Its steady state (steps_find.c): with steps (steps 1), from the end of its start-up
	 * steps to its last step's completion; without, startup_end is where its start-up ends
	 * (after the last long one-off GPU idle), 0 if none was found. */
	int steps;
	int64_t steady_from, steady_to;
	int64_t startup_end;
};

/* The steady state of one process, [from, to]: what the findings look at (analyze_find.c). */
struct anx_win {
	int64_t from, to;
	int64_t alloc_from; /* alloc_steady's start (differs without steps) */
	int steps;          /* the process has steps: the tables are cut to [from, to] too */
	int startup;        /* no steps, but a start-up found: the tables are cut at from too */
};

/* What kept a launching thread from launching during a GPU gap: the calls it was blocked in
 * (analyze_query.c anx_blocked sums their overlap with an interval per kind). */
enum { B_SYNC = 0, B_ITEM, B_SYNC_COPY, B_ALLOC, B_PAGEABLE, B_N };

struct anx {
	struct an *an;
	struct cuptrace_analysis *out;
	struct anx_priv *priv;
	/* The steps' range name when they are ranges named by the user ("step" for "step 0",
	 * "step 1", ...; steps_find.c): like ProfilerStep#N, no row of the ops table. */
	const char *step_ranges;
	uint32_t *blk; /* indices of blocking calls (B_*) in an.host, per thread, in time order */
	size_t *blk_first;
	struct anx_gap *gaps; /* every GPU gap, the whole trace */
	size_t ngaps, gapcap;
	struct anx_gap *tgaps; /* the GPU gaps of the tables: cut to the steady state */
	size_t ntgaps, tgapcap;
	size_t stepcap;
	struct anx_proc *procs;
	size_t nprocs, proccap;
	struct cuptrace_u64map proc_of;       /* (file, pid) -> proc + 1 */
	struct anx_win *win_gpu, *win_thread; /* per GPU, per thread: its process's window */
	/* Per thread, per GPU: its process's index in out->ranks (analyze_rank.c); per rank, its
	 * steps in out->steps (contiguous, by start). */
	size_t *rank_of_thread, *rank_of_gpu;
	size_t *rank_step_first, *rank_steps;
	struct cuptrace_u64map rank_of; /* (file, pid) -> rank + 1 */
	size_t rankcap;
};

/* analyze_query.c */
const char *anx_str(const struct anx *x, uint32_t id);
void anx_host_ctx(const struct anx *x, uint32_t thread, int64_t ts, struct cuptrace_an_host_ctx *c);
/* The innermost range around host slice h (index + 1), 0 if none. */
uint32_t anx_range_of(const struct anx *x, uint32_t h);
/* The kind (B_*) of blocking call host slice i is, or -1. */
int anx_blocker_kind(const struct an_host *h);
/* Per kind, how much of [a, b) thread t spent in blocking calls, into by[B_N] (added). */
void anx_blocked(const struct anx *x, uint32_t t, int64_t a, int64_t b, int64_t by[B_N]);
/* The steady-state windows of every GPU and thread (analyze_find.c), into x. */
int anx_steady_windows(struct anx *x);
int anx_proc_tables(struct anx *x);
const struct anx_proc *anx_proc_find(const struct anx *x, size_t file, int32_t pid);
int64_t anx_busy_in(const struct anx_proc *p, int64_t a, int64_t b);
uint64_t anx_count_in(const int64_t *v, size_t n, int64_t a, int64_t b);
void anx_free(struct anx *x);

/* Host stack samples counted by frame (string ids of the analysis, in the order first seen), and
 * how many were counted. */
struct anx_fcount {
	uint32_t *id, *n;
	size_t len, cap;
	uint32_t samples;
};
/* Adds thread tid's samples with a <= ts <= b to c (the samples are in time order). 0 or
 * -ENOMEM (c then holds part of them). */
int anx_samples_count(const struct anx *x, int64_t tid, int64_t a, int64_t b, struct anx_fcount *c);
/* The index of the first sample at or after a (x->an->samples, in time order). */
size_t anx_samples_from(const struct anx *x, int64_t a);
/* One more sample of frame (a string id) into c. 0 or -ENOMEM. */
int anx_fcount_add(struct anx_fcount *c, uint32_t frame);
/* c's top frames, most first (a tie: the one seen first), into out[0..max); their number. */
size_t anx_fcount_top(const struct anx *x, const struct anx_fcount *c,
                      struct cuptrace_an_host_frame *out, size_t max);
void anx_fcount_free(struct anx_fcount *c);

/* steps_find.c: the steps (out->steps, sorted by file, pid, start) with their figures and
 * outliers, and each step-less process's start-up end. Builds the process tables first. */
int anx_steps(struct anx *x);

/* analyze_find.c */
int anx_ops(struct anx *x);
/* The order of the ops table (qsort): self time, then total, descending; then the name. The
 * job's table (analyze_job.c) is sorted the same way. */
int anx_op_cmp(const void *pa, const void *pb);
/* Keeps a finding's CUPTRACE_AN_WORST longest instances, longest first (also the job's, when
 * analyze_job.c combines the files' findings). */
void anx_worst_add(struct cuptrace_an_finding *f, const struct cuptrace_an_instance *in);
int anx_findings(struct anx *x);

/* analyze_rank.c: out->ranks, the maps above, the steps' ranks, numbers and collectives (after
 * the steps and their figures); then each rank's figures (after busy and idle). */
int anx_ranks(struct anx *x);
int anx_rank_figures(struct anx *x);
/* Is a host range a collective call (README, collective_wait)? */
int anx_is_collective(const char *name);
/* The step of rank holding time t (index in out->steps), or SIZE_MAX. */
size_t anx_step_at(const struct anx *x, size_t rank, int64_t t);

#endif
