/* The Chrome JSON reader (json_reader.c): a trace event JSON file replayed into a sink. Part of
 * read.h. */
#ifndef CUPTRACE_READ_JSON_READER_H
#define CUPTRACE_READ_JSON_READER_H

#include <stddef.h>

#include "format/event.h"
#include "read/read_check.h"

/* Reads a Chrome trace event JSON file's bytes (plain or gzip: told from the bytes) and replays
 * them into sink (NULL to only check); name is the file's name in messages (a file by its path:
 * cuptrace_read_trace). Takes cuptrace's own Chrome JSON exactly as its writer lays it out, and
 * torch.profiler's (Kineto) or another tool's with their processes, threads, GPUs and streams
 * mapped onto the tracks of event.h and Kineto's categories renamed to cuptrace's
 * (read/json_reader.c says how). check may be NULL. Returns 0, or a negative errno (-EINVAL:
 * not JSON, not a trace, corrupt or cut; the reason, with the line and column, goes to the
 * log). The caller still calls sink->ops->finish. */
int cuptrace_json_read_mem(const void *data, size_t len, const char *name,
                           struct cuptrace_sink *sink, struct cuptrace_json_check *check);

#endif
