/* cuptrace_range_push/pop (src/inject/collect_ranges.c) without a GPU: the records they make
 * (marker START/END pairs, as CUPTI makes for nvtxRangePushA/nvtxRangePop), what the window
 * code learns through nvtx_watch.c (compiled in, as the library has it), the per-thread stack
 * and its errors, and what the converter draws of the records: a slice on the thread's track,
 * the track a CUPTI NVTX range of the same thread goes on, nested with it. The window code is
 * stubbed: it records the calls. The session is the process's (collect_state.c), its state set
 * by hand as cuptrace_start/stop would. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "rec_sink.h"
#include "common/util.h"
#include "convert/convert.h"
#include "inject/collect_state.h"

/* ---- the window code, stubbed: ranges named "win" are followed, "iter" ends a step ---- */

static int nbegins, nends, nsteps;
static char begin_name[32];
static uint64_t begin_key, end_key;

int collect_window_range_wanted(struct collect_session *s, const char *name)
{
	(void)s;
	return !strcmp(name, "win");
}

int collect_window_is_step_range(struct collect_session *s, const char *name)
{
	(void)s;
	return !strcmp(name, "iter");
}

int collect_window_nvtx_wanted(void)
{
	return 1;
}

void collect_window_range_begin(struct collect_session *s, const char *name, uint64_t key,
                                int64_t tid)
{
	(void)s;
	(void)tid;
	nbegins++;
	snprintf(begin_name, sizeof(begin_name), "%s", name);
	begin_key = key;
}

void collect_window_range_end(struct collect_session *s, uint64_t key)
{
	(void)s;
	nends++;
	end_key = key;
}

void collect_window_step(struct collect_session *s)
{
	(void)s;
	nsteps++;
}

void collect_window_cupti_wait(struct collect_session *s)
{
	(void)s; /* the NVTX handlers' (not the C API's ranges): not called here */
}

/* ---- helpers ---- */

static struct collect_session *S(void)
{
	return collect_process_session;
}

/* A session begins (as cuptrace_collect_start does) / ends. */
static void session(int running)
{
	if (running) {
		S()->pid = getpid();
		collect_ranges_reset();
	}
	atomic_store(&S()->state, running ? ST_RUNNING : ST_IDLE);
}

static void reset_stubs(void)
{
	nbegins = nends = nsteps = 0;
	begin_name[0] = 0;
	begin_key = end_key = 0;
}

static int64_t boot_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const CUpti_ActivityMarker2 *rec(struct collect_range_rec *r, size_t i)
{
	return &r[i].m;
}

/* ---- tests ---- */

static void test_outside_a_session_only_the_stack(void)
{
	reset_stubs();
	session(0);
	CHECK_EQ_INT(collect_range_push(S(), "a"), 0);
	CHECK_EQ_INT(collect_range_push(S(), "win"), 0);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	CHECK_EQ_INT(collect_range_pop(S()), -EINVAL); /* nothing open on this thread */
	CHECK_EQ_INT(collect_range_push(S(), NULL), -EINVAL);
	CHECK_EQ_INT(collect_range_pop(S()), -EINVAL); /* the NULL push pushed nothing */
	struct collect_range_rec *r;
	size_t n = collect_ranges_drain(&r);
	CHECK_EQ_INT(n, 0);
	collect_ranges_release(r, n);
	/* The window code heard of the range (it decides itself whether a session runs). */
	CHECK_EQ_INT(nbegins, 1);
	CHECK_EQ_INT(nends, 1);
}

