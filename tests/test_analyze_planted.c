/* The planted problems of tests/gpu_analyze_test.sh as synthetic traces with known answers: a
 * pageable copy, an .item() (small DtoH copy and the synchronize that waits for it), a flood of
 * tiny kernels, an allocation each step, a clean GPU-bound loop. Each is found severe, and no
 * other finding is: every GPU gap of the steady state goes to the finding that explains it
 * (computed here from the test's own lists of GPU work and host calls), none is a gpu_gap of its
 * own. The pageable loop has a 200 ms idle start-up: severity is judged against the steady state
 * (end of the first step to the end of the last), where its total is over 5%, though under 5% of
 * the whole trace.
 *
 * Then the steps as users record them (README, Steps): an async loop (no synchronize per step)
 * with an NVTX range "step N" per step around its launches, periods jittering by +-10%, one step
 * slowed by an 80 ms host stall: the only outlier, its cause the host gap, busy % over its
 * period; the same loop with no marks at all after a start-up (its steps found in the GPU work,
 * the start-up never severe); a run with no steps at all (start-up still left out); steps from
 * optimizer.step() marks. Every step figure is computed here from the test's own lists.
 * Issue 43: pageable copies behind a host stall (each figure of the finding apart), and a
 * two-rank job as two files and as one merged trace (the straggler, its steps).
 * PLANTED_PRINT=1 prints the reports of those on stderr. */
#include "why/analyze.h"
#include "check.h"
#include "steps.h"

#include <stdio.h>
#include <stdlib.h>
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
	struct call all[8192]; /* every CUDA call on main, blocking or not */
	size_t nall;
	int64_t step_ts[64], step_end[64];
	int nsteps;
	uint64_t flow;
};

static void begin_opts(struct feed *f, struct cuptrace_analysis *a,
                       const struct cuptrace_analyze_opts *o)
{
	memset(f, 0, sizeof(*f));
	f->flow = 1;
	f->s = cuptrace_analyze_sink_new(a, o);
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

static void begin(struct feed *f, struct cuptrace_analysis *a)
{
	begin_opts(f, a, NULL);
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
	f->all[f->nall++] = (struct call){lt, lt + ld};
	if (blocking)
		f->c[f->nc++] = (struct call){lt, lt + ld};
}

static void call(struct feed *f, const char *name, int64_t ts, int64_t dur)
{
	steps_slice(f->s, MAIN, ts, dur, "cuda_runtime", name, NULL, 0, 0, 0);
	f->c[f->nc++] = (struct call){ts, ts + dur};
	f->all[f->nall++] = (struct call){ts, ts + dur};
}

static void finish(struct feed *f)
{
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(f->s->ops->finish(f->s), 0);
	cuptrace_sink_destroy(f->s);
}

/* A step's completion, the test's way (README, Steps): its host part runs from where the
 * previous step's range ended (or its own began, if earlier) to the end of its own range; it
 * completes at the later of its range's end and the end of the GPU work launched in its host
 * part (the last one's up to its range's end), and never before the previous one. */
static int64_t completion(const struct feed *f, int k)
{
	int64_t done = INT64_MIN;
	for (int i = 0; i <= k; i++) {
		int64_t h =
		    i ? (f->step_end[i - 1] < f->step_ts[i] ? f->step_end[i - 1] : f->step_ts[i])
		      : f->step_ts[0];
		int64_t hend = i + 1 < f->nsteps && f->step_ts[i + 1] < f->step_end[i]
		                   ? f->step_ts[i + 1]
		                   : f->step_end[i];
		int last = i + 1 == f->nsteps;
		int64_t c = f->step_end[i];
		for (size_t w = 0; w < f->nw; w++)
			if (f->w[w].launch >= h &&
			    (last ? f->w[w].launch <= hend : f->w[w].launch < hend) &&
			    f->w[w].end > c)
				c = f->w[w].end;
		done = c > done ? c : done;
	}
	return done;
}

/* The steady state, the test's way: from the first step's completion to the last's. */
static void window(const struct feed *f, int64_t *from, int64_t *to)
{
	*from = completion(f, 0);
	*to = completion(f, f->nsteps - 1);
}

/* How much of [a, b) main spent in no CUDA call (the test's own list, calls do not overlap). */
static int64_t outside(const struct feed *f, int64_t a, int64_t b)
{
	int64_t in = 0;
	for (size_t k = 0; k < f->nall; k++) {
		int64_t s = f->all[k].ts > a ? f->all[k].ts : a;
		int64_t e = f->all[k].end < b ? f->all[k].end : b;
		in += e > s ? e - s : 0;
	}
	return b > a ? b - a - in : 0;
}

/* The GPU gaps wholly inside the steady state (one stream, work in time order): their sum, and
 * the sum of each gap less the time main spent in blocking calls between the gap's start and the
 * next work's launch; *unexplained: gaps in which main sat in none, at least min long;
 * *host_out (may be NULL): the time main spent in no CUDA call between each gap's start and the
 * next work's launch, summed over the gaps. */
static void gaps_out(const struct feed *f, int64_t min, int64_t *all, int64_t *less_blocked,
                     int64_t *unexplained, int64_t *host_out)
{
	int64_t from, to;
	window(f, &from, &to);
	*all = *less_blocked = *unexplained = 0;
	if (host_out)
		*host_out = 0;
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
		if (host_out)
			*host_out += outside(f, g0, h);
	}
}

static void gaps(const struct feed *f, int64_t min, int64_t *all, int64_t *less_blocked,
                 int64_t *unexplained)
{
	gaps_out(f, min, all, less_blocked, unexplained, NULL);
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
	int64_t all, less, unexp, out;
	gaps_out(&f, 100 * US, &all, &less, &unexp, &out);
	/* Its figures apart: the host blocked in the copy's call through the synchronize, the
	 * copies' GPU time, the GPU idle of the gaps it explains (all of them), in most of which
	 * main ran Python, outside CUDA; judged on that idle. That Python (300 us a step) is less
	 * than the GPU work (680 us): without the wait it would hide behind the GPU's, so the
	 * advice stays .item()'s. */
	const struct cuptrace_an_finding *it = find(&a, "item_copy");
	CHECK(it && it->count == 9 && it->call_ns == blocked && it->work_ns == 9 * 2 * US);
	CHECK(it && it->idle_ns == all && it->idle_host_ns == out && it->total_ns == all);
	CHECK(all > less && unexp == 0 && out * 2 > all);
	CHECK(it && strcmp(it->dominant, "host_outside_cuda") &&
	      strstr(it->advice, "keep scalars on the GPU") && !strstr(it->advice, "outside CUDA"));
	one_severe(&f, &a, "item_copy");
	CHECK(!find(&a, "pageable_copy"));
	cuptrace_analysis_free(&a);
}

