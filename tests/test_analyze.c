/* Tests of `cuptrace analyze` on synthetic traces whose answers are known by construction
 * (tests/steps.h, and a launch-bound loop built here): every figure is checked against a
 * computation of the test's own (a brute-force union over the interval list, the causes from
 * the launch times). `test_analyze --gen OUT N [--no-marks]` writes a trace of N kernels for the
 * speed checks of tests/analyze_test.sh. */
#include "why/analyze.h"
#include "check.h"
#include "format/formats.h"
#include "steps.h"

struct iv {
	int64_t a, b;
};

/* Busy by brute force: the union of intervals, point by point over their ends (O(n^2)). */
static int64_t union_ns(const struct iv *v, size_t n)
{
	int64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		/* Count the part of v[i] not covered by an earlier-indexed interval: split into
		 * unit-free pieces by walking ns would be too slow; instead sweep its sub-ranges.
		 */
		int64_t a = v[i].a, b = v[i].b;
		for (int64_t t = a; t < b; t++) {
			int covered = 0;
			for (size_t j = 0; j < i && !covered; j++)
				covered = v[j].a <= t && t < v[j].b;
			sum += !covered;
		}
	}
	return sum;
}

static int analyze_steps(const struct steps_spec *sp, const char *step, struct cuptrace_analysis *a)
{
	struct cuptrace_analyze_opts o = {.step_name = step};
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(a, &o);
	if (!s)
		return -1;
	int err = steps_feed(s, sp);
	if (!err)
		err = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	return err;
}

static const struct cuptrace_an_finding *find(const struct cuptrace_analysis *a, const char *id)
{
	for (size_t i = 0; i < a->nfindings; i++)
		if (!strcmp(a->findings[i].id, id))
			return &a->findings[i];
	return NULL;
}

