/* A capture's META items, kept until its first records, and the converter made from them: the
 * bridge every reader of captures needs (read/read.c for whole files, top/top_source.c for a
 * growing one). Not thread-safe: one reader thread. */
#ifndef CUPTRACE_CONVERT_CAPTURE_CONV_H
#define CUPTRACE_CONVERT_CAPTURE_CONV_H

#include <stddef.h>

#include "convert/capture.h"
#include "convert/convert.h"

#define CUPTRACE_CAPTURE_META_MAX 64

/* Owns its strings (cuptrace_capture_meta_free). */
struct cuptrace_capture_meta {
	char *keys[CUPTRACE_CAPTURE_META_MAX], *vals[CUPTRACE_CAPTURE_META_MAX];
	size_t n;
};

/* Keeps a copy of one META item; past CUPTRACE_CAPTURE_META_MAX items they are left out. 0, or
 * -ENOMEM (which stops a replay: its caller reports it). */
int cuptrace_capture_meta_add(struct cuptrace_capture_meta *m, const char *k, const char *v);
void cuptrace_capture_meta_free(struct cuptrace_capture_meta *m);
/* The converter for a capture with these META items (the trace's pid, process, host, clocks and
 * id from them), names resolved through the reader. NULL when out of memory. */
struct cuptrace_converter *cuptrace_capture_converter_new(const struct cuptrace_capture_meta *m,
                                                          struct cuptrace_sink *sink,
                                                          const struct cuptrace_convert_opts *o,
                                                          struct cuptrace_capture_reader *r);

#endif
