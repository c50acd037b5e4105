/* Per-kernel averages of GPU metric counters (gpumetrics_stats.h). Events come in any order,
 * so counter values and GPU slices are kept until finish, then each slice is laid over the
 * sorted values of its GPU's metric tracks. */
#include "stats/gpumetrics_stats.h"
#include "common/text.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/forward.h"
#include "common/util.h"
#include "format/json_writer.h"

struct point {
	int64_t ts;
	double v;
};

struct mtrack {
	uint64_t group;
	uint32_t metric; /* index into metric names */
	struct point *p;
	size_t n, cap;
};

struct gslice {
	int64_t ts, dur;
	uint64_t group;
	uint32_t row;
};

struct gm_sink {
	struct fwd_sink fwd;
	struct cuptrace_gm_stats *out;
	struct cuptrace_u64map group_of; /* track uuid -> its GPU group uuid (GROUP: itself) */
	struct cuptrace_u64map mindex;   /* counter track uuid -> index + 1 in mt */
	struct mtrack *mt;
	size_t nmt, mtcap;
	struct cuptrace_strtab strs;
	uint32_t *metric_ids; /* strtab ids of metric names, first-seen order */
	size_t nmetrics, metcap;
	struct cuptrace_u64map row_index; /* cat id << 32 | name id -> index + 1 */
	uint32_t *row_keys;               /* 2 per row: cat id, name id */
	size_t nrows, rowcap;
	struct gslice *sl;
	size_t nsl, slcap;
};

static struct gm_sink *to_gm(struct cuptrace_sink *s)
{
	return (struct gm_sink *)s;
}

static int gm_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct gm_sink *s = to_gm(sk);
	uint64_t group = 0;
	if (t->kind == CUPTRACE_TRACK_GROUP) {
		group = t->uuid;
	} else {
		uint64_t *g = cuptrace_u64map_get(&s->group_of, t->parent_uuid);
		group = g ? *g : 0;
	}
	if (group) {
		uint64_t *slot = cuptrace_u64map_put(&s->group_of, t->uuid, NULL);
		if (!slot)
			return fwd_fail(&s->fwd, -ENOMEM);
		*slot = group;
	}
	if (group && t->kind == CUPTRACE_TRACK_COUNTER && t->unit == CUPTRACE_UNIT_NONE &&
	    !cuptrace_u64map_get(&s->mindex, t->uuid)) {
		const char *name = t->name ? t->name : "";
		uint32_t id = cuptrace_strtab_intern(&s->strs, name, strlen(name));
		size_t m;
		for (m = 0; m < s->nmetrics && s->metric_ids[m] != id; m++)
			;
		uint32_t *ids =
		    cuptrace_grow(s->metric_ids, &s->metcap, s->nmetrics + 1, sizeof(*ids));
		struct mtrack *mt = cuptrace_grow(s->mt, &s->mtcap, s->nmt + 1, sizeof(*mt));
		uint64_t *slot =
		    id && ids && mt ? cuptrace_u64map_put(&s->mindex, t->uuid, NULL) : NULL;
		if (ids)
			s->metric_ids = ids;
		if (mt)
			s->mt = mt;
		if (!slot)
			return fwd_fail(&s->fwd, -ENOMEM);
		if (m == s->nmetrics)
			s->metric_ids[s->nmetrics++] = id;
		s->mt[s->nmt] = (struct mtrack){.group = group, .metric = (uint32_t)m};
		*slot = ++s->nmt;
	}
	return fwd_track(sk, t);
}

static int gm_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct gm_sink *s = to_gm(sk);
	uint64_t *i = cuptrace_u64map_get(&s->mindex, e->track_uuid);
	if (i) {
		struct mtrack *t = &s->mt[*i - 1];
		struct point *p = cuptrace_grow(t->p, &t->cap, t->n + 1, sizeof(*p));
		if (!p)
			return fwd_fail(&s->fwd, -ENOMEM);
		t->p = p;
		t->p[t->n++] = (struct point){e->ts, e->is_double ? e->d : (double)e->i};
	}
	return fwd_counter(sk, e);
}

