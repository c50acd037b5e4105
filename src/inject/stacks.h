/* Call stacks at CUDA launches (issue 27), taken on the application's threads: the Python
 * frames (inject/pystack.h) and/or the native return addresses (inject/nstack.h) of the
 * calling thread, interned so that each distinct stack is described once (a STACK record,
 * convert/stackrec.h) and a launch costs a hash lookup and a (correlation id, stack id) pair.
 *
 * Memory is bounded: at most STACKS_MAX distinct stacks and STACKS_MAX_WORDS words of keys;
 * past either, launches with a new stack get none and are counted (cuptrace_stacks_missed).
 * No CUPTI here (collect_callbacks.c calls in), so tests load it without a GPU.
 * Threading: any thread; one lock inside. */
#ifndef CUPTRACE_INJECT_STACKS_H
#define CUPTRACE_INJECT_STACKS_H

#include <stddef.h>
#include <stdint.h>

#define STACKS_MAX       (1u << 16)
#define STACKS_MAX_WORDS (1u << 21)

/* mode: CUPTRACE_STACKS_* bits (common/options.h). 0, or -ENOMEM. Python is looked for here
 * and again at each take until found (Python may be loaded after CUDA). */
int cuptrace_stacks_init(int mode);
/* The calling thread's stack: its id (new ones are queued as STACK records), 0 if it has
 * none (no frames, or the tables are full). */
uint64_t cuptrace_stacks_take(void);
/* Queues (correlation id, stack id) for the writer. */
void cuptrace_stacks_note(uint32_t corr, uint64_t stack);
/* Writer thread: takes what was queued. *recs: STACK records back to back (each 8-aligned,
 * sizes in them), *pairs: (corr, id) pairs. The caller frees both. 0, or -ENOMEM (nothing
 * taken). */
int cuptrace_stacks_drain(uint8_t **recs, size_t *len, uint64_t **pairs, size_t *npairs);
uint64_t cuptrace_stacks_count(void);
uint64_t cuptrace_stacks_missed(void);
/* Forgets everything (a new session; tests). */
void cuptrace_stacks_reset(void);

#endif
