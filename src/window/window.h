/* Capture windows: which parts of a run are traced. The spec says how windows are chosen (a
 * time, cudaProfilerStart/Stop, a named range, training steps, a trigger from outside); the
 * tracker turns what the program does into "open now" and "close now" decisions.
 *
 * Pure logic, no CUPTI and no clock of its own: collect feeds it events with their times and
 * carries out its decisions (enabling CUPTI, writing files), so every rule here is tested on
 * synthetic event streams (tests/test_window.c).
 *
 * Threading: a tracker is not thread-safe; its owner serializes the calls (collect holds one
 * lock around it: events come from application threads, the timer and the control thread). */
#ifndef CUPTRACE_WINDOW_WINDOW_H
#define CUPTRACE_WINDOW_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "common/wspec.h"

enum cuptrace_wact { CUPTRACE_WACT_NONE, CUPTRACE_WACT_OPEN, CUPTRACE_WACT_CLOSE };

struct cuptrace_waction {
	enum cuptrace_wact act;
	int64_t t;       /* when the window opens or closes (the event's time) */
	uint64_t window; /* 1-based number of the window */
	char why[160];   /* OPEN: what opened it ("range train_step #3"); CLOSE: what closed it */
};

/* A matching range in flight: its key (thread and depth, or a start/end range id) and its
 * number among the matching ranges. */
struct cuptrace_wrange {
	uint64_t key, occ;
};

struct cuptrace_wtracker {
	struct cuptrace_wspec spec;
	int64_t t0;           /* the first CUDA call: times are counted from here */
	int open;             /* a window is open now */
	int done;             /* no window will open again */
	uint64_t windows;     /* windows opened so far */
	int64_t opened_at;    /* the open window's start */
	uint64_t next_first;  /* RANGE/STEPS: the occurrence that opens the next window */
	uint64_t close_after; /* RANGE/STEPS: the occurrence whose end closes the open window */
	uint64_t occurrences; /* RANGE: matching ranges started; STEPS: steps ended */
	int64_t close_at;     /* a time that closes the open window (INT64_MAX: none) */
	uint64_t close_steps; /* trigger: steps left before the open window closes (0: none) */
	int by_trigger;       /* the open window was opened by a trigger, not by the spec */
	int numbered_seen;    /* RANGE: a range numbered in its name ("NAME#12") was seen */
	struct cuptrace_wrange *inflight;
	size_t ninflight, capinflight;
};

void cuptrace_wtracker_init(struct cuptrace_wtracker *t, const struct cuptrace_wspec *spec,
                            int64_t t0);
void cuptrace_wtracker_free(struct cuptrace_wtracker *t);

/* Each event returns 1 and fills *a when it opens or closes a window, else 0. At most one
 * action per event: a range that ends one window and starts the next is two events. */

/* The clock moved on (the timer calls this at cuptrace_wtracker_deadline()). */
int cuptrace_wtracker_time(struct cuptrace_wtracker *t, int64_t now, struct cuptrace_waction *a);
/* When the tracker next needs cuptrace_wtracker_time (INT64_MAX: never). */
int64_t cuptrace_wtracker_deadline(const struct cuptrace_wtracker *t);
/* A range began or ended. key identifies it until its end: (tid << 16 | depth) for push/pop
 * ranges, the range id for start/end ranges. name may be NULL at the end. */
int cuptrace_wtracker_range_begin(struct cuptrace_wtracker *t, const char *name, uint64_t key,
                                  int64_t now, struct cuptrace_waction *a);
int cuptrace_wtracker_range_end(struct cuptrace_wtracker *t, uint64_t key, int64_t now,
                                struct cuptrace_waction *a);
/* cudaProfilerStart (start = 1) or cudaProfilerStop (0), or their driver forms. */
int cuptrace_wtracker_profiler(struct cuptrace_wtracker *t, int start, int64_t now,
                               struct cuptrace_waction *a);
/* A training step ended (optimizer.step() returned). */
int cuptrace_wtracker_step(struct cuptrace_wtracker *t, int64_t now, struct cuptrace_waction *a);
/* From outside (`cuptrace trigger`, or the C API): open now for duration_ns (0: until closed)
 * or steps steps (0: not counted), or close the open window (close = 1). */
int cuptrace_wtracker_trigger(struct cuptrace_wtracker *t, int close, int64_t duration_ns,
                              uint64_t steps, int64_t now, struct cuptrace_waction *a);
/* Call after every CLOSE: opens the next window where it begins at that very event (steps
 * back to back: the step end that closed one window begins the next one's first step). */
int cuptrace_wtracker_after_close(struct cuptrace_wtracker *t, int64_t now,
                                  struct cuptrace_waction *a);
/* The run ends: closes an open window. */
int cuptrace_wtracker_end(struct cuptrace_wtracker *t, int64_t now, struct cuptrace_waction *a);

/* Slow steps for the flight recorder (--ring-slow X): a step slower than X times the median of
 * the recent steps. Keeps the last CUPTRACE_SLOW_KEEP step times. */
#define CUPTRACE_SLOW_KEEP 64
#define CUPTRACE_SLOW_MIN  5 /* steps seen before any is called slow */
struct cuptrace_slowsteps {
	double factor;
	int64_t last_end; /* the previous step's end (its start is the one before) */
	int64_t prev_end;
	int64_t recent[CUPTRACE_SLOW_KEEP];
	size_t n, next;
	uint64_t steps, slow;
};
void cuptrace_slowsteps_init(struct cuptrace_slowsteps *s, double factor, int64_t t0);
/* A step ended at now. Returns 1 when it was slow, with [*from, now] the span to write: the
 * step before it and the slow one. *median is the median the step was held against. */
int cuptrace_slowsteps_end(struct cuptrace_slowsteps *s, int64_t now, int64_t *from,
                           int64_t *median);

#endif
