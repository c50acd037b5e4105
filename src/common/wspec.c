/* Capture window options: parsing and description (see wspec.h). */
#include "common/wspec.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