static int gm_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct gm_sink *s = to_gm(sk);
	const char *cat = e->category ? e->category : "";
	uint64_t *g = cuptrace_u64map_get(&s->group_of, e->track_uuid);
	if (g && (!strcmp(cat, "kernel") || !strcmp(cat, "memcpy") || !strcmp(cat, "memset") ||
	          !strcmp(cat, "graph"))) {
		const char *name = e->name ? e->name : "";
		uint32_t c = cuptrace_strtab_intern(&s->strs, cat, strlen(cat));
		uint32_t n = cuptrace_strtab_intern(&s->strs, name, strlen(name));
		int created = 0;
		uint64_t *slot =
		    c && n ? cuptrace_u64map_put(&s->row_index, (uint64_t)c << 32 | n, &created)
		           : NULL;
		if (!slot)
			return fwd_fail(&s->fwd, -ENOMEM);
		if (created) {
			uint32_t *k =
			    cuptrace_grow(s->row_keys, &s->rowcap, 2 * (s->nrows + 1), sizeof(*k));
			if (!k)
				return fwd_fail(&s->fwd, -ENOMEM);
			s->row_keys = k;
			k[2 * s->nrows] = c;
			k[2 * s->nrows + 1] = n;
			*slot = ++s->nrows;
		}
		struct gslice *sl = cuptrace_grow(s->sl, &s->slcap, s->nsl + 1, sizeof(*sl));
		if (!sl)
			return fwd_fail(&s->fwd, -ENOMEM);
		s->sl = sl;
		s->sl[s->nsl++] =
		    (struct gslice){e->ts, e->dur > 0 ? e->dur : 0, *g, (uint32_t)(*slot - 1)};
	}
	return fwd_slice(sk, e);
}

static int point_cmp(const void *pa, const void *pb)
{
	const struct point *a = pa, *b = pb;
	return (a->ts > b->ts) - (a->ts < b->ts);
}

/* Integral of t's step function over [a, b) and the part of it covered by values. */
static void integrate(const struct mtrack *t, int64_t a, int64_t b, double *sum, int64_t *cov)
{
	if (t->n < 2 || b <= a)
		return;
	/* The last point at or before a (or the first point). */
	size_t lo = 0, hi = t->n;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (t->p[mid].ts <= a)
			lo = mid;
		else
			hi = mid;
	}
	for (size_t i = lo; i + 1 < t->n && t->p[i].ts < b; i++) {
		int64_t s = t->p[i].ts > a ? t->p[i].ts : a;
		int64_t e = t->p[i + 1].ts < b ? t->p[i + 1].ts : b;
		if (e > s) {
			*sum += t->p[i].v * (double)(e - s);
			*cov += e - s;
		}
	}
}

static int row_cmp(const void *pa, const void *pb)
{
	const struct cuptrace_gm_row *a = pa, *b = pb;
	if (a->total_ns != b->total_ns)
		return a->total_ns < b->total_ns ? 1 : -1;
	return strcmp(a->name, b->name);
}

static int gm_finish(struct cuptrace_sink *sk)
{
	struct gm_sink *s = to_gm(sk);
	int err = fwd_finish(sk);
	if (err)
		return err;
	struct cuptrace_gm_stats *o = s->out;
	size_t nm = s->nmetrics;
	if (!nm)
		return 0; /* no GPU metrics: nothing to report */
	for (size_t i = 0; i < s->nmt; i++)
		if (s->mt[i].n) /* a metric with no sample (a trace cut before them) has no array */
			qsort(s->mt[i].p, s->mt[i].n, sizeof(struct point), point_cmp);
	o->metrics = calloc(nm, sizeof(char *));
	o->rows = calloc(s->nrows ? s->nrows : 1, sizeof(*o->rows));
	double *sum = calloc(s->nrows * nm + 1, sizeof(double));
	if (!o->metrics || !o->rows || !sum) {
		free(sum);
		return fwd_fail(&s->fwd, -ENOMEM);
	}
	o->nmetrics = nm;
	for (size_t m = 0; m < nm; m++)
		if (!(o->metrics[m] = strdup(cuptrace_strtab_str(&s->strs, s->metric_ids[m])))) {
			free(sum);
			return fwd_fail(&s->fwd, -ENOMEM);
		}
	o->nrows = s->nrows;
	for (size_t r = 0; r < s->nrows; r++) {
		struct cuptrace_gm_row *row = &o->rows[r];
		row->category = strdup(cuptrace_strtab_str(&s->strs, s->row_keys[2 * r]));
		row->name = strdup(cuptrace_strtab_str(&s->strs, s->row_keys[2 * r + 1]));
		row->avg = calloc(nm, sizeof(double));
		row->covered_ns = calloc(nm, sizeof(int64_t));
		if (!row->category || !row->name || !row->avg || !row->covered_ns) {
			free(sum);
			return fwd_fail(&s->fwd, -ENOMEM);
		}
	}
	for (size_t i = 0; i < s->nsl; i++) {
		const struct gslice *g = &s->sl[i];
		struct cuptrace_gm_row *row = &o->rows[g->row];
		row->count++;
		row->total_ns += g->dur;
		for (size_t t = 0; t < s->nmt; t++)
			if (s->mt[t].group == g->group)
				integrate(&s->mt[t], g->ts, g->ts + g->dur,
				          &sum[g->row * nm + s->mt[t].metric],
				          &row->covered_ns[s->mt[t].metric]);
	}
	for (size_t r = 0; r < s->nrows; r++)
		for (size_t m = 0; m < nm; m++)
			o->rows[r].avg[m] = o->rows[r].covered_ns[m]
			                        ? sum[r * nm + m] / (double)o->rows[r].covered_ns[m]
			                        : NAN;
	free(sum);
	qsort(o->rows, o->nrows, sizeof(*o->rows), row_cmp);
	return 0;
}