static void test_steps_loop(void)
{
	struct steps_spec sp = STEPS_DEFAULT;
	sp.steps = 5;
	sp.softmax = 1;
	struct cuptrace_analysis a;
	CHECK_EQ_INT(analyze_steps(&sp, "step", &a), 0);
	/* The GPU work of steps.h, step by step. */
	struct iv v[64];
	size_t n = 0;
	for (int i = 0; i < sp.steps; i++) {
		int64_t t = sp.start_ns + 10000 * (int64_t)i;
		v[n++] = (struct iv){t + 1000, t + 1000 + sp.gemm_ns};
		v[n++] = (struct iv){t + 7000, t + 7500};
		v[n++] = (struct iv){t + 7500, t + 8500};
		v[n++] = (struct iv){t + 8500, t + 9300};
	}
	/* The tables cover the steady state, from the end of the first step to the end of the
	 * last: the work clipped to it. Before it, start-up: from the first work on. */
	int64_t lo = sp.start_ns + 10000, hi = sp.start_ns + 10000 * sp.steps;
	int64_t launch_at[] = {200, 600, 800, 1000}; /* each work's launch, from its step */
	struct iv c[64];
	int64_t cl[64];
	size_t nc = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t a0 = v[i].a > lo ? v[i].a : lo, b0 = v[i].b < hi ? v[i].b : hi;
		if (b0 <= a0)
			continue;
		cl[nc] = sp.start_ns + 10000 * (int64_t)(i / 4) + launch_at[i % 4];
		c[nc++] = (struct iv){a0, b0};
	}
	int64_t busy = union_ns(c, nc);
	CHECK_EQ_INT(a.ngpus, 1);
	CHECK_EQ_INT(a.gpus[0].busy_ns, busy);
	CHECK_EQ_INT(a.kernels, 3 * sp.steps);
	CHECK_EQ_INT(a.copies, sp.steps);
	CHECK_EQ_INT(a.linked, 4 * sp.steps);
	CHECK_EQ_INT(a.gpus[0].first_ts, c[0].a);
	CHECK_EQ_INT(a.gpus[0].idle_ns, c[nc - 1].b - c[0].a - busy);
	CHECK_EQ_INT(a.gpus[0].startup_ns, lo - v[0].a);
	CHECK_EQ_INT(a.gpus[0].startup_idle_ns, lo - v[0].a - union_ns(v, 4));
	CHECK(a.steady_steps && a.steady_from == lo && a.steady_to == hi);
	/* Causes of each gap between the clipped work (in time order, back to back or apart):
	 * host wait until the next work's launch, launch latency after it. */
	int64_t host = 0, lat = 0;
	for (size_t i = 1; i < nc; i++) {
		int64_t g0 = c[i - 1].b, g1 = c[i].a;
		if (g1 <= g0)
			continue;
		int64_t h = cl[i] < g0 ? g0 : cl[i] > g1 ? g1 : cl[i];
		host += h - g0;
		lat += g1 - h;
	}
	CHECK_EQ_INT(a.gpus[0].idle_by_cause[CUPTRACE_IDLE_HOST_WAIT], host);
	CHECK_EQ_INT(a.gpus[0].idle_by_cause[CUPTRACE_IDLE_LAUNCH], lat);
	CHECK_EQ_INT(a.gpus[0].idle_by_cause[CUPTRACE_IDLE_HOST_SYNC], 0);
	CHECK_EQ_INT(a.gpus[0].idle_by_cause[CUPTRACE_IDLE_OTHER], 0);
	CHECK(a.nidle > 0 && a.idle[0].ts >= lo && a.idle[0].ts + a.idle[0].dur <= hi);
	/* Steps: each 10 us, busy = one step's union. */
	CHECK_EQ_INT(a.nsteps, sp.steps);
	for (size_t i = 0; i < a.nsteps; i++) {
		CHECK_EQ_INT(a.steps[i].dur, 10000);
		CHECK_EQ_INT(a.steps[i].busy_ns, union_ns(v + 4 * i, 4));
		CHECK_EQ_INT(a.steps[i].kernels, 4);
		CHECK_EQ_INT(a.steps[i].launches, 4);
		CHECK(!a.steps[i].outlier);
	}
	CHECK_EQ_INT(a.step_median_ns, 10000);
	/* Ops: gemm under aten::mm; relu, the copy and softmax straight under "step". */
	CHECK(a.nops == 2);
	if (a.nops == 2) {
		CHECK_EQ_STR(a.ops[0].name, "aten::mm");
		CHECK_EQ_INT(a.ops[0].self_ns, sp.gemm_ns * sp.steps);
		CHECK_EQ_STR(a.ops[1].name, "step");
		CHECK_EQ_INT(a.ops[1].self_ns, (500 + 1000 + 800) * sp.steps);
		CHECK_EQ_INT(a.ops[1].total_ns, (500 + 1000 + 800 + sp.gemm_ns) * sp.steps);
		CHECK_EQ_STR(a.ops[0].top[0].name,
		             "void gemm<float, 128>(float const*, float*, int)");
	}
	/* Findings look at the steady state, from the end of the first step on: the first
	 * step's pageable copy is start-up. */
	const struct cuptrace_an_finding *f = find(&a, "pageable_copy");
	CHECK(f && f->count == (uint64_t)sp.steps - 1 && f->total_ns == 1000 * (sp.steps - 1));
	CHECK(f && f->worst[0].bytes == 4096);
	CHECK(!find(&a, "sync_copy") && !find(&a, "alloc_steady") && !find(&a, "straggler"));
	cuptrace_analysis_free(&a);
}

/* A slow step among fast ones is named an outlier; a cudaMalloc after the first step is an
 * allocation in the steady state. */
static void test_outlier_and_alloc(void)
{
	struct steps_spec sp = STEPS_DEFAULT;
	sp.steps = 4;
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, &(struct cuptrace_analyze_opts){0});
	CHECK(s != NULL);
	if (!s)
		return;
	int err = steps_feed(s, &sp);
	/* ProfilerStep#N ranges on main: 10, 10, 30, 10 us; a cudaMalloc in the third. */
	int64_t t = 100000, d[] = {10000, 10000, 30000, 10000};
	const char *names[] = {"ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3",
	                       "ProfilerStep#4"};
	for (int i = 0; i < 4 && !err; i++) {
		steps_slice(s, STEPS_MAIN, t, d[i], "user_annotation", names[i], NULL, 0, 0, 0);
		if (i == 2)
			steps_slice(s, STEPS_MAIN, t + 100, 2000, "cuda_runtime", "cudaMalloc",
			            NULL, 0, 0, 0);
		t += d[i];
		err = steps_err;
	}
	if (!err)
		err = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	CHECK_EQ_INT(err, 0);
	CHECK_EQ_INT(a.nsteps, 4);
	CHECK_EQ_STR(a.step_source, "ProfilerStep#");
	CHECK_EQ_INT(a.step_median_ns, 10000);
	for (size_t i = 0; i < a.nsteps; i++)
		CHECK_EQ_INT(a.steps[i].outlier, i == 2);
	/* Its call time apart; judged on the GPU idle it explains: none, no GPU work near it. */
	const struct cuptrace_an_finding *f = find(&a, "alloc_steady");
	CHECK(f && f->count == 1 && f->call_ns == 2000 && f->idle_ns == 0 && f->total_ns == 0);
	CHECK(f && !f->severe && f->worst[0].ts == 120100);
	cuptrace_analysis_free(&a);
}

