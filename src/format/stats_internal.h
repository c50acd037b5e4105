/* Helpers shared by stats_sink.c and stats_print.c. Private to src/format. */
#ifndef CUPTRACE_FORMAT_STATS_INTERNAL_H
#define CUPTRACE_FORMAT_STATS_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>

/* Grows arr to hold n elements; returns the (possibly moved) array, or NULL with arr intact. */

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
