/* The planted problems of tests/gpu_analyze_test.sh as synthetic traces with known answers: a
 * pageable copy, an .item() (small DtoH copy and the synchronize that waits for it), a flood of
 * tiny kernels, an allocation each step, a clean GPU-bound loop. Each is found severe, and no
 * other finding is: every GPU gap of the steady state goes to the finding that explains it
 * (computed here from the test's own lists of GPU work and host calls), none is a gpu_gap of its
 * own. The pageable loop has a 200 ms idle start-up: severity is judged against the steady state
 * (end of the first step to the end of the last), where its total is over 5%, though under 5% of
 * the whole trace. */
#include "analyze/analyze.h"
#include "check.h"
#include "steps.h"

#include <stdio.h>
#include <string.h>

enum { PROC = 1, MAIN, GPU, STREAM };
#define US 1000ll

/* The test's own record of what it fed: GPU work (with its launch call's start) and the
 * blocking host calls on main. */
struct work {
	int64_t ts, end, launch;
};
struct call {
	int64_t ts, end;
};
struct feed {
	struct cuptrace_sink *s;
	struct work w[4096];
	size_t nw;
	struct call c[256];
	size_t nc;
	int64_t step_ts[16], step_end[16];
	int nsteps;
	uint64_t flow;
};

static void begin(struct feed *f, struct cuptrace_analysis *a)
{
	memset(f, 0, sizeof(*f));
	f->flow = 1;
	f->s = cuptrace_analyze_sink_new(a, NULL);
	struct cuptrace_sink *s = f->s;
	struct cuptrace_trace_info info = {.pid = 900, .process_name = "train"};
	steps_err = s->ops->begin(s, &info);
	steps_track(
	    s, (struct cuptrace_track){.uuid = PROC, .kind = CUPTRACE_TRACK_PROCESS, .pid = 900});
	steps_track(s, (struct cuptrace_track){.uuid = MAIN,
	                                       .kind = CUPTRACE_TRACK_THREAD,
	                                       .parent_uuid = PROC,
	                                       .pid = 900,
	                                       .tid = 900,
	                                       .name = "main"});
	steps_track(s, (struct cuptrace_track){.uuid = GPU,
	                                       .kind = CUPTRACE_TRACK_GROUP,
	                                       .parent_uuid = PROC,
	                                       .pid = 900,
	                                       .name = "GPU 0: NVIDIA H100"});
	steps_track(s, (struct cuptrace_track){.uuid = STREAM,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = GPU,
	                                       .pid = 900,
	                                       .name = "Stream 7"});
}

static void step(struct feed *f, int64_t ts, int64_t dur)
{
	char name[32];
	snprintf(name, sizeof(name), "ProfilerStep#%d", f->nsteps);
	steps_slice(f->s, MAIN, ts, dur, "user_annotation", name, NULL, 0, 0, 0);
	f->step_ts[f->nsteps] = ts;
	f->step_end[f->nsteps++] = ts + dur;
}

/* A call on main (lt, ld) launching work (cat, name) at [kt, kt + kd); blocking: recorded as a
 * call that kept main from launching. */
static void launch(struct feed *f, const char *call, int64_t lt, int64_t ld, const char *cat,
                   const char *name, int64_t kt, int64_t kd, uint64_t bytes, int blocking)
{
	struct cuptrace_arg b = {.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = bytes};
	steps_slice(f->s, MAIN, lt, ld, "cuda_runtime", call, NULL, 0, f->flow, 0);
	steps_slice(f->s, STREAM, kt, kd, cat, name, &b, bytes != 0, 0, f->flow++);
	f->w[f->nw++] = (struct work){kt, kt + kd, lt};
	if (blocking)
		f->c[f->nc++] = (struct call){lt, lt + ld};
}

static void call(struct feed *f, const char *name, int64_t ts, int64_t dur)
{
	steps_slice(f->s, MAIN, ts, dur, "cuda_runtime", name, NULL, 0, 0, 0);
	f->c[f->nc++] = (struct call){ts, ts + dur};
}

