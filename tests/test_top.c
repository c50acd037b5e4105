/* cuptrace top's parts on the CPU: the aggregator's intervals (busy as the union clipped to each
 * window, late work, kernels, NCCL collectives, copies, memory, steps, sorting) against numbers
 * worked out by hand below; and tailing a capture that grows a few bytes at a time, against a
 * whole-file replay of the same capture (the same records, the same kernel names, the END). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "convert/capture.h"
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

TEST_MAIN(T(test_intervals), T(test_tail))
