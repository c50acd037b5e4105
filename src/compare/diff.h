/* `cuptrace diff BASE NEW`: what changed between two runs, per name, in five families.
 *
 * A run is first reduced to a profile by an aggregating sink (any reader replays into it, so any
 * trace format works): per family and name the slice count and total time, and for the header
 * the wall span, GPU busy time per device, kernel count and bytes copied. Two profiles are then
 * compared into a diff, printed as text, markdown or JSON.
 *
 * Families, from each slice's category (and track, for ranges):
 *   kernel  category "kernel"
 *   api     "cuda_runtime", "cuda_driver"
 *   copy    "memcpy", "memset" (torch.profiler: "gpu_memcpy", "gpu_memset"); the name is the
 *           kind, e.g. "Memcpy HtoD (Pageable -> Device)"
 *   op      PyTorch ops: "cpu_op" (torch.profiler), and ranges (below) named "aten::..." or
 *           "nn.Module: ..." or with a "seq" argument (cuptrace record --pytorch)
 *   nvtx    ranges: slices on host tracks (not under a GPU) of category "nvtx", an NVTX domain
 *           name, "user_annotation" (torch.profiler), or any category not named in this list
 *           nor one of "sync", "memory", "cupti_overhead", "overhead", "python_function",
 *           "gpu_user_annotation", "cuda_profiler_range", "Trace", "cuptrace"
 * Times are inclusive (a range's total holds what ran inside it). GPU busy time is that of
 * `cuptrace stats`: per device, the union of its kernels, copies and memsets over all its
 * tracks (annotation and sync ranges are not work; concurrent streams count once).
 *
 * Ownership: a profile and a diff own everything they point to; free them with their _free
 * function (safe on a zeroed struct, and twice). A diff borrows nothing from its profiles.
 * Threading: one thread at a time per object. */
#ifndef CUPTRACE_COMPARE_DIFF_H
#define CUPTRACE_COMPARE_DIFF_H

#include "lines/lines.h"
#include "stats/family.h"
#include "format/event.h"

#include <stdint.h>
#include <stdio.h>

/* "kernels", "api_calls", "copies", "nvtx_ranges", "ops": keys of the JSON output. */
const char *cuptrace_family_key(enum cuptrace_family f);

struct cuptrace_profile_name {
	char *name;
	uint64_t count;
	int64_t total_ns;
};

struct cuptrace_profile_device {
	char *name; /* the GROUP track's name, "GPU 0: NVIDIA H200" */
	int64_t busy_ns;
};

struct cuptrace_profile {
	int64_t span_ns; /* latest end minus earliest start of any event; 0 without events */
	int64_t gpu_busy_ns;
	uint64_t kernels;      /* slices of the kernel family */
	uint64_t bytes_copied; /* the "bytes" arguments of memcpy slices, summed */
	uint64_t per_count;    /* slices on host tracks named opts->per_name */
	int has_rank;          /* the trace's "rank" metadata, where it says one */
	char *damage;          /* what a damaged input lost (read_damage metadata), or NULL */
	int64_t rank;
	struct cuptrace_profile_device *dev; /* declaration order */
	size_t ndev;
	struct cuptrace_profile_name *names[CUPTRACE_FAM_N]; /* by name (strcmp) */
	size_t nnames[CUPTRACE_FAM_N];
};

struct cuptrace_profile_opts {
	size_t sz;            /* sizeof(struct cuptrace_profile_opts) */
	int group_by_base;    /* 1: names reduced to their base (names/base_name.h) */
	const char *per_name; /* counted into per_count; NULL for none. Borrowed until finish */
	/* 1: kernels and copies named after the op that launched them: the innermost range
	 * (op or NVTX, ProfilerStep#N skipped) open on the launching thread when the launch call
	 * began, found through the flow from the call to the work; "(no op) NAME" without one */
	int group_by_op;
	/* 1: kernels and copies named after the source line that launched them (lines/lines.h:
	 * the innermost user frame of the launch's call stack); "(no stack)" without one */
	int group_by_line;
	const struct cuptrace_lines_opts *lines; /* its rule's patterns; NULL: none. Copied */
};

/* The aggregating sink: zeroes *out and fills it at finish (out must outlive the sink; free it
 * with cuptrace_profile_free, also after a failed finish). opts may be NULL. NULL and errno on
 * failure. */
