/* Capture windows asking for CUPTI (inject/collect_window.c): while CUPTI waits to be attached, a
 * window that opens turns no activity kind on and asks (win.cupti_wanted), without waking the
 * flush thread (the thread that reported the event serves it); collect_window_cupti_ready turns
 * the kinds on if a window is open by then; collect_window_cupti_wait (the NVTX handlers') wakes
 * the flush thread and waits until it has served the request. CUPTI's calls are stubbed here
 * and counted, the window code is the real one. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"
#include "inject/api_enable.h"
#include "inject/collect_state.h"
#include "inject/sync_watch.h"

/* ---- CUPTI and the API kinds, stubbed ---- */

static int enables, api_on, api_off, api_off_cbid;

CUptiResult cuptiActivityEnable(CUpti_ActivityKind k)
{
	(void)k;
	enables++;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnableAndDump(CUpti_ActivityKind k)
{
	(void)k;
	enables++;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind k)
{
	(void)k;
	return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag)
{
	(void)flag;
	return CUPTI_SUCCESS;
}

int cuptrace_enable_api(int driver_mode, int runtime_all, int by_cbid)
{
	(void)driver_mode, (void)runtime_all, (void)by_cbid;
	api_on++;
	return 0;
}

void cuptrace_disable_api(int by_cbid)
{
	api_off++;
	api_off_cbid += by_cbid;
}

void cuptrace_sync_watch_active(int on)
{
	(void)on;
}

/* ---- helpers ---- */

static struct collect_session *S(void)
{
	return collect_process_session;
}

static int wanted(void)
{
	return atomic_load(&S()->win.cupti_wanted);
}

/* Bytes waiting on the flush thread's wake pipe (read and counted). */
static int wake_bytes(void)
{
	unsigned char b[16];
	ssize_t n, all = 0;
	while ((n = read(S()->win.wake[0], b, sizeof(b))) > 0)
		all += n;
	return (int)all;
}

/* An on-demand session waiting for its first window, CUPTI not attached. */
static void session(void)
{
	setenv("CUPTRACE_ON_DEMAND", "1", 1);
	setenv("CUPTRACE_JOB", "0", 1);
	struct collect_session *s = S();
	s->start_boot = cuptrace_now_ns(CLOCK_BOOTTIME);
	CHECK_EQ_INT(collect_window_setup(s), 1);
	s->cupti_deferred = 1;
	atomic_store(&s->cupti_attached, 0);
	atomic_store(&s->have_flusher, 0);
	atomic_store(&s->state, ST_RUNNING);
	collect_window_begin(s);
	CHECK(s->win.wake[0] >= 0);
}

static void session_end(void)
{
	atomic_store(&S()->state, ST_IDLE);
	collect_window_end(S());
	collect_window_free(S());
}

/* ---- tests ---- */

static void test_open_asks_then_ready_turns_on(void)
{
	session();
	struct collect_session *s = S();
	int e0 = enables, a0 = api_on;
	wake_bytes();
	CHECK_EQ_INT(collect_window_api(s, 1), 0);
	/* Asked, nothing on, the flush thread left alone: the caller serves it. */
	CHECK_EQ_INT(wanted(), 1);
	CHECK_EQ_INT(enables, e0);
	CHECK_EQ_INT(api_on, a0);
	CHECK_EQ_INT(s->win.kinds_on, 0);
	CHECK_EQ_INT(wake_bytes(), 0);
	CHECK_EQ_INT(collect_window_recording(s), 0);
	/* collect.c attached CUPTI: the window's kinds go on. */
	atomic_store(&s->cupti_attached, 1);
	collect_window_cupti_ready(s, 1);
	CHECK_EQ_INT(wanted(), 0);
	CHECK(enables > e0);
	CHECK_EQ_INT(api_on, a0 + 1);
	CHECK_EQ_INT(s->win.kinds_on, 1);
	CHECK_EQ_INT(collect_window_recording(s), 1);
	/* Attached: the next window needs no request. Closing turns the API records off; windows
	 * switch the kinds, never call by call (CUPTI lost the calls of kernels that way). */
	int o0 = api_off, c0 = api_off_cbid;
	CHECK_EQ_INT(collect_window_api(s, 0), 0);
	CHECK_EQ_INT(s->win.kinds_on, 0);
	CHECK_EQ_INT(api_off, o0 + 1);
	CHECK_EQ_INT(api_off_cbid, c0);
	CHECK_EQ_INT(collect_window_api(s, 1), 0);
	CHECK_EQ_INT(wanted(), 0);
	CHECK_EQ_INT(s->win.kinds_on, 1);
	CHECK_EQ_INT(api_on, a0 + 2);
	session_end();
}

static void test_failed_attach_and_closed_meanwhile(void)
{
	session();
	struct collect_session *s = S();
	int e0 = enables;
	/* The attach failed: nothing goes on, the request is over; the next open asks again. */
	CHECK_EQ_INT(collect_window_api(s, 1), 0);
	CHECK_EQ_INT(wanted(), 1);
	collect_window_cupti_ready(s, 0);
	CHECK_EQ_INT(wanted(), 0);
	CHECK_EQ_INT(s->win.kinds_on, 0);
	CHECK_EQ_INT(enables, e0);
	CHECK_EQ_INT(collect_window_api(s, 0), 0);
	CHECK_EQ_INT(collect_window_api(s, 1), 0);
	CHECK_EQ_INT(wanted(), 1);
	/* The window closed before CUPTI was there: attached, but no kind goes on. */
	CHECK_EQ_INT(collect_window_api(s, 0), 0);
	atomic_store(&s->cupti_attached, 1);
	collect_window_cupti_ready(s, 1);
	CHECK_EQ_INT(wanted(), 0);
	CHECK_EQ_INT(s->win.kinds_on, 0);
	CHECK_EQ_INT(enables, e0);
	session_end();
}

/* The flush thread, stood in for: woken through the pipe, it attaches after a while. */
static void *flusher(void *arg)
{
	int *woken = arg;
	struct pollfd p = {.fd = S()->win.wake[0], .events = POLLIN};
	if (poll(&p, 1, 5000) == 1)
		*woken = wake_bytes();
	struct timespec d = {0, 80000000};
	nanosleep(&d, NULL);
	atomic_store(&S()->cupti_attached, 1);
	collect_window_cupti_ready(S(), 1);
	return NULL;
}

static void test_wait_for_the_flush_thread(void)
{
	session();
	struct collect_session *s = S();
	/* No flush thread: nobody would serve it, so no wait (the window stays unrecorded). */
	CHECK_EQ_INT(collect_window_api(s, 1), 0);
	int64_t t0 = cuptrace_now_ns(CLOCK_MONOTONIC);
	collect_window_cupti_wait(s);
	CHECK(cuptrace_now_ns(CLOCK_MONOTONIC) - t0 < 50000000);
	CHECK_EQ_INT(wanted(), 1);
	/* With one: woken, it attaches 80 ms later; the waiter goes on then, kinds on. */
	atomic_store(&s->have_flusher, 1);
	int woken = 0;
	pthread_t th;
	CHECK_EQ_INT(pthread_create(&th, NULL, flusher, &woken), 0);
	t0 = cuptrace_now_ns(CLOCK_MONOTONIC);
	collect_window_cupti_wait(s);
	int64_t waited = cuptrace_now_ns(CLOCK_MONOTONIC) - t0;
	pthread_join(th, NULL);
	CHECK(woken >= 1);
	CHECK(waited >= 80000000);
	CHECK(waited < 4000000000);
	CHECK_EQ_INT(wanted(), 0);
	CHECK_EQ_INT(s->win.kinds_on, 1);
	/* Nothing asked: no wait, no wake. */
	wake_bytes();
	collect_window_cupti_wait(s);
	CHECK_EQ_INT(wake_bytes(), 0);
	atomic_store(&s->have_flusher, 0);
	session_end();
}

TEST_MAIN(T(test_open_asks_then_ready_turns_on), T(test_failed_attach_and_closed_meanwhile),
          T(test_wait_for_the_flush_thread))
