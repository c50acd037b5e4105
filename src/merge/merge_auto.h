/* The default alignment of `merge --side-by-side`: each run's first step (a ProfilerStep#N range;
 * else the end of its first Optimizer.step#N, where analyze's first whole step begins), else its
 * first GPU work. merge_plan.c notes every slice of pass 1 here. Private to src/merge. */
#ifndef CUPTRACE_MERGE_MERGE_AUTO_H
#define CUPTRACE_MERGE_MERGE_AUTO_H

#include "merge/merge.h"
#include "format/event.h"

#include <stdint.h>

struct merge_marks {
	int64_t at[CUPTRACE_MERGE_AUTO_N]; /* per kind, the earliest; INT64_MAX: none */
};

void merge_marks_init(struct merge_marks *k);
void merge_marks_note(struct merge_marks *k, const struct cuptrace_slice *e);

#endif
