/* Correlation: links each GPU activity and synchronization to the API call that caused it.
 *
 * Every GPU activity gets its own flow id (corr << 16 | k) and the API slice lists all of them,
 * so a launch-like API call whose GPU records have not arrived yet is held back (bounded).
 * Records come late and out of order: GPU work and syncs that arrive before their API record
 * wait in the correlation state. Called by convert_api.c and convert_gpu.c, which hand it data
 * and are never called back. */
#include "convert/conv_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Correlation states kept (72 bytes each: 4.7 MB, left as calloc's untouched zero pages until
 * used, and only the slots used are visited at the end), direct-mapped: id i lives in slot i mod
 * CORR_RING. CUPTI hands out ids in increasing order, one per API call, so a slot is reused
 * only by a call 65,536 ids later (a GPU record comes at most the GPU's queue depth of launches,
 * a few thousand, after its API call's), and consecutive calls use neighbouring slots, which the
 * hardware fetches ahead: a hashed index over a ring (two cache misses a lookup) was an eighth
 * of the converter's time. */
#define CORR_RING (1u << 16)
#define CORR_MASK (CORR_RING - 1)

static struct corr_state *corr_get(struct cuptrace_converter *c, uint32_t corr, int create);
static int emit_pending(struct cuptrace_converter *c, size_t idx, int forced);

static void corr_release(struct cuptrace_converter *c, struct corr_state *s)
{
	free(s->orphans);
	free(s->syncs);
	memset(s, 0, sizeof(*s));
	s->pending = -1;
}

/* A state given to another id: what it still holds goes as it is (its held API call written
 * without the flows still to come, its early GPU work counted as unlinked). */
static void corr_evict(struct cuptrace_converter *c, struct corr_state *s)
{
	if (s->pending >= 0)
		emit_pending(c, (size_t)s->pending, 1);
	c->counts.unlinked_gpu += s->norphans;
	c->counts.unlinked_evicted += s->norphans;
	corr_release(c, s);
}

/* The state of id corr (never 0), or NULL if there is none and !create. An id older than the
 * one that holds its slot now (over 65,536 ids late) gets c->corr_stray, a state of its own
 * that lasts until the next such id comes: its API call and GPU work are linked if they come
 * before that, else the call is written as it is and the work left unlinked. */
static struct corr_state *corr_get(struct cuptrace_converter *c, uint32_t corr, int create)
{
	struct corr_state *s = &c->corr[corr & CORR_MASK];
	if (s->corr == corr)
		return s;
	if (c->corr_stray.corr == corr) /* slots only go to newer ids: never both */
		return &c->corr_stray;
	if (!create)
		return NULL;
	if (s->corr && (int32_t)(corr - s->corr) < 0) {
		corr_evict(c, &c->corr_stray);
		c->corr_stray.corr = corr;
		return &c->corr_stray;
	}
	if (s->corr || s->api_seen || s->norphans)
		corr_evict(c, s); /* the id 65,536 before */
	s->corr = corr;
	s->pending = -1;
	return s;
}

/* Notes that s (a table slot or c->corr_stray) holds arrays, for finish and free to visit. */
static void corr_note_held(struct cuptrace_converter *c, const struct corr_state *s)
{
	if (s == &c->corr_stray)
		return; /* finish and free look at it anyway */
	size_t slot = (size_t)(s - c->corr);
	c->corr_held[slot / 64] |= 1ull << (slot % 64);
}

/* Room for one more element in an array counted in uint32_t (corr_state and pending_api keep
 * their counts small): 0 or -ENOMEM. */
#define GROW_U32(arr, n, cap) grow_u32(&(arr), &(n), &(cap), sizeof(*(arr)))
static int grow_u32(void *arrp, const uint32_t *n, uint32_t *cap, size_t size)
{
	size_t c = *cap;
	if (*n == UINT32_MAX || cuptrace_grow_to(arrp, &c, (size_t)*n + 1, size))
		return -ENOMEM;
	*cap = c > UINT32_MAX ? UINT32_MAX : (uint32_t)c;
	return 0;
}

static int push_u64(uint64_t **v, uint32_t *n, uint32_t *cap, uint64_t x)
{
	if (grow_u32(v, n, cap, sizeof(**v)))
		return -ENOMEM;
	(*v)[(*n)++] = x;
	return 0;
}

/* ---- API calls: drawn, or held back ---- */

static const uint64_t *pending_flows(const struct pending_api *p)
{
	return p->flows ? p->flows : &p->flow1;
}

/* Adds a flow to a held-back call without a malloc for its first (struct pending_api). */
static int pending_add_flow(struct pending_api *p, uint64_t flow)
{
	if (!p->nflows && !p->flows) {
		p->flow1 = flow;
		p->nflows = 1;
		return 0;
	}
	if (!p->flows) {
		uint32_t n = 0;
		if (push_u64(&p->flows, &n, &p->flows_cap, p->flow1))
			return -ENOMEM;
	}
	return push_u64(&p->flows, &p->nflows, &p->flows_cap, flow);
}

static int emit_api(struct cuptrace_converter *c, uint64_t track, int64_t ts, int64_t dur,
                    uint32_t name_id, uint32_t cat_id, uint32_t corr, int32_t ret,
                    const uint64_t *flows, size_t nflows)
{
	size_t na = 0;
	if (ret) {
		c->args[na++] = (struct cuptrace_arg){
		    .key = "return_value", .type = CUPTRACE_ARG_INT, .v.i = ret};
	}
	struct cuptrace_slice s = {
	    .track_uuid = track,
	    .ts = ts,
	    .dur = dur,
	    .name = conv_str(c, name_id),
	    .category = conv_str(c, cat_id),
	    .correlation_id = corr,
	    .args = c->args,
	    .nargs = na,
	    .flows_out = flows,
	    .nflows_out = nflows,
	};
	return conv_emit_slice(c, &s);
}

/* Moves a held-back call out of the table, to be written as it is: no flow is added any more. */
static void take_pending(struct cuptrace_converter *c, size_t idx, struct pending_api *out)
{
	struct pending_api *p = &c->pending[idx];
	struct corr_state *st = corr_get(c, p->corr, 0);
	if (st) {
		st->pending = -1;
		st->api_emitted = 1;
	}
	if (p->expect < 0 && p->gpos) {
		/* Out of the list of graph launches: the last entry takes its place. */
		uint32_t last = c->gpend[--c->ngpend];
		c->gpend[p->gpos - 1] = last;
		c->pending[last].gpos = p->gpos;
	}
	*out = *p;
	memset(p, 0, sizeof(*p));
	c->npending--;
	c->pending_free[c->npending_free++] = idx;
}

static int emit_pending(struct cuptrace_converter *c, size_t idx, int forced)
{
	struct pending_api *p = &c->pending[idx], t;
	if (!p->used)
		return 0;
	if (forced && (p->expect < 0 ? p->nflows == 0 : p->nflows < (uint32_t)p->expect))
		c->counts.pending_forced++;
	take_pending(c, idx, &t);
	return conv_corr_write_taken(c, &t);
}

static int hold_api(struct cuptrace_converter *c, struct corr_state *st, const struct api_call *a)
{
	if (!c->npending_free && c->pending_fresh == c->pending_cap) {
		/* Full: write the oldest-looking entry (lowest correlation id) as it is. */
		size_t victim = 0;
		for (size_t i = 1; i < c->pending_cap; i++)
			if (c->pending[i].corr < c->pending[victim].corr)
				victim = i;
		emit_pending(c, victim, 1);
	}
	/* A released entry, else one never used: the order in which a stack of every index
	 * filled at the start would hand them out, without writing that stack up front. */
	size_t idx = c->npending_free ? c->pending_free[--c->npending_free] : c->pending_fresh++;
	struct pending_api *p = &c->pending[idx];
	*p = (struct pending_api){
	    .used = 1,
	    .corr = st->corr,
	    .expect = a->expect,
	    .batch_added = c->batch,
	    .track = a->track,
	    .ts = a->ts,
	    .dur = a->dur,
	    .name_id = a->name_id,
	    .cat_id = a->cat_id,
	    .ret = a->ret,
	};
	for (uint32_t i = 0; i < st->norphans; i++)
		pending_add_flow(p, st->orphans[i].flow);
	st->norphans = 0;
	st->pending = (int32_t)idx;
	c->npending++;
	if (p->expect < 0) {
		/* Out of memory, the call is still held: written at the end, or when its
		 * correlation slot is reused. */
		if (CUPTRACE_GROW(c->gpend, c->gpend_cap, c->ngpend + 1))
			return c->err = -ENOMEM;
		c->gpend[c->ngpend++] = (uint32_t)idx;
		p->gpos = (uint32_t)c->ngpend;
	}
	return 0;
}

/* ---- synchronization: a child of the API call that waited, on its thread ---- */

static int emit_sync_child(struct cuptrace_converter *c, struct corr_state *st,
                           const struct orphan_sync *o)
{
	/* Clamp into the API call: the sync record's times come from the same clock but a
	 * separate reading, and the child must nest. */
	int64_t ts = o->ts < st->api_ts ? st->api_ts : o->ts;
	int64_t end = o->end > st->api_end ? st->api_end : o->end;
	if (end < ts)
		end = ts;
	size_t na = 0;
	struct cuptrace_arg *A = c->args;
	if (o->stream != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		A[na++] = (struct cuptrace_arg){
		    .key = "stream", .type = CUPTRACE_ARG_UINT, .v.u = o->stream};
	if (o->event != CUPTI_SYNCHRONIZATION_INVALID_VALUE)
		A[na++] = (struct cuptrace_arg){
		    .key = "event", .type = CUPTRACE_ARG_UINT, .v.u = o->event};
	struct cuptrace_slice s = {
	    .track_uuid = st->api_track,
	    .ts = ts,
	    .dur = end - ts,
	    .name = conv_sync_name(o->type),
	    .category = "sync",
	    .correlation_id = st->corr,
	    .args = A,
	    .nargs = na,
	};
	c->counts.syncs++;
	return conv_emit_slice(c, &s);
}

/* ---- what convert_api.c and convert_gpu.c hand over ---- */

/* Drops the orphans that were over before the call with their id began (st->api_ts): not
 * its work (see conv_corr_flow_in). Their slices keep a flow id that no call names, which draws
 * no arrow. */
static void drop_early_orphans(struct cuptrace_converter *c, struct corr_state *st)
{
	uint32_t k = 0;
	for (uint32_t i = 0; i < st->norphans; i++) {
		if (st->orphans[i].end < st->api_ts) {
			c->counts.unlinked_gpu++;
			c->counts.unlinked_before_call++;
			c->counts.flows--;
		} else {
			st->orphans[k++] = st->orphans[i];
		}
	}
	st->norphans = k;
}

int conv_corr_api(struct cuptrace_converter *c, const struct api_call *a)
{
	if (!a->corr)
		return emit_api(c, a->track, a->ts, a->dur, a->name_id, a->cat_id, 0, a->ret, NULL,
		                0);
	struct corr_state *st = corr_get(c, a->corr, 1);
	if (!st)
		return c->err;
	st->api_seen = 1;
	st->api_track = a->track;
	st->api_ts = a->ts;
	st->api_end = a->ts + a->dur;
	if (st->norphans)
		drop_early_orphans(c, st);
	int r;
	if (a->ret == 0 && a->expect != 0 &&
	    (a->expect < 0 || st->norphans < (uint32_t)a->expect)) {
		r = hold_api(c, st, a);
	} else {
		if (st->norphans && CUPTRACE_GROW(c->oflows, c->oflows_cap, st->norphans))
			return c->err = -ENOMEM;
		for (uint32_t i = 0; i < st->norphans; i++)
			c->oflows[i] = st->orphans[i].flow;
		r = emit_api(c, a->track, a->ts, a->dur, a->name_id, a->cat_id, a->corr, a->ret,
		             c->oflows, st->norphans);
		st->norphans = 0;
		st->api_emitted = 1;
	}
	for (uint32_t i = 0; i < st->nsyncs; i++)
		emit_sync_child(c, st, &st->syncs[i]);
	st->nsyncs = 0;
	return r;
}

int conv_corr_write_taken(struct cuptrace_converter *c, struct pending_api *p)
{
	int r = p->used ? emit_api(c, p->track, p->ts, p->dur, p->name_id, p->cat_id, p->corr,
	                           p->ret, pending_flows(p), p->nflows)
	                : c->err;
	free(p->flows);
	memset(p, 0, sizeof(*p));
	return r;
}

uint64_t conv_corr_flow_in(struct cuptrace_converter *c, uint32_t corr, int64_t gpu_end,
                           struct pending_api *done)
{
	if (!corr)
		return 0;
	struct corr_state *st = corr_get(c, corr, 1);
	if (!st)
		return 0;
	if (st->api_seen && gpu_end < st->api_ts) {
		/* Work that was over before its call began was not launched by it. CUPTI gives
		 * such ids while a finish turns its kinds off under a program that launches on
		 * (SIGINT, H100: three kernels on one stream, 5 us apart, all with the id of a
		 * launch that began 96 us after they ended; that launch's own kernel, and those of
		 * the calls that launched them, never came). A flow would point back in time and
		 * take the call's one expected arrow, so the work stays unlinked. Work that comes
		 * before its call is checked when the call comes (drop_early_orphans). */
		c->counts.unlinked_gpu++;
		c->counts.unlinked_before_call++;
		return 0;
	}
	uint64_t flow = ((uint64_t)corr << 16) | st->nflows;
	if (st->nflows < 0xFFFF)
		st->nflows++;
	c->counts.flows++;
	if (st->pending >= 0) {
		struct pending_api *p = &c->pending[st->pending];
		if (pending_add_flow(p, flow))
			c->err = -ENOMEM;
		p->batch_added = c->batch;
		if (p->expect > 0 && p->nflows >= (uint32_t)p->expect)
			take_pending(c, (size_t)st->pending, done);
	} else if (st->api_emitted) {
		/* The API slice is already written: more GPU work than expected (e.g. a copy
		 * split in two). No arrow can be added any more. */
		c->counts.unlinked_gpu++;
		c->counts.unlinked_late++;
		c->counts.flows--;
		flow = 0;
	} else if (GROW_U32(st->orphans, st->norphans, st->orphans_cap)) {
		c->err = -ENOMEM;
	} else {
		st->orphans[st->norphans++] = (struct orphan){.flow = flow, .end = gpu_end};
		corr_note_held(c, st);
	}
	return flow;
}

int conv_corr_sync(struct cuptrace_converter *c, uint32_t corr, const struct orphan_sync *o)
{
	struct corr_state *st = corr_get(c, corr, 1);
	if (!st)
		return c->err;
	if (st->api_seen)
		return emit_sync_child(c, st, o);
	if (GROW_U32(st->syncs, st->nsyncs, st->syncs_cap))
		return c->err = -ENOMEM;
	corr_note_held(c, st);
	st->syncs[st->nsyncs++] = *o;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

int conv_corr_batch_end(struct cuptrace_converter *c)
{
	/* Graph launches: their node count is unknown, so an API call with GPU work is written
	 * once a later batch brought it nothing more. Only they are looked at, through their
	 * list: a scan of the whole table after each CUPTI buffer (5 MB) cost more than a small
	 * buffer's records. Written in table order, as the scan wrote them. */
	size_t n = 0;
	if (!c->ngpend || c->err)
		return c->err;
	if (CUPTRACE_GROW(c->gcand, c->gcand_cap, c->ngpend))
		return c->err = -ENOMEM;
	for (size_t i = 0; i < c->ngpend; i++) {
		const struct pending_api *p = &c->pending[c->gpend[i]];
		if (p->used && p->nflows && p->batch_added < c->batch)
			c->gcand[n++] = c->gpend[i];
	}
	qsort(c->gcand, n, sizeof(*c->gcand), cmp_u32);
	for (size_t i = 0; i < n && !c->err; i++)
		emit_pending(c, c->gcand[i], 0);
	return c->err;
}

/* Calls fn on every slot that ever held orphans or syncs, in slot order: the only ones with
 * anything to count or free (orphans are counted while held, so a slot without arrays has
 * none). Once a program has made 65,536 calls every slot has had an id, and visiting them all
 * read the whole 4.7 MB table twice on the exit path, with 131,072 calls to free(NULL). */
static void corr_each_held(struct cuptrace_converter *c,
                           void (*fn)(struct cuptrace_converter *, struct corr_state *))
{
	for (size_t w = 0; w < c->corr_cap / 64; w++)
		for (uint64_t bits = c->corr_held[w]; bits; bits &= bits - 1)
			fn(c, &c->corr[w * 64 + (size_t)__builtin_ctzll(bits)]);
}

static void count_orphans(struct cuptrace_converter *c, struct corr_state *s)
{
	c->counts.unlinked_gpu += s->norphans;
	c->counts.unlinked_at_finish += s->norphans;
}

static void free_slot(struct cuptrace_converter *c, struct corr_state *s)
{
	(void)c;
	free(s->orphans);
	free(s->syncs);
}

int conv_corr_finish(struct cuptrace_converter *c)
{
	/* In table order, as before; the walk ends with the last call still held (the table's
	 * used part can be a few thousand entries, cold by now). */
	for (size_t i = 0; i < c->pending_fresh && c->npending; i++)
		if (c->pending[i].used)
			emit_pending(c, i, 1);
	corr_each_held(c, count_orphans);
	c->counts.unlinked_gpu += c->corr_stray.norphans;
	c->counts.unlinked_at_finish += c->corr_stray.norphans;
	return c->err;
}

/* ---- life cycle ---- */

/* Nothing here is written at the start: the tables (about 10 MB) stay calloc's zero pages
 * until ids use them, and finish and free visit only the slots that held arrays. Writing them up
 * front and walking them at the end cost every converter about 3 ms, on the traced program's start
 * and exit paths (a one-launch conversion took 3 to 5 ms, most of it in these three functions). A
 * slot's pending field is only read once corr_get has given it an id, which sets it. */
int conv_corr_init(struct cuptrace_converter *c)
{
	c->corr_cap = CORR_RING;
	c->corr = calloc(c->corr_cap, sizeof(*c->corr));
	c->corr_held = calloc(c->corr_cap / 64, sizeof(uint64_t));
	c->pending_cap = c->opts.max_pending;
	c->pending = calloc(c->pending_cap, sizeof(*c->pending));
	c->pending_free = malloc(c->pending_cap * sizeof(size_t));
	if (!c->corr || !c->corr_held || !c->pending || !c->pending_free)
		return -ENOMEM;
	c->corr_stray.pending = -1;
	c->npending_free = 0;
	c->pending_fresh = 0;
	return 0;
}

void conv_corr_free(struct cuptrace_converter *c)
{
	if (c->corr && c->corr_held)
		corr_each_held(c, free_slot);
	corr_release(c, &c->corr_stray);
	/* Only a held call owns flows (a taken one is cleared): none are left after a finish. */
	if (c->pending && c->npending)
		for (size_t i = 0; i < c->pending_fresh; i++)
			free(c->pending[i].flows);
	free(c->corr);
	free(c->corr_held);
	free(c->pending);
	free(c->pending_free);
	free(c->gpend);
	free(c->gcand);
	free(c->oflows);
}
