/* Capture windows: option parsing, the open/close rules, slow-step detection (see window.h). */
#include "window/window.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* ---- the tracker ---- */

void cuptrace_wtracker_init(struct cuptrace_wtracker *t, const struct cuptrace_wspec *spec,
                            int64_t t0)
{
	memset(t, 0, sizeof(*t));
	t->spec = *spec;
	t->t0 = t0;
	t->close_at = INT64_MAX;
	t->next_first = spec->first ? spec->first : 1;
	if (spec->mode == CUPTRACE_WMODE_RUN)
		t->done = 1; /* nothing to decide: collect traces everything */
}

void cuptrace_wtracker_free(struct cuptrace_wtracker *t)
{
	free(t->inflight);
	t->inflight = NULL;
	t->ninflight = t->capinflight = 0;
}

static int act(struct cuptrace_waction *a, enum cuptrace_wact what, int64_t now, uint64_t window,
               const char *why)
{
	a->act = what;
	a->t = now;
	a->window = window;
	snprintf(a->why, sizeof(a->why), "%.159s", why);
	return 1;
}

static int do_open(struct cuptrace_wtracker *t, int64_t now, const char *why,
                   struct cuptrace_waction *a)
{
	t->open = 1;
	t->windows++;
	t->opened_at = now;
	t->close_at = t->spec.duration_ns > 0 ? now + t->spec.duration_ns : INT64_MAX;
	return act(a, CUPTRACE_WACT_OPEN, now, t->windows, why);
}

/* Closes the open window; decides whether another can come. */
static int do_close(struct cuptrace_wtracker *t, int64_t now, const char *why,
                    struct cuptrace_waction *a)
{
	t->open = 0;
	t->close_at = INT64_MAX;
	t->close_steps = 0;
	if (t->by_trigger) {
		t->by_trigger = 0; /* the launch-time rules go on as they were */
	} else if (t->spec.mode == CUPTRACE_WMODE_RANGE || t->spec.mode == CUPTRACE_WMODE_STEPS) {
		if (t->spec.repeat) {
			/* The next window starts at the next multiple of repeat after the one
			 * that opened this one, and never at an occurrence already begun (for
			 * steps, the one beginning now may still open: after_close). */
			uint64_t nf = t->next_first + t->spec.repeat;
			while (nf < t->occurrences + 1)
				nf += t->spec.repeat;
			t->next_first = nf;
		} else {
			t->done = 1;
		}
	} else if (t->spec.mode == CUPTRACE_WMODE_PROFILER_API) {
		if (!t->spec.repeat)
			t->done = 1;
	} else if (t->spec.mode == CUPTRACE_WMODE_TIME) {
		t->done = 1;
	}
	return act(a, CUPTRACE_WACT_CLOSE, now, t->windows, why);
}

int cuptrace_wtracker_after_close(struct cuptrace_wtracker *t, int64_t now,
                                  struct cuptrace_waction *a)
{
	/* Back-to-back steps: the step end that closed a window begins the next one's step. */
	if (t->spec.mode != CUPTRACE_WMODE_STEPS || t->open || t->done ||
	    t->next_first != t->occurrences + 1 || now < t->t0 + t->spec.delay_ns)
		return 0;
	t->close_after = t->occurrences + t->spec.count;
	char why[64];
	snprintf(why, sizeof(why), "step %llu began", (unsigned long long)t->next_first);
	return do_open(t, now, why, a);
}

static int may_open(const struct cuptrace_wtracker *t, int64_t now)
{
	return !t->open && !t->done && now >= t->t0 + t->spec.delay_ns;
}

int64_t cuptrace_wtracker_deadline(const struct cuptrace_wtracker *t)
{
	if (t->open)
		return t->close_at;
	if (t->done)
		return INT64_MAX;
	if (t->spec.mode == CUPTRACE_WMODE_TIME)
		return t->t0 + t->spec.delay_ns;
	/* STEPS from step 1: the window opens with the run (after any delay). */
	if (t->spec.mode == CUPTRACE_WMODE_STEPS && t->next_first == 1 && t->occurrences == 0)
		return t->t0 + t->spec.delay_ns;
	return INT64_MAX;
}