/* One process (pid 900), thread main, "GPU 0: NVIDIA H100" with Stream 7, begun on sink s. */
enum { T_PROC = 1, T_MAIN, T_GPU, T_STREAM };
static void one_process(struct cuptrace_sink *s)
{
	struct cuptrace_trace_info info = {.pid = 900, .process_name = "train"};
	steps_err = s->ops->begin(s, &info);
	steps_track(
	    s, (struct cuptrace_track){.uuid = T_PROC, .kind = CUPTRACE_TRACK_PROCESS, .pid = 900});
	steps_track(s, (struct cuptrace_track){.uuid = T_MAIN,
	                                       .kind = CUPTRACE_TRACK_THREAD,
	                                       .parent_uuid = T_PROC,
	                                       .pid = 900,
	                                       .tid = 900,
	                                       .name = "main"});
	steps_track(s, (struct cuptrace_track){.uuid = T_GPU,
	                                       .kind = CUPTRACE_TRACK_GROUP,
	                                       .parent_uuid = T_PROC,
	                                       .pid = 900,
	                                       .name = "GPU 0: NVIDIA H100"});
	steps_track(s, (struct cuptrace_track){.uuid = T_STREAM,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = T_GPU,
	                                       .pid = 900,
	                                       .name = "Stream 7"});
}

/* A launch on main at lt and its kernel at kt, joined by a flow; the kernel goes into v. */
static void launch(struct cuptrace_sink *s, int64_t lt, int64_t kt, int64_t kd, uint64_t flow,
                   struct iv *v, size_t *n)
{
	steps_slice(s, T_MAIN, lt, 100, "cuda_runtime", "cudaLaunchKernel", NULL, 0, flow, 0);
	steps_slice(s, T_STREAM, kt, kd, "kernel", "k", NULL, 0, 0, flow);
	v[(*n)++] = (struct iv){kt, kt + kd};
}

/* What the real clean loop on an H100 looked like: start-up (a copy, then 10 ms in
 * cudaStreamSynchronize while the GPU idles: host_sync), a first step with a 235 us warm-up
 * gap, then steps with small gaps and one of 150 us. Start-up and the first step are no
 * finding: they go to the outside_steady note, never severe; the steady state keeps the one
 * gpu_gap, a note. Gaps computed here from the kernels' list, the window from the steps. */
