/* Call stacks at launch-type CUDA calls (issue 27), the CUPTI side: which API callbacks are on
 * (kernel and graph launches, copies, memsets, synchronizing calls), the stack taken at a call's
 * ENTER on the calling thread (inject/stacks.h), and the hand-over of the stacks and their
 * (correlation id, stack id) pairs to the writer, as records in the stream (convert/stackrec.h).
 *
 * A runtime call reaches the driver's (cudaLaunchKernel -> cuLaunchKernel): the GPU work carries
 * the runtime call's correlation id (shared/reference/cupti.md §4), so the stack is taken once,
 * at the runtime call, and the driver calls inside it are passed over; a driver call made by the
 * program itself gets its own. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject/collect.h"
#include "inject/collect_state.h"
#include "inject/nsample.h"
#include "inject/nstack.h"
#include "inject/pyread.h"
#include "inject/sampler.h"
#include "inject/stacks.h"
#include "inject/sync_watch.h"
#include "common/log.h"
#include "common/options.h"
#include "convert/stackrec.h"

#define MAX_CBID 1024

static uint8_t rt_on[MAX_CBID], drv_on[MAX_CBID];
static int stacks_mode;
/* Host stack samples (issue 46, inject/sampler.h): the launch-type callbacks are on for them
 * too, to learn which threads call CUDA (the sampler's targets). */
static int sample_hz, sample_all;
/* cuptrace_stacks(0/1), from any application thread: paused, the callbacks of launch-type calls
 * are switched off in CUPTI (a paused run costs what a run without --stacks costs). Set under
 * toggle_lock; read without it by the callbacks (a callback already under way when stacks are
 * paused is let through, its stack not taken). stacks_gen counts resumes: a thread whose
 * runtime call was entered before a pause and left after it never saw the EXIT, so its depth
 * from an older generation is stale and starts again from 0. */
static pthread_mutex_t toggle_lock = PTHREAD_MUTEX_INITIALIZER;
static CUpti_SubscriberHandle stacks_sub; /* the session's; NULL before setup */
static atomic_int stacks_paused;
static atomic_uint stacks_gen;
static atomic_uint stacks_pauses; /* metadata: launches in a pause carry no stack */
static __thread unsigned in_runtime_gen;
/* --stacks-every N: a stack at a launch-type call with probability 1/N (N = 1: every call).
 * Random, not every N-th: a loop launching N calls an iteration would otherwise always sample
 * the same call. A per-thread xorshift, seeded from the thread's address space slot. */
static uint64_t stacks_every = 1;
static __thread uint64_t rng_state;

static int sampled(void)
{
	if (stacks_every <= 1)
		return 1;
	uint64_t x = rng_state;
	if (!x)
		x = (uint64_t)(uintptr_t)&rng_state * 0x9e3779b97f4a7c15ull | 1;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	rng_state = x;
	return (x >> 11) % stacks_every == 0;
}

/* A stack for this call, if it is sampled; noted by its correlation id. */
static void take_for(uint32_t correlation_id)
{
	if (atomic_load_explicit(&stacks_paused, memory_order_relaxed) || !sampled())
		return;
	uint64_t s = cuptrace_stacks_take();
	if (s)
		cuptrace_stacks_note(correlation_id, s);
}
static __thread int in_runtime; /* depth of launch-type runtime calls on this thread */

