/* GPU hardware metrics without a GPU: the pure sample -> counter layer (units, time alignment,
 * gaps), a capture holding GPU metric items read back through the converter into counter
 * tracks, Chrome JSON carrying the same counters, and stats' per-kernel averages.
 *
 * The samples here are synthetic (exact answers built in the test); the capture recorded on an
 * H100 (tests/data/gm_h100.cupti) is checked against its workload's known answers by
 * gpumetrics_cli_test.sh. The clock choice uses the H100's numbers. */
#include <math.h>
#include <unistd.h>

#include <cupti_runtime_cbid.h>

#include "stats/gpumetrics_stats.h"
#include "check.h"
#include "convert/capture.h"
#include "convert/gpumetrics.h"
#include "format/formats.h"
#include "read/read.h"

static int near(double a, double b)
{
	return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-12;
}

static void test_describe_and_units(void)
{
	struct cuptrace_gm_metric m;
	cuptrace_gm_describe("sm__cycles_active.avg.pct_of_peak_sustained_elapsed", &m);
	CHECK_EQ_STR(m.name, "SM active %");
	CHECK(near(cuptrace_gm_value(&m, 42.5, 100000), 42.5));
	/* Bytes counted over a 100 us sample: 1e6 B / 1e5 ns = 10 GB/s. */
	cuptrace_gm_describe("dram__bytes_read.sum", &m);
	CHECK_EQ_STR(m.name, "DRAM read GB/s");
	CHECK(near(cuptrace_gm_value(&m, 1e6, 100000), 10.0));
	/* A sample twice as long halves the rate: the sample's own length is used. */
	CHECK(near(cuptrace_gm_value(&m, 1e6, 200000), 5.0));
	CHECK(isnan(cuptrace_gm_value(&m, 1e6, 0)));
	CHECK(isnan(cuptrace_gm_value(&m, NAN, 100000)));
	/* Bytes per second -> GB/s. */
	cuptrace_gm_describe("nvltx__bytes.sum.per_second", &m);
	CHECK_EQ_STR(m.name, "NVLink tx GB/s");
	CHECK(near(cuptrace_gm_value(&m, 2.5e11, 100000), 250.0));
	/* Unknown names are shown as they are, after the known ones. */
	cuptrace_gm_describe("lts__t_bytes.sum", &m);
	CHECK_EQ_STR(m.name, "lts__t_bytes.sum");
	CHECK(m.conv == CUPTRACE_GM_AS_IS && m.rank > 10);
	CHECK(near(cuptrace_gm_value(&m, 7, 100000), 7));
	/* Every default role has candidates, each of them a known metric. */
	size_t roles = 0;
	for (const struct cuptrace_gm_role *r = cuptrace_gm_default_roles; r->role; r++, roles++) {
		CHECK(r->candidates[0] != NULL);
		for (const char *const *c = r->candidates; *c; c++) {
			cuptrace_gm_describe(*c, &m);
			CHECK(strcmp(m.name, *c) != 0);
		}
	}
	CHECK_EQ_INT(roles, 10);
}

