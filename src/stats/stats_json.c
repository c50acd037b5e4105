/* The stats summary as one JSON object (`cuptrace stats --json`): the numbers of the text and
 * markdown summaries, from the same helpers (stats_summary.c), in integer nanoseconds. The keys
 * are documented at cuptrace_stats_print_json in stats.h. */
#include "stats/report.h"
#include "stats/busy.h"
#include "stats/stats.h"
#include "stats/stats_meta.h"
#include "stats/stats_summary.h"
#include "common/saturate.h"
#include "format/json_writer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void meta_value(struct cuptrace_json *w, const struct cuptrace_meta *m)
{
	if (!m)
		cuptrace_json_null(w);
	else if (m->is_int)
		cuptrace_json_int(w, m->i);
	else
		cuptrace_json_string(w, m->s ? m->s : "");
}

static void header(struct cuptrace_json *w, const struct cuptrace_stats *st)
{
	const struct cuptrace_meta *m;
	char buf[2048];
	int64_t v;

	cuptrace_json_name(w, "header");
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "gpus");
	cuptrace_json_start_array(w);
	for (m = stats_next_gpu(st, NULL); m; m = stats_next_gpu(st, m)) {
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "key", m->key);
		cuptrace_json_name(w, "value");
		meta_value(w, m);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	/* The GPUs the process used, as the text's "GPUs used" line: null when not recorded. */
	int used[64];
	int nused = stats_gpus_used(st, 0, used, 64);
	cuptrace_json_name(w, "gpus_used");
	if (nused < 0) {
		cuptrace_json_null(w);
	} else {
		cuptrace_json_start_array(w);
		for (int k = 0; k < nused && k < 64; k++) {
			cuptrace_json_start_object(w);
			cuptrace_json_int_field(w, "index", used[k]);
			cuptrace_json_name(w, "name");
			meta_value(w, stats_gpu_meta(st, used[k], ""));
			cuptrace_json_name(w, "uuid");
			meta_value(w, stats_gpu_meta(st, used[k], "_uuid"));
			cuptrace_json_name(w, "pci_bus_id");
			meta_value(w, stats_gpu_meta(st, used[k], "_pci_bus_id"));
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
	}
	cuptrace_json_name(w, "gpus_used_text");
	cuptrace_json_string(w, stats_gpus_used_text(st, 0, buf, sizeof(buf)) ? buf : NULL);
	for (size_t i = 0; i < stats_nknown_lines; i++) {
		m = NULL;
		for (size_t k = 0; k < 2 && !m && stats_known_lines[i].keys[k]; k++)
			m = stats_meta_get(st, stats_known_lines[i].keys[k]);
		if (m && !m->is_int && m->s && !strcmp(m->s, "?"))
			m = NULL; /* a reader's "the file does not say" */
		cuptrace_json_name(w, stats_known_lines[i].json);
		meta_value(w, m);
	}
	cuptrace_json_name(w, "process_name");
	meta_value(w, stats_meta_get(st, "process_name"));
	cuptrace_json_name(w, "pid");
	meta_value(w, stats_meta_get(st, "pid"));
	cuptrace_json_name(w, "command_line");
	cuptrace_json_string(w, stats_cmdline(st, buf, sizeof(buf)));
	int have = stats_start_utc(st, &v, buf, sizeof(buf));
	cuptrace_json_name(w, "start_realtime_ns");
	if (have)
		cuptrace_json_int(w, v);
	else
		cuptrace_json_null(w);
	cuptrace_json_name(w, "start_utc");
	cuptrace_json_string(w, have ? buf : NULL);
	cuptrace_json_name(w, "dropped_records");
	if (stats_dropped(st, &v))
		cuptrace_json_int(w, v);
	else
		cuptrace_json_null(w);
	/* What a damaged input lost (read/read.c): null for a whole file. */
	m = stats_meta_get(st, CUPTRACE_META_READ_DAMAGE);
	cuptrace_json_name(w, "damage");
	cuptrace_json_string(w, m && !m->is_int ? m->s : NULL);
	cuptrace_json_end_object(w);
}

