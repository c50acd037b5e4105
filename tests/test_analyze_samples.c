/* What analyze says the launching thread was doing in each finding (issue 46 item 3), from host
 * stack samples, on a synthetic trace whose every interval is known by construction: ten 2 ms
 * steps, each a kernel launched 1 ms into the step (the GPU idle 1.2 ms before it, the host
 * outside CUDA: gpu_gap), a cudaMalloc of 300 us in the even steps (alloc_steady), the first
 * gap before the steady state (outside_steady). The main thread is sampled every 50 us, its
 * stack chosen by the test from where the sample falls (in the allocation: alloc_buffers; in the
 * first millisecond of an odd step: load_batch under a standard-library frame, of an even one:
 * tokenize; else train); a second thread is sampled too and must never count. Each finding's
 * samples and top frames, each worst instance's top frame, and the host wait per line
 * (--group-by line: each gap's host_wait part split over its samples) are counted here from the
 * test's own lists and compared; then the same trace as two files (the job's fold doubles every
 * count), and the text. */
#include "why/analyze.h"
#include "check.h"
#include "steps.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PROC = 1, MAIN, GPU, STREAM };
#define US    1000ll
#define NSTEP 10
#define T0    (5000 * US)

static int64_t step_ts(int i)
{
	return T0 + 2000 * US * i;
}

/* The stacks: frame names as analyze shows a stack (its innermost frame of user code). */
enum { S_ALLOC = 1, S_LOAD, S_TOK, S_TRAIN, S_WORKER, S_N };
static const char *const frame_of[S_N] = {NULL,
                                          "alloc_buffers (train.py:20)",
                                          "load_batch (train.py:13)",
                                          "tokenize (data.py:7)",
                                          "train (train.py:31)",
                                          "worker (loader.py:5)"};

static int stack_at(int64_t t)
{
	for (int i = 0; i < NSTEP; i++) {
		int64_t s = step_ts(i);
		if (i % 2 == 0 && t >= s + 100 * US && t < s + 400 * US)
			return S_ALLOC;
		if (t >= s && t < s + 1000 * US)
			return i % 2 ? S_LOAD : S_TOK;
	}
	return S_TRAIN;
}

static int64_t sample_ts(int k)
{
	return T0 + 50 * US * k + 25 * US;
}
enum { NSAMPLES = NSTEP * 40 };

#define PY(fn, fl, ln)                                                                             \
	{                                                                                          \
		.kind = CUPTRACE_FRAME_PYTHON, .function = fn, .file = fl, .line = ln              \
	}

static void feed_stacks(struct cuptrace_sink *s)
{
	static const struct cuptrace_frame train = PY("train", "/w/train.py", 31);
	const struct cuptrace_frame stacks[S_N][3] = {
	    [S_ALLOC] = {train, PY("alloc_buffers", "/w/train.py", 20)},
	    [S_LOAD] = {train, PY("load_batch", "/w/train.py", 13),
	                PY("wait", "/usr/lib/python3.11/threading.py", 320)},
	    [S_TOK] = {train, PY("tokenize", "/w/data.py", 7)},
	    [S_TRAIN] = {train},
	    [S_WORKER] = {PY("worker", "/w/loader.py", 5)},
	};
	static const size_t n[S_N] = {0, 2, 3, 2, 1, 1};
	for (int k = 1; k < S_N; k++) {
		struct cuptrace_stack st = {
		    .id = 100 + (uint64_t)k, .frames = stacks[k], .nframes = n[k]};
		CHECK_EQ_INT(s->ops->stack(s, &st), 0);
	}
}

/* test_pageable: each step's work is a 5 us copy from pageable memory, not the kernel. */
static int pageable;
static int64_t work_us(void)
{
	return pageable ? 5 : 800;
}

