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

/* Flags of cuptrace_read_trace, for captures (other formats hold only what was kept). */
#define CUPTRACE_READ_DRIVER_ALL  1 /* keep the runtime's own driver calls */
#define CUPTRACE_READ_RUNTIME_ALL 2 /* keep trivial runtime calls (cudaGetDevice, ...) */

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

/* Problems the reader found against Perfetto's import rules (see reference/perfetto-format.md),
 * counted like trace_processor's stats table. All zero for a good trace. */
struct cuptrace_pf_check {
	uint64_t packets;
	uint64_t chunks;
	uint64_t sequences;
	uint64_t missing_sequence_id;   /* TrackEvent without trusted_packet_sequence_id */
	uint64_t missing_timestamp;     /* TrackEvent without timestamp */
	uint64_t seq_first_not_cleared; /* a sequence that uses incremental state (interned data,
	                                 * SEQ_NEEDS_INCREMENTAL_STATE) whose first packet lacks
	                                 * INCREMENTAL_STATE_CLEARED */
	uint64_t incremental_state_invalid; /* packets or interned data skipped while their
	                                     * sequence's incremental state was invalid (never
	                                     * cleared, or after previous_packet_dropped) */
	uint64_t unknown_iid; /* interned id used before it was defined on its sequence */
	uint64_t counter_before_descriptor; /* counter value before its counter TrackDescriptor */
	uint64_t event_on_unknown_track;    /* slice/instant on a uuid with no descriptor */
	uint64_t end_without_begin;         /* TYPE_SLICE_END with nothing open on its track */
	uint64_t unterminated_slices;       /* BEGIN never closed */
	uint64_t partial_overlaps; /* misnested BEGIN/END on one track (a named END that does
	                            * not match the innermost open slice) */
	uint64_t depth_exceeded;   /* BEGINs dropped past trace_processor's depth of 512 */
	uint64_t flows_dangling;   /* flow ids found on one slice only: no arrow */
	uint64_t negative_timestamps;
	uint64_t duplicate_thread_uuid;  /* two uuids for one (pid, tid) */
	uint64_t duplicate_process_uuid; /* two uuids for one pid */
	uint64_t clock_errors;           /* timestamp on a clock with no snapshot path */
	uint64_t truncated_bytes;        /* bytes after the last complete packet/chunk */
	uint64_t corrupt;                /* undecodable packets or chunks */
};

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

/* What the JSON reader found and did, for the tests (the trace's metadata carries the nonzero
 * problem counts too, as "json_*" entries). */
struct cuptrace_json_check {
	int cuptrace;                               /* written by cuptrace's Chrome writer */
	uint64_t events;                            /* elements of the events array */
	uint64_t slices, instants, counters, flows; /* replayed (flows: arrows, slice to slice) */
	uint64_t skipped;          /* events not read: phases other than X, i, C, s, t, f, M (B/E
	                            * pairs, async, samples), no time, a time out of range */
	uint64_t negative_dur;     /* 'X' with dur < 0: taken as 0 */
	uint64_t lanes;            /* lane tracks made for slices that partially overlap another */
	uint64_t overlaps_dropped; /* slices that fit no lane (more than 64 deep): dropped */
	uint64_t flows_unbound;    /* flow events with no slice at their time on their thread */
	uint64_t flows_dangling;   /* flow starts never ended, ends never started */
	uint64_t meta_left_out;    /* metadata keys past the first 1024 (top-level or info) */
	int truncated;             /* an array cut at its end: read up to its last whole event */
};

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
