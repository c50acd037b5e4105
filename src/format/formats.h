/* Constructors for the writer sinks of event.h, and the Perfetto reader that replays a trace file
 * into any sink (used by `cuptrace convert` from .pftrace, stats, merge and the tests). The stats
 * sink, which analyzes rather than writes, is in analyze/stats.h. */
#ifndef CUPTRACE_FORMAT_FORMATS_H
#define CUPTRACE_FORMAT_FORMATS_H

#include "format/event.h"
#include "output/output.h"

#include <stdio.h>

/* Perfetto protobuf sink. Takes ownership of out (closed by finish or destroy, or at once if
 * the sink cannot be created: NULL and errno then). */
struct cuptrace_sink *cuptrace_perfetto_sink_new(struct cuptrace_output *out);

/* Chrome Trace Event Format (JSON array form) sink. Takes ownership of out, like the above. */
struct cuptrace_sink *cuptrace_chrome_sink_new(struct cuptrace_output *out);

/* Picks the format and compression from the path and the options:
 *   format: "perfetto", "chrome" or NULL (from the name: .json / .json.gz -> chrome, else perfetto)
 *   compress: "none", "gzip", "chunks" or NULL (from the name: *.gz -> gzip; .pftrace -> chunks;
 *             .json -> none)
 * Returns NULL and sets errno (EINVAL for a bad option) on failure. */
struct cuptrace_sink *cuptrace_sink_open(const char *path, const char *format,
                                         const char *compress);

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

#endif
