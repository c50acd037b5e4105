/* Records -> capture windows (see wfilter.h). */
#include "window/wfilter.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DROPPED UINT64_MAX
/* Held records beyond this are placed by their own time at once: memory stays bounded even if
 * API records never come (CUPTI told not to record some calls). */
#define HELD_MAX (1u << 20)

void cuptrace_wfilter_init(struct cuptrace_wfilter *f)
{
	memset(f, 0, sizeof(*f));
	cuptrace_u64map_init(&f->corr);
	cuptrace_u64map_init(&f->marker);
}

static void free_handed_out(struct cuptrace_wfilter *f)
{
	for (size_t i = 0; i < f->nout; i++)
		free(f->out[i]);
	f->nout = 0;
}

void cuptrace_wfilter_free(struct cuptrace_wfilter *f)
{
	free_handed_out(f);
	for (size_t i = 0; i < f->nheld; i++)
		free(f->held[i].rec);
	free(f->held);
	free(f->spans);
	free(f->out);
	free(f->outv);
	cuptrace_u64map_free(&f->corr);
	cuptrace_u64map_free(&f->marker);
	memset(f, 0, sizeof(*f));
}

int cuptrace_wfilter_open(struct cuptrace_wfilter *f, uint64_t number, int64_t t)
{
	void *p = cuptrace_grow(f->spans, &f->capspans, f->nspans + 1, sizeof(*f->spans));
	if (!p)
		return -ENOMEM;
	f->spans = p;
	f->spans[f->nspans++] = (struct cuptrace_wspan){number, t, INT64_MAX, 0};
	return 0;
}

static struct cuptrace_wspan *span_of(struct cuptrace_wfilter *f, uint64_t number)
{
	for (size_t i = f->nspans; i-- > 0;)
		if (f->spans[i].number == number)
			return &f->spans[i];
	return NULL;
}

void cuptrace_wfilter_close(struct cuptrace_wfilter *f, uint64_t number, int64_t t)
{
	struct cuptrace_wspan *s = span_of(f, number);
	if (s)
		s->close = t;
}

