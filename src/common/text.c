/* Text for people: tables, units, short names, wrapped prose (see text.h). */
#define _GNU_SOURCE /* vasprintf */
#include "common/text.h"
#include "common/util.h"

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
		report_clean(c, REPORT_CELL_BYTES, s ? s : "", REPORT_CELL_BYTES - 8, t->md);
}

void table_cell_dur(struct table *t, int64_t ns)
{
	char *c = next_cell(t);
	if (c)
		report_dur(c, REPORT_CELL_BYTES, ns);
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

/* Column widths of t's text, header included. */
static void widths(const struct table *t, size_t nrows, size_t *w)
{
	for (size_t c = 0; c < t->ncols; c++) {
		w[c] = report_width(t->head[c]);
		for (size_t r = 0; r < nrows; r++) {
			size_t cw = report_width(t->cells[r * t->ncols + c]);
			w[c] = cw > w[c] ? cw : w[c];
		}
	}
}

/* Text wider than CUPTRACE_TEXT_WIDTH: shortens the widest name column ('L') to fit, keeping
 * different names different (report_shorten); names still alike get numbers, and their full
 * text is kept in *legend (one "[k] name\n" line each) for under the table. */
static void fit(struct table *t, size_t nrows, size_t *w, char **legend, size_t *llen)
{
	for (int round = 0; round < REPORT_MAX_COLS; round++) {
		size_t total = 2 * (t->ncols - 1), wide = SIZE_MAX;
		for (size_t c = 0; c < t->ncols; c++) {
			total += w[c];
			if (t->align[c] == 'L' && w[c] > 24 && (wide == SIZE_MAX || w[c] > w[wide]))
				wide = c;
		}
		if (total <= CUPTRACE_TEXT_WIDTH || wide == SIZE_MAX)
			return;
		size_t to = w[wide] - (total - CUPTRACE_TEXT_WIDTH);
		to = to < 24 ? 24 : to; /* below, names no longer read: the line stays longer */
		const char **names = calloc(nrows + 1, sizeof(*names));
		char **out = calloc(nrows + 1, sizeof(*out));
		unsigned *num = calloc(nrows + 1, sizeof(*num));
		if (!names || !out || !num) { /* no memory: leave it wide */
			free(names);
			free(out);
			free(num);
			return;
		}
		for (size_t r = 0; r < nrows; r++)
			names[r] = t->cells[r * t->ncols + wide];
		if (report_shorten(names, nrows, to - 4, out, num)) {
			free(names);
			free(out);
			free(num);
			return;
		}
		for (size_t r = 0; r < nrows; r++) {
			char *line = NULL;
			if (num[r] && asprintf(&line, "[%u] %s\n", num[r], names[r]) > 0) {
				size_t n = strlen(line);
				char *grown = realloc(*legend, *llen + n + 1);
				if (grown) {
					memcpy(grown + *llen, line, n + 1);
					*legend = grown;
					*llen += n;
				}
			}
			free(line);
		}
		for (size_t r = 0; r < nrows; r++) {
			snprintf(t->cells[r * t->ncols + wide], REPORT_CELL_BYTES, "%s", out[r]);
			free(out[r]);
		}
		free(names);
		free(out);
		free(num);
		widths(t, nrows, w); /* a header wider than "to" keeps its column wider */
	}
}

void table_print(struct table *t, FILE *f)
{
	size_t w[REPORT_MAX_COLS] = {0}, nrows = t->ncols ? t->ncells / t->ncols : 0, llen = 0;
	const char *row[REPORT_MAX_COLS];
	char *legend = NULL;

	widths(t, nrows, w);
	if (!t->md)
		fit(t, nrows, w, &legend, &llen);
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
	if (legend)
		fputs(legend, f);
	free(legend);
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
		char ind[64];
		int n = w > 0 && w < (int)sizeof(ind) ? w : 0;
		memset(ind, ' ', (size_t)n);
		ind[n] = 0;
		report_para(f, 0, ind, "%-*s %s\n", w - 1, lab, buf);
	}
}

