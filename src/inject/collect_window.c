/* Capture windows in the live session: when they open and close (window.h's rules fed with
 * what the program does), CUPTI switched on and off with them, the flush thread's part (time
 * limits, draining a closed window, flight recorder dumps), the trigger socket and the crash
 * handlers of the flight recorder. What goes into which file is collect_wwriter.c's.
 *
 * Cost outside a window: CUPTI's activity is left untouched until the first window opens
 * (collect_window_defers_cupti) for windows on demand, by time, by
 * steps (the optimizer hook, or --step-range), and by NVTX range where NVTX hands its calls to
 * this library (nvtx_watch.c follows them: one call per range call). A cudaProfilerStart/Stop
 * window waits with CUPTI subscribed and only those calls' callbacks on. The ring, GPU metrics,
 * and NVTX ranges that reach only CUPTI (NVTX_INJECTION64_PATH naming another library) keep
 * CUPTI attached, watching with its callbacks. Devices, contexts and streams are dumped when a
 * window opens.
 *
 * Threads: events arrive on application threads (CUPTI callbacks, NVTX handlers, the C API),
 * the control thread (trigger) and the flush thread (time); all take s->win.lock, decide with
 * the tracker and switch CUPTI's kinds on the spot, so a window opens before the next launch of
 * the thread that opened it. The writer thread reads the window log under the same lock.
 *
 * Attaching CUPTI is not done here: it registers the callbacks whose events open windows
 * (collect.c owns CUPTI; a call from here would close a loop of files). Where CUPTI waits to
 * be attached, a window that opens sets win.cupti_wanted instead of turning the kinds on; the
 * caller that owns the event's thread attaches right after the event (collect.c: its CUPTI
 * callback and C API trampolines, the flush thread for time windows and, woken, for the
 * trigger socket) and calls collect_window_cupti_ready, which turns them on. The NVTX handlers
 * (nvtx_watch.c) wake the flush thread and wait in collect_window_cupti_wait until it has done
 * it, so the opening thread's next launch is still recorded. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject/api_enable.h"
#include "inject/collect_state.h"
#include "inject/sync_watch.h"
#include "inject/kinds.h"
#include "inject/runtime_watch.h"
#include "common/log.h"
#include "common/options.h"

static int64_t now_boot(void)
{
	return cuptrace_now_ns(CLOCK_BOOTTIME);
}

/* ---- settings ---- */

int collect_window_setup(struct collect_session *s)
{
	pthread_mutex_lock(&s->win.lock);
	cuptrace_wtracker_free(&s->win.tracker);
	free(s->win.log);
	s->win.log = NULL;
	s->win.nlog = s->win.caplog = 0;
	s->win.ndumps = 0;
	memset(&s->win.spec, 0, sizeof(s->win.spec));
	struct cuptrace_setting_value v;
	struct cuptrace_wspec *w = &s->win.spec;
	char err[256];
	if (cuptrace_setting_env(CUPTRACE_SET_DELAY, &v))
		w->delay_ns = v.i;
	if (cuptrace_setting_env(CUPTRACE_SET_DURATION, &v))
		w->duration_ns = v.i;
	if (cuptrace_setting_env(CUPTRACE_SET_CAPTURE_RANGE, &v))
		cuptrace_wspec_parse_range(w, v.s, err, sizeof(err)); /* checked by the table */
	if (cuptrace_setting_env(CUPTRACE_SET_STEPS, &v))
		cuptrace_wspec_parse_steps(w, v.s, err, sizeof(err));
	if (cuptrace_setting_env(CUPTRACE_SET_CAPTURE_REPEAT, &v))
		cuptrace_wspec_parse_repeat(w, v.s, err, sizeof(err));
	if (cuptrace_setting_env(CUPTRACE_SET_ON_DEMAND, &v) && v.i &&
	    w->mode == CUPTRACE_WMODE_RUN)
		w->mode = CUPTRACE_WMODE_ON_DEMAND;
	if (cuptrace_setting_env(CUPTRACE_SET_RING, &v))
		w->ring_ns = v.i;
	if (cuptrace_setting_env(CUPTRACE_SET_RING_SLOW, &v))
		w->ring_slow = v.r;
	cuptrace_setting_env(CUPTRACE_SET_RING_MAX, &v);
	s->win.ring_max = (size_t)v.i;
	cuptrace_setting_env(CUPTRACE_SET_WINDOW_DRAIN, &v);
	s->win.drain_ns = v.i;
	s->win.step_range[0] = 0;
	if (cuptrace_setting_env(CUPTRACE_SET_STEP_RANGE, &v))
		snprintf(s->win.step_range, sizeof(s->win.step_range), "%s", v.s);
	if (cuptrace_wspec_finish(w, err, sizeof(err))) {
		cuptrace_warn("capture windows: %s; the whole run is traced", err);
		memset(w, 0, sizeof(*w));
	}
	s->win.ring = w->ring_ns > 0;
	s->win.ring_ns = w->ring_ns;
	s->win.active = w->mode != CUPTRACE_WMODE_RUN && !s->win.ring;
	s->win.per_file = s->out.path && strstr(s->out.path, "%n") != NULL;
	s->win.slow_on = s->win.ring && w->ring_slow > 1;
	s->win.kinds_on = s->win.gpu_kinds_on =
	    !s->win.active; /* setup_cupti's choice, see defers */
	cuptrace_wtracker_init(&s->win.tracker, w, s->start_boot);
	cuptrace_slowsteps_init(&s->win.slow, w->ring_slow, s->start_boot);
	atomic_store(&s->win.crashing, 0);
	atomic_store(&s->win.crash_done, 0);
	atomic_store(&s->win.watch, 0);
	int on = s->win.active || s->win.ring;
	pthread_mutex_unlock(&s->win.lock);
	return on;
}

