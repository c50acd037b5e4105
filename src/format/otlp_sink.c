/* The OTLP sink (otlp.h): events become spans that wait in a pending set until the slices
 * around them have had time to arrive, get their parent and trace there, and leave in batches
 * packed by otlp_encode.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "format/otlp.h"

#define DEF_BATCH     512
#define DEF_INTERVAL  1000
#define DEF_WINDOW_MS 10000
#define DEF_PENDING   65536
#define CHAIN_MAX     16
#define FLOWMAP_MAX   (1u << 20)
#define TRACEMAP_GEN  65536
#define EXTRA_ATTRS   8 /* category, correlation_id, thread.id/name, device, stream, track */

/* A released span that may still hold late arrivals (the slices around the last ones released
 * on its track). */
struct chain_ent {
	int64_t ts, end;
	uint64_t span_id, root;
};

struct otrack {
	uint64_t uuid, parent;
	enum cuptrace_track_kind kind;
	int32_t pid;
	int64_t tid;
	char *name;
	int64_t device, stream; /* -1: not known */
	struct chain_ent chain[CHAIN_MAX];
	int nchain;
};

/* A span waiting to leave: one malloc'd block with its name, category and attributes. */
struct pspan {
	int64_t ts, end;
	uint64_t seq, span_id, corr;
	uint64_t parent; /* GPU work: its launch, from the flow or the correlation id */
	uint64_t root;   /* 0: the run's trace; else the span id of its trace's root */
	uint64_t link_span, link_root;
	int32_t pid;
	int32_t track; /* index into tracks, -1 if undeclared */
	uint32_t nargs;
	uint8_t instant, flows_out, gpu, leaving;
	const char *name, *cat;
	struct otlp_attr *args;
};

/* A stack node of the nesting walk: a pending span or a chain entry. */
struct node {
	int64_t ts, end;
	uint64_t span_id, root;
	struct pspan *p;
};

struct meta_kv {
	char *key, *val;
	char *attr; /* gpuN (the model string; not gpuN_uuid and friends): cuptrace.gpu.N */
};

struct otlp_sink {
	struct cuptrace_sink base;
	struct cuptrace_otlp_opts o;
	char *service, *trace_per;
	struct cuptrace_otlp_http *http;
	char *url; /* the full URL, kept for the summary after the sender is gone */
	int err;

	int32_t pid;
	char *process_name, *hostname;
	int64_t base_unix; /* Unix ns at relative 0 */
	int64_t start_boot;
	uint8_t run_trace[16];
	uint64_t seed;

	struct otrack *tracks;
	size_t ntracks, trackcap;
	struct cuptrace_u64map track_of; /* uuid -> index + 1 */
	struct meta_kv *meta;
	size_t nmeta, metacap;

	struct pspan **pending;
	size_t npending, pendcap, pending_peak;
	uint64_t seq;
	int64_t watermark, last_release;
	struct cuptrace_u64map flows;    /* flow id -> span id of the slice that starts it */
	struct cuptrace_u64map roots[2]; /* launch span id -> root + 1 (trace_per only) */
	struct node *stack;
	size_t stackcap;

	struct pspan **batch;
	size_t nbatch;
	int64_t last_emit; /* CLOCK_MONOTONIC ns */
	struct cuptrace_otlp_stats st;
	uint64_t dropped_here; /* spans lost before the sender (memory, emit errors) */
};

static struct otlp_sink *to_otlp(struct cuptrace_sink *s)
{
	return (struct otlp_sink *)s;
}

/* ---- strings ---- */

/* Length of the valid UTF-8 sequence at p (1-4), or 0. */
static size_t utf8_seq(const unsigned char *p)
{
	if (p[0] < 0x80)
		return 1;
	size_t n = p[0] >= 0xF0 && p[0] <= 0xF4 ? 4 : p[0] >= 0xE0 ? 3 : p[0] >= 0xC2 ? 2 : 0;
	if (!n || (n == 3 && p[0] > 0xEF))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xC0) != 0x80)
			return 0;
	if ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] > 0x9F) ||
	    (p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] > 0x8F))
		return 0; /* overlong, surrogate, above U+10FFFF */
	return n;
}

/* Copies s to dst (strlen(s) + 1 bytes) with every byte that is not valid UTF-8 replaced by
 * '?': protobuf strings must be UTF-8, and collectors written in Go reject a request that is
 * not. Returns the byte after the NUL. */