/* The trace into s (not finished). */
static void feed(struct cuptrace_sink *s, int samples)
{
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
	if (samples)
		feed_stacks(s);
	for (int i = 0; i < NSTEP; i++) {
		int64_t t = step_ts(i);
		char name[32];
		snprintf(name, sizeof(name), "ProfilerStep#%d", i);
		steps_slice(s, MAIN, t, 2000 * US, "user_annotation", name, NULL, 0, 0, 0);
		if (i % 2 == 0)
			steps_slice(s, MAIN, t + 100 * US, 300 * US, "cuda_runtime", "cudaMalloc",
			            NULL, 0, 0, 0);
		steps_slice(s, MAIN, t + 1000 * US, 5 * US, "cuda_runtime",
		            pageable ? "cudaMemcpyAsync" : "cudaLaunchKernel", NULL, 0,
		            (uint64_t)i + 1, 0);
		steps_slice(s, STREAM, t + 1010 * US, work_us() * US,
		            pageable ? "memcpy" : "kernel",
		            pageable ? "Memcpy HtoD (Pageable -> Device)" : "gemm", NULL, 0, 0,
		            (uint64_t)i + 1);
	}
	for (int k = 0; samples && k < NSAMPLES; k++) {
		struct cuptrace_sample e = {.track_uuid = MAIN,
		                            .ts = sample_ts(k),
		                            .pid = 900,
		                            .tid = 900,
		                            .stack_id = 100 + (uint64_t)stack_at(sample_ts(k))};
		CHECK_EQ_INT(s->ops->sample(s, &e), 0);
		e.tid = 901;
		e.stack_id = 100 + S_WORKER;
		CHECK_EQ_INT(s->ops->sample(s, &e), 0);
	}
	CHECK_EQ_INT(steps_err, 0);
}

/* Main's samples in [a, b] by stack, into n[] (added); their number. */
static uint32_t count_in(int64_t a, int64_t b, uint32_t n[S_N])
{
	uint32_t all = 0;
	for (int k = 0; k < NSAMPLES; k++)
		if (sample_ts(k) >= a && sample_ts(k) <= b) {
			n[stack_at(sample_ts(k))]++;
			all++;
		}
	return all;
}

/* The test's expectation of one finding: its intervals' samples by stack. */
struct want {
	uint32_t n[S_N], all;
};

/* The finding's frames are want's, every one (at most 4 on main: fewer than a finding keeps),
 * most first. */
static void check_frames(const struct cuptrace_an_finding *f, const struct want *w, uint32_t mul)
{
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ_INT(f->host_samples, w->all * mul);
	uint32_t shown = 0;
	for (size_t k = 0; k < f->nhost_frames; k++) {
		int s = 1;
		while (s < S_N && strcmp(frame_of[s], f->host_frames[k].frame))
			s++;
		CHECK(s < S_N);
		if (s == S_N)
			continue;
		CHECK_EQ_INT(f->host_frames[k].samples, w->n[s] * mul);
		shown += f->host_frames[k].samples;
	}
	/* Every stack with samples appears (there are at most 4 on main, fewer than kept). */
	size_t distinct = 0;
	for (int s = 1; s < S_N; s++)
		distinct += w->n[s] > 0;
	CHECK_EQ_INT(f->nhost_frames, distinct);
	CHECK_EQ_INT(shown, w->all * mul);
	for (size_t k = 1; k < f->nhost_frames; k++)
		CHECK(f->host_frames[k - 1].samples >= f->host_frames[k].samples);
}

static const struct cuptrace_an_finding *find(const struct cuptrace_analysis *a, const char *id)
{
	for (size_t i = 0; i < a->nfindings; i++)
		if (!strcmp(a->findings[i].id, id))
			return &a->findings[i];
	return NULL;
}

/* The steady state: the steps' ranges end after their kernels, so each completes at its range's
 * end; from the first's to the last's. */
static int64_t steady_from(void)
{
	return step_ts(0) + 2000 * US;
}
static int64_t steady_to(void)
{
	return step_ts(NSTEP - 1) + 2000 * US;
}

static void expect(struct want *gap, struct want *outside, struct want *alloc, int64_t *line_ns,
                   int64_t *wait_total)
{
	memset(gap, 0, sizeof(*gap));
	memset(outside, 0, sizeof(*outside));
	memset(alloc, 0, sizeof(*alloc));
	memset(line_ns, 0, S_N * sizeof(*line_ns));
	*wait_total = 0;
	for (int i = 1; i < NSTEP; i++) {
		/* The gap before step i's kernel: from the previous kernel's end. */
		int64_t g0 = step_ts(i - 1) + (1010 + work_us()) * US, g1 = step_ts(i) + 1010 * US;
		int inside = g0 >= steady_from() && g1 <= steady_to();
		struct want *w = inside ? gap : outside;
		w->all += count_in(g0, g1, w->n);
		if (!inside)
			continue;
		/* Its host_wait part: to the launch (the allocation is no synchronize). */
		int64_t hw = step_ts(i) + 1000 * US - g0;
		uint32_t n[S_N] = {0}, all = count_in(g0, g0 + hw, n);
		*wait_total += hw;
		for (int s = 1; s < S_N; s++)
			line_ns[s] += all ? hw * n[s] / all : 0;
	}
	for (int i = 0; i < NSTEP; i += 2) {
		int64_t a = step_ts(i) + 100 * US;
		if (a >= steady_from() && a < steady_to())
			alloc->all += count_in(a, a + 300 * US, alloc->n);
	}
}

