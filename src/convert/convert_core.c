/* What every record family uses and that calls no family: interned strings, uuids, relative
 * time, the process, thread and GPU tracks, lanes, slice emission and the trace's metadata. */
#include "convert/conv_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t conv_uuid(const struct cuptrace_converter *c, enum uuid_type t, uint64_t idx)
{
	return ((uint64_t)(uint32_t)c->pid << 40) | ((uint64_t)t << 36) | (idx & 0xFFFFFFFFFull);
}

uint32_t conv_intern(struct cuptrace_converter *c, const char *s)
{
	uint32_t id = cuptrace_strtab_intern(&c->strs, s, strlen(s));
	if (!id && !c->err)
		c->err = -ENOMEM;
	return id;
}

const char *conv_str(const struct cuptrace_converter *c, uint32_t id)
{
	const char *s = cuptrace_strtab_str(&c->strs, id);
	return s ? s : "?";
}

const char *conv_resolve(struct cuptrace_converter *c, const char *ptr)
{
	if (!ptr)
		return NULL;
	return c->resolve ? c->resolve(c->resolve_ctx, ptr) : ptr;
}

int64_t conv_rel(struct cuptrace_converter *c, uint64_t ts)
{
	/* Nothing CUPTI records predates the start timestamp; clamp rather than emit a
	 * negative time, which Perfetto would drop. */
	return (int64_t)ts > c->start ? (int64_t)ts - c->start : 0;
}

static int declare(struct cuptrace_converter *c, const struct cuptrace_track *t)
{
	if (c->err)
		return c->err;
	int r = c->sink->ops->track(c->sink, t);
	if (r && !c->err)
		c->err = r;
	return c->err;
}

int conv_emit_slice(struct cuptrace_converter *c, const struct cuptrace_slice *s)
{
	if (c->err)
		return c->err;
	conv_view_note(c, s);
	uint64_t stack = c->nstk ? conv_stacks_for(c, s->correlation_id) : 0;
	if (stack && !s->stack_id) {
		struct cuptrace_slice t = *s;
		t.stack_id = stack;
		int r = c->err ? c->err : c->sink->ops->slice(c->sink, &t);
		if (r && !c->err)
			c->err = r;
		return c->err;
	}
	int r = c->sink->ops->slice(c->sink, s);
	if (r && !c->err)
		c->err = r;
	return c->err;
}

void conv_meta_set(struct cuptrace_converter *c, const char *key, const char *s, int64_t i,
                   int is_int)
{
	for (size_t k = 0; k < c->nmeta; k++) {
		if (!strcmp(c->meta[k].key, key)) {
			c->meta[k].is_int = is_int;
			c->meta[k].i = i;
			c->meta[k].s = is_int ? NULL : conv_str(c, conv_intern(c, s));
			return;
		}
	}
	if (CUPTRACE_GROW(c->meta, c->meta_cap, c->nmeta + 1)) {
		c->err = -ENOMEM;
		return;
	}
	c->meta[c->nmeta++] = (struct cuptrace_meta){
	    .key = conv_str(c, conv_intern(c, key)),
	    .is_int = is_int,
	    .i = i,
	    .s = is_int ? NULL : conv_str(c, conv_intern(c, s)),
	};
}

int conv_thread_name(struct cuptrace_converter *c, int64_t tid, const char *name)
{
	uint64_t *slot = cuptrace_u64map_put(&c->thread_names, (uint64_t)tid, NULL);
	if (!slot)
		return c->err = -ENOMEM;
	*slot = conv_intern(c, name);
	return 0;
}

/* Declared on the thread's first record: a name given later does not rename it. */
uint64_t conv_thread_track(struct cuptrace_converter *c, int64_t tid)
{
	int created;
	uint64_t *slot = cuptrace_u64map_put(&c->threads, (uint64_t)tid, &created);
	if (!slot) {
		c->err = -ENOMEM;
		return 0;
	}
	if (!created)
		return *slot;
	*slot = conv_uuid(c, U_THREAD, (uint64_t)tid);
	uint64_t *nm = cuptrace_u64map_get(&c->thread_names, (uint64_t)tid);
	char buf[48];
	snprintf(buf, sizeof(buf), "thread %" PRId64, tid);
	struct cuptrace_track t = {
	    .uuid = *slot,
	    .kind = CUPTRACE_TRACK_THREAD,
	    .parent_uuid = c->process_uuid,
	    .pid = c->pid,
	    .tid = tid,
	    .name = nm ? conv_str(c, (uint32_t)*nm) : buf,
	    .sort_rank = tid == c->pid ? 0 : 1,
	};
	declare(c, &t);
	return t.uuid;
}