static char *put_utf8(char *dst, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	while (*p) {
		size_t n = utf8_seq(p);
		if (!n) {
			*dst++ = '?';
			p++;
			continue;
		}
		memcpy(dst, p, n);
		dst += n;
		p += n;
	}
	*dst++ = 0;
	return dst;
}

static char *dup_utf8(const char *s)
{
	char *d = malloc(strlen(s ? s : "") + 1);
	if (d)
		put_utf8(d, s ? s : "");
	return d;
}

/* ---- ids ---- */

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

/* a + b, held at the int64 range: times from a damaged file must not overflow. */
static int64_t add_sat(int64_t a, int64_t b)
{
	if (b > 0 && a > INT64_MAX - b)
		return INT64_MAX;
	if (b < 0 && a < INT64_MIN - b)
		return INT64_MIN;
	return a + b;
}

static uint64_t nonzero(uint64_t v)
{
	return v ? v : 1;
}

/* A launching API call's span id: from its correlation id, so the GPU work finds it in any
 * order. Every other span's: from its arrival number. */
static uint64_t launch_id(const struct otlp_sink *s, int32_t pid, uint64_t corr)
{
	return nonzero(cuptrace_hash64(
	    s->seed ^ cuptrace_hash64(((uint64_t)(uint32_t)pid << 40) ^ corr ^ 0x6c61756e6368ull)));
}

static uint64_t seq_id(const struct otlp_sink *s, uint64_t seq)
{
	return nonzero(cuptrace_hash64(s->seed + 0x9e3779b97f4a7c15ull * (seq + 1)));
}

static void trace_of(const struct otlp_sink *s, uint64_t root, uint8_t out[16])
{
	if (!root) {
		memcpy(out, s->run_trace, 16);
		return;
	}
	put_be64(out, cuptrace_hash64(s->seed ^ root));
	put_be64(out + 8, nonzero(cuptrace_hash64(~s->seed + root)));
}

/* ---- tracks ---- */

static struct otrack *track_at(struct otlp_sink *s, uint64_t uuid)
{
	uint64_t *v = cuptrace_u64map_get(&s->track_of, uuid);
	return v ? &s->tracks[*v - 1] : NULL;
}

/* The number after word in name ("GPU 3: ..." -> 3 for "GPU "), or -1. */
static int64_t number_after(const char *name, const char *word)
{
	const char *p = strstr(name, word);
	if (!p)
		return -1;
	p += strlen(word);
	if (*p < '0' || *p > '9')
		return -1;
	return strtoll(p, NULL, 10);
}

static int otlp_track(struct cuptrace_sink *sk, const struct cuptrace_track *t)
{
	struct otlp_sink *s = to_otlp(sk);
	if (s->err)
		return s->err;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&s->track_of, t->uuid, &created);
	if (!slot)
		return s->err = -ENOMEM;
	if (!created)
		return 0;
	struct otrack *arr = cuptrace_grow(s->tracks, &s->trackcap, s->ntracks + 1, sizeof(*arr));
	char *name = dup_utf8(t->name);
	if (!arr || !name) {
		free(name);
		cuptrace_u64map_del(&s->track_of, t->uuid);
		return s->err = -ENOMEM;
	}
	s->tracks = arr;
	struct otrack *o = &s->tracks[s->ntracks];
	*o = (struct otrack){.uuid = t->uuid,
	                     .parent = t->parent_uuid,
	                     .kind = t->kind,
	                     .pid = t->pid,
	                     .tid = t->tid,
	                     .name = name,
	                     .device = -1,
	                     .stream = -1};
	const struct otrack *up = t->parent_uuid ? track_at(s, t->parent_uuid) : NULL;
	if (up && t->kind != CUPTRACE_TRACK_PROCESS)
		o->pid = up->pid; /* GPU tracks may leave pid to their process */
	if (t->kind == CUPTRACE_TRACK_GROUP)
		o->device = number_after(name, "GPU ");
	else if (up && t->kind != CUPTRACE_TRACK_THREAD)
		o->device = up->device;
	if (t->kind == CUPTRACE_TRACK_SLICES) /* "compute (stream 13)", Kineto's "Stream 7" */
		o->stream = number_after(name, strstr(name, "Stream ") ? "Stream " : "stream ");
	*slot = ++s->ntracks;
	return 0;
}

/* ---- arrival ---- */

/* Where the batch goes. The body is the sender's (or the callback's) from here on. */
static void emit_batch(struct otlp_sink *s);