int collect_window_defers(struct collect_session *s)
{
	return s->win.active;
}

int collect_window_defers_cupti(struct collect_session *s, int nvtx_ours)
{
	/* NVTX ranges (range windows, --step-range) are followed by nvtx_watch.c's handlers
	 * where NVTX hands them to this library, with no CUPTI; otherwise by CUPTI's callbacks. */
	if (!s->win.active || (s->win.step_range[0] && !nvtx_ours))
		return 0;
	struct cuptrace_setting_value v;
	if (cuptrace_setting_env(CUPTRACE_SET_GPU_METRICS, &v) && v.i)
		return 0; /* the sampler follows contexts from their creation */
	switch (s->win.spec.mode) {
	case CUPTRACE_WMODE_TIME:
	case CUPTRACE_WMODE_ON_DEMAND:
		return 1;
	case CUPTRACE_WMODE_STEPS:
		return 1; /* the Python hook or an NVTX range calls cuptrace_step() */
	case CUPTRACE_WMODE_RANGE:
		return nvtx_ours;
	case CUPTRACE_WMODE_PROFILER_API:
		return 1; /* subscribed with only the profiler calls' callbacks (collect.c) */
	default:
		return 0;
	}
}

int collect_window_watches_profiler(struct collect_session *s)
{
	return s->win.active && s->win.spec.mode == CUPTRACE_WMODE_PROFILER_API;
}

int collect_window_recording(struct collect_session *s)
{
	return !s->win.active || s->win.ring || s->win.kinds_on || s->win.gpu_kinds_on;
}

/* ---- CUPTI on and off ---- */

static int is_api_kind(CUpti_ActivityKind k)
{
	return k == CUPTI_ACTIVITY_KIND_RUNTIME || k == CUPTI_ACTIVITY_KIND_DRIVER;
}

/* Kinds that describe the run rather than a moment of it: a window's file needs its GPUs,
 * contexts, streams and thread names whenever it opens (dumped when a window opens). */
static int is_sticky_kind(CUpti_ActivityKind k)
{
	return k == CUPTI_ACTIVITY_KIND_DEVICE || k == CUPTI_ACTIVITY_KIND_CONTEXT ||
	       k == CUPTI_ACTIVITY_KIND_STREAM || k == CUPTI_ACTIVITY_KIND_NAME;
}

/* GPU work and what comes with it, and NVTX ranges: left on after a close until the work
 * launched inside the window has reported (drain); a range begun inside ends in the file. */
static int is_gpu_kind(CUpti_ActivityKind k)
{
	return !is_api_kind(k) && !is_sticky_kind(k) && k != CUPTI_ACTIVITY_KIND_OVERHEAD;
}

/* Caller holds s->win.lock. While CUPTI waits to be attached, the window asks for it instead
 * (win.cupti_wanted; collect.c attaches, then collect_window_cupti_ready comes back here). The
 * thread that reported the event serves it where it can (collect.c); the flush thread is woken
 * only by those that cannot (the trigger socket, collect_window_cupti_wait), so that it does
 * not attach CUPTI while the thread that should is inside a CUPTI callback. */
static void kinds_on(struct collect_session *s)
{
	if (s->win.kinds_on)
		return;
	if (s->cupti_deferred && !atomic_load(&s->cupti_attached)) {
		atomic_store(&s->win.cupti_wanted, 1);
		return;
	}
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++) {
		CUpti_ActivityKind k = cuptrace_kinds[i];
		if (is_api_kind(k) ||
		    (s->win.gpu_kinds_on && (is_gpu_kind(k) || is_sticky_kind(k))))
			continue;
		if (!collect_kind_wanted(s, k))
			continue;
		/* Devices, contexts and streams made before the window: CUPTI reports them at
		 * creation only, so the ones that exist are dumped now (the writer keeps one copy
		 * of each for every file). */
		int dump = k == CUPTI_ACTIVITY_KIND_DEVICE || k == CUPTI_ACTIVITY_KIND_CONTEXT ||
		           k == CUPTI_ACTIVITY_KIND_STREAM;
		CUptiResult r = dump ? cuptiActivityEnableAndDump(k) : cuptiActivityEnable(k);
		if (r != CUPTI_SUCCESS)
			cuptrace_debug("window: activity kind %d not enabled: %d", (int)k, (int)r);
	}
	int e = cuptrace_enable_api(s->driver_mode, s->runtime_mode == CUPTRACE_RUNTIME_ALL,
	                            s->api_by_cbid);
	if (e)
		cuptrace_debug("window: API kinds: %d", e);
	if (!s->sync_cupti)
		cuptrace_sync_watch_active(1);
	s->win.kinds_on = 1;
	s->win.gpu_kinds_on = 1;
}

/* The calls stop being recorded at once; GPU work later (kinds_gpu_off). */
static void kinds_off_host(struct collect_session *s)
{
	if (!s->win.kinds_on)
		return;
	cuptrace_disable_api(s->api_by_cbid);
	cuptiActivityDisable(CUPTI_ACTIVITY_KIND_OVERHEAD);
	if (!s->sync_cupti)
		cuptrace_sync_watch_active(0);
	s->win.kinds_on = 0;
}