static void test_startup(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	struct iv v[64];
	size_t n = 0;
	uint64_t flow = 1;
	one_process(s);
	steps_slice(s, T_MAIN, 1000, 100, "cuda_runtime", "cudaMemcpyAsync", NULL, 0, flow, 0);
	steps_slice(s, T_STREAM, 2000, 1000, "memcpy", "Memcpy HtoD (Pinned -> Device)", NULL, 0, 0,
	            flow++);
	v[n++] = (struct iv){2000, 3000};
	steps_slice(s, T_MAIN, 3100, 10000000, "cuda_runtime", "cudaStreamSynchronize", NULL, 0, 0,
	            0);
	launch(s, 10004000, 10005000, 2000, flow++, v, &n);
	enum { NSTEPS = 6 };
	int64_t st[NSTEPS], sd[NSTEPS], t = 10010000;
	char name[NSTEPS][32];
	for (int i = 0; i < NSTEPS; i++) {
		/* Step 0: 400 us, its second kernel 235 us after the first; step 3: 300 us,
		 * 150 us between its kernels; the others 100 us, 5 us between. */
		int64_t k2 = i == 0 ? 300000 : i == 3 ? 215000 : 70000;
		st[i] = t;
		sd[i] = i == 0 ? 400000 : i == 3 ? 300000 : 100000;
		snprintf(name[i], sizeof(name[i]), "ProfilerStep#%d", i);
		steps_slice(s, T_MAIN, t, sd[i], "user_annotation", name[i], NULL, 0, 0, 0);
		launch(s, t + 1000, t + 5000, 60000, flow++, v, &n);
		launch(s, t + 2000, t + k2, 20000, flow++, v, &n);
		t += sd[i];
	}
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	/* The gaps between the work (in time order, not overlapping), split by the window. */
	int64_t from = st[0] + sd[0], to = st[NSTEPS - 1] + sd[NSTEPS - 1];
	int64_t gap = 100000, out_ns = 0, in_ns = 0, out_max = 0;
	uint64_t out_n = 0, in_n = 0;
	for (size_t i = 1; i < n; i++) {
		int64_t g0 = v[i - 1].b, d = v[i].a - v[i - 1].b;
		int inside = g0 >= from && g0 + d <= to;
		if (d < gap)
			continue;
		out_n += !inside;
		out_ns += inside ? 0 : d;
		out_max = !inside && d > out_max ? d : out_max;
		in_n += inside;
		in_ns += inside ? d : 0;
	}
	CHECK(out_n == 2 && in_n == 1 && in_ns == 150000);
	/* Severe: at least 5% of the steady state (the 150 us gap is, of a 900 us steady state);
	 * the note outside_steady never. */
	for (size_t i = 0; i < a.nfindings; i++)
		CHECK_EQ_INT(a.findings[i].severe, strcmp(a.findings[i].id, "outside_steady") &&
		                                       a.findings[i].total_ns * 20 >= to - from);
	CHECK(a.steady_from == from && a.steady_to == to);
	CHECK(!find(&a, "host_sync_idle"));
	const struct cuptrace_an_finding *f = find(&a, "outside_steady");
	CHECK(f && f->count == out_n && f->total_ns == out_ns && f->worst[0].dur == out_max);
	CHECK(f && !strcmp(f->worst[0].what, "host_sync"));
	f = find(&a, "gpu_gap");
	CHECK(f && f->count == in_n && f->total_ns == in_ns && f->severe);
	/* The start-up gap alone is far above 5% of the span: it would have been severe. */
	CHECK(out_max * 20 >= a.max_ts - a.min_ts);
	cuptrace_analysis_free(&a);
}

/* --cuda-graphs graph: 120 whole graph launches of 5 us, 1 us apart. They are GPU work (busy
 * time, computed here from the list) and counted as graph launches, not kernels; short as they
 * are, they are no "flood of tiny kernels" (a graph is many kernels already). Each is a step
 * of a replay loop. */
static void test_graph_launches(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	struct iv v[128];
	size_t n = 0;
	one_process(s);
	for (int i = 0; i < 120; i++) {
		int64_t t = 1000000 + (int64_t)i * 6000;
		steps_slice(s, T_MAIN, t - 3000, 2000, "cuda_runtime", "cudaGraphLaunch", NULL, 0,
		            (uint64_t)i + 1, 0);
		steps_slice(s, T_STREAM, t, 5000, "graph", "CUDA graph 3", NULL, 0, 0,
		            (uint64_t)i + 1);
		v[n++] = (struct iv){t, t + 5000};
	}
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK_EQ_INT(a.graphs, 120);
	CHECK_EQ_INT(a.kernels, 0);
	CHECK_EQ_INT(a.linked, 120);
	CHECK_EQ_INT(a.ngpus, 1);
	/* No marks: each launch is an iteration found in the GPU work; the first is start-up,
	 * the tables cover the rest. */
	CHECK_EQ_STR(a.step_kind, "gpu_period");
	CHECK_EQ_INT(a.nsteps, 120);
	if (a.ngpus == 1) {
		CHECK_EQ_INT(a.gpus[0].busy_ns, union_ns(v + 1, n - 1));
		CHECK_EQ_INT(a.gpus[0].graphs, 119);
		CHECK_EQ_INT(a.gpus[0].kernels, 0);
	}
	CHECK(!find(&a, "tiny_kernels"));
	cuptrace_analysis_free(&a);
}

/* A per-node trace of a program with graphs launched from the GPU says in its metadata that
 * their work is missing; analyze sums it over files (an int and a string here) and warns, in
 * text and JSON. Other keys, and a value that is not a number, count for nothing. */