static int cmp_end(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void release(struct otlp_sink *s, int64_t thr, int all);

/* More than max_pending wait: the older half (by end time) leaves. */
static void release_oldest(struct otlp_sink *s)
{
	int64_t *ends = malloc(s->npending * sizeof(*ends));
	if (!ends) {
		release(s, 0, 1);
		return;
	}
	for (size_t i = 0; i < s->npending; i++)
		ends[i] = s->pending[i]->end;
	qsort(ends, s->npending, sizeof(*ends), cmp_end);
	int64_t thr = ends[s->npending / 2];
	free(ends);
	release(s, thr, 0);
}

/* Copies one argument into the span's block at *dst; sets a. */
static char *put_arg(char *dst, const struct cuptrace_arg *in, struct otlp_attr *a)
{
	a->key = dst;
	dst = put_utf8(dst, in->key ? in->key : "?");
	switch (in->type) {
	case CUPTRACE_ARG_INT:
		a->type = OA_INT;
		a->v.i = in->v.i;
		break;
	case CUPTRACE_ARG_UINT:
		if (in->v.u <= (uint64_t)INT64_MAX) {
			a->type = OA_INT;
			a->v.i = (int64_t)in->v.u;
			break;
		}
		a->type = OA_STR;
		a->v.s = dst;
		dst += sprintf(dst, "%llu", (unsigned long long)in->v.u) + 1;
		break;
	case CUPTRACE_ARG_DOUBLE:
		a->type = OA_DOUBLE;
		a->v.d = in->v.d;
		break;
	case CUPTRACE_ARG_POINTER:
		a->type = OA_STR;
		a->v.s = dst;
		dst += sprintf(dst, "0x%llx", (unsigned long long)in->v.u) + 1;
		break;
	case CUPTRACE_ARG_BOOL:
		a->type = OA_BOOL;
		a->v.b = in->v.b;
		break;
	case CUPTRACE_ARG_STRING:
	default:
		a->type = OA_STR;
		a->v.s = dst;
		dst = put_utf8(dst, in->type == CUPTRACE_ARG_STRING && in->v.s ? in->v.s : "");
		break;
	}
	return dst;
}

static int add_span(struct otlp_sink *s, uint64_t track_uuid, int64_t ts, int64_t dur,
                    const char *name, const char *cat, uint64_t corr,
                    const struct cuptrace_arg *args, size_t nargs, const uint64_t *flows_out,
                    size_t nout, const uint64_t *flows_in, size_t nin, int instant)
{
	if (s->err)
		return s->err;
	name = name ? name : "";
	size_t bytes = sizeof(struct pspan) + nargs * sizeof(struct otlp_attr) + strlen(name) + 1 +
	               (cat ? strlen(cat) + 1 : 0);
	for (size_t i = 0; i < nargs; i++)
		bytes +=
		    (args[i].key ? strlen(args[i].key) : 1) + 1 +
		    (args[i].type == CUPTRACE_ARG_STRING && args[i].v.s ? strlen(args[i].v.s) : 0) +
		    24;
	struct pspan *p = malloc(bytes);
	struct pspan **arr =
	    p ? cuptrace_grow(s->pending, &s->pendcap, s->npending + 1, sizeof(*arr)) : NULL;
	if (!arr) {
		free(p);
		s->dropped_here++;
		return 0; /* the file sink beside us goes on; the span is counted as dropped */
	}
	s->pending = arr;
	uint64_t *ti = cuptrace_u64map_get(&s->track_of, track_uuid);
	const struct otrack *t = ti ? &s->tracks[*ti - 1] : NULL;
	*p = (struct pspan){.ts = ts,
	                    .end = add_sat(ts, dur > 0 ? dur : 0),
	                    .seq = s->seq++,
	                    .corr = corr,
	                    .pid = t ? t->pid : s->pid,
	                    .track = t ? (int32_t)(*ti - 1) : -1,
	                    .nargs = (uint32_t)nargs,
	                    .instant = (uint8_t)instant,
	                    .flows_out = nout > 0};
	p->args = (struct otlp_attr *)(p + 1);
	char *dst = (char *)(p->args + nargs);
	p->name = dst;
	dst = put_utf8(dst, name);
	if (cat) {
		p->cat = dst;
		dst = put_utf8(dst, cat);
	}
	for (size_t i = 0; i < nargs; i++)
		dst = put_arg(dst, &args[i], &p->args[i]);

	p->span_id = nout && corr ? launch_id(s, p->pid, corr) : seq_id(s, p->seq);
	if (s->flows.len > FLOWMAP_MAX) {
		cuptrace_u64map_free(&s->flows); /* flows whose other end never came */
		cuptrace_u64map_init(&s->flows);
	}
	for (size_t i = 0; i < nout; i++) {
		uint64_t *v = cuptrace_u64map_put(&s->flows, flows_out[i], NULL);
		if (v)
			*v = p->span_id;
	}
	if (nin) {
		uint64_t *v = cuptrace_u64map_get(&s->flows, flows_in[0]);
		p->parent = v ? *v : corr ? launch_id(s, p->pid, corr) : 0;
		if (v)
			cuptrace_u64map_del(&s->flows, flows_in[0]);
		p->gpu = p->parent != 0;
	}
	s->pending[s->npending++] = p;
	if (s->npending > s->pending_peak)
		s->pending_peak = s->npending;
	if (p->end > s->watermark)
		s->watermark = p->end;
	int64_t w = (int64_t)s->o.window_ms * 1000000;
	if (s->npending >= s->o.max_pending)
		release_oldest(s);
	else if (add_sat(s->watermark, -s->last_release) >= w / 4 + 1000000)
		release(s, add_sat(s->watermark, -w), 0);
	return 0;
}

static int otlp_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	return add_span(to_otlp(sk), e->track_uuid, e->ts, e->dur, e->name, e->category,
	                e->correlation_id, e->args, e->nargs, e->flows_out, e->nflows_out,
	                e->flows_in, e->nflows_in, 0);
}

