/* The analyze sink: keeps, of each trace replayed into it, the GPU work on stream tracks and the
 * host slices on thread tracks (API calls, op and NVTX ranges) with their flows and correlation
 * ids, and who its processes are (rank, host); when the next file begins and at finish() hands
 * them to an_compute (analyze_run.c), folds the file's analysis into the job's (analyze_job.c)
 * and frees them: several files (rank files) stream through in bounded memory. Lanes of a
 * thread or stream are folded back into it. Track and flow ids are qualified by the file's
 * number. */
#define _GNU_SOURCE /* strcasestr */
#include "why/sink_state.h"
#include "stats/stats_meta.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct an_sink {
	struct cuptrace_sink base;
	struct an an;
};

static struct an *an_of(struct cuptrace_sink *s)
{
	return &((struct an_sink *)s)->an;
}

static int fail(struct an *an, int err)
{
	if (!an->err)
		an->err = err;
	return an->err;
}

/* Appends one zeroed element to *arr (count *n, capacity *cap); NULL when out of memory. */
static void *push(void *arrp, size_t *n, size_t *cap, size_t size)
{
	void **arr = arrp;
	void *a = cuptrace_grow(*arr, cap, *n + 1, size);
	if (!a)
		return NULL;
	*arr = a;
	return memset((char *)a + (*n)++ * size, 0, size);
}

#define PUSH(an, arr, n, cap) push(&(an)->arr, &(an)->n, &(an)->cap, sizeof(*(an)->arr))

static uint32_t intern(struct an *an, const char *s)
{
	s = s ? s : "";
	uint32_t id = cuptrace_strtab_intern(&an->strs, s, strlen(s));
	if (!id)
		fail(an, -ENOMEM);
	return id;
}

/* A map slot (put), failing the sink on allocation failure. */
static uint64_t *put(struct an *an, struct cuptrace_u64map *m, uint64_t key, int *created)
{
	uint64_t *v = cuptrace_u64map_put(m, key, created);
	if (!v)
		fail(an, -ENOMEM);
	return v;
}

/* A host name worth saying: readers say "?" where the trace does not. */
static int real_host(const char *h)
{
	return h && *h && strcmp(h, "?");
}

/* The file's rank and host from its metadata (record writes rank and hostname). */
static int an_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info)
{
	struct an *an = an_of(s);
	const char *host = real_host(info->hostname) ? info->hostname : NULL;
	for (size_t i = 0; i < info->nmeta; i++) {
		const struct cuptrace_meta *m = &info->meta[i];
		int64_t v;
		if (!m->key)
			continue;
		if (!strcmp(m->key, "rank") && stats_meta_int(m, &v) && v >= 0 && v <= INT32_MAX)
			an->file_rank = (int)v;
		else if (!host && !strcmp(m->key, "hostname") && !m->is_int && real_host(m->s))
			host = m->s;
	}
	if (host)
		an->file_host = intern(an, host);
	return an->err;
}

/* The process (file, pid)'s entry in an->who, made on first sight; UINT32_MAX on failure. */
static uint32_t who_get(struct an *an, int32_t pid)
{
	int created;
	uint64_t *v = put(an, &an->who_of, an_key(an->file, (uint64_t)pid, 5), &created);
	if (!v)
		return UINT32_MAX;
	if (created) {
		struct an_who *w = PUSH(an, who, nwho, whocap);
		if (!w) {
			fail(an, -ENOMEM);
			return UINT32_MAX;
		}
		*w = (struct an_who){.pid = pid, .rank = -1};
		*v = an->nwho;
	}
	return (uint32_t)*v - 1;
}

/* "rank R @ host: name", as merge --ranks names a rank's process: R and host into w. */
static void who_from_name(struct an *an, struct an_who *w, const char *name)
{
	char *end;
	if (!name || strncmp(name, "rank ", 5) || w->rank >= 0)
		return;
	long r = strtol(name + 5, &end, 10);
	if (end == name + 5 || r < 0 || r > INT32_MAX || (*end != ' ' && *end != ':'))
		return;
	w->rank = (int)r;
	const char *at = !strncmp(end, " @ ", 3) ? end + 3 : NULL,
	           *colon = at ? strchr(at, ':') : NULL;
	if (at && colon && colon > at) {
		char host[256];
		size_t n = (size_t)(colon - at) < sizeof(host) - 1 ? (size_t)(colon - at)
		                                                   : sizeof(host) - 1;
		memcpy(host, at, n);
		host[n] = 0;
		if (real_host(host))
			w->host = intern(an, host);
	}
}