void conv_gpu_used(struct cuptrace_converter *c, uint32_t dev)
{
	if (dev < 64) /* a device id past the mask names no GPU a process can have */
		c->gpus_used |= (uint64_t)1 << dev;
}

int conv_declare_gpu(struct cuptrace_converter *c, uint32_t dev)
{
	struct gpu *g = &c->gpus[dev % MAX_GPUS];
	if (g->declared)
		return 0;
	g->declared = 1;
	g->uuid = conv_uuid(c, U_GPU, dev);
	char name[200];
	if (g->known)
		snprintf(name, sizeof(name), "GPU %u: %s", dev, g->name);
	else
		snprintf(name, sizeof(name), "GPU %u", dev);
	struct cuptrace_track t = {
	    .uuid = g->uuid,
	    .kind = CUPTRACE_TRACK_GROUP,
	    .parent_uuid = c->process_uuid,
	    .pid = c->pid,
	    .name = name,
	    .sort_rank = 100 + (int32_t)dev, /* after the host threads */
	};
	return declare(c, &t);
}

/* First lane whose last slice ended at or before ts; a new lane if none. When every lane is
 * taken, the least-busy one is used and the slice is clamped to start after it (counted). */
uint64_t conv_lane_assign(struct cuptrace_converter *c, struct lane *lanes, size_t *nlanes,
                          int64_t *ts, int64_t *dur, const char *name, uint64_t parent,
                          int32_t rank)
{
	for (size_t i = 0; i < *nlanes; i++) {
		if (lanes[i].last_end <= *ts) {
			lanes[i].last_end = *ts + *dur;
			return lanes[i].uuid;
		}
	}
	if (*nlanes < MAX_LANES) {
		struct lane *l = &lanes[(*nlanes)++];
		l->uuid = conv_uuid(c, U_LANE, c->next_lane_idx++);
		l->last_end = *ts + *dur;
		struct cuptrace_track t = {
		    .uuid = l->uuid,
		    .kind = CUPTRACE_TRACK_SLICES,
		    .parent_uuid = parent,
		    .pid = c->pid,
		    .name = name,
		    .sort_rank = rank,
		    .lane = (uint32_t)(*nlanes - 1),
		};
		if (*nlanes > 1)
			c->counts.lanes++;
		declare(c, &t);
		return l->uuid;
	}
	size_t best = 0;
	for (size_t i = 1; i < *nlanes; i++)
		if (lanes[i].last_end < lanes[best].last_end)
			best = i;
	int64_t end = *ts + *dur;
	*ts = lanes[best].last_end;
	*dur = end > *ts ? end - *ts : 0;
	lanes[best].last_end = *ts + *dur;
	return lanes[best].uuid;
}

void conv_core_init(struct cuptrace_converter *c)
{
	cuptrace_strtab_init(&c->strs);
	cuptrace_u64map_init(&c->thread_names);
	cuptrace_u64map_init(&c->threads);
	cuptrace_u64map_init(&c->stream_names);
}

int conv_core_begin(struct cuptrace_converter *c, const struct cuptrace_trace_info *info)
{
	for (size_t i = 0; i < info->nmeta; i++)
		conv_meta_set(c, info->meta[i].key, info->meta[i].s, info->meta[i].i,
		              info->meta[i].is_int);
	c->err = c->sink->ops->begin(c->sink, info);
	c->process_uuid = conv_uuid(c, U_PROCESS, 0);
	struct cuptrace_track p = {
	    .uuid = c->process_uuid,
	    .kind = CUPTRACE_TRACK_PROCESS,
	    .pid = c->pid,
	    .name = info->process_name ? info->process_name : "process",
	};
	return declare(c, &p);
}

void conv_core_free(struct cuptrace_converter *c)
{
	free(c->meta);
	cuptrace_strtab_free(&c->strs);
	cuptrace_u64map_free(&c->thread_names);
	cuptrace_u64map_free(&c->threads);
	cuptrace_u64map_free(&c->stream_names);
}