static void test_records_and_window_events(void)
{
	reset_stubs();
	session(1);
	int64_t t0 = boot_now();
	CHECK_EQ_INT(collect_range_push(S(), "outer"), 0);
	CHECK_EQ_INT(collect_range_push(S(), "win"), 0);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	CHECK_EQ_INT(collect_range_push(S(), "iter"), 0);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	int64_t t1 = boot_now();
	CHECK_EQ_INT(collect_range_pop(S()), -EINVAL);
	struct collect_range_rec *r;
	size_t n = collect_ranges_drain(&r);
	CHECK_EQ_INT(n, 6);
	if (n != 6) {
		collect_ranges_release(r, n);
		return;
	}
	/* In call order: START outer, START win, END win, START iter, END iter, END outer. */
	static const char *const names[] = {"outer", "win", NULL, "iter", NULL, NULL};
	static const int starts[] = {1, 1, 0, 1, 0, 0};
	static const int pairs[] = {5, 2, 1, 4, 3, 0}; /* the other record of the same range */
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	int64_t last = t0;
	for (size_t i = 0; i < n; i++) {
		const CUpti_ActivityMarker2 *m = rec(r, i);
		CHECK_EQ_INT(m->kind, CUPTI_ACTIVITY_KIND_MARKER);
		CHECK_EQ_INT(m->flags, starts[i] ? CUPTI_ACTIVITY_FLAG_MARKER_START
		                                 : CUPTI_ACTIVITY_FLAG_MARKER_END);
		CHECK_EQ_INT(m->objectKind, CUPTI_ACTIVITY_OBJECT_THREAD);
		CHECK_EQ_INT(m->objectId.pt.processId, getpid());
		CHECK_EQ_INT(m->objectId.pt.threadId, tid);
		CHECK(m->domain == NULL); /* NVTX's default domain */
		if (names[i])
			CHECK_EQ_STR(m->name, names[i]);
		else
			CHECK(m->name == NULL);
		CHECK_EQ_INT(m->id, rec(r, (size_t)pairs[i])->id);
		CHECK((int64_t)m->timestamp >= last);
		last = (int64_t)m->timestamp;
	}
	CHECK(last <= t1);
	CHECK(rec(r, 0)->id != rec(r, 1)->id && rec(r, 1)->id != rec(r, 3)->id &&
	      rec(r, 0)->id != rec(r, 3)->id);
	/* The window code: "win" began and ended under one key (thread, depth 2); "iter" ended a
	 * step; "outer" is neither. */
	CHECK_EQ_INT(nbegins, 1);
	CHECK_EQ_STR(begin_name, "win");
	CHECK_EQ_INT(nends, 1);
	CHECK_EQ_INT(begin_key, end_key);
	CHECK_EQ_INT(begin_key, (uint64_t)tid << 16 | 2);
	CHECK_EQ_INT(nsteps, 1);

	/* What the converter draws of them, beside a range CUPTI recorded through NVTX on the
	 * same thread (ids of CUPTI's own counter), around ours. */
	CUpti_ActivityMarker2 nv[2];
	memset(nv, 0, sizeof(nv));
	for (int e = 0; e < 2; e++) {
		nv[e].kind = CUPTI_ACTIVITY_KIND_MARKER;
		nv[e].flags = e ? CUPTI_ACTIVITY_FLAG_MARKER_END : CUPTI_ACTIVITY_FLAG_MARKER_START;
		nv[e].timestamp = (uint64_t)(e ? t1 + 1000 : t0 - 1000);
		nv[e].id = 1;
		nv[e].objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
		nv[e].objectId.pt.processId = (uint32_t)getpid();
		nv[e].objectId.pt.threadId = tid;
		nv[e].name = e ? NULL : "nvtx range";
	}
	const CUpti_Activity *recs[8];
	uint32_t sizes[8];
	recs[0] = (const CUpti_Activity *)&nv[0];
	for (size_t i = 0; i < n; i++)
		recs[1 + i] = (const CUpti_Activity *)&r[i].m;
	recs[7] = (const CUpti_Activity *)&nv[1];
	for (size_t i = 0; i < 8; i++)
		sizes[i] = sizeof(CUpti_ActivityMarker2);
	struct rec_sink *sink = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = getpid(), .process_name = "p", .start_boottime_ns = t0 - 5000};
	struct cuptrace_converter *c = cuptrace_converter_new(&sink->base, &info, NULL);
	CHECK(c != NULL);
	if (c) {
		CHECK_EQ_INT(cuptrace_converter_add(c, recs, 8), 0);
		CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
		cuptrace_converter_free(c);
	}
	(void)sizes;
	const struct rslice *by[4] = {NULL, NULL, NULL, NULL};
	static const char *const want[] = {"nvtx range", "outer", "win", "iter"};
	for (size_t i = 0; i < sink->nslices; i++)
		for (int k = 0; k < 4; k++)
			if (!strcmp(sink->slices[i].name, want[k]))
				by[k] = &sink->slices[i];
	for (int k = 0; k < 4; k++) {
		CHECK(by[k] != NULL);
		if (!by[k])
			goto out;
		CHECK_EQ_STR(by[k]->cat, "nvtx");
		CHECK_EQ_INT(by[k]->track, by[0]->track); /* the thread's track, NVTX's too */
	}
	{
		struct rtrack *t = find_track(sink, by[0]->track);
		CHECK(t != NULL && t->t.tid == (int64_t)tid);
	}
	/* Times: the records' own, relative to the trace's start; nested. */
	CHECK_EQ_INT(by[1]->ts, (int64_t)rec(r, 0)->timestamp - info.start_boottime_ns);
	CHECK_EQ_INT(by[1]->dur, (int64_t)(rec(r, 5)->timestamp - rec(r, 0)->timestamp));
	CHECK_EQ_INT(by[2]->dur, (int64_t)(rec(r, 2)->timestamp - rec(r, 1)->timestamp));
	CHECK(by[0]->ts <= by[1]->ts && by[1]->ts + by[1]->dur <= by[0]->ts + by[0]->dur);
	CHECK(by[1]->ts <= by[2]->ts && by[2]->ts + by[2]->dur <= by[3]->ts);
	CHECK(by[3]->ts + by[3]->dur <= by[1]->ts + by[1]->dur);
