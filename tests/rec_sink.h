/* A sink that keeps everything, for assertions (test_convert.c, test_json.c). Include after
 * check.h. Strings are copied, truncated to their fields' sizes. */
#ifndef CUPTRACE_TESTS_REC_SINK_H
#define CUPTRACE_TESTS_REC_SINK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/event.h"

#define REC_META_MAX 256 /* metadata entries kept as text (a merge of ranks has many) */

struct rtrack {
	struct cuptrace_track t; /* its name and description: the copies below */
	char name[200];
	char desc[400];
};
struct rslice {
	uint64_t track;
	int64_t ts, dur;
	char name[200];
	char cat[32];
	uint64_t corr;
	uint64_t out[64];
	size_t nout;
	uint64_t in;
	size_t nin;
	char args[512];
};
struct rinstant {
	uint64_t track;
	int64_t ts;
	char name[64];
};
struct rec_sink {
	struct cuptrace_sink base;
	struct rtrack *tracks;
	size_t ntracks;
	struct rslice *slices;
	size_t nslices, cap;
	size_t ninstants, ncounters;
	int64_t counters[64];
	char instants[64][64];
	struct rinstant inst[64];
	int begun, finished;
	char meta_keys[64][48];
	int64_t meta_ints[64];
	size_t nmeta;
	int track_before_use_violations;
	/* begin()'s info, and every metadata entry as text (info's, then meta()'s) */
	int32_t pid;
	char process_name[64], hostname[64];
	int64_t start_realtime_ns;
	uint64_t uuid_hi, uuid_lo;
	char meta_text[REC_META_MAX][2][160];
	size_t nmeta_text;
};

static void rec_meta_text(struct rec_sink *s, const struct cuptrace_meta *m, size_t n)
{
	for (size_t i = 0; i < n && s->nmeta_text < REC_META_MAX; i++) {
		snprintf(s->meta_text[s->nmeta_text][0], 160, "%s", m[i].key);
		if (m[i].is_int)
			snprintf(s->meta_text[s->nmeta_text][1], 160, "%lld", (long long)m[i].i);
		else
			snprintf(s->meta_text[s->nmeta_text][1], 160, "%s", m[i].s ? m[i].s : "");
		s->nmeta_text++;
	}
}

/* The last value recorded for key, or NULL. */
static inline const char *rec_meta(const struct rec_sink *s, const char *key)
{
	const char *v = NULL;
	for (size_t i = 0; i < s->nmeta_text; i++)
		if (!strcmp(s->meta_text[i][0], key))
			v = s->meta_text[i][1];
	return v;
}

static struct rtrack *find_track(struct rec_sink *s, uint64_t uuid)
{
	for (size_t i = 0; i < s->ntracks; i++)
		if (s->tracks[i].t.uuid == uuid)
			return &s->tracks[i];
	return NULL;
}

