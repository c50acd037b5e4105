/* `cuptrace share`, pass 1: the host and user names to remove, and what windows need (see
 * share.h, share_scan.h). */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rewrite/share_scan.h"
#include "rewrite/share_state.h"
#include "common/privacy.h"

static struct cuptrace_share_scan *to_scan(struct cuptrace_sink *s)
{
	return (struct cuptrace_share_scan *)s;
}

static int fail(struct cuptrace_share_scan *sc, int err)
{
	if (!sc->err)
		sc->err = err;
	return sc->err;
}

static int users(struct cuptrace_share_scan *sc, const char *text)
{
	int err = share_find_users(&sc->secrets, text);
	return err ? fail(sc, err) : 0;
}

/* `cuptrace merge` notes each input's host in its process's description: "...; host NAME". */
static int note_hosts(struct cuptrace_share_scan *sc, const char *desc)
{
	for (const char *p = desc ? strstr(desc, "; host ") : NULL; p;
	     p = strstr(p + 1, "; host ")) {
		const char *w = p + 7;
		size_t n = strcspn(w, "; \t\n");
		char *h = strndup(w, n);
		int err = h ? share_secret_host(&sc->secrets, h) : -ENOMEM;
		free(h);
		if (err)
			return fail(sc, err);
	}
	return 0;
}

static int note_time(struct cuptrace_share_scan *sc, int64_t ts, int64_t end)
{
	if (!sc->any || ts < sc->first)
		sc->first = ts;
	if (!sc->any || end > sc->last)
		sc->last = end;
	sc->any = 1;
	if (!sc->windows)
		return 0;
	int64_t *t = cuptrace_grow(sc->times, &sc->timecap, sc->ntimes + 1, sizeof(*t));
	if (!t)
		return fail(sc, -ENOMEM);
	sc->times = t;
	t[sc->ntimes++] = ts;
	return 0;
}

static int meta_users(struct cuptrace_share_scan *sc, const struct cuptrace_meta *m, size_t n)
{
	for (size_t i = 0; i < n && !sc->err; i++) {
		if (m[i].is_int || !m[i].s)
			continue;
		/* Identity keys by rule (privacy.h; a merged trace's "<label>: <key>" too): their
		 * values go from every string of the copy, not only from their own entry. */
		int err = 0;
		size_t n0;
		const char *b;
		/* A GPU's UUID: dropped from the metadata, and from every string that repeats it (a
		 * rank's GPU in a merged trace's track names and descriptions). */
		if (cuptrace_meta_is_gpu_uuid(m[i].key) &&
		    (err = share_secret_gpu(&sc->secrets, m[i].s)))
			return fail(sc, err);
		switch (m[i].key ? cuptrace_meta_identity(m[i].key) : CUPTRACE_ID_NONE) {
		case CUPTRACE_ID_HOST:
			err = share_secret_host(&sc->secrets, m[i].s);
			break;
		case CUPTRACE_ID_USER:
			err = share_secret_add(&sc->secrets, m[i].s, strlen(m[i].s),
			                       SHARE_SECRET_USER);
			break;
		case CUPTRACE_ID_PLACE:
			/* a home directory anywhere (/data/alice): its last name is the user's */
			b = cuptrace_path_base(m[i].s, strlen(m[i].s), &n0);
			if (strcasestr(m[i].key, "home") && n0 < strlen(m[i].s))
				err = share_secret_add(&sc->secrets, b, n0, SHARE_SECRET_USER);
			break;
		case CUPTRACE_ID_NONE:
			break;
		}
		if (err)
			return fail(sc, err);
		users(sc, m[i].s);
	}
	return sc->err;
}

static int sc_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	if (sc->err)
		return sc->err;
	if (info->hostname) {
		int err = share_secret_host(&sc->secrets, info->hostname);
		if (err)
			return fail(sc, err);
	}
	users(sc, info->process_name);
	return meta_users(sc, info->meta, info->nmeta);
}

static int sc_track(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	users(sc, t->name);
	users(sc, t->description);
	note_hosts(sc, t->description);
	for (size_t i = 0; i < t->cmdline_len; i++)
		users(sc, t->cmdline[i]);
	return sc->err;
}

