/* cuptrace_bench_ab(spec): what each part of cuptrace's own recording costs, measured inside one
 * process (issue 45; tools/bench/kinds_ab.py --tracer cuptrace). The CUPTI floor
 * (tools/bench/cupti_floor.c) measures CUPTI's kinds with every buffer thrown away; this switches
 * the same things in the real recording, buffers converted and written, so that the default's
 * cost against the GPU alone, and callbacks against CUPTI's records, are read in alternating
 * blocks of one process instead of across processes (whose spread on a shared machine hides a
 * difference of 10% of a step).
 *
 * A benchmark hook, not an API: no header declares it, only the benchmark looks it up. It is a
 * no-op (-EPERM) in sessions with capture windows, which switch the same kinds themselves.
 *
 * Threading: the benchmark's thread calls it between blocks, with the GPU idle; the writer goes
 * on with the records already made (the switches are CUPTI's own, and the synchronization
 * callbacks' records are made only while sync_watch is active). One caller at a time. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "inject/api_enable.h"
#include "inject/collect_state.h"
#include "inject/kinds.h"
#include "inject/runtime_watch.h"
#include "inject/sync_watch.h"

/* The synchronizing calls' callbacks, switched by this file only (1: on as at the start). */
static int sync_cb_on = 1;

static void sync_callbacks(struct collect_session *s, int on)
{
	if (s->sync_cupti || sync_cb_on == on)
		return;
	cuptrace_sync_watch_active(on);
	if (on)
		cuptrace_sync_watch_setup(s->subscriber);
	else
		cuptrace_sync_watch_teardown(s->subscriber);
	sync_cb_on = on;
}

/* Every runtime call timed by our callbacks instead of CUPTI's RUNTIME records ("cb-rt"). */
static int rt_cb_on;

static void runtime_callbacks(struct collect_session *s, int on)
{
	if (rt_cb_on == on)
		return;
	cuptrace_runtime_watch_all(s->subscriber, on);
	rt_cb_on = on;
	if (!on && sync_cb_on && !s->sync_cupti) /* they shared the synchronizing calls' */
		cuptrace_sync_watch_setup(s->subscriber);
}

/* The API records switched on afresh, call by call (by_cbid) or by kind: every call off first,
 * since the last switch may have been either way (enabling a kind resets its per-call settings,
 * disabling one never on leaves them). */
static void api_records(struct collect_session *s, int by_cbid)
{
	cuptrace_disable_api(1);
	cuptrace_enable_api(s->driver_mode, s->runtime_mode == CUPTRACE_RUNTIME_ALL, by_cbid);
}

/* Everything as the start left it: the wanted kinds on and the others off, the API records'
 * per-call filter (enabling RUNTIME or DRIVER again resets it), the callbacks. */
static void restore(struct collect_session *s)
{
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++) {
		CUpti_ActivityKind k = cuptrace_kinds[i];
		if (k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER)
			continue;
		if (collect_kind_wanted(s, k))
			cuptiActivityEnable(k);
		else
			cuptiActivityDisable(k);
	}
	api_records(s, s->api_by_cbid);
	runtime_callbacks(s, 0);
	sync_callbacks(s, 1);
}

/* spec: comma-separated items applied after restoring the start's set: "kN" activity kind N
 * off, "+kN" on, "cb-sync" the synchronizing calls' callbacks off, "cb-rt" every runtime call
 * that is not trivial timed by callbacks (runtime_watch.h; with "k5": instead of CUPTI's),
 * "api-cbid" / "api-kind" the API records switched on call by call / by kind then each filtered
 * call off (CUPTRACE_API_ENABLE); "" or NULL: the start's set.
 * Returns the number of items applied, -EINVAL for an item it cannot read (the items before it
 * stay applied), -EPERM without a running session of our own making (windows, not attached). */
__attribute__((visibility("default"))) int cuptrace_bench_ab(const char *spec)
{
	struct collect_session *s = collect_process_session; /* trampoline: the benchmark */
	if (atomic_load(&s->state) != ST_RUNNING || !atomic_load(&s->cupti_attached) ||
	    collect_window_defers(s) || s->win.ring)
		return -EPERM;
	restore(s);
	int applied = 0;
	for (const char *p = spec; p && *p;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char item[32];
		if (len == 0 || len >= sizeof(item))
			return -EINVAL;
		memcpy(item, p, len);
		item[len] = 0;
		if (!strcmp(item, "cb-sync")) {
			sync_callbacks(s, 0);
		} else if (!strcmp(item, "cb-rt")) {
			runtime_callbacks(s, 1);
		} else if (!strcmp(item, "api-cbid") || !strcmp(item, "api-kind")) {
			api_records(s, item[4] == 'c'); /* CUPTRACE_API_ENABLE=cbid or kind */
		} else {
			int on = item[0] == '+';
			const char *n = item + on;
			char *e;
			long k = n[0] == 'k' ? strtol(n + 1, &e, 10) : -1;
			if (k <= 0 || k >= CUPTI_ACTIVITY_KIND_COUNT || *e)
				return -EINVAL;
			if (on)
				cuptiActivityEnable((CUpti_ActivityKind)k);
			else
				cuptiActivityDisable((CUpti_ActivityKind)k);
		}
		applied++;
		p = end ? end + 1 : p + len;
	}
	return applied;
}
