/* Which records fall in which capture window (src/window/wfilter.h), over synthetic CUPTI
 * records whose right windows are worked out by hand from the rule: GPU work goes with the API
 * call that launched it, everything else by its own time. */
#include <stdint.h>

#include "check.h"
#include "window/wfilter.h"

static CUpti_ActivityAPI api(uint32_t corr, uint64_t start)
{
	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a.correlationId = corr;
	a.start = start;
	a.end = start + 5;
	return a;
}

static CUpti_ActivityKernel10 kernel(uint32_t corr, uint64_t start)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.correlationId = corr;
	k.start = start;
	k.end = start + 3;
	return k;
}

static CUpti_ActivityMarker2 marker(uint32_t id, uint64_t ts, CUpti_ActivityFlag flags)
{
	CUpti_ActivityMarker2 m;
	memset(&m, 0, sizeof(m));
	m.kind = CUPTI_ACTIVITY_KIND_MARKER;
	m.id = id;
	m.timestamp = ts;
	m.flags = flags;
	return m;
}

static void test_windows(void)
{
	struct cuptrace_wfilter f;
	cuptrace_wfilter_init(&f);
	CHECK_EQ_INT(cuptrace_wfilter_open(&f, 1, 100), 0);
	cuptrace_wfilter_close(&f, 1, 200);
	CHECK_EQ_INT(cuptrace_wfilter_open(&f, 2, 300), 0);

	CUpti_ActivityAPI a1 = api(1, 50), a2 = api(2, 150), a3 = api(3, 250), a4 = api(4, 350),
	                  a5 = api(5, 199), edge_open = api(9, 100), edge_close = api(10, 200);
	/* corr 1: launched before window 1, ran inside it: out. corr 5: launched in window 1, ran
	 * long after it closed: in window 1. corr 6: its API record comes in a later buffer. */
	CUpti_ActivityKernel10 k1 = kernel(1, 120), k2 = kernel(2, 160), k5 = kernel(5, 450),
	                       k4 = kernel(4, 360), k6 = kernel(6, 385), k3 = kernel(3, 310);
	CUpti_ActivityMarker2 s1 = marker(1, 190, CUPTI_ACTIVITY_FLAG_MARKER_START),
	                      e1 = marker(1, 260, CUPTI_ACTIVITY_FLAG_MARKER_END),
	                      s2 = marker(2, 260, CUPTI_ACTIVITY_FLAG_MARKER_START),
	                      e2 = marker(2, 310, CUPTI_ACTIVITY_FLAG_MARKER_END),
	                      mark = marker(3, 320, CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS);
	CUpti_ActivityDevice5 dev;
	memset(&dev, 0, sizeof(dev));
	dev.kind = CUPTI_ACTIVITY_KIND_DEVICE;

	/* GPU records before their API records in the same buffer: still placed by them. */
	const CUpti_Activity *recs[] = {
	    (void *)&k1,   (void *)&k2,  (void *)&k5,        (void *)&k4,        (void *)&k6,
	    (void *)&k3,   (void *)&a1,  (void *)&a2,        (void *)&a3,        (void *)&a4,
	    (void *)&a5,   (void *)&s1,  (void *)&e1,        (void *)&s2,        (void *)&e2,
	    (void *)&mark, (void *)&dev, (void *)&edge_open, (void *)&edge_close};
	int64_t want[] = {CUPTRACE_WF_DROP,
	                  1,
	                  1,
	                  2,
	                  CUPTRACE_WF_HELD,
	                  CUPTRACE_WF_DROP,
	                  CUPTRACE_WF_DROP,
	                  1,
	                  CUPTRACE_WF_DROP,
	                  2,
	                  1,
	                  1,
	                  1,
	                  CUPTRACE_WF_DROP,
	                  CUPTRACE_WF_DROP,
	                  2,
	                  CUPTRACE_WF_ALL,
	                  1,
	                  1};
	size_t n = sizeof(recs) / sizeof(recs[0]);
	uint32_t sizes[32];
	int64_t v[32];
	for (size_t i = 0; i < n; i++)
		sizes[i] = recs[i]->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ? sizeof(k1)
		           : recs[i]->kind == CUPTI_ACTIVITY_KIND_RUNTIME         ? sizeof(a1)
		           : recs[i]->kind == CUPTI_ACTIVITY_KIND_MARKER          ? sizeof(s1)
		                                                                  : sizeof(dev);
	CHECK_EQ_INT(cuptrace_wfilter_batch(&f, recs, sizes, n, v), 0);
	for (size_t i = 0; i < n; i++) {
		if (v[i] != want[i])
			fprintf(stderr, "record %zu: verdict %lld, want %lld\n", i, (long long)v[i],
			        (long long)want[i]);
		CHECK_EQ_INT(v[i], want[i]);
	}
	const CUpti_Activity *const *out;
	const int64_t *outv;
	CHECK_EQ_INT(cuptrace_wfilter_released(&f, &out, &outv), 0);

	/* The API record of corr 6 arrives: the held kernel goes to window 2, as a copy. */
	CUpti_ActivityAPI a6 = api(6, 380);
	/* Kernels whose API record never comes (7 ran in window 1's time, 8 in window 2's). */
	CUpti_ActivityKernel10 k7 = kernel(7, 180), k8 = kernel(8, 390);
	const CUpti_Activity *recs2[] = {(void *)&a6, (void *)&k7, (void *)&k8};
	uint32_t sizes2[] = {sizeof(a6), sizeof(k7), sizeof(k8)};
	cuptrace_wfilter_batch(&f, recs2, sizes2, 3, v);
	CHECK_EQ_INT(v[0], 2);
	CHECK_EQ_INT(v[1], CUPTRACE_WF_HELD);
	CHECK_EQ_INT(v[2], CUPTRACE_WF_HELD);
	CHECK_EQ_INT(cuptrace_wfilter_released(&f, &out, &outv), 1);
	CHECK(out[0] != (const CUpti_Activity *)&k6); /* a copy */
	CHECK_EQ_INT(((const CUpti_ActivityKernel10 *)out[0])->correlationId, 6);
	CHECK_EQ_INT(outv[0], 2);

	/* Window 1 final: kernel 7 ran inside it, but its launch was never recorded (the API kinds
	 * were off: launched before the window), so it is dropped; kernel 8 ran after window 1
	 * closed, so it waits for window 2, whose end drops it too. */
	cuptrace_wfilter_final(&f, 1);
	CHECK_EQ_INT(cuptrace_wfilter_released(&f, &out, &outv), 0);
	CHECK_EQ_INT(f.nheld, 1);
	CHECK_EQ_INT(f.dropped, 1);
	cuptrace_wfilter_close(&f, 2, 400);
	cuptrace_wfilter_final(&f, 2);
	CHECK_EQ_INT(cuptrace_wfilter_released(&f, &out, &outv), 0);
	CHECK_EQ_INT(f.nheld, 0);
	CHECK_EQ_INT(f.held_total, 3);
	CHECK_EQ_INT(f.dropped, 2);
	CHECK_EQ_INT(f.placed_by_time, 0);
	cuptrace_wfilter_free(&f);
}

