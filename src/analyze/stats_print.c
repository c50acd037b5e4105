/* Prints struct cuptrace_stats as a summary for humans and bug reports: aligned text or
 * GitHub markdown (see cuptrace_stats_print in stats.h). Output depends only on the stats. */
#include "analyze/stats.h"
#include "analyze/stats_internal.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TOP_NAMES   20
#define MAX_COLS    8
#define CELL_BYTES  256
#define NAME_TEXT   60  /* bytes of a name in a plain-text table */
#define NAME_MD     120 /* ... in a markdown table */
#define VALUE_BYTES 2000
#define LABEL_W     18 /* value column of the header lines in text */

/* A table rendered as GitHub markdown or as aligned text. Cells are fixed buffers so that a
 * failed allocation only shortens the table. */
struct table {
	int md;
	size_t ncols;
	const char *head[MAX_COLS];
	const char *align; /* 'l' or 'r' per column */
	char (*cells)[CELL_BYTES];
	size_t ncells, cap;
	int oom;
};

static char *next_cell(struct table *t)
{
	void *p = t->oom ? NULL : cuptrace_grow(t->cells, &t->cap, t->ncells + 1, CELL_BYTES);
	if (!p) {
		t->oom = 1;
		return NULL;
	}
	t->cells = p;
	return t->cells[t->ncells++];
}

__attribute__((format(printf, 2, 3))) static void cell(struct table *t, const char *fmt, ...)
{
	char *c = next_cell(t);
	va_list ap;

	if (!c)
		return;
	va_start(ap, fmt);
	vsnprintf(c, CELL_BYTES, fmt, ap);
	va_end(ap);
}

/* Copies untrusted text (names may hold any bytes) for one line: control characters become '?',
 * '|' is escaped in markdown, and text beyond max bytes is cut at a UTF-8 boundary and marked. */
