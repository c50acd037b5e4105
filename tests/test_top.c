/* cuptrace top's parts on the CPU: the aggregator's intervals (busy as the union clipped to each
 * window, late work, kernels, NCCL collectives, copies, memory, steps, sorting) against numbers
 * worked out by hand below; and tailing a capture that grows a few bytes at a time, against a
 * whole-file replay of the same capture (the same records, the same kernel names, the END). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "convert/capture.h"
#include "top/cpu.h"
#include "top/top.h"

static void track(struct cuptrace_sink *s, uint64_t uuid, enum cuptrace_track_kind kind,
                  uint64_t parent, const char *name)
{
	struct cuptrace_track t = {
	    .uuid = uuid, .kind = kind, .parent_uuid = parent, .pid = 7, .name = name};
	CHECK_EQ_INT(s->ops->track(s, &t), 0);
}

static void slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                  const char *name)
{
	struct cuptrace_slice e = {
	    .track_uuid = trk, .ts = ts, .dur = dur, .name = name, .category = cat};
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
}

static const struct top_row *row(const struct top_tab *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i].name, name))
			return &t->v[i];
	return NULL;
}

static void test_intervals(void)
{
	struct cuptrace_top t;
	CHECK_EQ_INT(cuptrace_top_init(&t), 0);
	struct cuptrace_sink *s = cuptrace_top_sink_new(&t);
	CHECK(s != NULL);
	if (!s)
		return;
	struct cuptrace_trace_info info = {.pid = 7, .process_name = "train"};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	CHECK_EQ_INT(cuptrace_top_sink_proc(s), 0);
	track(s, 1, CUPTRACE_TRACK_PROCESS, 0, "train");
	track(s, 2, CUPTRACE_TRACK_GROUP, 1, "GPU 0: Test GPU");
	track(s, 3, CUPTRACE_TRACK_SLICES, 2, "Stream 7");
	track(s, 4, CUPTRACE_TRACK_SLICES, 2, "Stream 8");
	track(s, 5, CUPTRACE_TRACK_COUNTER, 2, "Device memory in use");
	track(s, 6, CUPTRACE_TRACK_THREAD, 1, "main");

	/* Interval 1: A [0,100) and B [50,150) on two streams overlap: union 150; a copy
	 * [300,350) of 1000 pageable bytes host to device: busy 200 of the window [0,400). */
	slice(s, 3, 0, 100, "kernel", "A");
	slice(s, 4, 50, 100, "kernel", "B");
	struct cuptrace_arg a[] = {{.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = 1000},
	                           {.key = "kind", .type = CUPTRACE_ARG_STRING, .v.s = "HtoD"},
	                           {.key = "src", .type = CUPTRACE_ARG_STRING, .v.s = "pageable"},
	                           {.key = "dst", .type = CUPTRACE_ARG_STRING, .v.s = "device"}};
	struct cuptrace_slice cp = {.track_uuid = 3,
	                            .ts = 300,
	                            .dur = 50,
	                            .name = "Memcpy HtoD",
	                            .category = "memcpy",
	                            .args = a,
	                            .nargs = 4};
	CHECK_EQ_INT(s->ops->slice(s, &cp), 0);
	slice(s, 6, 0, 10, "cuda_runtime", "cudaLaunchKernel");
	slice(s, 6, 20, 10, "cuda_runtime", "cudaLaunchKernel");
	struct cuptrace_counter m1 = {.track_uuid = 5, .ts = 0, .i = 500},
	                        m2 = {.track_uuid = 5, .ts = 20, .i = 800},
	                        m3 = {.track_uuid = 5, .ts = 30, .i = 300};
	CHECK_EQ_INT(s->ops->counter(s, &m1), 0);
	CHECK_EQ_INT(s->ops->counter(s, &m2), 0);
	CHECK_EQ_INT(s->ops->counter(s, &m3), 0);
	cuptrace_top_advance(&t, 0, 400);
	CHECK_EQ_INT(cuptrace_top_tick(&t, 1000000000), 0);
	CHECK_EQ_INT(t.ngpus, 1);
	const struct top_gpu *g = &t.gpus[0];
	CHECK_EQ_INT(g->win_last, 400);
	CHECK_EQ_INT(g->busy_last, 200);
	CHECK_EQ_INT(g->kern_last.calls, 2);
	CHECK_EQ_INT(g->mem, 300);
	CHECK_EQ_INT(g->mem_peak, 800);
	CHECK_EQ_INT(t.copy_last.htod, 1000);
	CHECK_EQ_INT(t.copy_last.pageable, 1000);
	CHECK_EQ_INT(t.copy_last.dtoh, 0);
	const struct top_row *r = row(&t.api, "cudaLaunchKernel");
	CHECK(r && r->last.calls == 2 && r->last.ns == 20);
	r = row(&t.kernels, "B");
	CHECK(r && r->last.calls == 1 && r->last.ns == 100);
	/* The streams: A and the copy on stream 7, B on stream 8. */
	r = row(&t.streams, "GPU 0 Stream 7");
	CHECK(r && r->last.calls == 2 && r->last.ns == 150);

	/* Interval 2, the window [400,600): A [350,450) counts its [400,450); a late kernel C
	 * [100,200), before the window, counts in kernels, not in busy; an NCCL kernel [500,600).
	 * Busy 50 + 100 = 150. Two optimizer.step marks. */
	slice(s, 3, 350, 100, "kernel", "A");
	slice(s, 4, 100, 100, "kernel", "C");
	slice(s, 4, 500, 100, "kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
	struct cuptrace_instant st = {.track_uuid = 6, .ts = 450, .name = "optimizer.step"};
	CHECK_EQ_INT(s->ops->instant(s, &st), 0);
	st.ts = 550;
	CHECK_EQ_INT(s->ops->instant(s, &st), 0);
	CHECK_EQ_INT(cuptrace_top_tick(&t, 500000000), 0);
	CHECK_EQ_INT(g->win_last, 200);
	CHECK_EQ_INT(g->busy_last, 150);
	CHECK_EQ_INT(g->busy_tot, 350);
	CHECK_EQ_INT(g->win_tot, 600);
	CHECK_EQ_INT(g->kern_last.calls, 3);
	CHECK_EQ_INT(g->kern_tot.calls, 5);
	CHECK_EQ_INT(t.step_last.calls, 2);
	CHECK_EQ_INT(t.last_dt, 500000000);
	r = row(&t.kernels, "A");
	CHECK(r && r->last.calls == 1 && r->tot.calls == 2 && r->tot.ns == 200);
	r = row(&t.nccl, "AllReduce");
	CHECK(r && r->last.calls == 1 && r->last.ns == 100);
	CHECK_EQ_INT(t.copy_last.htod, 0);
	CHECK_EQ_INT(t.copy_tot.htod, 1000);

	/* Sorting by the interval's calls, then total time, then name: A, C, nccl all 1 call
	 * this interval; A has 200 ns in total, C and nccl 100 (C before n by name). */
	size_t *o = cuptrace_top_order(&t.kernels, TOP_SORT_CALLS);
	CHECK(o != NULL);
	if (o) {
		CHECK_EQ_STR(t.kernels.v[o[0]].name, "A");
		CHECK_EQ_STR(t.kernels.v[o[1]].name, "C");
		CHECK_EQ_STR(t.kernels.v[o[2]].name, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
		CHECK_EQ_STR(t.kernels.v[o[3]].name, "B"); /* no call this interval */
	}
	free(o);

	/* JSON: one line, parsed back for two numbers. */
	char *js = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&js, &len);
	CHECK_EQ_INT(cuptrace_top_json(&t, f, 1.5), 0);
	fclose(f);
	CHECK(js && len > 0 && js[len - 1] == '\n' && !memchr(js, '\n', len - 1));
	CHECK(js && strstr(js, "\"busy_pct\":75,") != NULL);
	CHECK(js && strstr(js, "\"totals\":{\"kernels\":5,\"kernel_ns\":500,") != NULL);
	free(js);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(t.procs[0].ended, 1);
	cuptrace_sink_destroy(s);
	cuptrace_top_free(&t);
}

