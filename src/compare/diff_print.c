/* Prints a diff (diff.h) as text, GitHub markdown or JSON.
 *
 * JSON (`cuptrace diff --json`), one object; times in ns, every value per --per range when given
 * (then counts may be fractional), a percentage null where the base value is 0:
 *   schema        "cuptrace-diff/1"
 *   base, new     the two paths as given
 *   group_by      "name", "base" or "op"
 *   per           null, or {name, base_count, new_count}
 *   summary       {span_ns, gpu_busy_ns, kernels, bytes_copied}, each a change (below)
 *   devices       [{name, new_name, change of busy_ns}]: GPUs matched on "GPU N", or by
 *                 position (below); new_name is NEW's name where it differs, else null; a side
 *                 without the device has null
 *   devices_matched_by  "index" ("GPU N" with "GPU N"), or "position" (first GPU with first
 *                 GPU, ...: the runs share no GPU index, or say different ranks)
 *   ranks         {base, new}: each run's "rank" metadata, null where it has none
 *   families      {kernels, api_calls, copies, nvtx_ranges, ops}: each [row], every name of
 *                 either run, by |change in total| desc
 *   row           {name, status ("common" | "added" | "removed"), count (a change),
 *                 total_ns (a change), mean_ns (a change; a side without the name has null)}
 *   change        {base, new, delta, delta_pct}
 *   fail_above    null, or {pct, failed, reasons: [{family (null for GPU busy time), name,
 *                 total_ns (a change)}]}
 */
#include "compare/diff.h"
#include "stats/report.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define LIST_NAMES 5  /* added or removed names listed under a table (the rest counted) */
#define LIST_NAME  60 /* bytes of such a name before it is shortened */

static const char *const family_title[CUPTRACE_FAM_N] = {
    "Kernels", "API calls", "Copies and memsets", "NVTX ranges", "PyTorch ops"};
static const char *const family_noun[CUPTRACE_FAM_N] = {"kernel", "API call", "copy kind",
                                                        "NVTX range", "op"};

/* The change in percent, or NAN where the base is 0. */
static double pct(struct cuptrace_diff_value v)
{
	return v.base != 0 ? (v.new_ - v.base) / fabs(v.base) * 100.0 : NAN;
}

static void fmt_pct(char *buf, size_t cap, struct cuptrace_diff_value v)
{
	double p = pct(v);
	if (isnan(p))
		snprintf(buf, cap, "%s", v.new_ != 0 ? "new" : "0.0");
	else if (v.new_ == v.base)
		snprintf(buf, cap, "0.0");
	else
		snprintf(buf, cap, "%+.1f", p);
}

/* A count: an integer, or two decimals once divided per range. */
static void fmt_count(char *buf, size_t cap, double v, int per, int sign)
{
	sign = sign && v != 0;
	if (per)
		snprintf(buf, cap, sign ? "%+.2f" : "%.2f", v);
	else
		snprintf(buf, cap, sign ? "%+.0f" : "%.0f", v);
}

static void fmt_dur_signed(char *buf, size_t cap, double ns)
{
	report_dur_signed(buf, cap, (int64_t)llround(ns));
}

/* One line of the header table: a label, the two values, the change and the change in %. */
enum unit { U_DUR, U_COUNT, U_BYTES };

static void header_row(struct table *t, const char *label, struct cuptrace_diff_value v,
                       enum unit u, int per, int in_base, int in_new)
{
	char a[48], b[48], c[64], p[32];
	if (u == U_DUR) {
		report_dur(a, sizeof(a), (int64_t)llround(v.base));
		report_dur(b, sizeof(b), (int64_t)llround(v.new_));
		fmt_dur_signed(c, sizeof(c), v.new_ - v.base);
	} else if (u == U_BYTES) {
		double dl = v.new_ - v.base;
		report_bytes(a, sizeof(a), (uint64_t)llround(fabs(v.base)));
		report_bytes(b, sizeof(b), (uint64_t)llround(fabs(v.new_)));
		report_bytes(p, sizeof(p), (uint64_t)llround(fabs(dl)));
		snprintf(c, sizeof(c), "%s%s", dl > 0 ? "+" : dl < 0 ? "-" : "", p);
	} else {
		fmt_count(a, sizeof(a), v.base, per && u == U_COUNT, 0);
		fmt_count(b, sizeof(b), v.new_, per && u == U_COUNT, 0);
		fmt_count(c, sizeof(c), v.new_ - v.base, per && u == U_COUNT, 1);
	}
	fmt_pct(p, sizeof(p), v);
	table_cell_text(t, label);
	table_cell(t, "%s", in_base ? a : "-");
	table_cell(t, "%s", in_new ? b : "-");
	table_cell(t, "%s", in_base && in_new ? c : "");
	table_cell(t, "%s", in_base && in_new ? p : in_base ? "removed" : "added");
}

