/* Text for people, shared by every command that prints a report (stats, diff, lines, analyze,
 * merge): tables as aligned text or GitHub markdown, numbers in the unit that fits their size
 * with the unit beside them, names shortened so that different names stay different, prose
 * wrapped at CUPTRACE_TEXT_WIDTH columns, and one wording for a value a trace lacks. Output goes
 * to a FILE the caller owns; one thread at a time per table. */
#ifndef CUPTRACE_COMMON_TEXT_H
#define CUPTRACE_COMMON_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CUPTRACE_TEXT_WIDTH   100 /* columns of a text line (names that cannot be cut aside) */
#define CUPTRACE_NOT_RECORDED "not recorded" /* the one way to say a trace lacks a value */

#define REPORT_MAX_COLS   12
#define REPORT_CELL_BYTES 256
#define REPORT_NAME_TEXT  60   /* bytes of a name in a plain-text table */
#define REPORT_NAME_MD    120  /* ... in a markdown table */
#define REPORT_VALUE      2000 /* bytes of a value on a "label: value" line */

/* A table rendered as GitHub markdown or as aligned text: every cell of a column starts at the
 * same column (right-aligned columns end at the same one). A text table wider than
 * CUPTRACE_TEXT_WIDTH has its widest 'L' column shortened (report_shorten: different names stay
 * different; those that would not are numbered and listed in full under the table). Cells are fixed
 * buffers so that a failed allocation only shortens the table (and says so). Fill it row by row,
 * ncols cells a row, then print it once: table_print frees the cells. */
struct table {
	int md;
	size_t ncols;
	const char *head[REPORT_MAX_COLS];
	const char *align; /* per column: 'l' left, 'r' right, 'L' left and a name that may be
	                    * shortened so that a text line fits CUPTRACE_TEXT_WIDTH */
	char (*cells)[REPORT_CELL_BYTES];
	size_t ncells, cap;
	int oom;
};

__attribute__((format(printf, 2, 3))) void table_cell(struct table *t, const char *fmt, ...);
/* Untrusted text (a name) as a cell, cleaned (report_clean) and kept whole up to a cell. */
void table_cell_text(struct table *t, const char *s);
/* A duration as a cell, in the unit that fits it (report_dur). */
void table_cell_dur(struct table *t, int64_t ns);
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
/* "123 ns", "1.500 us", "22.50 ms", "451.6 ms", "1.000 s": the unit that fits, four significant
 * digits (at most 8 columns below 1000 s). */
void report_dur(char *buf, size_t cap, int64_t ns);
/* The same, signed: "+1.500 us", "-2.250 ms", "0 ns". */
void report_dur_signed(char *buf, size_t cap, int64_t ns);
/* Exact, for offsets a user checks to the nanosecond: the unit that fits and every digit that is
 * not a trailing zero ("+6 us", "-43.5 us", "1.999999 s"); sign: a "+" before a positive one. */
void report_dur_exact(char *buf, size_t cap, int64_t ns, int sign);
/* "512 B", "1.5 KiB", "2.25 MiB", "3.00 GiB". */
void report_bytes(char *buf, size_t cap, uint64_t bytes);
/* "1 copy", "2 copies": n and the noun that goes with it (one for 1, many otherwise). */
void report_count(char *buf, size_t cap, uint64_t n, const char *one, const char *many);

/* Prose: prints the formatted text as paragraphs. In text, words are wrapped at
 * CUPTRACE_TEXT_WIDTH columns; wrapped lines start with indent (the first line with what the
 * text begins with; a word longer than a line stays whole). In markdown the text is printed as
 * it is. Newlines in the text are kept. */
__attribute__((format(printf, 4, 5))) void report_para(FILE *f, int md, const char *indent,
                                                       const char *fmt, ...);

/* Short forms of n names, each at most max bytes (plus "..."), that stay different where the
 * names differ: a name too long keeps its start, then the part where it first differs from the
 * nearest other name. Where two short forms would still read the same, each gets " [k]" and
 * legend[i] is set to k (1, 2, ... in order), else 0: print the full names under the table
 * (report_legend). out[i] is malloc'd (free each); 0, or -ENOMEM (then every out[i] is NULL). */
int report_shorten(const char *const *names, size_t n, size_t max, char **out, unsigned *legend);
/* The legend of report_shorten: one line "[k] full name" per numbered name. */
void report_legend(FILE *f, int md, const char *const *names, const unsigned *legend, size_t n);

#endif