static void gm_destroy(struct cuptrace_sink *sk)
{
	struct gm_sink *s = to_gm(sk);
	cuptrace_sink_destroy(s->fwd.inner);
	cuptrace_u64map_free(&s->group_of);
	cuptrace_u64map_free(&s->mindex);
	cuptrace_u64map_free(&s->row_index);
	for (size_t i = 0; i < s->nmt; i++)
		free(s->mt[i].p);
	free(s->mt);
	cuptrace_strtab_free(&s->strs);
	free(s->metric_ids);
	free(s->row_keys);
	free(s->sl);
	free(s);
}

static const struct cuptrace_sink_ops gm_ops = {
    .name = "gpu metrics stats",
    .begin = fwd_begin,
    .track = gm_track,
    .slice = gm_slice,
    .instant = fwd_instant,
    .counter = gm_counter,
    .stack = fwd_stack,
    .sample = fwd_sample,
    .meta = fwd_meta,
    .finish = gm_finish,
    .destroy = gm_destroy,
};

struct cuptrace_sink *cuptrace_gm_stats_sink_new(struct cuptrace_gm_stats *out,
                                                 struct cuptrace_sink *inner)
{
	struct gm_sink *s = calloc(1, sizeof(*s));
	if (!s) {
		cuptrace_sink_destroy(inner);
		return NULL;
	}
	memset(out, 0, sizeof(*out));
	s->fwd.base.ops = &gm_ops;
	s->fwd.inner = inner;
	s->out = out;
	cuptrace_u64map_init(&s->group_of);
	cuptrace_u64map_init(&s->mindex);
	cuptrace_u64map_init(&s->row_index);
	cuptrace_strtab_init(&s->strs);
	return &s->fwd.base;
}

/* One table of the rows that have samples: the name, with count and time in the first table,
 * then the metrics [from, to). Returns the rows shown. */
static size_t gm_table(const struct cuptrace_gm_stats *g, FILE *f, int md, size_t from, size_t to)
{
	char align[REPORT_MAX_COLS + 1] = "Lrr";
	size_t shown = 0, lead = from ? 1 : 3;
	struct table t = {.md = md, .ncols = lead + to - from, .head = {"Name", "Count", "Time"}};
	for (size_t m = from; m < to; m++) {
		t.head[lead + m - from] = g->metrics[m];
		align[lead + m - from] = 'r';
	}
	t.align = align;
	for (size_t r = 0; r < g->nrows && shown < 20; r++) {
		const struct cuptrace_gm_row *row = &g->rows[r];
		int any = 0;
		for (size_t m = 0; m < g->nmetrics; m++)
			any |= row->covered_ns[m] > 0;
		if (!any)
			continue;
		shown++;
		table_cell_text(&t, row->name);
		if (!from) {
			table_cell(&t, "%llu", (unsigned long long)row->count);
			table_cell_dur(&t, row->total_ns);
		}
		for (size_t m = from; m < to; m++)
			if (isnan(row->avg[m]))
				table_cell(&t, "-");
			else
				table_cell(&t, "%.2f", row->avg[m]);
	}
	if (shown)
		table_print(&t, f);
	free(t.cells);
	return shown;
}

