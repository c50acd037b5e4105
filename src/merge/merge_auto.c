/* The marks `merge --side-by-side` aligns runs on by default (see merge_auto.h), and the names
 * of its alignment modes and clocks (merge.h). */
#include "merge/merge_auto.h"
#include "stats/busy.h"
#include "merge/merge.h"
#include "common/saturate.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void merge_marks_init(struct merge_marks *k)
{
	for (int i = 0; i < CUPTRACE_MERGE_AUTO_N; i++)
		k->at[i] = INT64_MAX;
}

static void lower(int64_t *v, int64_t ts)
{
	if (ts < *v)
		*v = ts;
}

/* The readers replay in time order, but a sink may be fed otherwise: keep the minimum. */
void merge_marks_note(struct merge_marks *k, const struct cuptrace_slice *e)
{
	if (e->name && !strncmp(e->name, "ProfilerStep#", 13))
		lower(&k->at[CUPTRACE_MERGE_AUTO_STEP], e->ts);
	else if (e->name && !strncmp(e->name, "Optimizer.step#", 15))
		lower(&k->at[CUPTRACE_MERGE_AUTO_OPTIMIZER],
		      sat_add(e->ts, e->dur < 0 ? 0 : e->dur));
	if (cuptrace_busy_is_work(e->category))
		lower(&k->at[CUPTRACE_MERGE_AUTO_GPU], e->ts);
}

const char *cuptrace_merge_auto_name(enum cuptrace_merge_auto a)
{
	switch (a) {
	case CUPTRACE_MERGE_AUTO_STEP:
		return "first step (ProfilerStep#N)";
	case CUPTRACE_MERGE_AUTO_OPTIMIZER:
		return "first step (the end of the first Optimizer.step#N)";
	case CUPTRACE_MERGE_AUTO_GPU:
		return "first GPU work (no steps found)";
	default:
		return "start (no steps, no GPU work)";
	}
}

/* "NAME#K" -> NAME and K (1 without "#K"): --align-on's spec. */
char *cuptrace_merge_parse_align(const char *spec, uint64_t *k)
{
	const char *hash = spec ? strrchr(spec, '#') : NULL;
	size_t len = spec ? strlen(spec) : 0;

	*k = 1;
	if (hash && hash[1] && strspn(hash + 1, "0123456789") == strlen(hash + 1)) {
		errno = 0;
		*k = strtoull(hash + 1, NULL, 10);
		if (errno || !*k)
			return NULL;
		len = (size_t)(hash - spec);
	}
	return len ? strndup(spec, len) : NULL;
}

const char *cuptrace_merge_clock_name(enum cuptrace_align_clock c)
{
	switch (c) {
	case CUPTRACE_CLOCK_REFERENCE:
		return "reference";
	case CUPTRACE_CLOCK_BOOTTIME:
		return "boottime";
	case CUPTRACE_CLOCK_REALTIME:
		return "realtime";
	case CUPTRACE_CLOCK_NCCL:
		return "nccl";
	case CUPTRACE_CLOCK_NONE:
		return "none";
	}
	return "?";
}
