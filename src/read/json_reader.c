/* The JSON reader: Chrome trace event JSON, as cuptrace's Chrome writer, torch.profiler (Kineto)
 * and other tools write it, replayed into a sink as the events of event.h.
 *
 * How it works:
 *  1. whole-file gzip is inflated (bounded: MAX_INFLATED); a cut or corrupt .gz is an error,
 *     since trace_processor cannot load one either;
 *  2. json_events.c walks the document once with the pull parser of json_parse.c (strict,
 *     never deeper than 64 levels, no tree built) and keeps slices ('X'), instants ('i'),
 *     counter values ('C'), flow events ('s', 't', 'f'), the names of processes and threads
 *     ('M'), Kineto's deviceProperties and the top-level keys as metadata. Other phases (B/E,
 *     async, samples) are skipped and counted. A document that is an array and ends early is
 *     read up to its last whole event, as trace_processor does (cuptrace's writer killed);
 *  3. json_tracks.c decides the tracks: a JSON process is a process, or a GPU's group when its
 *     process_labels says "GPU N" (Kineto puts a GPU's work on pid = device, tid = stream) or
 *     cuptrace's writer's pid scheme says so; a thread of a GPU is a stream ("Stream N"); other
 *     threads are host threads. Times become ns relative to the earliest event (exactly: ts and
 *     dur are read from their decimal text). Slices of a thread that partially overlap go on
 *     lane tracks of the thread's name, as the converter does, so no slice is lost; flow events
 *     are bound to slices and paired into arrows (one flow id each);
 *  4. replay: begin (cuptrace's trace info, or the main process and Kineto's metadata), tracks
 *     parents first in file order, events in time order, then meta (cuptrace's last summary, and
 *     what this reader skipped or moved, as "json_*" entries).
 * Kineto's categories are renamed to cuptrace's where they differ (gpu_memcpy -> memcpy,
 * gpu_memset -> memset); its names of copies and memsets are cuptrace's already
 * ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)"), and its "correlation" arg becomes
 * the slices' correlation id, so a trace of either tool compares with the other's.
 *
 * Memory: the input (inflated), plus a few dozen bytes per event and per arg; strings are
 * interned once. */
#include "read/json_reader.h"
#include "read/json_state.h"
#include "common/log.h"
#include "read/read_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INFLATED ((size_t)2 << 30) /* what a .json.gz may inflate to */

static void jr_free(struct jr *r)
{
	jp_free(&r->jp);
	cuptrace_strtab_free(&r->strs);
	cuptrace_stacktab_free(&r->stk);
	cuptrace_strtab_free(&r->proc_keys);
	cuptrace_strtab_free(&r->thread_keys);
	cuptrace_strtab_free(&r->counter_keys);
	cuptrace_strtab_free(&r->flow_keys);
	cuptrace_u64map_free(&r->pids);
	free(r->evs);
	free(r->args);
	free(r->procs);
	free(r->thr);
	free(r->ctrs);
	free(r->trk);
	jr_metas_free(&r->meta0);
	jr_metas_free(&r->meta);
	cuptrace_u64map_free(&r->by_pid);
	cuptrace_u64map_free(&r->by_sort);
	free(r->fids);
	free(r->open_b);
}

/* Kineto's category names where cuptrace's differ. */
static const char *category(const struct jr *r, uint32_t cat)
{
	const char *c = jr_s(r, cat);
	if (r->flavor == JR_CUPTRACE || !c)
		return c;
	if (!strcmp(c, "gpu_memcpy"))
		return "memcpy";
	if (!strcmp(c, "gpu_memset"))
		return "memset";
	/* torch.profiler's 2021 format (Kineto before its categories were renamed). */
	static const char *const old[][2] = {{"Kernel", "kernel"},   {"Memcpy", "memcpy"},
	                                     {"Memset", "memset"},   {"Runtime", "cuda_runtime"},
	                                     {"Operator", "cpu_op"}, {"Python", "python_function"}};
	for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
		if (!strcmp(c, old[i][0]))
			return old[i][1];
	return c;
}

/* "0123abcd-..." (cuptrace) or 32 hex digits (Kineto's trace_id) into 128 bits. */
static int parse_uuid(const char *s, uint64_t *hi, uint64_t *lo)
{
	uint64_t v[2] = {0, 0};
	int n = 0;
	for (; s && *s && n < 32; s++) {
		int d = *s >= '0' && *s <= '9'   ? *s - '0'
		        : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
		        : *s >= 'A' && *s <= 'F' ? *s - 'A' + 10
		                                 : -1;
		if (d < 0) {
			if (*s == '-')
				continue;
			return -1;
		}
		v[n / 16] = v[n / 16] << 4 | (uint64_t)d;
		n++;
	}
	if (n != 32 || (s && *s))
		return -1;
	*hi = v[0];
	*lo = v[1];
	return 0;
}

