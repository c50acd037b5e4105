/* Where cuptrace top's events come from: a capture being written (tailed: each poll converts
 * what was appended), or a whole capture replayed by trace time (the events kept in memory,
 * handed out as the replay's clock passes their end). Both go through the converter into an
 * aggregator sink (top.h). Threading: the command's one thread. */
#include "top/source.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "convert/capture.h"
#include "convert/capture_conv.h"
#include "convert/convert.h"

struct top_source {
	struct cuptrace_top *t;
	/* The converter over the capture's items (as read/read.c has for a whole file); its sink
	 * is the aggregator's, or the store's while loading a replay. */
	struct cuptrace_capture_conv cc;
	struct cuptrace_sink *top; /* the aggregator's sink */
	int ended, finished;
	char *path;
	/* Replay: the events, sorted by end. */
	struct ev *ev;
	size_t nev, evcap, next;
	struct cuptrace_strtab strs;
	int64_t t0, tend;
};

/* ---- the converter over capture items (convert/capture_conv.h), and top's drop count ---- */

static int c_dropped(void *ctx, uint64_t a, uint64_t b)
{
	struct top_source *s =
	    (struct top_source *)((char *)ctx - offsetof(struct top_source, cc)); /* ctx: &s->cc */
	int r = cuptrace_capture_conv_dropped(ctx, a, b);
	if (!r)
		cuptrace_top_dropped(s->t, cuptrace_top_sink_proc(s->top), a, b);
	return r;
}

/* The replay's callbacks: the shared ones, top's drops, no GPU metrics (top shows none). */
static void cap_ops(struct top_source *s, struct cuptrace_capture_ops *ops)
{
	cuptrace_capture_conv_ops(&s->cc, ops);
	ops->dropped = c_dropped;
	ops->gpu_metrics = NULL;
	ops->gpu_samples = NULL;
}

static struct top_source *source_new(struct cuptrace_top *t, const char *path)
{
	struct top_source *s = calloc(1, sizeof(*s));
	if (!s || !(s->path = strdup(path)) || !(s->top = cuptrace_top_sink_new(t))) {
		if (s)
			free(s->path);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->t = t;
	s->cc.sink = s->top;
	cuptrace_strtab_init(&s->strs);
	return s;
}

/* The end of the stream: the converter's held-back events, then the sink's finish. */
static int source_finish(struct top_source *s)
{
	if (s->finished)
		return 0;
	s->finished = 1;
	int r = cuptrace_capture_conv_start(&s->cc);
	if (!r)
		r = cuptrace_converter_finish(s->cc.conv);
	int f = s->cc.sink->ops->finish(s->cc.sink);
	return r ? r : f;
}

struct top_source *cuptrace_top_tail_open(struct cuptrace_top *t, const char *path)
{
	struct top_source *s = source_new(t, path);
	if (!s)
		return NULL;
	if (!(s->cc.reader = cuptrace_capture_tail_open(s->path))) {
		int e = errno;
		cuptrace_top_source_free(s);
		errno = e;
		return NULL;
	}
	return s;
}

int cuptrace_top_source_poll(struct top_source *s, const char **why)
{
	*why = NULL;
	if (s->ended)
		return 0;
	struct cuptrace_capture_ops ops;
	cap_ops(s, &ops);
	int ended = 0;
	int r = cuptrace_capture_tail_poll(s->cc.reader, &ops, &ended, why);
	if (!r && ended) {
		s->ended = 1;
		r = source_finish(s);
	}
	return r;
}

int cuptrace_top_source_ended(const struct top_source *s)
{
	return s->ended;
}

const char *cuptrace_top_source_path(const struct top_source *s)
{
	return s->path;
}

/* ---- replay: a store sink keeps the events, handed to the aggregator by trace time ---- */

enum { EV_SLICE, EV_INSTANT, EV_COUNTER };

struct ev {
	int type;
	uint64_t track;
	int64_t ts, dur;
	uint32_t name, cat;      /* ids in strs */
	uint32_t kind, src, dst; /* copies: the args top reads (ids, 0: none) */
	uint64_t bytes;
	uint64_t corr, flow_in, flow_out; /* the launch link (idle causes); 0: none */
	int is_double;
	int64_t i;
	double d;
};

struct store_sink {
	struct cuptrace_sink base;
	struct top_source *s;
};

static struct top_source *store_of(struct cuptrace_sink *sk)
{
	return ((struct store_sink *)sk)->s;
}

static uint32_t intern(struct top_source *s, const char *str)
{
	return str ? cuptrace_strtab_intern(&s->strs, str, strlen(str)) : 0;
}

static struct ev *ev_new(struct top_source *s)
{
	struct ev *v = cuptrace_grow(s->ev, &s->evcap, s->nev + 1, sizeof(*v));
	if (!v)
		return NULL;
	s->ev = v;
	memset(&v[s->nev], 0, sizeof(*v));
	return &v[s->nev++];
}

/* Tracks and the start go to the aggregator at once: they come before any event. */
static int st_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct top_source *s = store_of(sk);
	return s->top->ops->begin(s->top, info);
}

