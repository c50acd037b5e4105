/* Side-by-side merge of several traces (merge.h), pass 2: replays each input through a sink that
 * renumbers its tracks, flows and stacks and shifts its times into the output, with the merged
 * metadata and each input's own info and summary (merge_meta.c). Pass 1 is merge_plan.c's. */
#include "merge/merge.h"
#include "merge/merge_meta.h"
#include "merge/merge_state.h"
#include "stats/stats.h"
#include "stats/stats_meta.h"
#include "common/saturate.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Process ranks: input i's k-th process gets (i + 1) * RANK_STEP + k, so inputs keep their order
 * and ranks are never 0 (trace_processor ignores a rank of 0). */
#define RANK_STEP 1024

struct shift_sink {
	struct cuptrace_sink base;
	struct cuptrace_sink *out; /* borrowed */
	struct merge_state *ms;
	struct cuptrace_merge_result *r;
	struct in_state *in;
	size_t index;
	int native;                  /* write_each with native clocks: no shift */
	uint32_t nprocs;             /* process tracks of this input so far */
	struct cuptrace_u64map uuid; /* input uuid -> output uuid */
	struct cuptrace_u64map flow; /* input flow id -> output flow id */
	uint64_t stack_base;         /* output stack id = input's + this: unique over inputs */
	uint64_t *ids;               /* scratch for one event's flow ids */
	size_t idcap;
	/* The input's own info and summary, as instants on its first process's main thread
	 * (meta_uuid; after the replay its first thread, first_thread, or the process track
	 * itself, proc_uuid, where it has none): the info when that thread is declared, the
	 * summary at max_ts (its latest time) after the replay. Not on the process track, where
	 * they would be a track of their own, empty but for them, in ui.perfetto.dev
	 * (src/format/TIMELINE.md). */
	struct merge_meta mm;
	uint64_t proc_uuid, meta_uuid, first_thread;
	int32_t proc_pid; /* the first process's pid in the output */
	int64_t max_ts;
	int err;
};

static int sh_fail(struct shift_sink *s, int err)
{
	if (!s->err)
		s->err = err;
	return s->err;
}

/* Output ids, handed out in first-seen order; 0 on allocation failure. */
static uint64_t map_id(struct cuptrace_u64map *map, uint64_t *next, uint64_t id)
{
	int created;
	uint64_t *v = cuptrace_u64map_put(map, id, &created);
	if (!v)
		return 0;
	if (created)
		*v = (*next)++;
	return *v;
}

static int32_t map_pid(const struct in_state *in, int32_t pid)
{
	for (size_t k = 0; k < in->npids; k++)
		if (in->pids[k] == pid)
			return in->newpids[k];
	return in->newpids[0];
}

/* Begin and metadata went into the output's begin() already (cuptrace_merge_write), under
 * "<label>: <key>"; they are kept here too for the input's own instants (merge_meta.h). */
static int sh_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	int err = s->err ? s->err : merge_meta_info(&s->mm, info);
	return err ? sh_fail(s, err) : 0;
}

static int sh_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	int err = s->err ? s->err : merge_meta_summary(&s->mm, m, n);
	return err ? sh_fail(s, err) : 0;
}

/* Where input time ts lands in the output. */
static int64_t shifted(const struct shift_sink *s, int64_t ts)
{
	return s->native ? ts : cuptrace_align_apply(&s->r->map, ts);
}

/* The input's info where the input begins (its earliest event), on meta_uuid, or on the
 * process track where the input's first process has no thread. */
static int write_info(struct shift_sink *s)
{
	int64_t at = s->r->has_events ? shifted(s, s->r->first_ts) : 0;
	return merge_meta_write(&s->mm, 0, s->r->label, s->r->path, s->out,
	                        s->meta_uuid ? s->meta_uuid : s->proc_uuid, at > 0 ? at : 0);
}