static void clean(char *dst, size_t cap, const char *s, size_t max, int md)
{
	size_t n = 0, len = strlen(s);

	if (len > max) {
		len = max;
		while (len && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	for (size_t i = 0; i < len && n + 5 < cap; i++) {
		unsigned char c = s[i];
		if (md && c == '|')
			dst[n++] = '\\';
		dst[n++] = c < 0x20 || c == 0x7f ? '?' : c;
	}
	if (len < strlen(s) && n + 4 <= cap) {
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = 0;
}

static void cell_text(struct table *t, const char *s)
{
	char *c = next_cell(t);
	if (c)
		clean(c, CELL_BYTES, s ? s : "", t->md ? NAME_MD : NAME_TEXT, t->md);
}

/* Display width: UTF-8 continuation bytes take no column. */
static size_t width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static void pad(FILE *f, size_t n)
{
	while (n--)
		fputc(' ', f);
}

static void table_row(const struct table *t, FILE *f, const char *const *cells, const size_t *w)
{
	size_t last = t->ncols; /* text rows end at their last non-empty cell: no trailing blanks */

	while (!t->md && last > 1 && !*cells[last - 1])
		last--;
	for (size_t c = 0; c < last; c++) {
		const char *s = cells[c];
		if (t->md) {
			fprintf(f, "%s %s", c ? " |" : "|", s);
			continue;
		}
		size_t gap = w[c] - width(s);
		if (c)
			fputs("  ", f);
		if (t->align[c] == 'r')
			pad(f, gap);
		fputs(s, f);
		if (t->align[c] != 'r' && c + 1 < last)
			pad(f, gap);
	}
	fputs(t->md ? " |\n" : "\n", f);
}

static void table_print(struct table *t, FILE *f)
{
	size_t w[MAX_COLS] = {0}, nrows = t->ncells / t->ncols;
	const char *row[MAX_COLS];

	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = width(t->head[c]);
		for (size_t r = 0; r < nrows; r++) {
			size_t cw = width(t->cells[r * t->ncols + c]);
			w[c] = cw > w[c] ? cw : w[c];
		}
	}
	table_row(t, f, t->head, w);
	for (size_t c = 0; c < t->ncols; c++) {
		if (t->md) {
			fputs(t->align[c] == 'r' ? "|---:" : "|---", f);
			continue;
		}
		fputs(c ? "  " : "", f);
		for (size_t i = 0; i < w[c]; i++)
			fputc('-', f);
	}
	fputs(t->md ? "|\n" : "\n", f);
	for (size_t r = 0; r < nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++)
			row[c] = t->cells[r * t->ncols + c];
		table_row(t, f, row, w);
	}
	if (t->oom)
		fputs("(out of memory: table cut short)\n", f);
	free(t->cells);
	t->cells = NULL;
	t->ncells = t->cap = 0;
}

static void section(FILE *f, int md, const char *title)
{
	fprintf(f, md ? "\n#### %s\n\n" : "\n%s:\n", title);
}

/* One "label: value" line, the value from column w in text; code: show the value as code in
 * markdown (command lines). */
static void kv(FILE *f, int md, int w, const char *label, const char *value, int code)
{
	char buf[VALUE_BYTES + 16], lab[80];

	clean(buf, sizeof(buf), value, VALUE_BYTES, 0);
	snprintf(lab, sizeof(lab), "%s:", label);
	if (md && code) {
		/* A backtick would end the code span early. */
		for (char *p = buf; *p; p++)
			*p = *p == '`' ? '\'' : *p;
		fprintf(f, "- **%s:** `%s`\n", label, buf);
	} else if (md) {
		fprintf(f, "- **%s:** %s\n", label, buf);
	} else {
		fprintf(f, "%-*s %s\n", w - 1, lab, buf);
	}
}

static const struct cuptrace_meta *meta_get(const struct cuptrace_stats *st, const char *key)
{
	for (size_t i = 0; i < st->nmeta; i++)
		if (st->meta[i].key && !strcmp(st->meta[i].key, key))
			return &st->meta[i];
	return NULL;
}

static void meta_str(const struct cuptrace_meta *m, char *buf, size_t cap)
{
	if (m->is_int)
		snprintf(buf, cap, "%" PRId64, m->i);
	else
		snprintf(buf, cap, "%s", m->s ? m->s : "");
}

/* Durations in header lines, in the unit that reads best. */
static void fmt_dur(char *buf, size_t cap, int64_t ns)
{
	double a = ns < 0 ? -(double)ns : (double)ns;
	if (a < 1e3)
		snprintf(buf, cap, "%" PRId64 " ns", ns);
	else if (a < 1e6)
		snprintf(buf, cap, "%.3f us", ns / 1e3);
	else if (a < 1e9)
		snprintf(buf, cap, "%.3f ms", ns / 1e6);
	else
		snprintf(buf, cap, "%.3f s", ns / 1e9);
}

/* Header lines from metadata: a label and the keys that may hold it, first found wins. The keys
 * are those that collect and convert write; GPUs come as "gpu0", "gpu1", ... (or "gpu"). */
static const struct {
	const char *label;
	const char *keys[2];
} known_lines[] = {
    {"Driver", {"driver_version"}},
    {"CUDA", {"cuda_version", "cuda_driver_api_version"}},
    {"CUPTI", {"cupti_version"}},
    {"Host", {"hostname"}},
};
/* Keys composed into other lines (Process, Command line, Start). */
static const char *const composed_keys[] = {"process_name", "pid", "cmdline", "start_realtime_ns"};

static int is_gpu_key(const char *key)
{
	if (strncmp(key, "gpu", 3))
		return 0;
	for (key += 3; *key >= '0' && *key <= '9'; key++)
		;
	return !*key;
}

/* Orders "gpu", "gpu0", "gpu2", "gpu10" by number, then by name. */
static int gpu_cmp(const struct cuptrace_meta *a, const struct cuptrace_meta *b)
{
	long na = a->key[3] ? strtol(a->key + 3, NULL, 10) : -1;
	long nb = b->key[3] ? strtol(b->key + 3, NULL, 10) : -1;
	return na != nb ? (na < nb ? -1 : 1) : strcmp(a->key, b->key);
}

static int is_known(const char *key)
{
	if (is_gpu_key(key))
		return 1;
	for (size_t i = 0; i < sizeof(known_lines) / sizeof(known_lines[0]); i++)
		for (size_t k = 0; k < 2; k++)
			if (known_lines[i].keys[k] && !strcmp(key, known_lines[i].keys[k]))
				return 1;
	for (size_t i = 0; i < sizeof(composed_keys) / sizeof(composed_keys[0]); i++)
		if (!strcmp(key, composed_keys[i]))
			return 1;
	return 0;
}

/* The start timestamp as an int, or as the decimal string that collect writes. */
static int meta_int(const struct cuptrace_meta *m, int64_t *v)
{
	char *end;

	if (m->is_int) {
		*v = m->i;
		return 1;
	}
	if (!m->s || !*m->s)
		return 0;
	errno = 0;
	*v = strtoll(m->s, &end, 10);
	return !*end && !errno;
}

static void print_header(const struct cuptrace_stats *st, FILE *f, int md)
{
	const struct cuptrace_meta *m;
	char buf[VALUE_BYTES], v[64];
	int64_t start;
	int gpus = 0;

	/* GPUs by number, whatever order their records came in: a selection pass per GPU, as
	 * metadata is tens of entries. */
	for (m = NULL;; gpus++) {
		const struct cuptrace_meta *next = NULL;
		for (size_t i = 0; i < st->nmeta; i++) {
			const struct cuptrace_meta *g = &st->meta[i];
			if (g->key && is_gpu_key(g->key) && (!m || gpu_cmp(g, m) > 0) &&
			    (!next || gpu_cmp(g, next) < 0))
				next = g;
		}
		if (!(m = next))
			break;
		snprintf(v, sizeof(v), "GPU%s%.20s", m->key[3] ? " " : "", m->key + 3);
		meta_str(m, buf, sizeof(buf));
		kv(f, md, LABEL_W, v, buf, 0);
	}
	if (!gpus)
		kv(f, md, LABEL_W, "GPU", "(not recorded)", 0);
	for (size_t i = 0; i < sizeof(known_lines) / sizeof(known_lines[0]); i++) {
		m = NULL;
		for (size_t k = 0; k < 2 && !m && known_lines[i].keys[k]; k++)
			m = meta_get(st, known_lines[i].keys[k]);
		if (m)
			meta_str(m, buf, sizeof(buf));
		kv(f, md, LABEL_W, known_lines[i].label, m ? buf : "(not recorded)", 0);
	}
	const struct cuptrace_meta *name = meta_get(st, "process_name"), *pid = meta_get(st, "pid");
	if (name || pid) {
		char n[VALUE_BYTES / 2] = "?", p[32] = "?";
		if (name)
			meta_str(name, n, sizeof(n));
		if (pid)
			meta_str(pid, p, sizeof(p));
		snprintf(buf, sizeof(buf), "%s (pid %s)", n, p);
		kv(f, md, LABEL_W, "Process", buf, 0);
	}
	/* The command line: from metadata, else from the first process track. */
	const char *cmd = NULL;
	if ((m = meta_get(st, "cmdline"))) {
		meta_str(m, buf, sizeof(buf));
		cmd = buf;
	}
	for (size_t i = 0; !cmd && i < st->ntrk; i++)
		if (st->trk[i].kind == CUPTRACE_TRACK_PROCESS)
			cmd = st->trk[i].cmdline;
	kv(f, md, LABEL_W, "Command line", cmd ? cmd : "(not recorded)", cmd != NULL);
	if ((m = meta_get(st, "start_realtime_ns")) && meta_int(m, &start)) {
		time_t sec = (time_t)(start / 1000000000);
		int64_t frac = start % 1000000000;
		struct tm tm;
		if (frac < 0) {
			frac += 1000000000;
			sec--;
		}
		if (gmtime_r(&sec, &tm) && strftime(v, sizeof(v), "%Y-%m-%d %H:%M:%S", &tm)) {
			snprintf(buf, sizeof(buf), "%s.%09" PRId64 " UTC", v, frac);
			kv(f, md, LABEL_W, "Start", buf, 0);
		}
	}
	/* Dropped records under any key: the reader must know the trace is incomplete. */
	int64_t dropped = 0;
	int seen = 0;
	for (size_t i = 0; i < st->nmeta; i++) {
		if (st->meta[i].key && st->meta[i].is_int && strstr(st->meta[i].key, "dropped")) {
			dropped = sat_add(dropped, st->meta[i].i);
			seen = 1;
		}
	}
	if (seen)
		snprintf(buf, sizeof(buf), "%" PRId64 "%s", dropped,
		         dropped ? " (the trace is incomplete)" : "");
	kv(f, md, LABEL_W, "Dropped records", seen ? buf : "(not recorded)", 0);
}

/* Every other metadata entry, as it is, last: counts and details that a reader may want. */
static void print_other_meta(const struct cuptrace_stats *st, FILE *f, int md)
{
	char buf[VALUE_BYTES], label[64];
	int w = 0;

	for (size_t i = 0; i < st->nmeta; i++)
		if (st->meta[i].key && !is_known(st->meta[i].key)) {
			clean(label, sizeof(label), st->meta[i].key, 40, 0);
			w = (int)width(label) + 2 > w ? (int)width(label) + 2 : w;
		}
	if (!w)
		return;
	section(f, md, "Other metadata");
	for (size_t i = 0; i < st->nmeta; i++) {
		if (!st->meta[i].key || is_known(st->meta[i].key))
			continue;
		clean(label, sizeof(label), st->meta[i].key, 40, 0);
		meta_str(&st->meta[i], buf, sizeof(buf));
		kv(f, md, w, label, buf, 0);
	}
}

static void print_counts(const struct cuptrace_stats *st, FILE *f, int md)
{
	char buf[256], a[32], b[32], c[32];
	uint64_t overlaps = 0;

	for (size_t i = 0; i < st->ntrk; i++)
		overlaps += st->trk[i].partial_overlaps;
	if (st->slices + st->instants + st->counters) {
		fmt_dur(a, sizeof(a), sat_sub(st->max_ts, st->min_ts));
		fmt_dur(b, sizeof(b), st->min_ts);
		fmt_dur(c, sizeof(c), st->max_ts);
		snprintf(buf, sizeof(buf), "%s (from %s to %s)", a, b, c);
	} else {
		snprintf(buf, sizeof(buf), "no events");
	}
	kv(f, md, LABEL_W, "Time span", buf, 0);
	snprintf(buf, sizeof(buf),
	         "%" PRIu64 " tracks, %" PRIu64 " slices (%" PRIu64 " on GPU tracks, %" PRIu64
	         " with an incoming flow), %" PRIu64 " instants, %" PRIu64 " counter values",
	         st->tracks, st->slices, st->gpu_slices, st->gpu_slices_with_flow_in, st->instants,
	         st->counters);
	kv(f, md, LABEL_W, "Events", buf, 0);
	snprintf(buf, sizeof(buf), "%" PRIu64 " complete, %" PRIu64 " with one end only", st->flows,
	         st->flows_dangling);
	kv(f, md, LABEL_W, "Flows", buf, 0);
	/* Only what is wrong, so that a clean trace prints no such line. */
	const struct {
		const char *what;
		uint64_t n;
	} problems[] = {{"negative timestamps", st->negative_ts},
	                {"negative durations", st->negative_dur},
	                {"events on undeclared tracks", st->unknown_track_events},
	                {"partially overlapping slice pairs", overlaps}};
	size_t len = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(problems) / sizeof(problems[0]); i++)
		if (problems[i].n && len < sizeof(buf))
			len += snprintf(buf + len, sizeof(buf) - len, "%s%s: %" PRIu64,
			                len ? "; " : "", problems[i].what, problems[i].n);
	if (len)
		kv(f, md, LABEL_W, "Problems", buf, 0);
}