static void test_unrecorded_device_graphs(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	one_process(s);
	steps_slice(s, T_MAIN, 1000, 2000, "cuda_runtime", "cudaLaunchKernel", NULL, 0, 1, 0);
	steps_slice(s, T_STREAM, 4000, 5000, "kernel", "k", NULL, 0, 0, 1);
	const struct cuptrace_meta m[] = {
	    {.key = "graphs_for_device_launch_unrecorded", .is_int = 1, .i = 2},
	    {.key = "graphs_for_device_launch_unrecorded", .s = "1"},
	    {.key = "graphs_for_device_launch_unrecorded", .s = "x"},
	    {.key = "graph_launches", .is_int = 1, .i = 7}};
	CHECK_EQ_INT(s->ops->meta(s, m, 4), 0);
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK_EQ_INT(a.unrecorded_device_graphs, 3);
	CHECK_EQ_INT(a.kernels, 1);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (f) {
		cuptrace_analysis_print(&a, f, 0);
		cuptrace_analysis_print_json(&a, f);
		fclose(f);
		CHECK(buf && strstr(buf, "Not recorded: what 3 CUDA graphs instantiated for launch "
		                         "from the GPU ran"));
		CHECK(buf && strstr(buf, "\"unrecorded_device_graphs\":3"));
	}
	free(buf);
	cuptrace_analysis_free(&a);
}

/* What the alloc loop should look like: a cudaMalloc and a cudaFree in every step (the caching
 * allocator emptied each step), and some at start-up and after the loop. alloc_steady counts
 * the calls from the end of the first step to the end of the last, computed here. */
static void test_alloc_each_step(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	struct iv v[64];
	size_t n = 0;
	uint64_t flow = 1;
	struct {
		int64_t ts, dur;
	} calls[64];
	size_t ncalls = 0;
	one_process(s);
	enum { NSTEPS = 8 };
	int64_t t = 5000000, from = 0, to = 0;
	char name[NSTEPS][32];
	calls[ncalls++].ts = 1000; /* start-up */
	for (int i = 0; i < NSTEPS; i++) {
		snprintf(name[i], sizeof(name[i]), "ProfilerStep#%d", i);
		steps_slice(s, T_MAIN, t, 200000, "user_annotation", name[i], NULL, 0, 0, 0);
		calls[ncalls++].ts = t + 500;
		calls[ncalls++].ts = t + 110000;
		launch(s, t + 10000, t + 12000, 30000, flow++, v, &n);
		if (i == 0)
			from = t + 200000;
		t += 200000;
	}
	to = t;
	calls[ncalls++].ts = t + 50000; /* after the loop */
	int64_t want_ns = 0;
	uint64_t want_n = 0;
	for (size_t i = 0; i < ncalls; i++) {
		/* Long enough to explain the gaps they sit in: a call owns a gap when the thread
		 * was in it as the GPU went idle or for half the gap's host part (README). */
		calls[i].dur = (i % 2 ? 8000 : 85000) + 37 * (int64_t)i;
		steps_slice(s, T_MAIN, calls[i].ts, calls[i].dur, "cuda_runtime",
		            i % 2 ? "cudaMalloc" : "cudaFree", NULL, 0, 0, 0);
		if (calls[i].ts >= from && calls[i].ts < to) {
			want_n++;
			want_ns += calls[i].dur;
		}
	}
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK(want_n == 2 * (NSTEPS - 1));
	/* The GPU idle of each steady-state gap in which main sat in those calls before the next
	 * kernel's launch (2 us before it) is theirs, a figure of its own beside the calls'. */
	int64_t idle = 0;
	for (size_t i = 1; i < n; i++) {
		int64_t g0 = v[i - 1].b, g1 = v[i].a, h = v[i].a - 2000, in = 0;
		if (g0 < from || g1 > to)
			continue;
		for (size_t k = 0; k < ncalls; k++) {
			int64_t s0 = calls[k].ts > g0 ? calls[k].ts : g0;
			int64_t e0 =
			    calls[k].ts + calls[k].dur < h ? calls[k].ts + calls[k].dur : h;
			in += e0 > s0 ? e0 - s0 : 0;
		}
		idle += 2 * in >= h - g0 ? g1 - g0 : 0;
	}
	CHECK(idle > 0);
	const struct cuptrace_an_finding *f = find(&a, "alloc_steady");
	CHECK(f && f->count == want_n && f->call_ns == want_ns && f->idle_ns == idle &&
	      f->total_ns == idle);
	CHECK(f && f->nworst == CUPTRACE_AN_WORST && f->worst[0].dur == calls[ncalls - 2].dur);
	CHECK(f && f->worst[0].ts == calls[ncalls - 2].ts);
	CHECK(f && f->severe == (f->total_ns * 20 >= to - from));
	CHECK(!find(&a, "gpu_gap"));
	cuptrace_analysis_free(&a);
}

