/* The benchmark's floor: a minimal CUPTI client, injected like cuptrace, that enables the same
 * activity kinds with the same settings and throws every buffer away. What cuptrace costs beyond
 * this is cuptrace's own overhead (README "Overhead"). The same API calls are switched off at
 * the source as in cuptrace's default (driver calls that do no GPU work, trivial runtime calls);
 * CUPTRACE_RUNTIME=all, CUPTRACE_DRIVER=user or all and CUPTRACE_SYNC_RECORDS=callback (the
 * synchronizations from the same callbacks as cuptrace's) change them as they do for cuptrace. */
#include <cupti.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "inject/kinds.h"
#include "inject/api_enable.h"
#include "inject/sync_watch.h"

static size_t buffer_size = CUPTRACE_DEFAULT_BUFFER_SIZE;

extern const char *const cuptrace_runtime_cbid_names[];
extern const unsigned cuptrace_runtime_cbid_names_len;
extern const char *const cuptrace_driver_cbid_names[];
extern const unsigned cuptrace_driver_cbid_names_len;

/* What InitializeInjection enabled, so that cuptrace_floor_ab() can put it back: the kinds
 * other than RUNTIME and DRIVER, and how the API records were enabled. Written once at
 * injection, before any application thread calls cuptrace_floor_ab(). */
static CUpti_ActivityKind init_kinds[CUPTI_ACTIVITY_KIND_COUNT];
static size_t init_nkinds;
static int init_api, init_api_drv_mode, init_api_rt_all, init_api_by_cbid;

static void CUPTIAPI req(uint8_t **b, size_t *sz, size_t *max)
{
	*sz = buffer_size;
	*b = calloc(1, *sz);
	*max = 0;
}

/* CUPTRACE_FLOOR_HANDLE, to find where cuptrace's time beyond the floor goes (issue 24):
 *   unset/"free": every buffer freed at once (the floor);
 *   "walk": each record visited with cuptiActivityGetNextRecord on CUPTI's thread, then freed;
 *   "defer": buffers handed to a thread of ours (a mutex-protected list, as cuptrace's queue)
 *   that walks and frees them: cuptrace's hand-off without its conversion. */
static int handle_mode;
static pthread_mutex_t defer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t defer_cond = PTHREAD_COND_INITIALIZER;
struct defer_buf {
	struct defer_buf *next;
	uint8_t *b;
	size_t valid;
};
static struct defer_buf *defer_head;
static volatile unsigned long long walked;

static void walk(uint8_t *b, size_t valid)
{
	CUpti_Activity *r = NULL;
	unsigned long long n = 0;
	while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS)
		n += r->kind;
	walked += n;
}

static void *defer_main(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&defer_lock);
		while (!defer_head)
			pthread_cond_wait(&defer_cond, &defer_lock);
		struct defer_buf *d = defer_head;
		defer_head = NULL;
		pthread_mutex_unlock(&defer_lock);
		while (d) {
			struct defer_buf *next = d->next;
			walk(d->b, d->valid);
			free(d->b);
			free(d);
			d = next;
		}
	}
	return NULL;
}

static void CUPTIAPI done(CUcontext c, uint32_t s, uint8_t *b, size_t sz, size_t valid)
{
	(void)c, (void)s, (void)sz;
	if (handle_mode == 1 && valid)
		walk(b, valid);
	if (handle_mode == 2 && valid) {
		struct defer_buf *d = malloc(sizeof(*d));
		if (d) {
			d->b = b;
			d->valid = valid;
			pthread_mutex_lock(&defer_lock);
			d->next = defer_head;
			defer_head = d;
			pthread_cond_signal(&defer_cond);
			pthread_mutex_unlock(&defer_lock);
			return;
		}
	}
	free(b);
}

static uint64_t CUPTIAPI boottime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void CUPTIAPI no_callback(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                                 const void *data)
{
}