static void counts(struct cuptrace_json *w, const struct cuptrace_stats *st)
{
	cuptrace_json_name(w, "span");
	if (st->slices + st->instants + st->counters) {
		cuptrace_json_start_object(w);
		cuptrace_json_int_field(w, "start_ns", st->min_ts);
		cuptrace_json_int_field(w, "end_ns", st->max_ts);
		cuptrace_json_int_field(w, "duration_ns", sat_sub(st->max_ts, st->min_ts));
		cuptrace_json_end_object(w);
	} else {
		cuptrace_json_null(w);
	}
	cuptrace_json_name(w, "events");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "tracks", (int64_t)st->tracks);
	cuptrace_json_int_field(w, "slices", (int64_t)st->slices);
	cuptrace_json_int_field(w, "gpu_slices", (int64_t)st->gpu_slices);
	cuptrace_json_int_field(w, "gpu_slices_with_flow_in", (int64_t)st->gpu_slices_with_flow_in);
	cuptrace_json_int_field(w, "instants", (int64_t)st->instants);
	cuptrace_json_int_field(w, "counter_values", (int64_t)st->counters);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "flows");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "complete", (int64_t)st->flows);
	cuptrace_json_int_field(w, "one_end_only", (int64_t)st->flows_dangling);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "problems");
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "negative_timestamps", (int64_t)st->negative_ts);
	cuptrace_json_int_field(w, "negative_durations", (int64_t)st->negative_dur);
	cuptrace_json_int_field(w, "events_on_undeclared_tracks",
	                        (int64_t)st->unknown_track_events);
	cuptrace_json_int_field(w, "partially_overlapping_slice_pairs",
	                        (int64_t)stats_partial_overlaps(st));
	cuptrace_json_end_object(w);
}

static int tables(struct cuptrace_json *w, const struct cuptrace_stats *st)
{
	struct stats_cat *cats = NULL;
	struct stats_gpu_row *rows = NULL;
	struct stats_device *dev = NULL;
	size_t ncats, nrows, ndev;
	int err;

	if ((err = stats_categories(st, &cats, &ncats)) ||
	    (err = stats_gpu_rows(st, &rows, &nrows)) || (err = stats_devices(st, &dev, &ndev)))
		goto out;
	cuptrace_json_name(w, "categories");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < ncats; i++) {
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "category", cats[i].cat);
		cuptrace_json_int_field(w, "slices", (int64_t)cats[i].count);
		cuptrace_json_int_field(w, "total_ns", cats[i].total);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);

	cuptrace_json_name(w, "names");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < st->nnames; i++) {
		const struct cuptrace_stats_name *s = &st->names[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", s->name);
		cuptrace_json_string_field(w, "category", s->category);
		cuptrace_json_int_field(w, "count", (int64_t)s->count);
		cuptrace_json_int_field(w, "total_ns", s->total_ns);
		cuptrace_json_name(w, "avg_ns");
		cuptrace_json_double(w, s->count ? (double)s->total_ns / (double)s->count : 0.0);
		cuptrace_json_int_field(w, "min_ns", s->min_ns);
		cuptrace_json_int_field(w, "max_ns", s->max_ns);
		cuptrace_json_name(w, "gpu_share_pct");
		if (s->on_gpu && cuptrace_busy_is_work(s->category) && st->gpu_work_ns > 0)
			cuptrace_json_double(w,
			                     100.0 * (double)s->total_ns / (double)st->gpu_work_ns);
		else
			cuptrace_json_null(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);

	cuptrace_json_int_field(w, "gpu_busy_ns", st->gpu_busy_ns);
	cuptrace_json_int_field(w, "gpu_work_ns", st->gpu_work_ns);
	cuptrace_json_name(w, "devices");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < ndev; i++) {
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", dev[i].group->name);
		cuptrace_json_int_field(w, "slices", (int64_t)dev[i].slices);
		cuptrace_json_int_field(w, "busy_ns", dev[i].busy_ns);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);

	int64_t span = sat_sub(st->max_ts, st->min_ts);
	cuptrace_json_name(w, "gpu_tracks");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < nrows; i++) {
		const struct cuptrace_stats_track *k = rows[i].k;
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(
		    w, "gpu", rows[i].group < st->ntrk ? st->trk[rows[i].group].name : NULL);
		cuptrace_json_string_field(w, "track", k->name);
		cuptrace_json_int_field(w, "lane", k->lane);
		cuptrace_json_int_field(w, "slices", (int64_t)k->slices);
		cuptrace_json_int_field(w, "busy_ns", k->busy_ns);
		cuptrace_json_name(w, "span_pct");
		cuptrace_json_double(w, span > 0 ? 100.0 * (double)k->busy_ns / (double)span : 0.0);
		cuptrace_json_name(w, "busy_pct");
		cuptrace_json_double(w, stats_gpu_window_pct(st, &rows[i]));
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
out:
	free(cats);
	free(rows);
	free(dev);
	return err;
}

int cuptrace_stats_print_json(const struct cuptrace_stats *st, FILE *f)
{
	struct cuptrace_json *w;

	if (!st || !f)
		return -EINVAL;
	if (!(w = report_json_begin("cuptrace-stats/1")))
		return -ENOMEM;
	header(w, st);
	cuptrace_json_name(w, "metadata");
	cuptrace_json_start_object(w);
	for (size_t i = 0; i < st->nmeta; i++) {
		if (!st->meta[i].key)
			continue;
		cuptrace_json_name(w, st->meta[i].key);
		meta_value(w, &st->meta[i]);
	}
	cuptrace_json_end_object(w);
	counts(w, st);
	return report_json_end(w, f, tables(w, st));
}