/* What a replay saw: records, their kinds summed, and kernel names hashed in order. */
struct seen {
	struct cuptrace_capture_reader *r;
	uint64_t records, kinds, names;
	int threads;
};

static int on_records(void *ctx, const CUpti_Activity *const *recs, size_t n)
{
	struct seen *s = ctx;
	for (size_t i = 0; i < n; i++) {
		s->records++;
		s->kinds += recs[i]->kind;
		if (recs[i]->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			const CUpti_ActivityKernel10 *k = (const void *)recs[i];
			const char *nm = cuptrace_capture_resolve(s->r, k->name);
			for (const char *p = nm ? nm : "?"; *p; p++)
				s->names = s->names * 31 + (unsigned char)*p;
		}
	}
	return 0;
}

static int on_thread(void *ctx, int64_t tid, const char *name)
{
	(void)tid;
	(void)name;
	((struct seen *)ctx)->threads++;
	return 0;
}

static void test_tail(void)
{
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	char in[4096];
	snprintf(in, sizeof(in), "%s/multi_stream.cupti", dir ? dir : "tests/data");
	struct seen whole = {0}, tail = {0};
	whole.r = cuptrace_capture_reader_open(in);
	CHECK(whole.r != NULL);
	if (!whole.r)
		return;
	struct cuptrace_capture_ops ops = {
	    .ctx = &whole, .records = on_records, .thread = on_thread};
	uint64_t cut = 1;
	const char *bad = "x";
	CHECK_EQ_INT(cuptrace_capture_replay(whole.r, &ops, &cut, &bad), 0);
	CHECK_EQ_INT(cut, 0);
	CHECK(whole.records > 1000);
	size_t size = cuptrace_capture_size(whole.r);
	cuptrace_capture_reader_close(whole.r);

	/* The same bytes appended 4093 at a time (items are cut anywhere), polled after each. */
	char out[] = "/tmp/cuptrace-top-tail-XXXXXX";
	int wfd = mkstemp(out);
	int rfd = open(in, O_RDONLY);
	CHECK(wfd >= 0 && rfd >= 0);
	tail.r = cuptrace_capture_tail_open(out);
	CHECK(tail.r != NULL);
	ops.ctx = &tail;
	int ended = 0, polls = 0;
	const char *why = NULL;
	char buf[4093];
	ssize_t n;
	/* Nothing written yet: nothing replayed, no error. */
	CHECK_EQ_INT(tail.r ? cuptrace_capture_tail_poll(tail.r, &ops, &ended, &why) : -1, 0);
	size_t copied = 0;
	while (tail.r && (n = read(rfd, buf, sizeof(buf))) > 0) {
		CHECK_EQ_INT(write(wfd, buf, (size_t)n), n);
		copied += (size_t)n;
		CHECK_EQ_INT(cuptrace_capture_tail_poll(tail.r, &ops, &ended, &why), 0);
		CHECK_EQ_INT(ended, copied == size);
		polls++;
	}
	CHECK(polls > 10);
	CHECK_EQ_INT(ended, 1);
	CHECK_EQ_INT(tail.records, whole.records);
	CHECK_EQ_INT(tail.kinds, whole.kinds);
	CHECK_EQ_INT(tail.names, whole.names);
	CHECK_EQ_INT(tail.threads, whole.threads);
	cuptrace_capture_reader_close(tail.r);
	close(rfd);
	close(wfd);

	/* Not a capture: refused once its header is there. */
	wfd = open(out, O_WRONLY | O_TRUNC);
	CHECK_EQ_INT(write(wfd, "this is not a capture file", 26), 26);
	close(wfd);
	tail.r = cuptrace_capture_tail_open(out);
	CHECK(tail.r != NULL);
	if (tail.r) {
		CHECK_EQ_INT(cuptrace_capture_tail_poll(tail.r, &ops, &ended, &why), -EINVAL);
		cuptrace_capture_reader_close(tail.r);
	}
	unlink(out);
}

