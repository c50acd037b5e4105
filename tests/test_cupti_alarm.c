/* record's "CUPTI delivered no records" warning (src/inject/cupti_alarm.h): only when CUDA work
 * was seen. The false alarm of issue 25 point 6: a child process that initialized CUDA and did
 * nothing (no context) got the warning. */
#include <stdint.h>

#include "check.h"
#include "inject/cupti_alarm.h"

static int alarm_of(uint64_t records, uint64_t buffers, uint64_t contexts)
{
	struct cuptrace_cupti_evidence e = {records, buffers, contexts};
	return cuptrace_cupti_alarm(&e);
}

static void test_decision(void)
{
	/* the false alarm: CUDA initialized (driver queries), no context, nothing delivered */
	CHECK_EQ_INT(alarm_of(0, 0, 0), 0);
	/* a context was created and nothing came: records were taken (or lost) */
	CHECK_EQ_INT(alarm_of(0, 0, 1), 1);
	CHECK_EQ_INT(alarm_of(0, 0, 8), 1);
	/* records came: no alarm, whatever else */
	CHECK_EQ_INT(alarm_of(5, 1, 1), 0);
	CHECK_EQ_INT(alarm_of(0, 1, 1), 0); /* a buffer of only dropped records */
	CHECK_EQ_INT(alarm_of(3, 0, 0), 0);
	CHECK_EQ_INT(cuptrace_cupti_alarm(NULL), 0);
}

static void test_counter(void)
{
	uint64_t before = cuptrace_cupti_alarm_contexts();
	cuptrace_cupti_alarm_note_context();
	cuptrace_cupti_alarm_note_context();
	CHECK_EQ_INT(cuptrace_cupti_alarm_contexts() - before, 2);
}

TEST_MAIN({"decision", test_decision}, {"counter", test_counter})