static void test_stream_alignment_and_gaps(void)
{
	struct cuptrace_gm_stream s;
	/* Sampler clock = trace clock + 5 s; the trace started at 1000 s (trace clock). */
	const int64_t off = 5000000000ll, t0 = 1000000000000ll;
	cuptrace_gm_stream_init(&s, off, t0, 100000);
	uint64_t base = (uint64_t)(t0 + off) + 1000000; /* 1 ms into the trace */
	struct cuptrace_gm_points p = cuptrace_gm_stream_next(&s, base, base + 100000);
	CHECK(p.accepted && !p.has_gap);
	CHECK_EQ_INT(p.ts, 1000000);
	p = cuptrace_gm_stream_next(&s, base + 100000, base + 200000); /* contiguous */
	CHECK(p.accepted && !p.has_gap);
	CHECK_EQ_INT(p.ts, 1100000);
	/* A little jitter between samples is no gap; half an interval is. */
	p = cuptrace_gm_stream_next(&s, base + 200100, base + 300000);
	CHECK(p.accepted && !p.has_gap);
	p = cuptrace_gm_stream_next(&s, base + 600000, base + 700000);
	CHECK(p.accepted && p.has_gap);
	CHECK_EQ_INT(p.gap_ts, 1300000); /* where the previous sample ended */
	CHECK_EQ_INT(p.ts, 1600000);
	/* Rejected: empty, reversed, earlier than the previous start. */
	CHECK(!cuptrace_gm_stream_next(&s, base + 800000, base + 800000).accepted);
	CHECK(!cuptrace_gm_stream_next(&s, base + 900000, base + 800000).accepted);
	CHECK(!cuptrace_gm_stream_next(&s, base + 500000, base + 900000).accepted);
	CHECK_EQ_INT(s.samples, 4);
	CHECK_EQ_INT(s.gaps, 1);
	CHECK_EQ_INT(s.rejected, 3);
	CHECK_EQ_INT(cuptrace_gm_stream_end(&s), 1700000);
	/* Before the trace's start: clamped to 0, never negative. */
	cuptrace_gm_stream_init(&s, off, t0, 100000);
	p = cuptrace_gm_stream_next(&s, (uint64_t)(t0 + off) - 500, (uint64_t)(t0 + off) + 99500);
	CHECK(p.accepted && p.ts == 0);
	cuptrace_gm_stream_init(&s, 0, 0, 100000);
	CHECK_EQ_INT(cuptrace_gm_stream_end(&s), -1);
}

/* ---- a sink that keeps tracks, kernel slices and counter values ---- */

struct ctr {
	uint64_t track;
	int64_t ts;
	double v;
};
struct tsink {
	struct cuptrace_sink base;
	struct cuptrace_track tr[64];
	char names[64][96];
	size_t ntr;
	struct ctr c[512];
	size_t nc;
	size_t kernels;
	int64_t kernel_ts, kernel_dur;
	char meta[32][48];
	int64_t meta_i[32];
	size_t nmeta;
};

static int t_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *i)
{
	return 0;
}
static int t_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct tsink *s = (struct tsink *)sk;
	if (s->ntr < 64) {
		s->tr[s->ntr] = *t;
		snprintf(s->names[s->ntr], sizeof(s->names[0]), "%s", t->name);
		s->tr[s->ntr].name = s->names[s->ntr];
		s->tr[s->ntr].description = NULL;
		s->tr[s->ntr].cmdline = NULL;
		s->ntr++;
	}
	return 0;
}
static int t_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct tsink *s = (struct tsink *)sk;
	if (e->category && !strcmp(e->category, "kernel")) {
		s->kernels++;
		s->kernel_ts = e->ts;
		s->kernel_dur = e->dur;
	}
	return 0;
}
static int t_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	return 0;
}
static int t_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct tsink *s = (struct tsink *)sk;
	if (s->nc < 512)
		s->c[s->nc++] =
		    (struct ctr){e->track_uuid, e->ts, e->is_double ? e->d : (double)e->i};
	return 0;
}
static int t_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct tsink *s = (struct tsink *)sk;
	for (size_t i = 0; i < n && s->nmeta < 32; i++) {
		snprintf(s->meta[s->nmeta], sizeof(s->meta[0]), "%s", m[i].key);
		s->meta_i[s->nmeta++] = m[i].is_int ? m[i].i : (m[i].s ? atoll(m[i].s) : 0);
	}
	return 0;
}
static int t_finish(struct cuptrace_sink *s)
{
	return 0;
}
static void t_destroy(struct cuptrace_sink *s)
{
	free(s);
}
static const struct cuptrace_sink_ops t_ops = {.name = "test",
                                               .begin = t_begin,
                                               .track = t_track,
                                               .slice = t_slice,
                                               .instant = t_instant,
                                               .counter = t_counter,
                                               .meta = t_meta,
                                               .finish = t_finish,
                                               .destroy = t_destroy};

static const struct cuptrace_track *track_named(struct tsink *s, const char *name)
{
	for (size_t i = 0; i < s->ntr; i++)
		if (!strcmp(s->tr[i].name, name))
			return &s->tr[i];
	return NULL;
}

static int64_t meta_int(struct tsink *s, const char *key)
{
	for (size_t i = 0; i < s->nmeta; i++)
		if (!strcmp(s->meta[i], key))
			return s->meta_i[i];
	return -1;
}

