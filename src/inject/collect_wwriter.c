/* The writer thread's side of capture windows and of the flight recorder: each CUPTI buffer's
 * records through the window filter into their window's output (the trace file, or one file
 * per window when the name has %n), windows finished once all their records arrived, and the
 * flight recorder's ring of buffers written out on request (collect_window.c decides when).
 *
 * Threads: the writer thread only, except where it reads the window log and dump requests under
 * s->win.lock. Ownership: the sticky records (devices, contexts, streams, names: copies), the ring
 * and its buffers, the filter and the per-window outputs are the writer's. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject/collect_state.h"
#include "window/ring.h"
#include "window/wfilter.h"
#include "common/log.h"
#include "output/recfile.h"

static int is_sticky(const CUpti_Activity *r)
{
	return r->kind == CUPTI_ACTIVITY_KIND_DEVICE || r->kind == CUPTI_ACTIVITY_KIND_CONTEXT ||
	       r->kind == CUPTI_ACTIVITY_KIND_STREAM || r->kind == CUPTI_ACTIVITY_KIND_NAME;
}

static void keep_sticky(struct collect_session *s, const CUpti_Activity *r, uint32_t size)
{
	/* Every window's opening dumps the devices, contexts and streams again: keep one. */
	for (size_t i = 0; i < s->ww.nsticky; i++)
		if (s->ww.sticky_sizes[i] == size && !memcmp(s->ww.sticky[i], r, size))
			return;
	if (CUPTRACE_GROW(s->ww.sticky, s->ww.capsticky, s->ww.nsticky + 1) ||
	    CUPTRACE_GROW(s->ww.sticky_sizes, s->ww.capsticky_sizes, s->ww.nsticky + 1))
		return;
	CUpti_Activity *c = malloc(size);
	if (!c)
		return;
	memcpy(c, r, size);
	s->ww.sticky[s->ww.nsticky] = c;
	s->ww.sticky_sizes[s->ww.nsticky++] = size;
}

void collect_wwriter_thread(struct collect_session *s, int64_t tid, const char *name)
{
	if (!(s->win.active || s->win.ring) ||
	    CUPTRACE_GROW(s->ww.names, s->ww.capnames, s->ww.nnames + 1))
		return;
	s->ww.names[s->ww.nnames].tid = tid;
	snprintf(s->ww.names[s->ww.nnames].name, sizeof(s->ww.names[0].name), "%s", name);
	s->ww.nnames++;
}

/* ---- outputs ---- */

/* Records into a consumer: a window's file, or the session's consumers (s->to). */
static int add_records(const struct cuptrace_consumer *c, const CUpti_Activity *const *recs,
                       const uint32_t *sizes, size_t n)
{
	return n ? cuptrace_consumer_records(c, recs, sizes, n) : 0;
}

/* A write error of o: the watched window's capture keeps its own (top's file failing is no
 * failure of the trace), any other output the session's (collect_note_output_err). */
static void note_err(struct collect_session *s, const struct collect_output *o, int err)
{
	if (o != &s->ww.watch.out) {
		collect_note_output_err(s, o, err);
	} else if (err && !s->ww.watch.err) {
		s->ww.watch.err = err;
		cuptrace_err("capture window %" PRIu64 " (cuptrace top): writing %s failed: %s",
		             s->ww.watch.number, o->path, strerror(-err));
	}
}

/* A new file has no devices, contexts, streams or thread names yet: what the run said of them
 * so far. o: the output named in an error. */
static void replay_sticky(struct collect_session *s, const struct cuptrace_consumer *c,
                          const struct collect_output *o)
{
	for (size_t i = 0; i < s->ww.nnames; i++)
		cuptrace_consumer_thread_name(c, s->ww.names[i].tid, s->ww.names[i].name);
	note_err(s, o,
	         add_records(c, (const CUpti_Activity *const *)s->ww.sticky, s->ww.sticky_sizes,
	                     s->ww.nsticky));
}

