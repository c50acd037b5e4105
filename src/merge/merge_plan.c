/* Side-by-side merge of several traces (merge.h), pass 1 and the plan: reads each input into a
 * stats sink (metadata, tracks, earliest event) while noting where slices of the alignment name
 * start (and, with --ranks, the ends of its NCCL kernels), then computes each input's shift, its
 * new pids and labels. Pass 2 is merge_write.c's. */
#include "merge/merge.h"
#include "merge/merge_auto.h"
#include "merge/merge_state.h"
#include "format/forward.h"
#include "stats/stats.h"
#include "stats/stats_meta.h"
#include "common/saturate.h"
#include "common/nccl.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct probe_sink {
	struct fwd_sink fwd; /* inner: the stats sink of in->st */
	struct in_state *in;
	const char *align_name;
	int ranks;
};

static int probe_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct probe_sink *s = (struct probe_sink *)sk;
	s->in->start_boottime_ns = info->start_boottime_ns;
	s->in->start_realtime_ns = info->start_realtime_ns;
	s->in->uuid_hi = info->trace_uuid_hi;
	s->in->uuid_lo = info->trace_uuid_lo;
	return fwd_begin(sk, info);
}

static int probe_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct probe_sink *s = (struct probe_sink *)sk;
	struct in_state *in = s->in;
	int err = fwd_slice(sk, e);
	struct cuptrace_nccl_kernel k;

	if (!err && s->ranks && e->name && cuptrace_nccl_parse(e->name, &k)) {
		struct nccl_end *v =
		    cuptrace_grow(in->nccl, &in->ncclcap, in->nnccl + 1, sizeof(*v));
		if (!v)
			return fwd_fail(&s->fwd, -ENOMEM);
		in->nccl = v;
		v[in->nnccl++] =
		    (struct nccl_end){cuptrace_hash_bytes(e->name, strlen(e->name)), e->ts,
		                      sat_add(e->ts, e->dur), cuptrace_nccl_symmetric(&k)};
	}
	if (!err && !s->ranks)
		merge_marks_note(&in->marks, e);
	if (err || !s->align_name || !e->name || strcmp(e->name, s->align_name))
		return err;
	int64_t *a = cuptrace_grow(in->align, &in->aligncap, in->nalign + 1, sizeof(*a));
	if (!a)
		return fwd_fail(&s->fwd, -ENOMEM);
	in->align = a;
	a[in->nalign++] = e->ts;
	return 0;
}

/* A host stack sample: not an event the stats count, but the earliest one decides the input's
 * shift as the earliest event does (a sample before it would land before 0, where Perfetto drops
 * it). */
static int probe_sample(struct cuptrace_sink *sk, const struct cuptrace_sample *e)
{
	struct in_state *in = ((struct probe_sink *)sk)->in;
	if (!in->nsamples || e->ts < in->samples_min_ts)
		in->samples_min_ts = e->ts;
	in->nsamples++;
	return 0;
}

static void probe_destroy(struct cuptrace_sink *sk)
{
	struct probe_sink *s = (struct probe_sink *)sk;
	if (s)
		cuptrace_sink_destroy(s->fwd.inner);
	free(s);
}

static const struct cuptrace_sink_ops probe_ops = {
    .name = "merge-probe",
    .begin = probe_begin,
    .track = fwd_track,
    .slice = probe_slice,
    .instant = fwd_instant,
    .counter = fwd_counter,
    .stack = fwd_stack,
    .sample = probe_sample,
    .meta = fwd_meta,
    .finish = fwd_finish,
    .destroy = probe_destroy,
};

static int probe(struct in_state *in, const char *path, const char *align_name, int ranks,
                 cuptrace_replay_fn replay, void *ctx)
{
	struct probe_sink *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	s->fwd.base.ops = &probe_ops;
	s->in = in;
	s->align_name = align_name;
	s->ranks = ranks;
	merge_marks_init(&in->marks);
	if (!(s->fwd.inner = cuptrace_stats_sink_new(&in->st))) {
		free(s);
		return -ENOMEM;
	}
	err = replay(ctx, path, &s->fwd.base);
	if (!err)
		err = s->fwd.base.ops->finish(&s->fwd.base);
	cuptrace_sink_destroy(&s->fwd.base);
	return err;
}

static int int64_cmp(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
	return a < b ? -1 : a > b;
}