/* The value of a counter track at ts: the last value at or before it. */
static double value_at(struct tsink *s, uint64_t track, int64_t ts)
{
	double v = NAN;
	int64_t best = -1;
	for (size_t i = 0; i < s->nc; i++)
		if (s->c[i].track == track && s->c[i].ts <= ts && s->c[i].ts >= best) {
			best = s->c[i].ts;
			v = s->c[i].v;
		}
	return v;
}

/* The synthetic capture: GPU 0, 100 us samples, sampler clock = trace clock + 5 s. Samples
 * 0-4 idle (SM 0 %), 5-14 busy (SM 90 %, 1e6 B read each: 10 GB/s) except sample 10, lost (a
 * gap), 15-19 light (SM 10 %, no DRAM). One kernel covers samples 5-9 exactly. */
#define T0   1000000000000ll
#define OFF  5000000000ll
#define IVAL 100000ull

static void write_capture(const char *path)
{
	struct cuptrace_consumer w;
	CHECK_EQ_INT(cuptrace_capture_open(path, &w), 0);
	if (!w.ops)
		return;
	char v[32];
	snprintf(v, sizeof(v), "%lld", T0);
	cuptrace_consumer_meta(&w, "pid", "4242");
	cuptrace_consumer_meta(&w, "process_name", "gm_synthetic");
	cuptrace_consumer_meta(&w, "start_boottime_ns", v);
	cuptrace_consumer_meta(&w, "start_realtime_ns", "1760000000000000000");
	static const char *const metrics[] = {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
	                                      "dram__bytes_read.sum"};
	struct cuptrace_gm_config cfg = {.device = 0,
	                                 .device_name = "NVIDIA Synthetic GPU",
	                                 .interval_ns = IVAL,
	                                 .clock_offset_ns = OFF,
	                                 .nmetrics = 2,
	                                 .metrics = metrics};
	CHECK_EQ_INT(cuptrace_consumer_gpu_metrics(&w, &cfg), 0);
	uint64_t times[40];
	double vals[40];
	size_t n = 0;
	for (int i = 0; i < 20; i++) {
		if (i == 10)
			continue;
		uint64_t st = (uint64_t)(T0 + OFF) + 1000000 + (uint64_t)i * IVAL;
		times[2 * n] = st;
		times[2 * n + 1] = st + IVAL;
		vals[2 * n] = i < 5 ? 0 : i < 15 ? 90 : 10;
		vals[2 * n + 1] = i >= 5 && i < 15 ? 1e6 : 0;
		n++;
	}
	/* In two batches, as the sampler hands them over. */
	CHECK_EQ_INT(cuptrace_consumer_gpu_samples(&w, 0, 2, times, vals, 8), 0);
	CHECK_EQ_INT(cuptrace_consumer_gpu_samples(&w, 0, 2, times + 16, vals + 16, n - 8), 0);
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof(k));
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.contextId = 1;
	k.streamId = 7;
	k.name = "mm_bf16";
	k.start = (uint64_t)T0 + 1000000 + 5 * IVAL;
	k.end = (uint64_t)T0 + 1000000 + 10 * IVAL;
	k.correlationId = 1;
	/* Its launch, so the kernel has the flow every GPU slice of a real trace has. */
	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof(a));
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
	a.start = (uint64_t)T0 + 1000000 + 4 * IVAL;
	a.end = a.start + 5000;
	a.processId = 4242;
	a.threadId = 4242;
	a.correlationId = 1;
	const CUpti_Activity *recs[] = {(const CUpti_Activity *)&a, (const CUpti_Activity *)&k};
	uint32_t sizes[] = {sizeof(a), sizeof(k)};
	CHECK_EQ_INT(cuptrace_consumer_records(&w, recs, sizes, 2), 0);
	CHECK_EQ_INT(cuptrace_consumer_close(&w), 0);
}

