/* Prints struct cuptrace_stats as a summary for humans and bug reports: aligned text or
 * GitHub markdown (see cuptrace_stats_print in stats.h). Output depends only on the stats. */
#include "stats/report.h"
#include "stats/busy.h"
#include "stats/stats.h"
#include "stats/stats_meta.h"
#include "stats/stats_summary.h"
#include "common/saturate.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LABEL_W 18 /* value column of the header lines in text */

/* A merged trace keeps each input's metadata under "<label>: <key>" (merge_meta.c). The values
 * of key over the inputs, once each, into buf: "v" where they agree, else "v (label); ...".
 * 0 if no input has it. */
static int merged_value(const struct cuptrace_stats *st, const char *key, char *buf, size_t cap)
{
	size_t len = 0, klen = strlen(key), n = 0;
	char v[REPORT_VALUE / 4], first[REPORT_VALUE / 4] = "";
	int differ = 0;
	for (size_t i = 0; i < st->nmeta; i++) {
		const char *k = st->meta[i].key;
		size_t l = k ? strlen(k) : 0;
		if (l < klen + 3 || strcmp(k + l - klen, key) || k[l - klen - 2] != ':' ||
		    k[l - klen - 1] != ' ')
			continue;
		stats_meta_str(&st->meta[i], v, sizeof(v));
		if (!n++)
			snprintf(first, sizeof(first), "%s", v);
		else if (strcmp(first, v))
			differ = 1;
	}
	if (!n)
		return 0;
	if (!differ) {
		snprintf(buf, cap, "%s", first);
		return 1;
	}
	for (size_t i = 0; i < st->nmeta && len < cap; i++) {
		const char *k = st->meta[i].key;
		size_t l = k ? strlen(k) : 0;
		if (l < klen + 3 || strcmp(k + l - klen, key) || k[l - klen - 2] != ':' ||
		    k[l - klen - 1] != ' ')
			continue;
		stats_meta_str(&st->meta[i], v, sizeof(v));
		len += (size_t)snprintf(buf + len, cap - len, "%s%s (%.*s)", len ? "; " : "", v,
		                        (int)(l - klen - 2), k);
	}
	return 1;
}

static void print_header(const struct cuptrace_stats *st, FILE *f, int md)
{
	const struct cuptrace_meta *m;
	char buf[REPORT_VALUE], v[64];
	int64_t start;
	int gpus = 0;

	for (m = stats_next_gpu(st, NULL); m; m = stats_next_gpu(st, m), gpus++) {
		snprintf(v, sizeof(v), "GPU%s%.20s", m->key[3] ? " " : "", m->key + 3);
		stats_meta_str(m, buf, sizeof(buf));
		report_kv(f, md, LABEL_W, v, buf, 0);
	}
	for (int n = 0; !gpus && n < 64; n++) { /* a merged trace: its inputs' GPUs */
		char key[16];
		snprintf(key, sizeof(key), "gpu%d", n);
		if (!merged_value(st, key, buf, sizeof(buf)))
			continue;
		snprintf(v, sizeof(v), "GPU %d", n);
		report_kv(f, md, LABEL_W, v, buf, 0);
		while (++n < 64) {
			snprintf(key, sizeof(key), "gpu%d", n);
			if (!merged_value(st, key, buf, sizeof(buf)))
				break;
			snprintf(v, sizeof(v), "GPU %d", n);
			report_kv(f, md, LABEL_W, v, buf, 0);
		}
		gpus = n;
	}
	if (!gpus)
		report_kv(f, md, LABEL_W, "GPU", CUPTRACE_NOT_RECORDED, 0);
	/* Which of them the process used: a rank of a job sees every GPU of its node. */
	if (stats_gpus_used_text(st, 0, buf, sizeof(buf)))
		report_kv(f, md, LABEL_W, "GPUs used", buf, 0);
	for (size_t i = 0; i < stats_nknown_lines; i++) {
		m = NULL;
		for (size_t k = 0; k < 2 && !m && stats_known_lines[i].keys[k]; k++)
			m = stats_meta_get(st, stats_known_lines[i].keys[k]);
		if (m && !m->is_int && (!m->s || !*m->s || !strcmp(m->s, "?")))
			m = NULL; /* "": removed on purpose (cuptrace share, private recording);
			           * "?": a reader's "the file does not say" */
		int have = m != NULL;
		if (m)
			stats_meta_str(m, buf, sizeof(buf));
		for (size_t k = 0; k < 2 && !have && stats_known_lines[i].keys[k]; k++)
			have = merged_value(st, stats_known_lines[i].keys[k], buf, sizeof(buf));
		report_kv(f, md, LABEL_W, stats_known_lines[i].label,
		          have ? buf : CUPTRACE_NOT_RECORDED, 0);
	}
	const struct cuptrace_meta *name = stats_meta_get(st, "process_name"),
	                           *pid = stats_meta_get(st, "pid");
	if (name || pid) {
		char n[REPORT_VALUE / 2] = CUPTRACE_NOT_RECORDED, p[32] = CUPTRACE_NOT_RECORDED;
		if (name)
			stats_meta_str(name, n, sizeof(n));
		if (pid)
			stats_meta_str(pid, p, sizeof(p));
		snprintf(buf, sizeof(buf), "%s (pid %s)", n, p);
		report_kv(f, md, LABEL_W, "Process", buf, 0);
	}
	const char *cmd = stats_cmdline(st, buf, sizeof(buf));
	if (!cmd && merged_value(st, "cmdline", buf, sizeof(buf)))
		cmd = buf;
	report_kv(f, md, LABEL_W, "Command line", cmd ? cmd : CUPTRACE_NOT_RECORDED, cmd != NULL);
	if (stats_start_utc(st, &start, buf, sizeof(buf)))
		report_kv(f, md, LABEL_W, "Start", buf, 0);
	/* Dropped records under any key: the reader must know the trace is incomplete. */
	int64_t dropped;
	int seen = stats_dropped(st, &dropped);
	if (seen)
		snprintf(buf, sizeof(buf), "%" PRId64 "%s", dropped,
		         dropped ? " (the trace is incomplete)" : "");
	report_kv(f, md, LABEL_W, "Dropped records", seen ? buf : CUPTRACE_NOT_RECORDED, 0);
	/* A damaged input read up to its damage (read/read.c): the trace is incomplete. */
	const struct cuptrace_meta *dm = stats_meta_get(st, CUPTRACE_META_READ_DAMAGE);
	if (dm && !dm->is_int && dm->s)
		report_kv(f, md, LABEL_W, "Damaged", dm->s, 1);
	/* Work CUPTI could not record as asked (collect_callbacks.c): also incomplete. */
	const struct cuptrace_meta *um = stats_meta_get(st, CUPTRACE_META_UNRECORDED_DEVICE_GRAPHS);
	int64_t dg = 0;
	if (um && stats_meta_int(um, &dg) && dg > 0) {
		snprintf(buf, sizeof(buf),
		         "what CUDA graphs launched from the GPU ran (%" PRId64
		         " instantiated for it; node by node CUPTI records none of it, "
		         "`record --cuda-graphs graph` does)",
		         dg);
		report_kv(f, md, LABEL_W, "Not recorded", buf, 0);
	}
}