/* --ranks: a GPU group "GPU N: model" of rank R becomes "rank R · GPU N: model (GPU-xxxxxxxx)",
 * the GPU's UUID cut to its first group (the CUDA index N is the process's own: under
 * CUDA_VISIBLE_DEVICES every rank may have a "GPU 0"), with the whole UUID and the PCI bus id
 * in its description. *name and *desc are malloc'd (NULL: not a GPU group, the track keeps
 * its own); 0 or -ENOMEM. */
static int rank_gpu_group(const struct shift_sink *s, const struct cuptrace_track *t, char **name,
                          char **desc)
{
	char *end;
	*name = *desc = NULL;
	if (!s->ms->ranks || t->kind != CUPTRACE_TRACK_GROUP || !t->name ||
	    strncmp(t->name, "GPU ", 4))
		return 0;
	long d = strtol(t->name + 4, &end, 10);
	if (end == t->name + 4 || (*end && *end != ':') || d < 0 || d > INT32_MAX)
		return 0;
	const struct cuptrace_meta *um = stats_gpu_meta(&s->in->st, (int)d, "_uuid"),
	                           *pm = stats_gpu_meta(&s->in->st, (int)d, "_pci_bus_id");
	char uuid[128] = "", pci[64] = "", who[64], shrt[32] = "";
	if (um)
		stats_meta_str(um, uuid, sizeof(uuid));
	if (pm)
		stats_meta_str(pm, pci, sizeof(pci));
	if (*uuid) {
		const char *dash = strchr(uuid, '-');
		dash = dash ? strchr(dash + 1, '-') : NULL;
		snprintf(shrt, sizeof(shrt), "%.*s", dash ? (int)(dash - uuid) : (int)strlen(uuid),
		         uuid);
	}
	if (s->r->rank >= 0)
		snprintf(who, sizeof(who), "rank %d", s->r->rank);
	else
		snprintf(who, sizeof(who), "%.60s", s->r->label);
	size_t nl = strlen(who) + strlen(t->name) + strlen(shrt) + 16;
	size_t dl = strlen(s->r->label) + strlen(uuid) + strlen(pci) + 96 +
	            (t->description ? strlen(t->description) + 1 : 0);
	if (!(*name = malloc(nl)) || !(*desc = malloc(dl))) {
		free(*name);
		*name = NULL;
		return -ENOMEM;
	}
	snprintf(*name, nl, "%s \u00b7 %s%s%s%s", who, t->name, *shrt ? " (" : "", shrt,
	         *shrt ? ")" : "");
	snprintf(*desc, dl, "%s%s%s: CUDA device %ld of this rank's process%s%s%s%s",
	         t->description ? t->description : "", t->description ? "\n" : "", s->r->label, d,
	         *uuid ? ", UUID " : "", uuid, *pci ? ", PCI bus id " : "", pci);
	return 0;
}

static int sh_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	struct cuptrace_track d = *t;
	char *name = NULL, *desc = NULL;
	int err;

	if (s->err)
		return s->err;
	d.uuid = map_id(&s->uuid, &s->ms->next_uuid, t->uuid);
	d.parent_uuid = t->parent_uuid ? map_id(&s->uuid, &s->ms->next_uuid, t->parent_uuid) : 0;
	if (!d.uuid || (t->parent_uuid && !d.parent_uuid))
		return sh_fail(s, -ENOMEM);
	d.pid = map_pid(s->in, t->pid);
	if (t->kind == CUPTRACE_TRACK_PROCESS) {
		d.sort_rank = (int32_t)((s->index + 1) * RANK_STEP +
		                        (s->nprocs < RANK_STEP - 1 ? s->nprocs : RANK_STEP - 1));
		s->nprocs++;
		desc = t->description && *t->description
		           ? cuptrace_str_join3(t->description, "\n", s->in->note)
		           : strdup(s->in->note);
		if (!desc)
			return sh_fail(s, -ENOMEM);
		d.description = desc;
	}
	if (t->kind == CUPTRACE_TRACK_GROUP && (err = rank_gpu_group(s, t, &name, &desc)))
		return sh_fail(s, err);
	if (name) {
		d.name = name;
		d.description = desc;
	} else if (t->kind == CUPTRACE_TRACK_PROCESS ||
	           (!t->parent_uuid && t->kind != CUPTRACE_TRACK_THREAD)) {
		if (!(name = cuptrace_str_join3(s->r->label, ": ", t->name ? t->name : ""))) {
			free(desc);
			return sh_fail(s, -ENOMEM);
		}
		d.name = name;
	}
	err = s->out->ops->track(s->out, &d);
	free(name);
	free(desc);
	if (!err && t->kind == CUPTRACE_TRACK_PROCESS && !s->proc_uuid) {
		s->proc_uuid = d.uuid;
		s->proc_pid = d.pid;
	} else if (!err && t->kind == CUPTRACE_TRACK_THREAD && s->proc_uuid && !s->meta_uuid &&
	           d.pid == s->proc_pid) {
		if (!s->first_thread)
			s->first_thread = d.uuid;
		if (t->tid == t->pid) {
			s->meta_uuid = d.uuid;
			err = write_info(s);
		}
	}
	return err ? sh_fail(s, err) : 0;
}

