/* cuptrace top's sources of events (top_source.c): a capture tailed while it is written, or a
 * whole capture replayed by trace time. Each source has its own aggregator sink (one process
 * of the aggregator). Threading: the caller's one thread. Ownership: the caller frees a source
 * (cuptrace_top_source_free) before the aggregator. */
#ifndef CUPTRACE_TOP_SOURCE_H
#define CUPTRACE_TOP_SOURCE_H

#include <stdint.h>

#include "top/top.h"

struct top_source;

/* Tails the capture at path (it may still be empty). NULL and errno on failure. */
struct top_source *cuptrace_top_tail_open(struct cuptrace_top *t, const char *path);
/* Converts what was appended since the last poll into the aggregator. 0, or a negative errno
 * (-EINVAL: not a capture; -EBADMSG: corrupt, *why says what). */
int cuptrace_top_source_poll(struct top_source *s, const char **why);
/* The capture's END was read (or a replay handed out its last event). */
int cuptrace_top_source_ended(const struct top_source *s);
const char *cuptrace_top_source_path(const struct top_source *s);

/* Reads the whole capture at path into memory (NULL and errno on failure; *why for a corrupt
 * file), to be handed to the aggregator by cuptrace_top_replay_until. */
struct top_source *cuptrace_top_replay_open(struct cuptrace_top *t, const char *path,
                                            const char **why);
/* The trace time of its first event. */
int64_t cuptrace_top_replay_start(const struct top_source *s);
/* Hands the aggregator every event that starts at or before until (trace ns), and moves the
 * process's clock there; once the clock passes the last event's end, the process ends. 0 or a
 * negative errno. */
int cuptrace_top_replay_until(struct top_source *s, int64_t until);

void cuptrace_top_source_free(struct top_source *s);

#endif