/* Each 2.2 ms step: a 780 us kernel, then a Python loop of 150 kernels of 2 us launched 8 us
 * apart, with a 150 us pause after the 75th. The pause's gap is the tiny run's; the run is not a
 * launch-bound stretch again. The first step's run is start-up: no finding. */
static void test_tiny(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t runs = 0;
	for (int i = 0; i < 6; i++) {
		int64_t t = 5000 * US + 2200 * US * i;
		step(&f, t, 2200 * US);
		int first_step = i == 0; /* start-up: its run is no finding */
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
		runs += first_step ? 0 : last - first;
	}
	finish(&f);
	int64_t all, less, unexp;
	gaps(&f, 100 * US, &all, &less, &unexp);
	CHECK(unexp >= 150 * US * 4); /* the pauses: no call explains them, the run does */
	const struct cuptrace_an_finding *t = find(&a, "tiny_kernels");
	CHECK(t && t->count == 5 && t->total_ns == runs);
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
	int64_t all, less, unexp, out;
	gaps_out(&f, 100 * US, &all, &less, &unexp, &out);
	const struct cuptrace_an_finding *al = find(&a, "alloc_steady");
	CHECK(al && al->count == 18 && al->call_ns == calls && al->work_ns == 0);
	CHECK(al && al->idle_ns == all && al->idle_host_ns == out && al->total_ns == all);
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
 * itself, though it also waited for its launch, is not launch-bound time. The first step's is
 * start-up. */
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
		if (i) /* the first step's stretch is start-up: no finding */
			runs += f.w[f.nw - 1].ts - f.w[first].ts; /* first kernel to the GEMM */
	}
	finish(&f);
	const struct cuptrace_an_finding *lb = find(&a, "launch_bound");
	CHECK(lb && lb->count == 9 && lb->total_ns == runs);
	one_severe(&f, &a, "launch_bound");
	cuptrace_analysis_free(&a);
}

/* ---- steps as users record them ---- */

#define NLOOP 20
#define SLOW  12
#define STALL (80000 * US)

/* The async loop's host schedule: per step, the Python before its launches (gap) and the time
 * its launches take (d), each jittering by up to +-10% of the 4 ms period; step SLOW's gap holds
 * an 80 ms stall. */
static int64_t loop_gap(int i)
{
	return 500 * US + ((i * 37) % 9 - 4) * 50 * US + (i == SLOW ? STALL : 0);
}

static int64_t loop_dur(int i)
{
	return 3500 * US + ((i * 53) % 9 - 4) * 50 * US;
}

/* A launch call of 10 us on main at lt, its kernel 20 us later for 200 us; no flow id reuse. */
static void loop_launch(struct feed *f, int64_t lt, const char *name)
{
	launch(f, "cudaLaunchKernel", lt, 10 * US, "kernel", name, lt + 20 * US, 200 * US, 0, 0);
}

/* Step i's start (t[i]) and its five launches, 700 us apart from t + 10 us; marks: an NVTX
 * range "step i" of d(i) around them, with "layer_k" ranges around each launch (a numbered
 * family too, but its numbers repeat every step: no steps of its own). Returns the step's
 * start. */
static int64_t loop_step(struct feed *f, int64_t t, int i, int marks)
{
	static const char *const names[] = {"k0", "k1", "k2", "k3", "k4"};
	char name[32];
	if (marks) {
		snprintf(name, sizeof(name), "step %d", i);
		steps_slice(f->s, MAIN, t, loop_dur(i), "nvtx", name, NULL, 0, 0, 0);
		f->step_ts[f->nsteps] = t;
		f->step_end[f->nsteps++] = t + loop_dur(i);
	}
	for (int k = 0; k < 5; k++) {
		int64_t lt = t + 10 * US + k * 700 * US;
		if (marks) {
			snprintf(name, sizeof(name), "layer_%d", k);
			steps_slice(f->s, MAIN, lt - 2 * US, 14 * US, "nvtx", name, NULL, 0, 0, 0);
		}
		loop_launch(f, lt, names[k]);
	}
	return t;
}

/* The union of the fed GPU work inside [a, b) (the kernels here never overlap each other). */
static int64_t busy_in(const struct feed *f, int64_t a, int64_t b)
{
	int64_t sum = 0;
	for (size_t i = 0; i < f->nw; i++) {
		int64_t s0 = f->w[i].ts > a ? f->w[i].ts : a,
		        e0 = f->w[i].end < b ? f->w[i].end : b;
		sum += e0 > s0 ? e0 - s0 : 0;
	}
	return sum;
}