/* Which finding owns each sample, worked out here from the intervals the trace was built with
 * and the rule of src/inject/SAMPLING.md: a GPU gap's owner (the finding holding its idle:
 * gpu_gap, or pageable_copy with pageable copies; outside_steady before the steady state) first,
 * then the calls and copies (alloc_steady's allocations, pageable_copy's copies). The even
 * steps' allocations lie inside the gaps: their samples are counted by both findings and owned
 * by the gap's. Each finding's host_samples (each sample once), host_samples_owned, and the
 * analysis's findings_host_samples (the owned ones, over all findings) are compared. */
enum { O_GAP, O_OUTSIDE, O_ALLOC, O_COPY, O_N };
struct iv {
	int who, gap;
	int64_t a, b;
};

static size_t intervals(struct iv *v)
{
	size_t n = 0;
	for (int i = 1; i < NSTEP; i++) {
		int64_t g0 = step_ts(i - 1) + (1010 + work_us()) * US, g1 = step_ts(i) + 1010 * US;
		int inside = g0 >= steady_from() && g1 <= steady_to();
		v[n++] = (struct iv){inside ? O_GAP : O_OUTSIDE, 1, g0, g1};
	}
	for (int i = 0; i < NSTEP; i++) {
		int64_t a = step_ts(i) + 100 * US, c = step_ts(i) + 1010 * US;
		if (i % 2 == 0 && a >= steady_from() && a < steady_to())
			v[n++] = (struct iv){O_ALLOC, 0, a, a + 300 * US};
		if (pageable && c >= steady_from() && c < steady_to())
			v[n++] = (struct iv){O_COPY, 0, c, c + work_us() * US};
	}
	return n;
}

static void check_owners(const struct cuptrace_analysis *a, uint32_t mul)
{
	struct iv v[4 * NSTEP];
	size_t n = intervals(v);
	uint32_t seen[O_N] = {0}, owned[O_N] = {0}, any = 0, shared = 0;
	for (int k = 0; k < NSAMPLES; k++) {
		int64_t t = sample_ts(k);
		int in[O_N] = {0}, owner = -1;
		for (int gap = 1; gap >= 0; gap--)
			for (size_t i = 0; i < n; i++)
				if (v[i].gap == gap && t >= v[i].a && t <= v[i].b) {
					in[v[i].who] = 1;
					owner = owner < 0 ? v[i].who : owner;
				}
		int nin = 0;
		for (int j = 0; j < O_N; j++) {
			seen[j] += (uint32_t)in[j];
			nin += in[j];
		}
		shared += nin > 1;
		if (owner >= 0) {
			owned[owner]++;
			any++;
		}
	}
	/* The fixture has samples in two findings at once, and the owned counts add up. */
	CHECK(shared > 0 && owned[O_ALLOC] < seen[O_ALLOC]);
	const char *id[O_N] = {pageable ? "pageable_copy" : "gpu_gap", "outside_steady",
	                       "alloc_steady", "pageable_copy"};
	for (int j = 0; j < O_N; j++) {
		if (j == O_COPY) /* one finding with the gaps: add them up */
			continue;
		uint32_t s = seen[j], o = owned[j];
		if (pageable && j == O_GAP) {
			s += seen[O_COPY];
			o += owned[O_COPY];
		}
		const struct cuptrace_an_finding *f = find(a, id[j]);
		CHECK(f != NULL);
		if (!f)
			continue;
		CHECK_EQ_INT(f->host_samples, s * mul);
		CHECK_EQ_INT(f->host_samples_owned, o * mul);
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < a->nfindings; i++)
		sum += a->findings[i].host_samples_owned;
	CHECK_EQ_INT(a->findings_host_samples, (uint64_t)any * mul);
	CHECK_EQ_INT(sum, (uint64_t)any * mul);
}