static int otlp_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	if (e->category && !strcmp(e->category, CUPTRACE_META_CATEGORY))
		return 0;
	return add_span(to_otlp(sk), e->track_uuid, e->ts, 0, e->name, e->category,
	                e->correlation_id, e->args, e->nargs, NULL, 0, NULL, 0, 1);
}

static int otlp_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	return to_otlp(sk)->err; /* counters are not spans */
}

/* ---- parents and traces ---- */

static int cmp_nest(const void *a, const void *b)
{
	const struct pspan *x = *(struct pspan *const *)a, *y = *(struct pspan *const *)b;
	if (x->track != y->track)
		return x->track < y->track ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->end != y->end)
		return x->end > y->end ? -1 : 1; /* the outer one first */
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int push(struct otlp_sink *s, size_t *n, struct node nd)
{
	struct node *st = cuptrace_grow(s->stack, &s->stackcap, *n + 1, sizeof(*st));
	if (!st)
		return -1;
	s->stack = st;
	st[(*n)++] = nd;
	return 0;
}

static void note_root(struct otlp_sink *s, uint64_t span_id, uint64_t root)
{
	if (!s->trace_per)
		return;
	if (s->roots[0].len >= TRACEMAP_GEN) {
		/* Two generations: lookups see the last TRACEMAP_GEN..2x launches. */
		cuptrace_u64map_free(&s->roots[1]);
		s->roots[1] = s->roots[0];
		cuptrace_u64map_init(&s->roots[0]);
	}
	uint64_t *v = cuptrace_u64map_put(&s->roots[0], span_id, NULL);
	if (v)
		*v = root + 1;
}

static uint64_t root_of_launch(struct otlp_sink *s, uint64_t span_id)
{
	for (int g = 0; g < 2; g++) {
		uint64_t *v = cuptrace_u64map_get(&s->roots[g], span_id);
		if (v)
			return *v - 1;
	}
	return 0;
}

/* Gives every pending span of one track (pending[a..b), sorted by cmp_nest) its parent: the
 * innermost slice around it, pending or released (the track's chain). */