/* "run-%n.pftrace" -> "run-3.pftrace" (the rest of the template was expanded at start). */
static char *numbered(const char *tmpl, uint64_t n)
{
	size_t len = strlen(tmpl) + 24;
	char *out = malloc(len);
	if (!out)
		return NULL;
	size_t k = 0;
	for (const char *p = tmpl; *p && k + 22 < len; p++) {
		if (p[0] == '%' && p[1] == 'n') {
			k += (size_t)snprintf(out + k, len - k, "%" PRIu64, n);
			p++;
		} else {
			out[k++] = *p;
		}
	}
	out[k] = 0;
	return out;
}

static struct collect_wout *out_for(struct collect_session *s, uint64_t number, int create)
{
	for (size_t i = 0; i < s->ww.nouts; i++)
		if (s->ww.outs[i].number == number)
			return &s->ww.outs[i];
	if (!create || s->ww.nouts == COLLECT_WW_MAX_OUTS)
		return NULL;
	struct collect_wout *o = &s->ww.outs[s->ww.nouts];
	memset(o, 0, sizeof(*o));
	o->number = number;
	o->out.path = numbered(s->out.path, number);
	if (!o->out.path)
		return NULL;
	int e = collect_open_output(s, &o->out);
	if (e) {
		cuptrace_err("capture window %" PRIu64 ": cannot write %s: %s", number, o->out.path,
		             strerror(-e));
		free(o->out.path);
		return NULL;
	}
	replay_sticky(s, &o->out.cons, &o->out);
	s->ww.nouts++;
	return o;
}

/* ---- the watched window's capture (cuptrace top attached: collect_window.c's watch) ---- */

/* Opens the capture of a watched window that opened since the last look: DIR/pPID.wN.cupti,
 * written straight there (top tails it as it grows), with what the run said of its devices,
 * contexts, streams and threads so far. */
static void watch_sync(struct collect_session *s)
{
	uint64_t number = 0;
	char dir[256] = "";
	pthread_mutex_lock(&s->win.lock);
	for (size_t i = s->win.nlog; i-- > 0 && !number;)
		if (s->win.log[i].watch[0] && !s->win.log[i].final &&
		    s->win.log[i].number > s->ww.watch.number) {
			number = s->win.log[i].number;
			snprintf(dir, sizeof(dir), "%s", s->win.log[i].watch);
		}
	pthread_mutex_unlock(&s->win.lock);
	if (!number)
		return;
	struct collect_wout *o = &s->ww.watch;
	if (o->out.cons.ops) {
		/* An earlier watch not finished yet (cannot be: one window at a time). */
		return;
	}
	free(o->out.path);
	memset(o, 0, sizeof(*o));
	o->number = number;
	size_t len = strlen(dir) + 64;
	o->out.path = malloc(len);
	if (!o->out.path)
		return;
	snprintf(o->out.path, len, "%s/p%d.w%" PRIu64 ".cupti", dir, (int)s->pid, number);
	int e = collect_open_watch_output(s, &o->out);
	if (e) {
		o->err = e;
		cuptrace_err("capture window %" PRIu64 " (cuptrace top): cannot write %s: %s",
		             number, o->out.path, strerror(-e));
		return;
	}
	replay_sticky(s, &o->out.cons, &o->out);
}

static int is_watched(struct collect_session *s, uint64_t number)
{
	return number && s->ww.watch.number == number;
}

/* What a window holds: its kernels (for the summary) and its GPU work (kernels, copies,
 * memsets, graph launches: a window without any gets no file). */
