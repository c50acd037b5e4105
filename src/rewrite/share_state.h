/* What pass 1 of `cuptrace share` found, as the scan (share_scan.c) fills it and the rewrite
 * (share.c) reads it: the secret words, flow ends, counter samples, NVTX ranges and event times.
 * Private to src/rewrite. */
#ifndef CUPTRACE_REWRITE_SHARE_STATE_H
#define CUPTRACE_REWRITE_SHARE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "rewrite/share_scan.h"
#include "rewrite/share_scrub.h"
#include "common/util.h"
#include "format/event.h"

/* Where a flow's ends are: its out slice and its in slice (has: 1 out seen, 2 in seen). */
struct share_flow {
	int64_t out_ts, out_end, in_ts, in_end;
	unsigned has;
};

struct share_span {
	int64_t ts, end;
};

struct share_ctr {
	uint64_t track;
	int64_t ts;
};

/* --window's two ends, each as NAME and as the whole NAME#K (torch.profiler's step names). */
#define SHARE_MAX_RANGE_NAMES 4

struct cuptrace_share_scan {
	struct cuptrace_sink base;
	struct share_secrets secrets;
	int windows;
	char *range_name[SHARE_MAX_RANGE_NAMES];
	size_t nnames;
	struct share_span *range[SHARE_MAX_RANGE_NAMES];
	size_t nrange[SHARE_MAX_RANGE_NAMES], rangecap[SHARE_MAX_RANGE_NAMES];
	struct cuptrace_u64map flow_idx; /* flow id -> index + 1 in flows */
	struct share_flow *flows;
	size_t nflows, flowcap;
	struct share_ctr *ctrs; /* every counter value's track and time */
	size_t nctrs, ctrcap;
	int64_t *times; /* start of every event; sorted by finish() */
	size_t ntimes, timecap;
	int64_t first, last;
	int any;
	int err;
};

/* Where a slice ends: ts + dur, saturated; ts for dur <= 0. */
static inline int64_t share_end(int64_t ts, int64_t dur)
{
	int64_t e;
	return dur > 0 && !__builtin_add_overflow(ts, dur, &e) ? e : dur > 0 ? INT64_MAX : ts;
}

/* The flow's ends, or NULL if the scan saw none. */
const struct share_flow *share_scan_flow(const struct cuptrace_share_scan *sc, uint64_t id);

#endif
