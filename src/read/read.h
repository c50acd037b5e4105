/* The read layer: every trace format cuptrace takes, replayed into any sink of format/event.h.
 * Used by `cuptrace convert`, `stats`, the analyses (diff, merge) and the tests. Nothing here
 * writes a trace: this layer includes no writer's header.
 *
 * Ownership: the caller owns the sink, and finishes and destroys it after a read (also after a
 * failed one). Threading: a read uses only its own state; concurrent reads into different sinks
 * are fine. */
#ifndef CUPTRACE_READ_READ_H
#define CUPTRACE_READ_READ_H

#include <stddef.h>
#include <stdint.h>

#include "format/event.h"
#include "read/json_reader.h"
#include "read/perfetto_reader.h"

/* Flags of cuptrace_read_trace, for captures (other formats hold only what was kept). */
#define CUPTRACE_READ_DRIVER_ALL       1 /* keep the runtime's own driver calls */
#define CUPTRACE_READ_RUNTIME_ALL      2 /* keep trivial runtime calls (cudaGetDevice, ...) */
#define CUPTRACE_READ_OVERHEAD_THREADS 4 /* CUPTI's overhead on a track per thread */

/* Reads any trace file cuptrace knows and replays it into sink, which the caller then finishes.
 * The format is told from the content, never from the name:
 *   - a raw capture (.cupti, "CUPTCAP" magic): through the converter, with flags;
 *   - a Perfetto protobuf trace (.pftrace: plain, compressed_packets chunks, or gzip);
 *   - a Chrome JSON trace, plain or gzip: cuptrace's own (.json, .json.gz) or torch.profiler's
 *     (Kineto) or another tool's (see read/json_reader.c for what is taken).
 * An empty file is an empty Perfetto trace. Returns 0 or a negative errno; the reason, naming
 * the file, goes to the log (-EINVAL: not a trace, or corrupt). */
int cuptrace_read_trace(const char *path, struct cuptrace_sink *sink, int flags);

/* Is path a raw capture (judged by its first bytes)? 1 yes, 0 no, -1 unreadable (errno). */
int cuptrace_is_capture_file(const char *path);

/* What a file's first bytes say it is. */
enum cuptrace_trace_format {
	CUPTRACE_FORMAT_UNKNOWN = 0,
	CUPTRACE_FORMAT_CAPTURE,  /* "CUPTCAP" */
	CUPTRACE_FORMAT_PERFETTO, /* protobuf (0x0a), or gzip of one; also an empty file */
	CUPTRACE_FORMAT_JSON,     /* '{' or '[' after whitespace, or gzip of that */
};
/* Judges data (the start of a file, or all of it): gzip is looked into. */
enum cuptrace_trace_format cuptrace_sniff(const void *data, size_t len);

#endif