/* Every other metadata entry, as it is, last: counts and details that a reader may want. */
static void print_other_meta(const struct cuptrace_stats *st, FILE *f, int md)
{
	char buf[REPORT_VALUE], label[64];
	int w = 0;

	for (size_t i = 0; i < st->nmeta; i++)
		if (st->meta[i].key && !stats_meta_is_known(st->meta[i].key)) {
			report_clean(label, sizeof(label), st->meta[i].key, 40, 0);
			w = (int)report_width(label) + 2 > w ? (int)report_width(label) + 2 : w;
		}
	if (!w)
		return;
	report_section(f, md, "Other metadata");
	for (size_t i = 0; i < st->nmeta; i++) {
		if (!st->meta[i].key || stats_meta_is_known(st->meta[i].key))
			continue;
		report_clean(label, sizeof(label), st->meta[i].key, 40, 0);
		stats_meta_str(&st->meta[i], buf, sizeof(buf));
		report_kv(f, md, w, label, buf, 0);
	}
}

static void print_counts(const struct cuptrace_stats *st, FILE *f, int md)
{
	char buf[256], a[32], b[32], c[32];

	if (st->slices + st->instants + st->counters) {
		report_dur(a, sizeof(a), sat_sub(st->max_ts, st->min_ts));
		report_dur(b, sizeof(b), st->min_ts);
		report_dur(c, sizeof(c), st->max_ts);
		snprintf(buf, sizeof(buf), "%s (from %s to %s)", a, b, c);
	} else {
		snprintf(buf, sizeof(buf), "no events");
	}
	report_kv(f, md, LABEL_W, "Time span", buf, 0);
	snprintf(buf, sizeof(buf),
	         "%" PRIu64 " tracks, %" PRIu64 " slices (%" PRIu64 " on GPU tracks, %" PRIu64
	         " with an incoming flow), %" PRIu64 " instants, %" PRIu64 " counter values",
	         st->tracks, st->slices, st->gpu_slices, st->gpu_slices_with_flow_in, st->instants,
	         st->counters);
	report_kv(f, md, LABEL_W, "Events", buf, 0);
	snprintf(buf, sizeof(buf), "%" PRIu64 " complete, %" PRIu64 " with one end only", st->flows,
	         st->flows_dangling);
	report_kv(f, md, LABEL_W, "Flows", buf, 0);
	/* Only what is wrong, so that a clean trace prints no such line. */
	const struct {
		const char *what;
		uint64_t n;
	} problems[] = {{"negative timestamps", st->negative_ts},
	                {"negative durations", st->negative_dur},
	                {"events on undeclared tracks", st->unknown_track_events},
	                {"partially overlapping slice pairs", stats_partial_overlaps(st)}};
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(problems) / sizeof(problems[0]); i++)
		if (problems[i].n && len < sizeof(buf))
			len += snprintf(buf + len, sizeof(buf) - len, "%s%s: %" PRIu64,
			                len ? "; " : "", problems[i].what, problems[i].n);
	if (len)
		report_kv(f, md, LABEL_W, "Problems", buf, 0);
}

