/* `cuptrace share`, pass 1 (share_scan.c): the scan, a sink that finds the host and user names
 * to remove everywhere and, for a window, where flows end, where counters sample, where NVTX
 * ranges are (see share.h for the two passes). */
#ifndef CUPTRACE_REWRITE_SHARE_SCAN_H
#define CUPTRACE_REWRITE_SHARE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "format/event.h"

/* A time window, ns relative to the trace start, both ends included. */
struct cuptrace_share_window {
	int on;
	int64_t from, to;
};

struct cuptrace_share_scan;
/* range_names: names that "NAME#K" windows refer to (nnames may be 0); windows: remember what a
 * window needs (flow ends, counter and event times). NULL on allocation failure. */
struct cuptrace_share_scan *cuptrace_share_scan_new(const char *const *range_names, size_t nnames,
                                                    int windows);
/* The sink to replay the input into; it belongs to the scan (its destroy does nothing). */
struct cuptrace_sink *cuptrace_share_scan_sink(struct cuptrace_share_scan *sc);
void cuptrace_share_scan_free(struct cuptrace_share_scan *sc);

/* After the replay: the k-th (from 1, in start order) slice named name. 0 or -ENOENT. */
int cuptrace_share_range(const struct cuptrace_share_scan *sc, const char *name, size_t k,
                         int64_t *from, int64_t *to);
/* First start and last end of any event; 0 and 0 for an empty trace. */
void cuptrace_share_span(const struct cuptrace_share_scan *sc, int64_t *first, int64_t *last);
/* Events (slices, instants, counter values) that start in [lo, hi]. */
uint64_t cuptrace_share_count(const struct cuptrace_share_scan *sc, int64_t lo, int64_t hi);
/* The shortest window inside [lo, hi] where n events start: the busiest stretch of n events. */
int cuptrace_share_busiest(const struct cuptrace_share_scan *sc, uint64_t n, int64_t lo, int64_t hi,
                           struct cuptrace_share_window *w);

#endif