static void check_analysis(const struct cuptrace_analysis *a, uint32_t mul)
{
	struct want gap, outside, alloc;
	int64_t line_ns[S_N], total;
	expect(&gap, &outside, &alloc, line_ns, &total);
	CHECK(gap.all > 0 && outside.all > 0 && alloc.all > 0);
	CHECK_EQ_INT(a->host_samples, 2 * NSAMPLES * mul);
	check_frames(find(a, "gpu_gap"), &gap, mul);
	check_frames(find(a, "outside_steady"), &outside, mul);
	check_frames(find(a, "alloc_steady"), &alloc, mul);
	/* Each worst instance: its own interval's top frame. */
	const struct cuptrace_an_finding *f = find(a, "gpu_gap");
	for (size_t k = 0; f && k < f->nworst; k++) {
		const struct cuptrace_an_instance *in = &f->worst[k];
		uint32_t n[S_N] = {0}, all = count_in(in->ts, in->ts + in->dur, n);
		int top = 1;
		for (int s = 2; s < S_N; s++)
			if (n[s] > n[top])
				top = s;
		CHECK_EQ_INT(in->tid, 900);
		CHECK_EQ_INT(in->host_samples, all);
		CHECK_EQ_INT(in->host_frame_samples, n[top]);
		CHECK(in->host_frame && !strcmp(in->host_frame, frame_of[top]));
	}
	/* Host wait by line. */
	CHECK(a->by_line);
	CHECK_EQ_INT(a->line_wait_total_ns, total * mul);
	CHECK_EQ_INT(a->line_wait_unsampled_ns, 0);
	int64_t table_wait = 0;
	for (size_t g = 0; g < a->ngpus; g++)
		table_wait += a->gpus[g].idle_by_cause[CUPTRACE_IDLE_HOST_WAIT];
	CHECK_EQ_INT(a->line_wait_total_ns, table_wait);
	size_t rows = 0;
	for (int s = 1; s < S_N; s++) {
		if (!line_ns[s])
			continue;
		rows++;
		const struct cuptrace_an_line_wait *r = NULL;
		for (size_t i = 0; i < a->nline_waits; i++)
			if (!strcmp(a->line_waits[i].line, frame_of[s]))
				r = &a->line_waits[i];
		CHECK(r && r->wait_ns == line_ns[s] * mul);
	}
	CHECK_EQ_INT(a->nline_waits, rows);
	for (size_t i = 1; i < a->nline_waits; i++)
		CHECK(a->line_waits[i - 1].wait_ns >= a->line_waits[i].wait_ns);
	check_owners(a, mul);
}

static char *report(const struct cuptrace_analysis *a, int md)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	if (md < 0)
		CHECK_EQ_INT(cuptrace_analysis_print_json(a, m), 0);
	else {
		cuptrace_analysis_print(a, m, md);
		cuptrace_analysis_print_line_waits(a, m, md);
	}
	fclose(m);
	return buf;
}

/* The text with each run of white space (wrapped lines, indentation) made one space. */
static char *flat(char *t)
{
	size_t k = 0;
	for (size_t i = 0; t && t[i]; i++) {
		int sp = t[i] == ' ' || t[i] == '\n';
		if (!sp || !k || t[k - 1] != ' ')
			t[k++] = sp ? ' ' : t[i];
	}
	if (t)
		t[k] = 0;
	return t;
}