static void nest_track(struct otlp_sink *s, size_t a, size_t b, int64_t thr, int all)
{
	struct pspan *first = s->pending[a];
	struct otrack *t = first->track >= 0 ? &s->tracks[first->track] : NULL;
	size_t n = 0;
	for (int i = 0; t && i < t->nchain; i++)
		push(s, &n,
		     (struct node){t->chain[i].ts, t->chain[i].end, t->chain[i].span_id,
		                   t->chain[i].root, NULL});
	for (size_t i = a; i < b; i++) {
		struct pspan *p = s->pending[i];
		while (n && !(s->stack[n - 1].ts <= p->ts && p->end <= s->stack[n - 1].end))
			n--;
		const struct node *up = n ? &s->stack[n - 1] : NULL;
		p->link_span = 0;
		if (p->gpu) {
			/* Under its launch, in the launch's trace (known once the launch was
			 * placed: launches are placed before GPU work, see release). */
			p->root = s->trace_per ? root_of_launch(s, p->parent) : 0;
		} else if (s->trace_per && !p->instant && !strcmp(p->name, s->trace_per)) {
			p->root = p->span_id;
			p->parent = 0;
			if (up) {
				p->link_span = up->span_id;
				p->link_root = up->root;
			}
		} else {
			p->parent = up ? up->span_id : 0;
			p->root = up ? up->root : 0;
		}
		if (p->flows_out)
			note_root(s, p->span_id, p->root);
		p->leaving = all || p->end <= thr;
		push(s, &n, (struct node){p->ts, p->end, p->span_id, p->root, p});
	}
	if (!t)
		return;
	/* What stays open at the release frontier, for spans that arrive late. */
	t->nchain = 0;
	for (size_t i = 0; i < n && t->nchain < CHAIN_MAX; i++)
		if (!s->stack[i].p || s->stack[i].p->leaving)
			t->chain[t->nchain++] = (struct chain_ent){
			    s->stack[i].ts, s->stack[i].end, s->stack[i].span_id, s->stack[i].root};
}

/* Places every pending span, and sends those that end at or before thr (all: every one). */
static void release(struct otlp_sink *s, int64_t thr, int all)
{
	s->last_release = s->watermark;
	if (!s->npending)
		return;
	qsort(s->pending, s->npending, sizeof(*s->pending), cmp_nest);
	/* Two passes: CPU tracks first, so that a launch's trace is known to its GPU work. */
	for (int pass = 0; pass < 2; pass++)
		for (size_t a = 0, b; a < s->npending; a = b) {
			int gpu = 0;
			for (b = a; b < s->npending && s->pending[b]->track == s->pending[a]->track;
			     b++)
				gpu |= s->pending[b]->gpu;
			if (gpu == pass)
				nest_track(s, a, b, thr, all);
		}
	size_t keep = 0;
	for (size_t i = 0; i < s->npending; i++) {
		struct pspan *p = s->pending[i];
		if (!p->leaving) {
			s->pending[keep++] = p;
			continue;
		}
		s->batch[s->nbatch++] = p;
		if (s->nbatch == s->o.batch_spans)
			emit_batch(s);
	}
	s->npending = keep;
}

/* ---- batches ---- */

static int cmp_pid(const void *a, const void *b)
{
	const struct pspan *x = *(struct pspan *const *)a, *y = *(struct pspan *const *)b;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int has_key(const struct otlp_attr *a, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a[i].key, key))
			return 1;
	return 0;
}

static const char *meta_get(const struct otlp_sink *s, const char *key)
{
	for (size_t i = 0; i < s->nmeta; i++)
		if (!strcmp(s->meta[i].key, key))
			return s->meta[i].val;
	return NULL;
}

static const char *process_name(const struct otlp_sink *s, int32_t pid)
{
	for (size_t i = 0; i < s->ntracks; i++)
		if (s->tracks[i].kind == CUPTRACE_TRACK_PROCESS && s->tracks[i].pid == pid)
			return s->tracks[i].name;
	return pid == s->pid ? s->process_name : NULL;
}

/* The resource attributes of pid into out (room for 8 + the trace's GPUs); returns how many. */
static size_t resource_attrs(const struct otlp_sink *s, int32_t pid, struct otlp_attr *out,
                             size_t max)
{
	size_t n = 0;
	const char *svc = s->service ? s->service : process_name(s, pid);
	out[n++] =
	    (struct otlp_attr){"service.name", OA_STR, .v.s = svc && *svc ? svc : "cuptrace"};
	if (s->hostname && *s->hostname && strcmp(s->hostname, "?"))
		out[n++] = (struct otlp_attr){"host.name", OA_STR, .v.s = s->hostname};
	out[n++] = (struct otlp_attr){"process.pid", OA_INT, .v.i = pid};
	if (pid != s->pid)
		return n; /* the trace's metadata is its main process's */
	const char *v = meta_get(s, "cmdline");
	if (v && n < max)
		out[n++] = (struct otlp_attr){"process.command_line", OA_STR, .v.s = v};
	static const char *const ints[][2] = {{"rank", "cuptrace.rank"},
	                                      {"local_rank", "cuptrace.local_rank"},
	                                      {"world_size", "cuptrace.world_size"}};
	for (size_t i = 0; i < 3 && n < max; i++)
		if ((v = meta_get(s, ints[i][0])))
			out[n++] =
			    (struct otlp_attr){ints[i][1], OA_INT, .v.i = strtoll(v, NULL, 10)};
	for (size_t i = 0; i < s->nmeta && n < max; i++)
		if (s->meta[i].attr)
			out[n++] =
			    (struct otlp_attr){s->meta[i].attr, OA_STR, .v.s = s->meta[i].val};
	return n;
}

