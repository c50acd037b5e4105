/* A tiny test harness: CHECK* record failures and go on; TEST_MAIN runs the tests and prints
 * "N passed, N failed". Exit status 1 if anything failed. */
#ifndef CUPTRACE_TESTS_CHECK_H
#define CUPTRACE_TESTS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(cond)) {                                                                     \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
		}                                                                                  \
	} while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		check_count++;                                                                     \
		if (_a != _b) {                                                                    \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n",          \
			        __FILE__, __LINE__, #a, #b, _a, _b);                               \
		}                                                                                  \
	} while (0)

#define CHECK_EQ_STR(a, b)                                                                         \
	do {                                                                                       \
		const char *_a = (a), *_b = (b);                                                   \
		check_count++;                                                                     \
		if (!_a || !_b || strcmp(_a, _b)) {                                                \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n",      \
			        __FILE__, __LINE__, #a, #b, _a ? _a : "(null)",                    \
			        _b ? _b : "(null)");                                               \
		}                                                                                  \
	} while (0)

struct check_test {
	const char *name;
	void (*fn)(void);
};

/* Runs the tests, says which failed; the exit status for main. */
static inline int check_run(const struct check_test *tests, size_t n)
{
	int passed = 0, failed = 0;
	for (size_t i = 0; i < n; i++) {
		int before = check_failures;
		tests[i].fn();
		if (check_failures == before) {
			passed++;
		} else {
			failed++;
			fprintf(stderr, "FAIL %s\n", tests[i].name);
		}
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

#define TEST_MAIN(...)                                                                             \
	int main(void)                                                                             \
	{                                                                                          \
		static const struct check_test tests[] = {__VA_ARGS__};                            \
		return check_run(tests, sizeof(tests) / sizeof(tests[0]));                         \
	}

#define T(fn)                                                                                      \
	{                                                                                          \
#fn, fn                                                                            \
	}

#endif