static void print_header(const struct cuptrace_diff *d, FILE *f, int md)
{
	struct table t = {.md = md,
	                  .ncols = 5,
	                  .head = {"", "Base", "New", "Change", "Change %"},
	                  .align = "Lrrrr"};
	char buf[512], label[REPORT_CELL_BYTES];
	int per = d->per_name != NULL;

	report_kv(f, md, 7, "Base", d->base_path ? d->base_path : "-", 1);
	report_kv(f, md, 7, "New", d->new_path ? d->new_path : "-", 1);
	if (d->base_damage) /* compared up to the damage (read/read.c) */
		report_kv(f, md, 7, "Damaged", d->base_damage, 0);
	if (d->new_damage)
		report_kv(f, md, 7, "Damaged", d->new_damage, 0);
	if (d->group_by_base)
		report_kv(f, md, 7, "Names",
		          "grouped by base name (no template arguments or "
		          "parameters)",
		          0);
	if (d->group_by_op)
		report_kv(f, md, 7, "Names",
		          "kernels and copies grouped by the op that launched them", 0);
	if (d->group_by_line)
		report_kv(f, md, 7, "Names",
		          "kernels and copies grouped by the source line that launched them", 0);
	if (per) {
		snprintf(buf, sizeof(buf),
		         "\"%.200s\" ranges: %" PRIu64 " in base, %" PRIu64
		         " in new; counts and times below are per range",
		         d->per_name, d->base_per, d->new_per);
		report_kv(f, md, 7, "Per", buf, 0);
	}
	if (d->dev_by_position) {
		if (d->base_rank >= 0 && d->new_rank >= 0 && d->base_rank != d->new_rank)
			snprintf(buf, sizeof(buf),
			         "compared by position (first with first, ...): base is rank "
			         "%" PRId64 ", new is rank %" PRId64,
			         d->base_rank, d->new_rank);
		else
			snprintf(buf, sizeof(buf),
			         "compared by position (first with first, ...): the runs share "
			         "no GPU index");
		report_kv(f, md, 7, "GPUs", buf, 0);
	}
	fputc('\n', f);
	header_row(&t, "Wall span", d->span_ns, U_DUR, per, 1, 1);
	header_row(&t, "GPU busy", d->gpu_busy_ns, U_DUR, per, 1, 1);
	for (size_t i = 0; i < d->ndev; i++) {
		const struct cuptrace_diff_device *v = &d->dev[i];
		if (d->dev_by_position && v->in_base && v->in_new)
			snprintf(label, sizeof(label), "  %.100s (base) vs %.100s (new)", v->name,
			         v->other_name ? v->other_name : v->name);
		else
			snprintf(label, sizeof(label), "  %.100s%s%.100s", v->name,
			         v->other_name ? " / " : "", v->other_name ? v->other_name : "");
		header_row(&t, label, v->busy_ns, U_DUR, per, v->in_base, v->in_new);
	}
	header_row(&t, "Kernels", d->kernels, U_COUNT, per, 1, 1);
	header_row(&t, "Bytes copied", d->bytes_copied, U_BYTES, per, 1, 1);
	table_print(&t, f);
}

/* The names of one status that the table did not show: the first few, shortened so that they
 * stay different, then how many more; wrapped as a paragraph. */