out:
	r_destroy(&sink->base);
	collect_ranges_release(r, n);
	session(0);
}

/* A range open when its session ended gets no END in the next one; one pushed before a session
 * began gets none either (its START was never made). */
static void test_across_sessions(void)
{
	reset_stubs();
	session(1);
	CHECK_EQ_INT(collect_range_push(S(), "old"), 0);
	session(0);
	session(1); /* the next session: what the last one left pending went with it */
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	CHECK_EQ_INT(collect_range_push(S(), "new"), 0);
	session(0);
	CHECK_EQ_INT(collect_range_pop(S()), 0); /* after the end: no END */
	struct collect_range_rec *r;
	size_t n = collect_ranges_drain(&r);
	CHECK_EQ_INT(n, 1);
	if (n == 1) {
		CHECK_EQ_STR(rec(r, 0)->name, "new");
		CHECK_EQ_INT(rec(r, 0)->flags, CUPTI_ACTIVITY_FLAG_MARKER_START);
	}
	collect_ranges_release(r, n);
	session(0);
}

static void *pop_elsewhere(void *arg)
{
	*(int *)arg = collect_range_pop(S());
	return NULL;
}

/* The stack is the thread's: another thread cannot pop this one's range. */
static void test_per_thread(void)
{
	session(1);
	CHECK_EQ_INT(collect_range_push(S(), "mine"), 0);
	int rc = 0;
	pthread_t t;
	CHECK_EQ_INT(pthread_create(&t, NULL, pop_elsewhere, &rc), 0);
	pthread_join(t, NULL);
	CHECK_EQ_INT(rc, -EINVAL);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	struct collect_range_rec *r;
	size_t n = collect_ranges_drain(&r);
	CHECK_EQ_INT(n, 2);
	collect_ranges_release(r, n);
	session(0);
}

/* The flight recorder keeps CUPTI's buffers only: no records, but the step rule holds. */
static void test_ring_makes_no_records(void)
{
	reset_stubs();
	session(1);
	S()->win.ring = 1;
	CHECK_EQ_INT(collect_range_push(S(), "iter"), 0);
	CHECK_EQ_INT(collect_range_pop(S()), 0);
	S()->win.ring = 0;
	struct collect_range_rec *r;
	size_t n = collect_ranges_drain(&r);
	CHECK_EQ_INT(n, 0);
	collect_ranges_release(r, n);
	CHECK_EQ_INT(nsteps, 1);
	session(0);
}

/* Deeper than the stack remembers: the pops still match, records for the first 256 only. */
static void test_deep(void)
{
	session(1);
	for (int i = 0; i < 300; i++)
		CHECK_EQ_INT(collect_range_push(S(), "deep"), 0);
	int bad = 0;
	for (int i = 0; i < 300; i++)
		bad += collect_range_pop(S()) != 0;
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(collect_range_pop(S()), -EINVAL);
	struct collect_range_rec *r;
	size_t n = collect_ranges_drain(&r);
	CHECK_EQ_INT(n, 2 * 256);
	size_t ends = 0;
	for (size_t i = 0; i < n; i++)
		ends += rec(r, i)->flags == CUPTI_ACTIVITY_FLAG_MARKER_END;
	CHECK_EQ_INT(ends, 256);
	collect_ranges_release(r, n);
	session(0);
}

TEST_MAIN(T(test_outside_a_session_only_the_stack), T(test_records_and_window_events),
          T(test_across_sessions), T(test_per_thread), T(test_ring_makes_no_records), T(test_deep))
