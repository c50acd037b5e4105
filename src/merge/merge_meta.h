/* Each input's own trace info and summary in a side-by-side merge (merge.h): copies of what the
 * input's begin() and meta() said, written back as instants of category "cuptrace" on the
 * input's first process (its main thread's track: merge_write.c says why), named "cuptrace:
 * trace info (<label>)" and "cuptrace: summary (<label>)", so every input's metadata shows
 * where that input is in the timeline. (The
 * readers take only the exact names of event.h as the trace's own info and summary: these are
 * replayed as ordinary instants.)
 *
 * Ownership: a merge_meta owns copies of every string; merge_meta_free releases them (safe on a
 * zeroed struct, and twice). Threading: one thread per object. */
#ifndef CUPTRACE_MERGE_MERGE_META_H
#define CUPTRACE_MERGE_MERGE_META_H

#include "format/event.h"

#include <stddef.h>
#include <stdint.h>

#define MERGE_META_INFO    "cuptrace: trace info"
#define MERGE_META_SUMMARY "cuptrace: summary"

struct merge_meta_entry {
	char *key;
	int is_int;
	int64_t i;
	char *s;
};

struct merge_meta {
	struct merge_meta_entry *info, *sum; /* begin()'s; meta()'s (last value per key) */
	size_t ninfo, infocap, nsum, sumcap;
};

/* Copies begin()'s info: pid, process name, host, clocks, then its metadata. 0 or -ENOMEM. */
int merge_meta_info(struct merge_meta *mm, const struct cuptrace_trace_info *info);
/* Adds a meta() call's entries; a later value of a key replaces the earlier. 0 or -ENOMEM. */
int merge_meta_summary(struct merge_meta *mm, const struct cuptrace_meta *m, size_t n);
/* Writes the info (summary = 0) or the summary (1) as one instant at ts on track, its arguments
 * "merge_input" (the label), "merge_file" (the path), then the entries. Nothing is written for
 * an empty summary. Returns 0 or out's error (-ENOMEM). */
int merge_meta_write(const struct merge_meta *mm, int summary, const char *label, const char *path,
                     struct cuptrace_sink *out, uint64_t track, int64_t ts);
void merge_meta_free(struct merge_meta *mm);

#endif