static void kinds_gpu_off(struct collect_session *s)
{
	if (s->win.kinds_on || !s->win.gpu_kinds_on)
		return;
	/* Nothing stays on between windows: CUPTI costs then what it costs loaded and idle. */
	for (size_t i = 0; i < CUPTRACE_NKINDS; i++)
		if (is_gpu_kind(cuptrace_kinds[i]) || is_sticky_kind(cuptrace_kinds[i]))
			cuptiActivityDisable(cuptrace_kinds[i]);
	atomic_store(&s->two_gpu_kinds_on, 0);
	s->win.gpu_kinds_on = 0;
}

static void wake_flusher(struct collect_session *s)
{
	if (s->win.wake[1] >= 0) {
		unsigned char b = 1;
		ssize_t w = write(s->win.wake[1], &b, 1);
		(void)w;
	}
}

/* ---- decisions ---- */

static struct collect_wlog *log_of(struct collect_session *s, uint64_t number)
{
	for (size_t i = s->win.nlog; i-- > 0;)
		if (s->win.log[i].number == number)
			return &s->win.log[i];
	return NULL;
}

/* Carries out one decision of the tracker. Caller holds s->win.lock. */
static void apply(struct collect_session *s, const struct cuptrace_waction *a, const char *range,
                  uint64_t key, int64_t tid)
{
	if (a->act == CUPTRACE_WACT_OPEN) {
		if (CUPTRACE_GROW(s->win.log, s->win.caplog, s->win.nlog + 1)) {
			cuptrace_warn("capture window %" PRIu64 " not recorded: out of memory",
			              a->window);
			return;
		}
		struct collect_wlog *l = &s->win.log[s->win.nlog++];
		memset(l, 0, sizeof(*l));
		l->number = a->window;
		l->open = a->t;
		l->close = INT64_MAX;
		snprintf(l->why_open, sizeof(l->why_open), "%s", a->why);
		if (range) {
			snprintf(l->range, sizeof(l->range), "%s", range);
			l->range_key = key;
			l->range_tid = tid;
			l->range_begin = a->t;
			l->range_end = INT64_MAX;
		}
		kinds_on(s);
		cuptrace_info("capture window %" PRIu64 " opened: %s", a->window, a->why);
	} else if (a->act == CUPTRACE_WACT_CLOSE) {
		struct collect_wlog *l = log_of(s, a->window);
		if (l) {
			l->close = a->t;
			snprintf(l->why_close, sizeof(l->why_close), "%s", a->why);
		}
		kinds_off_host(s);
		cuptrace_info("capture window %" PRIu64 " closed: %s", a->window, a->why);
		wake_flusher(s);
	}
}

/* A decision and whatever follows from it at the same moment (back-to-back step windows). */
static void apply_all(struct collect_session *s, int r, struct cuptrace_waction *a,
                      const char *range, uint64_t key, int64_t tid)
{
	if (!r)
		return;
	apply(s, a, range, key, tid);
	if (a->act == CUPTRACE_WACT_CLOSE &&
	    cuptrace_wtracker_after_close(&s->win.tracker, a->t, a))
		apply(s, a, NULL, 0, 0);
}

static int running(struct collect_session *s)
{
	return atomic_load(&s->state) == ST_RUNNING && (s->win.active || s->win.ring);
}

void collect_window_range_begin(struct collect_session *s, const char *name, uint64_t key,
                                int64_t tid)
{
	if (!running(s) || !name)
		return;
	pthread_mutex_lock(&s->win.lock);
	int64_t t = now_boot();
	struct cuptrace_waction a;
	int r = cuptrace_wtracker_range_begin(&s->win.tracker, name, key, t, &a);
	apply_all(s, r, &a, name, key, tid);
	pthread_mutex_unlock(&s->win.lock);
}

static void step_locked(struct collect_session *s, int64_t t);

void collect_window_range_end(struct collect_session *s, uint64_t key)
{
	if (!running(s))
		return;
	pthread_mutex_lock(&s->win.lock);
	int64_t t = now_boot();
	/* The end of a range drawn in its window's file. */
	for (size_t i = s->win.nlog; i-- > 0;)
		if (s->win.log[i].range[0] && s->win.log[i].range_key == key &&
		    s->win.log[i].range_end == INT64_MAX) {
			s->win.log[i].range_end = t;
			break;
		}
	struct cuptrace_waction a;
	int r = cuptrace_wtracker_range_end(&s->win.tracker, key, t, &a);
	apply_all(s, r, &a, NULL, 0, 0);
	pthread_mutex_unlock(&s->win.lock);
}

/* The NVTX range named by --step-range ended: a step ended. Keys of such ranges are followed by
 * the callbacks (collect_callbacks.c), which call collect_window_step. */

void collect_window_profiler(struct collect_session *s, int start)
{
	if (!running(s))
		return;
	pthread_mutex_lock(&s->win.lock);
	struct cuptrace_waction a;
	int r = cuptrace_wtracker_profiler(&s->win.tracker, start, now_boot(), &a);
	apply_all(s, r, &a, NULL, 0, 0);
	pthread_mutex_unlock(&s->win.lock);
}

/* A flight recorder dump of [from, to], done by the writer once the flush thread has pulled
 * everything up to not_before out of CUPTI. Caller holds s->win.lock. Returns its slot or -1. */