/* The event's flow ids in the output's numbering, in s->ids from offset at. */
static const uint64_t *map_flows(struct shift_sink *s, const uint64_t *ids, size_t n, size_t at)
{
	if (!n)
		return NULL;
	uint64_t *b = cuptrace_grow(s->ids, &s->idcap, at + n, sizeof(*b));
	if (!b)
		return NULL;
	s->ids = b;
	for (size_t i = 0; i < n; i++)
		if (!(b[at + i] = map_id(&s->flow, &s->ms->next_flow, ids[i])))
			return NULL;
	return b + at;
}

/* Every event: its track in the output's numbering and its time shifted; 0 or the error. */
static int place(struct shift_sink *s, uint64_t *track, int64_t *ts)
{
	if (s->err)
		return s->err;
	if (!(*track = map_id(&s->uuid, &s->ms->next_uuid, *track)))
		return sh_fail(s, -ENOMEM);
	*ts = shifted(s, *ts);
	if (*ts > s->max_ts)
		s->max_ts = *ts;
	return 0;
}

static int sh_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	struct cuptrace_slice d = *e;
	int err = place(s, &d.track_uuid, &d.ts);

	if (err)
		return err;
	/* The end through the same map: with a drift, mapping the start and keeping the duration
	 * could push a child's end past its parent's. */
	if (!s->native && s->r->map.drift != 0) {
		int64_t end = cuptrace_align_apply(&s->r->map, sat_add(e->ts, e->dur));
		d.dur = end > d.ts ? end - d.ts : 0;
	}
	/* Both arrays live in s->ids: map the outs, then the ins after them, then point at both
	 * (the scratch may move while the ins are mapped). */
	if ((e->nflows_out && !map_flows(s, e->flows_out, e->nflows_out, 0)) ||
	    (e->nflows_in && !map_flows(s, e->flows_in, e->nflows_in, e->nflows_out)))
		return sh_fail(s, -ENOMEM);
	d.flows_out = e->nflows_out ? s->ids : NULL;
	d.flows_in = e->nflows_in ? s->ids + e->nflows_out : NULL;
	d.stack_id = e->stack_id ? e->stack_id + s->stack_base : 0;
	if (sat_add(d.ts, d.dur) > s->max_ts)
		s->max_ts = sat_add(d.ts, d.dur);
	err = s->out->ops->slice(s->out, &d);
	return err ? sh_fail(s, err) : 0;
}

static int sh_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	struct cuptrace_instant d = *e;
	int err = place(s, &d.track_uuid, &d.ts);
	if (!err && (err = s->out->ops->instant(s->out, &d)))
		sh_fail(s, err);
	return err;
}

static int sh_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	struct cuptrace_counter d = *e;
	int err = place(s, &d.track_uuid, &d.ts);
	if (!err && (err = s->out->ops->counter(s->out, &d)))
		sh_fail(s, err);
	return err;
}

