/* Capture windows: option parsing, the open/close rules, slow-step detection (see window.h). */
#include "collect/window.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* A positive count, all digits. */
static int parse_count(const char *s, size_t len, uint64_t *out)
{
	if (!len || len > 18)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (!v)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "K[,N]" at s: first occurrence and count, each a positive integer. */
static int parse_k_n(const char *s, uint64_t *k, uint64_t *cnt)
{
	const char *comma = strchr(s, ',');
	size_t klen = comma ? (size_t)(comma - s) : strlen(s);
	if (parse_count(s, klen, k))
		return -EINVAL;
	*cnt = 1;
	if (comma && parse_count(comma + 1, strlen(comma + 1), cnt))
		return -EINVAL;
	return 0;
}

int cuptrace_wspec_parse_range(struct cuptrace_wspec *w, const char *text, char *err, size_t n)
{
	if (text && !strcmp(text, "cuda-profiler-api")) {
		w->mode = CUPTRACE_WMODE_PROFILER_API;
		return 0;
	}
	if (!text || strncmp(text, "range:", 6) || !text[6]) {
		snprintf(err, n,
		         "'%s' is not a capture range (expected cuda-profiler-api or "
		         "range:NAME[#K][,N])",
		         text ? text : "");
		return -EINVAL;
	}
	const char *name = text + 6;
	/* NAME may itself hold '#' and ','; the spec's own are the last '#' followed by digits
	 * (and an optional ",N") and a final ",N" of digits. */
	size_t len = strlen(name);
	uint64_t k = 1, cnt = 1;
	const char *comma = strrchr(name, ',');
	if (comma && comma > name && parse_count(comma + 1, strlen(comma + 1), &cnt) == 0)
		len = (size_t)(comma - name);
	else if (comma && comma[1] && isdigit((unsigned char)comma[1])) {
		snprintf(err, n, "'%s': the count after ',' must be a positive integer", text);
		return -EINVAL;
	}
	const char *hash = NULL;
	for (size_t i = len; i-- > 0;)
		if (name[i] == '#') {
			hash = name + i;
			break;
		}
	size_t full = len;
	if (hash && hash > name && parse_count(hash + 1, len - (size_t)(hash + 1 - name), &k) == 0)
		len = (size_t)(hash - name);
	if (!len || len >= CUPTRACE_WNAME_MAX) {
		snprintf(err, n, "'%s': the range name must be 1 to %d characters", text,
		         CUPTRACE_WNAME_MAX - 1);
		return -EINVAL;
	}
	memcpy(w->range, name, len);
	w->range[len] = 0;
	/* "ProfilerStep#551" also names one range by its full name (torch.profiler numbers its
	 * steps in their names): the range of that exact name opens the window if it comes first.
	 */
	if (full != len && full < CUPTRACE_WNAME_MAX) {
		memcpy(w->range_full, name, full);
		w->range_full[full] = 0;
	} else {
		w->range_full[0] = 0;
	}
	w->first = k;
	w->count = cnt;
	w->mode = CUPTRACE_WMODE_RANGE;
	return 0;
}

int cuptrace_wspec_parse_steps(struct cuptrace_wspec *w, const char *text, char *err, size_t n)
{
	uint64_t k, cnt;
	if (!text || parse_k_n(text, &k, &cnt)) {
		snprintf(err, n, "'%s' is not K[,N] (the first step, 1-based, and how many)",
		         text ? text : "");
		return -EINVAL;
	}
	w->first = k;
	w->count = cnt;
	w->mode = CUPTRACE_WMODE_STEPS;
	return 0;
}

int cuptrace_wspec_parse_repeat(struct cuptrace_wspec *w, const char *text, char *err, size_t n)
{
	if (text && !strcmp(text, "all")) {
		w->repeat = UINT64_MAX; /* resolved to count in cuptrace_wspec_finish */
		return 0;
	}
	uint64_t m;
	if (!text || parse_count(text, strlen(text), &m)) {
		snprintf(err, n, "'%s' is not a positive count or 'all'", text ? text : "");
		return -EINVAL;
	}
	w->repeat = m;
	return 0;
}

int cuptrace_wspec_finish(struct cuptrace_wspec *w, char *err, size_t n)
{
	if (w->mode == CUPTRACE_WMODE_RUN && (w->delay_ns > 0 || w->duration_ns > 0))
		w->mode = CUPTRACE_WMODE_TIME;
	if (!w->first)
		w->first = 1;
	if (!w->count)
		w->count = 1;
	if (w->repeat && w->mode != CUPTRACE_WMODE_RANGE && w->mode != CUPTRACE_WMODE_STEPS &&
	    w->mode != CUPTRACE_WMODE_PROFILER_API) {
		snprintf(err, n, "a repeat needs a capture range or steps to repeat");
		return -EINVAL;
	}
	/* "all": back to back; every M-th with M < N would overlap: back to back too. */
	if (w->repeat == UINT64_MAX || (w->repeat && w->repeat < w->count))
		w->repeat = w->mode == CUPTRACE_WMODE_PROFILER_API ? 1 : w->count;
	if (w->ring_slow > 0 && w->ring_ns <= 0) {
		snprintf(err, n, "--ring-slow needs --ring (the recorder it writes from)");
		return -EINVAL;
	}
	if (w->ring_slow != 0 && !(w->ring_slow > 1.0)) {
		snprintf(err, n, "the slow-step factor must be above 1 (e.g. 2: twice the median)");
		return -EINVAL;
	}
	if (w->ring_ns > 0 && w->mode != CUPTRACE_WMODE_RUN) {
		snprintf(err, n, "--ring keeps the whole run's last seconds: it takes no window");
		return -EINVAL;
	}
	return 0;
}

void cuptrace_wspec_describe(const struct cuptrace_wspec *w, char *out, size_t n)
{
	char rep[48] = "";
	if (w->repeat)
		snprintf(rep, sizeof(rep), ", again every %llu", (unsigned long long)w->repeat);
	char lim[96] = "";
	size_t used = 0;
	if (w->delay_ns > 0)
		used += (size_t)snprintf(lim + used, sizeof(lim) - used, ", from %.3f s",
		                         (double)w->delay_ns / 1e9);
	if (w->duration_ns > 0 && used < sizeof(lim))
		snprintf(lim + used, sizeof(lim) - used, ", at most %.3f s each",
		         (double)w->duration_ns / 1e9);
	switch (w->mode) {
	case CUPTRACE_WMODE_RUN:
		if (w->ring_ns > 0)
			snprintf(out, n, "flight recorder: the last %.3f s%s",
			         (double)w->ring_ns / 1e9,
			         w->ring_slow > 1 ? " and slow steps" : "");
		else
			snprintf(out, n, "whole run");
		break;
	case CUPTRACE_WMODE_TIME:
		snprintf(out, n, "time%s", lim);
		break;
	case CUPTRACE_WMODE_PROFILER_API:
		snprintf(out, n, "cuda-profiler-api%s%s", rep, lim);
		break;
	case CUPTRACE_WMODE_RANGE:
		snprintf(out, n, "range:%s#%llu,%llu%s%s", w->range, (unsigned long long)w->first,
		         (unsigned long long)w->count, rep, lim);
		break;
	case CUPTRACE_WMODE_STEPS:
		snprintf(out, n, "steps %llu,%llu%s%s", (unsigned long long)w->first,
		         (unsigned long long)w->count, rep, lim);
		break;
	case CUPTRACE_WMODE_ON_DEMAND:
		snprintf(out, n, "on demand (cuptrace trigger)");
		break;
	}
}

int cuptrace_wname_matches(const char *want, const char *name)
{
	if (!want || !name)
		return 0;
	size_t wl = strlen(want);
	if (strncmp(want, name, wl))
		return 0;
	if (!name[wl])
		return 1;
	if (name[wl] != '#' || !name[wl + 1])
		return 0;
	for (const char *p = name + wl + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return 0;
	return 1;
}

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
	snprintf(a->why, sizeof(a->why), "%s", why);
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
		snprintf(why, sizeof(why), "range %s began (#%llu)", name, (unsigned long long)occ);
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
