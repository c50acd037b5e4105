/* The Perfetto reader (perfetto_reader.c): a .pftrace replayed into a sink. Part of read.h. */
#ifndef CUPTRACE_READ_PERFETTO_READER_H
#define CUPTRACE_READ_PERFETTO_READER_H

#include <stddef.h>

#include "format/event.h"
#include "read/read_check.h"

/* Reads a .pftrace (plain, compressed_packets chunks, or whole-file gzip: detected from the
 * bytes) and replays it into sink (which may be NULL to only check). Events are replayed in
 * timestamp order; tracks before their first use. check may be NULL. A truncated file is read up
 * to its last complete packet (chunk) and counted in check->truncated_bytes, not an error.
 * Returns 0, or a negative errno (-EINVAL for a file that is not a Perfetto trace; a message
 * goes to the log). The caller still calls sink->ops->finish. */
int cuptrace_perfetto_read(const char *path, struct cuptrace_sink *sink,
                           struct cuptrace_pf_check *check);
int cuptrace_perfetto_read_mem(const void *data, size_t len, struct cuptrace_sink *sink,
                               struct cuptrace_pf_check *check);

#endif