int cuptrace_wtracker_time(struct cuptrace_wtracker *t, int64_t now, struct cuptrace_waction *a)
{
	if (t->open) {
		if (now >= t->close_at)
			return do_close(t, t->close_at, "duration reached", a);
		return 0;
	}
	if (!may_open(t, now))
		return 0;
	if (t->spec.mode == CUPTRACE_WMODE_TIME)
		return do_open(t, now, t->spec.delay_ns > 0 ? "delay over" : "start of run", a);
	if (t->spec.mode == CUPTRACE_WMODE_STEPS && t->next_first == 1 && t->occurrences == 0) {
		t->close_after = t->spec.count;
		return do_open(t, now, "step 1 began", a);
	}
	return 0;
}

static int inflight_add(struct cuptrace_wtracker *t, uint64_t key, uint64_t occ)
{
	if (t->ninflight == t->capinflight) {
		void *p = cuptrace_grow(t->inflight, &t->capinflight, t->ninflight + 1,
		                        sizeof(*t->inflight));
		if (!p)
			return -ENOMEM;
		t->inflight = p;
	}
	t->inflight[t->ninflight++] = (struct cuptrace_wrange){key, occ};
	return 0;
}

int cuptrace_wtracker_range_begin(struct cuptrace_wtracker *t, const char *name, uint64_t key,
                                  int64_t now, struct cuptrace_waction *a)
{
	if (t->spec.mode != CUPTRACE_WMODE_RANGE || !cuptrace_wname_matches(t->spec.range, name))
		return 0;
	/* Occurrences before the delay ends are not counted: "the K-th after --delay". */
	if (now < t->t0 + t->spec.delay_ns)
		return 0;
	/* Ranges numbered in their names (torch.profiler's "ProfilerStep#12") are known by that
	 * number, so "range:ProfilerStep#12" is the range of that name; others are counted. */
	size_t wl = strlen(t->spec.range);
	uint64_t occ;
	if (name[wl] == '#') {
		occ = strtoull(name + wl + 1, NULL, 10);
		if (!t->windows && !t->open && !t->spec.range_full[0] && !t->numbered_seen)
			t->next_first = occ; /* no K given: the first one seen */
		t->numbered_seen = 1;
		if (occ > t->occurrences)
			t->occurrences = occ;
	} else {
		occ = ++t->occurrences;
	}
	/* Only ranges that can open or close a window are followed to their end. */
	if (!t->open && !t->done && occ == t->next_first) {
		inflight_add(t, key, occ);
		t->close_after = occ + t->spec.count - 1;
		char why[CUPTRACE_WNAME_MAX + 48];
		snprintf(why, sizeof(why), "range %.100s began (#%llu)", name,
		         (unsigned long long)occ);
		return do_open(t, now, why, a);
	}
	if (t->open && occ <= t->close_after && occ >= t->next_first)
		inflight_add(t, key, occ);
	return 0;
}

int cuptrace_wtracker_range_end(struct cuptrace_wtracker *t, uint64_t key, int64_t now,
                                struct cuptrace_waction *a)
{
	if (t->spec.mode != CUPTRACE_WMODE_RANGE)
		return 0;
	for (size_t i = t->ninflight; i-- > 0;) {
		if (t->inflight[i].key != key)
			continue;
		uint64_t occ = t->inflight[i].occ;
		t->inflight[i] = t->inflight[--t->ninflight];
		if (t->open && occ == t->close_after) {
			char why[64];
			snprintf(why, sizeof(why), "range #%llu ended", (unsigned long long)occ);
			/* Ranges of this window still in flight are not followed further. */
			t->ninflight = 0;
			return do_close(t, now, why, a);
		}
		return 0;
	}
	return 0;
}

int cuptrace_wtracker_profiler(struct cuptrace_wtracker *t, int start, int64_t now,
                               struct cuptrace_waction *a)
{
	if (t->spec.mode != CUPTRACE_WMODE_PROFILER_API)
		return 0;
	if (start && may_open(t, now)) {
		t->occurrences++;
		/* repeat M: the 1st, (1+M)-th, ... start/stop pairs. */
		if (t->spec.repeat > 1 && (t->occurrences - 1) % t->spec.repeat)
			return 0;
		return do_open(t, now, "cudaProfilerStart", a);
	}
	if (!start && t->open)
		return do_close(t, now, "cudaProfilerStop", a);
	return 0;
}

