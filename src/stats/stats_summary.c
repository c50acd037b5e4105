/* The tables every stats summary (text, markdown, JSON) and the diff derive from struct
 * cuptrace_stats: per-category totals, GPU rows and devices, partial overlaps. See
 * stats_summary.h. */
#include "stats/stats_summary.h"
#include "common/saturate.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cat_cmp(const void *pa, const void *pb)
{
	const struct stats_cat *a = pa, *b = pb;
	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return strcmp(a->cat, b->cat);
}

int stats_categories(const struct cuptrace_stats *st, struct stats_cat **out, size_t *n)
{
	struct stats_cat *cats = NULL;
	size_t k, nc = 0;

	*out = NULL;
	*n = 0;
	if (!st->nnames)
		return 0;
	if (!(cats = calloc(st->nnames, sizeof(*cats))))
		return -ENOMEM;
	/* Categories are few: a linear search per name is enough. */
	for (size_t i = 0; i < st->nnames; i++) {
		for (k = 0; k < nc && strcmp(cats[k].cat, st->names[i].category); k++)
			;
		if (k == nc)
			cats[nc++].cat = st->names[i].category;
		cats[k].count += st->names[i].count;
		cats[k].total = sat_add(cats[k].total, st->names[i].total_ns);
	}
	qsort(cats, nc, sizeof(*cats), cat_cmp);
	*out = cats;
	*n = nc;
	return 0;
}

static int gpu_row_cmp(const void *pa, const void *pb)
{
	const struct stats_gpu_row *a = pa, *b = pb;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->k->sort_rank != b->k->sort_rank)
		return a->k->sort_rank < b->k->sort_rank ? -1 : 1;
	if (a->k->lane != b->k->lane)
		return a->k->lane < b->k->lane ? -1 : 1;
	return a->k < b->k ? -1 : a->k > b->k; /* declaration order: the array's order */
}

/* uuid -> index + 1 of the first track with that uuid (the tracks' declaration order), so that
 * finding each stream's GPU is O(1): a linear search per stream was quadratic in the streams. */
static int index_tracks(const struct cuptrace_stats *st, struct cuptrace_u64map *m)
{
	cuptrace_u64map_init(m);
	for (size_t j = 0; j < st->ntrk; j++) {
		int created;
		uint64_t *v = cuptrace_u64map_put(m, st->trk[j].uuid, &created);
		if (!v) {
			cuptrace_u64map_free(m);
			return -ENOMEM;
		}
		if (created)
			*v = j + 1;
	}
	return 0;
}

static size_t track_index(const struct cuptrace_stats *st, const struct cuptrace_u64map *m,
                          uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(m, uuid);
	return v ? (size_t)*v - 1 : st->ntrk;
}

int stats_gpu_rows(const struct cuptrace_stats *st, struct stats_gpu_row **out, size_t *n)
{
	struct stats_gpu_row *rows;
	struct cuptrace_u64map idx;
	size_t nr = 0;

	*out = NULL;
	*n = 0;
	if (!st->ntrk)
		return 0;
	if (!(rows = calloc(st->ntrk, sizeof(*rows))))
		return -ENOMEM;
	if (index_tracks(st, &idx)) {
		free(rows);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st->ntrk; i++) {
		const struct cuptrace_stats_track *k = &st->trk[i];
		if (k->kind != CUPTRACE_TRACK_SLICES || !k->group_uuid || !k->slices)
			continue;
		rows[nr++] = (struct stats_gpu_row){track_index(st, &idx, k->group_uuid), k};
	}
	cuptrace_u64map_free(&idx);
	if (!nr) {
		free(rows);
		return 0;
	}
	qsort(rows, nr, sizeof(*rows), gpu_row_cmp);
	*out = rows;
	*n = nr;
	return 0;
}

int stats_devices(const struct cuptrace_stats *st, struct stats_device **out, size_t *n)
{
	struct stats_device *dev = NULL;
	struct cuptrace_u64map of; /* group uuid -> index + 1 in dev */
	size_t nd = 0;

	*out = NULL;
	*n = 0;
	for (size_t i = 0; i < st->ntrk; i++)
		nd += st->trk[i].kind == CUPTRACE_TRACK_GROUP;
	if (!nd)
		return 0;
	if (!(dev = calloc(nd, sizeof(*dev))))
		return -ENOMEM;
	cuptrace_u64map_init(&of);
	nd = 0;
	for (size_t i = 0; i < st->ntrk; i++) {
		if (st->trk[i].kind != CUPTRACE_TRACK_GROUP)
			continue;
		int created;
		uint64_t *v = cuptrace_u64map_put(&of, st->trk[i].uuid, &created);
		if (!v) {
			cuptrace_u64map_free(&of);
			free(dev);
			return -ENOMEM;
		}
		if (created)
			*v = nd + 1; /* the first group of a uuid takes its tracks' slices */
		dev[nd].group = &st->trk[i];
		/* The group's busy time is the union of its tracks' work (stats_sink.c). */
		dev[nd].busy_ns = st->trk[i].busy_ns;
		nd++;
	}
	for (size_t i = 0; i < st->ntrk; i++) {
		const struct cuptrace_stats_track *k = &st->trk[i];
		uint64_t *v = k->group_uuid ? cuptrace_u64map_get(&of, k->group_uuid) : NULL;
		if (v)
			dev[*v - 1].slices += k->slices;
	}
	cuptrace_u64map_free(&of);
	*out = dev;
	*n = nd;
	return 0;
}

uint64_t stats_partial_overlaps(const struct cuptrace_stats *st)
{
	uint64_t n = 0;
	for (size_t i = 0; i < st->ntrk; i++)
		n += st->trk[i].partial_overlaps;
	return n;
}

double stats_gpu_window_pct(const struct cuptrace_stats *st, const struct stats_gpu_row *row)
{
	if (row->group >= st->ntrk)
		return 0.0;
	const struct cuptrace_stats_track *g = &st->trk[row->group];
	int64_t win = g->work_to - g->work_from;
	double p = win > 0 ? 100.0 * (double)row->k->busy_ns / (double)win : 0.0;
	return p > 100.0 ? 100.0 : p; /* a track's union lies within its GPU's: rounding only */
}