static int ask_dump(struct collect_session *s, int64_t from, int64_t to, int64_t not_before,
                    const char *why)
{
	if (s->win.ndumps == COLLECT_MAX_DUMPS) {
		/* Reuse a slot whose dump is done and whose reply was given. */
		size_t k;
		for (k = 0; k < s->win.ndumps && !s->win.dumps[k].done; k++)
			;
		if (k == s->win.ndumps) {
			cuptrace_warn("flight recorder: too many dumps waiting; %s not written",
			              why);
			return -1;
		}
		memmove(&s->win.dumps[k], &s->win.dumps[k + 1],
		        (s->win.ndumps - k - 1) * sizeof(s->win.dumps[0]));
		s->win.ndumps--;
	}
	struct collect_dump *d = &s->win.dumps[s->win.ndumps];
	memset(d, 0, sizeof(*d));
	d->from = from;
	d->to = to;
	d->not_before = not_before;
	snprintf(d->why, sizeof(d->why), "%s", why);
	wake_flusher(s);
	return (int)s->win.ndumps++;
}

static void step_locked(struct collect_session *s, int64_t t)
{
	struct cuptrace_waction a;
	int r = cuptrace_wtracker_step(&s->win.tracker, t, &a);
	apply_all(s, r, &a, NULL, 0, 0);
	if (s->win.slow_on) {
		int64_t from, median;
		if (cuptrace_slowsteps_end(&s->win.slow, t, &from, &median)) {
			char why[96];
			snprintf(why, sizeof(why), "slow step %" PRIu64 ": %.3f ms, median %.3f ms",
			         s->win.slow.steps, (double)(t - s->win.slow.prev_end) / 1e6,
			         (double)median / 1e6);
			cuptrace_info("flight recorder: %s", why);
			ask_dump(s, from, t, t + s->win.drain_ns, why);
		}
	}
}

void collect_window_step(struct collect_session *s)
{
	if (!running(s))
		return;
	pthread_mutex_lock(&s->win.lock);
	step_locked(s, now_boot());
	pthread_mutex_unlock(&s->win.lock);
}

/* The NVTX range of --step-range: its end ends a step. */
int collect_window_is_step_range(struct collect_session *s, const char *name)
{
	return s->win.step_range[0] && cuptrace_wname_matches(s->win.step_range, name);
}

int collect_window_range_wanted(struct collect_session *s, const char *name)
{
	return s->win.active && s->win.spec.mode == CUPTRACE_WMODE_RANGE &&
	       cuptrace_wname_matches(s->win.spec.range, name);
}

int collect_window_nvtx_wanted(void)
{
	struct cuptrace_setting_value v;
	if (cuptrace_setting_env(CUPTRACE_SET_STEP_RANGE, &v) && v.s && *v.s)
		return 1;
	return cuptrace_setting_env(CUPTRACE_SET_CAPTURE_RANGE, &v) && v.s &&
	       !strncmp(v.s, "range:", 6);
}

int collect_window_api(struct collect_session *s, int open)
{
	if (!running(s))
		return -EINVAL;
	pthread_mutex_lock(&s->win.lock);
	struct cuptrace_waction a;
	int r = cuptrace_wtracker_trigger(&s->win.tracker, !open, 0, 0, now_boot(), &a);
	if (r)
		snprintf(a.why, sizeof(a.why), "%s", open ? "cuptrace_start()" : "cuptrace_stop()");
	apply_all(s, r, &a, NULL, 0, 0);
	pthread_mutex_unlock(&s->win.lock);
	return r ? 0 : -EALREADY;
}

/* ---- CUPTI attached for a window (collect.c) ---- */

int collect_window_cupti_wanted(struct collect_session *s)
{
	return atomic_load(&s->win.cupti_wanted);
}

void collect_window_cupti_ready(struct collect_session *s, int ok)
{
	pthread_mutex_lock(&s->win.lock);
	if (atomic_load(&s->win.cupti_wanted)) {
		atomic_store(&s->win.cupti_wanted, 0);
		/* The window may have closed meanwhile (its kinds then stay off), or closed and
		 * another opened: what counts is whether one is open now. */
		if (ok && s->win.tracker.open)
			kinds_on(s);
	}
	pthread_cond_broadcast(&s->win.changed);
	pthread_mutex_unlock(&s->win.lock);
}

void collect_window_cupti_wait(struct collect_session *s)
{
	if (!atomic_load(&s->win.cupti_wanted) || !atomic_load(&s->have_flusher))
		return;
	pthread_mutex_lock(&s->win.lock);
	wake_flusher(s);
	int64_t deadline = now_boot() + 5 * (int64_t)1000000000;
	while (atomic_load(&s->win.cupti_wanted) && !s->win.closing && now_boot() < deadline) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50000000; /* re-check the state and the deadline */
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->win.changed, &s->win.lock, &ts);
	}
	pthread_mutex_unlock(&s->win.lock);
}

/* ---- the flush thread's part ---- */

int collect_window_wake_fd(struct collect_session *s)
{
	return s->win.active || s->win.ring ? s->win.wake[0] : -1;
}

static void crash_dump(struct collect_session *s);

int collect_window_flush_ms(struct collect_session *s)
{
	if (s->flush_ms > 0)
		return s->flush_ms;
	/* Watched: each of top's refreshes needs the last interval's records (as top -- CMD's
	 * record --flush-ms 200). */
	return atomic_load(&s->win.watch) ? 200 : 0;
}