static void finish(struct feed *f)
{
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(f->s->ops->finish(f->s), 0);
	cuptrace_sink_destroy(f->s);
}

/* The steady state, the test's way: end of the first step to the end of the last. */
static void window(const struct feed *f, int64_t *from, int64_t *to)
{
	*from = f->step_end[0];
	*to = f->step_end[f->nsteps - 1];
}

/* The GPU gaps wholly inside the steady state (one stream, work in time order): their sum, and
 * the sum of each gap less the time main spent in blocking calls between the gap's start and the
 * next work's launch; *unexplained: gaps in which main sat in none, at least min long. */
static void gaps(const struct feed *f, int64_t min, int64_t *all, int64_t *less_blocked,
                 int64_t *unexplained)
{
	int64_t from, to;
	window(f, &from, &to);
	*all = *less_blocked = *unexplained = 0;
	for (size_t i = 1; i < f->nw; i++) {
		int64_t g0 = f->w[i - 1].end, g1 = f->w[i].ts;
		if (g1 <= g0 || g0 < from || g1 > to)
			continue;
		int64_t h = f->w[i].launch < g0 ? g0 : f->w[i].launch > g1 ? g1 : f->w[i].launch;
		int64_t in = 0;
		for (size_t k = 0; k < f->nc; k++) {
			int64_t s = f->c[k].ts > g0 ? f->c[k].ts : g0;
			int64_t e = f->c[k].end < h ? f->c[k].end : h;
			in += e > s ? e - s : 0;
		}
		*all += g1 - g0;
		*less_blocked += g1 - g0 - in;
		if (!in && g1 - g0 >= min)
			*unexplained += g1 - g0;
	}
}

static const struct cuptrace_an_finding *find(const struct cuptrace_analysis *a, const char *id)
{
	for (size_t i = 0; i < a->nfindings; i++)
		if (!strcmp(a->findings[i].id, id))
			return &a->findings[i];
	return NULL;
}

/* Exactly one severe finding, want (NULL: none), and the steady state the test computes. */
static void one_severe(const struct feed *f, const struct cuptrace_analysis *a, const char *want)
{
	int64_t from, to;
	window(f, &from, &to);
	CHECK(a->steady_steps && a->steady_from == from && a->steady_to == to);
	size_t n = 0;
	for (size_t i = 0; i < a->nfindings; i++) {
		if (!a->findings[i].severe)
			continue;
		n++;
		if (!want || strcmp(a->findings[i].id, want))
			fprintf(stderr, "unexpected severe finding %s\n", a->findings[i].id);
		CHECK(want && !strcmp(a->findings[i].id, want));
	}
	CHECK_EQ_INT(n, want ? 1 : 0);
	const struct cuptrace_an_finding *w = want ? find(a, want) : NULL;
	CHECK(!want || (w && w->total_ns * 20 >= to - from));
	CHECK(!find(a, "gpu_gap") && !find(a, "host_sync_idle"));
}

/* Start-up: a copy at 1 ms, then the GPU idle until the loop at 200 ms. Each 1 ms step: a
 * cudaMemcpyAsync from pageable memory that blocks main for 290 us, its copy on the GPU late in
 * it, then a 600 us kernel launched after it. Every gap is the pageable copy's. */