static uint32_t new_thread(struct an *an, int32_t pid, int64_t tid)
{
	struct an_thread *t = PUSH(an, threads, nthreads, threadcap);
	if (!t) {
		fail(an, -ENOMEM);
		return 0;
	}
	*t = (struct an_thread){.pid = pid, .tid = tid, .file = an->file};
	return (uint32_t)an->nthreads; /* index + 1 */
}

static int an_track_decl(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	struct an *an = an_of(s);
	int created;

	if (an->err)
		return an->err;
	if (t->uuid > an->max_uuid)
		an->max_uuid = t->uuid;
	uint64_t key = an_key(an->file, t->uuid, 0);
	uint64_t *pk = cuptrace_u64map_get(&an->trk, an_key(an->file, t->parent_uuid, 0));
	const struct an_track *parent = pk ? &an->tracks[*pk - 1] : NULL;
	struct an_track tr = {0};
	uint32_t name = intern(an, t->name);
	uint64_t *v;

	switch (t->kind) {
	case CUPTRACE_TRACK_PROCESS: {
		tr.kind = 4;
		uint32_t w = who_get(an, t->pid);
		if (w == UINT32_MAX)
			return an->err;
		who_from_name(an, &an->who[w], t->name);
		tr.idx = w;
		break;
	}
	case CUPTRACE_TRACK_THREAD:
		tr.kind = 1;
		if (!(v = put(an, &an->thr_of, an_key(an->file, (uint64_t)t->pid, (uint64_t)t->tid),
		              &created)))
			return an->err;
		if (created)
			*v = new_thread(an, t->pid, t->tid);
		tr.idx = (uint32_t)*v - 1;
		{
			uint32_t th = (uint32_t)*v;
			uint64_t *nv = put(an, &an->name_thr,
			                   an_key(an->file, (uint64_t)t->pid, name), &created);
			if (nv && created)
				*nv = th;
		}
		break;
	case CUPTRACE_TRACK_GROUP: {
		tr.kind = 2;
		struct an_gpu_in *g = PUSH(an, gpus, ngpus, gpucap);
		if (!g)
			return fail(an, -ENOMEM);
		*g = (struct an_gpu_in){.name = name, .pid = t->pid, .file = an->file, .key = key};
		tr.idx = (uint32_t)an->ngpus - 1;
		break;
	}
	case CUPTRACE_TRACK_SLICES:
		if (parent && (parent->kind == 2 || parent->kind == 3)) {
			size_t gpu = parent->kind == 2 ? parent->idx : an->streams[parent->idx].gpu;
			tr.kind = 3;
			if (!(v = put(an, &an->stream_of, an_key(gpu, name, 1), &created)))
				return an->err;
			if (created) {
				struct an_stream_in *st = PUSH(an, streams, nstreams, streamcap);
				if (!st)
					return fail(an, -ENOMEM);
				*st = (struct an_stream_in){.name = name, .gpu = gpu};
				*v = an->nstreams;
			}
			tr.idx = (uint32_t)*v - 1;
		} else {
			/* A lane of a thread has the thread's name; else a host track of its own.
			 */
			tr.kind = 1;
			uint64_t *nv = cuptrace_u64map_get(
			    &an->name_thr, an_key(an->file, (uint64_t)t->pid, name));
			uint32_t th =
			    nv ? (uint32_t)*nv : new_thread(an, t->pid, -(int64_t)t->uuid);
			if (!th)
				return an->err;
			tr.idx = th - 1;
		}
		break;
	default:
		break;
	}
	if (an->err)
		return an->err;
	if (!(v = put(an, &an->trk, key, &created)))
		return an->err;
	if (created) {
		struct an_track *n = PUSH(an, tracks, ntracks, trackcap);
		if (!n)
			return fail(an, -ENOMEM);
		*v = an->ntracks;
	}
	an->tracks[*v - 1] = tr;
	return 0;
}

static int has(const char *s, const char *sub)
{
	return s && strcasestr(s, sub) != NULL;
}