static void list_hidden(const struct cuptrace_diff *d, int fam, enum cuptrace_diff_status st,
                        size_t shown, FILE *f, int md)
{
	char buf[REPORT_VALUE], name[REPORT_CELL_BYTES];
	const char *names[LIST_NAMES];
	char *sn[LIST_NAMES];
	unsigned num[LIST_NAMES];
	size_t n = 0, listed = 0, len = 0;

	for (size_t i = shown; i < d->nrows[fam]; i++)
		n += d->rows[fam][i].status == st;
	if (!n)
		return;
	for (size_t i = shown; i < d->nrows[fam] && listed < LIST_NAMES; i++)
		if (d->rows[fam][i].status == st)
			names[listed++] = d->rows[fam][i].name;
	int ok = !report_shorten(names, listed, LIST_NAME, sn, num);
	len = (size_t)snprintf(buf, sizeof(buf), "%zu more %s (not shown above): ", n,
	                       st == CUPTRACE_DIFF_ADDED ? "added, only in new"
	                                                 : "removed, only in base");
	for (size_t i = 0; i < listed; i++) {
		report_clean(name, sizeof(name), ok ? sn[i] : names[i], LIST_NAME + 8, md);
		if (len < sizeof(buf))
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", i ? ", " : "",
			                        name);
		if (ok)
			free(sn[i]);
	}
	if (listed < n && len < sizeof(buf))
		snprintf(buf + len, sizeof(buf) - len, ", and %zu more (--json lists them all)",
		         n - listed);
	report_para(f, md, "  ", "\n%s\n", buf);
	if (ok)
		report_legend(f, md, names, num, listed);
}

static void print_family(const struct cuptrace_diff *d, int fam, FILE *f, int md)
{
	struct table t = {
	    .md = md,
	    .ncols = 8, /* each side's mean is in --json (mean_ns); Avg % says it */
	    .head = {"Name", "Base n", "New n", "Base", "New", "Change", "Change %", "Avg %"},
	    .align = "Lrrrrrrr"};
	size_t n = d->nrows[fam], shown = n < (size_t)d->top ? n : (size_t)d->top;
	size_t added = 0, removed = 0;
	int per = d->per_name != NULL;
	char title[160], a[48], b[48];

	for (size_t i = 0; i < n; i++) {
		added += d->rows[fam][i].status == CUPTRACE_DIFF_ADDED;
		removed += d->rows[fam][i].status == CUPTRACE_DIFF_REMOVED;
	}
	int len = snprintf(title, sizeof(title), "%s", family_title[fam]);
	if (shown < n)
		len += snprintf(title + len, sizeof(title) - (size_t)len, ", top %zu of %zu", shown,
		                n);
	snprintf(title + len, sizeof(title) - (size_t)len, " (%zu added, %zu removed)", added,
	         removed);
	report_section(f, md, title);
	for (size_t i = 0; i < shown; i++) {
		const struct cuptrace_diff_row *r = &d->rows[fam][i];
		struct cuptrace_diff_value mean = {
		    r->count.base > 0 ? r->total_ns.base / r->count.base : 0,
		    r->count.new_ > 0 ? r->total_ns.new_ / r->count.new_ : 0};
		table_cell_text(&t, r->name);
		fmt_count(a, sizeof(a), r->count.base, per, 0);
		fmt_count(b, sizeof(b), r->count.new_, per, 0);
		table_cell(&t, "%s", r->status == CUPTRACE_DIFF_ADDED ? "-" : a);
		table_cell(&t, "%s", r->status == CUPTRACE_DIFF_REMOVED ? "-" : b);
		table_cell_dur(&t, (int64_t)llround(r->total_ns.base));
		table_cell_dur(&t, (int64_t)llround(r->total_ns.new_));
		fmt_dur_signed(a, sizeof(a), r->total_ns.new_ - r->total_ns.base);
		table_cell(&t, "%s", a);
		if (r->status == CUPTRACE_DIFF_COMMON)
			fmt_pct(a, sizeof(a), r->total_ns);
		table_cell(&t, "%s",
		           r->status == CUPTRACE_DIFF_ADDED     ? "added"
		           : r->status == CUPTRACE_DIFF_REMOVED ? "removed"
		                                                : a);
		if (r->status == CUPTRACE_DIFF_COMMON)
			fmt_pct(a, sizeof(a), mean);
		table_cell(&t, "%s", r->status == CUPTRACE_DIFF_COMMON ? a : "");
	}
	table_print(&t, f);
	list_hidden(d, fam, CUPTRACE_DIFF_ADDED, shown, f, md);
	list_hidden(d, fam, CUPTRACE_DIFF_REMOVED, shown, f, md);
}

