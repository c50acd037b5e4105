/* Bounded FIFO of completed CUPTI buffers, from CUPTI's callback threads to the writer thread.
 * push never blocks (the CUPTI thread must return at once): a full queue refuses the buffer and
 * the caller counts its records as dropped. Thread-safe: many producers, one consumer. */
#ifndef CUPTRACE_INJECT_QUEUE_H
#define CUPTRACE_INJECT_QUEUE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct cuptrace_qitem {
	uint8_t *buf; /* owned by whoever holds the item; free() it */
	size_t valid;
};

struct cuptrace_queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct cuptrace_qitem *items;
	size_t cap, head, len;
	int closed;
	uint64_t high_water;
};

int cuptrace_queue_init(struct cuptrace_queue *q, size_t cap);
void cuptrace_queue_destroy(struct cuptrace_queue *q);
/* Empties (freeing what it holds) and opens a closed queue again, for the next session. */
void cuptrace_queue_reopen(struct cuptrace_queue *q);
/* 0, or -ENOSPC if full, -EPIPE if closed (the item stays the caller's). */
int cuptrace_queue_push(struct cuptrace_queue *q, struct cuptrace_qitem it);
/* Waits up to timeout_ms for an item. 1: got one; 0: timed out; -EPIPE: closed and empty. */
int cuptrace_queue_pop(struct cuptrace_queue *q, struct cuptrace_qitem *it, int timeout_ms);
/* Wakes the consumer; pop returns -EPIPE once the queue is empty. */
void cuptrace_queue_close(struct cuptrace_queue *q);

#endif