void report_dur(char *buf, size_t cap, int64_t ns)
{
	double a = ns < 0 ? -(double)ns : (double)ns;
	static const char *const unit[] = {"us", "ms", "s"};
	double v = (double)ns;
	int u = -1;
	if (a < 1e3) {
		snprintf(buf, cap, "%" PRId64 " ns", ns);
		return;
	}
	/* Four significant digits: as exact as a trace's clocks are, and 8 columns at most
	 * below 1000 s. */
	for (a /= 1e3, v /= 1e3, u = 0; a >= 999.95 && u < 2; a /= 1e3, v /= 1e3, u++)
		;
	snprintf(buf, cap, a < 9.9995 ? "%.3f %s" : a < 99.995 ? "%.2f %s" : "%.1f %s", v, unit[u]);
}

void report_dur_signed(char *buf, size_t cap, int64_t ns)
{
	char d[48];
	report_dur(d, sizeof(d), ns < 0 ? (ns == INT64_MIN ? INT64_MAX : -ns) : ns);
	snprintf(buf, cap, "%s%s", ns > 0 ? "+" : ns < 0 ? "-" : "", d);
}

void report_dur_exact(char *buf, size_t cap, int64_t ns, int sign)
{
	static const struct {
		uint64_t scale;
		int digits;
		const char *unit;
	} u[] = {{1000000000, 9, "s"}, {1000000, 6, "ms"}, {1000, 3, "us"}, {1, 0, "ns"}};
	uint64_t a = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
	size_t k = 0;
	while (k + 1 < sizeof(u) / sizeof(u[0]) && a < u[k].scale)
		k++;
	char frac[16] = "";
	uint64_t rest = a % u[k].scale;
	if (rest) {
		snprintf(frac, sizeof(frac), ".%0*" PRIu64, u[k].digits, rest);
		for (size_t n = strlen(frac); n > 1 && frac[n - 1] == '0'; n--)
			frac[n - 1] = 0;
	}
	snprintf(buf, cap, "%s%" PRIu64 "%s %s",
	         ns < 0           ? "-"
	         : sign && ns > 0 ? "+"
	                          : "",
	         a / u[k].scale, frac, u[k].unit);
}

void report_bytes(char *buf, size_t cap, uint64_t b)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int u = -1;
	while (v >= 1024.0 && u < 3) {
		v /= 1024.0;
		u++;
	}
	if (u < 0)
		snprintf(buf, cap, "%" PRIu64 " B", b);
	else
		snprintf(buf, cap,
		         v < 10    ? "%.2f %s"
		         : v < 100 ? "%.1f %s"
		                   : "%.0f %s",
		         v, unit[u]);
}

void report_count(char *buf, size_t cap, uint64_t n, const char *one, const char *many)
{
	snprintf(buf, cap, "%" PRIu64 " %s", n, n == 1 ? one : many);
}

static size_t width_n(const char *s, size_t n)
{
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		w += ((unsigned char)s[i] & 0xc0) != 0x80;
	return w;
}

/* Prints s[0, len) wrapped at CUPTRACE_TEXT_WIDTH: words (runs without a space) never split;
 * leading spaces kept; each wrapped line starts with indent. */
static void wrap_line(FILE *f, const char *s, size_t len, const char *indent)
{
	size_t col = 0, i = 0, ind = report_width(indent), gap = 0;
	while (i < len && s[i] == ' ') {
		fputc(' ', f);
		i++;
		col++;
	}
	while (i < len) {
		size_t j = i;
		while (j < len && s[j] != ' ')
			j++;
		size_t ww = width_n(s + i, j - i);
		if (col > ind && col + gap + ww > CUPTRACE_TEXT_WIDTH) {
			fputc('\n', f);
			fputs(indent, f);
			col = ind;
		} else {
			for (size_t k = 0; k < gap;
			     k++) /* the spaces as they were (aligned values) */
				fputc(' ', f);
			col += gap;
		}
		fwrite(s + i, 1, j - i, f);
		col += ww;
		gap = 0;
		while (j < len && s[j] == ' ')
			j++, gap++;
		i = j;
	}
}