struct cuptrace_sink *cuptrace_profile_sink_new(struct cuptrace_profile *out,
                                                const struct cuptrace_profile_opts *opts);
void cuptrace_profile_free(struct cuptrace_profile *p);

/* One side of a compared value: per-run values divided by the run's --per count. */
struct cuptrace_diff_value {
	double base, new_; /* new_ since "new" is a C++ keyword in headers others may include */
};

enum cuptrace_diff_status {
	CUPTRACE_DIFF_COMMON = 0, /* in both runs */
	CUPTRACE_DIFF_ADDED,      /* only in NEW */
	CUPTRACE_DIFF_REMOVED,    /* only in BASE */
};

struct cuptrace_diff_row {
	char *name;
	enum cuptrace_diff_status status;
	struct cuptrace_diff_value count, total_ns;
};

struct cuptrace_diff_device {
	char *name;       /* BASE's name, or NEW's for a device only there */
	char *other_name; /* NEW's name where it differs ("GPU 0: NVIDIA H100"), else NULL */
	int in_base, in_new;
	struct cuptrace_diff_value busy_ns;
};

/* Why --fail-above fails: GPU busy time (family < 0, name NULL) or one name's total. */
struct cuptrace_diff_failure {
	int family; /* enum cuptrace_family, or -1 for GPU busy time */
	char *name;
	struct cuptrace_diff_value total_ns;
};

struct cuptrace_diff_opts {
	size_t sz;             /* sizeof(struct cuptrace_diff_opts) */
	const char *base_path; /* shown as they are; borrowed during compute only */
	const char *new_path;
	const char *per_name;  /* NULL: no division */
	int group_by_base;     /* shown in the output */
	int top;               /* rows per family in text and markdown (JSON lists all); 0: 20 */
	double fail_above_pct; /* < 0: off */
	int group_by_op;       /* shown in the output */
	int group_by_line;     /* shown in the output */
};

struct cuptrace_diff {
	char *base_path, *new_path, *per_name;
	int group_by_base, top, group_by_op, group_by_line;
	uint64_t base_per, new_per; /* --per counts (1 without --per) */
	struct cuptrace_diff_value span_ns, gpu_busy_ns, kernels, bytes_copied;
	struct cuptrace_diff_device *dev;
	size_t ndev;
	/* 1: devices paired by position (BASE's first GPU with NEW's first, ...), not by their
	 * "GPU N" index: the runs share no index, or they say different ranks (rank 0 on GPU 0
	 * against rank 1 on GPU 1 is the same work on another device, not one removed and one
	 * added). The ranks, -1 where a run does not say. */
	int dev_by_position;
	int64_t base_rank, new_rank;
	char *base_damage, *new_damage; /* the runs' read_damage, or NULL (whole files) */
	/* Per family, every name of either run, by |change in total| desc, then the larger
	 * total desc, then name. */
	struct cuptrace_diff_row *rows[CUPTRACE_FAM_N];
	size_t nrows[CUPTRACE_FAM_N];
	double fail_above_pct; /* < 0: off */
	struct cuptrace_diff_failure *fail;
	size_t nfail, failcap;
};

/* Compares two profiles. With opts->per_name, a run whose per_count is 0 is an error: -ENOENT
 * (the caller says which run). Returns 0, -ENOENT or -ENOMEM; *out is zeroed first and owned by
 * the caller (cuptrace_diff_free) whatever the result. */
int cuptrace_diff_compute(const struct cuptrace_profile *base, const struct cuptrace_profile *new_,
                          const struct cuptrace_diff_opts *opts, struct cuptrace_diff *out);
void cuptrace_diff_free(struct cuptrace_diff *d);

/* Text (markdown = 0) or GitHub markdown: a header table (wall span, GPU busy per device,
 * kernels, bytes copied), a table per family of the top rows with the names added and removed
 * listed below it, and, with --fail-above, what grew too much. */
void cuptrace_diff_print(const struct cuptrace_diff *d, FILE *f, int markdown);
/* One strict JSON object and a newline; keys documented in diff_print.c's header comment and in
 * README.md. Returns 0 or a negative errno. */
int cuptrace_diff_print_json(const struct cuptrace_diff *d, FILE *f);

#endif