static int sh_stack(struct cuptrace_sink *sk, const struct cuptrace_stack *e)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	struct cuptrace_stack d = *e;
	d.id += s->stack_base;
	if (d.id >= s->ms->next_stack)
		s->ms->next_stack = d.id + 1;
	int err = s->err || !s->out->ops->stack ? s->err : s->out->ops->stack(s->out, &d);
	return err ? sh_fail(s, err) : 0;
}

/* A host stack sample (record --sample): on its thread's track in the output's numbering, at its
 * time shifted as every other event of the input, in the process the merge gave that input (its
 * thread tracks keep their tids, sh_track), its stack renumbered as the slices' stacks are (the
 * reader sends the stack through sh_stack first). Before, the shift sink had no sample op and
 * every input's samples were dropped. */
static int sh_sample(struct cuptrace_sink *sk, const struct cuptrace_sample *e)
{
	struct shift_sink *s = (struct shift_sink *)sk;
	struct cuptrace_sample d = *e;
	if (!s->out->ops->sample) /* the output drops samples (Chrome JSON) */
		return s->err;
	int err = place(s, &d.track_uuid, &d.ts);
	if (err)
		return err;
	d.pid = map_pid(s->in, e->pid);
	d.stack_id = e->stack_id ? e->stack_id + s->stack_base : 0;
	err = s->out->ops->sample(s->out, &d);
	return err ? sh_fail(s, err) : 0;
}

/* The output is finished by the caller, once, after every input. */
static int sh_finish(struct cuptrace_sink *sk)
{
	return ((struct shift_sink *)sk)->err;
}

static void sh_destroy(struct cuptrace_sink *sk)
{
	(void)sk; /* lives on the stack of cuptrace_merge_write */
}

static const struct cuptrace_sink_ops shift_ops = {
    .name = "merge-shift",
    .begin = sh_begin,
    .track = sh_track,
    .slice = sh_slice,
    .instant = sh_instant,
    .counter = sh_counter,
    .stack = sh_stack,
    .sample = sh_sample,
    .meta = sh_meta,
    .finish = sh_finish,
    .destroy = sh_destroy,
};

/* Where ui.perfetto.dev should open (event.h's CUPTRACE_META_VIEW_START and its rule), in output
 * time: just before the earliest input's first kernel (or graph), where that comes after the
 * first fifth of the merged span; else 0 (the whole trace). The ranks of a job spend most of a
 * short run in start-up (2-rank DDP on tests/data: 7.1 s of 8.2 s before the first kernel: host
 * calls, module loading, the model's copies to the GPU at 1.1 s), which filled the first screen and
 * left the loop its last eighth. Copies are not where the work begins: loading a model is start-up.
 * The start-up stays in the trace, one zoom-out away. Not for --native-clocks archives, whose files
 * keep their own time axes. */
static int64_t view_start(const struct cuptrace_merge *m)
{
	int64_t lo = INT64_MAX, hi = INT64_MIN, work = INT64_MAX;
	if (m->native_clocks)
		return 0;
	for (size_t i = 0; i < m->n; i++) {
		const struct cuptrace_stats *st = &m->st->in[i].st;
		const struct cuptrace_align_out *map = &m->in[i].map;
		if (!m->in[i].has_events)
			continue;
		int64_t a = cuptrace_align_apply(map, st->min_ts),
		        b = cuptrace_align_apply(map, st->max_ts);
		lo = a < lo ? a : lo;
		hi = b > hi ? b : hi;
		for (size_t t = 0; t < st->ntrk; t++) {
			const struct cuptrace_stats_track *k = &st->trk[t];
			if (!k->group_uuid || !k->kernels)
				continue;
			int64_t w = cuptrace_align_apply(map, k->first_kernel_ts);
			work = w < work ? w : work;
		}
	}
	return cuptrace_view_start_rule(lo, hi, work);
}