/* ---- the trace info ---- */

struct info_buf {
	struct cuptrace_meta *m;
	size_t n;
	char gpu[JR_MAX_DEVICES][224];
	char key[JR_MAX_DEVICES][16];
	char cuda[24];
};

/* The writer adds the trace's uuid to its metadata (from the info, where the reader puts it
 * back): not a metadata entry of its own. */
static int info_key(const char *k)
{
	return k && !strcmp(k, "trace_uuid");
}

static struct cuptrace_meta meta_of(const struct jr *r, const struct jr_meta *m)
{
	return (struct cuptrace_meta){.key = jr_s(r, m->key) ? jr_s(r, m->key) : "",
	                              .is_int = m->is_int,
	                              .i = m->i,
	                              .s = m->is_int       ? NULL
	                                   : jr_s(r, m->s) ? jr_s(r, m->s)
	                                                   : ""};
}

/* Clock values from the file plus the shift to relative time, clamped: a file may say anything
 * (a fuzzed one said INT64_MAX), and signed overflow is undefined. */
static int64_t add_sat(int64_t a, int64_t b)
{
	int64_t r;
	if (!__builtin_add_overflow(a, b, &r))
		return r;
	return b > 0 ? INT64_MAX : INT64_MIN;
}

/* BOOTTIME's reading at relative 0: one below 0 is none (event.h: 0, not known), which a writer
 * would otherwise put in a Perfetto clock snapshot and lose the events before it. REALTIME is
 * left as the file says: a torch.profiler file's axis may be anything, and merge --ranks places
 * ranks by its differences. */
static int64_t boottime_reading(int64_t at_file_zero, int64_t base)
{
	int64_t v = add_sat(at_file_zero, base);
	return v > 0 ? v : 0;
}