int collect_window_tick(struct collect_session *s, int flush_ms)
{
	if (flush_ms <= 0)
		flush_ms = collect_window_flush_ms(s);
	int period = flush_ms > 0 ? flush_ms : 1000;
	if (!(s->win.active || s->win.ring))
		return period;
	unsigned char b[16];
	ssize_t got;
	int crash = 0;
	while (s->win.wake[0] >= 0 && (got = read(s->win.wake[0], b, sizeof(b))) > 0)
		for (ssize_t i = 0; i < got; i++)
			crash |= b[i] == 2;
	if (crash)
		crash_dump(s);
	pthread_mutex_lock(&s->win.lock);
	int64_t now = now_boot();
	struct cuptrace_waction a;
	for (int guard = 0; guard < 4 && cuptrace_wtracker_deadline(&s->win.tracker) <= now;
	     guard++)
		apply_all(s, cuptrace_wtracker_time(&s->win.tracker, now, &a), &a, NULL, 0, 0);
	/* Closed windows whose GPU work had its time: pull everything out of CUPTI, then the
	 * writer finishes them once it has taken what this flush handed over. */
	uint64_t to_final[16];
	size_t nfinal = 0, ndump = 0;
	size_t dump_idx[COLLECT_MAX_DUMPS];
	int64_t next = now + (int64_t)period * 1000000;
	for (size_t i = 0; i < s->win.nlog; i++) {
		struct collect_wlog *l = &s->win.log[i];
		if (l->close == INT64_MAX || l->final_requested)
			continue;
		if (now >= l->close + s->win.drain_ns && nfinal < 16)
			to_final[nfinal++] = l->number;
		else if (l->close + s->win.drain_ns < next)
			next = l->close + s->win.drain_ns;
	}
	for (size_t i = 0; i < s->win.ndumps; i++) {
		struct collect_dump *d = &s->win.dumps[i];
		if (d->requested)
			continue;
		if (now >= d->not_before)
			dump_idx[ndump++] = i;
		else if (d->not_before < next)
			next = d->not_before;
	}
	if (nfinal && !s->win.tracker.open)
		kinds_gpu_off(s);
	int forced = nfinal && !s->win.tracker.open && !s->win.ring;
	int64_t dl = cuptrace_wtracker_deadline(&s->win.tracker);
	if (dl < next)
		next = dl;
	pthread_mutex_unlock(&s->win.lock);
	if (nfinal || ndump) {
		/* Forced only when nothing is being recorded: it would hand over unfinished GPU
		 * work without times, which the next window (or the ring) still needs. */
		cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
		pthread_mutex_lock(&s->win.lock);
		uint64_t after = atomic_load(&s->buffers);
		for (size_t k = 0; k < nfinal; k++) {
			struct collect_wlog *l = log_of(s, to_final[k]);
			if (l) {
				l->final_after = after;
				l->final_requested = 1;
			}
		}
		for (size_t k = 0; k < ndump; k++) {
			s->win.dumps[dump_idx[k]].final_after = after;
			s->win.dumps[dump_idx[k]].requested = 1;
		}
		pthread_mutex_unlock(&s->win.lock);
	}
	int64_t ms = (next - now_boot()) / 1000000 + 1;
	return ms < 1 ? 1 : ms > period ? period : (int)ms;
}

/* ---- the trigger socket ---- */

/* Waits (s->win.lock held) until window number is written, or the deadline (BOOTTIME ns). */
static int wait_window(struct collect_session *s, uint64_t number, int64_t deadline)
{
	for (;;) {
		struct collect_wlog *l = log_of(s, number);
		if (l && l->final)
			return 0;
		if ((atomic_load(&s->state) != ST_RUNNING && !l) || s->win.closing)
			return -ESRCH;
		int64_t left = deadline - now_boot();
		if (left <= 0)
			return -ETIMEDOUT;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t step = left < 200000000 ? left : 200000000; /* re-check the state */
		ts.tv_sec += (ts.tv_nsec + step) / 1000000000;
		ts.tv_nsec = (ts.tv_nsec + step) % 1000000000;
		pthread_cond_timedwait(&s->win.changed, &s->win.lock, &ts);
	}
}

static void reply_window(struct collect_session *s, int fd, uint64_t number, int waited)
{
	struct collect_wlog *l = log_of(s, number);
	if (!l)
		return;
	if (waited) {
		cuptrace_control_reply(fd, "error: window %" PRIu64 " was not written in time",
		                       number);
		return;
	}
	cuptrace_control_reply(
	    fd, "window %" PRIu64 ": %.3f s to %.3f s of the run, %" PRIu64 " kernels", number,
	    (double)(l->open - s->start_boot) / 1e9, (double)(l->close - s->start_boot) / 1e9,
	    l->kernels);
	if (s->win.per_file && l->file[0])
		cuptrace_control_reply(fd, "file %s", l->file);
	else if (s->win.per_file)
		cuptrace_control_reply(fd, "window %" PRIu64 ": no CUDA work in it: no file",
		                       number);
	else
		cuptrace_control_reply(fd,
		                       "written into %s when the program ends "
		                       "(%%n in the output name gives a file per window)",
		                       s->out.path);
}

static void reply_dump(struct collect_session *s, int fd, int slot, int64_t deadline)
{
	while (slot >= 0 && !s->win.dumps[slot].done && now_boot() < deadline && !s->win.closing) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->win.changed, &s->win.lock, &ts);
	}
	if (slot < 0 || !s->win.dumps[slot].done) {
		cuptrace_control_reply(fd, "error: the flight recorder was not written in time");
		return;
	}
	if (s->win.dumps[slot].file[0])
		cuptrace_control_reply(fd, "file %s", s->win.dumps[slot].file);
	else
		cuptrace_control_reply(fd, "error: the flight recorder held nothing to write");
}

