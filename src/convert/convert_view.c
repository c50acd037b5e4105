/* Where ui.perfetto.dev opens a recorded or converted trace (src/format/TIMELINE.md): at the
 * first kernel's lead-in, when start-up fills the first fifth of the trace. The converter's
 * writer thread alone calls these (conv_emit_slice, conv_meta_finish). */
#include "convert/conv_state.h"
#include "common/saturate.h"

#include <stdlib.h>
#include <string.h>

struct conv_span {
	int64_t ts, end;
};

/* The copies and memsets kept while looking for the lead-in: those that started before the
 * earliest kernel seen so far. A model's loading copies a few thousand tensors; past this many
 * the lead-in is not looked for (the first kernel is the start), so memory stays bounded. */
#define LEAD_MAX (1u << 16)

void conv_view_init(struct cuptrace_converter *c)
{
	c->view_work = INT64_MAX;
}

void conv_view_free(struct cuptrace_converter *c)
{
	free(c->lead);
	c->lead = NULL;
	c->nlead = c->lead_cap = 0;
}

static int is_cat(const char *cat, const char *a, const char *b)
{
	return cat && (!strcmp(cat, a) || !strcmp(cat, b));
}

void conv_view_note(struct cuptrace_converter *c, const struct cuptrace_slice *s)
{
	int64_t end = s->dur > 0 ? sat_add(s->ts, s->dur) : s->ts;
	if (end > c->view_end)
		c->view_end = end;
	if (is_cat(s->category, "kernel", "graph")) {
		if (s->ts < c->view_work)
			c->view_work = s->ts;
		return;
	}
	/* GPU work arrives stream by stream, so a copy may come after a later kernel of another
	 * stream: keep every copy that starts before the earliest kernel so far; the later ones
	 * are left out at the end. */
	if (!is_cat(s->category, "memcpy", "memset") || s->ts >= c->view_work || c->lead_full)
		return;
	if (c->nlead == LEAD_MAX || CUPTRACE_GROW(c->lead, c->lead_cap, c->nlead + 1)) {
		c->lead_full = 1; /* out of room or memory: the first kernel is the start */
		return;
	}
	c->lead[c->nlead++] = (struct conv_span){s->ts, end};
}

static int by_end_desc(const void *a, const void *b)
{
	const struct conv_span *x = a, *y = b;
	return x->end < y->end ? 1 : x->end > y->end ? -1 : 0;
}

/* The first kernel's lead-in: the copies and memsets that run up to it, each followed by GPU work
 * within a quarter of what follows the kernel (the input copies of a small program, a training
 * loop's first batch), reaching back at most as far as what follows (the lead-in never takes
 * more than half the first screen). A longer GPU-idle stretch is start-up: the copies before it
 * (a model loaded seconds before the loop) stay out. Then the rule of event.h: a view start
 * only where the lead-in begins after the first fifth of the trace, which starts at relative 0
 * (its "trace info" instant). */
int64_t conv_view_start(struct cuptrace_converter *c)
{
	int64_t work = c->view_work, hi = c->view_end;
	if (work == INT64_MAX || hi <= work)
		return 0;
	int64_t after = hi - work, gap = after / 4, limit = work - after, from = work;
	if (!c->lead_full && c->nlead) {
		qsort(c->lead, c->nlead, sizeof(*c->lead), by_end_desc);
		for (size_t i = 0; i < c->nlead; i++) {
			const struct conv_span *l = &c->lead[i];
			if (l->ts >= work)
				continue; /* came before a kernel that started earlier */
			if (l->end < from - gap)
				break; /* sorted by end: every one left ends before this gap too */
			if (l->ts >= limit && l->ts < from)
				from = l->ts;
		}
	}
	return cuptrace_view_start_rule(0, hi, from);
}