static void print_failures(const struct cuptrace_diff *d, FILE *f, int md)
{
	char title[96], a[48], b[48], p[32], name[REPORT_CELL_BYTES];

	snprintf(title, sizeof(title), "Fail above %g%%", d->fail_above_pct);
	report_section(f, md, title);
	if (!d->nfail) {
		fprintf(f, "Nothing grew by more than %g%%.\n", d->fail_above_pct);
		return;
	}
	fprintf(f, "%zu grew by more than %g%%:\n%s", d->nfail, d->fail_above_pct, md ? "\n" : "");
	for (size_t i = 0; i < d->nfail; i++) {
		const struct cuptrace_diff_failure *x = &d->fail[i];
		report_dur(a, sizeof(a), (int64_t)llround(x->total_ns.base));
		report_dur(b, sizeof(b), (int64_t)llround(x->total_ns.new_));
		fmt_pct(p, sizeof(p), x->total_ns);
		if (x->family < 0)
			snprintf(name, sizeof(name), "GPU busy time");
		else
			snprintf(name, sizeof(name), "%s %.200s", family_noun[x->family], x->name);
		report_clean(name, sizeof(name), name, REPORT_NAME_MD, md);
		if (strcmp(p, "new"))
			fprintf(f, "%s%s: %s -> %s (%s%%)\n", md ? "- " : "  ", name, a, b, p);
		else
			fprintf(f, "%s%s: %s -> %s (new)\n", md ? "- " : "  ", name, a, b);
	}
}

void cuptrace_diff_print(const struct cuptrace_diff *d, FILE *f, int markdown)
{
	int md = !!markdown;
	char empty[256] = "";
	size_t len = 0;

	if (!d || !f)
		return;
	fputs(md ? "### cuptrace diff\n\n" : "cuptrace diff\n", f);
	print_header(d, f, md);
	for (int fam = 0; fam < CUPTRACE_FAM_N; fam++) {
		if (d->nrows[fam])
			print_family(d, fam, f, md);
		else if (len < sizeof(empty))
			len += (size_t)snprintf(empty + len, sizeof(empty) - len, "%s%s",
			                        len ? ", " : "", family_title[fam]);
	}
	if (len)
		fprintf(f, "\nIn neither run: %s.\n", empty);
	if (d->fail_above_pct >= 0)
		print_failures(d, f, md);
}

/* ---- JSON ---- */

static void json_num(struct cuptrace_json *w, double v, int present)
{
	if (present && isfinite(v))
		cuptrace_json_double(w, v);
	else
		cuptrace_json_null(w);
}

static void json_change(struct cuptrace_json *w, const char *key, struct cuptrace_diff_value v,
                        int in_base, int in_new)
{
	cuptrace_json_name(w, key);
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "base");
	json_num(w, v.base, in_base);
	cuptrace_json_name(w, "new");
	json_num(w, v.new_, in_new);
	cuptrace_json_name(w, "delta");
	json_num(w, v.new_ - v.base, in_base && in_new);
	cuptrace_json_name(w, "delta_pct");
	json_num(w, pct(v), in_base && in_new);
	cuptrace_json_end_object(w);
}

