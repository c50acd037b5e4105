/* What the readers found while reading: the Perfetto reader's problems against Perfetto's import
 * rules and the JSON reader's counts. Filled by the decoders (perfetto_state.h, json_state.h),
 * handed to the caller of cuptrace_perfetto_read and cuptrace_json_read_mem (see read.h). */
#ifndef CUPTRACE_READ_READ_CHECK_H
#define CUPTRACE_READ_READ_CHECK_H

#include <stdint.h>

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
	/* TrackEvents trace_processor drops (track_event_invalid_timestamp): their time,
	 * converted to its trace clock (BOOTTIME or the snapshot's primary clock: the snapshot's
	 * reading plus the time since it), is negative. Not replayed. */
	uint64_t negative_timestamps;
	/* TrackDescriptors with such a time: TP's sorter drops them, and the names they carry
	 * (trace_sorter_negative_timestamp_dropped). */
	uint64_t negative_packet_timestamps;
	/* Events before the first clock snapshot at a time TP keeps: time in our model starts at
	 * the snapshot (event.h), so they are not replayed. */
	uint64_t before_snapshot;
	uint64_t duplicate_thread_uuid;  /* two uuids for one (pid, tid) */
	uint64_t duplicate_process_uuid; /* two uuids for one pid */
	uint64_t clock_errors;           /* timestamp on a clock with no snapshot path */
	uint64_t truncated_bytes;        /* bytes after the last complete packet/chunk */
	uint64_t corrupt;                /* undecodable packets or chunks */
	/* Where the first damage (a cut, a corrupt packet or chunk) starts: a byte offset into
	 * the file, or, for whole-file gzip (damage_in_gzip), into the inflated trace. Valid when
	 * truncated_bytes or corrupt is not 0. */
	uint64_t damage_at;
	int damage_in_gzip;
	uint64_t file_bytes; /* the file's size, for the reports */
	/* How ui.perfetto.dev lays the timeline out (src/format/TIMELINE.md), for the tests:
	 * events (slices, instants, counter values) on a process descriptor's own uuid, which
	 * trace_processor draws as a track named like the process; process_labels written (the
	 * UI draws them across the process's header); non-process descriptors with no event on
	 * themselves or any descendant; the last "all data sources started" service event, in ns
	 * relative to the trace's start (where the UI opens), and whether there is one. */
	uint64_t process_track_events;
	uint64_t process_labels;
	uint64_t tracks_without_events;
	/* The trace info and summary instants the reader does not replay (event.h): how many,
	 * and the track of the last (trace_processor counts them as slices of that track). */
	uint64_t meta_instants, meta_track;
	int64_t view_start_ns;
	int has_view_start;
};

/* One line on what a damaged Perfetto trace lost ("cut at byte 3000 of 17353: ..."), from what
 * the reader counted; 0 and an empty buf when nothing was lost. */
int cuptrace_pf_damage_text(const struct cuptrace_pf_check *ck, char *buf, size_t n);

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
	uint64_t truncated_at;     /* ... which ends at this byte of the (inflated) document */
	uint64_t bytes;            /* the (inflated) document's size */
	int gz_damaged;            /* a .json.gz whose gzip stream is cut (1) or corrupt (2): read
	                            * as far as it inflates */
};

#endif
