/* Unit test of the Perfetto reader's flow table (src/read/flow_table.h): random puts and
 * deletions, with ids chosen to collide, against a plain array that holds the same entries. */
#include "check.h"
#include "read/flow_table.h"

#include <stdint.h>
#include <stdlib.h>

#define IDS 5000

static uint64_t rnd_state = 26;

static uint64_t rnd(void)
{
	rnd_state = rnd_state * 6364136223846793005ull + 1442695040888963407ull;
	return rnd_state >> 33;
}

/* spaced: ids i * 1024 + 7 (each alone in its group of 8); else consecutive ids from 1, as
 * correlation ids are (groups of 8 fill runs of slots) */
static void against_array(int spaced)
{
	static uint64_t want[IDS]; /* value of id i (0: absent) */
	struct flow_table t = {0};
	size_t n = 0;

	for (int step = 0; step < 400000; step++) {
		uint64_t i = rnd() % IDS, id = spaced ? i * 1024 + 7 : i + 1;
		int created;
		uint64_t *v = flow_table_put(&t, id, &created);
		CHECK(v != NULL);
		if (!v)
			break;
		CHECK_EQ_INT(created, want[i] == 0);
		if (!created)
			CHECK(*v == want[i]);
		if (rnd() % 3 == 0) { /* delete, as a terminating flow does */
			flow_table_del(&t, v);
			n -= !created;
			want[i] = 0;
		} else {
			*v = want[i] = (uint64_t)step + 1;
			n += created;
		}
		CHECK_EQ_INT(t.n, n);
	}
	/* every entry findable, nothing else there */
	size_t live = 0;
	for (size_t k = 0; k < t.cap; k++)
		live += t.s[k].v != 0;
	CHECK_EQ_INT(live, n);
	for (uint64_t i = 0; i < IDS; i++) {
		size_t k = flow_table_find(&t, spaced ? i * 1024 + 7 : i + 1);
		CHECK(t.s[k].v == want[i]);
	}
	flow_table_free(&t);
	flow_table_free(&t);
	for (size_t k = 0; k < IDS; k++)
		want[k] = 0;
}

static void test_against_array(void)
{
	against_array(1);
	against_array(0);
}

TEST_MAIN(T(test_against_array))
