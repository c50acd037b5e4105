/* The period finder of analyze (src/why/steps_period.c) on token sequences whose iterations
 * the test lays out itself: start-up noise before the loop and a tail after it, extra and missing
 * work in some iterations, jittering weights, 3000 tiny kernels per iteration, a graph replay
 * loop with logging every 10 iterations, one heavy kernel among 150 light ones, copies alone,
 * two iterations only, no period at all, DDP steps whose halves alternate. Each answer (where
 * the iterations start, where the last ends) is the list the test recorded while building the
 * sequence. */
#include "why/steps_period.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { MAXN = 200000, MAXIT = 1024, MAXTOK = 1024 };

/* A sequence under construction, with the answer: the first item of every loop iteration and
 * one past the last item of the last one. */
struct seq {
	uint32_t tok[MAXN];
	int64_t w[MAXN], gap[MAXN];
	uint8_t compute[MAXTOK];
	size_t n;
	size_t starts[MAXIT], nstarts, end;
};

static struct seq sq;

static void reset(void)
{
	memset(&sq, 0, sizeof(sq));
	memset(sq.compute, 1, sizeof(sq.compute));
}

static void put(uint32_t tok, int64_t w_us, int64_t gap_us)
{
	if (sq.n >= MAXN)
		return;
	sq.tok[sq.n] = tok;
	sq.w[sq.n] = w_us * 1000;
	sq.gap[sq.n] = gap_us * 1000;
	sq.n++;
}

/* Marks the next item as an iteration's first. */
static void iteration(void)
{
	if (sq.nstarts < MAXIT)
		sq.starts[sq.nstarts++] = sq.n;
}

static uint32_t ntok(void)
{
	uint32_t m = 0;
	for (size_t i = 0; i < sq.n; i++)
		m = sq.tok[i] + 1 > m ? sq.tok[i] + 1 : m;
	return m;
}

static int find(struct cuptrace_period *r)
{
	struct cuptrace_period_in in = {sq.tok, sq.w, sq.gap, sq.compute, sq.n, ntok()};
	return cuptrace_period_find(&in, r);
}

/* The finder gives exactly the iterations the test laid out. */
static void check_answer(const struct cuptrace_period *r, size_t period)
{
	CHECK_EQ_INT(r->nstarts, sq.nstarts);
	for (size_t i = 0; i < r->nstarts && i < sq.nstarts; i++)
		if (r->starts[i] != sq.starts[i]) {
			fprintf(stderr, "iteration %zu starts at %zu, not %zu\n", i, r->starts[i],
			        sq.starts[i]);
			CHECK(0);
			break;
		}
	CHECK_EQ_INT(r->end, sq.end);
	CHECK_EQ_INT(r->period, period);
	CHECK(r->confidence >= CUPTRACE_PERIOD_MIN_CONFIDENCE && r->confidence <= 1.0);
}

/* A deterministic jitter in [-pct%, +pct%] of v. */
static int64_t jitter(int64_t v, int i, int pct)
{
	return v + v * (((i * 7919) % (2 * pct + 1)) - pct) / 100;
}

/* Start-up (25 distinct kernels, as much GPU time as the loop, then a 200 ms pause), 40
 * iterations of 7 launches whose first follows the longest host pause, then a tail of 5 other
 * kernels. Weights jitter by 10%. The iterations start at token 0 (the top of the loop), not at
 * the heaviest kernel. */
static void test_startup_and_tail(void)
{
	reset();
	for (uint32_t k = 0; k < 25; k++)
		put(100 + k, 500, 20);
	static const int64_t w[] = {50, 10, 10, 200, 10, 10, 30};
	for (int i = 0; i < 40; i++) {
		iteration();
		for (uint32_t k = 0; k < 7; k++)
			put(k, jitter(w[k], i * 7 + (int)k, 10), k ? 5 : (i ? 500 : 200000));
	}
	sq.end = sq.n;
	for (uint32_t k = 0; k < 5; k++)
		put(200 + k, 300, 50);
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 7);
	CHECK(r.confidence > 0.95 && r.coverage > 0.4 && r.coverage < 0.6);
	cuptrace_period_free(&r);
}

/* 30 iterations of 12 launches; iterations 5, 11 and 17 launch one kernel more (a token of
 * their own, or token 3 twice), 8 and 20 one less (token 7): every iteration is still found. */
static void test_extra_and_missing(void)
{
	reset();
	for (int i = 0; i < 30; i++) {
		iteration();
		for (uint32_t k = 0; k < 12; k++) {
			if (k == 7 && (i == 8 || i == 20))
				continue;
			put(k, 100 + 10 * k, k ? 3 : 400);
			if (k == 3 && i == 11)
				put(3, 130, 3);
			if (k == 9 && (i == 5 || i == 17))
				put(50, 20, 3);
		}
	}
	sq.end = sq.n;
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 12);
	CHECK(r.confidence > 0.9);
	cuptrace_period_free(&r);
}

/* An iteration of a 1 ms GEMM, 3000 tiny kernels of one name (a Python loop), and a loss
 * kernel: 12 iterations of 3002 launches, not 36,000 of one. */