/* The window a watching top keeps open, while it is open (0: none). Caller holds win.lock. */
static uint64_t watched(struct collect_session *s)
{
	uint64_t w = atomic_load(&s->win.watch);
	struct collect_wlog *l = w ? log_of(s, w) : NULL;
	return l && l->close == INT64_MAX ? w : 0;
}

/* "watch DIR": `cuptrace top` attaches. A window opens now and stays open while the
 * connection does (kept by the control server: returns 1); its records go into a capture of
 * their own in DIR (collect_wwriter.c), which top tails. DIR must be private to this user, as
 * the control directory is: records name the program's kernels and calls. Caller holds
 * win.lock. */
static int watch_begin(struct collect_session *s, const char *dir, int fd, int64_t now)
{
	char err[320];
	uint64_t w = watched(s);
	if (s->win.ring) {
		cuptrace_control_reply(fd, "error: a flight recorder (record --ring) cannot be "
		                           "watched; start it with `cuptrace record --on-demand`");
		return 0;
	}
	if (w) {
		cuptrace_control_reply(fd,
		                       "error: watched already by another cuptrace top (window "
		                       "%" PRIu64 "); one watch at a time",
		                       w);
		return 0;
	}
	if (s->win.tracker.open) {
		cuptrace_control_reply(fd,
		                       "error: window %" PRIu64 " is open already (opened by a "
		                       "trigger or the window options): watch once it closes "
		                       "(`cuptrace trigger --stop %d` closes it)",
		                       s->win.tracker.windows, (int)getpid());
		return 0;
	}
	for (size_t i = 0; i < s->win.nlog; i++)
		if (s->win.log[i].watch[0] && !s->win.log[i].final) {
			/* Its capture is still being finished (the drain): one at a time. */
			cuptrace_control_reply(fd,
			                       "error: the last watch's window %" PRIu64
			                       " is still being written: try again in a second",
			                       s->win.log[i].number);
			return 0;
		}
	if (!*dir || strlen(dir) >= sizeof(s->win.log[0].watch) ||
	    cuptrace_control_private_dir(dir, err, sizeof(err))) {
		cuptrace_control_reply(fd, "error: watch directory '%s': %s", dir,
		                       *dir ? err : "none given");
		return 0;
	}
	struct cuptrace_waction a;
	if (!cuptrace_wtracker_trigger(&s->win.tracker, 0, 0, 0, now, &a)) {
		cuptrace_control_reply(fd, "error: no window could be opened");
		return 0;
	}
	snprintf(a.why, sizeof(a.why), "cuptrace top");
	apply_all(s, 1, &a, NULL, 0, 0);
	struct collect_wlog *l = log_of(s, a.window);
	if (l)
		snprintf(l->watch, sizeof(l->watch), "%s", dir);
	atomic_store(&s->win.watch, a.window);
	wake_flusher(s); /* it attaches CUPTI if it waits, and flushes every 200 ms from now */
	cuptrace_control_reply(fd,
	                       "watching: window %" PRIu64 " into %s/p%d.w%" PRIu64 ".cupti until "
	                       "this connection closes",
	                       a.window, dir, (int)getpid(), a.window);
	return 1;
}

/* The watching top hung up (control thread): its window closes, as `trigger --stop` would
 * close it (host kinds off now, GPU kinds after the drain, the capture finished), and CUPTI
 * is back to what it costs between windows. */
static void on_hangup(void *ctx)
{
	struct collect_session *s = ctx;
	pthread_mutex_lock(&s->win.lock);
	uint64_t w = watched(s);
	struct cuptrace_waction a;
	if (w && s->win.tracker.open && s->win.tracker.windows == w &&
	    cuptrace_wtracker_trigger(&s->win.tracker, 1, 0, 0, now_boot(), &a)) {
		snprintf(a.why, sizeof(a.why), "cuptrace top left");
		apply_all(s, 1, &a, NULL, 0, 0);
	}
	atomic_store(&s->win.watch, 0);
	pthread_mutex_unlock(&s->win.lock);
}

