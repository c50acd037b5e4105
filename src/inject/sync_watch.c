/* See sync_watch.h. */
#define _GNU_SOURCE
#include "inject/sync_watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

/* The synchronizing calls and the type of record each makes (as CUPTI's: a query is an event
 * or stream synchronization whose returnValue may say "not ready"). */
struct sync_call {
	uint32_t cbid;
	uint8_t type;       /* CUpti_ActivitySynchronizationType */
	uint8_t per_thread; /* a _ptsz call: stream 0 is the thread's default stream */
};

#define T_EVENT  CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE
#define T_WAIT   CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT
#define T_STREAM CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE
#define T_CTX    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE

static const struct sync_call rt_calls[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, T_CTX, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaThreadSynchronize_v3020, T_CTX, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, T_STREAM, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000, T_STREAM, 1},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020, T_STREAM, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000, T_STREAM, 1},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, T_EVENT, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, T_EVENT, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, T_WAIT, 0},
    {CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000, T_WAIT, 1},
};
static const struct sync_call drv_calls[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, T_CTX, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2, T_CTX, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, T_STREAM, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, T_STREAM, 1},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamQuery, T_STREAM, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz, T_STREAM, 1},
    {CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize, T_EVENT, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuEventQuery, T_EVENT, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent, T_WAIT, 0},
    {CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz, T_WAIT, 1},
};
#define NRT  (sizeof(rt_calls) / sizeof(rt_calls[0]))
#define NDRV (sizeof(drv_calls) / sizeof(drv_calls[0]))

/* Every one of these calls takes the stream first, or the event first, or the stream then the
 * event (runtime and driver alike: generated_cuda_runtime_api_meta.h, cuda.h). */
struct first_two {
	void *a, *b;
};

/* cudaErrorNotReady and CUDA_ERROR_NOT_READY. */
#define NOT_READY 600

static const struct sync_call *find(int runtime, uint32_t cbid)
{
	const struct sync_call *t = runtime ? rt_calls : drv_calls;
	size_t n = runtime ? NRT : NDRV;
	for (size_t i = 0; i < n; i++)
		if (t[i].cbid == cbid)
			return &t[i];
	return NULL;
}

int cuptrace_sync_watch_is_sync_call(CUpti_ActivityKind kind, uint32_t cbid)
{
	if (kind != CUPTI_ACTIVITY_KIND_RUNTIME && kind != CUPTI_ACTIVITY_KIND_DRIVER)
		return 0;
	return find(kind == CUPTI_ACTIVITY_KIND_RUNTIME, cbid) != NULL;
}

static atomic_int active = 1;

void cuptrace_sync_watch_active(int on)
{
	atomic_store_explicit(&active, on, memory_order_relaxed);
}

static void sync_callbacks(CUpti_SubscriberHandle sub, uint32_t on)
{
	for (size_t i = 0; i < NRT; i++)
		cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_RUNTIME_API, rt_calls[i].cbid);
	for (size_t i = 0; i < NDRV; i++)
		cuptiEnableCallback(on, sub, CUPTI_CB_DOMAIN_DRIVER_API, drv_calls[i].cbid);
}

void cuptrace_sync_watch_setup(CUpti_SubscriberHandle sub)
{
	sync_callbacks(sub, 1);
}

void cuptrace_sync_watch_teardown(CUpti_SubscriberHandle sub)
{
	sync_callbacks(sub, 0);
}

/* ---- application threads ---- */

/* Records made, waiting for the writer; event numbers. Under lock: one synchronizing call
 * takes it once (twice for an event's first). */