static void test_tiny_kernels(void)
{
	reset();
	for (int i = 0; i < 12; i++) {
		iteration();
		put(0, 1000, 2000);
		for (int k = 0; k < 3000; k++)
			put(1, 2, 5);
		put(2, 100, 5);
	}
	sq.end = sq.n;
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 3002);
	cuptrace_period_free(&r);
}

/* A CUDA graph replay loop: an input copy, then the graph (one launch), 60 times; every 10th
 * iteration also copies a loss out (logging). An iteration is the copy and the graph: the
 * logging copy is an extra of every 10th, not a period of 10. */
static void test_graph_replay(void)
{
	reset();
	sq.compute[0] = sq.compute[2] = 0; /* the copies */
	for (int i = 0; i < 60; i++) {
		iteration();
		put(0, 10, 300);
		put(1, 5000, 5);
		sq.end = sq.n; /* the last iteration ends with its last regular launch */
		if (i % 10 == 9)
			put(2, 4, 5);
	}
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 2);
	cuptrace_period_free(&r);
	/* The graph alone, 100 times: an iteration per launch. */
	reset();
	for (int i = 0; i < 100; i++) {
		iteration();
		put(0, 5000, 50);
	}
	sq.end = sq.n;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 1);
	cuptrace_period_free(&r);
}

/* One heavy kernel then 150 light kernels of one name, 20 times: the heavy kernel's time makes
 * the iteration 151 launches, not 1. */
static void test_heavy_once(void)
{
	reset();
	for (int i = 0; i < 20; i++) {
		iteration();
		put(1, 2000, 900);
		for (int k = 0; k < 150; k++)
			put(0, 2, 5);
	}
	sq.end = sq.n;
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 151);
	cuptrace_period_free(&r);
}

/* Nothing to find: tokens from a pseudo-random generator; copies that repeat (parameters loaded
 * one by one: no compute); two iterations only. */
static void test_none(void)
{
	struct cuptrace_period r;
	reset();
	uint32_t x = 12345;
	for (int i = 0; i < 3000; i++) {
		x = x * 1103515245u + 12345u;
		put((x >> 16) % 50, 10 + (x >> 8) % 100, 5);
	}
	CHECK_EQ_INT(find(&r), 0);
	CHECK_EQ_INT(r.nstarts, 0);
	CHECK(r.confidence < CUPTRACE_PERIOD_MIN_CONFIDENCE);
	cuptrace_period_free(&r);

	reset();
	sq.compute[0] = sq.compute[1] = 0;
	for (int i = 0; i < 30; i++) {
		put(0, 300, 50);
		put(1, 40, 5);
	}
	CHECK_EQ_INT(find(&r), 0);
	CHECK_EQ_INT(r.nstarts, 0);
	cuptrace_period_free(&r);

	reset();
	for (int i = 0; i < 2; i++)
		for (uint32_t k = 0; k < 6; k++)
			put(k, 100, k ? 5 : 500);
	CHECK_EQ_INT(find(&r), 0);
	CHECK_EQ_INT(r.nstarts, 0);
	cuptrace_period_free(&r);
}

/* A DDP step as a real 2-rank job recorded it (tests/data/ddp2_rank0.cupti): forward, then two
 * gradient buckets, each its kernels then an all-reduce (token 9), then the optimizer. Cut at the
 * all-reduce, the steps' halves alternate, 15 and 6 launches of mostly other names; the first
 * step lacks the first all-reduce and its second is the warm-up, 3 ms, most of the GPU time, which
 * the halves explain (the all-reduce once in each) and the whole steps do not (once, not twice).
 * Still the steps are the iterations, the first left out as start-up, not 11 halves. */
static void test_alternating_halves(void)
{
	reset();
	for (int i = 0; i < 6; i++) {
		if (i)
			iteration();
		put(4, 17, 500); /* the top of the loop */
		put(5, 4, 5);
		put(6, 17, 5);
		put(7, 7, 5);
		put(2, 1, 5);
		put(2, 3, 5);
		if (i)
			put(9, 35, 5);
		put(8, 2, 5);
		put(6, 17, 5);
		put(7, 6, 5);
		put(2, 1, 5);
		put(2, 3, 5);
		put(9, i ? 31 : 3000, 5);
		static const uint32_t opt[] = {1, 1, 1, 1, 0, 1, 2, 3};
		for (size_t k = 0; k < sizeof(opt) / sizeof(*opt); k++)
			put(opt[k], 1 + (int64_t)(k % 3), 5);
	}
	sq.end = sq.n;
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 21);
	cuptrace_period_free(&r);
}

/* 160,000 launches, 1000 iterations of 160: found, and fast (the analyze speed check covers the
 * whole path). */
static void test_long(void)
{
	reset();
	for (int i = 0; i < 1000; i++) {
		iteration();
		for (uint32_t k = 0; k < 160; k++) /* 100 names once, 20 names 3 times each */
			put(k < 100 ? k : 100 + (k - 100) % 20, 5 + k, k ? 4 : 800);
	}
	sq.end = sq.n;
	struct cuptrace_period r;
	CHECK_EQ_INT(find(&r), 0);
	check_answer(&r, 160);
	cuptrace_period_free(&r);
}

TEST_MAIN(T(test_startup_and_tail), T(test_extra_and_missing), T(test_tiny_kernels),
          T(test_graph_replay), T(test_heavy_once), T(test_none), T(test_long),
          T(test_alternating_halves))
