/* A sink that hands every event on to an inner sink, for the analysis sinks that watch a stream
 * on its way to another sink (src/compare/profile.c: to a stats sink; src/merge/merge_plan.c: the
 * same). A wrapper embeds struct fwd_sink first, points its ops at the fwd_* functions it does not
 * override, and calls them from those it does. Errors are sticky, as every sink's. Used by the
 * analyses, share and symbolize. */
#ifndef CUPTRACE_FORMAT_FORWARD_H
#define CUPTRACE_FORMAT_FORWARD_H

#include "format/event.h"

struct fwd_sink {
	struct cuptrace_sink base;
	struct cuptrace_sink *inner; /* owned by the wrapper, which destroys it */
	int err;                     /* first error, sticky */
};

/* Records err (if it is the first) and returns the sticky error. */
int fwd_fail(struct fwd_sink *s, int err);
int fwd_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info);
int fwd_track(struct cuptrace_sink *s, const struct cuptrace_track *t);
int fwd_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e);
int fwd_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e);
int fwd_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e);
/* Hands the stack on if the inner sink takes stacks. */
int fwd_stack(struct cuptrace_sink *s, const struct cuptrace_stack *st);
/* Hands the host stack sample on if the inner sink takes samples. */
int fwd_sample(struct cuptrace_sink *s, const struct cuptrace_sample *e);
int fwd_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n);
int fwd_finish(struct cuptrace_sink *s);

#endif