static struct {
	pthread_mutex_t lock;
	CUpti_ActivitySynchronization2 *recs;
	size_t n, cap;
	struct cuptrace_u64map events; /* handle -> our number */
	uint32_t next_event;
} made = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t boottime(void)
{
	return (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
}

/* Set before CUPTI is attached (tests only change it). */
static uint64_t (*now_ns)(void) = boottime;

void cuptrace_sync_watch_clock(uint64_t (*now)(void))
{
	now_ns = now ? now : boottime;
}

/* Depth of synchronizing runtime calls on this thread: their driver calls are passed over. */
static __thread int rt_depth;

static uint32_t event_number(const void *ev)
{
	if (!ev)
		return CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	int created = 0;
	uint64_t *v = cuptrace_u64map_put(&made.events, (uint64_t)(uintptr_t)ev, &created);
	if (!v)
		return CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	if (created)
		*v = ++made.next_event;
	return (uint32_t)*v;
}

static void emit(const struct sync_call *c, const CUpti_CallbackData *cd, uint64_t start,
                 uint64_t end, uint32_t ret)
{
	CUpti_ActivitySynchronization2 r;
	memset(&r, 0, sizeof(r));
	r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	r.type = (CUpti_ActivitySynchronizationType)c->type;
	r.start = start;
	r.end = end;
	r.correlationId = cd->correlationId;
	r.streamId = r.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	r.cudaEventSyncId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	r.returnValue = ret;
	if (cd->context)
		cuptiGetContextId(cd->context, &r.contextId);
	const struct first_two *p = cd->functionParams;
	const void *stream = NULL, *event = NULL;
	if (p && c->type == T_STREAM)
		stream = p->a;
	else if (p && c->type == T_EVENT)
		event = p->a;
	else if (p && c->type == T_WAIT)
		stream = p->a, event = p->b;
	uint32_t sid;
	if ((c->type == T_STREAM || c->type == T_WAIT) && cd->context &&
	    cuptiGetStreamIdEx(cd->context, (CUstream)(uintptr_t)stream, c->per_thread, &sid) ==
	        CUPTI_SUCCESS)
		r.streamId = sid;
	pthread_mutex_lock(&made.lock);
	if (event)
		r.cudaEventId = event_number(event);
	/* Bounded: a writer that stopped taking must not grow us forever. */
	if (made.n < (1u << 20) && CUPTRACE_GROW(made.recs, made.cap, made.n + 1) == 0)
		made.recs[made.n++] = r;
	pthread_mutex_unlock(&made.lock);
}

int cuptrace_sync_watch_callback(CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const CUpti_CallbackData *cd)
{
	int runtime = d == CUPTI_CB_DOMAIN_RUNTIME_API;
	const struct sync_call *c = find(runtime, id);
	if (!c)
		return 0;
	if (!runtime && rt_depth > 0)
		return 1; /* inside a synchronizing runtime call: its record is the runtime's */
	/* correlationData carries the start from the ENTER to the EXIT callback of one call. */
	if (cd->callbackSite == CUPTI_API_ENTER) {
		if (runtime)
			rt_depth++;
		if (cd->correlationData)
			*cd->correlationData = now_ns();
		return 1;
	}
	uint64_t end = now_ns();
	if (runtime && rt_depth > 0)
		rt_depth--;
	uint64_t start = cd->correlationData && *cd->correlationData ? *cd->correlationData : end;
	uint32_t ret = cd->functionReturnValue ? *(const uint32_t *)cd->functionReturnValue : 0;
	/* CUPTI records a query that is not ready yet, and no call that failed. */
	if ((ret == 0 || ret == NOT_READY) && atomic_load_explicit(&active, memory_order_relaxed))
		emit(c, cd, start, end, ret);
	return 1;
}

/* ---- the writer thread ---- */

/* Records held until their call's API record has gone to the converter. ready: a map from
 * correlation id to 1 (held) or 2 (its API record went). early: ids of synchronizing calls
 * whose API record came before our record did (a flush from another thread can hand over a
 * buffer between CUPTI writing the record and our EXIT callback). */
#define HOLD_MAX (1u << 16)
#define EARLY_N  1024
static struct {
	CUpti_ActivitySynchronization2 *recs;
	size_t n, cap;
	struct cuptrace_u64map state;
	uint32_t early[EARLY_N];
	size_t early_at;
	size_t nready;
} held;

static int early_has(uint32_t corr)
{
	for (size_t i = 0; i < EARLY_N; i++)
		if (held.early[i] == corr)
			return 1;
	return 0;
}

void cuptrace_sync_watch_take(void)
{
	pthread_mutex_lock(&made.lock);
	CUpti_ActivitySynchronization2 *recs = made.recs;
	size_t n = made.n;
	made.recs = NULL;
	made.n = made.cap = 0;
	pthread_mutex_unlock(&made.lock);
	for (size_t i = 0; i < n; i++) {
		if (CUPTRACE_GROW(held.recs, held.cap, held.n + 1))
			break;
		int created = 0;
		uint64_t *v = cuptrace_u64map_put(&held.state, recs[i].correlationId, &created);
		if (!v)
			break;
		*v = early_has(recs[i].correlationId) ? 2 : 1;
		held.nready += *v == 2;
		held.recs[held.n++] = recs[i];
	}
	free(recs);
}

int cuptrace_sync_watch_pending(void)
{
	return held.n > 0;
}

void cuptrace_sync_watch_api_seen(const CUpti_ActivityAPI *a)
{
	if (!cuptrace_sync_watch_is_sync_call(a->kind, a->cbid))
		return;
	uint64_t *v = held.n ? cuptrace_u64map_get(&held.state, a->correlationId) : NULL;
	if (v) {
		held.nready += *v == 1;
		*v = 2;
		return;
	}
	held.early[held.early_at++ % EARLY_N] = a->correlationId;
}

size_t cuptrace_sync_watch_ready(CUpti_ActivitySynchronization2 **out, int all)
{
	*out = NULL;
	/* Past the bound the oldest go as they are: their calls' records are not coming (a
	 * driver call made inside a runtime call that is not a synchronization, whose own record
	 * CUPTI does not write). */
	size_t forced = held.n > HOLD_MAX ? held.n - HOLD_MAX / 2 : 0;
	if (!held.n || (!all && !held.nready && !forced))
		return 0;
	CUpti_ActivitySynchronization2 *o = malloc(held.n * sizeof(*o));
	if (!o)
		return 0;
	size_t k = 0, m = 0;
	for (size_t i = 0; i < held.n; i++) {
		uint64_t *v = cuptrace_u64map_get(&held.state, held.recs[i].correlationId);
		if (all || i < forced || !v || *v == 2) {
			o[k++] = held.recs[i];
			cuptrace_u64map_del(&held.state, held.recs[i].correlationId);
		} else {
			held.recs[m++] = held.recs[i];
		}
	}
	held.n = m;
	held.nready = 0;
	if (!k) {
		free(o);
		return 0;
	}
	*out = o;
	return k;
}

void cuptrace_sync_watch_reset(void)
{
	pthread_mutex_lock(&made.lock);
	free(made.recs);
	made.recs = NULL;
	made.n = made.cap = 0;
	cuptrace_u64map_free(&made.events);
	cuptrace_u64map_init(&made.events);
	made.next_event = 0;
	pthread_mutex_unlock(&made.lock);
	cuptrace_sync_watch_active(1);
	free(held.recs);
	cuptrace_u64map_free(&held.state);
	memset(&held, 0, sizeof(held));
	cuptrace_u64map_init(&held.state);
}
