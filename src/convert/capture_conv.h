/* A capture's META items, kept until its first records, the converter made from them and the
 * replay's callbacks into it: the bridge every reader of captures needs (read/read.c for whole
 * files, top/top_source.c for a growing one). Not thread-safe: one reader thread. */
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
/* A capture replayed into a converter: its META items kept until the first item that needs
 * the converter, which is then made from them (the trace's pid, process, host, clocks and id),
 * names resolved through the reader. Fill sink, reader and opts, zero the rest; one thread. */
struct cuptrace_capture_conv {
	struct cuptrace_sink *sink;             /* borrowed: where the converter's events go */
	struct cuptrace_capture_reader *reader; /* borrowed: the capture's strings */
	struct cuptrace_convert_opts opts;
	struct cuptrace_capture_meta meta;
	struct cuptrace_converter *conv; /* owned; NULL until made */
};

/* Makes the converter if it is not made yet: 0, or -ENOMEM (which stops a replay: its caller
 * reports it). */
int cuptrace_capture_conv_start(struct cuptrace_capture_conv *c);
/* The replay's callbacks over c (ops->ctx = c), every item to the converter: META kept before
 * the records and passed on after them (what the run learnt at its end), thread names, records,
 * drops, NVTX start/end ids, GPU metrics. A reader that does more on an item calls the one
 * below from its own callback. */
void cuptrace_capture_conv_ops(struct cuptrace_capture_conv *c, struct cuptrace_capture_ops *ops);
/* The dropped callback: ctx is the struct cuptrace_capture_conv. */
int cuptrace_capture_conv_dropped(void *ctx, uint64_t cupti, uint64_t cuptrace);
/* Frees the converter (unfinished: finish it first to keep its events) and the META items. */
void cuptrace_capture_conv_free(struct cuptrace_capture_conv *c);

#endif
