/* Per-kernel averages of GPU hardware metrics for `cuptrace stats`: for every kernel, copy and
 * memset on a GPU, the time-weighted average of each GPU metric counter of the same GPU over
 * the slice's duration, where samples cover it, summed per (category, name).
 *
 * A GPU metric counter is a counter track under a GPU (GROUP) track with no unit, which is how
 * cuptrace writes them ("SM active %", "DRAM read GB/s"; the device-memory counter has a unit,
 * bytes, and is not one). A counter value holds from its time until the track's next value; the
 * last value of a track covers nothing (cuptrace ends each track with a 0 where sampling
 * ended). Memory: 16 bytes per counter value and 24 per GPU slice until finish. */
#ifndef CUPTRACE_STATS_GPUMETRICS_STATS_H
#define CUPTRACE_STATS_GPUMETRICS_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "format/event.h"

struct cuptrace_gm_row {
	char *category, *name;
	uint64_t count;
	int64_t total_ns;
	double *avg;         /* per metric; NaN where no sample covered any of its slices */
	int64_t *covered_ns; /* per metric: slice time that samples covered */
};

struct cuptrace_gm_stats {
	char **metrics; /* metric (track) names, first-seen order */
	size_t nmetrics;
	struct cuptrace_gm_row *rows; /* by total_ns desc, then name */
	size_t nrows;
};

/* Watches the events on their way to inner (owned: destroyed with this sink) and fills *out
 * at finish. */
struct cuptrace_sink *cuptrace_gm_stats_sink_new(struct cuptrace_gm_stats *out,
                                                 struct cuptrace_sink *inner);
/* Nothing when there are no GPU metrics; else a table of the top rows (20). */
void cuptrace_gm_stats_print(const struct cuptrace_gm_stats *g, FILE *f, int markdown);
/* The same as one JSON object (no newline), malloc'd into *out: {"metrics": [names], "rows":
 * [{name, category, count, total_ns, avg: [value or null per metric], covered_ns: [...]}]},
 * every row, in the text's order. NULL with 0 when there are no GPU metrics. -ENOMEM. */
int cuptrace_gm_stats_json(const struct cuptrace_gm_stats *g, char **out);
void cuptrace_gm_stats_free(struct cuptrace_gm_stats *g);

#endif