static int make_info(struct jr *r, struct cuptrace_trace_info *info, struct info_buf *b,
                     const void *data, size_t len)
{
	const struct jr_proc *mp = r->main_proc ? &r->procs[r->main_proc - 1] : NULL;

	if (!(b->m = calloc(2 * r->meta0.n + JR_MAX_DEVICES + 4, sizeof(*b->m))))
		return -ENOMEM;
	memset(info, 0, sizeof(*info));
	if (r->flavor == JR_CUPTRACE) {
		info->pid = r->info_pid;
		info->process_name = jr_s(r, r->info_process);
		info->hostname = jr_s(r, r->info_host);
		info->start_realtime_ns = add_sat(r->info_realtime, r->base);
		info->start_boottime_ns = boottime_reading(r->info_boottime, r->base);
		parse_uuid(jr_s(r, r->info_uuid), &info->trace_uuid_hi, &info->trace_uuid_lo);
		/* pid, process_name, ... too: a capture's info carries them as meta. */
		for (size_t i = 0; i < r->meta0.n; i++)
			if (!info_key(jr_s(r, r->meta0.m[i].key)))
				b->m[b->n++] = meta_of(r, &r->meta0.m[i]);
	} else {
		info->pid = mp ? mp->pid : 0;
		info->process_name = mp ? jr_s(r, r->trk[mp->track - 1].name) : NULL;
		/* "?" where the file does not say: NULL would make a writer take its own. */
		info->hostname = r->top_host && *jr_s(r, r->top_host) ? jr_s(r, r->top_host) : "?";
		/* torch.profiler writes absolute times (microseconds since the epoch, or since
		 * baseTimeNanoseconds): the file's time axis is the clock its ranks share, so the
		 * start is on it even without baseTimeNanoseconds (merge --ranks relies on it). */
		info->start_realtime_ns = add_sat(r->have_base_time ? r->base_time_ns : 0, r->base);
		int kineto = 0;
		for (size_t i = 0; i < r->meta0.n; i++) {
			const char *k = jr_s(r, r->meta0.m[i].key);
			kineto |= !strcmp(k, "schemaVersion") || !strcmp(k, "baseTimeNanoseconds");
			if (!strcmp(k, "trace_id") && !r->meta0.m[i].is_int)
				parse_uuid(jr_s(r, r->meta0.m[i].s), &info->trace_uuid_hi,
				           &info->trace_uuid_lo);
			b->m[b->n++] = meta_of(r, &r->meta0.m[i]);
			/* Kineto's CUDA driver API version (13000) as cuptrace words it ("13.0").
			 */
			if (!strcmp(k, "cuda_driver_version") && r->meta0.m[i].is_int &&
			    r->meta0.m[i].i > 0 && r->meta0.m[i].i < 1000000) {
				int v = (int)r->meta0.m[i].i;
				snprintf(b->cuda, sizeof(b->cuda), "%d.%d", v / 1000,
				         (v % 1000) / 10);
				b->m[b->n++] = (struct cuptrace_meta){
				    .key = "cuda_driver_api_version", .s = b->cuda};
			}
		}
		/* distributedInfo as `record` words a rank (the keys merge --ranks reads) */
		if (r->dist_rank >= 0)
			b->m[b->n++] =
			    (struct cuptrace_meta){.key = "rank", .is_int = 1, .i = r->dist_rank};
		if (r->dist_world > 0)
			b->m[b->n++] = (struct cuptrace_meta){
			    .key = "world_size", .is_int = 1, .i = r->dist_world};
		if (r->dist_backend)
			b->m[b->n++] = (struct cuptrace_meta){.key = "distributed_backend",
			                                      .s = jr_s(r, r->dist_backend)};
		for (int d = 0; d < JR_MAX_DEVICES; d++) {
			const struct jr_device *v = &r->dev[d];
			if (!v->has)
				continue;
			kineto = 1;
			/* As convert_meta.c words a GPU. */
			snprintf(b->key[d], sizeof(b->key[d]), "gpu%d", d);
			/* Compute capability and SMs are NVIDIA's words: ROCm's Kineto fills the
			 * same fields (gfx9 as "9.0", compute units as SMs), which would
			 * misdescribe an AMD GPU as a Hopper. Other vendors get their name and
			 * memory. */
			const char *gname = v->name ? jr_s(r, v->name) : "GPU";
			if (!strncmp(gname, "NVIDIA", 6) || !strncmp(gname, "Tesla", 5) ||
			    !strncmp(gname, "Quadro", 6) || !strncmp(gname, "GeForce", 7))
				snprintf(b->gpu[d], sizeof(b->gpu[d]),
				         "%.160s, compute capability %" PRId64 ".%" PRId64
				         ", %" PRId64 " SMs, %.1f GiB",
				         gname, v->major, v->minor, v->sms,
				         (double)v->mem / (1024.0 * 1024 * 1024));
			else
				snprintf(b->gpu[d], sizeof(b->gpu[d]), "%.160s, %.1f GiB", gname,
				         (double)v->mem / (1024.0 * 1024 * 1024));
			b->m[b->n++] = (struct cuptrace_meta){.key = b->key[d], .s = b->gpu[d]};
		}
		b->m[b->n++] = (struct cuptrace_meta){.key = "trace_format",
		                                      .s = kineto ? "torch.profiler (Kineto) JSON"
		                                                  : "Chrome JSON"};
		if (!info->trace_uuid_hi && !info->trace_uuid_lo) {
			/* No id in the file: one from its bytes, the same on every read. */
			info->trace_uuid_hi = cuptrace_hash_bytes(data, len < 65536 ? len : 65536);
			info->trace_uuid_lo = cuptrace_hash64(info->trace_uuid_hi ^ len);
		}
	}
	info->meta = b->m;
	info->nmeta = b->n;
	return 0;
}

/* ---- replay ---- */

static const struct jr *sort_r; /* qsort has no context argument in C11 */

static int ev_cmp(const void *pa, const void *pb)
{
	const struct jr_ev *a = &sort_r->evs[*(const uint32_t *)pa];
	const struct jr_ev *b = &sort_r->evs[*(const uint32_t *)pb];
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return a->fo < b->fo ? -1 : a->fo > b->fo;
}

static int trk_cmp(const void *pa, const void *pb)
{
	uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
	const struct jr_track *a = &sort_r->trk[x], *b = &sort_r->trk[y];
	if (a->first_fo != b->first_fo)
		return a->first_fo < b->first_fo ? -1 : 1;
	return x < y ? -1 : x > y;
}

static int declare(struct jr *r, struct cuptrace_sink *sink, uint32_t i)
{
	struct jr_track *t = &r->trk[i];
	int err;

	if (t->declared)
		return 0;
	t->declared = 1;
	if (t->parent && (err = declare(r, sink, t->parent - 1)))
		return err;
	const char *cmd = jr_s(r, t->cmdline);
	struct cuptrace_track d = {
	    .uuid = i + 1,
	    .kind = (enum cuptrace_track_kind)t->kind,
	    .parent_uuid = t->parent,
	    .pid = t->pid,
	    .tid = t->tid,
	    .name = jr_s(r, t->name) ? jr_s(r, t->name) : "",
	    .description = jr_s(r, t->desc),
	    .sort_rank = t->rank,
	    .lane = t->lane,
	    .unit = (enum cuptrace_counter_unit)t->unit,
	    .cmdline = cmd ? &cmd : NULL,
	    .cmdline_len = cmd ? 1 : 0,
	};
	return sink ? sink->ops->track(sink, &d) : 0;
}