/* The window holding time t (spans are in opening order and do not overlap). */
static uint64_t window_at(const struct cuptrace_wfilter *f, int64_t t)
{
	size_t lo = 0, hi = f->nspans;
	while (lo < hi) { /* first span opening after t */
		size_t mid = (lo + hi) / 2;
		if (f->spans[mid].open <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	const struct cuptrace_wspan *s = &f->spans[lo - 1];
	return t <= s->close ? s->number : 0;
}

int cuptrace_wrecord_place(const CUpti_Activity *r, int64_t *t, uint32_t *corr)
{
	*corr = 0;
	*t = 0;
	switch (r->kind) {
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: {
		const CUpti_ActivityAPI *a = (const void *)r;
		*t = (int64_t)a->start;
		*corr = a->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
		const CUpti_ActivityKernel10 *k = (const void *)r;
		*t = (int64_t)k->start;
		*corr = k->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY: {
		const CUpti_ActivityMemcpy6 *m = (const void *)r;
		*t = (int64_t)m->start;
		*corr = m->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMCPY2: {
		const CUpti_ActivityMemcpyPtoP4 *m = (const void *)r;
		*t = (int64_t)m->start;
		*corr = m->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMSET: {
		const CUpti_ActivityMemset4 *m = (const void *)r;
		*t = (int64_t)m->start;
		*corr = m->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
		const CUpti_ActivityGraphTrace2 *g = (const void *)r;
		*t = (int64_t)g->start;
		*corr = g->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE: {
		/* Launched from a kernel: no API call, so by its start alone. */
		const CUpti_ActivityDeviceGraphTrace *g = (const void *)r;
		*t = (int64_t)g->start;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
		const CUpti_ActivitySynchronization2 *s = (const void *)r;
		*t = (int64_t)s->start;
		*corr = s->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_CUDA_EVENT: {
		const CUpti_ActivityCudaEvent2 *e = (const void *)r;
		*corr = e->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY2: {
		const CUpti_ActivityMemory4 *m = (const void *)r;
		*t = (int64_t)m->timestamp;
		*corr = m->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
		const CUpti_ActivityMemoryPool3 *m = (const void *)r;
		*t = (int64_t)m->timestamp;
		*corr = m->correlationId;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_OVERHEAD: {
		const CUpti_ActivityOverhead3 *o = (const void *)r;
		*t = (int64_t)o->start;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MARKER: {
		const CUpti_ActivityMarker2 *m = (const void *)r;
		*t = (int64_t)m->timestamp;
		return 1;
	}
	case CUPTI_ACTIVITY_KIND_MARKER_DATA:
		return 1;
	default: /* DEVICE, CONTEXT, STREAM, NAME, and kinds we do not record */
		return 0;
	}
}

static int is_api(const CUpti_Activity *r)
{
	return r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER;
}

static int64_t place_api(struct cuptrace_wfilter *f, const CUpti_Activity *r)
{
	int64_t t;
	uint32_t corr;
	cuptrace_wrecord_place(r, &t, &corr);
	uint64_t w = window_at(f, t);
	if (corr) {
		uint64_t *v = cuptrace_u64map_put(&f->corr, corr, NULL);
		if (v)
			*v = w ? w : DROPPED;
	}
	return (int64_t)w;
}

static int64_t place_marker(struct cuptrace_wfilter *f, const CUpti_Activity *r)
{
	if (r->kind == CUPTI_ACTIVITY_KIND_MARKER_DATA) {
		const CUpti_ActivityMarkerData2 *d = (const void *)r;
		uint64_t *v = cuptrace_u64map_get(&f->marker, d->id);
		return v ? (int64_t)*v : CUPTRACE_WF_DROP;
	}
	const CUpti_ActivityMarker2 *m = (const void *)r;
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
		/* A range whose START was kept is kept whole, however late it ends. */
		uint64_t *v = cuptrace_u64map_get(&f->marker, m->id);
		int64_t w = v ? (int64_t)*v : CUPTRACE_WF_DROP;
		if (v)
			cuptrace_u64map_del(&f->marker, m->id);
		return w;
	}
	uint64_t w = window_at(f, (int64_t)m->timestamp);
	if (w && (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START)) {
		uint64_t *v = cuptrace_u64map_put(&f->marker, m->id, NULL);
		if (v)
			*v = w;
	}
	return (int64_t)w;
}

static int hold(struct cuptrace_wfilter *f, const CUpti_Activity *r, uint32_t size, uint32_t corr)
{
	if (f->nheld >= HELD_MAX)
		return -ENOSPC;
	void *p = cuptrace_grow(f->held, &f->capheld, f->nheld + 1, sizeof(*f->held));
	CUpti_Activity *copy = p ? malloc(size) : NULL;
	if (!copy)
		return -ENOMEM;
	f->held = p;
	memcpy(copy, r, size);
	f->held[f->nheld++] = (struct cuptrace_wheld){copy, size, corr};
	f->held_total++;
	return 0;
}

static int64_t by_time(struct cuptrace_wfilter *f, const CUpti_Activity *r)
{
	int64_t t;
	uint32_t corr;
	cuptrace_wrecord_place(r, &t, &corr);
	f->placed_by_time++;
	return t ? (int64_t)window_at(f, t) : CUPTRACE_WF_DROP;
}

static int64_t place_other(struct cuptrace_wfilter *f, const CUpti_Activity *r, uint32_t size)
{
	if (r->kind == CUPTI_ACTIVITY_KIND_MARKER || r->kind == CUPTI_ACTIVITY_KIND_MARKER_DATA)
		return place_marker(f, r);
	int64_t t;
	uint32_t corr;
	if (!cuptrace_wrecord_place(r, &t, &corr))
		return CUPTRACE_WF_ALL;
	if (!corr)
		return t ? (int64_t)window_at(f, t) : CUPTRACE_WF_DROP;
	uint64_t *v = cuptrace_u64map_get(&f->corr, corr);
	if (v)
		return *v == DROPPED ? CUPTRACE_WF_DROP : (int64_t)*v;
	if (hold(f, r, size, corr) == 0)
		return CUPTRACE_WF_HELD;
	return by_time(f, r);
}

static int out_push(struct cuptrace_wfilter *f, CUpti_Activity *rec, int64_t v)
{
	if (CUPTRACE_GROW(f->out, f->capout, f->nout + 1) ||
	    CUPTRACE_GROW(f->outv, f->capoutv, f->nout + 1))
		return -ENOMEM;
	f->out[f->nout] = rec;
	f->outv[f->nout++] = v;
	return 0;
}

/* Decides held records: by their API record where it is known now; or, once a window is final
 * (by_time_before: its close), those that ran by then and whose API record never came are
 * dropped (launched outside every window). */
static void release(struct cuptrace_wfilter *f, int64_t by_time_before)
{
	size_t keep = 0;
	for (size_t i = 0; i < f->nheld; i++) {
		struct cuptrace_wheld h = f->held[i];
		uint64_t *v = cuptrace_u64map_get(&f->corr, h.corr);
		int64_t verdict;
		if (v) {
			verdict = *v == DROPPED ? CUPTRACE_WF_DROP : (int64_t)*v;
		} else {
			int64_t t;
			uint32_t corr;
			cuptrace_wrecord_place(h.rec, &t, &corr);
			if (by_time_before == INT64_MIN || t > by_time_before) {
				f->held[keep++] = h;
				continue;
			}
			/* Its launch was never recorded: it came before the window opened (the
			 * API kinds were off), so it is not the window's, though it ran inside. */
			verdict = CUPTRACE_WF_DROP;
		}
		if (verdict > 0 && out_push(f, h.rec, verdict) == 0)
			continue;
		f->dropped++;
		free(h.rec);
	}
	f->nheld = keep;
}

int cuptrace_wfilter_batch(struct cuptrace_wfilter *f, const CUpti_Activity *const *recs,
                           const uint32_t *sizes, size_t n, int64_t *verdict)
{
	free_handed_out(f);
	int any_api = 0;
	for (size_t i = 0; i < n; i++)
		if (is_api(recs[i])) {
			verdict[i] = place_api(f, recs[i]);
			any_api = 1;
		}
	for (size_t i = 0; i < n; i++)
		if (!is_api(recs[i]))
			verdict[i] = place_other(f, recs[i], sizes[i]);
	if (any_api && f->nheld)
		release(f, INT64_MIN);
	return 0;
}

void cuptrace_wfilter_final(struct cuptrace_wfilter *f, uint64_t number)
{
	free_handed_out(f);
	struct cuptrace_wspan *s = span_of(f, number);
	if (!s)
		return;
	s->final = 1;
	/* Every record launched in the window has come: held ones whose API record never did
	 * are placed by their own time, if that is not past this window. */
	release(f, s->close);
	int all_final = 1;
	for (size_t i = 0; i < f->nspans; i++)
		all_final &= f->spans[i].final;
	/* Nothing can refer to these correlation ids any more (ids only grow). Ranges still open
	 * (a START kept) stay known. */
	if (all_final && !f->nheld) {
		cuptrace_u64map_free(&f->corr);
		cuptrace_u64map_init(&f->corr);
	}
}

size_t cuptrace_wfilter_released(struct cuptrace_wfilter *f, const CUpti_Activity *const **recs,
                                 const int64_t **verdicts)
{
	*recs = (const CUpti_Activity *const *)f->out;
	*verdicts = f->outv;
	return f->nout;
}