/* The distinct pids of an input's tracks, processes first, in declaration order. */
static int collect_pids(struct in_state *in)
{
	const struct cuptrace_stats *st = &in->st;
	size_t cap = st->ntrk + 1;

	if (!(in->pids = calloc(cap, sizeof(*in->pids))) ||
	    !(in->newpids = calloc(cap, sizeof(*in->newpids))))
		return -ENOMEM;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < st->ntrk; i++) {
			if ((st->trk[i].kind == CUPTRACE_TRACK_PROCESS) != !pass)
				continue;
			size_t k = 0;
			while (k < in->npids && in->pids[k] != st->trk[i].pid)
				k++;
			if (k == in->npids)
				in->pids[in->npids++] = st->trk[i].pid;
		}
	if (!in->npids) {
		/* No track: the pid of the trace info, if it said one. */
		const struct cuptrace_meta *m = stats_meta_get(st, "pid");
		int64_t v = 0;
		in->pids[in->npids++] = m && stats_meta_int(m, &v) ? (int32_t)v : 0;
	}
	return 0;
}

/* Output pids: an input keeps a pid no earlier input took; otherwise it gets the next pid
 * above it that no earlier input took and no input holds originally, as a pid or a tid. */
static int assign_pids(struct cuptrace_merge *m)
{
	struct cuptrace_u64map orig, used;
	int err = 0;

	cuptrace_u64map_init(&orig);
	cuptrace_u64map_init(&used);
	for (size_t i = 0; i < m->n && !err; i++) {
		const struct in_state *in = &m->st->in[i];
		for (size_t k = 0; k < in->npids && !err; k++)
			if (!cuptrace_u64map_put(&orig, (uint32_t)in->pids[k], NULL))
				err = -ENOMEM;
		/* Thread ids too: a process whose pid is some thread's tid would confuse readers
		 * that take tid == pid for the main thread. */
		for (size_t k = 0; k < in->st.ntrk && !err; k++)
			if (in->st.trk[k].kind == CUPTRACE_TRACK_THREAD &&
			    !cuptrace_u64map_put(&orig, (uint32_t)in->st.trk[k].tid, NULL))
				err = -ENOMEM;
	}
	for (size_t i = 0; i < m->n && !err; i++) {
		struct in_state *in = &m->st->in[i];
		for (size_t k = 0; k < in->npids && !err; k++) {
			int32_t q = in->pids[k];
			if (cuptrace_u64map_get(&used, (uint32_t)q)) {
				do
					q = q >= INT32_MAX || q < 0 ? 1 : q + 1;
				while (cuptrace_u64map_get(&used, (uint32_t)q) ||
				       cuptrace_u64map_get(&orig, (uint32_t)q));
			}
			in->newpids[k] = q;
			if (!cuptrace_u64map_put(&used, (uint32_t)q, NULL))
				err = -ENOMEM;
		}
		m->in[i].orig_pid = in->pids[0];
		m->in[i].pid = in->newpids[0];
	}
	cuptrace_u64map_free(&orig);
	cuptrace_u64map_free(&used);
	return err;
}

/* Labels: as given, or the file's name; a label already taken gets " (2)", " (3)", ... */
static int make_labels(struct cuptrace_merge *m, const struct cuptrace_merge_input *inputs)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *base = inputs[i].label;
		if (!base) {
			base = strrchr(inputs[i].path, '/');
			base = base && base[1] ? base + 1 : inputs[i].path;
		}
		size_t len = strlen(base) + 24;
		char *l = malloc(len);
		if (!l)
			return -ENOMEM;
		snprintf(l, len, "%s", base);
		for (unsigned dup = 2;; dup++) {
			size_t k = 0;
			while (k < i && strcmp(m->in[k].label, l))
				k++;
			if (k == i)
				break;
			snprintf(l, len, "%s (%u)", base, dup);
		}
		m->in[i].label = l;
	}
	return 0;
}