static void count_kernels(struct collect_session *s, uint64_t number,
                          const CUpti_Activity *const *recs, size_t n)
{
	uint64_t k = 0, work = 0;
	for (size_t i = 0; i < n; i++) {
		CUpti_ActivityKind kind = recs[i]->kind;
		k += kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		work += kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
		        kind == CUPTI_ACTIVITY_KIND_MEMCPY || kind == CUPTI_ACTIVITY_KIND_MEMCPY2 ||
		        kind == CUPTI_ACTIVITY_KIND_MEMSET ||
		        kind == CUPTI_ACTIVITY_KIND_GRAPH_TRACE ||
		        kind == CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE;
	}
	if (!work)
		return;
	pthread_mutex_lock(&s->win.lock);
	for (size_t i = s->win.nlog; i-- > 0;)
		if (s->win.log[i].number == number) {
			s->win.log[i].kernels += k;
			s->win.log[i].records += work;
			break;
		}
	pthread_mutex_unlock(&s->win.lock);
}

/* Records of one window into its output. */
static void add_to(struct collect_session *s, uint64_t number, const CUpti_Activity *const *recs,
                   const uint32_t *sizes, size_t n)
{
	if (!n)
		return;
	count_kernels(s, number, recs, n);
	if (is_watched(s, number)) {
		struct collect_wout *w = &s->ww.watch;
		int e = w->out.cons.ops ? add_records(&w->out.cons, recs, sizes, n) : 0;
		if (e && !w->err) {
			w->err = e;
			cuptrace_err("capture window %" PRIu64 ": writing %s failed: %s", number,
			             w->out.path, strerror(-e));
		}
		return;
	}
	if (!s->win.per_file) {
		collect_note_write_err(s, add_records(&s->to, recs, sizes, n));
		return;
	}
	struct collect_wout *o = out_for(s, number, 1);
	if (!o)
		return;
	int e = add_records(&o->out.cons, recs, sizes, n);
	if (e && !o->err) {
		o->err = e;
		cuptrace_err("capture window %" PRIu64 ": writing %s failed: %s", number,
		             o->out.path, strerror(-e));
	}
}

/* Records that describe the run: into every open file (and kept for those opened later). */
static void add_to_all(struct collect_session *s, const CUpti_Activity *const *recs,
                       const uint32_t *sizes, size_t n)
{
	if (s->ww.watch.out.cons.ops)
		add_records(&s->ww.watch.out.cons, recs, sizes, n);
	if (!s->win.per_file) {
		collect_note_write_err(s, add_records(&s->to, recs, sizes, n));
		return;
	}
	for (size_t i = 0; i < s->ww.nouts; i++)
		add_records(&s->ww.outs[i].out.cons, recs, sizes, n);
}

/* Groups records by verdict (a buffer usually holds one window's) and hands each group on. */
static void dispatch(struct collect_session *s, const CUpti_Activity *const *recs,
                     const uint32_t *sizes, const int64_t *verd, size_t n)
{
	if (CUPTRACE_GROW(s->ww.grp, s->ww.capgrp, n) ||
	    CUPTRACE_GROW(s->ww.grp_sizes, s->ww.capgrp_sizes, n))
		return;
	int64_t done_v[8];
	size_t ndone = 0;
	/* Windows first, then what describes the run: a file that a window's records open
	 * here gets the run's records of this very buffer too. */
	for (size_t k = 0; k < 2 * n; k++) {
		size_t i = k % n;
		int64_t v = verd[i];
		if (v == CUPTRACE_WF_DROP || v == CUPTRACE_WF_HELD ||
		    (k < n) != (v != CUPTRACE_WF_ALL))
			continue;
		int seen = 0;
		for (size_t q = 0; q < ndone; q++)
			seen |= done_v[q] == v;
		if (seen)
			continue;
		size_t m = 0;
		for (size_t j = i; j < n; j++)
			if (verd[j] == v) {
				s->ww.grp[m] = recs[j];
				s->ww.grp_sizes[m++] = sizes ? sizes[j] : 0;
			}
		if (v == CUPTRACE_WF_ALL)
			add_to_all(s, s->ww.grp, s->ww.grp_sizes, m);
		else
			add_to(s, v > 0 ? (uint64_t)v : 0, s->ww.grp, s->ww.grp_sizes, m);
		if (ndone < 8)
			done_v[ndone++] = v;
	}
}

