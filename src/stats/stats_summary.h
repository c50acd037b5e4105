/* The tables that the stats summaries (text, markdown, JSON) and the diff derive from struct
 * cuptrace_stats (stats_summary.c), so that every output shows the same numbers: per-category
 * totals, GPU rows, per-GPU busy time, partial overlaps. Private to src/stats and the analyses
 * above it (compare). */
#ifndef CUPTRACE_STATS_STATS_SUMMARY_H
#define CUPTRACE_STATS_STATS_SUMMARY_H

#include "stats/stats.h"

#include <stddef.h>
#include <stdint.h>

/* The top names the summaries show (JSON lists them all). */
#define STATS_TOP_NAMES 20

/* Slices per category, by total time desc, then category. */
struct stats_cat {
	const char *cat; /* borrowed from st->names */
	uint64_t count;
	int64_t total;
};
/* *out is malloc'd (NULL when *n == 0): the caller frees it. Returns 0 or -ENOMEM. */
int stats_categories(const struct cuptrace_stats *st, struct stats_cat **out, size_t *n);

/* Slice tracks under a GPU that hold slices (streams and their lanes), by GPU (declaration
 * order of the group), then stream order, lane, declaration order. group indexes st->trk, or is
 * st->ntrk when the group is unknown. */
struct stats_gpu_row {
	size_t group;
	const struct cuptrace_stats_track *k;
};
int stats_gpu_rows(const struct cuptrace_stats *st, struct stats_gpu_row **out, size_t *n);

/* Busy time per GROUP track (a GPU): the union of the work (kernels, copies, memsets) of the
 * slice tracks under it, so concurrent streams count once; st->gpu_busy_ns sums these.
 * Declaration order. */
struct stats_device {
	const struct cuptrace_stats_track *group;
	int64_t busy_ns;
	uint64_t slices;
};
int stats_devices(const struct cuptrace_stats *st, struct stats_device **out, size_t *n);

/* A GPU track's busy time in percent of its GPU's window (the GPU's first work's start to its
 * last work's end): the same definition as `cuptrace analyze` uses for a stream; 0 without. */
double stats_gpu_window_pct(const struct cuptrace_stats *st, const struct stats_gpu_row *row);

/* Pairs of partially overlapping slices, summed over the tracks. */
uint64_t stats_partial_overlaps(const struct cuptrace_stats *st);

#endif