/* A held kernel that ran outside every window and whose API record never came is dropped
 * and counted; memory is given back. */
static void test_drop_held(void)
{
	struct cuptrace_wfilter f;
	cuptrace_wfilter_init(&f);
	cuptrace_wfilter_open(&f, 1, 1000);
	cuptrace_wfilter_close(&f, 1, 2000);
	CUpti_ActivityKernel10 k = kernel(42, 500);
	const CUpti_Activity *recs[] = {(void *)&k};
	uint32_t sizes[] = {sizeof(k)};
	int64_t v[1];
	cuptrace_wfilter_batch(&f, recs, sizes, 1, v);
	CHECK_EQ_INT(v[0], CUPTRACE_WF_HELD);
	cuptrace_wfilter_final(&f, 1);
	const CUpti_Activity *const *out;
	const int64_t *outv;
	CHECK_EQ_INT(cuptrace_wfilter_released(&f, &out, &outv), 0);
	CHECK_EQ_INT(f.dropped, 1);
	CHECK_EQ_INT(f.nheld, 0);
	cuptrace_wfilter_free(&f);
}

/* A record's place: the fields each kind is placed by. */
static void test_place(void)
{
	int64_t t;
	uint32_t corr;
	CUpti_ActivityMemset4 ms;
	memset(&ms, 0, sizeof(ms));
	ms.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	ms.start = 77;
	ms.correlationId = 5;
	CHECK_EQ_INT(cuptrace_wrecord_place((void *)&ms, &t, &corr), 1);
	CHECK_EQ_INT(t, 77);
	CHECK_EQ_INT(corr, 5);
	CUpti_ActivityMemory4 mem;
	memset(&mem, 0, sizeof(mem));
	mem.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	mem.timestamp = 99;
	mem.correlationId = 6;
	CHECK_EQ_INT(cuptrace_wrecord_place((void *)&mem, &t, &corr), 1);
	CHECK_EQ_INT(t, 99);
	CHECK_EQ_INT(corr, 6);
	CUpti_ActivityContext3 ctx;
	memset(&ctx, 0, sizeof(ctx));
	ctx.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
	CHECK_EQ_INT(cuptrace_wrecord_place((void *)&ctx, &t, &corr), 0);
}

TEST_MAIN({"windows", test_windows}, {"drop_held", test_drop_held}, {"place", test_place})