static int r_begin(struct cuptrace_sink *b, const struct cuptrace_trace_info *info)
{
	struct rec_sink *s = (struct rec_sink *)b;
	s->begun = 1;
	s->pid = info->pid;
	snprintf(s->process_name, sizeof(s->process_name), "%s",
	         info->process_name ? info->process_name : "");
	snprintf(s->hostname, sizeof(s->hostname), "%s", info->hostname ? info->hostname : "");
	s->start_realtime_ns = info->start_realtime_ns;
	s->uuid_hi = info->trace_uuid_hi;
	s->uuid_lo = info->trace_uuid_lo;
	rec_meta_text(s, info->meta, info->nmeta);
	return 0;
}
static int r_track(struct cuptrace_sink *b, const struct cuptrace_track *t)
{
	struct rec_sink *s = (struct rec_sink *)b;
	if (t->parent_uuid && !find_track(s, t->parent_uuid))
		s->track_before_use_violations++;
	s->tracks = realloc(s->tracks, (s->ntracks + 1) * sizeof(*s->tracks));
	struct rtrack *r = &s->tracks[s->ntracks++];
	r->t = *t;
	snprintf(r->name, sizeof(r->name), "%s", t->name);
	snprintf(r->desc, sizeof(r->desc), "%s", t->description ? t->description : "");
	r->t.name = NULL;
	r->t.description = NULL;
	return 0;
}
static int r_slice(struct cuptrace_sink *b, const struct cuptrace_slice *e)
{
	struct rec_sink *s = (struct rec_sink *)b;
	if (!find_track(s, e->track_uuid))
		s->track_before_use_violations++;
	if (s->nslices == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->slices = realloc(s->slices, s->cap * sizeof(*s->slices));
	}
	struct rslice *r = &s->slices[s->nslices++];
	memset(r, 0, sizeof(*r));
	r->track = e->track_uuid;
	r->ts = e->ts;
	r->dur = e->dur;
	snprintf(r->name, sizeof(r->name), "%s", e->name);
	snprintf(r->cat, sizeof(r->cat), "%s", e->category);
	r->corr = e->correlation_id;
	for (size_t i = 0; i < e->nflows_out && i < 64; i++)
		r->out[r->nout++] = e->flows_out[i];
	if (e->nflows_in)
		r->in = e->flows_in[0];
	r->nin = e->nflows_in;
	size_t n = 0;
	for (size_t i = 0; i < e->nargs; i++) {
		const struct cuptrace_arg *a = &e->args[i];
		if (a->type == CUPTRACE_ARG_STRING)
			n += (size_t)snprintf(r->args + n, sizeof(r->args) - n, "%s=%s;", a->key,
			                      a->v.s);
		else if (a->type == CUPTRACE_ARG_DOUBLE)
			n += (size_t)snprintf(r->args + n, sizeof(r->args) - n, "%s=%.3f;", a->key,
			                      a->v.d);
		else
			n += (size_t)snprintf(r->args + n, sizeof(r->args) - n, "%s=%lld;", a->key,
			                      (long long)a->v.i);
		if (n >= sizeof(r->args))
			n = sizeof(r->args) - 1;
	}
	return 0;
}
static int r_instant(struct cuptrace_sink *b, const struct cuptrace_instant *e)
{
	struct rec_sink *s = (struct rec_sink *)b;
	if (!find_track(s, e->track_uuid))
		s->track_before_use_violations++;
	if (s->ninstants < 64) {
		snprintf(s->instants[s->ninstants], 64, "%s", e->name);
		s->inst[s->ninstants].track = e->track_uuid;
		s->inst[s->ninstants].ts = e->ts;
		snprintf(s->inst[s->ninstants].name, 64, "%s", e->name);
	}
	s->ninstants++;
	return 0;
}
static int r_counter(struct cuptrace_sink *b, const struct cuptrace_counter *e)
{
	struct rec_sink *s = (struct rec_sink *)b;
	if (!find_track(s, e->track_uuid))
		s->track_before_use_violations++;
	if (s->ncounters < 64)
		s->counters[s->ncounters] = e->i;
	s->ncounters++;
	return 0;
}
static int r_meta(struct cuptrace_sink *b, const struct cuptrace_meta *m, size_t n)
{
	struct rec_sink *s = (struct rec_sink *)b;
	rec_meta_text(s, m, n);
	for (size_t i = 0; i < n && s->nmeta < 64; i++) {
		if (!m[i].is_int)
			continue;
		snprintf(s->meta_keys[s->nmeta], 48, "%s", m[i].key);
		s->meta_ints[s->nmeta++] = m[i].i;
	}
	return 0;
}
static int r_finish(struct cuptrace_sink *b)
{
	((struct rec_sink *)b)->finished = 1;
	return 0;
}
static void r_destroy(struct cuptrace_sink *b)
{
	struct rec_sink *s = (struct rec_sink *)b;
	free(s->tracks);
	free(s->slices);
	free(s);
}
static const struct cuptrace_sink_ops rec_ops = {
    .name = "rec",
    .begin = r_begin,
    .track = r_track,
    .slice = r_slice,
    .instant = r_instant,
    .counter = r_counter,
    .meta = r_meta,
    .finish = r_finish,
    .destroy = r_destroy,
};

static inline struct rec_sink *rec_sink_new(void)
{
	struct rec_sink *s = calloc(1, sizeof(*s));
	if (s)
		s->base.ops = &rec_ops;
	return s;
}

#endif