void cuptrace_gm_stats_print(const struct cuptrace_gm_stats *g, FILE *f, int markdown)
{
	if (!g->nmetrics || !g->nrows)
		return;
	report_section(f, markdown, "GPU metrics per kernel");
	report_para(f, markdown, "", "Averages over each slice's time where samples cover it.\n%s",
	            markdown ? "\n" : "");
	/* Metrics a table at a time, as many as fit the width beside a name of 32 columns (all
	 * of them in one markdown table). */
	for (size_t from = 0; from < g->nmetrics;) {
		size_t used = 32 + (from ? 0 : 2 + 5 + 2 + 8), to = from;
		while (to < g->nmetrics && to - from < REPORT_MAX_COLS - 3) {
			size_t w = report_width(g->metrics[to]) + 2;
			if (!markdown && to > from && used + w > CUPTRACE_TEXT_WIDTH)
				break;
			used += w;
			to++;
		}
		if (from)
			fputc('\n', f);
		if (!gm_table(g, f, markdown, from, to)) {
			fputs("No kernel, copy or memset falls where samples were taken.\n", f);
			return;
		}
		from = to;
	}
}

int cuptrace_gm_stats_json(const struct cuptrace_gm_stats *g, char **out)
{
	*out = NULL;
	if (!g->nmetrics)
		return 0;
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	if (!w)
		return -ENOMEM;
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "metrics");
	cuptrace_json_start_array(w);
	for (size_t m = 0; m < g->nmetrics; m++)
		cuptrace_json_string(w, g->metrics[m]);
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "rows");
	cuptrace_json_start_array(w);
	for (size_t r = 0; r < g->nrows; r++) {
		const struct cuptrace_gm_row *row = &g->rows[r];
		cuptrace_json_start_object(w);
		cuptrace_json_name(w, "name");
		cuptrace_json_string(w, row->name);
		cuptrace_json_name(w, "category");
		cuptrace_json_string(w, row->category);
		cuptrace_json_name(w, "count");
		cuptrace_json_uint(w, row->count);
		cuptrace_json_name(w, "total_ns");
		cuptrace_json_int(w, row->total_ns);
		cuptrace_json_name(w, "avg");
		cuptrace_json_start_array(w);
		for (size_t m = 0; m < g->nmetrics; m++) {
			if (isnan(row->avg[m]))
				cuptrace_json_null(w);
			else
				cuptrace_json_double(w, row->avg[m]);
		}
		cuptrace_json_end_array(w);
		cuptrace_json_name(w, "covered_ns");
		cuptrace_json_start_array(w);
		for (size_t m = 0; m < g->nmetrics; m++)
			cuptrace_json_int(w, row->covered_ns[m]);
		cuptrace_json_end_array(w);
		cuptrace_json_end_object(w);
	}
	cuptrace_json_end_array(w);
	cuptrace_json_end_object(w);
	size_t len = 0;
	const char *b = cuptrace_json_buffer(w, &len);
	int err = cuptrace_json_error(w);
	if (!err && b && (*out = malloc(len + 1))) {
		/* One line, as stats --json is: the writer breaks lines between elements, and a
		 * newline inside a string is always escaped, so every raw one can go. */
		size_t k = 0;
		for (size_t i = 0; i < len; i++)
			if (b[i] != '\n')
				(*out)[k++] = b[i];
		(*out)[k] = 0;
	} else if (!err) {
		err = -ENOMEM;
	}
	cuptrace_json_free(w);
	return err;
}

void cuptrace_gm_stats_free(struct cuptrace_gm_stats *g)
{
	for (size_t m = 0; m < g->nmetrics; m++)
		free(g->metrics[m]);
	free(g->metrics);
	for (size_t r = 0; r < g->nrows; r++) {
		free(g->rows[r].category);
		free(g->rows[r].name);
		free(g->rows[r].avg);
		free(g->rows[r].covered_ns);
	}
	free(g->rows);
	memset(g, 0, sizeof(*g));
}