static void dispatch_released(struct collect_session *s)
{
	const CUpti_Activity *const *recs;
	const int64_t *verd;
	size_t n = cuptrace_wfilter_released(&s->ww.filt, &recs, &verd);
	if (!n)
		return;
	/* The copies' sizes: the record struct of their kind (dispatch uses grp_sizes itself). */
	uint32_t *sz = malloc(n * sizeof(*sz));
	if (!sz)
		return;
	for (size_t i = 0; i < n; i++)
		sz[i] = (uint32_t)cuptrace_record_min_size(recs[i]->kind);
	dispatch(s, recs, sz, verd, n);
	free(sz);
}

/* The filter learns the windows opened and closed since the last look. */
static void sync_windows(struct collect_session *s)
{
	pthread_mutex_lock(&s->win.lock);
	for (; s->ww.synced < s->win.nlog; s->ww.synced++)
		cuptrace_wfilter_open(&s->ww.filt, s->win.log[s->ww.synced].number,
		                      s->win.log[s->ww.synced].open);
	for (size_t i = 0; i < s->win.nlog; i++)
		if (s->win.log[i].close != INT64_MAX && !s->win.log[i].final)
			cuptrace_wfilter_close(&s->ww.filt, s->win.log[i].number,
			                       s->win.log[i].close);
	pthread_mutex_unlock(&s->win.lock);
}

/* ---- the flight recorder's ring ---- */

static void ring_keep(struct collect_session *s, uint8_t *buf, size_t valid,
                      const CUpti_Activity **recs, size_t n)
{
	if (!s->ww.ring_ready) {
		cuptrace_ring_init(&s->ww.ring, s->win.ring_ns, s->win.ring_max);
		s->ww.ring_ready = 1;
	}
	int64_t lo = INT64_MAX, hi = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t t;
		uint32_t corr;
		if (cuptrace_wrecord_place(recs[i], &t, &corr) && t > 0) {
			lo = t < lo ? t : lo;
			hi = t > hi ? t : hi;
		}
	}
	if (cuptrace_ring_push(&s->ww.ring, buf, valid, lo == INT64_MAX ? 0 : lo, hi))
		atomic_fetch_add(&s->records_dropped, n);
}

void collect_wwriter_buffer(struct collect_session *s, uint8_t *buf, size_t valid,
                            const CUpti_Activity **recs, const uint32_t *sizes, size_t n)
{
	if (s->win.ring) {
		for (size_t i = 0; i < n; i++)
			if (is_sticky(recs[i]))
				keep_sticky(s, recs[i], sizes[i]);
		ring_keep(s, buf, valid, recs, n);
		return;
	}
	collect_wwriter_records(s, (const CUpti_Activity *const *)recs, sizes, n);
	free(buf);
}

void collect_wwriter_records(struct collect_session *s, const CUpti_Activity *const *recs,
                             const uint32_t *sizes, size_t n)
{
	if (!s->ww.filt_ready) {
		cuptrace_wfilter_init(&s->ww.filt);
		s->ww.filt_ready = 1;
	}
	sync_windows(s);
	watch_sync(s);
	if (CUPTRACE_GROW(s->ww.verd, s->ww.capverd, n)) {
		atomic_fetch_add(&s->records_dropped, n);
		return;
	}
	cuptrace_wfilter_batch(&s->ww.filt, recs, sizes, n, s->ww.verd);
	/* Sticky records went into the files already open, and are kept for later ones. */
	dispatch(s, recs, sizes, s->ww.verd, n);
	dispatch_released(s);
	for (size_t i = 0; i < n; i++)
		if (is_sticky(recs[i]))
			keep_sticky(s, recs[i], sizes[i]);
}

/* ---- finishing a window ---- */

/* The range that opened a window, and the window itself, as NVTX ranges on the thread that
 * opened it: CUPTI recorded no START for the range whose push turned recording on. */