/* The output's metadata: the inputs' entries under "<label>: <key>", and what the merge did. */
static int merged_meta(struct cuptrace_merge *m, struct cuptrace_meta **out, size_t *nout,
                       char ***strs, size_t *nstrs)
{
	size_t cap = 16, ns = 0, n = 0;
	for (size_t i = 0; i < m->n; i++)
		cap += m->st->in[i].st.nmeta + 8;
	struct cuptrace_meta *meta = calloc(cap, sizeof(*meta));
	char **keep = calloc(2 * cap, sizeof(*keep)); /* the strings made here, to free */
	char buf[64];

	*out = meta;
	*strs = keep;
	if (!meta || !keep)
		return -ENOMEM;
	meta[n++] = (struct cuptrace_meta){.key = "merged_inputs", .is_int = 1, .i = (int64_t)m->n};
	int64_t view = view_start(m);
	if (view > 0)
		meta[n++] =
		    (struct cuptrace_meta){.key = CUPTRACE_META_VIEW_START, .is_int = 1, .i = view};
	if (m->st->align_name) {
		snprintf(buf, sizeof(buf), "#%" PRIu64, m->st->k);
		if (!(keep[ns++] = cuptrace_str_join3(m->st->align_name, "", buf)))
			goto oom;
		meta[n++] = (struct cuptrace_meta){.key = "merge_alignment", .s = keep[ns - 1]};
	}
	if (m->st->ranks)
		meta[n++] = (struct cuptrace_meta){
		    .key = "merge_alignment",
		    .s = m->st->mode == CUPTRACE_ALIGN_NCCL ? "ranks: boottime, realtime, nccl"
		         : m->st->mode == CUPTRACE_ALIGN_REALTIME ? "ranks: boottime, realtime"
		                                                  : "ranks: none"};
	/* The traced system, for the trace's system info: the first input's. */
	const struct cuptrace_meta *os = stats_meta_get(&m->st->in[0].st, "os");
	if (os && !os->is_int)
		meta[n++] = (struct cuptrace_meta){.key = "os", .s = os->s};
	for (size_t i = 0; i < m->n; i++) {
		const struct cuptrace_stats *st = &m->st->in[i].st;
		const char *label = m->in[i].label;
		for (size_t k = 0; k < st->nmeta; k++) {
			/* An input's own view start is in its own time; the merge sets one above.
			 */
			if (st->meta[k].key && !strcmp(st->meta[k].key, CUPTRACE_META_VIEW_START))
				continue;
			if (!(keep[ns++] = cuptrace_str_join3(label, ": ", st->meta[k].key)))
				goto oom;
			meta[n] = st->meta[k];
			meta[n++].key = keep[ns - 1];
		}
		if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_file")))
			goto oom;
		meta[n++] = (struct cuptrace_meta){.key = keep[ns - 1], .s = m->in[i].path};
		if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_offset_ns")))
			goto oom;
		meta[n++] = (struct cuptrace_meta){
		    .key = keep[ns - 1], .is_int = 1, .i = m->in[i].offset_ns};
		if (!m->st->ranks)
			continue;
		if (m->in[i].gpus) {
			if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_gpus_used")))
				goto oom;
			meta[n++] = (struct cuptrace_meta){.key = keep[ns - 1], .s = m->in[i].gpus};
		}
		const struct cuptrace_align_out *a = &m->in[i].map;
		if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_clock")))
			goto oom;
		meta[n++] = (struct cuptrace_meta){.key = keep[ns - 1],
		                                   .s = cuptrace_merge_clock_name(a->clock)};
		if (a->clock != CUPTRACE_CLOCK_NCCL)
			continue;
		snprintf(buf, sizeof(buf), "%.4f", a->drift * 1e6);
		if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_drift_ppm")) ||
		    !(keep[ns++] = strdup(buf)))
			goto oom;
		meta[n++] = (struct cuptrace_meta){.key = keep[ns - 2], .s = keep[ns - 1]};
		if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_realtime_error_ns")))
			goto oom;
		meta[n++] = (struct cuptrace_meta){
		    .key = keep[ns - 1], .is_int = 1, .i = a->realtime_error_ns};
		if (!(keep[ns++] = cuptrace_str_join3(label, ": ", "merge_matched_collectives")))
			goto oom;
		meta[n++] = (struct cuptrace_meta){
		    .key = keep[ns - 1], .is_int = 1, .i = (int64_t)a->matched};
	}
	if (m->st->ranks) {
		/* The spread is the symmetric collectives' (align.h); the others' apart. */
		const struct cuptrace_align_summary *g = &m->align;
		const struct {
			const char *key;
			int64_t v;
		} sp[] = {
		    {"merge_ranks_machines", (int64_t)g->machines},
		    {"merge_collectives_matched", (int64_t)g->symmetric.collectives},
		    {"merge_collective_end_spread_median_ns", g->symmetric.median},
		    {"merge_collective_end_spread_p99_ns", g->symmetric.p99},
		    {"merge_collective_end_spread_max_ns", g->symmetric.max},
		    {"merge_other_collectives_matched", (int64_t)g->other.collectives},
		    {"merge_other_collective_end_spread_median_ns", g->other.median},
		    {"merge_other_collective_end_spread_p99_ns", g->other.p99},
		    {"merge_other_collective_end_spread_max_ns", g->other.max},
		};
		for (size_t k = 0; k < sizeof(sp) / sizeof(sp[0]); k++)
			meta[n++] =
			    (struct cuptrace_meta){.key = sp[k].key, .is_int = 1, .i = sp[k].v};
	}
	*nout = n;
	*nstrs = ns;
	return 0;
