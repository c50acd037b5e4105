/* Helpers shared by the files of src/analyze. Private to src/analyze. */
#ifndef CUPTRACE_ANALYZE_STATS_INTERNAL_H
#define CUPTRACE_ANALYZE_STATS_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

/* Foreign traces may hold any value: sums saturate rather than overflow. */
static inline int64_t sat_add(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_add_overflow(a, b, &r))
		return b > 0 ? INT64_MAX : INT64_MIN;
	return r;
}

static inline int64_t sat_sub(int64_t a, int64_t b)
{
	int64_t r;
	if (__builtin_sub_overflow(a, b, &r))
		return b < 0 ? INT64_MAX : INT64_MIN;
	return r;
}

#endif
