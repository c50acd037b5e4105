/* How capture windows are chosen (`record --delay/--duration/--capture-range/--steps/
 * --capture-repeat/--on-demand/--ring/--ring-slow`): the parsed options, their parsers and their
 * one-line description. The rules that open and close windows are window/window.h's.
 * Pure; used by the command line (through common/options.h) and the library alike. */
#ifndef CUPTRACE_COMMON_WSPEC_H
#define CUPTRACE_COMMON_WSPEC_H

#include <stddef.h>
#include <stdint.h>

enum cuptrace_wmode {
	CUPTRACE_WMODE_RUN,          /* no window: the whole run, as without any option */
	CUPTRACE_WMODE_TIME,         /* --delay and/or --duration only */
	CUPTRACE_WMODE_PROFILER_API, /* --capture-range cuda-profiler-api */
	CUPTRACE_WMODE_RANGE,        /* --capture-range range:NAME[#K][,N] */
	CUPTRACE_WMODE_STEPS,        /* --steps K[,N] */
	CUPTRACE_WMODE_ON_DEMAND,    /* --on-demand: only `cuptrace trigger` (or the C API) opens */
};

#define CUPTRACE_WNAME_MAX 256

struct cuptrace_wspec {
	enum cuptrace_wmode mode;
	int64_t delay_ns; /* nothing opens before t0 + delay (0: no delay) */
	int64_t
	    duration_ns; /* a window closes at the latest this long after it opened (0: no cap) */
	char range[CUPTRACE_WNAME_MAX];      /* RANGE: the range name */
	char range_full[CUPTRACE_WNAME_MAX]; /* RANGE: NAME#K as given, a name of its own */
	uint64_t first;   /* RANGE, STEPS: the first occurrence traced (1-based) */
	uint64_t count;   /* RANGE, STEPS: how many occurrences a window spans */
	uint64_t repeat;  /* 0: one window; M: a window every M-th occurrence */
	int64_t ring_ns;  /* > 0: flight recorder keeping this much of the run */
	double ring_slow; /* > 1: write out steps slower than this x the median */
};

/* Parsers for the option values (durations: cuptrace_parse_duration, common/options.h); each
 * returns 0, or -EINVAL with a message in err (which names no option: the caller prefixes it). */
/* "cuda-profiler-api" or "range:NAME[#K][,N]". */
int cuptrace_wspec_parse_range(struct cuptrace_wspec *w, const char *text, char *err, size_t n);
/* "K[,N]". */
int cuptrace_wspec_parse_steps(struct cuptrace_wspec *w, const char *text, char *err, size_t n);
/* "N" or "all". */
int cuptrace_wspec_parse_repeat(struct cuptrace_wspec *w, const char *text, char *err, size_t n);
/* Sets mode from what was given (ranges and steps win over time; on-demand is set by its own
 * flag). Returns 0 or -EINVAL when the combination makes no sense (repeat with no range or
 * steps, --ring-slow without --ring). */
int cuptrace_wspec_finish(struct cuptrace_wspec *w, char *err, size_t n);
/* One line saying how windows are chosen ("range:train_step#3,2 every 10"), for metadata. */
void cuptrace_wspec_describe(const struct cuptrace_wspec *w, char *out, size_t n);
/* True where the name of a range matches the spec's: the same text, or the text followed by
 * '#' and digits (torch.profiler's "ProfilerStep#12" matches "ProfilerStep"). */
int cuptrace_wname_matches(const char *want, const char *name);

#endif