static int args_users(struct cuptrace_share_scan *sc, const struct cuptrace_arg *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].type == CUPTRACE_ARG_STRING)
			users(sc, a[i].v.s);
	return sc->err;
}

static int flow_end(struct cuptrace_share_scan *sc, uint64_t id, int in, int64_t ts, int64_t end)
{
	int created;
	uint64_t *slot = cuptrace_u64map_put(&sc->flow_idx, id, &created);
	if (!slot)
		return fail(sc, -ENOMEM);
	if (created) {
		struct share_flow *f =
		    cuptrace_grow(sc->flows, &sc->flowcap, sc->nflows + 1, sizeof(*f));
		if (!f) {
			cuptrace_u64map_del(&sc->flow_idx, id);
			return fail(sc, -ENOMEM);
		}
		sc->flows = f;
		memset(&f[sc->nflows], 0, sizeof(*f));
		*slot = ++sc->nflows;
	}
	struct share_flow *f = &sc->flows[*slot - 1];
	/* A flow id that ends twice (a foreign trace): every end counts, the span covers all. */
	if (in) {
		f->in_ts = f->has & 2 && f->in_ts < ts ? f->in_ts : ts;
		f->in_end = f->has & 2 && f->in_end > end ? f->in_end : end;
		f->has |= 2;
	} else {
		f->out_ts = f->has & 1 && f->out_ts < ts ? f->out_ts : ts;
		f->out_end = f->has & 1 && f->out_end > end ? f->out_end : end;
		f->has |= 1;
	}
	return 0;
}

static int sc_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	if (sc->err)
		return sc->err;
	int64_t end = share_end(e->ts, e->dur);
	users(sc, e->name);
	args_users(sc, e->args, e->nargs);
	note_time(sc, e->ts, end);
	for (size_t k = 0; k < sc->nnames && !sc->err; k++) {
		if (!e->name || strcmp(e->name, sc->range_name[k]))
			continue;
		struct share_span *r =
		    cuptrace_grow(sc->range[k], &sc->rangecap[k], sc->nrange[k] + 1, sizeof(*r));
		if (!r)
			return fail(sc, -ENOMEM);
		sc->range[k] = r;
		r[sc->nrange[k]++] = (struct share_span){e->ts, end};
	}
	if (sc->windows) {
		for (size_t i = 0; i < e->nflows_out && !sc->err; i++)
			flow_end(sc, e->flows_out[i], 0, e->ts, end);
		for (size_t i = 0; i < e->nflows_in && !sc->err; i++)
			flow_end(sc, e->flows_in[i], 1, e->ts, end);
	}
	return sc->err;
}

static int sc_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	if (sc->err)
		return sc->err;
	users(sc, e->name);
	args_users(sc, e->args, e->nargs);
	return note_time(sc, e->ts, e->ts);
}

static int sc_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	if (sc->err || note_time(sc, e->ts, e->ts) || !sc->windows)
		return sc->err;
	struct share_ctr *c = cuptrace_grow(sc->ctrs, &sc->ctrcap, sc->nctrs + 1, sizeof(*c));
	if (!c)
		return fail(sc, -ENOMEM);
	sc->ctrs = c;
	c[sc->nctrs++] = (struct share_ctr){e->track_uuid, e->ts};
	return 0;
}

static int sc_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	return sc->err ? sc->err : meta_users(sc, m, n);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int sc_finish(struct cuptrace_sink *s)
{
	struct cuptrace_share_scan *sc = to_scan(s);
	if (sc->err)
		return sc->err;
	if (sc->ntimes)
		qsort(sc->times, sc->ntimes, sizeof(*sc->times), cmp_i64);
	/* Spans sort by their start, the first member. */
	for (size_t k = 0; k < sc->nnames; k++)
		if (sc->nrange[k])
			qsort(sc->range[k], sc->nrange[k], sizeof(*sc->range[k]), cmp_i64);
	return 0;
}

static void sc_destroy(struct cuptrace_sink *s)
{
	(void)s; /* the scan owns its sink: cuptrace_share_scan_free */
}

