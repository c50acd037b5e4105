/* Host stack samples (issue 46, inject/sampler.c): each sample on its thread's track, its stack
 * sent to the sink first. Above convert_core.c (the thread tracks) and convert_stacks.c (the
 * stacks); called by convert.c. Kept apart from convert_stacks.c, which convert_core.c calls. */
#include "convert/conv_state.h"
#include "convert/stackrec.h"

/* A sample naming a stack not received is counted as bad. */
int conv_samples_record(struct cuptrace_converter *c, const CUpti_Activity *rec)
{
	size_t size = cuptrace_stackrec_bytes(rec);
	const struct cuptrace_stackrec_sample *sm;
	size_t n;
	if (cuptrace_stackrec_samples(rec, size, &sm, &n)) {
		c->counts.stacks_bad++;
		return 0;
	}
	if (!c->sink->ops->sample || !c->sink->ops->stack)
		return 0; /* a sink without samples (Chrome JSON): dropped */
	for (size_t i = 0; i < n && !c->err; i++) {
		if (!sm[i].tid || !cuptrace_u64map_get(&c->stk_idx, sm[i].stack)) {
			c->counts.stacks_bad++;
			continue;
		}
		if (!conv_stacks_emit(c, sm[i].stack))
			continue;
		struct cuptrace_sample e = {
		    .track_uuid = conv_thread_track(c, sm[i].tid),
		    .ts = conv_rel(c, sm[i].ts),
		    .pid = c->pid,
		    .tid = (int32_t)sm[i].tid,
		    .stack_id = sm[i].stack,
		};
		if (c->err)
			break;
		int r = c->sink->ops->sample(c->sink, &e);
		if (r && !c->err)
			c->err = r;
		c->counts.samples++;
	}
	return c->err;
}
