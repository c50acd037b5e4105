/* Bounded buffer queue between CUPTI's threads and the writer (see queue.h). A mutex is
 * enough: a buffer is a few MB, so pushes come a few times a second at most. */
#include "inject/queue.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int cuptrace_queue_init(struct cuptrace_queue *q, size_t cap)
{
	q->items = calloc(cap ? cap : 1, sizeof(*q->items));
	if (!q->items)
		return -ENOMEM;
	q->cap = cap ? cap : 1;
	q->head = q->len = 0;
	q->closed = 0;
	q->high_water = 0;
	pthread_mutex_init(&q->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&q->cond, &ca);
	pthread_condattr_destroy(&ca);
	return 0;
}

void cuptrace_queue_destroy(struct cuptrace_queue *q)
{
	if (!q->items)
		return;
	for (size_t i = 0; i < q->len; i++)
		free(q->items[(q->head + i) % q->cap].buf);
	free(q->items);
	q->items = NULL;
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
}

void cuptrace_queue_reopen(struct cuptrace_queue *q)
{
	pthread_mutex_lock(&q->lock);
	for (size_t i = 0; i < q->len; i++)
		free(q->items[(q->head + i) % q->cap].buf);
	q->head = q->len = 0;
	q->closed = 0;
	q->high_water = 0;
	pthread_mutex_unlock(&q->lock);
}

int cuptrace_queue_push(struct cuptrace_queue *q, struct cuptrace_qitem it)
{
	int ret = 0;
	pthread_mutex_lock(&q->lock);
	if (q->closed) {
		ret = -EPIPE;
	} else if (q->len == q->cap) {
		ret = -ENOSPC;
	} else {
		q->items[(q->head + q->len) % q->cap] = it;
		q->len++;
		if (q->len > q->high_water)
			q->high_water = q->len;
		pthread_cond_signal(&q->cond);
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}

int cuptrace_queue_pop(struct cuptrace_queue *q, struct cuptrace_qitem *it, int timeout_ms)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	int ret = 0;
	pthread_mutex_lock(&q->lock);
	while (!q->len && !q->closed) {
		if (pthread_cond_timedwait(&q->cond, &q->lock, &until) == ETIMEDOUT)
			break;
	}
	if (q->len) {
		*it = q->items[q->head];
		q->head = (q->head + 1) % q->cap;
		q->len--;
		ret = 1;
	} else if (q->closed) {
		ret = -EPIPE;
	}
	pthread_mutex_unlock(&q->lock);
	return ret;
}

void cuptrace_queue_close(struct cuptrace_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->closed = 1;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}