static int on_request(const char *req, int fd, void *ctx)
{
	struct collect_session *s = ctx;
	int keep = 0;
	long long dur = 0;
	unsigned long long steps = 0;
	pthread_mutex_lock(&s->win.lock);
	int64_t now = now_boot();
	uint64_t watching = watched(s);
	if (!strcmp(req, "status")) {
		char d[256];
		cuptrace_wspec_describe(&s->win.spec, d, sizeof(d));
		cuptrace_control_reply(fd, "pid %d: %s; %zu windows so far%s%s", (int)getpid(), d,
		                       s->win.nlog, s->win.tracker.open ? ", one open now" : "",
		                       watching ? " (watched by cuptrace top)" : "");
	} else if (!strncmp(req, "watch ", 6)) {
		keep = watch_begin(s, req + 6, fd, now);
	} else if (watching && (!strncmp(req, "open", 4) || !strcmp(req, "stop"))) {
		cuptrace_control_reply(fd,
		                       "error: watched by cuptrace top (window %" PRIu64
		                       "): a trigger waits until top leaves",
		                       watching);
	} else if (!strcmp(req, "dump") || (s->win.ring && !strncmp(req, "open", 4))) {
		if (!s->win.ring) {
			cuptrace_control_reply(fd,
			                       "error: not a flight recorder (record --ring T)");
		} else {
			int slot = ask_dump(s, now - s->win.ring_ns, now, now, "trigger");
			reply_dump(s, fd, slot, now + 60 * (int64_t)1000000000);
		}
	} else if (sscanf(req, "open %lld %llu", &dur, &steps) == 2) {
		struct cuptrace_waction a;
		if (!cuptrace_wtracker_trigger(&s->win.tracker, 0, dur, steps, now, &a)) {
			cuptrace_control_reply(fd, "error: window %" PRIu64 " is open already",
			                       s->win.tracker.windows);
		} else {
			apply_all(s, 1, &a, NULL, 0, 0);
			if (atomic_load(&s->win.cupti_wanted))
				wake_flusher(s); /* it attaches CUPTI for this window */
			uint64_t n = a.window;
			if (!dur && !steps) {
				cuptrace_control_reply(fd,
				                       "window %" PRIu64 " open: `cuptrace trigger "
				                       "--stop %d` closes it",
				                       n, (int)getpid());
			} else {
				int64_t limit =
				    dur ? dur + s->win.drain_ns + 60 * (int64_t)1000000000
				        : 3600 * (int64_t)1000000000;
				int w = wait_window(s, n, now + limit);
				reply_window(s, fd, n, w);
			}
		}
	} else if (!strcmp(req, "stop")) {
		struct cuptrace_waction a;
		if (!cuptrace_wtracker_trigger(&s->win.tracker, 1, 0, 0, now, &a)) {
			cuptrace_control_reply(fd, "error: no window is open");
		} else {
			apply_all(s, 1, &a, NULL, 0, 0);
			int w = wait_window(s, a.window,
			                    now + s->win.drain_ns + 60 * (int64_t)1000000000);
			reply_window(s, fd, a.window, w);
		}
	} else {
		cuptrace_control_reply(fd, "error: unknown request '%s'", req);
	}
	pthread_mutex_unlock(&s->win.lock);
	return keep;
}

/* ---- the flight recorder's crash handlers ---- */

static const int crash_sigs[4] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE};

/* A fault: the records held are written by the flush and writer threads while this thread
 * waits (write and nanosleep only: async-signal-safe), at most 10 s; then the program's own
 * handler is put back and the signal happens again, as if we had not been there. */
static void on_crash(int sig, siginfo_t *si, void *uc)
{
	struct collect_session *s = collect_process_session; /* trampoline: signal handler */
	(void)uc;
	if (!atomic_exchange(&s->win.crashing, 1) && s->win.wake[1] >= 0) {
		unsigned char b = 2;
		ssize_t w = write(s->win.wake[1], &b, 1);
		(void)w;
		struct timespec ten_ms = {0, 10000000};
		for (int i = 0; i < 1000 && !atomic_load(&s->win.crash_done); i++)
			nanosleep(&ten_ms, NULL);
	}
	for (int i = 0; i < 4; i++)
		if (crash_sigs[i] == sig && s->win.crash_installed[i]) {
			sigaction(sig, &s->win.crash_old[i], NULL);
			s->win.crash_installed[i] = 0;
		}
	/* A fault repeats by itself when we return; a sent signal (kill, raise, abort) does
	 * not: send it again, to be delivered once we return. */
	if (si->si_code <= 0)
		raise(sig);
}

static void crash_handlers(struct collect_session *s, int on)
{
	for (int i = 0; i < 4; i++) {
		if (on) {
			struct sigaction sa;
			memset(&sa, 0, sizeof(sa));
			sa.sa_sigaction = on_crash;
			sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
			sigemptyset(&sa.sa_mask);
			s->win.crash_installed[i] =
			    !sigaction(crash_sigs[i], &sa, &s->win.crash_old[i]);
		} else if (s->win.crash_installed[i]) {
			struct sigaction cur;
			/* Only if ours is still the one installed. */
			if (!sigaction(crash_sigs[i], NULL, &cur) && cur.sa_sigaction == on_crash)
				sigaction(crash_sigs[i], &s->win.crash_old[i], NULL);
			s->win.crash_installed[i] = 0;
		}
	}
}

/* Flush thread, woken by on_crash. */
static void crash_dump(struct collect_session *s)
{
	pthread_mutex_lock(&s->win.lock);
	int64_t now = now_boot();
	/* Requested below, after its own flush: not due for the tick meanwhile (as at the end). */
	int slot = ask_dump(s, now - s->win.ring_ns, now, INT64_MAX, "crash");
	pthread_mutex_unlock(&s->win.lock);
	cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&s->win.lock);
	if (slot >= 0) {
		s->win.dumps[slot].final_after = atomic_load(&s->buffers);
		s->win.dumps[slot].requested = 1;
		int64_t deadline = now_boot() + 8 * (int64_t)1000000000;
		while (!s->win.dumps[slot].done && now_boot() < deadline) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&s->win.changed, &s->win.lock, &ts);
		}
		if (s->win.dumps[slot].done && s->win.dumps[slot].file[0])
			fprintf(stderr,
			        "cuptrace: the program crashed: the last %.1f s written to %s\n",
			        (double)s->win.ring_ns / 1e9, s->win.dumps[slot].file);
	}
	pthread_mutex_unlock(&s->win.lock);
	atomic_store(&s->win.crash_done, 1);
}

/* ---- life cycle ---- */

