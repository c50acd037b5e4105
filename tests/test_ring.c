/* The flight recorder's buffer ring (src/window/ring.h): what it keeps, by age and by bytes,
 * worked out by hand for each push. */
#include <stdint.h>

#include "check.h"
#include "window/ring.h"

static uint8_t *buf(size_t n)
{
	uint8_t *b = malloc(n);
	memset(b, 0xab, n);
	return b;
}

static void test_age(void)
{
	struct cuptrace_ring r;
	cuptrace_ring_init(&r, 10, 1 << 20); /* keep the last 10 ns of records */
	/* Buffers of 100 bytes spanning [10i, 10i + 5]. */
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(cuptrace_ring_push(&r, buf(100), 100, 10 * i, 10 * i + 5), 0);
	/* newest 45: kept are those whose tmax >= 35, i.e. i = 3 (35) and 4 (45). */
	CHECK_EQ_INT(r.n, 2);
	CHECK_EQ_INT(r.bufs[0].tmin, 30);
	CHECK_EQ_INT(r.bytes, 200);
	CHECK_EQ_INT(r.evicted, 3);
	/* A late buffer from another thread that spans old and new times is kept; one wholly
	 * older than the window is dropped at once. */
	cuptrace_ring_push(&r, buf(50), 50, 0, 44);
	cuptrace_ring_push(&r, buf(50), 50, 0, 20);
	CHECK_EQ_INT(r.n, 3);
	CHECK_EQ_INT(r.bytes, 250);
	cuptrace_ring_free(&r);
}

static void test_bytes(void)
{
	struct cuptrace_ring r;
	cuptrace_ring_init(&r, INT64_MAX / 2, 1000);
	for (int i = 0; i < 25; i++)
		cuptrace_ring_push(&r, buf(100), 100, i, i);
	/* 1000 bytes hold ten 100-byte buffers: the last ten (15..24). */
	CHECK_EQ_INT(r.n, 10);
	CHECK_EQ_INT(r.bytes, 1000);
	CHECK_EQ_INT(r.bufs[0].tmin, 15);
	CHECK_EQ_INT(r.evicted_for_room, 15);
	CHECK_EQ_INT(r.peak_bytes, 1000);
	/* One buffer bigger than the whole budget is refused, the rest untouched. */
	CHECK_EQ_INT(cuptrace_ring_push(&r, buf(5000), 5000, 30, 30), 0);
	CHECK_EQ_INT(r.refused, 1);
	CHECK_EQ_INT(r.n, 10);
	cuptrace_ring_free(&r);
	CHECK_EQ_INT(r.n, 0);
}

TEST_MAIN({"age", test_age}, {"bytes", test_bytes})