static int st_track(struct cuptrace_sink *sk, const struct cuptrace_track *tr)
{
	struct top_source *s = store_of(sk);
	return s->top->ops->track(s->top, tr);
}

static int st_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct top_source *s = store_of(sk);
	struct ev *v = ev_new(s);
	if (!v)
		return -ENOMEM;
	*v = (struct ev){.type = EV_SLICE,
	                 .track = e->track_uuid,
	                 .ts = e->ts,
	                 .dur = e->dur,
	                 .name = intern(s, e->name),
	                 .cat = intern(s, e->category),
	                 .corr = e->correlation_id,
	                 .flow_in = e->nflows_in ? e->flows_in[0] : 0,
	                 .flow_out = e->nflows_out ? e->flows_out[0] : 0};
	for (size_t i = 0; i < e->nargs; i++) {
		const struct cuptrace_arg *a = &e->args[i];
		if (!strcmp(a->key, "bytes"))
			v->bytes = a->type == CUPTRACE_ARG_INT ? (uint64_t)a->v.i : a->v.u;
		else if (a->type == CUPTRACE_ARG_STRING && !strcmp(a->key, "kind"))
			v->kind = intern(s, a->v.s);
		else if (a->type == CUPTRACE_ARG_STRING && !strcmp(a->key, "src"))
			v->src = intern(s, a->v.s);
		else if (a->type == CUPTRACE_ARG_STRING && !strcmp(a->key, "dst"))
			v->dst = intern(s, a->v.s);
	}
	return (e->name && !v->name) || (e->category && !v->cat) ? -ENOMEM : 0;
}

static int st_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct top_source *s = store_of(sk);
	struct ev *v = ev_new(s);
	if (!v)
		return -ENOMEM;
	*v = (struct ev){.type = EV_INSTANT,
	                 .track = e->track_uuid,
	                 .ts = e->ts,
	                 .name = intern(s, e->name),
	                 .cat = intern(s, e->category)};
	return 0;
}

static int st_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct top_source *s = store_of(sk);
	struct ev *v = ev_new(s);
	if (!v)
		return -ENOMEM;
	*v = (struct ev){.type = EV_COUNTER,
	                 .track = e->track_uuid,
	                 .ts = e->ts,
	                 .is_double = e->is_double,
	                 .i = e->i,
	                 .d = e->d};
	return 0;
}

static int st_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	(void)sk;
	(void)m;
	(void)n;
	return 0;
}

static int st_finish(struct cuptrace_sink *sk)
{
	(void)sk;
	return 0;
}

static void st_destroy(struct cuptrace_sink *sk)
{
	free(sk);
}

static const struct cuptrace_sink_ops store_ops = {
    .name = "top replay store",
    .begin = st_begin,
    .track = st_track,
    .slice = st_slice,
    .instant = st_instant,
    .counter = st_counter,
    .meta = st_meta,
    .finish = st_finish,
    .destroy = st_destroy,
};

static int64_t ev_end(const struct ev *e)
{
	return e->dur > 0 ? e->ts + e->dur : e->ts;
}

/* By start: GPU work then comes in start order, as a live capture's does behind the
 * converter's watermark (what top's idle sweep needs), and a launch call before its work. */
static int ev_cmp(const void *pa, const void *pb)
{
	const struct ev *a = pa, *b = pb;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	int64_t ea = ev_end(a), eb = ev_end(b);
	return ea < eb ? -1 : ea > eb;
}