static void test_pageable(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	launch(&f, "cudaMemcpyAsync", 900 * US, 50 * US, "memcpy", "Memcpy HtoD (Pinned -> Device)",
	       1000 * US, 100 * US, 4096, 0);
	for (int i = 0; i < 10; i++) {
		int64_t t = 200000 * US + 1000 * US * i;
		step(&f, t, 1000 * US);
		launch(&f, "cudaMemcpyAsync", t + 10 * US, 290 * US, "memcpy",
		       "Memcpy HtoD (Pageable -> Device)", t + 200 * US, 90 * US, 8 << 20, 1);
		launch(&f, "cudaLaunchKernel", t + 310 * US, 5 * US, "kernel", "gemm", t + 320 * US,
		       600 * US, 0, 0);
	}
	finish(&f);
	int64_t from, to, all, less, unexp, copies = 0;
	window(&f, &from, &to);
	gaps(&f, 100 * US, &all, &less, &unexp);
	for (size_t i = 0; i < f.nw; i += 1)
		if (i % 2 == 1 && f.w[i].ts >= from && f.w[i].ts < to)
			copies += f.w[i].end - f.w[i].ts; /* the pageable copies: odd entries */
	const struct cuptrace_an_finding *p = find(&a, "pageable_copy");
	CHECK(p && p->count == 9 && p->total_ns == copies + all && p->idle_ns == all);
	one_severe(&f, &a, "pageable_copy");
	/* Over 5% of the steady state, under 5% of the whole: severe all the same. */
	CHECK(p && p->total_ns * 20 < a.max_ts - a.min_ts);
	CHECK(find(&a, "outside_steady") != NULL);
	cuptrace_analysis_free(&a);
}

/* Each 1 ms step: a 680 us kernel; then .item(): cudaMemcpyAsync of 4 bytes DtoH and a
 * cudaStreamSynchronize that returns 3 us after the copy, both in _local_scalar_dense; then
 * Python until the next step. The gap after each copy is the item's, not a host sync's. */
static void test_item(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t blocked = 0, from = 0;
	for (int i = 0; i < 10; i++) {
		int64_t t = 5000 * US + 1000 * US * i;
		step(&f, t, 1000 * US);
		launch(&f, "cudaLaunchKernel", t + 10 * US, 5 * US, "kernel", "gemm", t + 20 * US,
		       680 * US, 0, 0);
		steps_slice(f.s, MAIN, t + 25 * US, 681 * US, "cpu_op", "aten::_local_scalar_dense",
		            NULL, 0, 0, 0);
		launch(&f, "cudaMemcpyAsync", t + 30 * US, 10 * US, "memcpy",
		       "Memcpy DtoH (Device -> Pageable)", t + 700 * US, 2 * US, 4, 0);
		call(&f, "cudaStreamSynchronize", t + 45 * US, 660 * US);
		from = f.step_end[0];
		if (t + 700 * US >= from)
			blocked += (t + 705 * US) - (t + 30 * US); /* the call to the sync's end */
	}
	finish(&f);
	int64_t all, less, unexp;
	gaps(&f, 100 * US, &all, &less, &unexp);
	const struct cuptrace_an_finding *it = find(&a, "item_copy");
	CHECK(it && it->count == 9 && it->total_ns == blocked + less && it->idle_ns == less);
	CHECK(all > less && unexp == 0);
	one_severe(&f, &a, "item_copy");
	CHECK(!find(&a, "pageable_copy"));
	cuptrace_analysis_free(&a);
}

/* Each 2.2 ms step: a 780 us kernel, then a Python loop of 150 kernels of 2 us launched 8 us
 * apart, with a 150 us pause after the 75th. The pause's gap is the tiny run's; the run is not a
 * launch-bound stretch again. */
static void test_tiny(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t runs = 0;
	for (int i = 0; i < 6; i++) {
		int64_t t = 5000 * US + 2200 * US * i;
		step(&f, t, 2200 * US);
		launch(&f, "cudaLaunchKernel", t + 10 * US, 5 * US, "kernel", "gemm", t + 20 * US,
		       780 * US, 0, 0);
		int64_t lt = t + 800 * US, first = 0, last = 0;
		for (int k = 0; k < 150; k++) {
			lt += k == 75 ? 150 * US : 8 * US;
			launch(&f, "cudaLaunchKernel", lt, 4 * US, "kernel", "add", lt + 3 * US,
			       2 * US, 0, 0);
			first = k ? first : lt + 3 * US;
			last = lt + 5 * US;
		}
		runs += last - first;
	}
	finish(&f);
	int64_t all, less, unexp;
	gaps(&f, 100 * US, &all, &less, &unexp);
	CHECK(unexp >= 150 * US * 4); /* the pauses: no call explains them, the run does */
	const struct cuptrace_an_finding *t = find(&a, "tiny_kernels");
	CHECK(t && t->count == 6 && t->total_ns == runs);
	CHECK(!find(&a, "launch_bound"));
	one_severe(&f, &a, "tiny_kernels");
	cuptrace_analysis_free(&a);
}