void collect_window_begin(struct collect_session *s)
{
	if (!(s->win.active || s->win.ring))
		return;
	pthread_mutex_lock(&s->win.lock);
	/* Times count from the session's start, known only now. */
	s->win.tracker.t0 = s->start_boot;
	cuptrace_slowsteps_init(&s->win.slow, s->win.spec.ring_slow, s->start_boot);
	s->win.closing = 0;
	if (pipe2(s->win.wake, O_CLOEXEC | O_NONBLOCK))
		s->win.wake[0] = s->win.wake[1] = -1;
	struct cuptrace_waction a;
	apply_all(s, cuptrace_wtracker_time(&s->win.tracker, now_boot(), &a), &a, NULL, 0, 0);
	char d[256];
	cuptrace_wspec_describe(&s->win.spec, d, sizeof(d));
	struct cuptrace_setting_value job;
	cuptrace_setting_env(CUPTRACE_SET_JOB, &job);
	char err[256];
	s->win.control =
	    cuptrace_control_start((long)job.i, on_request, on_hangup, s, err, sizeof(err));
	if (!s->win.control)
		cuptrace_warn("capture windows: no trigger socket (%s)", err);
	if (s->win.ring) {
		crash_handlers(s, 1);
		cuptrace_info("flight recorder: the last %.1f s, at most %zu MiB of records",
		              (double)s->win.ring_ns / 1e9, s->win.ring_max >> 20);
	}
	cuptrace_info("capture windows: %s; trigger socket %s", d,
	              cuptrace_control_path(s->win.control));
	pthread_mutex_unlock(&s->win.lock);
}

void collect_window_end(struct collect_session *s)
{
	if (!(s->win.active || s->win.ring))
		return;
	pthread_mutex_lock(&s->win.lock);
	int64_t now = now_boot();
	struct cuptrace_waction a;
	if (cuptrace_wtracker_end(&s->win.tracker, now, &a))
		apply(s, &a, NULL, 0, 0);
	/* The run's end: what the flight recorder holds, unless a crash just wrote it, or only
	 * slow steps are wanted (--ring-slow: a long run leaves only those), or a signal ends it
	 * (SIGINT, SIGTERM: written all the same). */
	/* Left unrequested, and never due for the flush thread's tick: only the writer's end
	 * (collect_wwriter_end) takes it, after the finish's last CUPTI flush is in. Requested
	 * here, the writer's loop could write it before that flush, from a ring still without
	 * the records CUPTI held: an empty file when the run was shorter than a flush period
	 * (gpu_window_test case 15 failed so once on an H100, 4,462 records in, none written). */
	if (s->win.ring && !atomic_load(&s->win.crash_done) && (!s->win.slow_on || s->dying_signal))
		ask_dump(s, now - s->win.ring_ns, now, INT64_MAX, "end of run");
	pthread_mutex_unlock(&s->win.lock);
}

void collect_window_free(struct collect_session *s)
{
	/* A handler waiting for a window stops waiting: the socket's thread is joined next. */
	pthread_mutex_lock(&s->win.lock);
	s->win.closing = 1;
	pthread_cond_broadcast(&s->win.changed);
	pthread_mutex_unlock(&s->win.lock);
	cuptrace_control_stop(s->win.control); /* before the lock: its handler may hold it */
	s->win.control = NULL;
	pthread_mutex_lock(&s->win.lock);
	if (!atomic_load(&s->win.crashing))
		crash_handlers(s, 0);
	for (int i = 0; i < 2; i++) {
		if (s->win.wake[i] >= 0)
			close(s->win.wake[i]);
		s->win.wake[i] = -1;
	}
	pthread_cond_broadcast(&s->win.changed);
	pthread_mutex_unlock(&s->win.lock);
}

void collect_window_summary(struct collect_session *s)
{
	if (!(s->win.active || s->win.ring))
		return;
	pthread_mutex_lock(&s->win.lock);
	char d[256];
	cuptrace_wspec_describe(&s->win.spec, d, sizeof(d));
	if (s->win.ring) {
		fprintf(stderr, "cuptrace: flight recorder (%s): %zu dump%s\n", d, s->win.ndumps,
		        s->win.ndumps == 1 ? "" : "s");
		for (size_t i = 0; i < s->win.ndumps; i++)
			fprintf(
			    stderr, "cuptrace:   %s: %.3f s to %.3f s -> %s\n", s->win.dumps[i].why,
			    (double)(s->win.dumps[i].from - s->start_boot) / 1e9,
			    (double)(s->win.dumps[i].to - s->start_boot) / 1e9,
			    s->win.dumps[i].file[0] ? s->win.dumps[i].file : "(nothing written)");
	} else {
		fprintf(stderr, "cuptrace: capture windows (%s): %zu\n", d, s->win.nlog);
		for (size_t i = 0; i < s->win.nlog; i++) {
			const struct collect_wlog *l = &s->win.log[i];
			fprintf(stderr,
			        "cuptrace:   window %" PRIu64
			        ": %.3f s to %.3f s (%s; %s), %" PRIu64 " kernels%s%s\n",
			        l->number, (double)(l->open - s->start_boot) / 1e9,
			        (double)(l->close - s->start_boot) / 1e9, l->why_open,
			        l->why_close[0] ? l->why_close : "open at the end", l->kernels,
			        s->win.per_file ? " -> " : "", s->win.per_file ? l->file : "");
		}
	}
	pthread_mutex_unlock(&s->win.lock);
}