static void json_row(struct cuptrace_json *w, const struct cuptrace_diff_row *r)
{
	static const char *const status[] = {"common", "added", "removed"};
	int in_base = r->status != CUPTRACE_DIFF_ADDED, in_new = r->status != CUPTRACE_DIFF_REMOVED;
	struct cuptrace_diff_value mean = {in_base ? r->total_ns.base / r->count.base : 0,
	                                   in_new ? r->total_ns.new_ / r->count.new_ : 0};

	cuptrace_json_start_object(w);
	cuptrace_json_string_field(w, "name", r->name);
	cuptrace_json_string_field(w, "status", status[r->status]);
	/* A missing side is 0 slices and 0 ns: those compare; a mean of none does not. */
	json_change(w, "count", r->count, 1, 1);
	json_change(w, "total_ns", r->total_ns, 1, 1);
	json_change(w, "mean_ns", mean, in_base, in_new);
	cuptrace_json_end_object(w);
}

int cuptrace_diff_print_json(const struct cuptrace_diff *d, FILE *f)
{
	struct cuptrace_json *w;

	if (!d || !f)
		return -EINVAL;
	if (!(w = report_json_begin("cuptrace-diff/1")))
		return -ENOMEM;
	cuptrace_json_string_field(w, "base", d->base_path);
	cuptrace_json_string_field(w, "new", d->new_path);
	cuptrace_json_string_field(w, "base_damage", d->base_damage);
	cuptrace_json_string_field(w, "new_damage", d->new_damage);
	cuptrace_json_string_field(w, "group_by",
	                           d->group_by_line   ? "line"
	                           : d->group_by_op   ? "op"
	                           : d->group_by_base ? "base"
	                                              : "name");
	cuptrace_json_name(w, "per");
	if (d->per_name) {
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", d->per_name);
		cuptrace_json_int_field(w, "base_count", (int64_t)d->base_per);
		cuptrace_json_int_field(w, "new_count", (int64_t)d->new_per);
		cuptrace_json_end_object(w);
	} else {
		cuptrace_json_null(w);
	}
	cuptrace_json_name(w, "summary");
	cuptrace_json_start_object(w);
	json_change(w, "span_ns", d->span_ns, 1, 1);
	json_change(w, "gpu_busy_ns", d->gpu_busy_ns, 1, 1);
	json_change(w, "kernels", d->kernels, 1, 1);
	json_change(w, "bytes_copied", d->bytes_copied, 1, 1);
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "devices");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < d->ndev; i++) {
		const struct cuptrace_diff_device *v = &d->dev[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "name", v->name);
		cuptrace_json_string_field(w, "new_name", v->other_name);
		json_change(w, "busy_ns", v->busy_ns, v->in_base, v->in_new);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_string_field(w, "devices_matched_by",
	                           d->dev_by_position ? "position" : "index");
	cuptrace_json_name(w, "ranks");
	cuptrace_json_start_object(w);
	for (int i = 0; i < 2; i++) {
		int64_t rank = i ? d->new_rank : d->base_rank;
		cuptrace_json_name(w, i ? "new" : "base");
		if (rank >= 0)
			cuptrace_json_int(w, rank);
		else
			cuptrace_json_null(w);
	}
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "families");
	cuptrace_json_start_object(w);
	for (int fam = 0; fam < CUPTRACE_FAM_N; fam++) {
		cuptrace_json_name(w, cuptrace_family_key(fam));
		cuptrace_json_start_array(w);
		for (size_t i = 0; i < d->nrows[fam]; i++)
			json_row(w, &d->rows[fam][i]);
		cuptrace_json_end_array(w);
	}
	cuptrace_json_end_object(w);
	cuptrace_json_name(w, "fail_above");
	if (d->fail_above_pct >= 0) {
		cuptrace_json_start_object(w);
		cuptrace_json_name(w, "pct");
		cuptrace_json_double(w, d->fail_above_pct);
		cuptrace_json_name(w, "failed");
		cuptrace_json_bool(w, d->nfail > 0);
		cuptrace_json_name(w, "reasons");
		cuptrace_json_start_array(w);
		for (size_t i = 0; i < d->nfail; i++) {
			const struct cuptrace_diff_failure *x = &d->fail[i];
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(
			    w, "family", x->family < 0 ? NULL : cuptrace_family_key(x->family));
			cuptrace_json_string_field(w, "name", x->name);
			json_change(w, "total_ns", x->total_ns, 1, 1);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	} else {
		cuptrace_json_null(w);
	}
	return report_json_end(w, f, 0);
}
