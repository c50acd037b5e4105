/* The state of a side-by-side merge (merge.h) between its two passes, private to src/merge:
 * each input's pass-1 findings (merge_plan.c fills them: its stats, alignment marks, pids, ranks'
 * collectives and machine) that pass 2 (merge_write.c) reads to renumber and shift it, and the
 * output's id counters. Owned by struct cuptrace_merge (its st), freed by cuptrace_merge_free. */
#ifndef CUPTRACE_MERGE_MERGE_STATE_H
#define CUPTRACE_MERGE_MERGE_STATE_H

#include "merge/align.h"
#include "merge/merge.h"
#include "merge/merge_auto.h"
#include "stats/stats.h"

#include <stddef.h>
#include <stdint.h>

struct in_state {
	struct cuptrace_stats st; /* pass 1: metadata, tracks (their pids), earliest event */
	int64_t start_boottime_ns;
	uint64_t uuid_hi, uuid_lo;
	int64_t *align;           /* starts of the slices named align_name */
	struct merge_marks marks; /* first step, first GPU work (the default alignment) */
	uint64_t nsamples;        /* host stack samples, and the earliest one's time */
	int64_t samples_min_ts;
	size_t nalign, aligncap;
	int32_t *pids, *newpids; /* distinct original pids in first-seen order; their new pids */
	size_t npids;
	char *note; /* added to the description of this input's processes */
	/* --ranks */
	int64_t start_realtime_ns;
	struct nccl_end {
		uint64_t name; /* hash of the kernel's name */
		int64_t start, end;
		int symmetric; /* cuptrace_nccl_symmetric */
	} * nccl;
	size_t nnccl, ncclcap;
	struct cuptrace_align_coll *coll;
	char *machine, *host;
	char *gpus; /* the GPUs the rank used, as stats_gpus_used_text says them; NULL if unsaid */
};

struct merge_state {
	struct in_state *in;
	char *align_name;
	uint64_t k;
	int ranks;
	enum cuptrace_align_mode mode;
	uint64_t next_uuid, next_flow, next_stack; /* the output's uuids, flow and stack ids */
};

#endif
