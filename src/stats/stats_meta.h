/* The trace's metadata as kept in struct cuptrace_stats, read the same way by the stats
 * summaries, the diff's profile, the merge and analyze (stats_meta.c): look-ups by key, the
 * header's known lines, the GPUs the process used, command line, start time, drops. */
#ifndef CUPTRACE_STATS_STATS_META_H
#define CUPTRACE_STATS_STATS_META_H

#include "stats/stats.h"

#include <stddef.h>
#include <stdint.h>

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

#endif
