/* `merge --ranks` on simulated jobs (tests/ranks.h) whose true clocks are known: ranks on one
 * machine, on two machines whose wall clocks disagree by seconds, with and without drift. Every
 * rank's kernels must land within 10 us of where they truly were relative to each other. */
#include "check.h"
#include "rec_sink.h"
#include "ranks.h"

#include "merge/merge.h"
#include "common/nccl.h"

#include <errno.h>

static int replay(void *ctx, const char *path, struct cuptrace_sink *sink)
{
	const struct ranks_job *j = ctx;
	return ranks_feed(sink, j, atoi(path + 5)); /* "rank:N" */
}

/* The rank of a merged slice: its process track's name "rank R @ host: python3". */
static int slice_rank(struct rec_sink *s, uint64_t track)
{
	struct rtrack *t = find_track(s, track);
	while (t && t->t.kind != CUPTRACE_TRACK_PROCESS)
		t = t->t.parent_uuid ? find_track(s, t->t.parent_uuid) : NULL;
	int r = -1;
	if (t && sscanf(t->name, "rank %d @", &r) != 1)
		r = -1;
	return r;
}

struct outcome {
	int ok;
	size_t gemms, ars;
	int64_t err_span;  /* max - min over every kernel of (merged ts - true ts) */
	int64_t ar_spread; /* largest spread of one step's all-reduce ends */
	struct cuptrace_merge m;
	struct rec_sink *out;
};

/* Merges the job's ranks (given in the order of names) and compares with the truth. */
static void run(const struct ranks_job *j, enum cuptrace_align_mode mode, const char **names,
                size_t n, struct outcome *o)
{
	struct cuptrace_merge_input in[16];
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < n; i++)
		in[i] = (struct cuptrace_merge_input){names[i], NULL};
	struct cuptrace_merge_opts opts = {.sz = sizeof(opts), .ranks = 1, .ranks_align = mode};
	o->out = rec_sink_new();
	CHECK_EQ_INT(cuptrace_merge_plan(&o->m, in, n, &opts, replay, (void *)j), 0);
	CHECK_EQ_INT(cuptrace_merge_write(&o->m, replay, (void *)j, &o->out->base), 0);
	CHECK_EQ_INT(o->out->base.ops->finish(&o->out->base), 0);
	CHECK_EQ_INT(o->out->track_before_use_violations, 0);
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	int64_t ar_lo[64], ar_hi[64];
	for (int i = 0; i < 64; i++) {
		ar_lo[i] = INT64_MAX;
		ar_hi[i] = INT64_MIN;
	}
	int seen[16][64] = {{0}};
	for (size_t k = 0; k < o->out->nslices; k++) {
		const struct rslice *sl = &o->out->slices[k];
		int is_ar = !strcmp(sl->name, RANKS_NCCL_NAME);
		if (strcmp(sl->name, "gemm") && !is_ar)
			continue;
		int r = slice_rank(o->out, sl->track);
		CHECK(r >= 0 && r < j->world);
		if (r < 0 || r >= j->world)
			return;
		int i = seen[r][is_ar]++;
		struct ranks_step t = ranks_truth(j, r, i);
		int64_t e = is_ar ? sl->ts + sl->dur - t.ar_end : sl->ts - t.gemm;
		lo = e < lo ? e : lo;
		hi = e > hi ? e : hi;
		if (is_ar && i < 64) {
			int64_t end = sl->ts + sl->dur;
			ar_lo[i] = end < ar_lo[i] ? end : ar_lo[i];
			ar_hi[i] = end > ar_hi[i] ? end : ar_hi[i];
			o->ars++;
		} else if (!is_ar) {
			o->gemms++;
		}
	}
	o->err_span = hi - lo;
	for (int i = 0; i < j->steps && i < 64; i++)
		if (ar_hi[i] - ar_lo[i] > o->ar_spread)
			o->ar_spread = ar_hi[i] - ar_lo[i];
	o->ok = 1;
}

static void done(struct outcome *o)
{
	cuptrace_merge_free(&o->m);
	cuptrace_sink_destroy(&o->out->base);
}

