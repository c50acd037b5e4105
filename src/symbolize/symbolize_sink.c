/* The symbolizing filter sink (symbolize.h): every stack's native frames that lack a function
 * or a file are looked up before the stack is passed on; everything else goes through as is. */
#include "format/forward.h"
#include "symbolize/symbolize.h"
#include "common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sym_sink {
	struct fwd_sink fwd;
	struct cuptrace_symbolizer *sym; /* borrowed */
	struct cuptrace_frame *frames;   /* scratch */
	size_t cap;
};

static int sy_stack(struct cuptrace_sink *sk, const struct cuptrace_stack *st)
{
	struct sym_sink *s = (struct sym_sink *)sk;
	if (s->fwd.err || !s->fwd.inner->ops->stack)
		return s->fwd.err;
	if (CUPTRACE_GROW(s->frames, s->cap, st->nframes ? st->nframes : 1))
		return fwd_fail(&s->fwd, -ENOMEM);
	for (size_t i = 0; i < st->nframes; i++) {
		struct cuptrace_frame *f = &s->frames[i];
		struct cuptrace_symbol y;
		*f = st->frames[i];
		if (f->kind != CUPTRACE_FRAME_NATIVE || (f->function && f->file) ||
		    cuptrace_symbolize(s->sym, f->module, f->build_id, f->rel_pc, &y))
			continue;
		if (!f->function)
			f->function = y.function;
		if (!f->file) {
			f->file = y.file;
			f->line = y.line;
		}
	}
	struct cuptrace_stack d = *st;
	d.frames = s->frames;
	return fwd_stack(sk, &d);
}

static void sy_destroy(struct cuptrace_sink *sk)
{
	struct sym_sink *s = (struct sym_sink *)sk;
	if (!s)
		return;
	cuptrace_sink_destroy(s->fwd.inner);
	free(s->frames);
	free(s);
}

static const struct cuptrace_sink_ops sym_ops = {
    .name = "symbolize",
    .begin = fwd_begin,
    .track = fwd_track,
    .slice = fwd_slice,
    .instant = fwd_instant,
    .counter = fwd_counter,
    .stack = sy_stack,
    .sample = fwd_sample,
    .meta = fwd_meta,
    .finish = fwd_finish,
    .destroy = sy_destroy,
};

struct cuptrace_sink *cuptrace_symbolize_sink_new(struct cuptrace_symbolizer *sym,
                                                  struct cuptrace_sink *inner)
{
	struct sym_sink *s = inner ? calloc(1, sizeof(*s)) : NULL;
	if (!s) {
		cuptrace_sink_destroy(inner);
		return NULL;
	}
	s->fwd.base.ops = &sym_ops;
	s->fwd.inner = inner;
	s->sym = sym;
	return &s->fwd.base;
}
