/* Reports (`cuptrace stats`, `cuptrace diff`): tables rendered as aligned text or as GitHub
 * markdown, "label: value" lines, durations in the unit that reads best, and the frame of the
 * JSON reports. Private to the analyses (stats, compare, lines). Output goes to a FILE the caller
 * owns; one thread at a time per table or writer. */
#ifndef CUPTRACE_STATS_REPORT_H
#define CUPTRACE_STATS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define REPORT_MAX_COLS   12
#define REPORT_CELL_BYTES 256
#define REPORT_NAME_TEXT  60   /* bytes of a name in a plain-text table */
#define REPORT_NAME_MD    120  /* ... in a markdown table */
#define REPORT_VALUE      2000 /* bytes of a value on a "label: value" line */

/* A table rendered as GitHub markdown or as aligned text. Cells are fixed buffers so that a
 * failed allocation only shortens the table (and says so). Fill it row by row, ncols cells a
 * row, then print it once: table_print frees the cells. */
struct table {
	int md;
	size_t ncols;
	const char *head[REPORT_MAX_COLS];
	const char *align; /* 'l' or 'r' per column */
	char (*cells)[REPORT_CELL_BYTES];
	size_t ncells, cap;
	int oom;
};

__attribute__((format(printf, 2, 3))) void table_cell(struct table *t, const char *fmt, ...);
/* Untrusted text (a name) as a cell: see report_clean. */
void table_cell_text(struct table *t, const char *s);
void table_print(struct table *t, FILE *f);

/* Copies untrusted text (names may hold any bytes) for one line: control characters become '?',
 * '|' is escaped in markdown, and text beyond max bytes is cut at a UTF-8 boundary and marked. */
void report_clean(char *dst, size_t cap, const char *s, size_t max, int md);
/* A section title: "\n#### title\n\n" in markdown, "\ntitle:\n" in text. */
void report_section(FILE *f, int md, const char *title);
/* One "label: value" line, the value from column w in text; code: show the value as code in
 * markdown (command lines). The value is cleaned (report_clean). */
void report_kv(FILE *f, int md, int w, const char *label, const char *value, int code);
/* Display width: UTF-8 continuation bytes take no column. */
size_t report_width(const char *s);
/* "123 ns", "1.500 us", "2.250 ms", "1.000 s". */
void report_dur(char *buf, size_t cap, int64_t ns);

/* JSON reports: one object on one line, built in memory (format/json_writer.h escapes every
 * string). report_json_begin opens the object and writes its "schema" key; NULL on no memory.
 * report_json_end closes it and, unless err (an error the caller met while filling it) or the
 * writer failed, writes it to f; it frees w and returns 0 or a negative errno (-EIO: f). */
struct cuptrace_json *report_json_begin(const char *schema);
int report_json_end(struct cuptrace_json *w, FILE *f, int err);

#endif
