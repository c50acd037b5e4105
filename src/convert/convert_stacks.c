/* Call stacks in the converter (issue 27): the STACK and STACK_CORR records (convert/stackrec.h)
 * are kept, and every slice whose correlation id has a stack is given its stack id: the API
 * call and, through the same id, the GPU work it launched. A stack goes to the sink once,
 * before the first slice that names it. The bottom layer: called by convert.c (the records) and
 * convert_core.c (the slices); calls nothing above it. */
#include "convert/conv_state.h"
#include "convert/stackrec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Correlation id -> stack id, direct-mapped on the id's low bits: ids are handed out in order,
 * and a GPU record arrives within the GPU's queue depth of launches of its API call, so an entry
 * is overwritten only by a call 2^18 later. 4 MiB, made on the first stack only. */
#define CORRSTK_BITS 18
#define CORRSTK_N    (1u << CORRSTK_BITS)

struct conv_corrstk {
	uint32_t corr;
	uint32_t stack; /* index + 1 into c->stk */
};

struct conv_stack {
	uint64_t id;
	int emitted;
	size_t size;
	void *rec; /* a copy of its STACK record */
};

static int oom(struct cuptrace_converter *c)
{
	if (!c->err)
		c->err = -ENOMEM;
	return c->err;
}

static int add_stack(struct cuptrace_converter *c, const void *rec, size_t size)
{
	struct cuptrace_stack st;
	/* Checked once here, so emitting it later cannot fail on its bytes. */
	if (cuptrace_stackrec_decode(rec, size, &st, &c->stk_frames, &c->stk_frames_cap)) {
		c->counts.stacks_bad++;
		return 0;
	}
	int created;
	uint64_t *slot = cuptrace_u64map_put(&c->stk_idx, st.id, &created);
	if (!slot)
		return oom(c);
	if (!created)
		return 0; /* a repeat (a capture cut and appended): the first stands */
	void *copy = malloc(size);
	if (!copy || CUPTRACE_GROW(c->stk, c->stk_cap, c->nstk + 1)) {
		free(copy);
		cuptrace_u64map_del(&c->stk_idx, st.id);
		return oom(c);
	}
	memcpy(copy, rec, size);
	c->stk[c->nstk] = (struct conv_stack){.id = st.id, .size = size, .rec = copy};
	*slot = ++c->nstk;
	c->counts.stacks++;
	return 0;
}

static int add_corr(struct cuptrace_converter *c, const void *rec, size_t size)
{
	const uint64_t *pairs;
	size_t n;
	if (cuptrace_stackrec_corr(rec, size, &pairs, &n)) {
		c->counts.stacks_bad++;
		return 0;
	}
	if (!c->corrstk && !(c->corrstk = calloc(CORRSTK_N, sizeof(*c->corrstk))))
		return oom(c);
	for (size_t i = 0; i < n; i++) {
		uint32_t corr = (uint32_t)pairs[2 * i];
		uint64_t *v = cuptrace_u64map_get(&c->stk_idx, pairs[2 * i + 1]);
		if (!corr || !v) {
			c->counts.stacks_bad++;
			continue;
		}
		c->corrstk[corr & (CORRSTK_N - 1)] = (struct conv_corrstk){corr, (uint32_t)*v};
	}
	return 0;
}

/* Sends stack s to the sink if not yet sent: 1 if the sink has it, 0 if not (a sink without
 * stacks, or a record that does not decode: nothing may name it then). */
static int emit_stack(struct cuptrace_converter *c, struct conv_stack *s)
{
	if (!s->emitted) {
		s->emitted = -1;
		struct cuptrace_stack st;
		if (!c->sink->ops->stack ||
		    cuptrace_stackrec_decode(s->rec, s->size, &st, &c->stk_frames,
		                             &c->stk_frames_cap))
			return 0;
		int r = c->sink->ops->stack(c->sink, &st);
		if (r && !c->err)
			c->err = r;
		s->emitted = 1;
	}
	return s->emitted > 0;
}

/* Sends the stack with this id to the sink if not yet sent (convert_samples.c): 1 if the sink
 * has it, 0 if not (unknown id, a sink without stacks, a record that does not decode). */
int conv_stacks_emit(struct cuptrace_converter *c, uint64_t stack)
{
	uint64_t *v = cuptrace_u64map_get(&c->stk_idx, stack);
	return v && emit_stack(c, &c->stk[*v - 1]);
}

int conv_stacks_record(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	size_t size = cuptrace_stackrec_bytes(r);
	if ((uint32_t)r->kind == CUPTRACE_REC_STACK)
		return add_stack(c, r, size);
	return add_corr(c, r, size);
}

uint64_t conv_stacks_for(struct cuptrace_converter *c, uint64_t corr)
{
	if (!c->corrstk || !corr || corr > UINT32_MAX)
		return 0;
	const struct conv_corrstk *e = &c->corrstk[corr & (CORRSTK_N - 1)];
	if (e->corr != corr || !e->stack)
		return 0;
	struct conv_stack *s = &c->stk[e->stack - 1];
	return emit_stack(c, s) ? s->id : 0;
}

void conv_stacks_free(struct cuptrace_converter *c)
{
	for (size_t i = 0; i < c->nstk; i++)
		free(c->stk[i].rec);
	free(c->stk);
	free(c->stk_frames);
	free(c->corrstk);
	cuptrace_u64map_free(&c->stk_idx);
}
