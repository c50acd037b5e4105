/* Capture windows (src/window/window.h): option parsing, and the open/close decisions over
 * synthetic event streams whose right answers are worked out by hand in each test. */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "window/window.h"

#define MS 1000000LL
#define S  1000000000LL

static void test_parse_range(void)
{
	char err[200];
	struct cuptrace_wspec w = {0};
	CHECK_EQ_INT(cuptrace_wspec_parse_range(&w, "cuda-profiler-api", err, sizeof(err)), 0);
	CHECK_EQ_INT(w.mode, CUPTRACE_WMODE_PROFILER_API);

	memset(&w, 0, sizeof(w));
	CHECK_EQ_INT(cuptrace_wspec_parse_range(&w, "range:train_step", err, sizeof(err)), 0);
	CHECK_EQ_INT(w.mode, CUPTRACE_WMODE_RANGE);
	CHECK_EQ_STR(w.range, "train_step");
	CHECK_EQ_INT(w.first, 1);
	CHECK_EQ_INT(w.count, 1);
	CHECK_EQ_STR(w.range_full, "");

	CHECK_EQ_INT(cuptrace_wspec_parse_range(&w, "range:train_step#3,2", err, sizeof(err)), 0);
	CHECK_EQ_STR(w.range, "train_step");
	CHECK_EQ_INT(w.first, 3);
	CHECK_EQ_INT(w.count, 2);
	CHECK_EQ_STR(w.range_full, "train_step#3");

	/* '#' and ',' inside a name stay in the name unless digits follow them at the end. */
	CHECK_EQ_INT(cuptrace_wspec_parse_range(&w, "range:a#b,c", err, sizeof(err)), 0);
	CHECK_EQ_STR(w.range, "a#b,c");
	CHECK_EQ_INT(w.first, 1);
	CHECK_EQ_INT(cuptrace_wspec_parse_range(&w, "range:ProfilerStep#551", err, sizeof(err)), 0);
	CHECK_EQ_STR(w.range, "ProfilerStep");
	CHECK_EQ_INT(w.first, 551);

	const char *bad[] = {"range:", "nvtx:x", "", "range:x,0", "range:x#2,0", "cuda"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = 0;
		CHECK_EQ_INT(cuptrace_wspec_parse_range(&w, bad[i], err, sizeof(err)), -EINVAL);
		CHECK(err[0] != 0);
	}

	memset(&w, 0, sizeof(w));
	CHECK_EQ_INT(cuptrace_wspec_parse_steps(&w, "500,6", err, sizeof(err)), 0);
	CHECK_EQ_INT(w.first, 500);
	CHECK_EQ_INT(w.count, 6);
	CHECK_EQ_INT(cuptrace_wspec_parse_steps(&w, "7", err, sizeof(err)), 0);
	CHECK_EQ_INT(w.first, 7);
	CHECK_EQ_INT(w.count, 1);
	CHECK_EQ_INT(cuptrace_wspec_parse_steps(&w, "0", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(cuptrace_wspec_parse_steps(&w, "3,", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(cuptrace_wspec_parse_steps(&w, "x", err, sizeof(err)), -EINVAL);
	CHECK_EQ_INT(cuptrace_wspec_parse_repeat(&w, "all", err, sizeof(err)), 0);
	CHECK_EQ_INT(cuptrace_wspec_finish(&w, err, sizeof(err)), 0);
	CHECK_EQ_INT(w.repeat, 1); /* all, one step a window: every step */
	CHECK_EQ_INT(cuptrace_wspec_parse_repeat(&w, "-2", err, sizeof(err)), -EINVAL);

	/* Combinations that make no sense are refused. */
	struct cuptrace_wspec r = {0};
	r.repeat = 2;
	CHECK_EQ_INT(cuptrace_wspec_finish(&r, err, sizeof(err)), -EINVAL);
	struct cuptrace_wspec slow = {0};
	slow.ring_slow = 2;
	CHECK_EQ_INT(cuptrace_wspec_finish(&slow, err, sizeof(err)), -EINVAL);
	slow.ring_ns = 10 * S;
	CHECK_EQ_INT(cuptrace_wspec_finish(&slow, err, sizeof(err)), 0);
	slow.ring_slow = 0.5;
	CHECK_EQ_INT(cuptrace_wspec_finish(&slow, err, sizeof(err)), -EINVAL);
	struct cuptrace_wspec both = {0};
	both.ring_ns = S;
	cuptrace_wspec_parse_steps(&both, "3", err, sizeof(err));
	CHECK_EQ_INT(cuptrace_wspec_finish(&both, err, sizeof(err)), -EINVAL);
	struct cuptrace_wspec tm = {0};
	tm.delay_ns = S;
	CHECK_EQ_INT(cuptrace_wspec_finish(&tm, err, sizeof(err)), 0);
	CHECK_EQ_INT(tm.mode, CUPTRACE_WMODE_TIME);
}

static void test_names(void)
{
	CHECK(cuptrace_wname_matches("step", "step"));
	CHECK(cuptrace_wname_matches("ProfilerStep", "ProfilerStep#12"));
	CHECK(!cuptrace_wname_matches("ProfilerStep", "ProfilerStep#"));
	CHECK(!cuptrace_wname_matches("ProfilerStep", "ProfilerStep#1a"));
	CHECK(!cuptrace_wname_matches("step", "steps"));
	CHECK(!cuptrace_wname_matches("step", "ste"));
	CHECK(!cuptrace_wname_matches("step", NULL));
}

/* The windows a stream of events opened, as [open, close] pairs. */
struct seen {
	int64_t open[16], close[16];
	int nopen, nclose;
};

static void note(struct seen *s, int r, const struct cuptrace_waction *a)
{
	if (!r)
		return;
	if (a->act == CUPTRACE_WACT_OPEN && s->nopen < 16) {
		CHECK_EQ_INT(a->window, s->nopen + 1);
		s->open[s->nopen++] = a->t;
	} else if (a->act == CUPTRACE_WACT_CLOSE && s->nclose < 16) {
		CHECK_EQ_INT(a->window, s->nclose + 1);
		s->close[s->nclose++] = a->t;
	}
}

static void test_range_windows(void)
{
	char err[200];
	struct cuptrace_wspec w = {0};
	cuptrace_wspec_parse_range(&w, "range:step#2,2", err, sizeof(err));
	CHECK_EQ_INT(cuptrace_wspec_finish(&w, err, sizeof(err)), 0);
	struct cuptrace_wtracker t;
	cuptrace_wtracker_init(&t, &w, 0);
	struct cuptrace_waction a;
	struct seen s = {0};
	/* Ten "step" ranges on thread 1 at depth 1, each [100 i, 100 i + 80] ms, with a nested
	 * "inner" range and an unrelated range on thread 2. Steps 2 and 3 are traced: the window
	 * is [100, 280] ms. */
	for (int i = 0; i < 10; i++) {
		int64_t b = 100 * i * MS;
		note(&s, cuptrace_wtracker_range_begin(&t, "step", 1 << 16 | 1, b, &a), &a);
		note(&s, cuptrace_wtracker_range_begin(&t, "inner", 1 << 16 | 2, b + 10 * MS, &a),
		     &a);
		note(&s, cuptrace_wtracker_range_end(&t, 1 << 16 | 2, b + 20 * MS, &a), &a);
		note(&s, cuptrace_wtracker_range_begin(&t, "step_other", 2 << 16 | 1, b + 5, &a),
		     &a);
		note(&s, cuptrace_wtracker_range_end(&t, 2 << 16 | 1, b + 6, &a), &a);
		note(&s, cuptrace_wtracker_range_end(&t, 1 << 16 | 1, b + 80 * MS, &a), &a);
	}
	CHECK_EQ_INT(s.nopen, 1);
	CHECK_EQ_INT(s.nclose, 1);
	CHECK_EQ_INT(s.open[0], 100 * MS);
	CHECK_EQ_INT(s.close[0], 280 * MS);
	CHECK(t.done);
	cuptrace_wtracker_free(&t);

	/* Every 4th from the 2nd, 2 at a time: windows [2,3], [6,7], [10,11] of 12. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_range(&w, "range:step#2,2", err, sizeof(err));
	cuptrace_wspec_parse_repeat(&w, "4", err, sizeof(err));
	CHECK_EQ_INT(cuptrace_wspec_finish(&w, err, sizeof(err)), 0);
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	for (int i = 1; i <= 12; i++) {
		note(&s, cuptrace_wtracker_range_begin(&t, "step", 7, i * S, &a), &a);
		note(&s, cuptrace_wtracker_range_end(&t, 7, i * S + S / 2, &a), &a);
	}
	CHECK_EQ_INT(s.nopen, 3);
	CHECK_EQ_INT(s.nclose, 3);
	int64_t want_open[] = {2 * S, 6 * S, 10 * S},
	        want_close[] = {3 * S + S / 2, 7 * S + S / 2, 11 * S + S / 2};
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_INT(s.open[i], want_open[i]);
		CHECK_EQ_INT(s.close[i], want_close[i]);
	}
	cuptrace_wtracker_free(&t);

	/* torch.profiler's numbered steps: "range:ProfilerStep#5" is the range named so, not the
	 * fifth one (numbering starts at 0); with --capture-repeat all, every later one too. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_range(&w, "range:ProfilerStep#5", err, sizeof(err));
	cuptrace_wspec_parse_repeat(&w, "all", err, sizeof(err));
	CHECK_EQ_INT(cuptrace_wspec_finish(&w, err, sizeof(err)), 0);
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 8; i++) {
		char name[32];
		snprintf(name, sizeof(name), "ProfilerStep#%d", i);
		note(&s, cuptrace_wtracker_range_begin(&t, name, 9, i * S, &a), &a);
		note(&s, cuptrace_wtracker_range_end(&t, 9, i * S + S / 2, &a), &a);
	}
	CHECK_EQ_INT(s.nopen, 3); /* #5, #6, #7 */
	CHECK_EQ_INT(s.open[0], 5 * S);
	CHECK_EQ_INT(s.close[2], 7 * S + S / 2);
	cuptrace_wtracker_free(&t);

	/* A duration caps a window: the 1st range lasts 10 s, the window 2 s. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_range(&w, "range:long", err, sizeof(err));
	w.duration_ns = 2 * S;
	cuptrace_wspec_finish(&w, err, sizeof(err));
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	note(&s, cuptrace_wtracker_range_begin(&t, "long", 1, S, &a), &a);
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), 3 * S);
	note(&s, cuptrace_wtracker_time(&t, 3 * S + 5, &a), &a);
	note(&s, cuptrace_wtracker_range_end(&t, 1, 11 * S, &a), &a);
	CHECK_EQ_INT(s.nclose, 1);
	CHECK_EQ_INT(s.close[0], 3 * S);
	cuptrace_wtracker_free(&t);
}

static void test_step_windows(void)
{
	char err[200];
	struct cuptrace_wspec w = {0};
	/* Steps end at 1, 2, 3, ... s. --steps 3,2: steps 3 and 4, i.e. [2 s, 4 s]. */
	cuptrace_wspec_parse_steps(&w, "3,2", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	struct cuptrace_wtracker t;
	cuptrace_wtracker_init(&t, &w, 0);
	struct cuptrace_waction a;
	struct seen s = {0};
	note(&s, cuptrace_wtracker_time(&t, 0, &a), &a);
	for (int i = 1; i <= 10; i++)
		note(&s, cuptrace_wtracker_step(&t, i * S, &a), &a);
	CHECK_EQ_INT(s.nopen, 1);
	CHECK_EQ_INT(s.open[0], 2 * S);
	CHECK_EQ_INT(s.close[0], 4 * S);
	cuptrace_wtracker_free(&t);

	/* --steps 1: the first step begins with the run. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_steps(&w, "1", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	cuptrace_wtracker_init(&t, &w, 5 * S);
	memset(&s, 0, sizeof(s));
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), 5 * S);
	note(&s, cuptrace_wtracker_time(&t, 5 * S, &a), &a);
	note(&s, cuptrace_wtracker_step(&t, 6 * S, &a), &a);
	note(&s, cuptrace_wtracker_step(&t, 7 * S, &a), &a);
	CHECK_EQ_INT(s.nopen, 1);
	CHECK_EQ_INT(s.open[0], 5 * S);
	CHECK_EQ_INT(s.close[0], 6 * S);
	cuptrace_wtracker_free(&t);

	/* Back to back: --steps 2,2 --capture-repeat all over 9 steps: [1,3], [3,5], [5,7], [7,9]:
	 * the step end that closes one window opens the next. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_steps(&w, "2,2", err, sizeof(err));
	cuptrace_wspec_parse_repeat(&w, "all", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	for (int i = 1; i <= 9; i++) {
		int r = cuptrace_wtracker_step(&t, i * S, &a);
		note(&s, r, &a);
		if (r && a.act == CUPTRACE_WACT_CLOSE)
			note(&s, cuptrace_wtracker_after_close(&t, i * S, &a), &a);
	}
	CHECK_EQ_INT(s.nopen, 5); /* the 5th opens at 9 s, closed by the end of the run */
	CHECK_EQ_INT(s.nclose, 4);
	for (int i = 0; i < 4; i++) {
		CHECK_EQ_INT(s.open[i], (1 + 2 * i) * S);
		CHECK_EQ_INT(s.close[i], (3 + 2 * i) * S);
	}
	note(&s, cuptrace_wtracker_end(&t, 9 * S + 1, &a), &a);
	CHECK_EQ_INT(s.nclose, 5);
	cuptrace_wtracker_free(&t);

	/* Every 5th step from the 3rd, one at a time: steps 3, 8, 13 of 15. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_steps(&w, "3", err, sizeof(err));
	cuptrace_wspec_parse_repeat(&w, "5", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	for (int i = 1; i <= 15; i++) {
		int r = cuptrace_wtracker_step(&t, i * S, &a);
		note(&s, r, &a);
		if (r && a.act == CUPTRACE_WACT_CLOSE)
			note(&s, cuptrace_wtracker_after_close(&t, i * S, &a), &a);
	}
	CHECK_EQ_INT(s.nopen, 3);
	CHECK_EQ_INT(s.open[0], 2 * S);
	CHECK_EQ_INT(s.close[0], 3 * S);
	CHECK_EQ_INT(s.open[1], 7 * S);
	CHECK_EQ_INT(s.open[2], 12 * S);
	CHECK_EQ_INT(s.close[2], 13 * S);
	cuptrace_wtracker_free(&t);
}

static void test_profiler_and_time(void)
{
	char err[200];
	struct cuptrace_wspec w = {0};
	cuptrace_wspec_parse_range(&w, "cuda-profiler-api", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	struct cuptrace_wtracker t;
	cuptrace_wtracker_init(&t, &w, 0);
	struct cuptrace_waction a;
	struct seen s = {0};
	note(&s, cuptrace_wtracker_profiler(&t, 0, S, &a), &a); /* a stop with none open */
	note(&s, cuptrace_wtracker_profiler(&t, 1, 2 * S, &a), &a);
	note(&s, cuptrace_wtracker_profiler(&t, 1, 3 * S, &a), &a); /* already open */
	note(&s, cuptrace_wtracker_profiler(&t, 0, 4 * S, &a), &a);
	note(&s, cuptrace_wtracker_profiler(&t, 1, 5 * S, &a), &a); /* no repeat: ignored */
	CHECK_EQ_INT(s.nopen, 1);
	CHECK_EQ_INT(s.open[0], 2 * S);
	CHECK_EQ_INT(s.close[0], 4 * S);
	cuptrace_wtracker_free(&t);

	cuptrace_wspec_parse_repeat(&w, "all", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	for (int i = 0; i < 3; i++) {
		note(&s, cuptrace_wtracker_profiler(&t, 1, (10 * i + 1) * S, &a), &a);
		note(&s, cuptrace_wtracker_profiler(&t, 0, (10 * i + 2) * S, &a), &a);
	}
	CHECK_EQ_INT(s.nopen, 3);
	CHECK_EQ_INT(s.close[2], 22 * S);
	cuptrace_wtracker_free(&t);

	/* --delay 1s --duration 2s from a first CUDA call at 10 s: [11 s, 13 s]. */
	struct cuptrace_wspec tm = {0};
	tm.delay_ns = S;
	tm.duration_ns = 2 * S;
	cuptrace_wspec_finish(&tm, err, sizeof(err));
	cuptrace_wtracker_init(&t, &tm, 10 * S);
	memset(&s, 0, sizeof(s));
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), 11 * S);
	note(&s, cuptrace_wtracker_time(&t, 10 * S + S / 2, &a), &a);
	CHECK_EQ_INT(s.nopen, 0);
	note(&s, cuptrace_wtracker_time(&t, 11 * S, &a), &a);
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), 13 * S);
	note(&s, cuptrace_wtracker_time(&t, 13 * S + 7, &a), &a);
	CHECK_EQ_INT(s.nopen, 1);
	CHECK_EQ_INT(s.nclose, 1);
	CHECK_EQ_INT(s.open[0], 11 * S);
	CHECK_EQ_INT(s.close[0], 13 * S); /* at the deadline, not when the timer woke */
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), INT64_MAX);
	cuptrace_wtracker_free(&t);
}