int cuptrace_wtracker_step(struct cuptrace_wtracker *t, int64_t now, struct cuptrace_waction *a)
{
	if (t->open && t->by_trigger) {
		if (t->spec.mode == CUPTRACE_WMODE_STEPS)
			t->occurrences++;
		if (t->close_steps && !--t->close_steps)
			return do_close(t, now, "steps done", a);
		return 0;
	}
	if (t->spec.mode != CUPTRACE_WMODE_STEPS)
		return 0;
	/* Step i ends here; step i + 1 begins. */
	uint64_t ended = ++t->occurrences;
	if (t->open && ended >= t->close_after) {
		char why[64];
		snprintf(why, sizeof(why), "step %llu ended", (unsigned long long)ended);
		return do_close(t, now, why, a);
	}
	if (!t->open && !t->done && ended + 1 == t->next_first && now >= t->t0 + t->spec.delay_ns) {
		t->close_after = ended + t->spec.count;
		char why[64];
		snprintf(why, sizeof(why), "step %llu began", (unsigned long long)(ended + 1));
		return do_open(t, now, why, a);
	}
	/* The delay was still running when our step began: the first step that can still be
	 * traced whole is the next one (with a repeat, the next of its multiples). */
	if (!t->open && !t->done && ended + 1 >= t->next_first) {
		if (t->spec.repeat)
			while (t->next_first < ended + 2)
				t->next_first += t->spec.repeat;
		else
			t->next_first = ended + 2;
	}
	return 0;
}

int cuptrace_wtracker_trigger(struct cuptrace_wtracker *t, int close, int64_t duration_ns,
                              uint64_t steps, int64_t now, struct cuptrace_waction *a)
{
	if (close)
		return t->open ? do_close(t, now, "trigger --stop", a) : 0;
	if (t->open)
		return 0;
	/* A trigger opens a window whatever the launch-time rules say; closing it does not
	 * count as one of theirs (by_trigger). */
	t->by_trigger = 1;
	do_open(t, now, "trigger", a);
	if (duration_ns > 0)
		t->close_at = now + duration_ns;
	t->close_steps = steps;
	return 1;
}

int cuptrace_wtracker_end(struct cuptrace_wtracker *t, int64_t now, struct cuptrace_waction *a)
{
	if (!t->open)
		return 0;
	int r = do_close(t, now, "end of run", a);
	t->done = 1;
	return r;
}

/* ---- slow steps ---- */

void cuptrace_slowsteps_init(struct cuptrace_slowsteps *s, double factor, int64_t t0)
{
	memset(s, 0, sizeof(*s));
	s->factor = factor;
	s->last_end = t0;
	s->prev_end = t0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

int cuptrace_slowsteps_end(struct cuptrace_slowsteps *s, int64_t now, int64_t *from,
                           int64_t *median)
{
	int64_t d = now - s->last_end;
	int slow = 0;
	s->steps++;
	/* The first step holds start-up (CUDA init, compilation, warm-up): not counted. */
	if (s->steps > 1 && s->n >= CUPTRACE_SLOW_MIN) {
		int64_t tmp[CUPTRACE_SLOW_KEEP];
		memcpy(tmp, s->recent, s->n * sizeof(tmp[0]));
		qsort(tmp, s->n, sizeof(tmp[0]), cmp_i64);
		int64_t med = s->n % 2 ? tmp[s->n / 2] : (tmp[s->n / 2 - 1] + tmp[s->n / 2]) / 2;
		if ((double)d > s->factor * (double)med) {
			slow = 1;
			s->slow++;
			*from = s->prev_end;
			*median = med;
		}
	}
	/* A slow step does not move the median it is judged against. */
	if (s->steps > 1 && !slow) {
		s->recent[s->next] = d;
		s->next = (s->next + 1) % CUPTRACE_SLOW_KEEP;
		if (s->n < CUPTRACE_SLOW_KEEP)
			s->n++;
	}
	s->prev_end = s->last_end;
	s->last_end = now;
	return slow;
}