/* Each 1 ms step: cudaMalloc (80 us) then a kernel of 400 us, and at the step's end a cudaFree
 * that waits for it (the caching allocator emptied): the GPU idles through the free, the next
 * malloc, the launch. The gaps are the allocations'. */
static void test_alloc(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t calls = 0;
	for (int i = 0; i < 10; i++) {
		int64_t t = 5000 * US + 1000 * US * i;
		step(&f, t, 1000 * US);
		call(&f, "cudaMalloc", t + 10 * US, 80 * US);
		launch(&f, "cudaLaunchKernel", t + 100 * US, 5 * US, "kernel", "gemm", t + 110 * US,
		       400 * US, 0, 0);
		call(&f, "cudaFree", t + 120 * US, 400 * US);
		if (i)
			calls += 480 * US;
	}
	finish(&f);
	int64_t all, less, unexp;
	gaps(&f, 100 * US, &all, &less, &unexp);
	const struct cuptrace_an_finding *al = find(&a, "alloc_steady");
	CHECK(al && al->count == 18 && al->total_ns == calls + less && al->idle_ns == less);
	CHECK(unexp == 0);
	one_severe(&f, &a, "alloc_steady");
	cuptrace_analysis_free(&a);
}

/* A GPU-bound loop: the host launches ahead, the kernels run back to back (10 us apart). */
static void test_clean(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	for (int i = 0; i < 10; i++) {
		int64_t t = 5000 * US + 1000 * US * i;
		step(&f, t, 1000 * US);
		for (int k = 0; k < 4; k++)
			launch(&f, "cudaLaunchKernel", t + k * 20 * US, 5 * US, "kernel", "gemm",
			       t + 300 * US + k * 250 * US, 240 * US, 0, 0);
	}
	finish(&f);
	one_severe(&f, &a, NULL);
	cuptrace_analysis_free(&a);
}

/* Each 6.6 ms step: 20 kernels of 15 us launched 30 us apart (the GPU waits 15 us for each),
 * then a 6 ms GEMM launched on the same cadence, behind which the host queues the next step.
 * Each step is one launch-bound stretch, from its first kernel to the GEMM's start: the GEMM
 * itself, though it also waited for its launch, is not launch-bound time. */
static void test_launch_bound(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t runs = 0;
	for (int i = 0; i < 10; i++) {
		int64_t t = 5000 * US + 6600 * US * i;
		step(&f, t, 6600 * US);
		size_t first = f.nw;
		for (int k = 0; k <= 20; k++)
			launch(&f, "cudaLaunchKernel", t + k * 30 * US, 5 * US, "kernel",
			       k < 20 ? "add" : "gemm", t + k * 30 * US + 10 * US,
			       k < 20 ? 15 * US : 6000 * US, 0, 0);
		runs += f.w[f.nw - 1].ts - f.w[first].ts; /* first kernel to the GEMM's start */
	}
	finish(&f);
	const struct cuptrace_an_finding *lb = find(&a, "launch_bound");
	CHECK(lb && lb->count == 10 && lb->total_ns == runs);
	one_severe(&f, &a, "launch_bound");
	cuptrace_analysis_free(&a);
}

TEST_MAIN(T(test_pageable), T(test_item), T(test_tiny), T(test_alloc), T(test_clean),
          T(test_launch_bound))