static int work_kind(const char *cat)
{
	if (!cat)
		return -1;
	if (!strcasecmp(cat, "kernel"))
		return W_KERNEL;
	if (!strcasecmp(cat, "graph"))
		return W_GRAPH;
	if (!strcasecmp(cat, "memcpy") || !strcasecmp(cat, "gpu_memcpy"))
		return W_COPY;
	if (!strcasecmp(cat, "memset") || !strcasecmp(cat, "gpu_memset"))
		return W_SET;
	return -1;
}

static void note_ts(struct an *an, int64_t ts, int64_t end)
{
	if (!an->have_ts || ts < an->min_ts)
		an->min_ts = ts;
	if (!an->have_ts || end > an->max_ts)
		an->max_ts = end;
	an->have_ts = 1;
}

static int an_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	struct an *an = an_of(s);

	if (an->err)
		return an->err;
	uint64_t *v = cuptrace_u64map_get(&an->trk, an_key(an->file, e->track_uuid, 0));
	if (!v)
		return 0;
	const struct an_track *tr = &an->tracks[*v - 1];
	int64_t dur = e->dur < 0 ? 0 : e->dur;
	if (tr->kind == 1) {
		int cls = cuptrace_host_class(e->category, e->name);
		if (cls < 0)
			return 0;
		struct an_host *h = PUSH(an, host, nhost, hostcap);
		if (!h)
			return fail(an, -ENOMEM);
		*h = (struct an_host){.ts = e->ts,
		                      .dur = dur,
		                      .corr = cls == H_RANGE ? 0 : e->correlation_id,
		                      .thread = tr->idx,
		                      .name = intern(an, e->name),
		                      .seq = (uint32_t)an->nhost - 1,
		                      .cls = (uint8_t)cls};
		if (cls != H_RANGE)
			for (size_t i = 0; i < e->nflows_out; i++) {
				struct an_flow *f = PUSH(an, flows, nflows, flowcap);
				if (!f)
					return fail(an, -ENOMEM);
				*f = (struct an_flow){an_key(an->file, e->flows_out[i], 2), h->seq};
			}
		note_ts(an, e->ts, e->ts + dur);
		return an->err;
	}
	if (tr->kind != 3)
		return 0;
	int kind = work_kind(e->category);
	if (kind < 0)
		return 0; /* annotations and sync ranges on GPU rows are not work */
	struct an_work *w = PUSH(an, work, nwork, workcap);
	if (!w)
		return fail(an, -ENOMEM);
	*w = (struct an_work){.ts = e->ts,
	                      .dur = dur,
	                      .corr = e->correlation_id,
	                      .flow = e->nflows_in ? an_key(an->file, e->flows_in[0], 2) : 0,
	                      .stream = tr->idx,
	                      .name = intern(an, e->name),
	                      .kind = (uint8_t)kind};
	if (kind == W_COPY && has(e->name, "Pageable"))
		w->flags |= WF_PAGEABLE;
	if (kind == W_COPY && (has(e->name, "DtoH") || has(e->name, "Device -> Pageable") ||
	                       has(e->name, "Device -> Pinned")))
		w->flags |= WF_DTOH;
	if (kind == W_KERNEL && has(e->name, "nccl"))
		w->flags |= WF_NCCL;
	for (size_t i = 0; i < e->nargs; i++) {
		const struct cuptrace_arg *a = &e->args[i];
		if (!a->key || strcmp(a->key, "bytes"))
			continue;
		if (a->type == CUPTRACE_ARG_UINT)
			w->bytes = a->v.u;
		else if (a->type == CUPTRACE_ARG_INT && a->v.i > 0)
			w->bytes = (uint64_t)a->v.i;
		else if (a->type == CUPTRACE_ARG_DOUBLE && a->v.d > 0)
			w->bytes = (uint64_t)a->v.d;
	}
	note_ts(an, e->ts, e->ts + dur);
	return an->err;
}

/* A merged trace keeps each input's trace info as an instant on the input's first process
 * (merge_meta.h): the rank and host of that process. The instant sits on the process's main
 * thread (older merges: on the process track itself), so that no track holds only it. */