/* Fills the span's attributes: its args, then what its track and fields add. */
static size_t span_attrs(const struct otlp_sink *s, const struct pspan *p, struct otlp_attr *out)
{
	size_t n = 0;
	for (uint32_t i = 0; i < p->nargs; i++)
		if (!has_key(out, n, p->args[i].key))
			out[n++] = p->args[i];
	if (p->cat && *p->cat && !has_key(out, n, "category"))
		out[n++] = (struct otlp_attr){"category", OA_STR, .v.s = p->cat};
	if (p->corr && p->corr <= (uint64_t)INT64_MAX && !has_key(out, n, "correlation_id"))
		out[n++] = (struct otlp_attr){"correlation_id", OA_INT, .v.i = (int64_t)p->corr};
	const struct otrack *t = p->track >= 0 ? &s->tracks[p->track] : NULL;
	if (!t)
		return n;
	if (t->kind == CUPTRACE_TRACK_THREAD) {
		out[n++] = (struct otlp_attr){"thread.id", OA_INT, .v.i = t->tid};
		out[n++] = (struct otlp_attr){"thread.name", OA_STR, .v.s = t->name};
		return n;
	}
	if (t->device >= 0 && !has_key(out, n, "device"))
		out[n++] = (struct otlp_attr){"device", OA_INT, .v.i = t->device};
	if (t->stream >= 0 && !has_key(out, n, "stream"))
		out[n++] = (struct otlp_attr){"stream", OA_INT, .v.i = t->stream};
	out[n++] = (struct otlp_attr){"track", OA_STR, .v.s = t->name};
	return n;
}

static void count_lost(struct otlp_sink *s, size_t n)
{
	if (s->http)
		cuptrace_otlp_http_count_dropped(s->http, n);
	else
		s->dropped_here += n;
}

static void emit_batch(struct otlp_sink *s)
{
	size_t n = s->nbatch;
	if (!n)
		return;
	s->last_emit = cuptrace_now_ns(CLOCK_MONOTONIC);
	qsort(s->batch, n, sizeof(*s->batch), cmp_pid);
	size_t nattrs = 0, ngpu = 0;
	for (size_t i = 0; i < n; i++)
		nattrs += s->batch[i]->nargs + EXTRA_ATTRS;
	for (size_t i = 0; i < s->nmeta; i++)
		ngpu += s->meta[i].attr != NULL;
	size_t res_max = 8 + ngpu, npids = 0;
	for (size_t i = 0; i < n; i++)
		npids += !i || s->batch[i]->pid != s->batch[i - 1]->pid;
	struct otlp_span *spans = malloc(n * sizeof(*spans));
	struct otlp_attr *attrs = malloc(nattrs * sizeof(*attrs));
	struct otlp_resource *res = malloc(npids * sizeof(*res));
	struct otlp_attr *rattrs = malloc(npids * res_max * sizeof(*rattrs));
	uint8_t *body = NULL;
	size_t len = 0;
	if (spans && attrs && res && rattrs) {
		size_t na = 0, r = 0;
		for (size_t i = 0; i < n; i++) {
			const struct pspan *p = s->batch[i];
			if (!i || p->pid != s->batch[i - 1]->pid) {
				res[r].pid = p->pid;
				res[r].attrs = rattrs + r * res_max;
				res[r].nattrs =
				    resource_attrs(s, p->pid, rattrs + r * res_max, res_max);
				r++;
			}
			struct otlp_span *o = &spans[i];
			o->pid = p->pid;
			trace_of(s, p->root, o->trace_id);
			o->span_id = p->span_id;
			o->parent_id = p->parent;
			o->link_span = p->link_span;
			if (p->link_span)
				trace_of(s, p->link_root, o->link_trace);
			o->name = p->name;
			o->start_unix = add_sat(s->base_unix, p->ts);
			o->end_unix = add_sat(s->base_unix, p->end);
			o->attrs = attrs + na;
			o->nattrs = span_attrs(s, p, attrs + na);
			na += o->nattrs;
		}
		body = cuptrace_otlp_pack(spans, n, res, r, &len);
	}
	free(spans);
	free(attrs);
	free(res);
	free(rattrs);
	for (size_t i = 0; i < n; i++)
		free(s->batch[i]);
	s->nbatch = 0;
	s->st.spans += n;
	if (!body) {
		count_lost(s, n);
		return;
	}
	int r = s->http ? cuptrace_otlp_http_send(s->http, body, len, n)
	                : s->o.emit(s->o.emit_ctx, body, len, n);
	if (r && !s->http)
		s->dropped_here += n;
}

