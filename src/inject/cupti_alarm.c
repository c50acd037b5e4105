/* The evidence behind record's "CUPTI delivered no records" warning (cupti_alarm.h). */
#include "inject/cupti_alarm.h"

#include <stdatomic.h>

static atomic_ullong contexts_created;

int cuptrace_cupti_alarm(const struct cuptrace_cupti_evidence *e)
{
	/* Without a context no kernel, copy or memset can have run: an empty trace is the truth,
	 * not a sign of records taken by another client. */
	return e && !e->records && !e->buffers && e->contexts > 0;
}

void cuptrace_cupti_alarm_note_context(void)
{
	atomic_fetch_add(&contexts_created, 1);
}

uint64_t cuptrace_cupti_alarm_contexts(void)
{
	return atomic_load(&contexts_created);
}
