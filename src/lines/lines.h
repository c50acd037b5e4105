/* GPU time by source line (`--group-by line` of stats, diff and analyze, issue 27): each kernel,
 * copy and memset is attributed to the "user line" of the call stack at its launch, the innermost
 * frame in the user's own code. A forwarding sink collects stacks and GPU work; at finish (or at
 * cuptrace_lines_next_file, for several files analyzed together) each work's stack is found (its
 * own stack_id; else its launch's, through the flow that ends on it or its correlation id) and
 * its time added to the line's row.
 *
 * Not user code (built in): Python frames whose file is under site-packages or dist-packages,
 * the Python standard library (a path holding /lib/python3.N/), "<frozen ...>", "<string>" and
 * "<built-in>"; native frames whose module's base name starts with libcuda, libcudart, libcupti,
 * libcuptrace, libc., libc-, libpthread, libstdc++, libgcc_s, ld-linux, libtorch, libc10,
 * libcublas, libcudnn, libnccl or libpython, or whose module is under site-packages or
 * dist-packages; frames whose file or module matches a skip pattern (fnmatch). A frame matching
 * a keep pattern is user code whatever the rules say. Where every frame is skipped, the innermost
 * frame is the line.
 *
 * Ownership: a result owns its strings (cuptrace_lines_free, safe on a zeroed struct and twice);
 * the sink copies the patterns. Threading: one thread at a time. */
#ifndef CUPTRACE_LINES_LINES_H
#define CUPTRACE_LINES_LINES_H

#include "format/event.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The row of GPU work without a known stack. */
#define CUPTRACE_LINES_NO_STACK "(no stack)"

struct cuptrace_lines_opts {
	const char *const *skip; /* --skip-frames patterns */
	size_t nskip;
	const char *const *keep; /* --keep-frames patterns */
	size_t nkeep;
};

/* One kernel (or copy/memset kind) under a line. */
struct cuptrace_line_work {
	char *name;
	int copy; /* 1: a copy or memset, 0: a kernel */
	uint64_t count;
	int64_t gpu_ns;
};

struct cuptrace_line_row {
	char *line; /* "file:line function", "module+0xRELPC", or CUPTRACE_LINES_NO_STACK */
	uint64_t count;
	int64_t gpu_ns;
	uint64_t kernel_count, copy_count; /* copies and memsets */
	int64_t kernel_ns, copy_ns;
	struct cuptrace_line_work *work; /* by gpu_ns desc, then name */
	size_t nwork;
};

struct cuptrace_lines {
	uint64_t count; /* kernels, copies and memsets */
	int64_t gpu_ns; /* their durations summed (not a union: the share's denominator) */
	uint64_t with_stack;
	struct cuptrace_line_row *rows; /* by gpu_ns desc, then count desc, then line */
	size_t nrows;
};

/* The key of a frame, as rows show it, into buf (always NUL-terminated). */
void cuptrace_frame_key(const struct cuptrace_frame *f, char *buf, size_t cap);
/* 1 if the frame is the user's own code under the rules above. */
int cuptrace_frame_is_user(const struct cuptrace_frame *f, const struct cuptrace_lines_opts *o);
/* The index of the stack's user line (innermost user frame; the innermost frame if none is);
 * -1 for an empty stack. */
long cuptrace_stack_user_frame(const struct cuptrace_stack *st,
                               const struct cuptrace_lines_opts *o);

/* A sink that passes everything on to inner (owned: destroyed with it) and fills *out at
 * finish (zeroed here; out must outlive the sink). opts may be NULL. NULL and errno on failure
 * (inner is then destroyed). */
struct cuptrace_sink *cuptrace_lines_sink_new(struct cuptrace_lines *out,
                                              const struct cuptrace_lines_opts *opts,
                                              struct cuptrace_sink *inner);
/* Between two files replayed into one sink: stack, flow and correlation ids start over. */
void cuptrace_lines_next_file(struct cuptrace_sink *sink);
void cuptrace_lines_free(struct cuptrace_lines *l);

/* A section "GPU time by source line": the top rows (0: 20) with GPU time, share, count and the
 * top three kernels of each. markdown: GitHub table. */
void cuptrace_lines_print(const struct cuptrace_lines *l, FILE *f, int markdown, int top);
/* The value of the JSON key "lines", as a malloc'd string into *out: {gpu_ns, count, with_stack,
 * rows: [{line, gpu_ns, count, share_pct, kernel_ns, copy_ns, kernels: [{name, copy, count,
 * gpu_ns}]}]}, every row and every kernel. 0 or -ENOMEM. */
int cuptrace_lines_json(const struct cuptrace_lines *l, char **out);
/* The JSON object in obj (ending "}" and newlines, as the reports print it) with `"lines":` and the
 * value above added as its last key, to f. 0 or a negative errno. */
int cuptrace_lines_json_append(const char *obj, size_t len, const struct cuptrace_lines *l,
                               FILE *f);

#endif