/* ---- the sink ---- */

static int otlp_begin(struct cuptrace_sink *sk, const struct cuptrace_trace_info *info)
{
	struct otlp_sink *s = to_otlp(sk);
	s->pid = info->pid;
	s->process_name = dup_utf8(info->process_name ? info->process_name : "");
	s->hostname = dup_utf8(info->hostname ? info->hostname : "");
	s->start_boot = info->start_boottime_ns;
	s->base_unix = info->start_realtime_ns;
	if (s->base_unix <= 0) {
		/* No wall clock in the trace (some JSON traces): better now than 1970, where
		 * no tracing UI would look. */
		s->base_unix = cuptrace_now_ns(CLOCK_REALTIME);
		cuptrace_warn("OTLP: the trace has no wall-clock start time; its spans are sent "
		              "as if it had started now");
	}
	uint64_t hi = info->trace_uuid_hi, lo = info->trace_uuid_lo;
	if (!hi && !lo) {
		hi = cuptrace_hash64((uint64_t)s->base_unix);
		lo = cuptrace_hash64(hi ^ (uint64_t)info->pid);
	}
	put_be64(s->run_trace, hi);
	put_be64(s->run_trace + 8, lo);
	s->seed = cuptrace_hash64(hi ^ cuptrace_hash64(lo));
	int r = sk->ops->meta(sk, info->meta, info->nmeta);
	if (!s->process_name || !s->hostname)
		return s->err = -ENOMEM;
	return r;
}

static int otlp_meta(struct cuptrace_sink *sk, const struct cuptrace_meta *m, size_t n)
{
	struct otlp_sink *s = to_otlp(sk);
	for (size_t i = 0; i < n && !s->err; i++) {
		if (!m[i].key)
			continue;
		char num[24];
		if (m[i].is_int)
			snprintf(num, sizeof(num), "%lld", (long long)m[i].i);
		const char *v = m[i].is_int ? num : m[i].s ? m[i].s : "";
		size_t k;
		for (k = 0; k < s->nmeta && strcmp(s->meta[k].key, m[i].key); k++)
			;
		char *val = dup_utf8(v);
		if (!val)
			return s->err = -ENOMEM;
		if (k < s->nmeta) {
			free(s->meta[k].val);
			s->meta[k].val = val;
			continue;
		}
		char *key =
		    CUPTRACE_GROW(s->meta, s->metacap, s->nmeta + 1) ? NULL : dup_utf8(m[i].key);
		if (!key) {
			free(val);
			return s->err = -ENOMEM;
		}
		char *attr = NULL;
		if (!strncmp(key, "gpu", 3) && key[3] &&
		    strspn(key + 3, "0123456789") == strlen(key + 3) &&
		    (attr = malloc(strlen(key) + 16)))
			sprintf(attr, "cuptrace.gpu.%s", key + 3);
		s->meta[s->nmeta++] = (struct meta_kv){key, val, attr};
	}
	return s->err;
}

static int otlp_tick(struct cuptrace_sink *sk)
{
	struct otlp_sink *s = to_otlp(sk);
	if (s->err)
		return s->err;
	if (s->o.live && s->start_boot > 0) {
		/* Live, the clock says how far the trace has got even when nothing happens. */
		int64_t now = cuptrace_now_ns(CLOCK_BOOTTIME) - s->start_boot;
		int64_t w = (int64_t)s->o.window_ms * 1000000;
		if (now > s->watermark)
			s->watermark = now;
		if (add_sat(s->watermark, -s->last_release) >= w / 4 + 1000000)
			release(s, add_sat(s->watermark, -w), 0);
	}
	if (s->nbatch &&
	    cuptrace_now_ns(CLOCK_MONOTONIC) - s->last_emit >= (int64_t)s->o.interval_ms * 1000000)
		emit_batch(s);
	return 0;
}