static int an_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	struct an *an = an_of(s);
	if (an->err || !e->category || strcmp(e->category, CUPTRACE_META_CATEGORY) || !e->name ||
	    strncmp(e->name, CUPTRACE_META_INFO, strlen(CUPTRACE_META_INFO)))
		return an->err;
	uint64_t *v = cuptrace_u64map_get(&an->trk, an_key(an->file, e->track_uuid, 0));
	if (!v)
		return 0;
	const struct an_track *tr = &an->tracks[*v - 1];
	uint32_t wi = tr->kind == 4 ? tr->idx : UINT32_MAX;
	if (tr->kind == 1 && an->threads[tr->idx].tid >= 0)
		wi = who_get(an, an->threads[tr->idx].pid);
	if (wi == UINT32_MAX)
		return an->err;
	struct an_who *w = &an->who[wi];
	for (size_t i = 0; i < e->nargs; i++) {
		const struct cuptrace_arg *a = &e->args[i];
		if (!a->key)
			continue;
		if (!strcmp(a->key, "rank")) {
			struct cuptrace_meta m = {
			    .key = a->key,
			    .is_int = a->type != CUPTRACE_ARG_STRING,
			    .i = a->type == CUPTRACE_ARG_UINT ? (int64_t)a->v.u : a->v.i,
			    .s = a->type == CUPTRACE_ARG_STRING ? a->v.s : NULL};
			int64_t r;
			if ((a->type == CUPTRACE_ARG_INT || a->type == CUPTRACE_ARG_UINT ||
			     a->type == CUPTRACE_ARG_STRING) &&
			    stats_meta_int(&m, &r) && r >= 0 && r <= INT32_MAX)
				w->rank = (int)r;
		} else if (!strcmp(a->key, "hostname") && a->type == CUPTRACE_ARG_STRING &&
		           real_host(a->v.s)) {
			w->host = intern(an, a->v.s);
		}
	}
	return an->err;
}

static int an_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	(void)e;
	return an_of(s)->err;
}

/* The frame a sample is told by: the innermost one of the program's own code, that is outside
 * Python's library and installed packages; else the innermost. */
static int user_file(const char *f)
{
	return f && *f != '<' && !strstr(f, "/lib/python") && !strstr(f, "site-packages") &&
	       !strstr(f, "dist-packages");
}

static int an_stack(struct cuptrace_sink *s, const struct cuptrace_stack *st)
{
	struct an *an = an_of(s);
	if (an->err || !st->nframes)
		return an->err;
	const struct cuptrace_frame *f = &st->frames[st->nframes - 1];
	for (size_t i = st->nframes; i-- > 0;)
		if (user_file(st->frames[i].file)) {
			f = &st->frames[i];
			break;
		}
	const char *file = f->file ? f->file : f->module ? f->module : "?";
	const char *base = strrchr(file, '/');
	char buf[512];
	int n = snprintf(buf, sizeof(buf), "%s (%s:%u)", f->function ? f->function : "??",
	                 base ? base + 1 : file, f->line);
	uint32_t id = cuptrace_strtab_intern(&an->strs, buf,
	                                     n < 0                     ? 0
	                                     : (size_t)n < sizeof(buf) ? (size_t)n
	                                                               : sizeof(buf) - 1);
	int created;
	uint64_t *v = id ? cuptrace_u64map_put(&an->stack_frame, st->id, &created) : NULL;
	if (!v)
		return an->err = -ENOMEM;
	*v = id;
	return 0;
}

static int an_sample(struct cuptrace_sink *s, const struct cuptrace_sample *e)
{
	struct an *an = an_of(s);
	uint64_t *v = an->err ? NULL : cuptrace_u64map_get(&an->stack_frame, e->stack_id);
	if (!v)
		return an->err;
	if (CUPTRACE_GROW(an->samples, an->samplecap, an->nsamples + 1))
		return an->err = -ENOMEM;
	an->samples[an->nsamples++] = (struct an_sample){e->ts, e->tid, (uint32_t)*v};
	return 0;
}

static int an_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	struct an *an = an_of(s);
	/* The one caveat the metadata carries for the analyses: GPU work CUPTI did not record. */
	for (size_t i = 0; i < n; i++) {
		int64_t v;
		if (m[i].key && !strcmp(m[i].key, CUPTRACE_META_UNRECORDED_DEVICE_GRAPHS) &&
		    stats_meta_int(&m[i], &v) && v > 0)
			an->job->unrecorded_device_graphs += (uint64_t)v;
		/* A damaged input: the answer is over what could be read, and says so. */
		if (m[i].key && !strcmp(m[i].key, CUPTRACE_META_READ_DAMAGE) && !m[i].is_int &&
		    m[i].s) {
			char *old = an->job->damage;
			size_t n0 = old ? strlen(old) + 2 : 0, n1 = strlen(m[i].s);
			char *d = realloc(old, n0 + n1 + 1);
			if (!d)
				return fail(an, -ENOMEM);
			if (n0)
				memcpy(d + n0 - 2, "; ", 2);
			memcpy(d + n0, m[i].s, n1 + 1);
			an->job->damage = d;
		}
	}
	return an->err;
}