static int emit_tracks(struct jr *r, struct cuptrace_sink *sink)
{
	uint32_t *order = malloc((r->ntrk ? r->ntrk : 1) * sizeof(*order));
	int err = 0;

	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < r->ntrk; i++)
		order[i] = (uint32_t)i;
	sort_r = r;
	qsort(order, r->ntrk, sizeof(*order), trk_cmp);
	for (size_t i = 0; i < r->ntrk && !err; i++)
		if (r->trk[order[i]].used)
			err = declare(r, sink, order[i]);
	free(order);
	return err;
}

static int make_args(const struct jr *r, const struct jr_ev *e, struct cuptrace_arg **args,
                     size_t *cap)
{
	if (CUPTRACE_GROW(*args, *cap, e->nargs))
		return -ENOMEM;
	for (uint32_t i = 0; i < e->nargs; i++) {
		const struct jr_arg *s = &r->args[e->arg0 + i];
		struct cuptrace_arg *d = &(*args)[i];
		d->key = jr_s(r, s->key) ? jr_s(r, s->key) : "";
		d->type = (enum cuptrace_arg_type)s->type;
		if (s->type == CUPTRACE_ARG_STRING)
			d->v.s = jr_s(r, s->v.s) ? jr_s(r, s->v.s) : "";
		else if (s->type == CUPTRACE_ARG_DOUBLE)
			d->v.d = s->v.d;
		else if (s->type == CUPTRACE_ARG_BOOL)
			d->v.b = s->v.b;
		else
			d->v.i = s->v.i; /* INT, UINT: the same bits */
	}
	return 0;
}

static int emit_event(struct jr *r, struct cuptrace_sink *sink, const struct jr_ev *e,
                      const struct cuptrace_arg *args)
{
	const char *name = jr_s(r, e->name) ? jr_s(r, e->name) : "";
	switch (e->ph) {
	case 'X': {
		struct cuptrace_slice s = {
		    .track_uuid = e->track,
		    .ts = e->ts,
		    .dur = e->dur,
		    .name = name,
		    .category = category(r, e->cat),
		    .correlation_id = e->corr,
		    .args = args,
		    .nargs = e->nargs,
		    .flows_out = e->nout ? r->fids + e->fl0 : NULL,
		    .nflows_out = e->nout,
		    .flows_in = e->nin ? r->fids + e->fl0 + e->nout : NULL,
		    .nflows_in = e->nin,
		    .stack_id = e->stack,
		};
		r->ck.slices++;
		int err = e->stack ? cuptrace_stacktab_send(&r->stk, e->stack, sink, 0) : 0;
		return err ? err : sink ? sink->ops->slice(sink, &s) : 0;
	}
	case 'i': {
		struct cuptrace_instant in = {
		    .track_uuid = e->track,
		    .ts = e->ts,
		    .name = name,
		    .category = category(r, e->cat),
		    .correlation_id = e->corr,
		    .args = args,
		    .nargs = e->nargs,
		};
		r->ck.instants++;
		return sink ? sink->ops->instant(sink, &in) : 0;
	}
	default: {
		struct cuptrace_counter c = {
		    .track_uuid = e->track, .ts = e->ts, .is_double = e->is_double};
		if (e->is_double)
			c.d = e->val.d;
		else
			c.i = e->val.i;
		r->ck.counters++;
		return sink ? sink->ops->counter(sink, &c) : 0;
	}
	}
}

/* meta() at the end: cuptrace's last summary where it differs from the info, then what this
 * reader skipped, moved or could not pair. */