struct cat_total {
	const char *cat;
	uint64_t count;
	int64_t total;
};

static int cat_cmp(const void *pa, const void *pb)
{
	const struct cat_total *a = pa, *b = pb;
	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return strcmp(a->cat, b->cat);
}

static void print_categories(const struct cuptrace_stats *st, FILE *f, int md)
{
	struct table t = {
	    .md = md, .ncols = 3, .head = {"Category", "Slices", "Total ms"}, .align = "lrr"};
	struct cat_total *cats = st->nnames ? calloc(st->nnames, sizeof(*cats)) : NULL;
	size_t n = 0;

	section(f, md, "Slices by category");
	if (!cats) {
		fputs(st->nnames ? "(out of memory)\n" : "No slices.\n", f);
		return;
	}
	/* Categories are few: a linear search per name is enough. */
	for (size_t i = 0; i < st->nnames; i++) {
		size_t k = 0;
		while (k < n && strcmp(cats[k].cat, st->names[i].category))
			k++;
		if (k == n)
			cats[n++].cat = st->names[i].category;
		cats[k].count += st->names[i].count;
		cats[k].total = sat_add(cats[k].total, st->names[i].total_ns);
	}
	qsort(cats, n, sizeof(*cats), cat_cmp);
	for (size_t k = 0; k < n; k++) {
		cell_text(&t, cats[k].cat);
		cell(&t, "%" PRIu64, cats[k].count);
		cell(&t, "%.3f", cats[k].total / 1e6);
	}
	free(cats);
	table_print(&t, f);
}