static int64_t median_of(int64_t *v, int n)
{
	for (int i = 1; i < n; i++) /* insertion sort: a few values */
		for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
			int64_t t = v[k];
			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* Checks the steps of the loop against periods the test computes: step i runs from b[i] for
 * per[i], its host part from hs[i]; only SLOW is an outlier, its cause the host gap before its
 * first launch (gap0[SLOW] long, from hs[SLOW]), its period about 80 ms over the median; busy
 * over every period is the fed work's. */
static void check_loop(const struct feed *f, const struct cuptrace_analysis *a, const int64_t *b,
                       const int64_t *per, const int64_t *hs, const int64_t *gap0)
{
	CHECK_EQ_INT(a->nsteps, NLOOP);
	if (a->nsteps != NLOOP)
		return;
	int64_t v[NLOOP];
	for (int i = 1; i < NLOOP; i++)
		v[i - 1] = per[i];
	int64_t med = median_of(v, NLOOP - 1);
	for (int i = 0; i < NLOOP; i++) {
		const struct cuptrace_an_step *s = &a->steps[i];
		CHECK_EQ_INT(s->ts, b[i]);
		CHECK_EQ_INT(s->dur, per[i]);
		CHECK_EQ_INT(s->host_ts, hs[i]);
		CHECK_EQ_INT(s->busy_ns, busy_in(f, b[i], b[i] + per[i]));
		CHECK_EQ_INT(s->kernels, 5);
		CHECK_EQ_INT(s->startup, i == 0);
		CHECK_EQ_INT(s->outlier, i == SLOW);
		if (i != SLOW)
			continue;
		CHECK(s->dur - med > STALL - 1000 * US && s->dur - med < STALL + 1000 * US);
		CHECK_EQ_INT(s->cause, CUPTRACE_STEP_CAUSE_HOST_GAP);
		CHECK_EQ_INT(s->host_gap_ns, gap0[i]);
		CHECK_EQ_INT(s->host_gap_ts, hs[i]);
		CHECK_EQ_INT(s->host_gap_blocked_ns, 0);
		CHECK(s->cause_ns > STALL - 1000 * US && s->cause_ns <= gap0[i]);
		/* GPU busy over the period: 1 ms of work in an 84 ms period. */
		CHECK(s->busy_ns == 1000 * US && s->busy_ns * 50 < s->dur);
	}
	CHECK_EQ_INT(a->step_median_ns, med);
	/* The steady state: from the end of the first step to the end of the last. */
	CHECK(a->steady_steps && a->steady_from == b[1] &&
	      a->steady_to == b[NLOOP - 1] + per[NLOOP - 1]);
	/* Start-up is never severe. */
	const struct cuptrace_an_finding *o = find(a, "outside_steady");
	CHECK(!o || !o->severe);
}

/* The async loop with an NVTX range "step i" per step around its launches only (the host runs
 * ahead: no synchronize), inside an "epoch 0" range (too few to be steps). A step's period runs
 * from the end of the previous range to the end of its own; the last to its range's end (its
 * work ends inside it). */
static void test_async_loop(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t t = 10000 * US, end = t;
	for (int i = 0; i < NLOOP; i++)
		end += (i ? loop_gap(i) : 0) + loop_dur(i);
	steps_slice(f.s, MAIN, t - 100 * US, end - t + 200 * US, "nvtx", "epoch 0", NULL, 0, 0, 0);
	int64_t b[NLOOP], per[NLOOP], gap0[NLOOP];
	for (int i = 0; i < NLOOP; i++) {
		t += i ? loop_gap(i) : 0;
		loop_step(&f, t, i, 1);
		t += loop_dur(i);
	}
	finish(&f);
	/* Its work ends inside its range: a step completes at its range's end, and its period
	 * and host part both run from the previous range's end. */
	for (int i = 0; i < NLOOP; i++) {
		b[i] = i ? f.step_end[i - 1] : f.step_ts[0];
		per[i] = f.step_end[i] - b[i];
		gap0[i] = f.step_ts[i] + 10 * US - b[i]; /* to its first launch */
	}
	CHECK_EQ_STR(a.step_kind, "nvtx_family");
	CHECK_EQ_STR(a.step_source, "step");
	check_loop(&f, &a, b, per, b, gap0);
	for (size_t i = 0; i < a.nsteps; i++)
		CHECK(a.steps[i].number == (int64_t)i && a.steps[i].mark_dur == loop_dur((int)i));
	/* The step ranges make no row of the ops table each; the layers do, one per name. */
	size_t layers = 0;
	for (size_t i = 0; i < a.nops; i++) {
		CHECK(strncmp(a.ops[i].name, "step ", 5) != 0);
		layers += !strncmp(a.ops[i].name, "layer_", 6);
	}
	CHECK_EQ_INT(layers, 5);
	cuptrace_analysis_free(&a);

	/* --step step: the same steps from the option. */
	struct cuptrace_analyze_opts o = {.step_name = "step"};
	begin_opts(&f, &a, &o);
	t = 10000 * US;
	for (int i = 0; i < NLOOP; i++) {
		t += i ? loop_gap(i) : 0;
		loop_step(&f, t, i, 1);
		t += loop_dur(i);
	}
	finish(&f);
	CHECK_EQ_STR(a.step_kind, "option");
	check_loop(&f, &a, b, per, b, gap0);
	cuptrace_analysis_free(&a);
}

/* The same loop with no marks at all, after a start-up: a pageable copy, 500 ms of nothing on
 * the GPU (model load), 30 distinct warm-up kernels (autotuning). The steps are found in the GPU
 * work: each iteration from the launch of k0 (after the longest host pause). The start-up is
 * neither a step nor severe. */
static void test_no_marks(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	char name[32];
	begin(&f, &a);
	launch(&f, "cudaMemcpyAsync", 1000 * US, 50 * US, "memcpy",
	       "Memcpy HtoD (Pageable -> Device)", 1100 * US, 300 * US, 1 << 20, 0);
	for (int k = 0; k < 30; k++) {
		snprintf(name, sizeof(name), "autotune_%d", k);
		launch(&f, "cudaLaunchKernel", 501000 * US + k * 100 * US, 10 * US, "kernel", name,
		       501020 * US + k * 100 * US, 50 * US, 0, 0);
	}
	int64_t t = 510000 * US, ts[NLOOP];
	for (int i = 0; i < NLOOP; i++) {
		t += i ? loop_gap(i) : 0;
		ts[i] = loop_step(&f, t, i, 0);
		t += loop_dur(i);
	}
	finish(&f);
	/* An iteration's host part runs from the end of the previous one's last launch call
	 * (k4: 10 us at +2810) to the end of its own; it completes when k4's kernel ends
	 * (+3030): its period runs from the previous completion to its own. */
	int64_t b[NLOOP], per[NLOOP], hs[NLOOP], gap0[NLOOP];
	for (int i = 0; i < NLOOP; i++) {
		hs[i] = i ? ts[i - 1] + 2820 * US : ts[0] + 10 * US;
		gap0[i] = ts[i] + 10 * US - hs[i];
		b[i] = i ? ts[i - 1] + 3030 * US : ts[0] + 10 * US;
		per[i] = ts[i] + 3030 * US - b[i];
	}
	CHECK_EQ_STR(a.step_kind, "gpu_period");
	CHECK(a.step_confidence > 0.9);
	for (size_t i = 0; i < a.nsteps; i++)
		CHECK(a.steps[i].mark_ts == ts[i] + 10 * US &&
		      !strcmp(a.steps[i].name, "iteration"));
	check_loop(&f, &a, b, per, hs, gap0);
	/* Nothing of the start-up is severe: the one severe finding is the stall's GPU gap. */
	for (size_t i = 0; i < a.nfindings; i++)
		if (a.findings[i].severe) {
			CHECK_EQ_STR(a.findings[i].id, "gpu_gap");
			CHECK(a.findings[i].worst[0].ts >= b[SLOW]);
		}
	CHECK(!find(&a, "pageable_copy"));
	const struct cuptrace_an_finding *o = find(&a, "outside_steady");
	CHECK(o && !o->severe && o->worst[0].dur > 499000 * US);
	CHECK(a.ngpus == 1 && a.gpus[0].startup_ns == b[1] - 1100 * US);
	cuptrace_analysis_free(&a);
}

/* No steps at all: a copy, 500 ms of model load, then 200 ms of GPU-bound work that never
 * repeats. The report says there are none, and the start-up still stays out: the steady state
 * begins at the first work after the long one-off idle, its gap a note; nothing is severe. */
static void test_no_steps(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	char name[32];
	begin(&f, &a);
	launch(&f, "cudaMemcpyAsync", 1000 * US, 50 * US, "memcpy",
	       "Memcpy HtoD (Pinned -> Device)", 1100 * US, 300 * US, 1 << 20, 0);
	for (int k = 0; k < 100; k++) {
		snprintf(name, sizeof(name), "once_%d", k);
		launch(&f, "cudaLaunchKernel", 501000 * US + k * 2000 * US, 10 * US, "kernel", name,
		       501020 * US + k * 2001 * US, 2000 * US, 0, 0);
	}
	finish(&f);
	CHECK_EQ_INT(a.nsteps, 0);
	CHECK(!a.step_kind && !a.steady_steps);
	CHECK_EQ_INT(a.startup_end, 501020 * US);
	CHECK_EQ_INT(a.steady_from, 501020 * US);
	CHECK(a.ngpus == 1 && a.gpus[0].startup_ns == 501020 * US - 1100 * US &&
	      a.gpus[0].first_ts == 501020 * US);
	const struct cuptrace_an_finding *o = find(&a, "outside_steady");
	CHECK(o && !o->severe && o->count == 1 && o->worst[0].dur == 501020 * US - 1400 * US);
	for (size_t i = 0; i < a.nfindings; i++)
		CHECK(!a.findings[i].severe);
	cuptrace_analysis_free(&a);
}

/* Steps from optimizer.step() marks (record's default hook), inside --pytorch's
 * "Optimizer.step#SGD.step" ranges, one more optimizer.step nested inside each (a wrapping
 * optimizer): the outermost marks only. A sync loop: forward and backward kernels, the
 * optimizer's kernels inside its mark, then .item(). A step runs from the end of the previous
 * optimizer.step() to the end of its own; the first is its own mark. */
static void test_optimizer_marks(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	enum { N = 8 };
	int64_t os[N], oe[N];
	for (int i = 0; i < N; i++) {
		int64_t t = 5000 * US + 3000 * US * i + (i == 5 ? 400 * US : 0);
		launch(&f, "cudaLaunchKernel", t + 10 * US, 10 * US, "kernel", "fwd", t + 30 * US,
		       900 * US, 0, 0);
		launch(&f, "cudaLaunchKernel", t + 40 * US, 10 * US, "kernel", "bwd", t + 930 * US,
		       1200 * US, 0, 0);
		os[i] = t + 100 * US;
		oe[i] = t + 400 * US;
		steps_slice(f.s, MAIN, os[i] - 5 * US, 310 * US, "cpu_op",
		            "Optimizer.step#SGD.step", NULL, 0, 0, 0);
		steps_slice(f.s, MAIN, os[i], oe[i] - os[i], "nvtx", "optimizer.step", NULL, 0, 0,
		            0);
		steps_slice(f.s, MAIN, os[i] + 10 * US, 200 * US, "nvtx", "optimizer.step", NULL, 0,
		            0, 0);
		launch(&f, "cudaLaunchKernel", os[i] + 20 * US, 10 * US, "kernel", "sgd",
		       t + 2140 * US, 300 * US, 0, 0);
		launch(&f, "cudaMemcpyAsync", oe[i] + 10 * US, 10 * US, "memcpy",
		       "Memcpy DtoH (Device -> Pageable)", t + 2450 * US, 2 * US, 4, 0);
		call(&f, "cudaStreamSynchronize", oe[i] + 30 * US, 2425 * US - 430 * US);
	}
	finish(&f);
	CHECK_EQ_STR(a.step_kind, "optimizer");
	CHECK_EQ_STR(a.step_source, "optimizer.step");
	CHECK_EQ_INT(a.nsteps, N);
	for (size_t i = 0; i < a.nsteps && i < N; i++) {
		const struct cuptrace_an_step *s = &a.steps[i];
		/* Its host part: from the end of the previous optimizer.step() to the end of its
		 * own; launched in it: the previous step's item copy, its forward, backward and
		 * optimizer kernels. It completes when its optimizer kernel ends (+2440 us; the
		 * item copy, launched after its mark, is the next step's). */
#define T_OF(k) (5000 * US + 3000 * US * (int64_t)(k) + ((k) == 5 ? 400 * US : 0))
		int64_t done = T_OF(i) + 2440 * US, prev = i ? T_OF(i - 1) + 2440 * US : os[0];
#undef T_OF
		CHECK_EQ_INT(s->host_ts, i ? oe[i - 1] : os[0]);
		CHECK_EQ_INT(s->host_dur, oe[i] - (i ? oe[i - 1] : os[0]));
		CHECK_EQ_INT(s->ts, prev);
		CHECK_EQ_INT(s->dur, done - prev);
		CHECK_EQ_INT(s->kernels, i ? 4 : 1);
		CHECK_EQ_INT(s->number, (int64_t)i);
		/* Step 5 starts 400 us late: 13% over the 3 ms period, no outlier. */
		CHECK(!s->outlier);
	}
	cuptrace_analysis_free(&a);
}

/* The text of the report (markdown 0 or 1) or its JSON (markdown -1), malloc'd. */
static char *report(const struct cuptrace_analysis *a, int markdown)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	if (markdown < 0)
		CHECK_EQ_INT(cuptrace_analysis_print_json(a, m), 0);
	else
		cuptrace_analysis_print(a, m, markdown);
	fclose(m);
	return buf;
}