/* What each process of input i says about where it comes from. */
static int make_note(struct cuptrace_merge *m, size_t i)
{
	struct in_state *in = &m->st->in[i];
	const struct cuptrace_merge_result *r = &m->in[i];
	char buf[4096];
	size_t len = (size_t)snprintf(buf, sizeof(buf),
	                              "cuptrace merge: input %zu of %zu, %s; original pid %" PRId32
	                              "; timestamps shifted by %" PRId64 " ns",
	                              i + 1, m->n, r->path, r->orig_pid, r->offset_ns);
	if (m->st->ranks && len < sizeof(buf))
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "; clock: %s%s",
		                        cuptrace_merge_clock_name(r->map.clock),
		                        r->map.clock == CUPTRACE_CLOCK_NCCL
		                            ? " (REALTIME refined by collective ends)"
		                            : "");
	const struct cuptrace_meta *g = stats_meta_get(&in->st, "hostname");
	char v[1024];
	if (g && len < sizeof(buf)) {
		stats_meta_str(g, v, sizeof(v));
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "; host %s", v);
	}
	if (m->st->ranks && in->gpus && len < sizeof(buf))
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "; GPUs used: %s", in->gpus);
	for (g = stats_next_gpu(&in->st, NULL); g && len < sizeof(buf);
	     g = stats_next_gpu(&in->st, g)) {
		stats_meta_str(g, v, sizeof(v));
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "; %s: %s", g->key, v);
	}
	return (in->note = strdup(buf)) ? 0 : -ENOMEM;
}

static int nccl_cmp(const void *pa, const void *pb)
{
	const struct nccl_end *a = pa, *b = pb;
	if (a->name != b->name)
		return a->name < b->name ? -1 : 1;
	return a->start < b->start ? -1 : a->start > b->start;
}

/* --ranks: each collective kernel's key is its name and its occurrence among the kernels of
 * that name (by start), which is what identifies it on every rank. */
static int nccl_keys(struct in_state *in)
{
	if (!in->nnccl)
		return 0;
	if (!(in->coll = calloc(in->nnccl, sizeof(*in->coll))))
		return -ENOMEM;
	qsort(in->nccl, in->nnccl, sizeof(*in->nccl), nccl_cmp);
	uint64_t k = 0;
	for (size_t i = 0; i < in->nnccl; i++) {
		k = i && in->nccl[i].name == in->nccl[i - 1].name ? k + 1 : 0;
		in->coll[i] = (struct cuptrace_align_coll){
		    cuptrace_hash64(in->nccl[i].name ^ cuptrace_hash64(k + 1)), in->nccl[i].end,
		    in->nccl[i].symmetric};
	}
	return 0;
}

/* --ranks: rank, host and machine from the metadata that `record` writes. */
static int rank_info(struct in_state *in, struct cuptrace_merge_result *r)
{
	const struct cuptrace_meta *g = stats_meta_get(&in->st, "rank");
	int64_t v = -1;
	r->rank = g && stats_meta_int(g, &v) && v >= 0 && v <= INT32_MAX ? (int)v : -1;
	g = stats_meta_get(&in->st, "world_size");
	v = -1;
	r->world = g && stats_meta_int(g, &v) && v > 0 && v <= INT32_MAX ? (int)v : -1;
	in->host = stats_meta_strdup(&in->st, "hostname");
	if (in->host && !strcmp(in->host, "?")) { /* a reader's "not said" */
		free(in->host);
		in->host = NULL;
	}
	/* The machine: its boot id and its host name, so that traces of different hosts are
	 * different machines whatever their boot ids say (containers, copied images). */
	char *boot = stats_meta_strdup(&in->st, "boot_id");
	if (boot || in->host) {
		size_t len = (boot ? strlen(boot) : 0) + (in->host ? strlen(in->host) : 0) + 2;
		if (!(in->machine = malloc(len))) {
			free(boot);
			return -ENOMEM;
		}
		snprintf(in->machine, len, "%s@%s", boot ? boot : "", in->host ? in->host : "");
		free(boot);
	}
	/* The GPUs it used: the "gpus_used" metadata, else its GPU groups (a trace of an older
	 * cuptrace). Every rank sees every GPU of its node, so gpu0_uuid says nothing of its own.
	 */
	char gpus[1024];
	if (stats_gpus_used_text(&in->st, 1, gpus, sizeof(gpus)) && !(in->gpus = strdup(gpus)))
		return -ENOMEM;
	r->gpus = in->gpus;
	r->host = in->host;
	r->collectives = in->nnccl;
	r->start_boottime_ns = in->start_boottime_ns;
	r->start_realtime_ns = in->start_realtime_ns;
	return 0;
}