static void mark_window(struct collect_session *s, const struct collect_wlog *l,
                        const struct cuptrace_consumer *c, const struct collect_output *o)
{
	static uint32_t next_id = 0x7f000000u;
	CUpti_ActivityMarker2 m[4];
	char names[2][192];
	size_t k = 0;
	int64_t tid = l->range_tid ? l->range_tid : (int64_t)s->pid;
	/* The window on the "cuptrace" category, the range as the NVTX range it was. */
	struct {
		const char *name, *domain;
		int64_t t0, t1;
	} spans[2];
	size_t ns = 0;
	snprintf(names[0], sizeof(names[0]), "capture window %" PRIu64 " (%s)", l->number,
	         l->why_open);
	spans[ns++] = (typeof(spans[0])){names[0], "cuptrace", l->open, l->close};
	if (l->range[0]) {
		snprintf(names[1], sizeof(names[1]), "%s", l->range);
		int64_t end = l->range_end != INT64_MAX ? l->range_end : l->close;
		spans[ns++] = (typeof(spans[0])){names[1], NULL, l->range_begin, end};
	}
	for (size_t i = 0; i < ns; i++) {
		uint32_t id = next_id++;
		for (int e = 0; e < 2; e++) {
			CUpti_ActivityMarker2 *r = &m[k++];
			memset(r, 0, sizeof(*r));
			r->kind = CUPTI_ACTIVITY_KIND_MARKER;
			r->flags =
			    e ? CUPTI_ACTIVITY_FLAG_MARKER_END : CUPTI_ACTIVITY_FLAG_MARKER_START;
			r->timestamp = (uint64_t)(e ? spans[i].t1 : spans[i].t0);
			r->id = id;
			r->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
			r->objectId.pt.processId = (uint32_t)s->pid;
			r->objectId.pt.threadId = (uint32_t)tid;
			r->name = e ? NULL : spans[i].name;
			r->domain = spans[i].domain;
		}
	}
	const CUpti_Activity *recs[4];
	uint32_t sizes[4];
	for (size_t i = 0; i < k; i++) {
		recs[i] = (const CUpti_Activity *)&m[i];
		sizes[i] = sizeof(m[i]);
	}
	note_err(s, o, cuptrace_consumer_records(c, recs, sizes, k));
}

/* Metadata of a window: how it was chosen and where it lies in the run. */
static void window_meta(struct collect_session *s, const struct collect_wlog *l, char *key,
                        size_t kn, char *val, size_t vn)
{
	char d[200];
	cuptrace_wspec_describe(&s->win.spec, d, sizeof(d));
	snprintf(key, kn, "capture_window_%" PRIu64, l->number);
	snprintf(val, vn, "%s; opened: %s; closed: %s; %.6f s to %.6f s after the first CUDA call",
	         d, l->why_open, l->why_close[0] ? l->why_close : "end of run",
	         (double)(l->open - s->start_boot) / 1e9, (double)(l->close - s->start_boot) / 1e9);
}

/* Writes what a finished output holds and closes it (its converter's held calls, the late
 * metadata), as the session's finish does for the trace file; then the file goes in place
 * (keep; an older file stays where a write failed: prior_err or one now), or is removed and its
 * name left as it was. Where the trace now is goes into file (n bytes; "" if nowhere), if given.
 * Returns the first error of closing it. */
static int close_output(struct collect_session *s, struct collect_output *o, int keep,
                        int prior_err, char *file, size_t n)
{
	int err = collect_finish_output(s, o, NULL);
	const char *where = collect_settle_output(o, keep, prior_err ? prior_err : err);
	if (file)
		snprintf(file, n, "%s", where ? where : "");
	collect_release_output(o);
	return err;
}

