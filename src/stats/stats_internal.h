/* Helpers shared by the files of src/analyze: saturating sums, and what the stats summaries
 * (text, markdown, JSON) and the diff derive from struct cuptrace_stats (stats_summary.c), so
 * that every output shows the same numbers. Private to src/analyze. */
#ifndef CUPTRACE_STATS_STATS_INTERNAL_H
#define CUPTRACE_STATS_STATS_INTERNAL_H

#include "stats/stats.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Foreign traces may hold any value: sums saturate rather than overflow. */
static inline int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

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

/* Header lines from metadata: a label and the keys that may hold it, first found wins. */
struct stats_known_line {
	const char *label;
	const char *json; /* its key in the JSON summary */
	const char *keys[2];
};
extern const struct stats_known_line stats_known_lines[];
extern const size_t stats_nknown_lines;

const struct cuptrace_meta *stats_meta_get(const struct cuptrace_stats *st, const char *key);
void stats_meta_str(const struct cuptrace_meta *m, char *buf, size_t cap);
/* A key's value as a malloc'd string; NULL if absent, empty or out of memory. */
char *stats_meta_strdup(const struct cuptrace_stats *st, const char *key);
/* An int, or a decimal string of one (as collect writes the start time). 1 if it is one. */
int stats_meta_int(const struct cuptrace_meta *m, int64_t *v);
/* Keys the header shows under a label of its own (the rest go to "Other metadata"). */
int stats_meta_is_known(const char *key);
/* The GPU entries ("gpu", "gpu0", "gpu1", ...) in number order: the one after prev (NULL for
 * the first), NULL after the last. */
const struct cuptrace_meta *stats_next_gpu(const struct cuptrace_stats *st,
                                           const struct cuptrace_meta *prev);
/* The CUDA indices of the GPUs the trace's process used (a context, GPU work: convert_meta.c),
 * ascending, into idx[0..cap): from the "gpus_used" metadata, else, with from_tracks, from the
 * trace's GPU groups (tracks "GPU N..." of the converter: the devices with work drawn). Returns
 * how many there are (0: none used; more than cap: only cap are stored), or -1 when the trace
 * does not say. */
int stats_gpus_used(const struct cuptrace_stats *st, int from_tracks, int *idx, int cap);
/* GPU n's "<key>" metadata ("gpu%d", "gpu%d_uuid", "gpu%d_pci_bus_id": what = "", "_uuid",
 * "_pci_bus_id"), or NULL. */
const struct cuptrace_meta *stats_gpu_meta(const struct cuptrace_stats *st, int n,
                                           const char *what);
/* Those GPUs as text, "GPU 1: NVIDIA H200 (GPU-5865b8d5-..., PCI 0000:00:07.0)", several
 * joined by "; ", "none" when none was used; what is not recorded is left out. Returns 0 (buf
 * empty) when the trace does not say, else 1. */
int stats_gpus_used_text(const struct cuptrace_stats *st, int from_tracks, char *buf, size_t cap);
/* The command line: from metadata, else from the first process track; NULL if neither. */
const char *stats_cmdline(const struct cuptrace_stats *st, char *buf, size_t cap);
/* "2025-11-21 05:31:00.123456789 UTC" from start_realtime_ns; 0 if there is none. */
int stats_start_utc(const struct cuptrace_stats *st, int64_t *ns, char *buf, size_t cap);
/* Every int entry whose key contains "dropped", summed; 0 if there is none. */
int stats_dropped(const struct cuptrace_stats *st, int64_t *sum);
uint64_t stats_partial_overlaps(const struct cuptrace_stats *st);

#endif
