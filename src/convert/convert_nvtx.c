/* NVTX marks and ranges (push/pop and start/end), with their color, category and payload.
 *
 * CUPTI reports push/pop and start/end ranges alike (a START and an END record sharing an id).
 * A range whose END closes the innermost open range of the thread it started on nests like a
 * push/pop range and goes on that thread's track; any other (crossing threads, or overlapping)
 * goes on the process's "NVTX ranges" lanes, where overlap is allowed. */
#include "convert/conv_state.h"
#include "convert/opname.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-thread stack of open range ids (few threads use NVTX: a linear search is enough). */
static struct tstack *thread_stack(struct cuptrace_converter *c, int64_t tid)
{
	for (size_t i = 0; i < c->nstacks; i++)
		if (c->stacks[i].tid == tid)
			return &c->stacks[i];
	if (CUPTRACE_GROW(c->stacks, c->stacks_cap, c->nstacks + 1))
		return NULL;
	c->stacks[c->nstacks] = (struct tstack){.tid = tid};
	return &c->stacks[c->nstacks++];
}

static void stack_remove(struct tstack *s, uint32_t id, int *was_top)
{
	*was_top = 0;
	for (size_t i = s->n; i-- > 0;) {
		if (s->ids[i] != id)
			continue;
		*was_top = i == s->n - 1;
		memmove(&s->ids[i], &s->ids[i + 1], (s->n - i - 1) * sizeof(uint32_t));
		s->n--;
		return;
	}
}

static struct nvtx_range *range_slot(struct cuptrace_converter *c, uint32_t id, int create)
{
	uint64_t *slot = cuptrace_u64map_get(&c->nvtx_open, id);
	if (slot)
		return &c->nvtx[*slot - 1];
	if (!create)
		return NULL;
	size_t i;
	for (i = 0; i < c->nnvtx && c->nvtx[i].used; i++)
		;
	if (i == c->nnvtx) {
		if (CUPTRACE_GROW(c->nvtx, c->nvtx_cap, c->nnvtx + 1))
			return NULL;
		c->nnvtx++;
	}
	memset(&c->nvtx[i], 0, sizeof(c->nvtx[i]));
	c->nvtx[i].used = 1;
	c->nvtx[i].id = id;
	uint64_t *ns = cuptrace_u64map_put(&c->nvtx_open, id, NULL);
	if (!ns)
		return NULL;
	*ns = i + 1;
	return &c->nvtx[i];
}

static size_t nvtx_args(struct cuptrace_converter *c, uint32_t id, char *colorbuf, size_t n)
{
	uint64_t *slot = cuptrace_u64map_get(&c->nvtx_data, id);
	size_t na = 0;
	if (!slot)
		return 0;
	struct mdata *d = &c->mdatas[*slot - 1];
	if (d->has_color) {
		snprintf(colorbuf, n, "#%06x", d->color & 0xFFFFFFu);
		c->args[na++] = (struct cuptrace_arg){
		    .key = "color", .type = CUPTRACE_ARG_STRING, .v.s = colorbuf};
	}
	if (d->category)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "nvtx_category", .type = CUPTRACE_ARG_UINT, .v.u = d->category};
	/* CUPTI reports a payload of UINT64 0 for attributes without one: a zero payload is not
	 * shown. */
	if (d->payload_kind == CUPTI_METRIC_VALUE_KIND_DOUBLE && d->payload.d != 0)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "payload", .type = CUPTRACE_ARG_DOUBLE, .v.d = d->payload.d};
	else if (d->payload_kind == CUPTI_METRIC_VALUE_KIND_UINT64 && d->payload.u)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "payload", .type = CUPTRACE_ARG_UINT, .v.u = d->payload.u};
	else if (d->payload_kind == CUPTI_METRIC_VALUE_KIND_INT64 && d->payload.i)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "payload", .type = CUPTRACE_ARG_INT, .v.i = d->payload.i};
	return na;
}

static uint64_t async_track(struct cuptrace_converter *c, int64_t *ts, int64_t *dur)
{
	return conv_lane_assign(c, c->nvtx_lanes, &c->nnvtx_lanes, ts, dur, "NVTX ranges",
	                        c->process_uuid, 50);
}

static void range_release(struct nvtx_range *rg)
{
	free(rg->sizes);
	free(rg->inputs);
	rg->sizes = rg->inputs = NULL;
	rg->used = 0;
}