static void finish_window(struct collect_session *s, uint64_t number)
{
	cuptrace_wfilter_final(&s->ww.filt, number);
	dispatch_released(s);
	pthread_mutex_lock(&s->win.lock);
	struct collect_wlog copy;
	memset(&copy, 0, sizeof(copy));
	for (size_t i = 0; i < s->win.nlog; i++)
		if (s->win.log[i].number == number)
			copy = s->win.log[i];
	pthread_mutex_unlock(&s->win.lock);
	char key[64], val[1024];
	window_meta(s, &copy, key, sizeof(key), val, sizeof(val));
	char file[512] = "";
	if (is_watched(s, number)) {
		struct collect_wout *w = &s->ww.watch;
		if (w->out.cons.ops) {
			mark_window(s, &copy, &w->out.cons, &w->out);
			cuptrace_consumer_meta(&w->out.cons, key, val);
			cuptrace_consumer_meta(&w->out.cons, "capture_window", val);
			int e = collect_finish_output(s, &w->out, NULL);
			collect_release_output(&w->out);
			if (e || w->err)
				cuptrace_err("capture window %" PRIu64 ": %s is incomplete: %s",
				             number, w->out.path, strerror(-(e ? e : w->err)));
			snprintf(file, sizeof(file), "%s", w->out.path);
		}
		/* The number stays: records of this window that come late go nowhere. */
		free(w->out.path);
		w->out.path = NULL;
	} else if (s->win.per_file) {
		/* A window in which this process gave the GPU no work gets no file (the
		 * launcher of a job, a helper process that only looked at the GPUs). */
		struct collect_wout *o = out_for(s, number, copy.records > 0);
		if (o) {
			mark_window(s, &copy, &o->out.cons, &o->out);
			cuptrace_consumer_meta(&o->out.cons, key, val);
			cuptrace_consumer_meta(&o->out.cons, "capture_window", val);
			int e =
			    close_output(s, &o->out, copy.records > 0, o->err, file, sizeof(file));
			if (e || o->err)
				cuptrace_err("capture window %" PRIu64 ": %s is incomplete: %s",
				             number, o->out.path, strerror(-(e ? e : o->err)));
			free(o->out.path);
			*o = s->ww.outs[--s->ww.nouts];
		}
	} else {
		mark_window(s, &copy, &s->to, &s->out);
		cuptrace_consumer_meta(&s->to, key, val);
		snprintf(file, sizeof(file), "%s", s->out.path ? s->out.path : "");
	}
	pthread_mutex_lock(&s->win.lock);
	for (size_t i = 0; i < s->win.nlog; i++)
		if (s->win.log[i].number == number) {
			s->win.log[i].final = 1;
			snprintf(s->win.log[i].file, sizeof(s->win.log[i].file), "%s", file);
		}
	pthread_cond_broadcast(&s->win.changed);
	pthread_mutex_unlock(&s->win.lock);
}

/* ---- the flight recorder's dumps ---- */

/* A dump's held records that its filter decided (all of the dump's one window): into its
 * consumer (o: the output named in an error). Returns how many. */
static size_t add_released(struct collect_session *s, struct cuptrace_wfilter *f,
                           const struct cuptrace_consumer *c, const struct collect_output *o)
{
	const CUpti_Activity *const *rel;
	const int64_t *rv;
	size_t nr = cuptrace_wfilter_released(f, &rel, &rv);
	for (size_t i = 0; i < nr; i++) {
		uint32_t sz = (uint32_t)cuptrace_record_min_size(rel[i]->kind);
		collect_note_output_err(s, o, add_records(c, &rel[i], &sz, 1));
	}
	return nr;
}