static void print_categories(const struct cuptrace_stats *st, FILE *f, int md)
{
	struct table t = {
	    .md = md, .ncols = 3, .head = {"Category", "Slices", "Total"}, .align = "lrr"};
	struct stats_cat *cats;
	size_t n;

	report_section(f, md, "Slices by category");
	int err = stats_categories(st, &cats, &n);
	if (err || !n) {
		fputs(err ? "(out of memory)\n" : "No slices.\n", f);
		return;
	}
	for (size_t k = 0; k < n; k++) {
		table_cell_text(&t, cats[k].cat);
		table_cell(&t, "%" PRIu64, cats[k].count);
		table_cell_dur(&t, cats[k].total);
	}
	free(cats);
	table_print(&t, f);
}

static void print_names(const struct cuptrace_stats *st, FILE *f, int md)
{
	struct table t = {
	    .md = md,
	    .ncols = 7, /* the minimum is in --json (min_ns): the line stays within the width */
	    .head = {"Name", "Category", "Count", "Total", "Avg", "Max", "% GPU work"},
	    .align = "Llrrrrr",
	};
	size_t n = st->nnames < STATS_TOP_NAMES ? st->nnames : STATS_TOP_NAMES;
	char title[64];

	if (st->nnames > STATS_TOP_NAMES)
		snprintf(title, sizeof(title), "Top %d of %zu names by total time", STATS_TOP_NAMES,
		         st->nnames);
	else
		snprintf(title, sizeof(title), "Names by total time");
	report_section(f, md, title);
	if (!n) {
		fputs("No slices.\n", f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_stats_name *s = &st->names[i];
		table_cell_text(&t, s->name);
		table_cell_text(&t, s->category);
		table_cell(&t, "%" PRIu64, s->count);
		table_cell_dur(&t, s->total_ns);
		table_cell_dur(
		    &t, s->count ? (int64_t)((double)s->total_ns / (double)s->count + 0.5) : 0);
		table_cell_dur(&t, s->max_ns);
		if (s->on_gpu && cuptrace_busy_is_work(s->category) && st->gpu_work_ns > 0)
			table_cell(&t, "%.1f",
			           100.0 * (double)s->total_ns / (double)st->gpu_work_ns);
		else
			table_cell(&t, "%s", "");
	}
	table_print(&t, f);
	fputs("\n", f);
	report_para(f, md, "",
	            "%% GPU work: share of the time of all GPU work (kernels, copies and memsets, "
	            "summed over streams and GPUs: work that overlaps on several streams counts on "
	            "each); annotation and sync ranges on GPU rows are not work.\n");
}

static void print_gpu_tracks(const struct cuptrace_stats *st, FILE *f, int md)
{
	struct table t = {.md = md,
	                  .ncols = 5,
	                  .head = {"GPU", "Track", "Slices", "Busy", "Busy %"},
	                  .align = "LLrrr"};
	struct stats_gpu_row *rows;
	char label[REPORT_CELL_BYTES];
	size_t n;

	report_section(f, md, "GPU tracks");
	int err = stats_gpu_rows(st, &rows, &n);
	if (err || !n) {
		fputs(err ? "(out of memory)\n" : "No GPU tracks.\n", f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_stats_track *k = rows[i].k;
		table_cell_text(&t, rows[i].group < st->ntrk ? st->trk[rows[i].group].name : "-");
		if (k->lane)
			snprintf(label, sizeof(label), "%.200s (lane %" PRIu32 ")", k->name,
			         k->lane);
		table_cell_text(&t, k->lane ? label : k->name);
		table_cell(&t, "%" PRIu64, k->slices);
		table_cell_dur(&t, k->busy_ns);
		table_cell(&t, "%.1f", stats_gpu_window_pct(st, &rows[i]));
	}
	free(rows);
	table_print(&t, f);
	fputs("\n", f);
	report_para(f, md, "",
	            "Busy %%: of the GPU's window, from its first work's start to its last "
	            "work's end (as `cuptrace analyze` says it).\n");
}

void cuptrace_stats_print(const struct cuptrace_stats *st, FILE *f, int markdown)
{
	int md = !!markdown;

	if (!st || !f)
		return;
	fputs(md ? "### cuptrace stats\n\n" : "cuptrace stats\n", f);
	print_header(st, f, md);
	print_counts(st, f, md);
	print_categories(st, f, md);
	print_names(st, f, md);
	print_gpu_tracks(st, f, md);
	print_other_meta(st, f, md);
}