static void test_trigger(void)
{
	char err[200];
	struct cuptrace_wspec w = {0};
	w.mode = CUPTRACE_WMODE_ON_DEMAND;
	cuptrace_wspec_finish(&w, err, sizeof(err));
	struct cuptrace_wtracker t;
	cuptrace_wtracker_init(&t, &w, 0);
	struct cuptrace_waction a;
	struct seen s = {0};
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), INT64_MAX);
	note(&s, cuptrace_wtracker_trigger(&t, 0, 2 * S, 0, 5 * S, &a), &a);
	CHECK_EQ_INT(cuptrace_wtracker_deadline(&t), 7 * S);
	note(&s, cuptrace_wtracker_time(&t, 7 * S, &a), &a);
	/* Steps: open now, close at the end of the 3rd step after. */
	note(&s, cuptrace_wtracker_trigger(&t, 0, 0, 3, 10 * S, &a), &a);
	for (int i = 11; i <= 15; i++)
		note(&s, cuptrace_wtracker_step(&t, i * S, &a), &a);
	/* Open until --stop. */
	note(&s, cuptrace_wtracker_trigger(&t, 0, 0, 0, 20 * S, &a), &a);
	note(&s, cuptrace_wtracker_trigger(&t, 0, 0, 0, 21 * S, &a), &a); /* already open */
	note(&s, cuptrace_wtracker_trigger(&t, 1, 0, 0, 22 * S, &a), &a);
	note(&s, cuptrace_wtracker_trigger(&t, 1, 0, 0, 23 * S, &a), &a); /* none open */
	CHECK_EQ_INT(s.nopen, 3);
	CHECK_EQ_INT(s.nclose, 3);
	int64_t want[][2] = {{5 * S, 7 * S}, {10 * S, 13 * S}, {20 * S, 22 * S}};
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_INT(s.open[i], want[i][0]);
		CHECK_EQ_INT(s.close[i], want[i][1]);
	}
	cuptrace_wtracker_free(&t);

	/* A trigger during a steps run does not use up the spec's window. */
	memset(&w, 0, sizeof(w));
	cuptrace_wspec_parse_steps(&w, "5", err, sizeof(err));
	cuptrace_wspec_finish(&w, err, sizeof(err));
	cuptrace_wtracker_init(&t, &w, 0);
	memset(&s, 0, sizeof(s));
	note(&s, cuptrace_wtracker_trigger(&t, 0, 0, 1, 0, &a), &a); /* step 1, by trigger */
	for (int i = 1; i <= 6; i++)
		note(&s, cuptrace_wtracker_step(&t, i * S, &a), &a);
	CHECK_EQ_INT(s.nopen, 2);
	CHECK_EQ_INT(s.open[0], 0);
	CHECK_EQ_INT(s.close[0], 1 * S);
	CHECK_EQ_INT(s.open[1], 4 * S); /* step 5 began when step 4 ended */
	CHECK_EQ_INT(s.close[1], 5 * S);
	cuptrace_wtracker_free(&t);
}