/* --gen: one process, one thread launching N kernels of 2 us, 3 us apart, on one stream, a range
 * "op" around every 100 launches and ProfilerStep#N around every 10,000. nomarks: no ranges, the
 * kernels named k0..k49 in turn (the steps are then found in the GPU work: 50 per iteration). */
static int gen(const char *out, long n, int nomarks)
{
	struct cuptrace_sink *s = cuptrace_sink_open(out, NULL, NULL);
	if (!s)
		return 1;
	struct cuptrace_trace_info info = {.pid = 7, .process_name = "gen"};
	steps_err = s->ops->begin(s, &info);
	steps_track(s, (struct cuptrace_track){
	                   .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 7, .name = "gen"});
	steps_track(s, (struct cuptrace_track){.uuid = 2,
	                                       .kind = CUPTRACE_TRACK_THREAD,
	                                       .parent_uuid = 1,
	                                       .pid = 7,
	                                       .tid = 7,
	                                       .name = "main"});
	steps_track(s, (struct cuptrace_track){.uuid = 3,
	                                       .kind = CUPTRACE_TRACK_GROUP,
	                                       .parent_uuid = 1,
	                                       .pid = 7,
	                                       .name = "GPU 0: gen"});
	steps_track(s, (struct cuptrace_track){.uuid = 4,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = 3,
	                                       .pid = 7,
	                                       .name = "Stream 7"});
	char step[32], kname[16];
	for (long i = 0; i < n && !steps_err; i++) {
		int64_t t = 1000 + 3000 * (int64_t)i;
		if (nomarks) {
			snprintf(kname, sizeof(kname), "k%ld", i % 50);
			steps_slice(s, 2, t + 10, 500, "cuda_runtime", "cudaLaunchKernel", NULL, 0,
			            (uint64_t)i + 1, 0);
			steps_slice(s, 4, t + 800, 2000, "kernel", kname, NULL, 0, 0,
			            (uint64_t)i + 1);
			continue;
		}
		if (i % 10000 == 0) {
			snprintf(step, sizeof(step), "ProfilerStep#%ld", i / 10000);
			steps_slice(s, 2, t, 3000 * 10000 - 10, "user_annotation", step, NULL, 0, 0,
			            0);
		}
		if (i % 100 == 0)
			steps_slice(s, 2, t + 1, 3000 * 100 - 20, "cpu_op", "aten::op", NULL, 0, 0,
			            0);
		steps_slice(s, 2, t + 10, 500, "cuda_runtime", "cudaLaunchKernel", NULL, 0,
		            (uint64_t)i + 1, 0);
		steps_slice(s, 4, t + 800, 2000, "kernel", i % 2 ? "k_odd" : "k_even", NULL, 0, 0,
		            (uint64_t)i + 1);
	}
	int err = steps_err ? steps_err : s->ops->finish(s);
	cuptrace_sink_destroy(s);
	return err ? 1 : 0;
}

/* Two ranks without NCCL kernels (gloo, or two processes sharing a GPU): rank 0 waits 6 ms of
 * every 10 ms step in its all-reduce call (c10d::allreduce_ holding gloo:all_reduce, counted
 * once); rank 1, slowed on the host (a long "load" range), arrives late and waits 0.4 ms. The
 * time in collectives comes from the host calls, and the straggler is rank 1. */