oom:
	*nstrs = ns;
	return -ENOMEM;
}

/* Replays input i into out through the shifting sink (uuids and flow ids from the merge's
 * counters, so they stay unique over all inputs, in one file or several). */
static int write_input(struct cuptrace_merge *m, size_t i, cuptrace_replay_fn replay, void *ctx,
                       struct cuptrace_sink *out, int native)
{
	struct shift_sink s = {.base.ops = &shift_ops,
	                       .out = out,
	                       .ms = m->st,
	                       .r = &m->in[i],
	                       .in = &m->st->in[i],
	                       .index = i,
	                       .native = native,
	                       .stack_base = m->st->next_stack - 1};
	cuptrace_u64map_init(&s.uuid);
	cuptrace_u64map_init(&s.flow);
	m->bad = i;
	int err = replay(ctx, m->in[i].path, &s.base);
	if (!err)
		err = s.err;
	if (!err && s.proc_uuid && !s.meta_uuid) { /* no main thread: the first, or none */
		s.meta_uuid = s.first_thread;
		err = write_info(&s);
	}
	if (!err && s.proc_uuid) /* meta() comes last from every reader */
		err = merge_meta_write(&s.mm, 1, m->in[i].label, m->in[i].path, out,
		                       s.meta_uuid ? s.meta_uuid : s.proc_uuid, s.max_ts);
	merge_meta_free(&s.mm);
	cuptrace_u64map_free(&s.uuid);
	cuptrace_u64map_free(&s.flow);
	free(s.ids);
	return err;
}

/* A clock's reading at the output's relative 0, from the first input's reading at its own 0 and
 * the shift that input got (the output's t is the input's t - offset). 0 says "unknown" in the
 * event model, and stays so: a torch.profiler trace has no BOOTTIME, and moving its 0 would make
 * up a reading. A reading that the shift takes below 0 is unknown too: no clock reads less than
 * 0, and trace_processor's time is the BOOTTIME reading, so a negative one would put every event
 * before -value at a negative time, which it drops (track_event_invalid_timestamp). */
static int64_t clock_at_zero(int64_t at_input_zero, int64_t offset_ns)
{
	int64_t v = at_input_zero > 0 ? sat_sub(at_input_zero, offset_ns) : 0;
	return v > 0 ? v : 0;
}

/* Both write paths: one output for all inputs (open == NULL, out given), or one per input
 * (open gives input i's sink, which close finishes and destroys). Every output begins with the
 * same trace info (the first input's clocks, shifted), so the files of an archive share one time
 * axis exactly as the inputs do in a single merged file. */