static void dump_ring(struct collect_session *s, struct collect_dump *d)
{
	int64_t from = d->from;
	if (!s->win.per_file && from < s->ww.last_dump_to)
		from =
		    s->ww.last_dump_to; /* one file: what an earlier dump wrote is there already */
	struct cuptrace_wfilter f;
	cuptrace_wfilter_init(&f);
	cuptrace_wfilter_open(&f, 1, from);
	cuptrace_wfilter_close(&f, 1, d->to);
	s->ww.dumps_written++;
	/* Into the dump's own file, or the session's consumers. */
	struct collect_wout *o = NULL;
	const struct cuptrace_consumer *c = &s->to;
	struct collect_output *out = &s->out;
	if (s->win.per_file) {
		o = out_for(s, s->ww.dumps_written, 1);
		if (!o) {
			cuptrace_wfilter_free(&f);
			return;
		}
		c = &o->out.cons;
		out = &o->out;
	}
	/* Devices, contexts, streams: once per file (a per-dump file replayed them on open). */
	if (!s->win.per_file && s->ww.dumps_written == 1)
		replay_sticky(s, c, out);
	uint64_t kept = 0;
	const CUpti_Activity **recs = NULL;
	uint32_t *sizes = NULL;
	int64_t *verd = NULL;
	size_t cap = 0, capsz = 0, capv = 0;
	for (size_t b = 0; b < s->ww.ring.n; b++) {
		struct cuptrace_ringbuf *rb = &s->ww.ring.bufs[b];
		if (rb->tmax && rb->tmax < from - 10 * (int64_t)1000000000)
			continue; /* older than anything launched in the window could be */
		size_t n = 0;
		CUpti_Activity *r = NULL;
		while (cuptiActivityGetNextRecord(rb->buf, rb->valid, &r) == CUPTI_SUCCESS) {
			if (CUPTRACE_GROW(recs, cap, n + 1) || CUPTRACE_GROW(sizes, capsz, n + 1))
				break;
			recs[n++] = r;
		}
		for (size_t i = 0; i < n; i++) {
			const uint8_t *end =
			    i + 1 < n ? (const uint8_t *)recs[i + 1] : rb->buf + rb->valid;
			sizes[i] = (uint32_t)(end - (const uint8_t *)recs[i]);
		}
		if (CUPTRACE_GROW(verd, capv, n ? n : 1))
			break;
		cuptrace_wfilter_batch(&f, recs, sizes, n, verd);
		size_t m = 0;
		for (size_t i = 0; i < n; i++)
			if (verd[i] == 1) { /* sticky ones (ALL) were replayed */
				recs[m] = recs[i];
				sizes[m++] = sizes[i];
				kept++;
			}
		collect_note_output_err(s, out, add_records(c, recs, sizes, m));
		kept += add_released(s, &f, c, out);
	}
	cuptrace_wfilter_final(&f, 1);
	kept += add_released(s, &f, c, out);
	char key[64], val[400];
	snprintf(key, sizeof(key), "flight_recorder_dump_%" PRIu64, s->ww.dumps_written);
	snprintf(val, sizeof(val),
	         "%s: %.6f s to %.6f s after the first CUDA call; ring: the last %.3f s, at most "
	         "%zu bytes (%zu held, %" PRIu64 " buffers aged out)",
	         d->why, (double)(from - s->start_boot) / 1e9,
	         (double)(d->to - s->start_boot) / 1e9, (double)s->win.ring_ns / 1e9,
	         s->win.ring_max, s->ww.ring.bytes, s->ww.ring.evicted);
	cuptrace_consumer_meta(c, key, val);
	snprintf(d->file, sizeof(d->file), "%s", out->path ? out->path : "");
	if (s->win.per_file) {
		cuptrace_consumer_meta(c, "flight_recorder_dump", val);
		int e = close_output(s, out, 1, 0, d->file, sizeof(d->file));
		if (e)
			cuptrace_err("flight recorder: %s is incomplete: %s", out->path,
			             strerror(-e));
		free(o->out.path);
		*o = s->ww.outs[--s->ww.nouts];
	}
	if (!kept)
		cuptrace_info("flight recorder: %s: nothing in [%.3f s, %.3f s]", d->why,
		              (double)(from - s->start_boot) / 1e9,
		              (double)(d->to - s->start_boot) / 1e9);
	if (d->to > s->ww.last_dump_to)
		s->ww.last_dump_to = d->to;
	free(recs);
	free(sizes);
	free(verd);
	cuptrace_wfilter_free(&f);
}