static int has_kind(const char *list, int k)
{
	for (const char *p = list; *p;) {
		char *end;
		long v = strtol(p, &end, 10);
		if (end == p)
			return 0;
		if (v == k)
			return 1;
		p = *end == ',' ? end + 1 : end;
	}
	return 0;
}

/* The same periodic flush as cuptrace (CUPTRACE_FLUSH_MS, default 1000; 0: none): without it
 * CUPTI keeps completed records longer, and the floor's memory is not the one cuptrace runs on. */
static int flush_ms = 1000;
static void *flusher(void *arg)
{
	(void)arg;
	for (;;) {
		struct timespec ts = {flush_ms / 1000, (long)(flush_ms % 1000) * 1000000L};
		nanosleep(&ts, NULL);
		cuptiActivityFlushAll(0);
	}
	return NULL;
}

/* CUPTRACE_FLOOR_EXIT_OFF=1: at exit, also what cuptrace's finish does to CUPTI besides
 * flushing (every kind off, a second flush, unsubscribing), to see whether the process's end
 * in the kernel takes longer after it. */
static CUpti_SubscriberHandle floor_sub;
static void at_exit(void)
{
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	const char *off = getenv("CUPTRACE_FLOOR_EXIT_OFF");
	if (!off || *off != '1')
		return;
	for (size_t i = CUPTRACE_NKINDS; i-- > 0;)
		cuptiActivityDisable(cuptrace_kinds[i]);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	cuptiUnsubscribe(floor_sub);
}

/* A detached thread of ours with every signal blocked (the program's handlers stay its own);
 * 0 or pthread_create's error. */