static void two_machines_seconds_apart(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.skew_ns[1] = 3200000000ll; /* node1's wall clock 3.2 s ahead */
	const char *names[] = {"rank:0", "rank:1"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 2, &o);
	CHECK(o.ok);
	CHECK_EQ_INT(o.gemms, 80);
	CHECK_EQ_INT(o.ars, 80);
	CHECK_EQ_INT(o.m.in[0].map.clock, CUPTRACE_CLOCK_REFERENCE);
	CHECK_EQ_INT(o.m.in[1].map.clock, CUPTRACE_CLOCK_NCCL);
	CHECK_EQ_INT(o.m.in[1].map.matched, 40);
	/* REALTIME put node1 3.2 s late; the collectives found it (within the jitter) */
	CHECK(llabs(o.m.in[1].map.realtime_error_ns + 3200000000ll) < 5000);
	CHECK(o.err_span <= 10000);
	CHECK(o.ar_spread <= j.jitter_ns + 2000);
	CHECK_EQ_INT(o.m.align.machines, 2);
	CHECK_EQ_INT(o.m.align.symmetric.collectives, 40);
	CHECK(o.m.align.symmetric.max <= j.jitter_ns + 2000);
	CHECK_EQ_STR(o.m.in[0].label, "rank 0 @ node0");
	CHECK_EQ_STR(o.m.in[1].label, "rank 1 @ node1");
	CHECK_EQ_STR(rec_meta(o.out, "rank 1 @ node1: merge_clock"), "nccl");
	CHECK_EQ_STR(rec_meta(o.out, "merge_collectives_matched"), "40");
	CHECK(rec_meta(o.out, "rank 1 @ node1: merge_offset_ns") != NULL);
	fprintf(stderr, "seconds apart: error span %lld ns, all-reduce end spread %lld ns\n",
	        (long long)o.err_span, (long long)o.ar_spread);
	done(&o);
}

/* Without the collectives the same job is 3.2 s off: the check above can fail. */
static void realtime_only_is_off_by_the_skew(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.skew_ns[1] = 3200000000ll;
	const char *names[] = {"rank:0", "rank:1"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_REALTIME, names, 2, &o);
	CHECK_EQ_INT(o.m.in[1].map.clock, CUPTRACE_CLOCK_REALTIME);
	CHECK(o.err_span > 3100000000ll && o.err_span < 3300000000ll);
	done(&o);
}

static void drift_is_fitted(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.skew_ns[1] = -1500000000ll;
	j.drift_ppm[1] = 25; /* node1's clock runs 25 ppm fast: 100 us over the 4 s run */
	const char *names[] = {"rank:0", "rank:1"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 2, &o);
	CHECK(o.ok);
	CHECK(o.err_span <= 10000);
	/* node1's times must be slowed by 25 ppm to land on node0's */
	CHECK(fabs(o.m.in[1].map.drift * 1e6 + 25) < 1.5);
	fprintf(stderr, "drift: fitted %.3f ppm, error span %lld ns\n", o.m.in[1].map.drift * 1e6,
	        (long long)o.err_span);
	done(&o);
	/* The same job cut to 8 steps: too short to see a drift, an offset only; over 0.8 s
	 * the 25 ppm leave 20 us at most, half of it either side of the middle. */
	j.steps = 8;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 2, &o);
	CHECK(o.m.in[1].map.drift == 0);
	CHECK(o.err_span <= 25000);
	done(&o);
}

/* 4 ranks, 2 per machine, given out of order: rank order, BOOTTIME within a machine. */
static void four_ranks_two_machines(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.world = 4;
	j.per_host = 2;
	j.skew_ns[1] = 800000000ll;
	j.drift_ppm[1] = -12;
	const char *names[] = {"rank:3", "rank:1", "rank:2", "rank:0"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 4, &o);
	CHECK(o.ok);
	CHECK_EQ_INT(o.gemms, 160);
	CHECK_EQ_INT(o.ars, 160);
	for (int r = 0; r < 4; r++)
		CHECK_EQ_INT(o.m.in[r].rank, r);
	CHECK_EQ_STR(o.m.in[2].label, "rank 2 @ node1");
	CHECK_EQ_INT(o.m.in[1].map.clock, CUPTRACE_CLOCK_BOOTTIME);
	CHECK_EQ_INT(o.m.in[2].map.clock, CUPTRACE_CLOCK_NCCL);
	CHECK_EQ_INT(o.m.in[3].map.clock, CUPTRACE_CLOCK_NCCL);
	/* one fit per machine: both ranks of node1 get the same drift */
	CHECK(o.m.in[2].map.drift == o.m.in[3].map.drift);
	CHECK(o.err_span <= 10000);
	CHECK_EQ_INT(o.m.align.machines, 2);
	/* processes in rank order */
	int32_t prev = INT32_MIN;
	for (size_t k = 0; k < o.out->ntracks; k++)
		if (o.out->tracks[k].t.kind == CUPTRACE_TRACK_PROCESS) {
			CHECK(o.out->tracks[k].t.sort_rank > prev);
			prev = o.out->tracks[k].t.sort_rank;
		}
	done(&o);
}

/* One machine: BOOTTIME alone is exact, whatever REALTIME says. */
static void one_machine_is_exact(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.per_host = 2;
	j.jitter_ns = 0;
	const char *names[] = {"rank:0", "rank:1"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 2, &o);
	CHECK_EQ_INT(o.m.in[1].map.clock, CUPTRACE_CLOCK_BOOTTIME);
	CHECK(o.err_span <= 1);
	CHECK(o.ar_spread <= 1);
	CHECK_EQ_INT(o.m.align.machines, 1);
	done(&o);
}