struct top_source *cuptrace_top_replay_open(struct cuptrace_top *t, const char *path,
                                            const char **why)
{
	*why = NULL;
	struct top_source *s = source_new(t, path);
	struct store_sink *st = s ? calloc(1, sizeof(*st)) : NULL;
	if (!st) {
		cuptrace_top_source_free(s);
		errno = ENOMEM;
		return NULL;
	}
	st->base.ops = &store_ops;
	st->s = s;
	s->cc.sink = &st->base;
	s->cc.reader = cuptrace_capture_reader_open(s->path);
	uint64_t cut_at = 0;
	struct cuptrace_capture_ops ops;
	cap_ops(s, &ops);
	int r = s->cc.reader ? cuptrace_capture_replay(s->cc.reader, &ops, &cut_at, why)
	                     : -(errno ? errno : EINVAL);
	if (!r)
		r = source_finish(s); /* the store's finish: the aggregator's comes at the end */
	if (r) {
		cuptrace_top_source_free(s);
		errno = r < 0 ? -r : EIO;
		return NULL;
	}
	if (s->nev)
		qsort(s->ev, s->nev, sizeof(*s->ev), ev_cmp);
	s->t0 = INT64_MAX;
	for (size_t i = 0; i < s->nev; i++)
		if (s->ev[i].ts < s->t0)
			s->t0 = s->ev[i].ts;
	s->t0 = s->nev ? s->t0 : 0;
	s->tend = 0;
	for (size_t i = 0; i < s->nev; i++)
		if (ev_end(&s->ev[i]) > s->tend)
			s->tend = ev_end(&s->ev[i]);
	return s;
}

int64_t cuptrace_top_replay_start(const struct top_source *s)
{
	return s->t0;
}

int cuptrace_top_replay_until(struct top_source *s, int64_t until)
{
	struct cuptrace_sink *k = s->top;
	int r = 0;
	cuptrace_top_clocked(s->t, cuptrace_top_sink_proc(k));
	for (; s->next < s->nev && s->ev[s->next].ts <= until && !r; s->next++) {
		const struct ev *e = &s->ev[s->next];
		const char *name = e->name ? cuptrace_strtab_str(&s->strs, e->name) : NULL;
		const char *cat = e->cat ? cuptrace_strtab_str(&s->strs, e->cat) : NULL;
		if (e->type == EV_SLICE) {
			struct cuptrace_arg a[4];
			size_t na = 0;
			a[na++] = (struct cuptrace_arg){
			    .key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = e->bytes};
			if (e->kind)
				a[na++] = (struct cuptrace_arg){
				    .key = "kind",
				    .type = CUPTRACE_ARG_STRING,
				    .v.s = cuptrace_strtab_str(&s->strs, e->kind)};
			if (e->src)
				a[na++] = (struct cuptrace_arg){
				    .key = "src",
				    .type = CUPTRACE_ARG_STRING,
				    .v.s = cuptrace_strtab_str(&s->strs, e->src)};
			if (e->dst)
				a[na++] = (struct cuptrace_arg){
				    .key = "dst",
				    .type = CUPTRACE_ARG_STRING,
				    .v.s = cuptrace_strtab_str(&s->strs, e->dst)};
			struct cuptrace_slice sl = {.track_uuid = e->track,
			                            .correlation_id = e->corr,
			                            .flows_in = &e->flow_in,
			                            .nflows_in = e->flow_in != 0,
			                            .flows_out = &e->flow_out,
			                            .nflows_out = e->flow_out != 0,
			                            .ts = e->ts,
			                            .dur = e->dur,
			                            .name = name,
			                            .category = cat,
			                            .args = a,
			                            .nargs = na};
			r = k->ops->slice(k, &sl);
		} else if (e->type == EV_INSTANT) {
			struct cuptrace_instant in = {
			    .track_uuid = e->track, .ts = e->ts, .name = name, .category = cat};
			r = k->ops->instant(k, &in);
		} else {
			struct cuptrace_counter c = {.track_uuid = e->track,
			                             .ts = e->ts,
			                             .is_double = e->is_double,
			                             .i = e->i,
			                             .d = e->d};
			r = k->ops->counter(k, &c);
		}
	}
	cuptrace_top_advance(s->t, cuptrace_top_sink_proc(k), until);
	if (!r && s->next == s->nev && until >= s->tend && !s->ended) {
		s->ended = 1;
		r = k->ops->finish(k);
	}
	return r;
}

void cuptrace_top_source_free(struct top_source *s)
{
	if (!s)
		return;
	cuptrace_capture_conv_free(&s->cc);
	if (s->cc.sink != s->top)
		cuptrace_sink_destroy(s->cc.sink);
	cuptrace_sink_destroy(s->top);
	cuptrace_capture_reader_close(s->cc.reader);
	free(s->ev);
	cuptrace_strtab_free(&s->strs);
	free(s->path);
	free(s);
}