/* ---- the writer's loop ---- */

void collect_wwriter_poll(struct collect_session *s, uint64_t taken)
{
	if (!(s->win.active || s->win.ring))
		return;
	uint64_t seen = taken + atomic_load(&s->buffers_dropped);
	for (;;) {
		uint64_t number = 0;
		struct collect_dump *dump = NULL;
		pthread_mutex_lock(&s->win.lock);
		for (size_t i = 0; i < s->win.nlog && !number; i++)
			if (s->win.log[i].final_requested && !s->win.log[i].final &&
			    seen >= s->win.log[i].final_after)
				number = s->win.log[i].number;
		for (size_t i = 0; i < s->win.ndumps && !number && !dump; i++)
			if (s->win.dumps[i].requested && !s->win.dumps[i].done &&
			    seen >= s->win.dumps[i].final_after)
				dump = &s->win.dumps[i];
		pthread_mutex_unlock(&s->win.lock);
		if (number) {
			sync_windows(s);
			finish_window(s, number);
		} else if (dump) {
			/* The slot is not moved while it is requested and not done (ask_dump reuses
			 * done slots only). */
			dump_ring(s, dump);
			/* The program is dying of a fault: its one file is finished now, as the
			 * session's finish would (it will not run). */
			if (!strcmp(dump->why, "crash") && !s->win.per_file)
				collect_note_write_err(
				    s, close_output(s, &s->out, 1, s->write_err, NULL, 0));
			pthread_mutex_lock(&s->win.lock);
			dump->done = 1;
			pthread_cond_broadcast(&s->win.changed);
			pthread_mutex_unlock(&s->win.lock);
		} else {
			break;
		}
	}
	/* The watching top reads what it has within its refresh. */
	watch_sync(s);
	if (s->ww.watch.out.cons.ops && !s->ww.watch.err)
		note_err(s, &s->ww.watch.out, cuptrace_consumer_flush(&s->ww.watch.out.cons));
}

void collect_wwriter_end(struct collect_session *s)
{
	if (!(s->win.active || s->win.ring))
		return;
	/* Everything CUPTI had is in: every window and dump asked for is finished now. */
	pthread_mutex_lock(&s->win.lock);
	for (size_t i = 0; i < s->win.nlog; i++)
		if (!s->win.log[i].final) {
			s->win.log[i].final_requested = 1;
			s->win.log[i].final_after = 0;
		}
	for (size_t i = 0; i < s->win.ndumps; i++)
		if (!s->win.dumps[i].done) {
			s->win.dumps[i].requested = 1;
			s->win.dumps[i].final_after = 0;
		}
	pthread_mutex_unlock(&s->win.lock);
	collect_wwriter_poll(s, UINT64_MAX / 2);
	/* What the writer owned for windows. */
	if (s->ww.filt_ready)
		cuptrace_wfilter_free(&s->ww.filt);
	s->ww.filt_ready = 0;
	s->ww.synced = 0;
	for (size_t i = 0; i < s->ww.nsticky; i++)
		free(s->ww.sticky[i]);
	free(s->ww.sticky);
	free(s->ww.sticky_sizes);
	free(s->ww.names);
	free(s->ww.verd);
	free(s->ww.grp);
	free(s->ww.grp_sizes);
	if (s->ww.ring_ready)
		cuptrace_ring_free(&s->ww.ring);
	for (size_t i = 0; i < s->ww.nouts; i++) {
		close_output(s, &s->ww.outs[i].out, 1, s->ww.outs[i].err, NULL, 0);
		free(s->ww.outs[i].out.path);
	}
	if (s->ww.watch.out.cons.ops) { /* finished above; a failed open leaves only its name */
		collect_finish_output(s, &s->ww.watch.out, NULL);
		collect_release_output(&s->ww.watch.out);
	}
	free(s->ww.watch.out.path);
	memset(&s->ww, 0, sizeof(s->ww));
}
