/* When `record` may say "CUPTI delivered no records ... another CUPTI client may have taken
 * them": only with evidence that the program did CUDA work, so that a process that loaded CUDA
 * and did nothing with it (a launcher, a data-loader worker) raises no false alarm.
 *
 * Threading: cuptrace_cupti_alarm_note_context is called from CUPTI's callback on application
 * threads (an atomic counter); the decision is a pure function of what the session counted. */
#ifndef CUPTRACE_INJECT_CUPTI_ALARM_H
#define CUPTRACE_INJECT_CUPTI_ALARM_H

#include <stdint.h>

struct cuptrace_cupti_evidence {
	uint64_t records;  /* activity records CUPTI delivered */
	uint64_t buffers;  /* completed activity buffers */
	uint64_t contexts; /* CUDA contexts created, seen through the resource callback */
};

/* 1: warn (CUDA work was done, a context was created, and no record came); else 0. */
int cuptrace_cupti_alarm(const struct cuptrace_cupti_evidence *e);

/* The resource callback saw a context created; and how many it saw. */
void cuptrace_cupti_alarm_note_context(void);
uint64_t cuptrace_cupti_alarm_contexts(void);

#endif