static int launch_like(const char *n, int runtime)
{
	static const char *const rt[] = {"cudaLaunch",
	                                 "__cudaLaunch",
	                                 "cudaGraphLaunch",
	                                 "cudaMemcpy",
	                                 "cudaMemset",
	                                 "cudaDeviceSynchronize",
	                                 "cudaStreamSynchronize",
	                                 "cudaEventSynchronize",
	                                 "cudaThreadSynchronize",
	                                 NULL};
	static const char *const drv[] = {
	    "cuLaunch",         "cuGraphLaunch",       "cuMemcpy",           "cuMemset",
	    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize", NULL};
	for (const char *const *p = runtime ? rt : drv; *p; p++)
		if (!strncmp(n, *p, strlen(*p)))
			return 1;
	return 0;
}

/* Switches the callbacks of the launch-type calls on or off in CUPTI; how many took. Under
 * toggle_lock. keep_sync: the synchronizing calls' callbacks stay on when switching off (the
 * synchronizations are timed by them, inject/sync_watch.h). */
static size_t enable_calls(int on, int keep_sync)
{
	size_t n = 0;
	for (uint32_t id = 1; id < MAX_CBID; id++) {
		if (rt_on[id] &&
		    !(!on && keep_sync &&
		      cuptrace_sync_watch_is_sync_call(CUPTI_ACTIVITY_KIND_RUNTIME, id)) &&
		    cuptiEnableCallback((uint32_t)on, stacks_sub, CUPTI_CB_DOMAIN_RUNTIME_API,
		                        id) == CUPTI_SUCCESS)
			n++;
		if (drv_on[id] &&
		    !(!on && keep_sync &&
		      cuptrace_sync_watch_is_sync_call(CUPTI_ACTIVITY_KIND_DRIVER, id)) &&
		    cuptiEnableCallback((uint32_t)on, stacks_sub, CUPTI_CB_DOMAIN_DRIVER_API, id) ==
		        CUPTI_SUCCESS)
			n++;
	}
	return n;
}

void collect_stacks_setup(CUpti_SubscriberHandle sub)
{
	struct cuptrace_setting_value v;
	cuptrace_setting_env(CUPTRACE_SET_STACKS, &v);
	pthread_mutex_lock(&toggle_lock);
	stacks_mode = (int)v.i;
	stacks_sub = NULL;
	cuptrace_setting_env(CUPTRACE_SET_STACKS_EVERY, &v);
	stacks_every = v.i > 1 ? (uint64_t)v.i : 1;
	cuptrace_stacks_reset();
	cuptrace_setting_env(CUPTRACE_SET_SAMPLE, &v);
	sample_hz = (int)v.i;
	cuptrace_setting_env(CUPTRACE_SET_SAMPLE_THREADS, &v);
	sample_all = v.i == CUPTRACE_SAMPLE_THREADS_ALL;
	cuptrace_setting_env(CUPTRACE_SET_SAMPLE_NATIVE, &v);
	cuptrace_sampler_set_native(sample_hz && v.i);
	if (sample_hz) {
		cuptrace_sampler_stop(); /* a session before this one (a window) */
		cuptrace_sampler_reset();
		int e = cuptrace_sampler_start((unsigned)sample_hz, sample_all);
		if (e) {
			cuptrace_warn("no host stack samples: %s", strerror(-e));
			sample_hz = 0;
		} else if ((e = cuptrace_sampler_native()) < 0) {
			cuptrace_warn("host stack samples without native frames: %s",
			              e == -EBUSY ? "every real-time signal is the program's"
			                          : strerror(-e));
		}
	}
	if (stacks_mode && cuptrace_stacks_init(stacks_mode)) {
		cuptrace_warn("no call stacks: out of memory");
		stacks_mode = 0;
	}
	if (!stacks_mode && !sample_hz)
		goto out;
	char buf[64];
	for (uint32_t id = 1; id < MAX_CBID; id++) {
		rt_on[id] = (uint8_t)launch_like(
		    cuptrace_api_name(CUPTI_ACTIVITY_KIND_RUNTIME, id, buf, sizeof(buf)), 1);
		drv_on[id] = (uint8_t)launch_like(
		    cuptrace_api_name(CUPTI_ACTIVITY_KIND_DRIVER, id, buf, sizeof(buf)), 0);
	}
	stacks_sub = sub;
	if (atomic_load(&stacks_paused)) {
		cuptrace_debug("call stacks paused (cuptrace_stacks(0)) from the start");
		goto out;
	}
	size_t n = enable_calls(1, 0);
	cuptrace_debug("call stacks at %zu kinds of API call", n);
out:
	pthread_mutex_unlock(&toggle_lock);
}

int cuptrace_collect_stacks(int on)
{
	struct collect_session *s = collect_process_session; /* trampoline: C API */
	struct cuptrace_setting_value v;
	cuptrace_setting_env(CUPTRACE_SET_STACKS, &v);
	int stacks = v.i != 0;
	cuptrace_setting_env(CUPTRACE_SET_SAMPLE, &v);
	if (!stacks && !v.i)
		return -ENOTSUP;
	pthread_mutex_lock(&toggle_lock);
	/* Host stack samples pause with the launch stacks (and their callbacks, which find the
	 * sampler's targets): a paused block costs what plain record costs. */
	cuptrace_sampler_pause(!on);
	int was_paused = atomic_exchange(&stacks_paused, !on);
	if (was_paused == !on) {
		pthread_mutex_unlock(&toggle_lock);
		return 0;
	}
	if (on)
		atomic_fetch_add(&stacks_gen, 1);
	else
		atomic_fetch_add(&stacks_pauses, 1);
	/* Before CUPTI is attached (a window not yet opened) setup reads stacks_paused. */
	if (stacks_sub && (stacks_mode || sample_hz) && atomic_load(&s->state) == ST_RUNNING)
		enable_calls(on, !s->sync_cupti);
	pthread_mutex_unlock(&toggle_lock);
	return 0;
}

int collect_stacks_callback(CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data)
{
	if ((!stacks_mode && !sample_hz) || id >= MAX_CBID)
		return 0;
	const CUpti_CallbackData *cd = data;
	int on = d == CUPTI_CB_DOMAIN_RUNTIME_API ? rt_on[id] : drv_on[id];
	if (on && sample_hz && cd->callbackSite == CUPTI_API_ENTER)
		cuptrace_sampler_note_thread(); /* one check of a thread-local after the first */
	if (on && !stacks_mode)
		return 1;
	if (d == CUPTI_CB_DOMAIN_RUNTIME_API && rt_on[id]) {
		if (cd->callbackSite == CUPTI_API_ENTER) {
			unsigned g = atomic_load_explicit(&stacks_gen, memory_order_relaxed);
			if (in_runtime_gen != g) {
				in_runtime = 0;
				in_runtime_gen = g;
			}
			if (in_runtime++ == 0)
				take_for(cd->correlationId);
		} else if (in_runtime > 0) {
			in_runtime--;
		}
		return 1;
	}
	if (d == CUPTI_CB_DOMAIN_DRIVER_API && drv_on[id]) {
		if (cd->callbackSite == CUPTI_API_ENTER && !in_runtime)
			take_for(cd->correlationId);
		return 1;
	}
	return 0;
}

/* The records of one drain, handed over like a CUPTI buffer's. */
static int hand_over(struct collect_session *s, const CUpti_Activity **ptrs, uint32_t *sizes,
                     size_t n)
{
	return n ? cuptrace_consumer_records(&s->to, ptrs, sizes, n) : 0;
}

/* The sampler's STACK and SAMPLES records, handed over like the launch stacks'. */
static int drain_samples(struct collect_session *s)
{
	uint8_t *recs;
	size_t len, nrec = 0;
	int err = cuptrace_sampler_drain(&recs, &len);
	if (err || !len)
		return err;
	for (size_t off = 0; off < len; off += cuptrace_stackrec_bytes(recs + off))
		nrec++;
	const CUpti_Activity **ptrs = malloc(nrec * sizeof(*ptrs));
	uint32_t *sizes = malloc(nrec * sizeof(*sizes));
	if (ptrs && sizes) {
		size_t k = 0;
		for (size_t off = 0; off < len; off += sizes[k++]) {
			ptrs[k] = (const CUpti_Activity *)(recs + off);
			sizes[k] = (uint32_t)cuptrace_stackrec_bytes(recs + off);
		}
		err = hand_over(s, ptrs, sizes, nrec);
	} else {
		err = -ENOMEM;
	}
	free(ptrs);
	free(sizes);
	free(recs);
	return err;
}

void collect_stacks_stop(void)
{
	if (sample_hz)
		cuptrace_sampler_stop();
}

int collect_stacks_drain(struct collect_session *s)
{
	int serr = sample_hz ? drain_samples(s) : 0;
	if (!stacks_mode)
		return serr;
	uint8_t *recs;
	uint64_t *pairs;
	size_t len, npairs;
	cuptrace_stacks_drain(&recs, &len, &pairs, &npairs);
	size_t nrec = 0;
	for (size_t off = 0; off < len; off += cuptrace_stackrec_bytes(recs + off))
		nrec++;
	const CUpti_Activity **ptrs = malloc((nrec + 1) * sizeof(*ptrs));
	uint32_t *sizes = malloc((nrec + 1) * sizeof(*sizes));
	/* The pairs as one STACK_CORR record: a header in the 16 bytes kept before them. */
	uint64_t *corr = npairs ? malloc((npairs * 2 + 1) * sizeof(*corr)) : NULL;
	int err = 0;
	if (!ptrs || !sizes || (npairs && !corr)) {
		err = -ENOMEM;
		goto out;
	}
	size_t k = 0;
	for (size_t off = 0; off < len; off += sizes[k++]) {
		ptrs[k] = (const CUpti_Activity *)(recs + off);
		sizes[k] = (uint32_t)cuptrace_stackrec_bytes(recs + off);
	}
	err = hand_over(s, ptrs, sizes, nrec);
	if (!err && npairs) {
		uint32_t h[2] = {CUPTRACE_REC_STACK_CORR, (uint32_t)npairs};
		memcpy(corr, h, 8);
		memcpy(corr + 1, pairs, npairs * 16);
		ptrs[0] = (const CUpti_Activity *)corr;
		sizes[0] = (uint32_t)(8 + npairs * 16);
		err = hand_over(s, ptrs, sizes, 1);
	}
out:
	free(ptrs);
	free(sizes);
	free(corr);
	free(recs);
	free(pairs);
	return err ? err : serr;
}

static void sample_meta(void (*put)(void *ctx, const char *k, const char *v), void *ctx)
{
	char v[32];
	struct cuptrace_sampler_stats st;
	cuptrace_sampler_stats(&st);
	snprintf(v, sizeof(v), "%d", sample_hz);
	put(ctx, "host_samples_hz", v);
	put(ctx, "host_samples_threads", sample_all ? "all" : "cuda");
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st.samples);
	put(ctx, "host_samples", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st.dropped);
	put(ctx, "host_samples_dropped", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st.no_python);
	put(ctx, "host_samples_no_python", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st.late);
	put(ctx, "host_samples_late_ticks", v);
	int nat = cuptrace_sampler_native();
	if (nat > 0)
		snprintf(v, sizeof(v), "signal %d", cuptrace_nsample_signal());
	put(ctx, "host_samples_native", nat > 0 ? v : nat < 0 ? "unavailable" : "off");
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st.native);
	put(ctx, "host_samples_with_native", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)st.native_failed);
	put(ctx, "host_samples_native_failed", v);
	const char *py = cuptrace_pyread_version();
	put(ctx, "host_samples_python",
	    !py                       ? "none found"
	    : cuptrace_pyread_ready() ? py
	                              : "layout not recognised");
}

void collect_stacks_meta(void (*put)(void *ctx, const char *k, const char *v), void *ctx)
{
	if (sample_hz)
		sample_meta(put, ctx);
	if (!stacks_mode)
		return;
	char v[32];
	snprintf(v, sizeof(v), "%llu", (unsigned long long)cuptrace_stacks_count());
	put(ctx, "call_stacks_distinct", v);
	snprintf(v, sizeof(v), "%llu", (unsigned long long)cuptrace_stacks_missed());
	put(ctx, "call_stacks_missed", v);
	if (stacks_mode & CUPTRACE_STACKS_NATIVE)
		put(ctx, "call_stacks_unwinder", cuptrace_nstack_unwinder());
	snprintf(v, sizeof(v), "%llu", (unsigned long long)stacks_every);
	put(ctx, "call_stacks_every", v);
	unsigned pauses = atomic_load(&stacks_pauses);
	if (pauses) {
		snprintf(v, sizeof(v), "%u", pauses);
		put(ctx, "call_stacks_paused", v);
	}
}