static void test_host_collectives(void)
{
	enum { PROC = 1, MAIN, GPU, STREAM };
	struct cuptrace_analysis a;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, NULL);
	CHECK(s != NULL);
	if (!s)
		return;
	int64_t want_host[2] = {0, 0};
	for (int r = 0; r < 2; r++) {
		int32_t pid = 500 + r;
		struct cuptrace_trace_info info = {.pid = pid, .process_name = "train"};
		if (r)
			cuptrace_analyze_next_file(s);
		steps_err = s->ops->begin(s, &info);
		steps_track(s, (struct cuptrace_track){
		                   .uuid = PROC, .kind = CUPTRACE_TRACK_PROCESS, .pid = pid});
		steps_track(s, (struct cuptrace_track){.uuid = MAIN,
		                                       .kind = CUPTRACE_TRACK_THREAD,
		                                       .parent_uuid = PROC,
		                                       .pid = pid,
		                                       .tid = pid,
		                                       .name = "main"});
		steps_track(s, (struct cuptrace_track){.uuid = GPU,
		                                       .kind = CUPTRACE_TRACK_GROUP,
		                                       .parent_uuid = PROC,
		                                       .pid = pid,
		                                       .name = "GPU 0: NVIDIA H100"});
		steps_track(s, (struct cuptrace_track){.uuid = STREAM,
		                                       .kind = CUPTRACE_TRACK_SLICES,
		                                       .parent_uuid = GPU,
		                                       .pid = pid,
		                                       .name = "Stream 7"});
		for (int i = 0; i < 10; i++) {
			int64_t t = 1000000 + 10000000 * (int64_t)i;
			int64_t ar = r ? t + 8600000 : t + 3000000; /* the all-reduce call */
			uint64_t flow = 100 * (uint64_t)i + 1;
			steps_slice(s, MAIN, t, 9500000, "user_annotation", "ProfilerStep#1", NULL,
			            0, 0, 0);
			if (r)
				steps_slice(s, MAIN, t + 10, 8000000, "cpu_op", "load", NULL, 0, 0,
				            0);
			steps_slice(s, MAIN, ar - 200000, 100, "cuda_runtime", "cudaLaunchKernel",
			            NULL, 0, flow, 0);
			steps_slice(s, STREAM, ar - 190000, 150000, "kernel", "gemm", NULL, 0, 0,
			            flow);
			steps_slice(s, MAIN, ar, t + 9000000 - ar, "cpu_op", "c10d::allreduce_",
			            NULL, 0, 0, 0);
			steps_slice(s, MAIN, ar + 100, t + 9000000 - ar - 200, "cpu_op",
			            "gloo:all_reduce", NULL, 0, 0, 0);
			want_host[r] += t + 9000000 - ar;
		}
	}
	CHECK_EQ_INT(steps_err, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK_EQ_INT(a.nranks, 2);
	for (size_t i = 0; i < a.nranks && i < 2; i++) {
		const struct cuptrace_an_rank *k = &a.ranks[i];
		CHECK_EQ_INT(k->comm_ns, 0);
		CHECK_EQ_INT(k->host_comm_ns, want_host[k->pid - 500]);
	}
	CHECK(want_host[0] == 60000000 && want_host[1] == 4000000);
	/* Step by step (the first is start-up): rank 0 waited 6 ms in the call, rank 1 0.4: rank
	 * 1 came last in steps 1 to 9, the others waiting 5.6 ms for it in each. */
	const struct cuptrace_an_finding *f = find(&a, "straggler");
	CHECK(f != NULL && f->severe && f->count == 9 && f->total_ns == 9 * 5600000);
	CHECK(f && f->top_rank < a.nranks && a.ranks[f->top_rank].pid == 501);
	CHECK(f && f->nworst == CUPTRACE_AN_WORST && f->worst[0].dur == 5600000 &&
	      f->worst[0].rank == f->top_rank);
	CHECK_EQ_INT(a.njob_steps, 10);
	for (size_t i = 0; i < a.njob_steps; i++)
		CHECK(a.job_steps[i].number == (int64_t)i && a.job_steps[i].nranks == 2 &&
		      a.job_steps[i].waited_for == (f ? f->top_rank : 0) &&
		      a.job_steps[i].wait_ns == 5600000 && !a.job_steps[i].slow);
	/* Time in collectives: a note, never severe. */
	CHECK(find(&a, "collective_wait") != NULL && !find(&a, "collective_wait")->severe);
	cuptrace_analysis_free(&a);
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "--gen"))
		return gen(argv[2], atol(argv[3]), argc == 5 && !strcmp(argv[4], "--no-marks"));
	static const struct check_test tests[] = {
	    T(test_steps_loop),     T(test_outlier_and_alloc), T(test_host_collectives),
	    T(test_startup),        T(test_graph_launches),    T(test_unrecorded_device_graphs),
	    T(test_alloc_each_step)};
	return check_run(tests, sizeof(tests) / sizeof(tests[0]));
}
