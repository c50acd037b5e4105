/* Constructors for the sinks of event.h, and the Perfetto reader that replays a trace file into
 * any sink (used by `cuptrace convert` from .pftrace, stats, merge and the tests). */
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

/* Counts what a trace holds, per kind and per track; used by `cuptrace stats` and the tests.
 * Times are in the trace's relative ns. A slice's interval is [ts, ts + dur). */
struct cuptrace_stats_track {
	uint64_t uuid;
	enum cuptrace_track_kind kind;
	uint64_t parent_uuid;
	uint64_t group_uuid; /* nearest GROUP ancestor (the GPU), 0 if none */
	int32_t pid;
	int64_t tid;
	char *name;
	char *cmdline; /* PROCESS: the arguments joined by spaces; NULL otherwise or if none */
	uint32_t lane;
	int32_t sort_rank; /* as declared: stream order among a GPU's tracks */
	uint64_t slices, instants, counters;
	int64_t first_ts, last_end; /* over this track's events; both 0 if it has none */
	int64_t busy_ns; /* sum of durations of slices not nested in another slice of this track */
	uint64_t partial_overlaps; /* pairs of slices on this track that partially overlap */
};
struct cuptrace_stats_name {
	char *name;
	char *category;
	uint64_t count;
	int64_t total_ns, min_ns, max_ns;
	int on_gpu; /* some slice of it was on a track under a GROUP */
};
struct cuptrace_stats {
	uint64_t tracks, slices, instants, counters;
	uint64_t flows;                   /* distinct flow ids with both an out and an in end */
	uint64_t flows_dangling;          /* flow ids with only one end */
	uint64_t gpu_slices;              /* slices on tracks under a group */
	uint64_t gpu_slices_with_flow_in; /* ... that end a flow whose out end exists */
	int64_t gpu_busy_ns;              /* sum of busy_ns over the tracks under a group */
	int64_t min_ts, max_ts; /* earliest ts, latest end (ts + dur); both 0 without events */
	uint64_t negative_ts;   /* events with ts < 0 (the producer contract says >= 0) */
	uint64_t negative_dur;  /* slices with dur < 0; taken as 0 for busy and overlaps */
	uint64_t unknown_track_events;    /* events on a uuid never declared: in the totals only */
	struct cuptrace_stats_track *trk; /* in declaration order */
	size_t ntrk;
	struct cuptrace_stats_name *names; /* per (category, name) of slices, sorted by total_ns
	                                    * desc, then count desc, category, name */
	size_t nnames;
	/* Copies of every metadata entry seen, first-seen order, last value per key; begins with
	 * "pid", "process_name", "hostname", "start_realtime_ns" from the trace info (entries of
	 * info->meta and meta() of the same key replace them). */
	struct cuptrace_meta *meta;
	size_t nmeta;
};
/* The stats sink zeroes *out and fills it at finish (owned by the caller; free it with
 * cuptrace_stats_free, also after a failed finish). out must outlive the sink. */
struct cuptrace_sink *cuptrace_stats_sink_new(struct cuptrace_stats *out);
/* Frees what st holds and zeroes it; safe on a zeroed struct and twice. */
void cuptrace_stats_free(struct cuptrace_stats *st);
/* A summary for humans and bug reports: metadata, time span, counts, per-category totals, the
 * top 20 names by total time, GPU track busy time. markdown: GitHub tables, else aligned text.
 * Output depends only on st. Metadata keys it labels (others are listed as they are): "gpu<N>"
 * (or "gpu"), "driver_version", "cuda_version" (else "cuda_driver_api_version"),
 * "cupti_version", "hostname", "process_name", "pid", "cmdline", "start_realtime_ns" (int or
 * decimal string); every int key containing "dropped" adds to "Dropped records". */
void cuptrace_stats_print(const struct cuptrace_stats *st, FILE *f, int markdown);

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
