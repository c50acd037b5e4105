/* The stats sink: counts what a trace holds (per kind, per track, per slice name, flows,
 * metadata), and the summaries printed from it (text, markdown, JSON). Used by `cuptrace stats`,
 * `cuptrace diff` and the tests. */
#ifndef CUPTRACE_STATS_STATS_H
#define CUPTRACE_STATS_STATS_H

#include "format/event.h"

#include <stdio.h>

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
	int64_t busy_ns; /* GPU work only (stats/busy.h): the union of this track's kernels,
	                  * copies and memsets; on a GROUP, the union over all its tracks */
	uint64_t partial_overlaps; /* pairs of slices on this track that partially overlap */
	/* GPU tracks: kernel and graph slices ("kernel", "graph"), the earliest's ts (0 if none):
	 * where a run's compute begins, after start-up copies (merge_write.c's view start) */
	uint64_t kernels;
	int64_t first_kernel_ts;
	int64_t work_from, work_to; /* GROUP (a GPU): its work's first start and last end, the
	                             * window a GPU track's busy % is over; both 0 without work */
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
	int64_t gpu_busy_ns;              /* busy_ns of the GROUP tracks (the GPUs) summed */
	int64_t gpu_work_ns;    /* total_ns of the names of GPU work summed: overlapping work on
	                         * several streams counts on each (the denominator of % GPU work) */
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
 * (or "gpu"), "gpus_used" (with "gpu<N>_uuid", "gpu<N>_pci_bus_id": "GPUs used"), "driver_version",
 * "cuda_version" (else "cuda_driver_api_version"), "cupti_version", "hostname", "process_name",
 * "pid", "cmdline", "start_realtime_ns" (int or decimal string); every int key containing "dropped"
 * adds to "Dropped records". */
void cuptrace_stats_print(const struct cuptrace_stats *st, FILE *f, int markdown);
/* The same summary as one strict JSON object and a newline (`cuptrace stats --json`). Times are
 * integer nanoseconds; a value that is not recorded is null. Keys:
 *   schema        "cuptrace-stats/1"
 *   header        the header lines: gpus [{key, value}] in GPU order, gpus_used [{index, name,
 *                 uuid, pci_bus_id}] (the GPUs the process used, by CUDA index; null when the
 *                 trace does not say), gpus_used_text (the "GPUs used" line, or null),
 *                 driver, cuda, cupti, host, process_name, pid, command_line,
 *                 start_realtime_ns, start_utc,
 *                 dropped_records (the sum of every int metadata key containing "dropped")
 *   metadata      every metadata entry, {key: value} in first-seen order (ints as numbers)
 *   span          {start_ns, end_ns, duration_ns}, null without events
 *   events        {tracks, slices, gpu_slices, gpu_slices_with_flow_in, instants,
 *                 counter_values}
 *   flows         {complete, one_end_only}
 *   problems      {negative_timestamps, negative_durations, events_on_undeclared_tracks,
 *                 partially_overlapping_slice_pairs}
 *   categories    [{category, slices, total_ns}] by total desc
 *   names         [{name, category, count, total_ns, avg_ns, min_ns, max_ns, gpu_share_pct}],
 *                 every name (the text shows the first 20), in the text's order; gpu_share_pct
 *                 (% GPU work): the name's share of gpu_work_ns, at most 100; null for names
 *                 that are not GPU work on a GPU track
 *   gpu_busy_ns   busy time (union of kernels, copies, memsets) per GPU, summed over GPUs
 *   gpu_work_ns   the time of every kernel, copy and memset summed (overlaps on each stream)
 *   devices       [{name, slices, busy_ns}] per GPU (GROUP track), declaration order
 *   gpu_tracks    [{gpu, track, lane, slices, busy_ns, span_pct, busy_pct}] in the text's
 *                 order; span_pct: of the trace's span; busy_pct (the text's): of its GPU's
 *                 window, from the GPU's first work's start to its last work's end
 * Returns 0, or a negative errno (-ENOMEM, -EIO for a failed write). */
int cuptrace_stats_print_json(const struct cuptrace_stats *st, FILE *f);

#endif