void report_para(FILE *f, int md, const char *indent, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (md) {
		fputs(s, f);
		free(s);
		return;
	}
	for (const char *p = s; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		wrap_line(f, p, len, indent ? indent : "");
		if (!nl)
			break;
		fputc('\n', f);
		p = nl + 1;
	}
	free(s);
}

/* The length of the common prefix of a and b. */
static size_t common_prefix(const char *a, const char *b)
{
	size_t i = 0;
	while (a[i] && a[i] == b[i])
		i++;
	return i;
}

/* Moves a byte offset back to the start of a UTF-8 character. */
static size_t utf8_start(const char *s, size_t i)
{
	while (i && ((unsigned char)s[i] & 0xc0) == 0x80)
		i--;
	return i;
}

/* The short form of s (len > max): its first bytes, "...", then from a little before the byte
 * where it first differs from its nearest neighbour (d), "..." where it is cut again. */
static char *shorten_one(const char *s, size_t max, size_t d)
{
	size_t len = strlen(s);
	char *o = malloc(max + 16);
	if (!o)
		return NULL;
	if (d + 8 <= max - 3 || max < 20) { /* the difference shows in the head */
		size_t h = utf8_start(s, max - 3);
		memcpy(o, s, h);
		memcpy(o + h, "...", 4);
		return o;
	}
	size_t h = utf8_start(s, max / 3);
	size_t room = max - h - 6, from = d > 8 ? d - 8 : 0;
	if (from < h)
		from = h;
	if (len - from <= room + 3) /* the rest fits: show the end whole */
		from = len - room - 3;
	from = utf8_start(s, from);
	size_t take = len - from <= room + 3 ? len - from : utf8_start(s + from, room);
	size_t n = 0;
	memcpy(o, s, h);
	n = h;
	memcpy(o + n, "...", 3);
	n += 3;
	memcpy(o + n, s + from, take);
	n += take;
	if (from + take < len) {
		memcpy(o + n, "...", 3);
		n += 3;
	}
	o[n] = 0;
	return o;
}

int report_shorten(const char *const *names, size_t n, size_t max, char **out, unsigned *legend)
{
	unsigned k = 0;
	for (size_t i = 0; i < n; i++) {
		out[i] = NULL;
		legend[i] = 0;
	}
	for (size_t i = 0; i < n; i++) {
		const char *s = names[i] ? names[i] : "";
		if (strlen(s) <= max) {
			out[i] = strdup(s);
		} else {
			size_t d = 0;
			for (size_t j = 0; j < n; j++)
				if (j != i && names[j] && strcmp(names[j], s)) {
					size_t p = common_prefix(names[j], s);
					d = p > d ? p : d;
				}
			out[i] = shorten_one(s, max, d);
		}
		if (!out[i])
			goto oom;
	}
	/* Two different names that still read the same: number them for the legend. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++) {
			const char *a = names[i] ? names[i] : "", *b = names[j] ? names[j] : "";
			if (strcmp(out[i], out[j]) || !strcmp(a, b))
				continue;
			if (!legend[i])
				legend[i] = ++k;
			if (!legend[j])
				legend[j] = ++k;
		}
	for (size_t i = 0; i < n; i++) {
		if (!legend[i])
			continue;
		char *o = malloc(strlen(out[i]) + 16);
		if (!o)
			goto oom;
		sprintf(o, "%s [%u]", out[i], legend[i]);
		free(out[i]);
		out[i] = o;
	}
	return 0;
oom:
	for (size_t i = 0; i < n; i++) {
		free(out[i]);
		out[i] = NULL;
	}
	return -ENOMEM;
}

void report_legend(FILE *f, int md, const char *const *names, const unsigned *legend, size_t n)
{
	char buf[REPORT_VALUE + 16];
	for (size_t i = 0; i < n; i++) {
		if (!legend[i])
			continue;
		report_clean(buf, sizeof(buf), names[i] ? names[i] : "", REPORT_VALUE, md);
		fprintf(f, "%s[%u] %s\n", md ? "- " : "", legend[i], buf);
	}
}