static int emit_range(struct cuptrace_converter *c, struct nvtx_range *rg, uint32_t id,
                      uint64_t track, int64_t start, int64_t dur)
{
	char color[16];
	size_t na = nvtx_args(c, id, color, sizeof(color));
	if (rg->has_seq)
		c->args[na++] =
		    (struct cuptrace_arg){.key = "seq", .type = CUPTRACE_ARG_INT, .v.i = rg->seq};
	/* An op id only means something next to the input op ids that refer to it. */
	if (rg->has_op_id && rg->inputs)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "op_id", .type = CUPTRACE_ARG_INT, .v.i = rg->op_id};
	if (rg->sizes)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "input_shapes", .type = CUPTRACE_ARG_STRING, .v.s = rg->sizes};
	if (rg->inputs)
		c->args[na++] = (struct cuptrace_arg){
		    .key = "input_op_ids", .type = CUPTRACE_ARG_STRING, .v.s = rg->inputs};
	struct cuptrace_slice sl = {
	    .track_uuid = track,
	    .ts = start,
	    .dur = dur,
	    .name = conv_str(c, rg->name_id),
	    .category = conv_str(c, rg->domain_id),
	    .args = c->args,
	    .nargs = na,
	};
	cuptrace_u64map_del(&c->nvtx_open, id);
	cuptrace_u64map_del(&c->nvtx_data, id);
	int r = conv_emit_slice(c, &sl);
	range_release(rg);
	return r;
}

/* A range's name, cleaned of PyTorch's op suffixes (kept as arguments), interned. */
static uint32_t range_name(struct cuptrace_converter *c, struct nvtx_range *rg, const char *name)
{
	struct cuptrace_opname op;
	if (!name)
		return conv_intern(c, "(range)");
	if (!cuptrace_opname_parse(name, &op))
		return conv_intern(c, name);
	c->counts.pytorch_ops++;
	char buf[256];
	char *clean = op.name_len < sizeof(buf) ? buf : malloc(op.name_len + 1);
	if (!clean)
		return conv_intern(c, name);
	memcpy(clean, name, op.name_len);
	clean[op.name_len] = 0;
	uint32_t id = conv_intern(c, clean);
	if (clean != buf)
		free(clean);
	rg->has_seq = op.has_seq;
	rg->seq = op.seq;
	rg->has_op_id = op.has_op_id;
	rg->op_id = op.op_id;
	if (op.sizes)
		rg->sizes = strndup(op.sizes, op.sizes_len);
	if (op.input_op_ids)
		rg->inputs = strndup(op.input_op_ids, op.input_op_ids_len);
	return id;
}

/* The name a mark or range is drawn with (NULL: none); a range's is then cleaned of PyTorch's
 * op suffixes (range_name). The result is used before the next marker is handled. */
static const char *marker_name(struct cuptrace_converter *c, const CUpti_ActivityMarker2 *m)
{
	return conv_resolve(c, m->name);
}