/* A slice with a correlation id and flows (0: none). */
static void linked(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                   const char *name, uint64_t corr, uint64_t flow_out, uint64_t flow_in)
{
	struct cuptrace_slice e = {.track_uuid = trk,
	                           .ts = ts,
	                           .dur = dur,
	                           .name = name,
	                           .category = cat,
	                           .correlation_id = corr,
	                           .flows_out = &flow_out,
	                           .nflows_out = flow_out != 0,
	                           .flows_in = &flow_in,
	                           .nflows_in = flow_in != 0};
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
}

/* Idle by cause (analyze's definitions), worked out by hand. Thread 11 launches K1 [20,50)
 * at 0; sits in cudaStreamSynchronize [55,100); launches K2 [130,150) at 100: the gap [50,130)
 * is host_sync 50 ([50,100), the thread in a synchronize) + launch_latency 30. K3 [210,220)
 * is linked by its flow to the launch at 200 (its correlation id names no call: the flow
 * wins, as in analyze): the gap [150,210) is host_wait 50 + launch_latency 10. Interval 2:
 * K4 [300,310) has no known launch: the gap [220,300) is other 80, counted in the interval in
 * which K4 came. */
static void test_idle(void)
{
	struct cuptrace_top t;
	CHECK_EQ_INT(cuptrace_top_init(&t), 0);
	struct cuptrace_sink *s = cuptrace_top_sink_new(&t);
	CHECK(s != NULL);
	if (!s)
		return;
	struct cuptrace_trace_info info = {.pid = 7, .process_name = "train"};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	track(s, 1, CUPTRACE_TRACK_PROCESS, 0, "train");
	track(s, 2, CUPTRACE_TRACK_GROUP, 1, "GPU 0: Test GPU");
	track(s, 3, CUPTRACE_TRACK_SLICES, 2, "Stream 7");
	struct cuptrace_track th = {
	    .uuid = 6, .kind = CUPTRACE_TRACK_THREAD, .parent_uuid = 1, .pid = 7, .tid = 11};
	th.name = "main";
	CHECK_EQ_INT(s->ops->track(s, &th), 0);
	linked(s, 6, 0, 10, "cuda_runtime", "cudaLaunchKernel", 1, 0, 0);
	linked(s, 6, 55, 45, "cuda_runtime", "cudaStreamSynchronize", 5, 0, 0);
	linked(s, 6, 100, 10, "cuda_runtime", "cudaLaunchKernel", 2, 0, 0);
	linked(s, 6, 200, 5, "cuda_runtime", "cudaLaunchKernel", 3, 77, 0);
	linked(s, 3, 20, 30, "kernel", "K1", 1, 0, 0);
	linked(s, 3, 130, 20, "kernel", "K2", 2, 0, 0);
	linked(s, 3, 210, 10, "kernel", "K3", 999, 0, 77);
	CHECK_EQ_INT(cuptrace_top_tick(&t, 1000), 0);
	const struct top_gpu *g = &t.gpus[0];
	CHECK_EQ_INT(g->idle_last[CUPTRACE_IDLE_HOST_SYNC], 50);
	CHECK_EQ_INT(g->idle_last[CUPTRACE_IDLE_HOST_WAIT], 50);
	CHECK_EQ_INT(g->idle_last[CUPTRACE_IDLE_LAUNCH], 40);
	CHECK_EQ_INT(g->idle_last[CUPTRACE_IDLE_OTHER], 0);
	linked(s, 3, 300, 10, "kernel", "K4", 12345, 0, 0);
	CHECK_EQ_INT(cuptrace_top_tick(&t, 1000), 0);
	CHECK_EQ_INT(g->idle_last[CUPTRACE_IDLE_OTHER], 80);
	CHECK_EQ_INT(g->idle_last[CUPTRACE_IDLE_HOST_WAIT], 0);
	CHECK_EQ_INT(g->idle_tot[CUPTRACE_IDLE_HOST_WAIT], 50);
	CHECK_EQ_INT(g->idle_tot[CUPTRACE_IDLE_HOST_SYNC], 50);
	CHECK_EQ_INT(g->idle_tot[CUPTRACE_IDLE_OTHER], 80);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	s->ops->destroy(s);
	cuptrace_top_free(&t);
}