static void print_names(const struct cuptrace_stats *st, FILE *f, int md)
{
	struct table t = {
	    .md = md,
	    .ncols = 8,
	    .head = {"Name", "Category", "Count", "Total ms", "Avg us", "Min us", "Max us",
	             "% GPU"},
	    .align = "llrrrrrr",
	};
	size_t n = st->nnames < TOP_NAMES ? st->nnames : TOP_NAMES;
	char title[64];

	if (st->nnames > TOP_NAMES)
		snprintf(title, sizeof(title), "Top %d of %zu names by total time", TOP_NAMES,
		         st->nnames);
	else
		snprintf(title, sizeof(title), "Names by total time");
	section(f, md, title);
	if (!n) {
		fputs("No slices.\n", f);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_stats_name *s = &st->names[i];
		cell_text(&t, s->name);
		cell_text(&t, s->category);
		cell(&t, "%" PRIu64, s->count);
		cell(&t, "%.3f", s->total_ns / 1e6);
		cell(&t, "%.3f", s->count ? (double)s->total_ns / (double)s->count / 1e3 : 0.0);
		cell(&t, "%.3f", s->min_ns / 1e3);
		cell(&t, "%.3f", s->max_ns / 1e3);
		if (s->on_gpu && st->gpu_busy_ns > 0)
			cell(&t, "%.1f", 100.0 * (double)s->total_ns / (double)st->gpu_busy_ns);
		else
			cell(&t, "%s", "");
	}
	table_print(&t, f);
	fputs(md ? "\n" : "", f);
	fputs("% GPU: share of the busy time of all GPU tracks together.\n", f);
}