/* --align none: every rank from 0, whatever the clocks. */
static void none_starts_each_at_zero(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.per_host = 2;
	const char *names[] = {"rank:0", "rank:1"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NONE, names, 2, &o);
	CHECK_EQ_INT(o.m.in[0].map.clock, CUPTRACE_CLOCK_NONE);
	CHECK_EQ_INT(o.m.in[0].offset_ns, -o.m.in[0].first_ts);
	CHECK_EQ_INT(o.m.in[1].offset_ns, -o.m.in[1].first_ts);
	int64_t first = INT64_MAX;
	for (size_t k = 0; k < o.out->nslices; k++)
		if (o.out->slices[k].ts < first)
			first = o.out->slices[k].ts;
	CHECK_EQ_INT(first, 0);
	done(&o);
}

/* A pipeline's send/recv every step (rank 1 leaves it 2 ms after rank 0, as a receiver after its
 * sender): as many asymmetric ends as all-reduces, which would pull a fit over all of them 2 ms
 * off (their lower median is a send/recv's). The fit goes by the all-reduces; the send/recv
 * spread is reported apart, where it shows the 2 ms. */
static void asymmetric_apart(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.skew_ns[1] = 3200000000ll;
	j.p2p_ns = 2000000;
	const char *names[] = {"rank:0", "rank:1"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 2, &o);
	CHECK(o.ok);
	CHECK_EQ_INT(o.m.in[1].map.clock, CUPTRACE_CLOCK_NCCL);
	CHECK_EQ_INT(o.m.in[1].map.matched, 40); /* the all-reduces only */
	CHECK(o.err_span <= 10000);
	CHECK(fabs(o.m.in[1].map.drift) < 1e-6);
	CHECK_EQ_INT(o.m.align.symmetric.collectives, 40);
	CHECK(o.m.align.symmetric.max <= j.jitter_ns + 2000);
	CHECK_EQ_INT(o.m.align.other.collectives, 40);
	/* every send/recv: rank 1 ends 2 ms after rank 0, up to the alignment's error */
	CHECK(llabs(o.m.align.other.median - j.p2p_ns) <= 10000);
	CHECK(llabs(o.m.align.other.max - j.p2p_ns) <= 10000);
	CHECK_EQ_STR(rec_meta(o.out, "merge_collectives_matched"), "40");
	CHECK_EQ_STR(rec_meta(o.out, "merge_other_collectives_matched"), "40");
	const char *mx = rec_meta(o.out, "merge_other_collective_end_spread_max_ns");
	CHECK(mx && llabs(atoll(mx) - j.p2p_ns) <= 10000);
	fprintf(stderr,
	        "send/recv apart: error span %lld ns, all-reduce spread max %lld ns, "
	        "send/recv spread median %lld ns\n",
	        (long long)o.err_span, (long long)o.m.align.symmetric.max,
	        (long long)o.m.align.other.median);
	done(&o);
}

/* The merged track of a GPU group, by name; NULL if none. */
static const struct rtrack *group_named(const struct rec_sink *s, const char *name)
{
	for (size_t k = 0; k < s->ntracks; k++)
		if (s->tracks[k].t.kind == CUPTRACE_TRACK_GROUP && !strcmp(s->tracks[k].name, name))
			return &s->tracks[k];
	return NULL;
}

/* Two ranks of one machine, each on a GPU of its own, each seeing both (torchrun's way): each
 * rank says which it used, and the merge labels each rank's GPU group with it. */
