/* A sink that hands every event to two sinks (otlp.h): the trace file and the OTLP sender.
 * The first one's errors are the tee's; the second one's only stop the second, so a
 * collector problem never costs the file. */
#include <errno.h>
#include <stdlib.h>

#include "format/otlp.h"

struct tee_sink {
	struct cuptrace_sink base;
	struct cuptrace_sink *a, *b;
	int err_a, err_b;
};

static struct tee_sink *to_tee(struct cuptrace_sink *s)
{
	return (struct tee_sink *)s;
}

/* Calls op on both sinks that are still well; returns a's error. */
#define TEE(op, ...)                                                                               \
	do {                                                                                       \
		struct tee_sink *t = to_tee(s);                                                    \
		if (t->a && !t->err_a)                                                             \
			t->err_a = t->a->ops->op(t->a, __VA_ARGS__);                               \
		if (t->b && !t->err_b)                                                             \
			t->err_b = t->b->ops->op(t->b, __VA_ARGS__);                               \
		return t->err_a;                                                                   \
	} while (0)

static int tee_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info)
{
	TEE(begin, info);
}

static int tee_track(struct cuptrace_sink *s, const struct cuptrace_track *e)
{
	TEE(track, e);
}

static int tee_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	TEE(slice, e);
}

/* Optional in each sink: one without stacks ignores them (and slices' stack ids). */
static int tee_stack(struct cuptrace_sink *s, const struct cuptrace_stack *st)
{
	struct tee_sink *t = to_tee(s);
	if (t->a && !t->err_a && t->a->ops->stack)
		t->err_a = t->a->ops->stack(t->a, st);
	if (t->b && !t->err_b && t->b->ops->stack)
		t->err_b = t->b->ops->stack(t->b, st);
	return t->err_a;
}

static int tee_sample(struct cuptrace_sink *s, const struct cuptrace_sample *e)
{
	struct tee_sink *t = to_tee(s);
	if (t->a && !t->err_a && t->a->ops->sample)
		t->err_a = t->a->ops->sample(t->a, e);
	if (t->b && !t->err_b && t->b->ops->sample)
		t->err_b = t->b->ops->sample(t->b, e);
	return t->err_a;
}

static int tee_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	TEE(instant, e);
}

static int tee_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	TEE(counter, e);
}

static int tee_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	TEE(meta, m, n);
}

static int tee_tick(struct cuptrace_sink *s)
{
	struct tee_sink *t = to_tee(s);
	if (t->a && !t->err_a && t->a->ops->tick)
		t->err_a = t->a->ops->tick(t->a);
	if (t->b && !t->err_b && t->b->ops->tick)
		t->err_b = t->b->ops->tick(t->b);
	return t->err_a;
}

static int tee_finish(struct cuptrace_sink *s)
{
	struct tee_sink *t = to_tee(s);
	/* Each sink's finish is called once, even after an error: it closes its output. */
	int ra = t->a ? t->a->ops->finish(t->a) : 0;
	int rb = t->b ? t->b->ops->finish(t->b) : 0;
	(void)rb;
	return t->err_a ? t->err_a : ra;
}

static void tee_destroy(struct cuptrace_sink *s)
{
	struct tee_sink *t = to_tee(s);
	cuptrace_sink_destroy(t->a);
	cuptrace_sink_destroy(t->b);
	free(t);
}

static const struct cuptrace_sink_ops tee_ops = {
    .name = "tee",
    .begin = tee_begin,
    .track = tee_track,
    .slice = tee_slice,
    .stack = tee_stack,
    .sample = tee_sample,
    .instant = tee_instant,
    .counter = tee_counter,
    .meta = tee_meta,
    .tick = tee_tick,
    .finish = tee_finish,
    .destroy = tee_destroy,
};

struct cuptrace_sink *cuptrace_tee_sink_new(struct cuptrace_sink *a, struct cuptrace_sink *b)
{
	struct tee_sink *t = calloc(1, sizeof(*t));
	if (!t) {
		cuptrace_sink_destroy(a);
		cuptrace_sink_destroy(b);
		errno = ENOMEM;
		return NULL;
	}
	t->base.ops = &tee_ops;
	t->a = a;
	t->b = b;
	return &t->base;
}