static const struct cuptrace_sink_ops scan_ops = {
    .name = "share-scan",
    .begin = sc_begin,
    .track = sc_track,
    .slice = sc_slice,
    .instant = sc_instant,
    .counter = sc_counter,
    .meta = sc_meta,
    .finish = sc_finish,
    .destroy = sc_destroy,
};

struct cuptrace_share_scan *cuptrace_share_scan_new(const char *const *range_names, size_t nnames,
                                                    int windows)
{
	struct cuptrace_share_scan *sc = calloc(1, sizeof(*sc));
	if (!sc || nnames > SHARE_MAX_RANGE_NAMES) {
		free(sc);
		return NULL;
	}
	sc->base.ops = &scan_ops;
	sc->windows = windows;
	cuptrace_u64map_init(&sc->flow_idx);
	for (size_t k = 0; k < nnames; k++) {
		if (!(sc->range_name[k] = strdup(range_names[k]))) {
			cuptrace_share_scan_free(sc);
			return NULL;
		}
		sc->nnames++;
	}
	return sc;
}

struct cuptrace_sink *cuptrace_share_scan_sink(struct cuptrace_share_scan *sc)
{
	return &sc->base;
}

void cuptrace_share_scan_free(struct cuptrace_share_scan *sc)
{
	if (!sc)
		return;
	share_secrets_free(&sc->secrets);
	for (size_t k = 0; k < SHARE_MAX_RANGE_NAMES; k++) {
		free(sc->range_name[k]);
		free(sc->range[k]);
	}
	cuptrace_u64map_free(&sc->flow_idx);
	free(sc->flows);
	free(sc->ctrs);
	free(sc->times);
	free(sc);
}

int cuptrace_share_range(const struct cuptrace_share_scan *sc, const char *name, size_t k,
                         int64_t *from, int64_t *to)
{
	for (size_t i = 0; i < sc->nnames; i++) {
		if (strcmp(sc->range_name[i], name))
			continue;
		if (k < 1 || k > sc->nrange[i])
			return -ENOENT;
		*from = sc->range[i][k - 1].ts;
		*to = sc->range[i][k - 1].end;
		return 0;
	}
	return -ENOENT;
}

void cuptrace_share_span(const struct cuptrace_share_scan *sc, int64_t *first, int64_t *last)
{
	*first = sc->any ? sc->first : 0;
	*last = sc->any ? sc->last : 0;
}

/* Index of the first time >= v. */
static size_t lower(const struct cuptrace_share_scan *sc, int64_t v)
{
	size_t lo = 0, hi = sc->ntimes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sc->times[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the first time > v. */
static size_t upper(const struct cuptrace_share_scan *sc, int64_t v)
{
	return v == INT64_MAX ? sc->ntimes : lower(sc, v + 1);
}

uint64_t cuptrace_share_count(const struct cuptrace_share_scan *sc, int64_t lo, int64_t hi)
{
	return hi < lo ? 0 : upper(sc, hi) - lower(sc, lo);
}

int cuptrace_share_busiest(const struct cuptrace_share_scan *sc, uint64_t n, int64_t lo, int64_t hi,
                           struct cuptrace_share_window *w)
{
	size_t a = lower(sc, lo), b = hi < lo ? a : upper(sc, hi);
	if (!n || a >= b)
		return -ENOENT;
	if (b - a <= n) {
		*w = (struct cuptrace_share_window){1, sc->times[a], sc->times[b - 1]};
		return 0;
	}
	size_t best = a;
	for (size_t i = a; i + n <= b; i++)
		if (sc->times[i + n - 1] - sc->times[i] < sc->times[best + n - 1] - sc->times[best])
			best = i;
	*w = (struct cuptrace_share_window){1, sc->times[best], sc->times[best + n - 1]};
	return 0;
}

const struct share_flow *share_scan_flow(const struct cuptrace_share_scan *sc, uint64_t id)
{
	uint64_t *i = cuptrace_u64map_get(&sc->flow_idx, id);
	return i ? &sc->flows[*i - 1] : NULL;
}