static int start_thread(void *(*fn)(void *))
{
	pthread_t t;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = pthread_create(&t, NULL, fn, NULL);
	if (!r)
		pthread_detach(t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return r;
}

/* A uint8_t CUPTI attribute set to v where the variable env is the digit v ("1" or "0"). */
static void flag_attr(const char *env, CUpti_ActivityAttribute a, uint8_t v)
{
	const char *e = getenv(env);
	if (e && *e == (char)('0' + v)) {
		size_t vs = sizeof(v);
		cuptiActivitySetAttribute(a, &vs, &v);
	}
}

/* Switches off the API records of every call whose CUPTI name contains sub (one domain). */
static int api_off(int driver, const char *sub)
{
	const char *const *names =
	    driver ? cuptrace_driver_cbid_names : cuptrace_runtime_cbid_names;
	unsigned n = driver ? cuptrace_driver_cbid_names_len : cuptrace_runtime_cbid_names_len;
	int hits = 0;
	for (uint32_t id = 1; id < n; id++) {
		if (!names[id] || !strstr(names[id], sub))
			continue;
		if (driver)
			cuptiActivityEnableDriverApi(id, 0);
		else
			cuptiActivityEnableRuntimeApi(id, 0);
		hits++;
	}
	return hits;
}

/* cuptrace_floor_ab(spec), issue 45: where CUPTI's time goes, measured inside one process. The
 * benchmark (tools/bench/torch_workload.py --ab-kinds, loop_ab) calls it between blocks of
 * steps, with the GPU idle: it puts back everything InitializeInjection enabled, then switches
 * off what spec lists (comma-separated): "kN" activity kind N; "rt~SUB" / "drv~SUB" the runtime
 * / driver API records of every call whose name contains SUB; "" or NULL: nothing (the default
 * set). Returns the number of items applied, or -1 for an item it cannot read (nothing more is
 * switched then). Called from the application's thread only (the benchmark's), one at a time. */
__attribute__((visibility("default"))) int cuptrace_floor_ab(const char *spec)
{
	for (size_t i = 0; i < init_nkinds; i++)
		cuptiActivityEnable(init_kinds[i]);
	/* Enabling RUNTIME or DRIVER again resets the per-call settings, so this comes after
	 * the kinds and puts back the default's per-call filter too. */
	if (init_api)
		cuptrace_enable_api(init_api_drv_mode, init_api_rt_all, init_api_by_cbid);
	int applied = 0;
	for (const char *p = spec; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[128];
		if (len == 0 || len >= sizeof(item))
			return -1;
		memcpy(item, p, len);
		item[len] = 0;
		if (item[0] == 'k') {
			char *e;
			long k = strtol(item + 1, &e, 10);
			if (*e || k <= 0 || k >= CUPTI_ACTIVITY_KIND_COUNT)
				return -1;
			cuptiActivityDisable((CUpti_ActivityKind)k);
		} else if (!strncmp(item, "rt~", 3) && item[3]) {
			api_off(0, item + 3);
		} else if (!strncmp(item, "drv~", 4) && item[4]) {
			api_off(1, item + 4);
		} else {
			return -1;
		}
		applied++;
		p = end ? end + 1 : p + len;
	}
	return applied;
}

__attribute__((visibility("default"))) int InitializeInjection(void)
{
	/* CUPTRACE_FLOOR_NOTHING: injected, libcupti loaded (linked), no CUPTI call at all: what
	 * a process waiting for a capture window with CUPTI untouched can cost at best. */
	const char *nothing = getenv("CUPTRACE_FLOOR_NOTHING");
	if (nothing && *nothing == '1')
		return 1;
	/* "version": only cuptiGetVersion, the one call cuptrace makes while a window waits. */
	if (nothing && !strcmp(nothing, "version")) {
		uint32_t v;
		cuptiGetVersion(&v);
		return 1;
	}
	/* Subscribed like cuptrace (which claims CUPTI's one subscriber slot), no callback on. */
	cuptiSubscribe(&floor_sub, no_callback, NULL);
	/* CUPTRACE_FLOOR_SUBONLY: subscribed and nothing more (no clock, no buffers, no kind);
	 * "prof": with the callbacks on cudaProfilerStart/Stop a profiler-range window waits on. */
	const char *subonly = getenv("CUPTRACE_FLOOR_SUBONLY");
	if (subonly && *subonly) {
		if (!strcmp(subonly, "prof"))
			cuptrace_enable_profiler_callbacks(floor_sub);
		return 1;
	}
	cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	/* CUPTRACE_FLOOR_NO_TS: CUPTI's own clock instead of the BOOTTIME callback cuptrace sets */
	const char *nots = getenv("CUPTRACE_FLOOR_NO_TS");
	if (!nots || *nots != '1')
		cuptiActivityRegisterTimestampCallback(boottime);
	uint8_t one = 1;
	size_t sz = 1;
	cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one);
	cuptiActivityRegisterCallbacks(req, done);
	/* CUPTRACE_FLOOR_KINDS (kind numbers, comma-separated) narrows the kinds, to measure
	 * what each costs. */
	const char *only = getenv("CUPTRACE_FLOOR_KINDS");
	int api = 0;
	/* Per graph, cuptrace asks for the records of graphs launched from the GPU too. */
	if (!only && cuptrace_kind_by_setting(CUPTI_ACTIVITY_KIND_GRAPH_TRACE))
		cuptiActivityEnableDeviceGraph(1);
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++) {
		CUpti_ActivityKind k = cuptrace_kinds[i];
		if (only && !has_kind(only, (int)k))
			continue;
		if (!only && (cuptrace_kind_needs_two_gpus(k) || !cuptrace_kind_by_setting(k)))
			continue; /* as cuptrace in a one-GPU process, --cuda-graphs too (kinds.h)
			           */
		if (k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER) {
			api = 1;
		} else if (cuptiActivityEnable(k) == CUPTI_SUCCESS) {
			init_kinds[init_nkinds++] = k;
		}
	}
	/* Synchronizations from callbacks, as cuptrace's default: the same callbacks on (the
	 * records they would make are cuptrace's own work, not CUPTI's). */
	if (!only && !cuptrace_kind_by_setting(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION))
		cuptrace_sync_watch_setup(floor_sub);
	/* CUPTRACE_FLOOR_EXTRA_KINDS: kinds enabled besides, e.g. 51 (GRAPH_TRACE: one record per
	 * graph launch instead of one per node), to measure what they change. */
	const char *extra = getenv("CUPTRACE_FLOOR_EXTRA_KINDS");
	for (const char *e = extra; e && *e;) {
		char *end;
		long k = strtol(e, &end, 10);
		if (end == e)
			break;
		if (k > 0 && k < CUPTI_ACTIVITY_KIND_COUNT)
			cuptiActivityEnable((CUpti_ActivityKind)k);
		e = *end == ',' ? end + 1 : end;
	}
	const char *rt = getenv("CUPTRACE_RUNTIME");
	init_api = api;
	struct cuptrace_setting_value dv;
	cuptrace_setting_env(CUPTRACE_SET_DRIVER, &dv);
	init_api_drv_mode = (int)dv.i;
	init_api_rt_all = rt && !strcmp(rt, "all");
	init_api_by_cbid = cuptrace_api_by_cbid();
	if (api)
		cuptrace_enable_api(init_api_drv_mode, init_api_rt_all, init_api_by_cbid);
	if (api && only && !has_kind(only, CUPTI_ACTIVITY_KIND_DRIVER))
		cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
	if (api && only && !has_kind(only, CUPTI_ACTIVITY_KIND_RUNTIME))
		cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
	atexit(at_exit);
	const char *bs = getenv("CUPTRACE_BUFFER_SIZE");
	if (bs && strtoull(bs, NULL, 10) >= 8192)
		buffer_size = (size_t)strtoull(bs, NULL, 10) & ~(size_t)7;
	/* CUPTRACE_FLOOR_DEVBUF: CUPTI's device buffer size in bytes (where it keeps GPU records
	 * before its thread copies them out), to see whether its size changes what CUPTI costs. */
	const char *db = getenv("CUPTRACE_FLOOR_DEVBUF");
	if (db && strtoull(db, NULL, 10) > 0) {
		size_t v = (size_t)strtoull(db, NULL, 10), vs = sizeof(v);
		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &vs, &v);
	}
	/* CUPTRACE_FLOOR_PREALLOC: device buffers CUPTI allocates per context up front (its default
	 * 3): CUPTI allocates any further one on the application's thread, inside a launch, which
	 * its header names as a stall; a candidate for the graph replays' slow mode. */
	const char *pa = getenv("CUPTRACE_FLOOR_PREALLOC");
	if (pa && strtoull(pa, NULL, 10) > 0) {
		size_t v = (size_t)strtoull(pa, NULL, 10), lim = v + 250, vs = sizeof(v);
		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_POOL_LIMIT, &vs, &lim);
		cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_PRE_ALLOCATE_VALUE, &vs,
		                          &v);
	}
	/* CUPTRACE_FLOOR_PINNED=1: CUPTI's profiling buffers in pinned host memory instead of
	 * device memory; CUPTRACE_FLOOR_PER_THREAD=0: one activity buffer for all threads instead
	 * of one per thread (both CUPTI's defaults otherwise): to see whether where the GPU writes
	 * its timestamps, or how CUPTI hands out buffers, puts graph replays in their slow mode. */
	flag_attr("CUPTRACE_FLOOR_PINNED", CUPTI_ACTIVITY_ATTR_MEM_ALLOCATION_TYPE_HOST_PINNED, 1);
	flag_attr("CUPTRACE_FLOOR_PER_THREAD", CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, 0);
	const char *hm = getenv("CUPTRACE_FLOOR_HANDLE");
	handle_mode = hm && !strcmp(hm, "walk") ? 1 : hm && !strcmp(hm, "defer") ? 2 : 0;
	if (handle_mode == 2 && start_thread(defer_main))
		handle_mode = 0;
	const char *fm = getenv("CUPTRACE_FLUSH_MS");
	if (fm)
		flush_ms = atoi(fm);
	if (flush_ms > 0)
		start_thread(flusher);
	return 1;
}