static void test_findings(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_analyze_opts o = {.by_line = 1};
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, &o);
	CHECK(s != NULL);
	if (!s)
		return;
	feed(s, 1);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	check_analysis(&a, 1);

	/* The text: the gpu_gap finding's line, its shares computed here. */
	struct want gap, outside, alloc;
	int64_t line_ns[S_N], total;
	expect(&gap, &outside, &alloc, line_ns, &total);
	char want[256];
	snprintf(want, sizeof(want),
	         "The launching thread was in load_batch (train.py:13) in %.0f%%",
	         100.0 * gap.n[S_LOAD] / gap.all);
	char *txt = flat(report(&a, 0)), *md = flat(report(&a, 1)), *js = report(&a, -1);
	CHECK(txt && strstr(txt, want));
	CHECK(md && strstr(md, "`load_batch (train.py:13)` in "));
	snprintf(want, sizeof(want), " of %u host stack samples in its intervals", gap.all);
	CHECK(txt && strstr(txt, want));
	CHECK(txt && strstr(txt, "Host wait by source line"));
	CHECK(js && strstr(js, "\"host_wait_lines\":{\"host_wait_ns\":"));
	snprintf(want, sizeof(want), "{\"frame\":\"load_batch (train.py:13)\",\"samples\":%u}",
	         gap.n[S_LOAD]);
	CHECK(js && strstr(js, want));
	/* The owned counts (checked above against the test's own) in JSON and text. */
	const struct cuptrace_an_finding *al = find(&a, "alloc_steady");
	snprintf(want, sizeof(want), "\"findings_host_samples\":%" PRIu64 ",",
	         a.findings_host_samples);
	CHECK(js && strstr(js, want));
	snprintf(want, sizeof(want), "\"host_samples\":%u,\"host_samples_owned\":%u,",
	         al ? al->host_samples : 0, al ? al->host_samples_owned : 0);
	CHECK(al && js && strstr(js, want));
	snprintf(want, sizeof(want), "(%u of them counted for another finding)",
	         al ? al->host_samples - al->host_samples_owned : 0);
	CHECK(al && txt && strstr(txt, want));
	snprintf(want, sizeof(want),
	         "%" PRIu64 " host stack samples fell in the findings' intervals",
	         a.findings_host_samples);
	CHECK(txt && strstr(txt, want));
	if (getenv("SAMPLES_PRINT"))
		fprintf(stderr, "%s\n%s\n", txt, js);
	free(txt);
	free(md);
	free(js);
	cuptrace_analysis_free(&a);
}

/* The same trace as two files of one job: every count doubles (the job's fold merges each
 * finding's frames and the lines by name). */
static void test_two_files(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_analyze_opts o = {.by_line = 1};
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, &o);
	CHECK(s != NULL);
	if (!s)
		return;
	feed(s, 1);
	cuptrace_analyze_next_file(s);
	feed(s, 1);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	check_analysis(&a, 2);
	cuptrace_analysis_free(&a);
}

/* Without samples: every finding says none, the report says how to get them. */
static void test_no_samples(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_analyze_opts o = {.by_line = 1};
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, &o);
	CHECK(s != NULL);
	if (!s)
		return;
	feed(s, 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK_EQ_INT(a.host_samples, 0);
	CHECK(a.nfindings > 0);
	for (size_t i = 0; i < a.nfindings; i++)
		CHECK(!a.findings[i].host_samples && !a.findings[i].nhost_frames);
	CHECK_EQ_INT(a.nline_waits, 0);
	CHECK(a.line_wait_total_ns > 0 && a.line_wait_unsampled_ns == a.line_wait_total_ns);
	char *txt = flat(report(&a, 0));
	CHECK(txt && strstr(txt, "needs host stack samples: record with `cuptrace record "
	                         "--sample`"));
	CHECK(txt &&
	      strstr(txt, "No host stack samples in this trace: `cuptrace record --sample`"));
	free(txt);
	cuptrace_analysis_free(&a);
}

/* Copies from pageable memory: the GPU idle before each is the pageable_copy finding's (the
 * copy's gap), so the finding's samples are the gaps' (the copies' own intervals, 15 us from
 * each call's start, hold none): the thread in load_batch and tokenize, not "no sample". */
static void test_pageable(void)
{
	struct cuptrace_analysis a;
	struct cuptrace_analyze_opts o = {0};
	pageable = 1;
	struct cuptrace_sink *s = cuptrace_analyze_sink_new(&a, &o);
	CHECK(s != NULL);
	if (s) {
		feed(s, 1);
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);
		struct want gap, outside, alloc;
		int64_t line_ns[S_N], total;
		expect(&gap, &outside, &alloc, line_ns, &total);
		CHECK(gap.all > 0 && gap.n[S_LOAD] > 0);
		CHECK(find(&a, "gpu_gap") == NULL);
		check_frames(find(&a, "pageable_copy"), &gap, 1);
		check_owners(&a, 1);
		cuptrace_analysis_free(&a);
	}
	pageable = 0;
}

TEST_MAIN(T(test_findings), T(test_two_files), T(test_no_samples), T(test_pageable))