/* --ranks: inputs in rank order (those without a rank last, in input order). */
static void rank_order(const struct cuptrace_merge *m, size_t *perm)
{
	for (size_t i = 0; i < m->n; i++)
		perm[i] = i;
	/* insertion sort: stable, and a job has few enough ranks */
	for (size_t i = 1; i < m->n; i++)
		for (size_t j = i; j > 0; j--) {
			int a = m->in[perm[j - 1]].rank, b = m->in[perm[j]].rank;
			if (!((a < 0 && b >= 0) || (a >= 0 && b >= 0 && b < a)))
				break;
			size_t t = perm[j];
			perm[j] = perm[j - 1];
			perm[j - 1] = t;
		}
}

/* --ranks: "rank R @ host" (or the file's name where the trace names no rank). */
static int rank_labels(struct cuptrace_merge_input *inputs, const struct cuptrace_merge *m,
                       char **made)
{
	for (size_t i = 0; i < m->n; i++) {
		const struct cuptrace_merge_result *r = &m->in[i];
		if (inputs[i].label || r->rank < 0)
			continue;
		size_t len = (r->host ? strlen(r->host) : 1) + 32;
		if (!(made[i] = malloc(len)))
			return -ENOMEM;
		if (r->host) /* no "@ ?" where the trace names no host: the rank says it */
			snprintf(made[i], len, "rank %d @ %s", r->rank, r->host);
		else
			snprintf(made[i], len, "rank %d", r->rank);
		inputs[i].label = made[i];
	}
	return 0;
}

static int plan_ranks(struct cuptrace_merge *m, const struct cuptrace_merge_input *given,
                      enum cuptrace_align_mode mode)
{
	size_t n = m->n;
	size_t *perm = calloc(n, sizeof(*perm));
	struct cuptrace_merge_input *inputs = calloc(n, sizeof(*inputs));
	struct cuptrace_merge_result *res = calloc(n, sizeof(*res));
	struct in_state *st = calloc(n, sizeof(*st));
	struct cuptrace_align_in *ai = calloc(n, sizeof(*ai));
	struct cuptrace_align_out *ao = calloc(n, sizeof(*ao));
	char **made = calloc(n, sizeof(*made));
	int err = -ENOMEM;

