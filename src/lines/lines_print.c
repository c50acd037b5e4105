/* GPU time by source line (lines.h), printed: a table in text or GitHub markdown, and the JSON
 * value of the "lines" key that `stats --json` and `analyze --json` add. Output depends only on
 * the result. */
#include "lines/lines.h"
#include "stats/report.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static double share(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

void cuptrace_lines_print(const struct cuptrace_lines *l, FILE *f, int md, int top)
{
	struct table t = {.md = md,
	                  .ncols = 5,
	                  .head = {"GPU time", "Share", "Count", "Line", "Top kernels"},
	                  .align = "rrrll"};
	char dur[64], kern[REPORT_CELL_BYTES], name[REPORT_CELL_BYTES];
	size_t n = top > 0 ? (size_t)top : 20;

	report_section(f, md, "GPU time by source line");
	if (!l->count) {
		fputs("No kernels, copies or memsets.\n", f);
		return;
	}
	if (n > l->nrows)
		n = l->nrows;
	for (size_t i = 0; i < n; i++) {
		const struct cuptrace_line_row *r = &l->rows[i];
		report_dur(dur, sizeof(dur), r->gpu_ns);
		table_cell(&t, "%s", dur);
		table_cell(&t, "%.1f%%", share(r->gpu_ns, l->gpu_ns));
		table_cell(&t, "%" PRIu64, r->count);
		table_cell_text(&t, r->line);
		size_t len = 0;
		kern[0] = 0;
		for (size_t k = 0; k < r->nwork && k < 3 && len < sizeof(kern); k++) {
			report_clean(name, sizeof(name), r->work[k].name, 50, md);
			report_dur(dur, sizeof(dur), r->work[k].gpu_ns);
			int w = snprintf(kern + len, sizeof(kern) - len, "%s%s (%s)", k ? "; " : "",
			                 name, dur);
			len += w > 0 ? (size_t)w : 0;
		}
		/* Already cleaned piece by piece: a plain cell keeps markdown's escapes. */
		table_cell(&t, "%s", kern);
	}
	table_print(&t, f);
	/* A blank line first: a line right under the rows would read as one more row. */
	fprintf(f,
	        "\n%" PRIu64 " kernels, copies and memsets; %" PRIu64
	        " with a call stack; %zu lines"
	        "%s\n",
	        l->count, l->with_stack, l->nrows, n < l->nrows ? " (top rows shown)" : "");
}

int cuptrace_lines_json(const struct cuptrace_lines *l, char **out)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	size_t len;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	cuptrace_json_start_object(w);
	cuptrace_json_int_field(w, "gpu_ns", l->gpu_ns);
	cuptrace_json_name(w, "count");
	cuptrace_json_uint(w, l->count);
	cuptrace_json_name(w, "with_stack");
	cuptrace_json_uint(w, l->with_stack);
	cuptrace_json_name(w, "rows");
	cuptrace_json_start_array(w);
	for (size_t i = 0; i < l->nrows; i++) {
		const struct cuptrace_line_row *r = &l->rows[i];
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "line", r->line);
		cuptrace_json_int_field(w, "gpu_ns", r->gpu_ns);
		cuptrace_json_name(w, "count");
		cuptrace_json_uint(w, r->count);
		cuptrace_json_name(w, "share_pct");
		cuptrace_json_double(w, share(r->gpu_ns, l->gpu_ns));
		cuptrace_json_int_field(w, "kernel_ns", r->kernel_ns);
		cuptrace_json_int_field(w, "copy_ns", r->copy_ns);
		cuptrace_json_name(w, "kernels");
		cuptrace_json_start_array(w);
		for (size_t k = 0; k < r->nwork; k++) {
			cuptrace_json_start_object(w);
			cuptrace_json_string_field(w, "name", r->work[k].name);
			cuptrace_json_name(w, "copy");
			cuptrace_json_bool(w, r->work[k].copy);
			cuptrace_json_name(w, "count");
			cuptrace_json_uint(w, r->work[k].count);
			cuptrace_json_int_field(w, "gpu_ns", r->work[k].gpu_ns);
			cuptrace_json_end_object(w);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_end_object(w);
	int err = cuptrace_json_error(w);
	const char *buf = err ? NULL : cuptrace_json_buffer(w, &len);
	/* The writer ends a top-level value with a newline: the value is embedded, so drop it. */
	while (buf && len && buf[len - 1] == '\n')
		len--;
	if (buf && !(*out = strndup(buf, len)))
		err = -ENOMEM;
	cuptrace_json_free(w);
	return err ? err : (*out ? 0 : -ENOMEM);
}

int cuptrace_lines_json_append(const char *obj, size_t len, const struct cuptrace_lines *l, FILE *f)
{
	char *v;
	int err;

	/* The reports end their object with one or two newlines. */
	while (obj && len && obj[len - 1] == '\n')
		len--;
	if (!obj || !len || obj[len - 1] != '}')
		return -EINVAL;
	if ((err = cuptrace_lines_json(l, &v)))
		return err;
	fwrite(obj, 1, len - 1, f);
	fprintf(f, ",\"lines\":%s}\n", v);
	free(v);
	return ferror(f) ? -EIO : 0;
}