int conv_marker(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityMarker2 *m = (const CUpti_ActivityMarker2 *)r;
	int64_t tid =
	    m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ? (int64_t)m->objectId.pt.threadId : 0;
	if (!m->timestamp)
		return 0;
	int64_t ts = conv_rel(c, m->timestamp);
	const char *name = marker_name(c, m);
	const char *domain = conv_resolve(c, m->domain);
	char color[16];
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
		size_t na = nvtx_args(c, m->id, color, sizeof(color));
		uint64_t track = tid ? conv_thread_track(c, tid) : c->process_uuid;
		struct cuptrace_instant e = {
		    .track_uuid = track,
		    .ts = ts,
		    .name = name ? name : "(mark)",
		    .category = domain ? domain : "nvtx",
		    .args = c->args,
		    .nargs = na,
		};
		int ret = c->err ? c->err : c->sink->ops->instant(c->sink, &e);
		if (ret && !c->err)
			c->err = ret;
		return c->err;
	}
	if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
		struct nvtx_range *rg = range_slot(c, m->id, 1);
		if (!rg)
			return c->err = -ENOMEM;
		int64_t end_ts = rg->end_seen ? rg->ts : -1;
		rg->ts = ts;
		rg->tid = tid;
		rg->name_id = range_name(c, rg, name);
		rg->domain_id = conv_intern(c, domain ? domain : "nvtx");
		if (end_ts >= 0) {
			/* Its END came first, from another thread's buffer: a range that crossed
			 * threads, so it goes on the NVTX ranges lanes. */
			int64_t start = ts, dur = end_ts > ts ? end_ts - ts : 0;
			return emit_range(c, rg, m->id, async_track(c, &start, &dur), start, dur);
		}
		struct tstack *s = tid ? thread_stack(c, tid) : NULL;
		if (s) {
			if (CUPTRACE_GROW(s->ids, s->cap, s->n + 1))
				return c->err = -ENOMEM;
			s->ids[s->n++] = m->id;
		}
		return 0;
	}
	if (!(m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END))
		return 0;
	struct nvtx_range *rg = range_slot(c, m->id, 0);
	if (!rg) {
		/* Before its START (another thread's buffer may come later), or the START was
		 * before tracing began: keep the END until the trace ends. */
		rg = range_slot(c, m->id, 1);
		if (!rg)
			return c->err = -ENOMEM;
		rg->end_seen = 1;
		rg->ts = ts;
		rg->tid = tid;
		return 0;
	}
	if (rg->end_seen)
		return 0; /* a second END for one id: ignore */
	int was_top = 0;
	struct tstack *s = rg->tid ? thread_stack(c, rg->tid) : NULL;
	if (s)
		stack_remove(s, m->id, &was_top);
	int64_t start = rg->ts, dur = ts > rg->ts ? ts - rg->ts : 0;
	uint64_t track;
	int startend = cuptrace_u64map_del(&c->nvtx_startend, m->id);
	if (was_top && rg->tid == tid && tid && !startend)
		track = conv_thread_track(c, tid);
	else
		track = async_track(c, &start, &dur);
	return emit_range(c, rg, m->id, track, start, dur);
}

int conv_nvtx_startend(struct cuptrace_converter *c, const uint64_t *ids, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!cuptrace_u64map_put(&c->nvtx_startend, ids[i], NULL))
			return c->err = -ENOMEM;
	c->counts.nvtx_startend += n;
	return 0;
}

int conv_marker_data(struct cuptrace_converter *c, const CUpti_Activity *r)
{
	const CUpti_ActivityMarkerData2 *d = (const CUpti_ActivityMarkerData2 *)r;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&c->nvtx_data, d->id, &created);
	if (!slot)
		return c->err = -ENOMEM;
	if (created) {
		if (CUPTRACE_GROW(c->mdatas, c->mdatas_cap, c->nmdatas + 1))
			return c->err = -ENOMEM;
		*slot = ++c->nmdatas;
	}
	struct mdata *md = &c->mdatas[*slot - 1];
	memset(md, 0, sizeof(*md));
	md->payload_kind = -1;
	md->has_color = !!(d->flags & CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB);
	md->color = d->color;
	md->category = d->category;
	switch (d->payloadKind) {
	case CUPTI_METRIC_VALUE_KIND_DOUBLE:
		md->payload_kind = CUPTI_METRIC_VALUE_KIND_DOUBLE;
		md->payload.d = d->payload.metricValueDouble;
		break;
	case CUPTI_METRIC_VALUE_KIND_UINT64:
		md->payload_kind = CUPTI_METRIC_VALUE_KIND_UINT64;
		md->payload.u = d->payload.metricValueUint64;
		break;
	case CUPTI_METRIC_VALUE_KIND_INT64:
		md->payload_kind = CUPTI_METRIC_VALUE_KIND_INT64;
		md->payload.i = d->payload.metricValueInt64;
		break;
	default:
		break;
	}
	return 0;
}

void conv_nvtx_init(struct cuptrace_converter *c)
{
	cuptrace_u64map_init(&c->nvtx_open);
	cuptrace_u64map_init(&c->nvtx_data);
	cuptrace_u64map_init(&c->nvtx_startend);
}

void conv_nvtx_free(struct cuptrace_converter *c)
{
	for (size_t i = 0; i < c->nstacks; i++)
		free(c->stacks[i].ids);
	free(c->stacks);
	free(c->mdatas);
	for (size_t i = 0; i < c->nnvtx; i++)
		range_release(&c->nvtx[i]);
	free(c->nvtx);
	cuptrace_u64map_free(&c->nvtx_open);
	cuptrace_u64map_free(&c->nvtx_data);
	cuptrace_u64map_free(&c->nvtx_startend);
}