static int emit_meta(struct jr *r, struct cuptrace_sink *sink)
{
	const struct {
		const char *key;
		uint64_t v;
	} counts[] = {
	    {"json_dropped_events", r->ck.skipped},
	    {"json_negative_durations", r->ck.negative_dur},
	    {"json_overlap_lanes", r->ck.lanes},
	    {"json_overlaps_dropped", r->ck.overlaps_dropped},
	    {"json_flows_unbound", r->ck.flows_unbound},
	    {"json_flows_dangling", r->ck.flows_dangling},
	    {"json_truncated", (uint64_t)r->ck.truncated},
	    {"json_meta_left_out", r->ck.meta_left_out},
	};
	size_t ncounts = sizeof(counts) / sizeof(counts[0]), n = 0;
	struct cuptrace_meta *m = calloc(r->meta.n + ncounts, sizeof(*m));
	int err = 0;

	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < r->meta.n; i++) {
		const struct jr_meta *x = &r->meta.m[i];
		const struct jr_meta *o = jr_meta_get(&r->meta0, x->key);
		int same = info_key(jr_s(r, x->key)) || (o && o->is_int == x->is_int &&
		                                         (x->is_int ? o->i == x->i : o->s == x->s));
		if (!same)
			m[n++] = meta_of(r, x);
	}
	for (size_t i = 0; i < ncounts; i++)
		if (counts[i].v)
			m[n++] = (struct cuptrace_meta){
			    .key = counts[i].key, .is_int = 1, .i = (int64_t)counts[i].v};
	if (n && sink)
		err = sink->ops->meta(sink, m, n);
	free(m);
	return err;
}

static int replay(struct jr *r, struct cuptrace_sink *sink, const void *data, size_t len)
{
	struct cuptrace_trace_info info;
	struct info_buf *ib = calloc(1, sizeof(*ib));
	struct cuptrace_arg *args = NULL;
	uint32_t *order = NULL;
	size_t argcap = 0, n = 0;
	int err;

	if (!ib)
		return -ENOMEM;
	if ((err = make_info(r, &info, ib, data, len)))
		goto out;
	if (sink && (err = sink->ops->begin(sink, &info)))
		goto out;
	if ((err = emit_tracks(r, sink)))
		goto out;
	if (!(order = malloc((r->nevs ? r->nevs : 1) * sizeof(*order)))) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->nevs; i++) {
		const struct jr_ev *e = &r->evs[i];
		if (!e->dropped && e->track && (e->ph == 'X' || e->ph == 'i' || e->ph == 'C'))
			order[n++] = (uint32_t)i;
	}
	sort_r = r;
	qsort(order, n, sizeof(*order), ev_cmp);
	for (size_t i = 0; i < n && !err; i++) {
		const struct jr_ev *e = &r->evs[order[i]];
		if (!(err = make_args(r, e, &args, &argcap)))
			err = emit_event(r, sink, e, args);
	}
	if (!err)
		err = emit_meta(r, sink);
out:
	free(order);
	free(args);
	free(ib->m);
	free(ib);
	return err;
}

/* ---- entry points ---- */

int cuptrace_json_read_mem(const void *data, size_t len, const char *name,
                           struct cuptrace_sink *sink, struct cuptrace_json_check *check)
{
	const uint8_t *b = data;
	uint8_t *inflated = NULL;
	struct jr *r = calloc(1, sizeof(*r));
	int err = 0;

	if (!r)
		return -ENOMEM;
	r->name = name ? name : "JSON";
	r->dist_rank = r->dist_world = -1;
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		enum cuptrace_gz_end end;
		size_t n;
		if ((err = cuptrace_gunzip(b, len, MAX_INFLATED, &inflated, &n, &end))) {
			cuptrace_err("%s: out of memory inflating it", r->name);
			goto out;
		}
		if ((end == CUPTRACE_GZ_CUT || end == CUPTRACE_GZ_CORRUPT) && n) {
			/* Read what inflated, as a JSON document cut there (read.c reports it). */
			r->ck.gz_damaged = end == CUPTRACE_GZ_CUT ? 1 : 2;
		} else if (end != CUPTRACE_GZ_COMPLETE) {
			err = -EINVAL;
			if (end == CUPTRACE_GZ_CUT || end == CUPTRACE_GZ_CORRUPT)
				cuptrace_err("%s: the gzip data is %s before any JSON", r->name,
				             end == CUPTRACE_GZ_CUT ? "cut" : "corrupt");
			else if (end == CUPTRACE_GZ_LIMIT)
				cuptrace_err(
				    "%s: inflates to more than %zu bytes: too large to read",
				    r->name, MAX_INFLATED);
			goto out;
		}
		b = inflated;
		len = n;
	}
	if (len >= 3 && !memcmp(b, "\xEF\xBB\xBF", 3)) { /* a UTF-8 byte order mark */
		b += 3;
		len -= 3;
	}
	jp_init(&r->jp, b, len, r->name);
	r->ck.bytes = len;
	if (!(err = jr_parse(r)) && !(err = jr_build(r)))
		err = replay(r, sink, b, len);
	if (err == -ENOMEM)
		cuptrace_err("%s: out of memory", r->name);
	r->ck.cuptrace = r->flavor == JR_CUPTRACE;
out:
	if (check)
		*check = r->ck;
	jr_free(r);
	free(r);
	free(inflated);
	return err;
}