/* A GPU track row: ordered by GPU (declaration order of the group), then stream order. */
struct gpu_row {
	size_t group;
	const struct cuptrace_stats_track *k;
};

static int gpu_row_cmp(const void *pa, const void *pb)
{
	const struct gpu_row *a = pa, *b = pb;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->k->sort_rank != b->k->sort_rank)
		return a->k->sort_rank < b->k->sort_rank ? -1 : 1;
	if (a->k->lane != b->k->lane)
		return a->k->lane < b->k->lane ? -1 : 1;
	return a->k < b->k ? -1 : a->k > b->k; /* declaration order: the array's order */
}

/* Slice tracks under a GPU that hold slices (streams and their lanes). */
static void print_gpu_tracks(const struct cuptrace_stats *st, FILE *f, int md)
{
	struct table t = {.md = md,
	                  .ncols = 5,
	                  .head = {"GPU", "Track", "Slices", "Busy ms", "% of span"},
	                  .align = "llrrr"};
	int64_t span = sat_sub(st->max_ts, st->min_ts);
	struct gpu_row *rows = st->ntrk ? calloc(st->ntrk, sizeof(*rows)) : NULL;
	char label[CELL_BYTES];
	size_t n = 0;

	section(f, md, "GPU tracks");
	for (size_t i = 0; rows && i < st->ntrk; i++) {
		const struct cuptrace_stats_track *k = &st->trk[i];
		if (k->kind != CUPTRACE_TRACK_SLICES || !k->group_uuid || !k->slices)
			continue;
		rows[n] = (struct gpu_row){st->ntrk, k};
		for (size_t j = 0; j < st->ntrk; j++)
			if (st->trk[j].uuid == k->group_uuid)
				rows[n].group = j;
		n++;
	}
	if (!n) {
		fputs(st->ntrk && !rows ? "(out of memory)\n" : "No GPU tracks.\n", f);
		free(rows);
		return;
	}
	qsort(rows, n, sizeof(*rows), gpu_row_cmp);
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_stats_track *k = rows[i].k;
		cell_text(&t, rows[i].group < st->ntrk ? st->trk[rows[i].group].name : "?");
		if (k->lane)
			snprintf(label, sizeof(label), "%.200s (lane %" PRIu32 ")", k->name,
			         k->lane);
		cell_text(&t, k->lane ? label : k->name);
		cell(&t, "%" PRIu64, k->slices);
		cell(&t, "%.3f", k->busy_ns / 1e6);
		cell(&t, "%.1f", span > 0 ? 100.0 * (double)k->busy_ns / (double)span : 0.0);
	}
	free(rows);
	table_print(&t, f);
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