static volatile int spin_stop;

struct spin {
	const char *name;
	volatile int64_t cpu; /* its own CPU clock once stopped; -1 before */
};

/* Burns CPU under a name until spin_stop is 1, notes its own CPU time, and stays alive (so
 * that /proc still lists it) until spin_stop is 2. */
static void *spinner(void *arg)
{
	struct spin *sp = arg;
	prctl(PR_SET_NAME, sp->name, 0, 0, 0);
	while (spin_stop < 1)
		;
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	sp->cpu = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	struct timespec nap = {0, 1000000};
	while (spin_stop < 2)
		nanosleep(&nap, NULL);
	return NULL;
}

/* The tracer's own CPU: a thread named cuptrace-test spins 300 ms and another, not named so,
 * as long. Counted by name, /proc gives the first's CPU (its own clock; /proc counts in clock
 * ticks, 10 ms steps) and not the second's. */
static void test_cpu(void)
{
	int64_t before, after;
	int nth = -1;
	CHECK_EQ_INT(cuptrace_top_cpu_ns(getpid(), 1, &before, &nth), 0);
	CHECK_EQ_INT(nth, 0);
	CHECK_EQ_INT(before, 0);
	pthread_t a, b;
	struct spin sa = {"cuptrace-test", -1}, sb = {"someone-else", -1};
	spin_stop = 0;
	CHECK_EQ_INT(pthread_create(&a, NULL, spinner, &sa), 0);
	CHECK_EQ_INT(pthread_create(&b, NULL, spinner, &sb), 0);
	struct timespec ts = {0, 300000000}, nap = {0, 1000000};
	nanosleep(&ts, NULL);
	spin_stop = 1;
	while (sa.cpu < 0 || sb.cpu < 0)
		nanosleep(&nap, NULL);
	CHECK_EQ_INT(cuptrace_top_cpu_ns(getpid(), 1, &after, &nth), 0);
	spin_stop = 2;
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("cpu: named %lld ms by /proc, its own clock %lld ms, the other %lld ms\n",
	       (long long)(after / 1000000), (long long)(sa.cpu / 1000000),
	       (long long)(sb.cpu / 1000000));
	CHECK_EQ_INT(nth, 1);
	CHECK(after >= sa.cpu - 20000000 && after <= sa.cpu + 20000000);
	CHECK(sa.cpu > 0);
	CHECK_EQ_INT(cuptrace_top_cpu_ns(-5, 1, &after, NULL) < 0, 1);
}

TEST_MAIN(T(test_intervals), T(test_tail), T(test_idle), T(test_cpu))
