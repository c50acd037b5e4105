/* Saturating sums of int64 times: foreign traces may hold any value, so the analyses (stats,
 * lines, merge, diff) add and subtract times that saturate rather than overflow. Header only. */
#ifndef CUPTRACE_COMMON_SATURATE_H
#define CUPTRACE_COMMON_SATURATE_H

#include <stdint.h>

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
