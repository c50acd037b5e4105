/* CUPTI's subscriber callback (application threads), and the ids of NVTX start/end ranges it
 * collects for the writer thread (see collect_state.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect_state.h"
#include "collect/gpumetrics.h"
#include "collect/runtime_watch.h"

/* Ids of NVTX start/end ranges (nvtxRangeStart*, nvtxDomainRangeStartEx). CUPTI's marker
 * records look the same for push/pop and start/end ranges; the ids returned by the start calls
 * tell them apart, so start/end ranges go on tracks of their own. Filled on application
 * threads, drained by the writer. */
static struct {
	pthread_mutex_t lock;
	uint64_t *ids;
	size_t n, cap;
	uint64_t total;
} startend = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void nvtx_callback(const CUpti_NvtxData *nd)
{
	if (!nd->functionReturnValue)
		return;
	uint64_t rid = *(const uint64_t *)nd->functionReturnValue; /* nvtxRangeId_t */
	if (!rid)
		return;
	pthread_mutex_lock(&startend.lock);
	if (startend.n == startend.cap) {
		size_t cap = startend.cap ? startend.cap * 2 : 256;
		uint64_t *n = realloc(startend.ids, cap * sizeof(uint64_t));
		if (n) {
			startend.ids = n;
			startend.cap = cap;
		}
	}
	if (startend.n < startend.cap) {
		startend.ids[startend.n++] = rid;
		startend.total++;
	}
	pthread_mutex_unlock(&startend.lock);
}

/* The one subscriber callback CUPTI allows: NVTX start calls, and the trivial runtime calls
 * watched while their records are off (runtime_watch.h). Application threads. */
void CUPTIAPI collect_subscriber_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                          const void *data)
{
	if (!data)
		return;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API)
		cuptrace_runtime_watch_callback(id, data);
	else if (d == CUPTI_CB_DOMAIN_NVTX)
		nvtx_callback(data);
	else if (d == CUPTI_CB_DOMAIN_RESOURCE)
		cuptrace_gm_on_callback(d, id, data);
}

void collect_startend_drain(void)
{
	pthread_mutex_lock(&startend.lock);
	size_t n = startend.n;
	uint64_t *ids = n ? malloc(n * sizeof(uint64_t)) : NULL;
	if (ids)
		memcpy(ids, startend.ids, n * sizeof(uint64_t));
	startend.n = 0;
	pthread_mutex_unlock(&startend.lock);
	if (!ids)
		return;
	if (sess.cap)
		cuptrace_capture_nvtx_startend(sess.cap, ids, n);
	else if (sess.conv)
		cuptrace_converter_nvtx_startend(sess.conv, ids, n);
	free(ids);
}

void collect_startend_reset(void)
{
	pthread_mutex_lock(&startend.lock);
	startend.n = 0;
	pthread_mutex_unlock(&startend.lock);
}