static void check_trace(struct tsink *s, int from_capture)
{
	const struct cuptrace_track *gpu = track_named(s, "GPU 0: NVIDIA Synthetic GPU");
	const struct cuptrace_track *sm = track_named(s, "SM active %");
	const struct cuptrace_track *dr = track_named(s, "DRAM read GB/s");
	CHECK(gpu && sm && dr);
	if (!gpu || !sm || !dr)
		return;
	CHECK(sm->kind == CUPTRACE_TRACK_COUNTER && dr->kind == CUPTRACE_TRACK_COUNTER);
	CHECK(sm->parent_uuid == gpu->uuid && dr->parent_uuid == gpu->uuid);
	CHECK(sm->unit == CUPTRACE_UNIT_NONE);
	/* Time alignment: sample 5 (busy) starts 1.5 ms into the trace, as does the kernel. */
	CHECK_EQ_INT(s->kernels, 1);
	CHECK_EQ_INT(s->kernel_ts, 1500000);
	CHECK_EQ_INT(s->kernel_dur, 500000);
	CHECK(near(value_at(s, sm->uuid, 1499999), 0));
	CHECK(near(value_at(s, sm->uuid, 1500000), 90));
	CHECK(near(value_at(s, dr->uuid, 1550000), 10));
	/* The lost sample 10 [2.0, 2.1 ms): both tracks drop to 0 at its start. */
	CHECK(near(value_at(s, sm->uuid, 2050000), 0));
	CHECK(near(value_at(s, dr->uuid, 2050000), 0));
	CHECK(near(value_at(s, sm->uuid, 2150000), 90));
	CHECK(near(value_at(s, sm->uuid, 2550000), 10));
	/* After the last sample (ends at 3.0 ms): 0. */
	CHECK(near(value_at(s, sm->uuid, 2999999), 10));
	CHECK(near(value_at(s, sm->uuid, 3000000), 0));
	/* 19 samples + 1 gap point + 1 end point per track. */
	size_t smn = 0;
	for (size_t i = 0; i < s->nc; i++)
		smn += s->c[i].track == sm->uuid;
	CHECK_EQ_INT(smn, 21);
	if (from_capture) {
		CHECK_EQ_INT(meta_int(s, "gpu0_metrics_samples"), 19);
		CHECK_EQ_INT(meta_int(s, "gpu0_metrics_gaps"), 1);
	}
}

static const char *tmpdir(void)
{
	const char *t = getenv("CUPTRACE_TMP");
	return t && *t ? t : "/tmp";
}