/* Forgets the file's events, keeping the arrays' room for the next file. */
static void file_reset(struct an *an)
{
	cuptrace_strtab_free(&an->strs);
	cuptrace_strtab_init(&an->strs);
	cuptrace_u64map_free(&an->trk);
	cuptrace_u64map_free(&an->thr_of);
	cuptrace_u64map_free(&an->name_thr);
	cuptrace_u64map_free(&an->stream_of);
	cuptrace_u64map_free(&an->who_of);
	an->ntracks = an->nthreads = an->ngpus = an->nstreams = 0;
	an->nhost = an->nwork = an->nflows = an->nwho = 0;
	an->nsamples = 0;
	cuptrace_u64map_free(&an->stack_frame);
	an->min_ts = an->max_ts = 0;
	an->have_ts = 0;
	an->max_uuid = 0;
	an->file_rank = -1;
	an->file_host = 0;
}

/* The file read so far: analyzed, folded into the job, forgotten. */
static int file_done(struct an *an)
{
	struct cuptrace_analysis part;
	memset(&part, 0, sizeof(part));
	an->out = &part;
	int err = an->err ? an->err : an_compute(an);
	an->out = NULL;
	if (!err)
		err = an_fold(an, &part);
	cuptrace_analysis_free(&part);
	file_reset(an);
	return err ? fail(an, err) : 0;
}

static int an_finish(struct cuptrace_sink *s)
{
	struct an *an = an_of(s);
	if (an->err || file_done(an))
		return an->err;
	int err = an_job_finish(an);
	return err ? fail(an, err) : 0;
}

static void an_destroy(struct cuptrace_sink *s)
{
	if (!s)
		return;
	struct an *an = an_of(s);
	cuptrace_strtab_free(&an->strs);
	free(an->samples);
	cuptrace_u64map_free(&an->stack_frame);
	cuptrace_u64map_free(&an->trk);
	cuptrace_u64map_free(&an->thr_of);
	cuptrace_u64map_free(&an->name_thr);
	cuptrace_u64map_free(&an->stream_of);
	cuptrace_u64map_free(&an->who_of);
	an_fold_free(&an->fold);
	free(an->who);
	free(an->tracks);
	free(an->threads);
	free(an->gpus);
	free(an->streams);
	free(an->host);
	free(an->work);
	free(an->flows);
	free(s);
}

static const struct cuptrace_sink_ops an_ops = {
    .name = "analyze",
    .begin = an_begin,
    .track = an_track_decl,
    .slice = an_slice,
    .instant = an_instant,
    .counter = an_counter,
    .stack = an_stack,
    .sample = an_sample,
    .meta = an_meta,
    .finish = an_finish,
    .destroy = an_destroy,
};

struct cuptrace_sink *cuptrace_analyze_sink_new(struct cuptrace_analysis *out,
                                                const struct cuptrace_analyze_opts *opts)
{
	struct an_sink *s;
	if (!out || !(s = calloc(1, sizeof(*s)))) {
		errno = out ? ENOMEM : EINVAL;
		return NULL;
	}
	memset(out, 0, sizeof(*out));
	s->base.ops = &an_ops;
	struct an *an = &s->an;
	an->job = out;
	an->file_rank = -1;
	if (opts)
		an->opts = *opts;
	if (an->opts.gap_ns <= 0)
		an->opts.gap_ns = 100000;
	if (an->opts.tiny_ns <= 0)
		an->opts.tiny_ns = 10000;
	if (an->opts.top <= 0)
		an->opts.top = 10;
	cuptrace_strtab_init(&an->strs);
	cuptrace_u64map_init(&an->trk);
	cuptrace_u64map_init(&an->thr_of);
	cuptrace_u64map_init(&an->name_thr);
	cuptrace_u64map_init(&an->stream_of);
	cuptrace_u64map_init(&an->who_of);
	return &s->base;
}

void cuptrace_analyze_next_file(struct cuptrace_sink *sink)
{
	if (!sink || sink->ops != &an_ops)
		return;
	struct an *an = an_of(sink);
	if (!an->err)
		file_done(an);
	an->file++;
}
