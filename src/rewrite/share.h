/* `cuptrace share`: a copy of a trace that is safe to post in public. Two kinds of pass over the
 * input, each a replay of the file into a sink:
 *  1. the scan (cuptrace_share_scan_*): finds the host and user names to remove everywhere, and,
 *     for a window, where flows end, where counters sample, where NVTX ranges are;
 *  2. the rewrite (cuptrace_share_sink_new): a sink between the reader and a writer that drops
 *     what identifies the machine and its user, reduces paths to base names, optionally
 *     replaces names by keyed tokens and keeps only a window. It may run several times (for
 *     --max-size); what it changed is counted per run (cuptrace_share_report).
 * Events are otherwise handed on unchanged: counts, tracks, flows and timings stay. */
#ifndef CUPTRACE_REWRITE_SHARE_H
#define CUPTRACE_REWRITE_SHARE_H

#include <stdint.h>
#include <stdio.h>

#include "rewrite/share_scan.h"
#include "format/event.h"

struct cuptrace_share_opts {
	size_t sz;        /* sizeof(struct cuptrace_share_opts) */
	int redact_names; /* kernel, NVTX, operator, thread, stream names -> tokens */
	const char *salt; /* key of the tokens; NULL is the default, "" */
	int keep_time;    /* keep the wall-clock and boot time of the start */
};

/* ---- pass 1: share_scan.h (the scan, and struct cuptrace_share_window) ---- */

/* ---- pass 2 ---- */
struct cuptrace_share;
/* sc (borrowed: it must outlive the share) holds pass 1's findings. NULL on failure. */
struct cuptrace_share *cuptrace_share_new(const struct cuptrace_share_opts *o,
                                          const struct cuptrace_share_scan *sc);
/* A rewriting sink in front of inner, which it owns (destroys) from here on, also when it
 * fails (NULL). w may be NULL or off: everything is kept. Starts a new count of changes. */
struct cuptrace_sink *cuptrace_share_sink_new(struct cuptrace_share *sh,
                                              struct cuptrace_sink *inner,
                                              const struct cuptrace_share_window *w);
/* What the last rewrite changed, one line per kind, each line starting with prefix. */
void cuptrace_share_report(const struct cuptrace_share *sh, FILE *f, const char *prefix);
/* Slices, instants, counter values and flows the last rewrite passed on. */
struct cuptrace_share_kept {
	uint64_t slices, instants, counters, flows;
	uint64_t slices_in, instants_in, counters_in, flows_in;
};
struct cuptrace_share_kept cuptrace_share_kept(const struct cuptrace_share *sh);
void cuptrace_share_free(struct cuptrace_share *sh);

#endif