static void gpus_labelled(void)
{
	struct ranks_job j = RANKS_JOB_DEFAULT;
	j.world = 4;
	j.per_host = 2;
	j.gpu_local = 1;
	const char *names[] = {"rank:1", "rank:0", "rank:3", "rank:2"};
	struct outcome o;
	run(&j, CUPTRACE_ALIGN_NCCL, names, 4, &o);
	CHECK(o.ok);
	char want[160], name[160];
	for (int r = 0; r < 4; r++) {
		int h = r / 2, k = r % 2;
		snprintf(want, sizeof(want),
		         "GPU %d: NVIDIA H200 (GPU-%04d%04d-aaaa-bbbb-cccc-ddddeeeeffff, PCI "
		         "0000:%02x:00.0)",
		         k, h, k, 0x10 + k);
		CHECK_EQ_STR(o.m.in[r].gpus, want);
		snprintf(name, sizeof(name), "rank %d @ node%d: merge_gpus_used", r, h);
		CHECK_EQ_STR(rec_meta(o.out, name), want);
		/* "rank 3 \u00b7 GPU 1: NVIDIA H200 (GPU-00010001)", the whole UUID in its
		 * description */
		snprintf(name, sizeof(name), "rank %d \u00b7 GPU %d: NVIDIA H200 (GPU-%04d%04d)", r,
		         k, h, k);
		const struct rtrack *g = group_named(o.out, name);
		CHECK(g != NULL);
		snprintf(want, sizeof(want),
		         "GPU-%04d%04d-aaaa-bbbb-cccc-ddddeeeeffff, PCI bus id 0000:%02x:00.0", h,
		         k, 0x10 + k);
		CHECK(g && strstr(g->desc, want));
	}
	done(&o);
	/* A trace that does not say which GPU it used (an older cuptrace's): its GPU groups do. */
	j.gpu_local = 0;
	j.world = 2;
	j.per_host = 1;
	const char *two[] = {"rank:0", "rank:1"};
	run(&j, CUPTRACE_ALIGN_NCCL, two, 2, &o);
	CHECK_EQ_STR(o.m.in[1].gpus,
	             "GPU 0: NVIDIA H200 (GPU-00000001-aaaa-bbbb-cccc-ddddeeeeffff)");
	CHECK(group_named(o.out, "rank 1 \u00b7 GPU 0: NVIDIA H200 (GPU-00000001)") != NULL);
	done(&o);
}

static void nccl_names(void)
{
	struct cuptrace_nccl_kernel k;
	CHECK(cuptrace_nccl_parse(RANKS_NCCL_NAME, &k));
	CHECK_EQ_STR(k.collective, "AllReduce");
	CHECK_EQ_STR(k.reduction, "Sum");
	CHECK_EQ_STR(k.dtype, "f32");
	CHECK_EQ_STR(k.algorithm, "RING");
	CHECK_EQ_STR(k.protocol, "LL");
	CHECK(cuptrace_nccl_parse("ncclDevKernel_AllGather_RING_LL128(ncclDevKernelArgsStorage<"
	                          "4096ul>)",
	                          &k));
	CHECK_EQ_STR(k.collective, "AllGather");
	CHECK_EQ_STR(k.reduction, "");
	CHECK_EQ_STR(k.protocol, "LL128");
	CHECK(cuptrace_nccl_parse("ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE", &k));
	CHECK_EQ_STR(k.collective, "ReduceScatter");
	CHECK_EQ_STR(k.dtype, "bf16");
	CHECK_EQ_STR(k.algorithm, "NVLS_TREE");
	CHECK_EQ_STR(k.protocol, "SIMPLE");
	CHECK(cuptrace_nccl_parse("ncclKernel_AllReduce_RING_LL_Sum_uint8_t", &k));
	CHECK_EQ_STR(k.collective, "AllReduce");
	CHECK_EQ_STR(k.algorithm, "RING");
	CHECK_EQ_STR(k.reduction, "Sum");
	CHECK_EQ_STR(k.dtype, "uint8_t");
	CHECK(cuptrace_nccl_parse("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", &k));
	CHECK_EQ_STR(k.collective, "SendRecv");
	CHECK(cuptrace_nccl_parse("ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", &k));
	CHECK_EQ_STR(k.collective, "Generic");
	CHECK(!cuptrace_nccl_parse("void gemm<float>(float*)", &k));
	CHECK(!cuptrace_nccl_parse("ncclDevKernel_", &k));
	CHECK(!cuptrace_nccl_parse(NULL, &k));
	/* which end together on every rank (align.h) */
	static const struct {
		const char *name;
		int symmetric;
	} sym[] = {
	    {RANKS_NCCL_NAME, 1},
	    {"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 1},
	    {"ncclDevKernel_ReduceScatter_Sum_bf16_NVLS_TREE_SIMPLE", 1},
	    {"ncclDevKernel_AlltoAll_RING_SIMPLE", 1},
	    {"ncclKernel_AllReduce_RING_LL_Sum_uint8_t", 1},
	    {"ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 0},
	    {"ncclDevKernel_Reduce_Sum_f32_RING_LL", 0},
	    {RANKS_P2P_NAME, 0},
	    {"ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)", 0},
	};
	for (size_t i = 0; i < sizeof(sym) / sizeof(sym[0]); i++) {
		CHECK(cuptrace_nccl_parse(sym[i].name, &k));
		if (cuptrace_nccl_symmetric(&k) != sym[i].symmetric)
			fprintf(stderr, "symmetric(%s) != %d\n", sym[i].name, sym[i].symmetric);
		CHECK_EQ_INT(cuptrace_nccl_symmetric(&k), sym[i].symmetric);
	}
}

TEST_MAIN(T(two_machines_seconds_apart), T(realtime_only_is_off_by_the_skew), T(drift_is_fitted),
          T(four_ranks_two_machines), T(one_machine_is_exact), T(none_starts_each_at_zero),
          T(asymmetric_apart), T(gpus_labelled), T(nccl_names))
