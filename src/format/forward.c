/* Forwarding sink operations (see forward.h). */
#include "format/forward.h"

static struct fwd_sink *to_fwd(struct cuptrace_sink *s)
{
	return (struct fwd_sink *)s;
}

int fwd_fail(struct fwd_sink *s, int err)
{
	if (!s->err)
		s->err = err;
	return s->err;
}

/* Every forwarder: nothing after the first error, and the inner sink's error becomes ours. */
#define FORWARD(op, ...)                                                                           \
	do {                                                                                       \
		struct fwd_sink *f = to_fwd(s);                                                    \
		int err = f->err ? f->err : f->inner->ops->op(f->inner, __VA_ARGS__);              \
		return err ? fwd_fail(f, err) : 0;                                                 \
	} while (0)

int fwd_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info)
{
	FORWARD(begin, info);
}

int fwd_track(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	FORWARD(track, t);
}

int fwd_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	FORWARD(slice, e);
}

int fwd_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	FORWARD(instant, e);
}

int fwd_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	FORWARD(counter, e);
}

int fwd_stack(struct cuptrace_sink *s, const struct cuptrace_stack *st)
{
	if (!to_fwd(s)->inner->ops->stack)
		return to_fwd(s)->err; /* the inner sink ignores stacks */
	FORWARD(stack, st);
}

int fwd_sample(struct cuptrace_sink *s, const struct cuptrace_sample *e)
{
	if (!to_fwd(s)->inner->ops->sample)
		return to_fwd(s)->err; /* the inner sink drops samples */
	FORWARD(sample, e);
}

int fwd_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	FORWARD(meta, m, n);
}

int fwd_finish(struct cuptrace_sink *s)
{
	struct fwd_sink *f = to_fwd(s);
	int err = f->err ? f->err : f->inner->ops->finish(f->inner);
	return err ? fwd_fail(f, err) : 0;
}