static void test_capture_to_counters_and_stats(void)
{
	/* tests/data/gpumetrics_synthetic.cupti is this capture, written with
	 * CUPTRACE_GM_WRITE=tests/data/gpumetrics_synthetic.cupti build/tests/test_gpumetrics. */
	const char *keep_path = getenv("CUPTRACE_GM_WRITE");
	if (keep_path && *keep_path) {
		write_capture(keep_path);
		return;
	}
	char cap[512], json[512];
	snprintf(cap, sizeof(cap), "%s/gm_synthetic.%d.cupti", tmpdir(), (int)getpid());
	snprintf(json, sizeof(json), "%s/gm_synthetic.%d.json", tmpdir(), (int)getpid());
	write_capture(cap);

	/* Capture -> converter -> counters, with stats' per-kernel averages on the way. */
	struct tsink *s = calloc(1, sizeof(*s));
	s->base.ops = &t_ops;
	struct cuptrace_gm_stats gs;
	struct cuptrace_sink *chain = cuptrace_gm_stats_sink_new(&gs, &s->base);
	struct tsink *keep = s;
	CHECK(chain != NULL);
	CHECK_EQ_INT(cuptrace_read_trace(cap, chain, 0), 0);
	CHECK_EQ_INT(chain->ops->finish(chain), 0);
	check_trace(keep, 1);
	CHECK_EQ_INT(gs.nmetrics, 2);
	CHECK_EQ_INT(gs.nrows, 1);
	if (gs.nrows == 1 && gs.nmetrics == 2) {
		CHECK_EQ_STR(gs.rows[0].name, "mm_bf16");
		CHECK_EQ_INT(gs.rows[0].count, 1);
		size_t sm = strcmp(gs.metrics[0], "SM active %") ? 1 : 0;
		CHECK_EQ_STR(gs.metrics[sm], "SM active %");
		CHECK(near(gs.rows[0].avg[sm], 90));
		CHECK(near(gs.rows[0].avg[1 - sm], 10));
		CHECK_EQ_INT(gs.rows[0].covered_ns[sm], 500000);
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		cuptrace_gm_stats_print(&gs, f, 0);
		fclose(f);
		CHECK(buf && strstr(buf, "GPU metrics per kernel") && strstr(buf, "mm_bf16") &&
		      strstr(buf, "90.00") && strstr(buf, "10.00"));
		free(buf);
	}
	cuptrace_gm_stats_free(&gs);
	cuptrace_sink_destroy(chain);

	/* Chrome JSON carries the same counters: write it, read it back. */
	struct cuptrace_sink *out = cuptrace_sink_open(json, "chrome", NULL);
	CHECK(out != NULL);
	if (out) {
		CHECK_EQ_INT(cuptrace_read_trace(cap, out, 0), 0);
		CHECK_EQ_INT(out->ops->finish(out), 0);
		cuptrace_sink_destroy(out);
		s = calloc(1, sizeof(*s));
		s->base.ops = &t_ops;
		CHECK_EQ_INT(cuptrace_read_trace(json, &s->base, 0), 0);
		check_trace(s, 0);
		cuptrace_sink_destroy(&s->base);
	}

	/* A corrupt GPU_SAMPLES item (count larger than the payload) is refused, not read. It
	 * replaces the END item (24 bytes), after which nothing is read. */
	FILE *f = fopen(cap, "r+b");
	fseek(f, -24, SEEK_END);
	uint32_t h[2] = {CUPTRACE_CAP_GPU_SAMPLES, 0};
	uint64_t plen = 16;
	uint32_t g[2] = {0, 2};
	uint64_t cnt = 1000;
	fwrite(h, 8, 1, f);
	fwrite(&plen, 8, 1, f);
	fwrite(g, 8, 1, f);
	fwrite(&cnt, 8, 1, f);
	fclose(f);
	s = calloc(1, sizeof(*s));
	s->base.ops = &t_ops;
	/* A corrupt item ends the read there, like a cut: what came before is kept (read.c
	 * warns with its offset), not an error. */
	CHECK_EQ_INT(cuptrace_read_trace(cap, &s->base, 0), 0);
	cuptrace_sink_destroy(&s->base);
	unlink(cap);
	unlink(json);
}

/* The sample clock, with the H100's numbers: under cuptrace's BOOTTIME callback the first
 * sample ended 588,563 ns after the Start call's BOOTTIME reading; in the probe (no callback)
 * 53,001 ns after its REALTIME one. */
static void test_pick_clock(void)
{
	const int64_t real = 1795444691179300739ll, boot = 30195689692ll;
	CHECK(cuptrace_gm_pick_clock((uint64_t)(boot + 588563), real, boot) ==
	      CUPTRACE_GM_CLOCK_BOOTTIME);
	CHECK(cuptrace_gm_pick_clock((uint64_t)(real + 53001), real, boot) ==
	      CUPTRACE_GM_CLOCK_REALTIME);
	/* A little before Start (clock readings taken around the call) still picks the clock. */
	CHECK(cuptrace_gm_pick_clock((uint64_t)(boot - 2000), real, boot) ==
	      CUPTRACE_GM_CLOCK_BOOTTIME);
	/* Neither within 10 s: a GPU-local time base. */
	CHECK(cuptrace_gm_pick_clock((uint64_t)(boot + 11000000000ll), real, boot) ==
	      CUPTRACE_GM_CLOCK_UNKNOWN);
	CHECK(cuptrace_gm_pick_clock(5000000000ull, real, boot + 20000000000ll) ==
	      CUPTRACE_GM_CLOCK_UNKNOWN);
	/* The top two bits are not time (as in the stream's relative times). */
	CHECK(cuptrace_gm_pick_clock((uint64_t)(boot + 1000) | (1ull << 63), real, boot) ==
	      CUPTRACE_GM_CLOCK_BOOTTIME);
}

TEST_MAIN(T(test_describe_and_units), T(test_stream_alignment_and_gaps), T(test_pick_clock),
          T(test_capture_to_counters_and_stats))