static int otlp_finish(struct cuptrace_sink *sk)
{
	struct otlp_sink *s = to_otlp(sk);
	release(s, 0, 1);
	emit_batch(s);
	uint64_t spans = s->st.spans;
	if (s->http) {
		cuptrace_otlp_http_close(s->http, &s->st);
		s->http = NULL;
	}
	s->st.spans = spans;
	s->st.spans_dropped += s->dropped_here;
	s->dropped_here = 0;
	cuptrace_info("OTLP: at most %zu spans waited for their parents", s->pending_peak);
	return s->err;
}

static void otlp_destroy(struct cuptrace_sink *sk)
{
	struct otlp_sink *s = to_otlp(sk);
	if (!s)
		return;
	cuptrace_otlp_http_close(s->http, NULL);
	for (size_t i = 0; i < s->npending; i++)
		free(s->pending[i]);
	for (size_t i = 0; i < s->nbatch; i++)
		free(s->batch[i]);
	for (size_t i = 0; i < s->ntracks; i++)
		free(s->tracks[i].name);
	for (size_t i = 0; i < s->nmeta; i++) {
		free(s->meta[i].key);
		free(s->meta[i].val);
		free(s->meta[i].attr);
	}
	free(s->meta);
	free(s->tracks);
	free(s->pending);
	free(s->batch);
	free(s->stack);
	cuptrace_u64map_free(&s->track_of);
	cuptrace_u64map_free(&s->flows);
	cuptrace_u64map_free(&s->roots[0]);
	cuptrace_u64map_free(&s->roots[1]);
	free(s->service);
	free(s->trace_per);
	free(s->url);
	free(s->process_name);
	free(s->hostname);
	free(s);
}

static const struct cuptrace_sink_ops otlp_ops = {
    .name = "otlp",
    .begin = otlp_begin,
    .track = otlp_track,
    .slice = otlp_slice,
    .instant = otlp_instant,
    .counter = otlp_counter,
    .meta = otlp_meta,
    .tick = otlp_tick,
    .finish = otlp_finish,
    .destroy = otlp_destroy,
};

struct cuptrace_sink *cuptrace_otlp_sink_new(const struct cuptrace_otlp_opts *opts)
{
	struct otlp_sink *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &otlp_ops;
	memcpy(&s->o, opts, opts->sz < sizeof(s->o) ? opts->sz : sizeof(s->o));
	s->o.sz = sizeof(s->o);
	if (!s->o.batch_spans)
		s->o.batch_spans = DEF_BATCH;
	if (s->o.interval_ms <= 0)
		s->o.interval_ms = DEF_INTERVAL;
	if (s->o.window_ms <= 0)
		s->o.window_ms = DEF_WINDOW_MS;
	if (!s->o.max_pending)
		s->o.max_pending = DEF_PENDING;
	cuptrace_u64map_init(&s->track_of);
	cuptrace_u64map_init(&s->flows);
	cuptrace_u64map_init(&s->roots[0]);
	cuptrace_u64map_init(&s->roots[1]);
	s->service = s->o.service && *s->o.service ? dup_utf8(s->o.service) : NULL;
	s->trace_per = s->o.trace_per && *s->o.trace_per ? strdup(s->o.trace_per) : NULL;
	s->batch = malloc(s->o.batch_spans * sizeof(*s->batch));
	s->last_emit = cuptrace_now_ns(CLOCK_MONOTONIC);
	int bad = !s->batch || (s->o.service && *s->o.service && !s->service) ||
	          (s->o.trace_per && *s->o.trace_per && !s->trace_per);
	if (!bad && !s->o.emit) {
		s->http = cuptrace_otlp_http_open(s->o.url, &s->o.http);
		if (!s->http) {
			int e = errno;
			otlp_destroy(&s->base);
			errno = e;
			return NULL;
		}
		s->url = strdup(cuptrace_otlp_http_url(s->http));
	}
	s->o.url = NULL; /* borrowed: not kept */
	if (bad) {
		otlp_destroy(&s->base);
		errno = ENOMEM;
		return NULL;
	}
	return &s->base;
}

void cuptrace_otlp_sink_stats(struct cuptrace_sink *sk, struct cuptrace_otlp_stats *st)
{
	struct otlp_sink *s = to_otlp(sk);
	*st = s->st;
	if (s->http)
		cuptrace_otlp_http_stats(s->http, st);
	st->spans_dropped += s->dropped_here;
}

const char *cuptrace_otlp_sink_url(struct cuptrace_sink *sk)
{
	struct otlp_sink *s = to_otlp(sk);
	return s->url ? s->url : "";
}