	if (!perm || !inputs || !res || !st || !ai || !ao || !made)
		goto out;
	rank_order(m, perm);
	for (size_t i = 0; i < n; i++) {
		inputs[i] = given[perm[i]];
		res[i] = m->in[perm[i]];
		st[i] = m->st->in[perm[i]];
	}
	memcpy(m->in, res, n * sizeof(*res));
	memcpy(m->st->in, st, n * sizeof(*st));
	if ((err = rank_labels(inputs, m, made)) || (err = make_labels(m, inputs)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct in_state *in = &m->st->in[i];
		ai[i] = (struct cuptrace_align_in){
		    .machine = in->machine,
		    .start_boottime_ns = in->start_boottime_ns,
		    .start_realtime_ns = in->start_realtime_ns,
		    /* torch.profiler and other JSON: no BOOTTIME, the file's axis is the clock */
		    .file_clock = !in->start_boottime_ns,
		    .first_ts = m->in[i].first_ts,
		    .coll = in->coll,
		    .ncoll = in->nnccl,
		};
	}
	if ((err = cuptrace_align(ai, n, mode, ao, &m->align)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		m->in[i].map = ao[i];
		m->in[i].offset_ns = ao[i].offset_ns;
	}
	err = 0;
out:
	for (size_t i = 0; made && i < n; i++)
		free(made[i]);
	free(made);
	free(perm);
	free(inputs);
	free(res);
	free(st);
	free(ai);
	free(ao);
	return err;
}

/* The first mark kind every input with events has; its marks become the inputs' align_ts. */
static enum cuptrace_merge_auto pick_auto(struct cuptrace_merge *m)
{
	for (int a = CUPTRACE_MERGE_AUTO_STEP; a < CUPTRACE_MERGE_AUTO_N; a++) {
		size_t i = 0, found = 0;
		for (; i < m->n && (!m->in[i].has_events || m->st->in[i].marks.at[a] != INT64_MAX);
		     i++)
			found += m->in[i].has_events;
		if (i < m->n || !found)
			continue;
		for (i = 0; i < m->n; i++)
			m->in[i].align_ts =
			    m->in[i].has_events ? m->st->in[i].marks.at[a] : m->in[i].first_ts;
		return (enum cuptrace_merge_auto)a;
	}
	return CUPTRACE_MERGE_AUTO_NONE;
}

int cuptrace_merge_plan(struct cuptrace_merge *m, const struct cuptrace_merge_input *inputs,
                        size_t n, const struct cuptrace_merge_opts *o, cuptrace_replay_fn replay,
                        void *ctx)
{
	int err;
	int ranks = o && o->sz >= sizeof(*o) && o->ranks;

	memset(m, 0, sizeof(*m));
	if (!n || !inputs || !replay)
		return -EINVAL;
	if (!(m->in = calloc(n, sizeof(*m->in))) || !(m->st = calloc(1, sizeof(*m->st))) ||
	    !(m->st->in = calloc(n, sizeof(*m->st->in))))
		return -ENOMEM;
	m->n = n;
	m->st->ranks = ranks;
	m->st->mode = ranks ? o->ranks_align : CUPTRACE_ALIGN_NONE;
	if (o && o->align_name && !ranks) {
		if (!(m->st->align_name = strdup(o->align_name)))
			return -ENOMEM;
		m->st->k = o->align_k ? o->align_k : 1;
	}
	for (size_t i = 0; i < n; i++) {
		struct in_state *in = &m->st->in[i];
		struct cuptrace_merge_result *r = &m->in[i];
		r->path = inputs[i].path;
		r->rank = -1;
		r->world = -1;
		m->bad = i;
		if ((err = probe(in, r->path, m->st->align_name, ranks, replay, ctx)) ||
		    (err = collect_pids(in)))
			return err;
		r->has_events = in->st.slices + in->st.instants + in->st.counters > 0;
		r->first_ts = r->has_events ? in->st.min_ts : 0;
		if (in->nsamples && (!r->has_events || in->samples_min_ts < r->first_ts))
			r->first_ts = in->samples_min_ts;
		r->align_found = in->nalign;
		if (ranks && ((err = nccl_keys(in)) || (err = rank_info(in, r))))
			return err;
		if (!m->st->align_name)
			continue;
		if (in->nalign < m->st->k)
			return -ENOENT;
		qsort(in->align, in->nalign, sizeof(*in->align), int64_cmp);
		r->align_ts = in->align[m->st->k - 1];
	}
	m->bad = 0;
	if (ranks) {
		if ((err = plan_ranks(m, inputs, o->ranks_align)))
			return err;
	} else {
		if ((err = make_labels(m, inputs)))
			return err;
		int aligned = m->st->align_name != NULL;
		if (!aligned && !(o && o->sz >= sizeof(*o) && o->no_auto_align))
			aligned = (int)(m->auto_align = pick_auto(m));
		/* Aligned: the K-th slices (or the marks) all start at c, which leaves the earliest
		 * event of all at 0. */
		int64_t c = 0;
		for (size_t i = 0; aligned && i < n; i++)
			if (sat_sub(m->in[i].align_ts, m->in[i].first_ts) > c)
				c = sat_sub(m->in[i].align_ts, m->in[i].first_ts);
		for (size_t i = 0; i < n; i++) {
			struct cuptrace_merge_result *r = &m->in[i];
			r->offset_ns = aligned ? sat_sub(c, r->align_ts) : -r->first_ts;
			r->map.offset_ns = r->offset_ns;
		}
	}
	if ((err = assign_pids(m)))
		return err;
	for (size_t i = 0; i < n; i++)
		if ((err = make_note(m, i)))
			return err;
	return 0;
}

void cuptrace_merge_free(struct cuptrace_merge *m)
{
	if (!m)
		return;
	for (size_t i = 0; m->in && i < m->n; i++)
		free(m->in[i].label);
	free(m->in);
	if (m->st) {
		for (size_t i = 0; m->st->in && i < m->n; i++) {
			struct in_state *in = &m->st->in[i];
			cuptrace_stats_free(&in->st);
			free(in->align);
			free(in->pids);
			free(in->newpids);
			free(in->note);
			free(in->nccl);
			free(in->coll);
			free(in->machine);
			free(in->host);
			free(in->gpus);
		}
		free(m->st->in);
		free(m->st->align_name);
		free(m->st);
	}
	memset(m, 0, sizeof(*m));
}