static int merge_write(struct cuptrace_merge *m, cuptrace_replay_fn replay, void *ctx,
                       struct cuptrace_sink *out, cuptrace_merge_open_fn open,
                       cuptrace_merge_close_fn close, void *octx)
{
	struct cuptrace_meta *meta = NULL;
	char **strs = NULL, *pname = NULL;
	size_t nmeta = 0, nstrs = 0;
	int err;

	if (!m || !m->st || !m->n || (!out && !open))
		return -EINVAL;
	m->bad = 0;
	if ((err = merged_meta(m, &meta, &nmeta, &strs, &nstrs)))
		goto out;
	/* The output's clocks are the first input's, moved by its shift (clock_at_zero). */
	const struct cuptrace_stats *st0 = &m->st->in[0].st;
	const struct cuptrace_meta *rt = stats_meta_get(st0, "start_realtime_ns"),
	                           *pn = stats_meta_get(st0, "process_name"),
	                           *host = stats_meta_get(st0, "hostname");
	int64_t realtime = 0;
	if (rt)
		stats_meta_int(rt, &realtime);
	if (!(pname = cuptrace_str_join3(m->in[0].label, ": ",
	                                 pn && !pn->is_int && pn->s ? pn->s : "process"))) {
		err = -ENOMEM;
		goto out;
	}
	uint64_t hi = 0, lo = 0;
	for (size_t i = 0; i < m->n; i++) {
		hi = cuptrace_hash64(hi ^ m->st->in[i].uuid_hi ^ (uint64_t)m->in[i].offset_ns);
		lo = cuptrace_hash64(lo ^ m->st->in[i].uuid_lo ^ (uint64_t)i);
	}
	struct cuptrace_trace_info info = {
	    .pid = m->in[0].pid,
	    .process_name = pname,
	    .hostname = host && !host->is_int ? host->s : NULL,
	    .start_realtime_ns = clock_at_zero(realtime, m->in[0].offset_ns),
	    .start_boottime_ns = clock_at_zero(m->st->in[0].start_boottime_ns, m->in[0].offset_ns),
	    .trace_uuid_hi = hi,
	    .trace_uuid_lo = lo,
	    .meta = meta,
	    .nmeta = nmeta,
	};
	if (out && (err = out->ops->begin(out, &info)))
		goto out;
	m->st->next_uuid = m->st->next_flow = m->st->next_stack = 1;
	for (size_t i = 0; i < m->n && !err; i++) {
		if (!open) {
			err = write_input(m, i, replay, ctx, out, 0);
			continue;
		}
		m->bad = i;
		struct cuptrace_sink *one = open(octx, i);
		if (!one) {
			err = errno ? -errno : -EIO;
			break;
		}
		info.trace_uuid_lo = cuptrace_hash64(lo + i); /* each file a trace of its own */
		struct cuptrace_trace_info own = info;
		if (m->native_clocks) {
			/* Its own clocks: the archive's manifest says how they relate. */
			own.start_boottime_ns = clock_at_zero(m->st->in[i].start_boottime_ns, 0);
			own.start_realtime_ns = clock_at_zero(m->st->in[i].start_realtime_ns, 0);
			own.hostname = m->st->in[i].host ? m->st->in[i].host : info.hostname;
			own.pid = m->in[i].pid;
		}
		err = one->ops->begin(one, &own);
		if (!err)
			err = write_input(m, i, replay, ctx, one, m->native_clocks);
		int e = close(octx, i, one);
		err = err ? err : e;
	}
	if (!err)
		m->bad = 0;
out:
	for (size_t i = 0; strs && i < nstrs; i++)
		free(strs[i]);
	free(strs);
	free(meta);
	free(pname);
	return err;
}

int cuptrace_merge_write(struct cuptrace_merge *m, cuptrace_replay_fn replay, void *ctx,
                         struct cuptrace_sink *out)
{
	return merge_write(m, replay, ctx, out, NULL, NULL, NULL);
}

int cuptrace_merge_write_each(struct cuptrace_merge *m, cuptrace_replay_fn replay, void *ctx,
                              cuptrace_merge_open_fn open, cuptrace_merge_close_fn close,
                              void *octx)
{
	return merge_write(m, replay, ctx, NULL, open, close, octx);
}
