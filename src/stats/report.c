/* Tables and "label: value" lines for the reports of stats, diff and lines (see report.h). */
#include "stats/report.h"
#include "common/util.h"
#include "format/json_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char *next_cell(struct table *t)
{
	void *p =
	    t->oom ? NULL : cuptrace_grow(t->cells, &t->cap, t->ncells + 1, REPORT_CELL_BYTES);
	if (!p) {
		t->oom = 1;
		return NULL;
	}
	t->cells = p;
	return t->cells[t->ncells++];
}

void table_cell(struct table *t, const char *fmt, ...)
{
	char *c = next_cell(t);
	va_list ap;

	if (!c)
		return;
	va_start(ap, fmt);
	vsnprintf(c, REPORT_CELL_BYTES, fmt, ap);
	va_end(ap);
}

void report_clean(char *dst, size_t cap, const char *s, size_t max, int md)
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

void table_cell_text(struct table *t, const char *s)
{
	char *c = next_cell(t);
	if (c)
		report_clean(c, REPORT_CELL_BYTES, s ? s : "",
		             t->md ? REPORT_NAME_MD : REPORT_NAME_TEXT, t->md);
}

size_t report_width(const char *s)
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
		size_t gap = w[c] - report_width(s);
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

void table_print(struct table *t, FILE *f)
{
	size_t w[REPORT_MAX_COLS] = {0}, nrows = t->ncols ? t->ncells / t->ncols : 0;
	const char *row[REPORT_MAX_COLS];

	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = report_width(t->head[c]);
		for (size_t r = 0; r < nrows; r++) {
			size_t cw = report_width(t->cells[r * t->ncols + c]);
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

void report_section(FILE *f, int md, const char *title)
{
	fprintf(f, md ? "\n#### %s\n\n" : "\n%s:\n", title);
}

void report_kv(FILE *f, int md, int w, const char *label, const char *value, int code)
{
	char buf[REPORT_VALUE + 16], lab[80];

	report_clean(buf, sizeof(buf), value, REPORT_VALUE, 0);
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

void report_dur(char *buf, size_t cap, int64_t ns)
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

struct cuptrace_json *report_json_begin(const char *schema)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	if (w) {
		cuptrace_json_start_object(w);
		cuptrace_json_string_field(w, "schema", schema);
	}
	return w;
}

int report_json_end(struct cuptrace_json *w, FILE *f, int err)
{
	size_t len;

	cuptrace_json_end_object(w);
	if (!err)
		err = cuptrace_json_error(w);
	const char *buf = err ? NULL : cuptrace_json_buffer(w, &len);
	if (buf && fwrite(buf, 1, len, f) != len)
		err = -EIO;
	cuptrace_json_free(w);
	return err;
}