/* A duration as the reports print it (issue 49): four significant digits in the unit that fits
 * (ns below 1 us, then us, ms, s), "0 ns" for zero. Written here from that rule, not taken from
 * the printer. */
static const char *dur(int64_t ns)
{
	static char b[4][32];
	static unsigned k;
	char *o = b[k++ % 4];
	double v = (double)(ns < 0 ? -ns : ns);
	const char *u = "ns";
	if (v >= 1e9)
		v /= 1e9, u = "s";
	else if (v >= 1e6)
		v /= 1e6, u = "ms";
	else if (v >= 1e3)
		v /= 1e3, u = "us";
	int dec = !strcmp(u, "ns") ? 0 : v >= 100 ? 1 : v >= 10 ? 2 : 3;
	snprintf(o, 32, "%s%.*f %s", ns < 0 ? "-" : "", dec, v, u);
	return o;
}

/* The text report with its wrapped lines joined (a continuation line starts with four spaces)
 * and the cells of its tables (two or more spaces apart) separated by " | ", so that a check
 * does not depend on where the printer wrapped or how wide a column came out. malloc'd. */
static char *flat(const char *txt)
{
	char *o = txt ? malloc(strlen(txt) * 3 + 1) : NULL, *w = o;
	if (!o)
		return NULL;
	for (const char *r = txt; *r;) {
		if (r[0] == '\n' && !strncmp(r + 1, "    ", 4) && r[5] != ' ' && r[5] != '-') {
			*w++ = ' ';
			r += 5;
		} else if (r[0] == ' ' && r[1] == ' ') {
			int lead = w == o || w[-1] == '\n';
			while (*r == ' ')
				r++;
			if (!lead && *r != '\n') {
				memcpy(w, " | ", 3);
				w += 3;
			}
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return o;
}

/* Every markdown table of the report has as many cells in each row as in its header (the
 * separator row included). */
static int md_tables_ok(const char *md)
{
	int want = -1;
	for (const char *l = md; l && *l;) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		int bars = 0;
		for (size_t i = 0; i < len; i++)
			bars += l[i] == '|';
		if (len && l[0] == '|') {
			if (want >= 0 && bars != want) {
				fprintf(stderr, "markdown row of %d cells, header %d: %.*s\n",
				        bars - 1, want - 1, (int)len, l);
				return 0;
			}
			want = want < 0 ? bars : want;
		} else {
			want = -1;
		}
		l = e ? e + 1 : NULL;
	}
	return 1;
}

/* The DataLoader: each 10 ms step the host spends 8 ms in a Python range (outside any
 * CUDA call), then copies the batch from pageable memory (a 300 us call, 250 us of copying)
 * and launches a 1.5 ms kernel. The GPU idles about 8 ms a step before each copy: the copy's
 * gap, but the host was busy outside CUDA, not copying. The finding keeps its figures apart,
 * each equal to the test's own sum, and its advice says the host comes first. */
static void test_pageable_host(void)
{
	static struct feed f;
	struct cuptrace_analysis a;
	begin(&f, &a);
	int64_t from = 0, to = 0, calls = 0, copies = 0;
	for (int i = 0; i < 10; i++) {
		int64_t t = 5000 * US + 10000 * US * i;
		step(&f, t, 10000 * US);
		steps_slice(f.s, MAIN, t + 10 * US, 7990 * US, "cpu_op", "DataLoader.__next__",
		            NULL, 0, 0, 0);
		launch(&f, "cudaMemcpyAsync", t + 8010 * US, 300 * US, "memcpy",
		       "Memcpy HtoD (Pageable -> Device)", t + 8100 * US, 250 * US, 8 << 20, 0);
		launch(&f, "cudaLaunchKernel", t + 8320 * US, 5 * US, "kernel", "gemm",
		       t + 8360 * US, 1500 * US, 0, 0);
		if (i) { /* the copies of the steady state: from the end of the first step */
			calls += 300 * US;
			copies += 250 * US;
		}
	}
	finish(&f);
	window(&f, &from, &to);
	/* The gaps ending in a copy are the copy's; the 10 us before each kernel is nobody's. */
	int64_t idle = 0, out = 0;
	for (size_t i = 1; i < f.nw; i++) {
		int64_t g0 = f.w[i - 1].end, g1 = f.w[i].ts;
		if (i % 2 || g0 < from || g1 > to) /* odd entries: the kernels */
			continue;
		idle += g1 - g0;
		out += outside(&f, g0, f.w[i].launch);
	}
	const struct cuptrace_an_finding *p = find(&a, "pageable_copy");
	CHECK(p && p->count == 9 && p->call_ns == calls && p->work_ns == copies);
	CHECK(p && p->idle_ns == idle && p->idle_host_ns == out && p->total_ns == copies + idle);
	CHECK(out * 2 > copies + idle && idle > 7 * 8000 * US);
	CHECK(p && !strcmp(p->dominant, "host_outside_cuda") &&
	      strstr(p->advice, "busy outside CUDA") && strstr(p->advice, "pin the host buffer"));
	one_severe(&f, &a, "pageable_copy");
	/* The same figures, in words, in every output. */
	char num[64], *txt = report(&a, 0), *md = report(&a, 1), *js = report(&a, -1);
	char *ft = flat(txt);
	snprintf(num, sizeof(num), "GPU idle it explains %s", dur(idle));
	CHECK(ft && strstr(ft, num) && md && strstr(md, num) && md_tables_ok(md));
	snprintf(num, sizeof(num), "GPU work %s", dur(copies));
	CHECK(ft && strstr(ft, num) && md && strstr(md, num));
	free(ft);
	snprintf(num, sizeof(num), "Host time in the calls %.3f ms", (double)calls / 1e6);
	CHECK(txt && strstr(txt, num) && md && strstr(md, num));
	snprintf(num, sizeof(num), "host was busy outside CUDA)");
	CHECK(txt && strstr(txt, num));
	snprintf(num, sizeof(num), "\"gpu_idle_ns\":%lld,", (long long)idle);
	CHECK(js && strstr(js, num));
	snprintf(num, sizeof(num), "\"gpu_work_ns\":%lld,", (long long)copies);
	CHECK(js && strstr(js, num));
	snprintf(num, sizeof(num), "\"call_ns\":%lld,", (long long)calls);
	CHECK(js && strstr(js, num));
	snprintf(num, sizeof(num), "\"gpu_idle_host_outside_ns\":%lld,", (long long)out);
	CHECK(js && strstr(js, num) && strstr(js, "\"dominant\":\"host_outside_cuda\""));
	if (txt && getenv("PLANTED_PRINT"))
		fputs(txt, stderr);
	free(txt);
	free(md);
	free(js);
	cuptrace_analysis_free(&a);
}

/* ---- two ranks ---- */

/* A 2-rank job over NCCL, in lockstep: each step a rank launches a 5 ms compute kernel and an
 * all-reduce, then synchronizes; the all-reduce ends 200 us after the later compute ends, on
 * both, and the next step starts 20 us after the synchronize returns (70 us of GPU idle). Rank 1
 * is slow twice: in step 5 its host stalls 8 ms (a "load" range) before launching, in step 8 its
 * compute takes 13 ms. The test keeps each rank's steps, all-reduce time, and rank 1's gap
 * before step 5's compute (*stall_gap) with the part of it outside CUDA calls. */
enum { RJ_STEPS = 12, RJ_STALL = 5, RJ_EXTRA = 8 };
struct rjob {
	int64_t step_ts[2][RJ_STEPS], step_dur[2][RJ_STEPS];
	int64_t comm[2][RJ_STEPS]; /* all-reduce GPU time */
	int64_t stall_gap, stall_out;
};

static void rjob_tracks(struct cuptrace_sink *s, int r, int merged)
{
	static const char *const pname[2] = {"rank 0 @ nodeA: python", "rank 1 @ nodeB: python"};
	uint64_t u = 100 * (uint64_t)r;
	int32_t pid = 1000 + r;
	steps_track(s, (struct cuptrace_track){.uuid = u + PROC,
	                                       .kind = CUPTRACE_TRACK_PROCESS,
	                                       .pid = pid,
	                                       .name = merged ? pname[r] : "python"});
	steps_track(s, (struct cuptrace_track){.uuid = u + MAIN,
	                                       .kind = CUPTRACE_TRACK_THREAD,
	                                       .parent_uuid = u + PROC,
	                                       .pid = pid,
	                                       .tid = pid,
	                                       .name = "main"});
	steps_track(s, (struct cuptrace_track){.uuid = u + GPU,
	                                       .kind = CUPTRACE_TRACK_GROUP,
	                                       .parent_uuid = u + PROC,
	                                       .pid = pid,
	                                       .name = "GPU 0: NVIDIA H100"});
	steps_track(s, (struct cuptrace_track){.uuid = u + STREAM,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = u + GPU,
	                                       .pid = pid,
	                                       .name = "Stream 7"});
	steps_track(s, (struct cuptrace_track){.uuid = u + STREAM + 1,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = u + GPU,
	                                       .pid = pid,
	                                       .name = "Stream 13"});
}

/* Rank r's events; the job's timeline is worked out for both ranks (the all-reduce ends with
 * the later one), the same whichever rank is fed. */
static void rjob_events(struct cuptrace_sink *s, int r, struct rjob *tr)
{
	uint64_t u = 100 * (uint64_t)r;
	int64_t t = 3000 * US, ce[2], l1[2];
	for (int k = 0; k < RJ_STEPS; k++) {
		for (int q = 0; q < 2; q++) {
			int64_t stall = q == 1 && k == RJ_STALL ? 8000 * US : 0;
			int64_t c = q == 1 && k == RJ_EXTRA ? 13000 * US : 5000 * US;
			l1[q] = t + 20 * US + stall;
			ce[q] = l1[q] + 30 * US + c;
		}
		int64_t e = (ce[0] > ce[1] ? ce[0] : ce[1]) + 200 * US, next = e + 20 * US;
		/* Flow ids of their own per rank: in a merged trace, as merge makes them. */
		uint64_t fl = 1000 * (uint64_t)k + 100000 * (uint64_t)r;
		char name[32];
		snprintf(name, sizeof(name), "ProfilerStep#%d", k);
		steps_slice(s, u + MAIN, t, next - t, "user_annotation", name, NULL, 0, 0, 0);
		if (l1[r] > t + 20 * US)
			steps_slice(s, u + MAIN, t + 10 * US, l1[r] - t - 20 * US, "cpu_op", "load",
			            NULL, 0, 0, 0);
		steps_slice(s, u + MAIN, l1[r], 5 * US, "cuda_runtime", "cudaLaunchKernel", NULL, 0,
		            fl + 1, 0);
		steps_slice(s, u + STREAM, l1[r] + 30 * US, ce[r] - l1[r] - 30 * US, "kernel",
		            "gemm", NULL, 0, 0, fl + 1);
		steps_slice(s, u + MAIN, l1[r] + 10 * US, 5 * US, "cuda_runtime",
		            "cudaLaunchKernel", NULL, 0, fl + 2, 0);
		steps_slice(s, u + STREAM + 1, ce[r] + 10 * US, e - ce[r] - 10 * US, "kernel",
		            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", NULL, 0, 0, fl + 2);
		steps_slice(s, u + MAIN, l1[r] + 20 * US, e - l1[r] - 20 * US, "cuda_runtime",
		            "cudaStreamSynchronize", NULL, 0, 0, 0);
		if (k == RJ_STALL && r == 1) { /* from the previous all-reduce's end */
			tr->stall_gap = l1[r] + 30 * US - (t - 20 * US);
			tr->stall_out = l1[r] - (t - 20 * US);
		}
		tr->step_ts[r][k] = t;
		tr->step_dur[r][k] = next - t;
		tr->comm[r][k] = e - ce[r] - 10 * US;
		t = next;
	}
}

/* The job as two rank files (record's metadata: rank, hostname), or as one merged trace (merge
 * --ranks: processes named "rank R @ host: python", the trace's own metadata its first
 * input's). */
static void rjob_feed(struct cuptrace_sink *s, int merged, struct rjob *tr)
{
	static const char *const hosts[2] = {"nodeA", "nodeB"}, *const ranks[2] = {"0", "1"};
	for (int r = 0; r < 2; r++) {
		struct cuptrace_meta m = {.key = "rank", .s = ranks[r]};
		struct cuptrace_trace_info info = {.pid = 1000 + r,
		                                   .process_name = "python",
		                                   .hostname = hosts[r],
		                                   .meta = &m,
		                                   .nmeta = 1};
		if (merged && r)
			continue;
		if (r)
			cuptrace_analyze_next_file(s);
		steps_err = s->ops->begin(s, &info);
		rjob_tracks(s, r, merged);
		if (merged)
			rjob_tracks(s, 1, merged);
		rjob_events(s, r, tr);
		if (merged)
			rjob_events(s, 1, tr);
	}
}

static int64_t med(int64_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && v[k - 1] > v[k]; k--) {
			int64_t x = v[k];
			v[k] = v[k - 1];
			v[k - 1] = x;
		}
	return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* The two-rank job, as files or merged: every table and finding names the rank; the steps
 * carry rank and number; the job's slow steps (5 and 8) are listed once each, naming rank 1,
 * the one the others waited for, with what made it late (its host in 5, its GPU work in 8);
 * the straggler finding says rank 1, by how much, in which steps. Expected figures are the
 * test's own: from its timeline, with README's rules. */
static void two_ranks(int merged)
{
	static struct rjob tr;
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	memset(&tr, 0, sizeof(tr));
	rjob_feed(s, merged, &tr);
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK(a.multi_rank && a.nranks == 2 && a.nfiles == (merged ? 1u : 2u));
	size_t rk[2] = {SIZE_MAX, SIZE_MAX};
	for (size_t i = 0; i < a.nranks; i++)
		if (a.ranks[i].pid == 1000 || a.ranks[i].pid == 1001)
			rk[a.ranks[i].pid - 1000] = i;
	if (rk[0] == SIZE_MAX || rk[1] == SIZE_MAX) {
		CHECK(!"both ranks");
		cuptrace_analysis_free(&a);
		return;
	}
	CHECK_EQ_STR(a.ranks[rk[0]].label, "rank 0 @ nodeA");
	CHECK_EQ_STR(a.ranks[rk[1]].label, "rank 1 @ nodeB");
	CHECK(a.ranks[rk[0]].rank == 0 && a.ranks[rk[1]].rank == 1);
	/* Every step row carries its rank and its number. */
	CHECK_EQ_INT(a.nsteps, 2 * RJ_STEPS);
	for (size_t i = 0; i < a.nsteps; i++) {
		const struct cuptrace_an_step *st = &a.steps[i];
		int r = st->pid - 1000;
		CHECK(r >= 0 && r < 2 && st->rank == rk[r & 1]);
		CHECK(st->number >= 0 && st->number < RJ_STEPS &&
		      st->ts == tr.step_ts[r & 1][st->number % RJ_STEPS]);
	}
	/* The test's own job steps: per step the rank with less time in the all-reduce came last,
	 * the other waited the difference; the usual wait over the steps after the first, and
	 * README's limits: slow beyond median + max(3 MAD, 10% of the median step), or an
	 * outlier step (median + max(10%, 3 MAD) of its rank's steps). */
	int64_t wait[RJ_STEPS], v[RJ_STEPS], d[2 * RJ_STEPS];
	int last[RJ_STEPS], outl[RJ_STEPS] = {0}, slow[RJ_STEPS];
	for (int k = 0; k < RJ_STEPS; k++) {
		last[k] = tr.comm[1][k] < tr.comm[0][k];
		wait[k] = tr.comm[!last[k]][k] - tr.comm[last[k]][k];
		d[k] = tr.step_dur[0][k];
		d[RJ_STEPS + k] = tr.step_dur[1][k];
	}
	for (int r = 0; r < 2; r++) {
		int64_t m, lim;
		for (int k = 0; k < RJ_STEPS; k++)
			v[k] = tr.step_dur[r][k];
		m = med(v, RJ_STEPS);
		for (int k = 0; k < RJ_STEPS; k++)
			v[k] =
			    tr.step_dur[r][k] > m ? tr.step_dur[r][k] - m : m - tr.step_dur[r][k];
		lim = m / 10 > 3 * med(v, RJ_STEPS) ? m / 10 : 3 * med(v, RJ_STEPS);
		for (int k = 0; k < RJ_STEPS; k++)
			outl[k] |= tr.step_dur[r][k] > m + lim;
	}
	for (int k = 1; k < RJ_STEPS; k++)
		v[k - 1] = wait[k];
	int64_t mw = med(v, RJ_STEPS - 1), lim;
	for (int k = 1; k < RJ_STEPS; k++)
		v[k - 1] = wait[k] > mw ? wait[k] - mw : mw - wait[k];
	lim = 3 * med(v, RJ_STEPS - 1);
	if (med(d, 2 * RJ_STEPS) / 10 > lim)
		lim = med(d, 2 * RJ_STEPS) / 10;
	int64_t want_total = 0;
	uint64_t want_count = 0;
	for (int k = 0; k < RJ_STEPS; k++) {
		slow[k] = k > 0 && (outl[k] || (wait[k] > 0 && wait[k] > mw + lim));
		if (k > 0 && wait[k] > 0 && last[k] == 1) {
			want_total += wait[k];
			want_count++;
		}
	}
	CHECK(slow[RJ_STALL] && slow[RJ_EXTRA] && wait[RJ_STALL] == 8000 * US &&
	      wait[RJ_EXTRA] == 8000 * US);
	CHECK_EQ_INT(a.njob_steps, RJ_STEPS);
	for (size_t i = 0; i < a.njob_steps && i < RJ_STEPS; i++) {
		const struct cuptrace_an_job_step *js = &a.job_steps[i];
		int k = (int)i;
		CHECK(js->number == k && js->nranks == 2);
		CHECK_EQ_INT(js->wait_ns, wait[k]);
		CHECK(js->waited_for == (wait[k] > 0 ? rk[last[k]] : SIZE_MAX));
		if (js->slow != slow[k] || js->outlier != outl[k])
			fprintf(stderr, "%s: job step %d slow %d (want %d), outlier %d (want %d)\n",
			        merged ? "merged" : "files", k, js->slow, slow[k], js->outlier,
			        outl[k]);
		CHECK(js->slow == slow[k] && js->outlier == outl[k]);
	}
	/* What made rank 1 late: its host in step 5 (8 ms before launching), its GPU work in 8. */
	CHECK(a.njob_steps == RJ_STEPS && a.job_steps[RJ_STALL].extra_host_ns == 8000 * US &&
	      a.job_steps[RJ_STALL].extra_gpu_ns == 0);
	CHECK(a.njob_steps == RJ_STEPS && a.job_steps[RJ_EXTRA].extra_gpu_ns == 8000 * US &&
	      a.job_steps[RJ_EXTRA].extra_host_ns == 0);
	const struct cuptrace_an_finding *f = find(&a, "straggler");
	const struct cuptrace_an_rank *r1 = &a.ranks[rk[1]];
	CHECK(f && f->top_rank == rk[1] && f->count == want_count && f->total_ns == want_total);
	/* Its GPU sat idle while its host stalled: that gap is the straggler's, no gpu_gap. */
	CHECK(f && f->idle_ns == tr.stall_gap && f->idle_host_ns == tr.stall_out);
	CHECK(tr.stall_gap == 8070 * US && !find(&a, "gpu_gap"));
	for (size_t i = 0; i < a.nfindings; i++)
		CHECK(a.findings[i].severe == !strcmp(a.findings[i].id, "straggler"));
	CHECK(a.njob_steps == RJ_STEPS && a.job_steps[RJ_STALL].held_up &&
	      a.job_steps[RJ_EXTRA].held_up && !a.job_steps[1].held_up);
	CHECK(f && f->severe == (want_total * 20 >= r1->steady_to - r1->steady_from));
	CHECK(f && f->severe && f->nworst == 2 && f->worst[0].rank == rk[1] &&
	      f->worst[0].dur == 8000 * US && f->worst[1].dur == 8000 * US);
	CHECK(f && f->nworst == 2 && strstr(f->worst[0].what, "step ") &&
	      (strstr(f->worst[0].what, "step 5:") || strstr(f->worst[1].what, "step 5:")) &&
	      (strstr(f->worst[0].what, "step 8:") || strstr(f->worst[1].what, "step 8:")));
	/* Every finding names its rank; time in collectives is a note. */
	for (size_t i = 0; i < a.nfindings; i++)
		CHECK(a.findings[i].top_rank < a.nranks);
	CHECK(find(&a, "collective_wait") && !find(&a, "collective_wait")->severe);
	char *txt = report(&a, 0), *js = report(&a, -1), *md = report(&a, 1);
	char row[128];
	/* The outlier step of the slow rank, in both tables, with its period and why it is slow. */
	snprintf(row, sizeof(row), "\n| rank 1 @ nodeB | 8 | ProfilerStep#8 | %s | ",
	         dur(tr.step_dur[1][RJ_EXTRA]));
	CHECK(md && md_tables_ok(md) && strstr(md, "\n### Ranks\n") && strstr(md, row) &&
	      strstr(strstr(md, row), "| slow: GPU work |\n"));
	free(md);
	char *ft = flat(txt);
	snprintf(row, sizeof(row),
	         "Straggler rank: the others waited for it in the collectives "
	         "[severe]: rank 1 @ nodeB; 2 steps it came last; %s",
	         dur(16000 * US));
	CHECK(ft && strstr(ft, row));
	CHECK(txt && strstr(txt, "Slow steps it held up: 5, 8.\n"));
	snprintf(row, sizeof(row), "\nrank 1 @ nodeB | 8 | ProfilerStep#8 | %s | ",
	         dur(tr.step_dur[1][RJ_EXTRA]));
	CHECK(ft && strstr(ft, row));
	snprintf(row, sizeof(row),
	         "- 5: rank 1 @ nodeB held up the others: they waited %s for it; its GPU work "
	         "%s, host +%s before its collective.\n",
	         dur(8000 * US), dur(0), dur(8000 * US));
	CHECK(ft && strstr(ft, row));
	snprintf(row, sizeof(row),
	         "- 8: rank 1 @ nodeB held up the others: they waited %s for it; its GPU work "
	         "+%s, host %s before its collective.\n",
	         dur(8000 * US), dur(8000 * US), dur(0));
	CHECK(ft && strstr(ft, row));
	CHECK(ft && strstr(ft, "== Ranks ==\nrank | pid") &&
	      strstr(ft, "\nrank 0 @ nodeA | 1000 | "));
	free(ft);
	CHECK(js && strstr(js, "\"number\":5,\"ranks\":2,") &&
	      strstr(js, "\"waited_for_rank_label\":\"rank 1 @ nodeB\",\"waited_for_rank\":1,"));
	CHECK(js && strstr(js, "\"name\":\"ProfilerStep#8\",\"number\":8,\"rank\":1,\"rank_label\":"
	                       "\"rank 1 @ nodeB\","));
	if (txt && (getenv("PLANTED_PRINT") || !strstr(txt, "Slow steps it held up: 5, 8.\n")))
		fputs(txt, stderr);
	free(txt);
	free(js);
	cuptrace_analysis_free(&a);
}

static void test_two_rank_files(void)
{
	two_ranks(0);
}

static void test_two_ranks_merged(void)
{
	two_ranks(1);
}

TEST_MAIN(T(test_pageable), T(test_item), T(test_tiny), T(test_alloc), T(test_clean),
          T(test_launch_bound), T(test_async_loop), T(test_no_marks), T(test_no_steps),
          T(test_optimizer_marks), T(test_pageable_host), T(test_two_rank_files),
          T(test_two_ranks_merged))