static void test_slow_steps(void)
{
	struct cuptrace_slowsteps s;
	cuptrace_slowsteps_init(&s, 3.0, 0);
	int64_t t = 0, from = -1, med = -1;
	int slow = 0;
	/* A 5 s first step (start-up), then 100 ms steps with one 250 ms (not 3x) and one
	 * 400 ms (slow: written from the start of the step before it). */
	t += 5 * S;
	slow += cuptrace_slowsteps_end(&s, t, &from, &med);
	int64_t d[] = {100, 100, 100, 100, 100, 100, 250, 100, 100, 400, 100, 100};
	int64_t slow_from = 0, slow_end = 0, before = 0;
	for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
		before = t;
		int64_t prev_start = t - (i ? d[i - 1] * MS : 5 * S);
		t += d[i] * MS;
		if (cuptrace_slowsteps_end(&s, t, &from, &med)) {
			slow++;
			slow_end = t;
			slow_from = from;
			CHECK_EQ_INT(from, prev_start);
		}
	}
	(void)before;
	CHECK_EQ_INT(slow, 1);
	CHECK_EQ_INT(med, 100 * MS);
	CHECK_EQ_INT(slow_end - slow_from, 500 * MS); /* the step before (100) and the slow one */
	CHECK_EQ_INT(s.slow, 1);
}

TEST_MAIN({"parse_range", test_parse_range}, {"names", test_names},
          {"range_windows", test_range_windows}, {"step_windows", test_step_windows},
          {"profiler_and_time", test_profiler_and_time}, {"trigger", test_trigger},
          {"slow_steps", test_slow_steps})
