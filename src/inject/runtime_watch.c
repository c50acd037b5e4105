/* See runtime_watch.h. */
#define _GNU_SOURCE
#include "inject/runtime_watch.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/options.h"
#include "common/util.h"
#include "convert/convert.h"
#include "convert/runtime_filter.h"

#define MAX_CBID 4096

/* Calls seen per cbid; relaxed atomics: one uncontended add per call on the program's thread. */
static atomic_ullong seen[MAX_CBID];

/* Kept calls, waiting for the writer. Rare (errors, stalls, device changes), so a lock. */
static struct {
	pthread_mutex_t lock;
	CUpti_ActivityAPI *recs;
	size_t n, cap;
	uint64_t total, lost;
} kept = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The device this thread last set through cudaSetDevice; -1 before the first. */
static __thread int thread_device = -1;

_Static_assert((int)CUPTRACE_RUNTIME_FILTERED == (int)CUPTRACE_RUNTIME_MODE_FILTERED &&
                   (int)CUPTRACE_RUNTIME_WATCH == (int)CUPTRACE_RUNTIME_MODE_WATCH &&
                   (int)CUPTRACE_RUNTIME_ALL == (int)CUPTRACE_RUNTIME_MODE_ALL,
               "the settings table's --runtime values are enum cuptrace_runtime_mode's");

void cuptrace_runtime_watch_setup(CUpti_SubscriberHandle sub, enum cuptrace_runtime_mode mode)
{
	if (mode != CUPTRACE_RUNTIME_WATCH || !sub)
		return;
	uint32_t ids[256];
	size_t n = cuptrace_runtime_trivial_cbids(ids, 256);
	for (size_t i = 0; i < n; i++)
		cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, ids[i]);
}

static void keep(CUpti_CallbackId cbid, const CUpti_CallbackData *d, uint64_t start, uint64_t end,
                 int32_t ret)
{
	CUpti_ActivityAPI r;
	memset(&r, 0, sizeof(r));
	r.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	r.cbid = cbid;
	r.start = start;
	r.end = end;
	r.processId = (uint32_t)getpid();
	r.threadId = (uint32_t)syscall(SYS_gettid);
	r.correlationId = d->correlationId;
	r.returnValue = (uint32_t)ret;
	pthread_mutex_lock(&kept.lock);
	/* Bounded: a program failing the same call in a loop must not grow us forever. */
	int room = kept.n < (1u << 20) && CUPTRACE_GROW(kept.recs, kept.cap, kept.n + 1) == 0;
	kept.total++;
	if (room)
		kept.recs[kept.n++] = r;
	else
		kept.lost++;
	pthread_mutex_unlock(&kept.lock);
}

/* Every call timed by callbacks (cuptrace_runtime_watch_all): on while the in-process benchmark
 * says so. The start of the thread's call in flight (runtime calls do not nest on a thread). */
static atomic_int all_calls;
static __thread uint64_t all_start;

void cuptrace_runtime_watch_all(CUpti_SubscriberHandle sub, int on)
{
	for (uint32_t id = 1; id < MAX_CBID; id++)
		if (!cuptrace_runtime_cbid_is_trivial(id))
			cuptiEnableCallback(on ? 1 : 0, sub, CUPTI_CB_DOMAIN_RUNTIME_API, id);
	atomic_store(&all_calls, on);
}

void cuptrace_runtime_watch_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *d)
{
	if (d && cbid < MAX_CBID && atomic_load_explicit(&all_calls, memory_order_relaxed) &&
	    !cuptrace_runtime_cbid_is_trivial(cbid)) {
		uint64_t t = (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
		if (d->callbackSite == CUPTI_API_ENTER) {
			all_start = t;
			return;
		}
		keep(cbid, d, all_start ? all_start : t, t,
		     d->functionReturnValue ? *(const int32_t *)d->functionReturnValue : 0);
		all_start = 0;
		return;
	}
	/* Only the trivial calls this watch enabled: the subscriber also gets the synchronizing
	 * calls (sync_watch.c), which have their own API records and must not be counted here or
	 * kept a second time (nor have their start in correlationData overwritten). */
	if (!d || cbid >= MAX_CBID || !cuptrace_runtime_cbid_is_trivial(cbid))
		return;
	/* correlationData carries the start from the ENTER to the EXIT callback of one call. */
	if (d->callbackSite == CUPTI_API_ENTER) {
		if (d->correlationData)
			*d->correlationData = (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
		return;
	}
	uint64_t end = (uint64_t)cuptrace_now_ns(CLOCK_BOOTTIME);
	uint64_t start = d->correlationData ? *d->correlationData : end;
	atomic_fetch_add_explicit(&seen[cbid], 1, memory_order_relaxed);
	int32_t ret = d->functionReturnValue ? *(const int32_t *)d->functionReturnValue : 0;
	int changed = 0;
	if (cuptrace_runtime_cbid_is_set_device(cbid) && d->functionParams && ret == 0) {
		/* cupti.h brings the runtime API's parameter structs. */
		int dev = ((const cudaSetDevice_v3020_params *)d->functionParams)->device;
		changed = dev != thread_device;
		thread_device = dev;
	}
	if (ret != 0 || end - start >= CUPTRACE_RUNTIME_SLOW_NS || changed)
		keep(cbid, d, start, end, ret);
}

size_t cuptrace_runtime_watch_drain(CUpti_ActivityAPI **out)
{
	*out = NULL;
	pthread_mutex_lock(&kept.lock);
	size_t n = kept.n;
	if (n) {
		*out = kept.recs;
		kept.recs = NULL;
		kept.n = kept.cap = 0;
	}
	pthread_mutex_unlock(&kept.lock);
	return n;
}

uint64_t cuptrace_runtime_watch_summary(char *buf, size_t n)
{
	uint64_t total = 0;
	size_t at = 0;
	buf[0] = 0;
	/* The largest counts first: repeatedly take the biggest not yet printed (few cbids). */
	uint64_t counts[MAX_CBID];
	for (uint32_t i = 0; i < MAX_CBID; i++) {
		counts[i] = atomic_load_explicit(&seen[i], memory_order_relaxed);
		total += counts[i];
	}
	if (!total)
		return 0;
	pthread_mutex_lock(&kept.lock);
	uint64_t nkept = kept.total, lost = kept.lost;
	pthread_mutex_unlock(&kept.lock);
	/* lost: worth keeping, but the list of kept calls was at its bound; left out too. */
	char more[96] = "";
	if (lost)
		snprintf(more, sizeof(more), ", %llu more worth keeping but over the limit",
		         (unsigned long long)lost);
	at += (size_t)snprintf(buf, n,
	                       "%llu trivial runtime calls left out, %llu kept (failed, slow or "
	                       "device change)%s: ",
	                       (unsigned long long)(total - (nkept - lost)),
	                       (unsigned long long)(nkept - lost), more);
	for (int shown = 0; shown < 6 && at < n; shown++) {
		uint32_t best = 0;
		for (uint32_t i = 1; i < MAX_CBID; i++)
			if (counts[i] > counts[best])
				best = i;
		if (!counts[best])
			break;
		char nm[96];
		at += (size_t)snprintf(
		    buf + at, n - at, "%s%s %llu", shown ? ", " : "",
		    cuptrace_api_name(CUPTI_ACTIVITY_KIND_RUNTIME, best, nm, sizeof(nm)),
		    (unsigned long long)counts[best]);
		counts[best] = 0;
	}
	return total;
}
