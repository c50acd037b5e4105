/* Tests of the Perfetto writer and reader without a GPU: round trips of a synthetic trace in every
 * compression mode, wire-level rules of trace_processor, cut and corrupt files, and the size per
 * kernel of a launch-bound loop. */
#include "check.h"
#include "common/log.h"
#include "common/util.h"
#include "convert/convert.h"
#include "format/formats.h"
#include "format/perfetto_fields.h"
#include "read/read.h"
#include "perfetto_trace.pb-c.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>
#include <zlib.h>

/* ---- a sink that records everything (deep copies) ---- */

struct rec_arg {
	char *key;
	int type;
	uint64_t u; /* INT, UINT, POINTER, BOOL as bits */
	double d;
	char *s;
};

enum { EV_SLICE = 1, EV_INSTANT, EV_COUNTER };

struct rec_ev {
	int kind;
	size_t order; /* call order */
	uint64_t track;
	int64_t ts, dur;
	char *name, *cat;
	uint64_t corr;
	struct rec_arg *args;
	size_t nargs;
	uint64_t *out, *in;
	size_t nout, nin;
	int is_double;
	int64_t ci;
	double cd;
};

struct rec_meta {
	char *key, *s;
	int is_int;
	int64_t i;
};

struct rec {
	struct cuptrace_sink base;
	int begun, finished, meta_calls;
	struct cuptrace_trace_info info; /* strings owned */
	struct rec_meta *meta0;          /* begin's list */
	size_t nmeta0;
	struct rec_meta *meta; /* merged */
	size_t nmeta;
	struct cuptrace_track *trk; /* strings owned */
	size_t ntrk;
	struct rec_ev *ev;
	size_t nev, evcap;
	size_t slices;
};

static char *xdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

static int str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void meta_merge(struct rec *r, const struct cuptrace_meta *m)
{
	size_t i = 0;
	while (i < r->nmeta && strcmp(r->meta[i].key, m->key))
		i++;
	if (i == r->nmeta) {
		r->meta = realloc(r->meta, (r->nmeta + 1) * sizeof(*r->meta));
		r->meta[r->nmeta++] = (struct rec_meta){.key = xdup(m->key)};
	} else {
		free(r->meta[i].s);
	}
	r->meta[i].is_int = m->is_int;
	r->meta[i].i = m->is_int ? m->i : 0;
	r->meta[i].s = m->is_int ? NULL : xdup(m->s ? m->s : "");
}

static int rec_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *info)
{
	struct rec *r = (struct rec *)s;
	r->begun++;
	r->info = *info;
	r->info.process_name = xdup(info->process_name);
	r->info.hostname = xdup(info->hostname);
	r->info.meta = NULL;
	r->meta0 = calloc(info->nmeta + 1, sizeof(*r->meta0));
	r->nmeta0 = info->nmeta;
	for (size_t i = 0; i < info->nmeta; i++) {
		const struct cuptrace_meta *m = &info->meta[i];
		r->meta0[i] = (struct rec_meta){xdup(m->key), m->is_int ? NULL : xdup(m->s),
		                                m->is_int, m->is_int ? m->i : 0};
		meta_merge(r, m);
	}
	return 0;
}

static int rec_track(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	struct rec *r = (struct rec *)s;
	r->trk = realloc(r->trk, (r->ntrk + 1) * sizeof(*r->trk));
	struct cuptrace_track *c = &r->trk[r->ntrk++];
	*c = *t;
	c->name = xdup(t->name);
	c->description = xdup(t->description);
	char **cmd = t->cmdline_len ? calloc(t->cmdline_len, sizeof(char *)) : NULL;
	for (size_t i = 0; i < t->cmdline_len; i++)
		cmd[i] = xdup(t->cmdline[i]);
	c->cmdline = (const char *const *)cmd;
	return 0;
}

static struct rec_ev *rec_push(struct rec *r, int kind)
{
	if (r->nev == r->evcap) {
		r->evcap = r->evcap ? 2 * r->evcap : 64;
		r->ev = realloc(r->ev, r->evcap * sizeof(*r->ev));
	}
	struct rec_ev *e = &r->ev[r->nev];
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->order = r->nev++;
	return e;
}

static void rec_args(struct rec_ev *e, const struct cuptrace_arg *a, size_t n)
{
	e->args = n ? calloc(n, sizeof(*e->args)) : NULL;
	e->nargs = n;
	for (size_t i = 0; i < n; i++) {
		struct rec_arg *d = &e->args[i];
		d->key = xdup(a[i].key);
		d->type = a[i].type;
		switch (a[i].type) {
		case CUPTRACE_ARG_STRING:
			d->s = xdup(a[i].v.s);
			break;
		case CUPTRACE_ARG_DOUBLE:
			d->d = a[i].v.d;
			break;
		case CUPTRACE_ARG_BOOL:
			d->u = (uint64_t) !!a[i].v.b;
			break;
		default:
			d->u = a[i].v.u;
			break;
		}
	}
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t *copy_ids(const uint64_t *v, size_t n)
{
	uint64_t *c = n ? malloc(n * sizeof(*c)) : NULL;
	if (n)
		memcpy(c, v, n * sizeof(*c));
	if (n)
		qsort(c, n, sizeof(*c), u64_cmp);
	return c;
}

static int rec_slice(struct cuptrace_sink *s, const struct cuptrace_slice *x)
{
	struct rec *r = (struct rec *)s;
	struct rec_ev *e = rec_push(r, EV_SLICE);
	r->slices++;
	e->track = x->track_uuid;
	e->ts = x->ts;
	e->dur = x->dur;
	e->name = xdup(x->name);
	e->cat = xdup(x->category);
	e->corr = x->correlation_id;
	rec_args(e, x->args, x->nargs);
	e->out = copy_ids(x->flows_out, x->nflows_out);
	e->nout = x->nflows_out;
	e->in = copy_ids(x->flows_in, x->nflows_in);
	e->nin = x->nflows_in;
	return 0;
}

static int rec_instant(struct cuptrace_sink *s, const struct cuptrace_instant *x)
{
	struct rec *r = (struct rec *)s;
	struct rec_ev *e = rec_push(r, EV_INSTANT);
	e->track = x->track_uuid;
	e->ts = x->ts;
	e->name = xdup(x->name);
	e->cat = xdup(x->category);
	e->corr = x->correlation_id;
	rec_args(e, x->args, x->nargs);
	return 0;
}

static int rec_counter(struct cuptrace_sink *s, const struct cuptrace_counter *x)
{
	struct rec *r = (struct rec *)s;
	struct rec_ev *e = rec_push(r, EV_COUNTER);
	e->track = x->track_uuid;
	e->ts = x->ts;
	e->is_double = x->is_double;
	e->ci = x->is_double ? 0 : x->i;
	e->cd = x->is_double ? x->d : 0;
	return 0;
}

static int rec_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	struct rec *r = (struct rec *)s;
	r->meta_calls++;
	for (size_t i = 0; i < n; i++)
		meta_merge(r, &m[i]);
	return 0;
}

static int rec_finish(struct cuptrace_sink *s)
{
	((struct rec *)s)->finished++;
	return 0;
}

static void rec_free(struct rec *r)
{
	free((void *)r->info.process_name);
	free((void *)r->info.hostname);
	for (size_t i = 0; i < r->nmeta0; i++) {
		free(r->meta0[i].key);
		free(r->meta0[i].s);
	}
	free(r->meta0);
	for (size_t i = 0; i < r->nmeta; i++) {
		free(r->meta[i].key);
		free(r->meta[i].s);
	}
	free(r->meta);
	for (size_t i = 0; i < r->ntrk; i++) {
		free((void *)r->trk[i].name);
		free((void *)r->trk[i].description);
		for (size_t j = 0; j < r->trk[i].cmdline_len; j++)
			free((void *)r->trk[i].cmdline[j]);
		free((void *)r->trk[i].cmdline);
	}
	free(r->trk);
	for (size_t i = 0; i < r->nev; i++) {
		struct rec_ev *e = &r->ev[i];
		free(e->name);
		free(e->cat);
		for (size_t j = 0; j < e->nargs; j++) {
			free(e->args[j].key);
			free(e->args[j].s);
		}
		free(e->args);
		free(e->out);
		free(e->in);
	}
	free(r->ev);
	memset(r, 0, sizeof(*r));
}

static void rec_destroy(struct cuptrace_sink *s)
{
	(void)s; /* struct rec lives on the test's stack; rec_free releases it */
}

static const struct cuptrace_sink_ops rec_ops = {
    .name = "rec",
    .begin = rec_begin,
    .track = rec_track,
    .slice = rec_slice,
    .instant = rec_instant,
    .counter = rec_counter,
    .meta = rec_meta,
    .finish = rec_finish,
    .destroy = rec_destroy,
};

static void rec_init(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	r->base.ops = &rec_ops;
}

/* ---- the synthetic trace ---- */

#define PID 4242
static const char *const cmdline[] = {"python3", "train.py", "--epochs=1", "a b \"c\""};
/* Quotes, control characters, and invalid UTF-8 (a lone continuation byte, a cut sequence). */
static const char nasty[] = "q\"uo'te\\ \x01\x1f\t\n \x80 \xe2\x82 end \xff";

static const struct cuptrace_meta begin_meta[] = {
    {.key = "gpu", .s = "NVIDIA H200"},
    {.key = "driver_version", .s = "580.159.04"},
    {.key = "cuda_version", .is_int = 1, .i = 13000},
    {.key = "cmdline", .s = "python3 train.py --epochs=1"},
};

/* Feeds one synthetic trace into s: what convert would produce, in a CUPTI-like arrival order
 * (GPU records before their API calls, children before parents, late records). */
static int feed(struct cuptrace_sink *s)
{
	int err = 0;
	struct cuptrace_trace_info info = {
	    .pid = PID,
	    .process_name = "python3",
	    .hostname = "gpu-node-7",
	    .start_realtime_ns = 1767225600123456789ll,
	    .start_boottime_ns = 987654321012ll,
	    .trace_uuid_hi = 0x0123456789abcdefull,
	    .trace_uuid_lo = 0xfedcba9876543210ull,
	    .meta = begin_meta,
	    .nmeta = sizeof(begin_meta) / sizeof(begin_meta[0]),
	};
	const struct cuptrace_track tracks[] = {
	    {.uuid = 1,
	     .kind = CUPTRACE_TRACK_PROCESS,
	     .pid = PID,
	     .name = "python3",
	     .cmdline = cmdline,
	     .cmdline_len = 4},
	    {.uuid = 10,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = 1,
	     .pid = PID,
	     .tid = PID,
	     .name = "python3"},
	    {.uuid = 11,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = 1,
	     .pid = PID,
	     .tid = 4250,
	     .name = "worker \"1\""},
	    {.uuid = 100,
	     .kind = CUPTRACE_TRACK_GROUP,
	     .parent_uuid = 1,
	     .pid = PID,
	     .name = "GPU 0: NVIDIA H200"},
	    {.uuid = 107,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 100,
	     .pid = PID,
	     .name = "Stream 7",
	     .description = "the default stream",
	     .sort_rank = 7},
	    {.uuid = 113,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 100,
	     .pid = PID,
	     .name = "Stream 13",
	     .sort_rank = 13},
	    {.uuid = 1113,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 100,
	     .pid = PID,
	     .name = "Stream 13",
	     .sort_rank = 13,
	     .lane = 1},
	    {.uuid = 200,
	     .kind = CUPTRACE_TRACK_COUNTER,
	     .parent_uuid = 100,
	     .pid = PID,
	     .name = "Device memory used",
	     .unit = CUPTRACE_UNIT_BYTES,
	     .sort_rank = 100},
	};
	static const uint64_t f1 = 0x1000000000000011ull, f2 = 0x1000000000000012ull,
	                      f3 = 0x1000000000000013ull, f4 = 0x1000000000000014ull,
	                      f5 = 0x1000000000000015ull;
	static const uint64_t fan[] = {0x1000000000000012ull, 0x1000000000000013ull,
	                               0x1000000000000014ull};
	const struct cuptrace_arg api_args[] = {
	    {.key = "int", .type = CUPTRACE_ARG_INT, .v.i = -42},
	    {.key = "uint", .type = CUPTRACE_ARG_UINT, .v.u = 18446744073709551615ull},
	    {.key = "double", .type = CUPTRACE_ARG_DOUBLE, .v.d = 3.25e-7},
	    {.key = "string", .type = CUPTRACE_ARG_STRING, .v.s = nasty},
	    {.key = "ptr", .type = CUPTRACE_ARG_POINTER, .v.u = 0x7f00deadbeefull},
	    {.key = "bool", .type = CUPTRACE_ARG_BOOL, .v.b = 1},
	    {.key = "empty", .type = CUPTRACE_ARG_STRING, .v.s = ""},
	};
	const struct cuptrace_arg kargs[] = {
	    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(128,1,1)"},
	    {.key = "block", .type = CUPTRACE_ARG_STRING, .v.s = "(256,1,1)"},
	    {.key = "registers", .type = CUPTRACE_ARG_UINT, .v.u = 32},
	    {.key = "shared_memory", .type = CUPTRACE_ARG_UINT, .v.u = 4096},
	};
	const struct cuptrace_slice slices[] = {
	    /* GPU record before its API call (CUPTI delivers activity buffers late). */
	    {.track_uuid = 107,
	     .ts = 3000,
	     .dur = 1000,
	     .name = "vector_add(float*, int)",
	     .category = "kernel",
	     .correlation_id = 11,
	     .args = kargs,
	     .nargs = 4,
	     .flows_in = &f1,
	     .nflows_in = 1},
	    {.track_uuid = 10,
	     .ts = 2000,
	     .dur = 600,
	     .name = "cudaLaunchKernel",
	     .category = "cuda_runtime",
	     .correlation_id = 11,
	     .args = api_args,
	     .nargs = 7,
	     .flows_out = &f1,
	     .nflows_out = 1},
	    {.track_uuid = 10,
	     .ts = 1000,
	     .dur = 500,
	     .name = "cudaMalloc",
	     .category = "cuda_runtime",
	     .correlation_id = 10},
	    /* One API call fanning out to three GPU slices (a graph launch), on a stream, a
	     * second stream and its lane. */
	    {.track_uuid = 11,
	     .ts = 5000,
	     .dur = 800,
	     .name = "cudaGraphLaunch",
	     .category = "cuda_runtime",
	     .correlation_id = 12,
	     .flows_out = fan,
	     .nflows_out = 3},
	    {.track_uuid = 107,
	     .ts = 6000,
	     .dur = 500,
	     .name = "node_a",
	     .category = "kernel",
	     .correlation_id = 12,
	     .flows_in = &f2,
	     .nflows_in = 1},
	    {.track_uuid = 113,
	     .ts = 6000,
	     .dur = 1000,
	     .name = "node_b",
	     .category = "kernel",
	     .correlation_id = 12,
	     .flows_in = &f3,
	     .nflows_in = 1},
	    {.track_uuid = 1113,
	     .ts = 6200,
	     .dur = 600,
	     .name = "node_c",
	     .category = "kernel",
	     .correlation_id = 12,
	     .flows_in = &f4,
	     .nflows_in = 1},
	    /* Late records on stream 7, earlier than what it already holds. */
	    {.track_uuid = 107, .ts = 500, .dur = 400, .name = "memset", .category = "memset"},
	    {.track_uuid = 107, .ts = 4200, .dur = 100, .name = nasty, .category = "kernel"},
	    /* Nesting, children first as their ends come first; distinct times at both ends. */
	    {.track_uuid = 10,
	     .ts = 11000,
	     .dur = 1000,
	     .name = "cudaMemcpy",
	     .category = "cuda_runtime",
	     .correlation_id = 13},
	    {.track_uuid = 10, .ts = 10100, .dur = 4900, .name = "forward", .category = "nvtx"},
	    {.track_uuid = 10, .ts = 10000, .dur = 10000, .name = "step", .category = "nvtx"},
	    /* A chain of one flow id over three slices: TP makes two arrows. */
	    {.track_uuid = 10,
	     .ts = 21000,
	     .dur = 500,
	     .name = "chain_a",
	     .category = "x",
	     .flows_out = &f5,
	     .nflows_out = 1},
	    {.track_uuid = 11,
	     .ts = 22000,
	     .dur = 500,
	     .name = "chain_b",
	     .category = "x",
	     .flows_in = &f5,
	     .nflows_in = 1,
	     .flows_out = &f5,
	     .nflows_out = 1},
	    {.track_uuid = 113,
	     .ts = 23000,
	     .dur = 1000,
	     .name = "chain_c",
	     .category = "x",
	     .flows_in = &f5,
	     .nflows_in = 1},
	    /* Time 0, zero length, no category. */
	    {.track_uuid = 11, .ts = 0, .dur = 100, .name = "first"},
	    {.track_uuid = 113, .ts = 25000, .dur = 0, .name = "empty", .category = "kernel"},
	};
	const struct cuptrace_arg iargs[] = {
	    {.key = "reason", .type = CUPTRACE_ARG_STRING, .v.s = "sync"},
	    {.key = "string", .type = CUPTRACE_ARG_STRING, .v.s = nasty},
	};
	const struct cuptrace_instant instants[] = {
	    {.track_uuid = 11,
	     .ts = 5900,
	     .name = "marker",
	     .category = "nvtx",
	     .args = iargs,
	     .nargs = 2},
	    {.track_uuid = 113,
	     .ts = 6500,
	     .name = "event_record",
	     .category = "sync",
	     .correlation_id = 14},
	};
	const struct cuptrace_counter counters[] = {
	    {.track_uuid = 200, .ts = 1500, .i = 1048576},
	    {.track_uuid = 200, .ts = 3000, .i = 3145728},
	    {.track_uuid = 200, .ts = 800, .i = 0}, /* late */
	    {.track_uuid = 200, .ts = 26000, .is_double = 1, .d = 1.5},
	};
	const struct cuptrace_meta late1[] = {{.key = "dropped_records", .is_int = 1, .i = 0},
	                                      {.key = "records", .is_int = 1, .i = 123}};
	const struct cuptrace_meta late2[] = {{.key = "dropped_records", .is_int = 1, .i = 5},
	                                      {.key = "note", .s = nasty}};

	err |= s->ops->begin(s, &info);
	for (size_t i = 0; i < sizeof(tracks) / sizeof(tracks[0]); i++)
		err |= s->ops->track(s, &tracks[i]);
	for (size_t i = 0; i < 3; i++)
		err |= s->ops->slice(s, &slices[i]);
	err |= s->ops->counter(s, &counters[0]);
	err |= s->ops->counter(s, &counters[1]);
	for (size_t i = 3; i < 9; i++)
		err |= s->ops->slice(s, &slices[i]);
	err |= s->ops->counter(s, &counters[2]);
	err |= s->ops->instant(s, &instants[0]);
	err |= s->ops->instant(s, &instants[1]);
	err |= s->ops->meta(s, late1, 2);
	for (size_t i = 9; i < sizeof(slices) / sizeof(slices[0]); i++)
		err |= s->ops->slice(s, &slices[i]);
	err |= s->ops->counter(s, &counters[3]);
	err |= s->ops->meta(s, late2, 2);
	return err;
}

/* ---- comparing what was fed with what came back ---- */

static const char *tmpdir(void)
{
	const char *d = getenv("CUPTRACE_TMP");
	return d && *d ? d : "/tmp";
}

static int ev_key_cmp(const void *pa, const void *pb)
{
	const struct rec_ev *a = pa, *b = pb;
	if (a->kind != b->kind)
		return a->kind - b->kind;
	if (a->track != b->track)
		return a->track < b->track ? -1 : 1;
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	if (a->dur != b->dur)
		return a->dur > b->dur ? -1 : 1;
	return strcmp(a->name ? a->name : "", b->name ? b->name : "");
}

static void check_args(const struct rec_ev *a, const struct rec_ev *b)
{
	CHECK_EQ_INT(a->nargs, b->nargs);
	for (size_t i = 0; i < a->nargs && i < b->nargs; i++) {
		const struct rec_arg *x = &a->args[i], *y = &b->args[i];
		CHECK_EQ_STR(x->key, y->key);
		CHECK_EQ_INT(x->type, y->type);
		if (x->type == CUPTRACE_ARG_STRING)
			CHECK_EQ_STR(x->s, y->s);
		else if (x->type == CUPTRACE_ARG_DOUBLE)
			CHECK(!memcmp(&x->d, &y->d, sizeof(double)));
		else
			CHECK(x->u == y->u);
	}
}

static void check_ids(const uint64_t *a, size_t na, const uint64_t *b, size_t nb)
{
	CHECK_EQ_INT(na, nb);
	for (size_t i = 0; i < na && i < nb; i++)
		CHECK(a[i] == b[i]);
}

/* The track of uuid and, in *pos, its index (r->ntrk if none). */
static const struct cuptrace_track *find_track(const struct rec *r, uint64_t uuid, size_t *pos)
{
	size_t i = 0;
	while (i < r->ntrk && r->trk[i].uuid != uuid)
		i++;
	if (pos)
		*pos = i;
	return i < r->ntrk ? &r->trk[i] : NULL;
}

/* Everything fed must come back exactly; events in time order. */
static void compare(struct rec *want, struct rec *got)
{
	CHECK_EQ_INT(got->begun, 1);
	CHECK_EQ_INT(got->info.pid, want->info.pid);
	CHECK_EQ_STR(got->info.process_name, want->info.process_name);
	CHECK_EQ_STR(got->info.hostname, want->info.hostname);
	CHECK(got->info.start_realtime_ns == want->info.start_realtime_ns);
	CHECK(got->info.start_boottime_ns == want->info.start_boottime_ns);
	CHECK(got->info.trace_uuid_hi == want->info.trace_uuid_hi);
	CHECK(got->info.trace_uuid_lo == want->info.trace_uuid_lo);
	CHECK_EQ_INT(got->nmeta0, want->nmeta0);
	for (size_t i = 0; i < got->nmeta0 && i < want->nmeta0; i++) {
		CHECK_EQ_STR(got->meta0[i].key, want->meta0[i].key);
		CHECK_EQ_INT(got->meta0[i].is_int, want->meta0[i].is_int);
		CHECK(got->meta0[i].i == want->meta0[i].i);
		CHECK(str_eq(got->meta0[i].s, want->meta0[i].s));
	}
	CHECK_EQ_INT(got->nmeta, want->nmeta);
	for (size_t i = 0; i < want->nmeta; i++) {
		size_t j = 0;
		while (j < got->nmeta && strcmp(got->meta[j].key, want->meta[i].key))
			j++;
		CHECK(j < got->nmeta);
		if (j == got->nmeta)
			continue;
		CHECK_EQ_INT(got->meta[j].is_int, want->meta[i].is_int);
		CHECK(got->meta[j].i == want->meta[i].i);
		CHECK(str_eq(got->meta[j].s, want->meta[i].s));
	}

	CHECK_EQ_INT(got->ntrk, want->ntrk);
	for (size_t i = 0; i < want->ntrk; i++) {
		const struct cuptrace_track *w = &want->trk[i];
		size_t pos, ppos;
		const struct cuptrace_track *g = find_track(got, w->uuid, &pos);
		CHECK(g != NULL);
		if (!g)
			continue;
		CHECK_EQ_INT(g->kind, w->kind);
		CHECK(g->parent_uuid == w->parent_uuid);
		CHECK_EQ_INT(g->pid, w->pid);
		if (w->kind == CUPTRACE_TRACK_THREAD)
			CHECK_EQ_INT(g->tid, w->tid);
		CHECK_EQ_STR(g->name, w->name);
		CHECK(str_eq(g->description, w->description));
		CHECK_EQ_INT(g->sort_rank, w->sort_rank);
		CHECK_EQ_INT(g->lane, w->lane);
		CHECK_EQ_INT(g->unit, w->unit);
		CHECK_EQ_INT(g->cmdline_len, w->cmdline_len);
		for (size_t k = 0; k < w->cmdline_len && k < g->cmdline_len; k++)
			CHECK_EQ_STR(g->cmdline[k], w->cmdline[k]);
		if (g->parent_uuid) /* parents first */
			CHECK(find_track(got, g->parent_uuid, &ppos) && ppos < pos);
	}

	for (size_t i = 1; i < got->nev; i++)
		CHECK(got->ev[i - 1].ts <= got->ev[i].ts);
	CHECK_EQ_INT(got->nev, want->nev);
	if (got->nev != want->nev)
		return;
	qsort(want->ev, want->nev, sizeof(*want->ev), ev_key_cmp);
	qsort(got->ev, got->nev, sizeof(*got->ev), ev_key_cmp);
	for (size_t i = 0; i < want->nev; i++) {
		const struct rec_ev *w = &want->ev[i], *g = &got->ev[i];
		CHECK_EQ_INT(g->kind, w->kind);
		CHECK(g->track == w->track);
		CHECK_EQ_INT(g->ts, w->ts);
		CHECK_EQ_INT(g->dur, w->dur);
		if (w->kind == EV_COUNTER) {
			CHECK_EQ_INT(g->is_double, w->is_double);
			CHECK_EQ_INT(g->ci, w->ci);
			CHECK(!memcmp(&g->cd, &w->cd, sizeof(double)));
			continue;
		}
		/* A NULL name goes out as no name and comes back as "". */
		CHECK_EQ_STR(g->name, w->name ? w->name : "");
		CHECK(str_eq(g->cat, w->cat));
		CHECK(g->corr == w->corr);
		check_args(w, g);
		check_ids(w->out, w->nout, g->out, g->nout);
		check_ids(w->in, w->nin, g->in, g->nin);
	}
}

static void check_clean(const struct cuptrace_pf_check *c)
{
	CHECK(c->packets > 0);
	CHECK(c->sequences > 0);
	CHECK_EQ_INT(c->missing_sequence_id, 0);
	CHECK_EQ_INT(c->missing_timestamp, 0);
	CHECK_EQ_INT(c->seq_first_not_cleared, 0);
	CHECK_EQ_INT(c->incremental_state_invalid, 0);
	CHECK_EQ_INT(c->unknown_iid, 0);
	CHECK_EQ_INT(c->counter_before_descriptor, 0);
	CHECK_EQ_INT(c->event_on_unknown_track, 0);
	CHECK_EQ_INT(c->end_without_begin, 0);
	CHECK_EQ_INT(c->unterminated_slices, 0);
	CHECK_EQ_INT(c->partial_overlaps, 0);
	CHECK_EQ_INT(c->depth_exceeded, 0);
	CHECK_EQ_INT(c->flows_dangling, 0);
	CHECK_EQ_INT(c->negative_timestamps, 0);
	CHECK_EQ_INT(c->negative_packet_timestamps, 0);
	CHECK_EQ_INT(c->before_snapshot, 0);
	CHECK_EQ_INT(c->duplicate_thread_uuid, 0);
	CHECK_EQ_INT(c->duplicate_process_uuid, 0);
	CHECK_EQ_INT(c->clock_errors, 0);
	CHECK_EQ_INT(c->truncated_bytes, 0);
	CHECK_EQ_INT(c->corrupt, 0);
}

/* Writes the synthetic trace to a file in the given mode; returns its bytes (malloc'd). */
static uint8_t *write_trace(enum cuptrace_compress mode, size_t chunk, size_t *len, const char *tag)
{
	char path[512];
	struct cuptrace_output_opts o = {.sz = sizeof(o), .chunk_bytes = chunk, .flush_ms = -1};
	snprintf(path, sizeof(path), "%s/test_perfetto_%s_%d.pftrace", tmpdir(), tag,
	         (int)getpid());
	struct cuptrace_output *out = cuptrace_output_open(path, mode, &o);
	CHECK(out != NULL);
	if (!out)
		return NULL;
	struct cuptrace_sink *s = cuptrace_perfetto_sink_new(out);
	CHECK(s != NULL);
	CHECK_EQ_INT(feed(s), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);

	FILE *f = fopen(path, "rb");
	CHECK(f != NULL);
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(*len + 1);
	CHECK(fread(buf, 1, *len, f) == *len);
	fclose(f);

	/* The file reader must agree with the memory reader. */
	struct rec r;
	struct cuptrace_pf_check ck;
	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read(path, &r.base, &ck), 0);
	check_clean(&ck);
	rec_free(&r);
	unlink(path);
	return buf;
}

static void round_trip(enum cuptrace_compress mode, const char *tag)
{
	struct rec want, got;
	struct cuptrace_pf_check ck;
	size_t len = 0;

	rec_init(&want);
	CHECK_EQ_INT(feed(&want.base), 0);
	uint8_t *buf = write_trace(mode, 0, &len, tag);
	CHECK(buf != NULL);
	if (!buf) {
		rec_free(&want);
		return;
	}
	rec_init(&got);
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(buf, len, &got.base, &ck), 0);
	check_clean(&ck);
	CHECK_EQ_INT(ck.chunks > 0, mode == CUPTRACE_COMPRESS_CHUNKS);
	CHECK_EQ_INT(got.meta_calls, 1);
	compare(&want, &got);

	/* Replaying into the writer again gives the same trace once more. */
	char path[512];
	snprintf(path, sizeof(path), "%s/test_perfetto_again_%d.pftrace", tmpdir(), (int)getpid());
	struct cuptrace_sink *s =
	    cuptrace_perfetto_sink_new(cuptrace_output_open(path, CUPTRACE_COMPRESS_NONE, NULL));
	CHECK(s != NULL);
	if (s) {
		struct rec again;
		CHECK_EQ_INT(cuptrace_perfetto_read_mem(buf, len, s, NULL), 0);
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);
		rec_init(&again);
		CHECK_EQ_INT(cuptrace_perfetto_read(path, &again.base, &ck), 0);
		check_clean(&ck);
		compare(&want, &again);
		rec_free(&again);
		unlink(path);
	}
	free(buf);
	rec_free(&want);
	rec_free(&got);
}

static void test_round_trip_none(void)
{
	round_trip(CUPTRACE_COMPRESS_NONE, "none");
}

static void test_round_trip_gzip(void)
{
	round_trip(CUPTRACE_COMPRESS_GZIP, "gzip");
}

static void test_round_trip_chunks(void)
{
	round_trip(CUPTRACE_COMPRESS_CHUNKS, "chunks");
}

static size_t gzip_to(uint8_t *dst, size_t cap, const uint8_t *src, size_t n)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	CHECK_EQ_INT(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)src;
	z.avail_in = (uInt)n;
	z.next_out = dst;
	z.avail_out = (uInt)cap;
	CHECK_EQ_INT(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t out = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

/* Concatenated gzip members (what `cat a.gz b.gz` gives), cut in the middle of a packet, and
 * gzip around a chunked file: both read like the original. */
static void test_gzip_members(void)
{
	struct rec want, got;
	struct cuptrace_pf_check ck;
	size_t len = 0, clen = 0;

	rec_init(&want);
	CHECK_EQ_INT(feed(&want.base), 0);
	uint8_t *plain = write_trace(CUPTRACE_COMPRESS_NONE, 0, &len, "members");
	uint8_t *chunks = write_trace(CUPTRACE_COMPRESS_CHUNKS, 1024, &clen, "gzchunks");
	CHECK(plain && chunks);
	if (plain && chunks) {
		size_t cap = 2 * (len + clen) + 1024, n = 0;
		uint8_t *gz = malloc(cap);
		n += gzip_to(gz, cap, plain, len / 2 + 3);
		n += gzip_to(gz + n, cap - n, plain + len / 2 + 3, len - len / 2 - 3);
		rec_init(&got);
		CHECK_EQ_INT(cuptrace_perfetto_read_mem(gz, n, &got.base, &ck), 0);
		check_clean(&ck);
		compare(&want, &got);
		rec_free(&got);

		n = gzip_to(gz, cap, chunks, clen);
		rec_init(&got);
		CHECK_EQ_INT(cuptrace_perfetto_read_mem(gz, n, &got.base, &ck), 0);
		check_clean(&ck);
		CHECK(ck.chunks >= 3);
		compare(&want, &got);
		rec_free(&got);
		free(gz);
	}
	free(plain);
	free(chunks);
	rec_free(&want);
}

/* ---- wire-level rules ---- */

struct wire_seq {
	uint32_t id;
	uint64_t track; /* from its defaults */
	size_t packets;
	uint64_t defined[4][64]; /* iids defined in this generation, per table (small here) */
	size_t ndefined[4];
};

static int defined(struct wire_seq *q, int k, uint64_t iid)
{
	for (size_t i = 0; i < q->ndefined[k]; i++)
		if (q->defined[k][i] == iid)
			return 1;
	return 0;
}

static void define(struct wire_seq *q, int k, uint64_t iid)
{
	CHECK(!defined(q, k, iid));
	if (q->ndefined[k] < 64)
		q->defined[k][q->ndefined[k]++] = iid;
}

static size_t varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	size_t n = 0;
	*v = 0;
	while (p + n < end && n < 10) {
		*v |= (uint64_t)(p[n] & 0x7f) << (7 * n);
		if (!(p[n++] & 0x80))
			return n;
	}
	return 0;
}

/* Walks the raw fields of a TrackEvent: flow ids must be unpacked fixed64 (tag F9 02). */
static void check_raw_event(const uint8_t *p, size_t n, size_t *flows)
{
	const uint8_t *end = p + n;
	while (p < end) {
		uint64_t tag, v;
		size_t k = varint(p, end, &tag);
		CHECK(k > 0);
		if (!k)
			return;
		if (tag >> 3 == 47) {
			CHECK_EQ_INT(tag, 0x179); /* field 47, wire type 1 */
			CHECK(p[0] == 0xF9 && p[1] == 0x02);
			(*flows)++;
		}
		p += k;
		switch (tag & 7) {
		case 0:
			p += varint(p, end, &v);
			break;
		case 1:
			p += 8;
			break;
		case 5:
			p += 4;
			break;
		case 2:
			k = varint(p, end, &v);
			p += k + v;
			break;
		}
	}
}

/* The TrackEvent field of a raw TracePacket, found by walking the top-level fields. */
static const uint8_t *raw_event(const uint8_t *p, size_t n, size_t *len)
{
	const uint8_t *end = p + n;
	while (p < end) {
		uint64_t tag, v;
		size_t k = varint(p, end, &tag);
		if (!k)
			return NULL;
		p += k;
		if ((tag & 7) == 2) {
			k = varint(p, end, &v);
			if (tag >> 3 == 11) {
				*len = (size_t)v;
				return p + k;
			}
			p += k + v;
		} else if ((tag & 7) == 0) {
			p += varint(p, end, &v);
		} else {
			p += (tag & 7) == 1 ? 8 : 4;
		}
	}
	return NULL;
}

static void test_wire_rules(void)
{
	size_t len = 0, npk = 0, flows = 0, snaps = 0, counters = 0, events = 0;
	size_t on_process = 0, labels = 0;
	uint8_t *buf = write_trace(CUPTRACE_COMPRESS_NONE, 0, &len, "wire");
	struct wire_seq seqs[32];
	size_t nseqs = 0;
	uint64_t counter_tracks[8];
	size_t ncounter_tracks = 0;

	CHECK(buf != NULL);
	if (!buf)
		return;
	memset(seqs, 0, sizeof(seqs));
	for (const uint8_t *p = buf, *end = buf + len; p < end; npk++) {
		uint64_t plen;
		CHECK_EQ_INT(*p, 0x0A);
		size_t k = varint(p + 1, end, &plen);
		CHECK(k > 0 && p + 1 + k + plen <= end);
		const uint8_t *body = p + 1 + k;
		p = body + plen;
		Cuptrace__Pb__TracePacket *pk =
		    cuptrace__pb__trace_packet__unpack(NULL, (size_t)plen, body);
		CHECK(pk != NULL);
		if (!pk)
			break;
		CHECK(pk->has_trusted_packet_sequence_id && pk->trusted_packet_sequence_id);
		struct wire_seq *q = NULL;
		for (size_t i = 0; i < nseqs && !q; i++)
			if (seqs[i].id == pk->trusted_packet_sequence_id)
				q = &seqs[i];
		if (!q && nseqs < 32) {
			q = &seqs[nseqs++];
			q->id = pk->trusted_packet_sequence_id;
		}
		/* The first packet of every sequence clears the incremental state. */
		if (!q->packets++)
			CHECK(pk->has_sequence_flags && pk->sequence_flags == 3);
		if (pk->has_sequence_flags && (pk->sequence_flags & 1))
			memset(q->ndefined, 0, sizeof(q->ndefined));
		if (pk->trace_packet_defaults && pk->trace_packet_defaults->track_event_defaults)
			q->track = pk->trace_packet_defaults->track_event_defaults->track_uuid;
		/* A clock snapshot travels alone: TP reads nothing else from its packet. */
		if (pk->clock_snapshot) {
			snaps++;
			CHECK(!pk->track_event && !pk->track_descriptor && !pk->interned_data &&
			      !pk->trace_packet_defaults && !pk->has_sequence_flags &&
			      !pk->has_timestamp && !pk->system_info && !pk->trace_attributes &&
			      !pk->trace_uuid);
		}
		if (pk->track_descriptor && pk->track_descriptor->counter && ncounter_tracks < 8)
			counter_tracks[ncounter_tracks++] = pk->track_descriptor->uuid;
		if (pk->track_descriptor)
			CHECK(!pk->has_timestamp);
		if (pk->track_descriptor && pk->track_descriptor->process)
			labels += pk->track_descriptor->process->n_process_labels;
		Cuptrace__Pb__InternedData *id = pk->interned_data;
		if (id) {
			for (size_t i = 0; i < id->n_event_names; i++)
				define(q, 0, id->event_names[i]->iid);
			for (size_t i = 0; i < id->n_event_categories; i++)
				define(q, 1, id->event_categories[i]->iid);
			for (size_t i = 0; i < id->n_debug_annotation_names; i++)
				define(q, 2, id->debug_annotation_names[i]->iid);
			for (size_t i = 0; i < id->n_debug_annotation_string_values; i++)
				define(q, 3, id->debug_annotation_string_values[i]->iid);
		}
		Cuptrace__Pb__TrackEvent *te = pk->track_event;
		if (te) {
			events++;
			on_process += q->track == 1; /* the process's uuid in feed() */
			CHECK(pk->has_timestamp);
			int uses =
			    te->has_name_iid || te->n_category_iids || te->n_debug_annotations;
			if (uses)
				CHECK(pk->has_sequence_flags && (pk->sequence_flags & 2));
			if (te->has_name_iid)
				CHECK(defined(q, 0, te->name_iid));
			for (size_t i = 0; i < te->n_category_iids; i++)
				CHECK(defined(q, 1, te->category_iids[i]));
			for (size_t i = 0; i < te->n_debug_annotations; i++) {
				Cuptrace__Pb__DebugAnnotation *d = te->debug_annotations[i];
				CHECK(d->has_name_iid && defined(q, 2, d->name_iid));
				if (d->has_string_value_iid)
					CHECK(defined(q, 3, d->string_value_iid));
			}
			CHECK(!te->has_track_uuid); /* from the sequence's defaults */
			if (te->type == 4) {
				/* The counter's descriptor came first in the file. */
				size_t i = 0;
				counters++;
				while (i < ncounter_tracks && counter_tracks[i] != q->track)
					i++;
				CHECK(i < ncounter_tracks);
			}
			if (te->type == 2)
				CHECK(!te->has_name_iid && !te->n_debug_annotations &&
				      !te->n_flow_ids);
			size_t rl = 0, before = flows;
			const uint8_t *raw = raw_event(body, (size_t)plen, &rl);
			CHECK(raw != NULL);
			if (raw)
				check_raw_event(raw, rl, &flows);
			CHECK_EQ_INT(flows - before, te->n_flow_ids);
		}
		cuptrace__pb__trace_packet__free_unpacked(pk, NULL);
	}
	/* metadata sequence + one per track with events (8 tracks; the group has none, nor has the
	 * process: the metadata instants are on its first thread, src/format/TIMELINE.md) */
	CHECK_EQ_INT(nseqs, 1 + 6);
	CHECK_EQ_INT(snaps, 1 + 6);
	CHECK_EQ_INT(on_process, 0);
	CHECK_EQ_INT(labels, 0);
	CHECK_EQ_INT(counters, 4);
	CHECK_EQ_INT(flows, 1 + 1 + 3 + 3 + 1 + 1 + 1);
	CHECK(events > 40);
	free(buf);
}

/* ---- cut and corrupt files ---- */

static void quiet(enum cuptrace_log_level level, const char *msg)
{
	(void)level;
	(void)msg;
}

static char last_error[512];

static void keep_error(enum cuptrace_log_level level, const char *msg)
{
	if (level == CUPTRACE_LOG_ERROR)
		snprintf(last_error, sizeof(last_error), "%s", msg);
}

static size_t count_slices(const uint8_t *b, size_t n, int *rc, struct cuptrace_pf_check *ck)
{
	struct rec r;
	rec_init(&r);
	*rc = cuptrace_perfetto_read_mem(b, n, &r.base, ck);
	size_t s = r.slices;
	rec_free(&r);
	return s;
}

static void test_truncation(void)
{
	size_t len = 0, full, prev = 0;
	int rc, bad = 0, nonmono = 0, partial = 0;
	struct cuptrace_pf_check ck;
	/* Small chunks, so that the file holds several. */
	uint8_t *buf = write_trace(CUPTRACE_COMPRESS_CHUNKS, 1024, &len, "cut");

	CHECK(buf != NULL);
	if (!buf)
		return;
	full = count_slices(buf, len, &rc, &ck);
	CHECK_EQ_INT(rc, 0);
	CHECK(ck.chunks >= 3);
	CHECK_EQ_INT(full, 17);
	cuptrace_log_fn old = cuptrace_log_set(quiet);
	for (size_t cut = 0; cut <= len; cut++) {
		/* A copy of exactly cut bytes, so ASan sees any read past the end. */
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, buf, cut);
		size_t n = count_slices(c, cut, &rc, &ck);
		free(c);
		bad += rc != 0;
		nonmono += n < prev;
		partial += n > 0 && n < full;
		prev = n;
		if (cut == len) {
			CHECK_EQ_INT(n, full);
			CHECK_EQ_INT(ck.truncated_bytes, 0);
		}
	}
	cuptrace_log_set(old);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(nonmono, 0);
	CHECK(partial > 0);
	free(buf);

	/* A plain file cut anywhere reads too, up to its last complete packet. */
	buf = write_trace(CUPTRACE_COMPRESS_NONE, 0, &len, "cutplain");
	CHECK(buf != NULL);
	if (!buf)
		return;
	prev = bad = nonmono = 0;
	old = cuptrace_log_set(quiet);
	for (size_t cut = 0; cut <= len; cut++) {
		uint8_t *c = malloc(cut ? cut : 1);
		memcpy(c, buf, cut);
		size_t n = count_slices(c, cut, &rc, &ck);
		free(c);
		bad += rc != 0;
		nonmono += n < prev;
		prev = n;
	}
	cuptrace_log_set(old);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(nonmono, 0);
	CHECK_EQ_INT(prev, full);
	free(buf);
}

/* A cut gzip file: trace_processor refuses it; we read what came through, flag it, never
 * crash. */
static void test_truncated_gzip(void)
{
	size_t len = 0, full;
	int rc, errors = 0, partial = 0;
	struct cuptrace_pf_check ck;
	uint8_t *buf = write_trace(CUPTRACE_COMPRESS_GZIP, 0, &len, "cutgz");

	CHECK(buf != NULL);
	if (!buf)
		return;
	full = count_slices(buf, len, &rc, &ck);
	CHECK_EQ_INT(rc, 0);
	cuptrace_log_fn old = cuptrace_log_set(quiet);
	for (size_t cut = 1; cut < len; cut++) {
		uint8_t *c = malloc(cut);
		memcpy(c, buf, cut);
		size_t n = count_slices(c, cut, &rc, &ck);
		free(c);
		CHECK(rc == 0 || rc == -EINVAL);
		CHECK(n <= full);
		if (rc == 0)
			CHECK(ck.corrupt > 0); /* flagged: the UI would not load it */
		errors += rc != 0;
		partial += rc == 0;
	}
	cuptrace_log_set(old);
	CHECK(errors + partial == (int)len - 1);
	/* A gzip file whose content is not a trace (JSON) is refused with a message. */
	old = cuptrace_log_set(keep_error);
	last_error[0] = 0;
	static const char json[] = "[{\"ph\":\"X\"}]";
	uint8_t gz[256];
	z_stream z;
	memset(&z, 0, sizeof(z));
	CHECK_EQ_INT(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)json;
	z.avail_in = sizeof(json) - 1;
	z.next_out = gz;
	z.avail_out = sizeof(gz);
	CHECK_EQ_INT(deflate(&z, Z_FINISH), Z_STREAM_END);
	size_t gzlen = sizeof(gz) - z.avail_out;
	deflateEnd(&z);
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(gz, gzlen, NULL, &ck), -EINVAL);
	CHECK(last_error[0] != 0);
	cuptrace_log_set(old);
	free(buf);
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_foreign_and_random(void)
{
	struct cuptrace_pf_check ck;
	int rc;

	cuptrace_log_fn old = cuptrace_log_set(keep_error);
	static const char json[] = "{\"traceEvents\":[]}";
	last_error[0] = 0;
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(json, sizeof(json) - 1, NULL, &ck), -EINVAL);
	CHECK(strstr(last_error, "not a Perfetto") != NULL);
	CHECK_EQ_INT(cuptrace_perfetto_read_mem("", 0, NULL, &ck), 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/test_perfetto_missing_%d", tmpdir(), (int)getpid());
	CHECK_EQ_INT(cuptrace_perfetto_read(path, NULL, &ck), -ENOENT);
	cuptrace_log_set(quiet);

	for (int it = 0; it < 3000; it++) {
		size_t n = (size_t)(rnd() % 2048);
		uint8_t *b = malloc(n ? n : 1);
		for (size_t i = 0; i < n; i++)
			b[i] = (uint8_t)rnd();
		if (n && it % 3 == 0)
			b[0] = 0x0A;
		if (n > 1 && it % 3 == 1) {
			b[0] = 0x1f;
			b[1] = 0x8b;
		}
		count_slices(b, n, &rc, &ck);
		CHECK(rc == 0 || rc == -EINVAL);
		free(b);
	}
	/* Random packets that are well framed, so the decoder goes deeper. */
	for (int it = 0; it < 3000; it++) {
		uint8_t b[600];
		size_t n = 0;
		while (n + 70 < sizeof(b)) {
			size_t plen = (size_t)(rnd() % 64);
			b[n++] = 0x0A;
			b[n++] = (uint8_t)plen;
			for (size_t i = 0; i < plen; i++)
				b[n++] = (uint8_t)rnd();
		}
		count_slices(b, n, &rc, &ck);
		CHECK(rc == 0 || rc == -EINVAL);
	}
	cuptrace_log_set(old);
}

static void test_bit_flips(void)
{
	static const enum cuptrace_compress modes[] = {
	    CUPTRACE_COMPRESS_NONE, CUPTRACE_COMPRESS_CHUNKS, CUPTRACE_COMPRESS_GZIP};
	struct cuptrace_pf_check ck;
	int rc;

	for (size_t m = 0; m < 3; m++) {
		size_t len = 0;
		uint8_t *buf = write_trace(modes[m], 1024, &len, "flip");
		CHECK(buf != NULL);
		if (!buf)
			continue;
		cuptrace_log_fn old = cuptrace_log_set(quiet);
		for (int it = 0; it < 1500; it++) {
			uint8_t *c = malloc(len);
			memcpy(c, buf, len);
			int flips = 1 + (int)(rnd() % 4);
			for (int k = 0; k < flips; k++)
				c[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
			if (it % 5 == 0) /* a byte set to something else entirely */
				c[rnd() % len] = (uint8_t)rnd();
			count_slices(c, len, &rc, &ck);
			CHECK(rc == 0 || rc == -EINVAL);
			count_slices(c, len - (size_t)(rnd() % len), &rc, &ck);
			CHECK(rc == 0 || rc == -EINVAL);
			free(c);
		}
		cuptrace_log_set(old);
		free(buf);
	}
}

/* Hand-made packets: deep nesting, a missing sequence id, iids never defined, a counter before
 * its descriptor, ENDs with nothing open, and a sequence that never clears. Each must be
 * counted, and none may crash. */
static size_t put_tag_len(uint8_t *p, uint32_t field, size_t len)
{
	size_t n = 0;
	uint64_t tag = (uint64_t)field << 3 | 2;
	while (tag >= 0x80) {
		p[n++] = (uint8_t)(tag | 0x80);
		tag >>= 7;
	}
	p[n++] = (uint8_t)tag;
	uint64_t l = len;
	while (l >= 0x80) {
		p[n++] = (uint8_t)(l | 0x80);
		l >>= 7;
	}
	p[n++] = (uint8_t)l;
	return n;
}

static size_t pack_packet(uint8_t *dst, const Cuptrace__Pb__TracePacket *p)
{
	size_t n = cuptrace__pb__trace_packet__get_packed_size(p);
	size_t h = put_tag_len(dst, 1, n);
	cuptrace__pb__trace_packet__pack(p, dst + h);
	return h + n;
}

static void test_bad_packets(void)
{
	uint8_t *b = malloc(1 << 22);
	size_t n = 0;
	struct cuptrace_pf_check ck;
	struct rec r;

	/* A counter before its descriptor, on sequence 5 that never clears. */
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TrackEvent te = CUPTRACE__PB__TRACK_EVENT__INIT;
	te.has_type = 1;
	te.type = 4;
	te.has_track_uuid = 1;
	te.track_uuid = 77;
	te.has_counter_value = 1;
	te.counter_value = 5;
	p.track_event = &te;
	p.has_timestamp = 1;
	p.timestamp = 100;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = 5;
	n += pack_packet(b + n, &p);
	/* Its descriptor, then an END with nothing open and an unknown name iid. */
	Cuptrace__Pb__TracePacket d = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TrackDescriptor td = CUPTRACE__PB__TRACK_DESCRIPTOR__INIT;
	Cuptrace__Pb__CounterDescriptor cd = CUPTRACE__PB__COUNTER_DESCRIPTOR__INIT;
	td.has_uuid = 1;
	td.uuid = 77;
	td.counter = &cd;
	d.track_descriptor = &td;
	n += pack_packet(b + n, &d);
	Cuptrace__Pb__TrackEvent e2 = CUPTRACE__PB__TRACK_EVENT__INIT;
	e2.has_type = 1;
	e2.type = 2;
	e2.has_track_uuid = 1;
	e2.track_uuid = 78;
	p.track_event = &e2;
	n += pack_packet(b + n, &p);
	e2.type = 1;
	e2.has_name_iid = 1;
	e2.name_iid = 9;
	p.has_sequence_flags = 1;
	p.sequence_flags = 2; /* needs state that was never cleared: skipped */
	n += pack_packet(b + n, &p);
	p.trusted_packet_sequence_id = 6;
	p.sequence_flags = 3; /* clears: the unknown iid is counted, the BEGIN never ends */
	n += pack_packet(b + n, &p);
	p.has_trusted_packet_sequence_id = 0;
	p.has_sequence_flags = 0;
	n += pack_packet(b + n, &p);
	p.has_trusted_packet_sequence_id = 1;
	p.has_timestamp = 0;
	n += pack_packet(b + n, &p);

	/* A BEGIN whose debug annotation nests 200000 dicts deep: built from the inside out. */
	size_t depth = 200000, cap = 1 << 21;
	uint8_t *ann = malloc(cap);
	size_t at = cap; /* grows downwards */
	ann[--at] = 1;   /* innermost: int_value = 1 */
	ann[--at] = 0x20;
	for (size_t i = 0; i < depth && at > 16; i++) {
		uint8_t h[12];
		size_t hl = put_tag_len(h, 11, cap - at);
		at -= hl;
		memcpy(ann + at, h, hl);
	}
	uint8_t *ev = malloc((1 << 21) + 64);
	size_t el = 0;
	ev[el++] = 0x48; /* type = BEGIN */
	ev[el++] = 0x01;
	ev[el++] = 0x58; /* track_uuid = 79 */
	ev[el++] = 79;
	el += put_tag_len(ev + el, 4, cap - at);
	memcpy(ev + el, ann + at, cap - at);
	el += cap - at;
	uint8_t hdr[32];
	size_t hl = 0;
	hdr[hl++] = 0x40; /* timestamp 5 */
	hdr[hl++] = 5;
	hdr[hl++] = 0x50; /* sequence 6 */
	hdr[hl++] = 6;
	hl += put_tag_len(hdr + hl, 11, el);
	n += put_tag_len(b + n, 1, hl + el);
	memcpy(b + n, hdr, hl);
	n += hl;
	memcpy(b + n, ev, el);
	n += el;
	free(ann);
	free(ev);

	/* Named ENDs that misnest on a described track: B is cut at A's end, like TP does. */
	Cuptrace__Pb__TrackDescriptor t80 = CUPTRACE__PB__TRACK_DESCRIPTOR__INIT;
	t80.has_uuid = 1;
	t80.uuid = 80;
	t80.name = "misnested";
	d.track_descriptor = &t80;
	n += pack_packet(b + n, &d);
	static const char *const names[] = {"A", "B", "A", "B"};
	for (int i = 0; i < 4; i++) {
		Cuptrace__Pb__TrackEvent e3 = CUPTRACE__PB__TRACK_EVENT__INIT;
		e3.has_type = 1;
		e3.type = i < 2 ? 1 : 2;
		e3.has_track_uuid = 1;
		e3.track_uuid = 80;
		e3.name = (char *)names[i];
		p.track_event = &e3;
		p.has_timestamp = 1;
		p.timestamp = 1000 + 10 * (uint64_t)i;
		p.has_sequence_flags = 0;
		p.trusted_packet_sequence_id = 6;
		n += pack_packet(b + n, &p);
	}
	/* Two uuids for one thread, and for one process. */
	Cuptrace__Pb__ThreadDescriptor th = CUPTRACE__PB__THREAD_DESCRIPTOR__INIT;
	Cuptrace__Pb__ProcessDescriptor pr = CUPTRACE__PB__PROCESS_DESCRIPTOR__INIT;
	Cuptrace__Pb__TrackDescriptor td2 = CUPTRACE__PB__TRACK_DESCRIPTOR__INIT;
	th.has_pid = th.has_tid = 1;
	th.pid = 1;
	th.tid = 2;
	pr.has_pid = 1;
	pr.pid = 7;
	td2.has_uuid = 1;
	d.track_descriptor = &td2;
	for (int i = 0; i < 4; i++) {
		td2.uuid = 90 + (uint64_t)i;
		td2.thread = i < 2 ? &th : NULL;
		td2.process = i < 2 ? NULL : &pr;
		n += pack_packet(b + n, &d);
	}

	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(b, n, &r.base, &ck), 0);
	CHECK_EQ_INT(ck.partial_overlaps, 1);
	CHECK_EQ_INT(ck.duplicate_thread_uuid, 1);
	CHECK_EQ_INT(ck.duplicate_process_uuid, 1);
	CHECK_EQ_INT(ck.counter_before_descriptor, 1);
	CHECK_EQ_INT(ck.end_without_begin, 2); /* track 78, and B's own END on track 80 */
	CHECK_EQ_INT(ck.incremental_state_invalid, 1);
	CHECK_EQ_INT(ck.seq_first_not_cleared, 1);
	CHECK_EQ_INT(ck.unknown_iid, 1);
	CHECK_EQ_INT(ck.missing_sequence_id, 1);
	CHECK_EQ_INT(ck.missing_timestamp, 1);
	CHECK_EQ_INT(ck.unterminated_slices, 2);
	CHECK_EQ_INT(ck.corrupt, 0);
	CHECK_EQ_INT(r.slices, 2);
	for (size_t i = 0; i < r.nev; i++) {
		CHECK(r.ev[i].track == 80);
		CHECK_EQ_INT(r.ev[i].ts + r.ev[i].dur, 1020); /* both end at A's END */
	}
	rec_free(&r);
	free(b);
}

/* Issue 42: what trace_processor drops for time, counted as it counts it. TP converts each
 * TrackEvent's timestamp to its trace clock (here BOOTTIME, the snapshot's primary: the snapshot's
 * reading plus the time since it on the event's clock) and drops the event where that is
 * negative (track_event_invalid_timestamp), before it looks at the event's track; a track
 * descriptor at a negative time is dropped by its sorter. An event before the snapshot at a
 * time >= 0 is kept by TP: not a negative timestamp, but before our model's start. */
static void add_instant(uint8_t *b, size_t *n, uint32_t seq, uint32_t flags, int clock, uint64_t ts,
                        int type)
{
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TrackEvent te = CUPTRACE__PB__TRACK_EVENT__INIT;
	te.has_type = 1;
	te.type = (uint32_t)type;
	te.has_track_uuid = 1;
	te.track_uuid = type == 4 ? 99 : 10; /* a counter on a track never described */
	te.name = type == 4 ? NULL : "i";
	te.has_counter_value = type == 4;
	te.counter_value = 1;
	p.track_event = &te;
	p.has_timestamp = 1;
	p.timestamp = ts;
	p.has_timestamp_clock_id = clock > 0;
	p.timestamp_clock_id = clock > 0 ? (uint32_t)clock : 0;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = seq;
	p.has_sequence_flags = flags != 0;
	p.sequence_flags = flags;
	*n += pack_packet(b + *n, &p);
}

static void add_snapshot(uint8_t *b, size_t *n, uint32_t seq, uint32_t id0, uint64_t v0, int incr,
                         uint32_t id1, uint64_t v1, int primary)
{
	Cuptrace__Pb__TracePacket p = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__ClockSnapshot cs = CUPTRACE__PB__CLOCK_SNAPSHOT__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock c0 = CUPTRACE__PB__CLOCK_SNAPSHOT__CLOCK__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock c1 = CUPTRACE__PB__CLOCK_SNAPSHOT__CLOCK__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock *cl[2] = {&c0, &c1};
	c0.has_clock_id = c0.has_timestamp = c1.has_clock_id = c1.has_timestamp = 1;
	c0.clock_id = id0;
	c0.timestamp = v0;
	c0.has_is_incremental = c0.is_incremental = incr;
	c1.clock_id = id1;
	c1.timestamp = v1;
	cs.n_clocks = 2;
	cs.clocks = cl;
	cs.has_primary_trace_clock = primary;
	cs.primary_trace_clock = primary ? 6 : 0;
	p.clock_snapshot = &cs;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = seq;
	*n += pack_packet(b + *n, &p);
}

static void test_trace_time(void)
{
	uint8_t *b = malloc(1 << 16);
	size_t n = 0;
	struct cuptrace_pf_check ck;
	struct rec r;
	const uint64_t wrap = 0; /* 0 - x: the uint64 that TP reads as -x */

	/* Sequence 1: track 10, then an event on REALTIME whose snapshot comes only later (TP
	 * defers it to the end of the file): 998999 on REALTIME is BOOTTIME -1. */
	Cuptrace__Pb__TracePacket d = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TrackDescriptor td = CUPTRACE__PB__TRACK_DESCRIPTOR__INIT;
	td.has_uuid = 1;
	td.uuid = 10;
	td.name = "t";
	d.track_descriptor = &td;
	d.has_trusted_packet_sequence_id = d.has_sequence_flags = 1;
	d.trusted_packet_sequence_id = 1;
	d.sequence_flags = 3;
	n += pack_packet(b + n, &d);
	add_instant(b, &n, 1, 0, 1, 998999, 3);
	/* The trace's snapshot: BOOTTIME 1000 = REALTIME 1000000, BOOTTIME the trace clock. */
	add_snapshot(b, &n, 1, 6, 1000, 0, 1, 1000000, 1);
	add_instant(b, &n, 1, 0, 0, 2000, 3);           /* 2000: kept, at 1000 */
	add_instant(b, &n, 1, 0, 0, 500, 3);            /* 500: kept by TP, before ours */
	add_instant(b, &n, 1, 0, 0, wrap - 5, 3);       /* -5: dropped */
	add_instant(b, &n, 1, 0, 1, 1000000 - 2000, 3); /* REALTIME: -1000, dropped */
	add_instant(b, &n, 1, 0, 1, 1000000 - 500, 3);  /* REALTIME: 500, before ours */
	add_instant(b, &n, 1, 0, 1, 1000000 + 7, 3);    /* REALTIME: 1007, kept at 7 */
	add_instant(b, &n, 1, 0, 0, wrap - 1, 4);       /* -1: dropped before its track */
	/* Sequence 2 on an incremental clock 64 whose snapshot pairs it with BOOTTIME -100. */
	Cuptrace__Pb__TracePacket a = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TracePacketDefaults df = CUPTRACE__PB__TRACE_PACKET_DEFAULTS__INIT;
	df.has_timestamp_clock_id = 1;
	df.timestamp_clock_id = 64;
	a.trace_packet_defaults = &df;
	a.has_trusted_packet_sequence_id = a.has_sequence_flags = 1;
	a.trusted_packet_sequence_id = 2;
	a.sequence_flags = 3;
	n += pack_packet(b + n, &a);
	add_snapshot(b, &n, 2, 64, 0, 1, 6, wrap - 100, 0);
	add_instant(b, &n, 2, 0, 0, 40, 3);   /* -60: dropped */
	add_instant(b, &n, 2, 0, 0, 100, 3);  /* 40: before ours */
	add_instant(b, &n, 2, 0, 0, 2000, 3); /* 2040: kept at 1040 */
	/* A descriptor at -1: its track stays, TP's sorter drops the packet. */
	td.uuid = 11;
	td.name = "late";
	d.has_sequence_flags = 0;
	d.has_timestamp = 1;
	d.timestamp = wrap - 1;
	n += pack_packet(b + n, &d);

	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(b, n, &r.base, &ck), 0);
	CHECK_EQ_INT(ck.negative_timestamps, 5);
	CHECK_EQ_INT(ck.negative_packet_timestamps, 1);
	CHECK_EQ_INT(ck.before_snapshot, 3);
	CHECK_EQ_INT(ck.counter_before_descriptor, 0);
	CHECK_EQ_INT(ck.clock_errors, 0);
	CHECK_EQ_INT(r.nev, 3);
	CHECK_EQ_INT(r.info.start_boottime_ns, 1000);
	int64_t want[3] = {7, 1000, 1040}; /* in time order */
	for (size_t i = 0; i < r.nev && i < 3; i++)
		CHECK_EQ_INT(r.ev[i].ts, want[i]);
	rec_free(&r);

	/* A snapshot whose BOOTTIME is negative (what merge wrote before issue 42's fix): the
	 * events before BOOTTIME 0 are dropped, and the info says no BOOTTIME rather than the
	 * reading that would make a writer drop them again. */
	n = 0;
	d.has_timestamp = 0;
	d.has_sequence_flags = 1;
	td.uuid = 10;
	n += pack_packet(b + n, &d);
	add_snapshot(b, &n, 1, 6, wrap - 10591000, 0, 1, 1661203462574176000ull, 1);
	add_instant(b, &n, 1, 0, 0, wrap - 10591000, 3); /* relative 0 */
	add_instant(b, &n, 1, 0, 0, wrap - 1, 3);        /* relative 10590999 */
	add_instant(b, &n, 1, 0, 0, 0, 3);               /* relative 10591000: the first kept */
	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(b, n, &r.base, &ck), 0);
	CHECK_EQ_INT(ck.negative_timestamps, 2);
	CHECK_EQ_INT(ck.before_snapshot, 0);
	CHECK_EQ_INT(r.nev, 1);
	CHECK_EQ_INT(r.nev ? r.ev[0].ts : -1, 10591000);
	CHECK_EQ_INT(r.info.start_boottime_ns, 0);
	rec_free(&r);
	free(b);
}

/* The writer, given a BOOTTIME reading below 0 (event.h promises none; a reader of a damaged
 * file or a merge of old gave one): every event must still be at a time Perfetto keeps. */
static void test_negative_boottime_written(void)
{
	char path[512];
	struct cuptrace_pf_check ck;
	struct rec r;

	snprintf(path, sizeof(path), "%s/test_perfetto_negboot_%d.pftrace", tmpdir(),
	         (int)getpid());
	struct cuptrace_sink *s =
	    cuptrace_perfetto_sink_new(cuptrace_output_open(path, CUPTRACE_COMPRESS_NONE, NULL));
	CHECK(s != NULL);
	if (!s)
		return;
	struct cuptrace_trace_info info = {
	    .pid = 1, .start_boottime_ns = -10591000, .start_realtime_ns = 1661203462574176000ll};
	struct cuptrace_track t = {
	    .uuid = 5, .kind = CUPTRACE_TRACK_THREAD, .pid = 1, .tid = 1, .name = "t"};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	CHECK_EQ_INT(s->ops->track(s, &t), 0);
	for (int i = 0; i < 4; i++) {
		/* 0 and 10590999 were below BOOTTIME 0; the last two write the same track back
		 * in time, on BOOTTIME itself rather than the sequence's clock. */
		static const int64_t at[] = {0, 10590999, 20000000, 5};
		struct cuptrace_slice e = {.track_uuid = 5, .ts = at[i], .dur = 1, .name = "s"};
		CHECK_EQ_INT(s->ops->slice(s, &e), 0);
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read(path, &r.base, &ck), 0);
	check_clean(&ck);
	CHECK_EQ_INT(r.slices, 4);
	CHECK_EQ_INT(r.info.start_boottime_ns, 0);
	CHECK_EQ_INT(r.info.start_realtime_ns, 1661203462574176000ll); /* still at relative 0 */
	rec_free(&r);
	unlink(path);
}

/* More distinct strings than one interning generation holds: the writer clears the sequence's
 * incremental state and starts over, and every value must still resolve. */
static void test_generation_rollover(void)
{
	enum { N = 70000 };
	char path[512], val[32];
	struct cuptrace_pf_check ck;
	struct rec r;

	snprintf(path, sizeof(path), "%s/test_perfetto_gen_%d.pftrace", tmpdir(), (int)getpid());
	struct cuptrace_sink *s =
	    cuptrace_perfetto_sink_new(cuptrace_output_open(path, CUPTRACE_COMPRESS_CHUNKS, NULL));
	CHECK(s != NULL);
	if (!s)
		return;
	struct cuptrace_trace_info info = {.pid = 1, .start_boottime_ns = 1000};
	struct cuptrace_track t = {
	    .uuid = 5, .kind = CUPTRACE_TRACK_THREAD, .pid = 1, .tid = 1, .name = "t"};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	CHECK_EQ_INT(s->ops->track(s, &t), 0);
	for (int i = 0; i < N; i++) {
		snprintf(val, sizeof(val), "value %d", i);
		struct cuptrace_arg a = {.key = "v", .type = CUPTRACE_ARG_STRING, .v.s = val};
		struct cuptrace_slice e = {.track_uuid = 5,
		                           .ts = 100 * (int64_t)i,
		                           .dur = 50,
		                           .name = "s",
		                           .args = &a,
		                           .nargs = 1};
		CHECK_EQ_INT(s->ops->slice(s, &e), 0);
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read(path, &r.base, &ck), 0);
	check_clean(&ck);
	CHECK_EQ_INT(r.slices, N);
	int bad = 0;
	for (size_t i = 0; i < r.nev; i++) {
		snprintf(val, sizeof(val), "value %zu", i);
		bad += r.ev[i].ts != 100 * (int64_t)i || r.ev[i].dur != 50 || r.ev[i].nargs != 1 ||
		       strcmp(r.ev[i].args[0].s, val) || strcmp(r.ev[i].name, "s");
	}
	CHECK_EQ_INT(bad, 0);
	rec_free(&r);
	unlink(path);
}

/* ---- size: a launch-bound loop ---- */

static void test_bytes_per_kernel(void)
{
	enum { NT = 4, N = 20000 };
	char path[512];
	snprintf(path, sizeof(path), "%s/test_perfetto_loop_%d.pftrace", tmpdir(), (int)getpid());
	struct cuptrace_output *o = cuptrace_output_open(path, CUPTRACE_COMPRESS_CHUNKS, NULL);
	struct cuptrace_sink *s = cuptrace_perfetto_sink_new(o);
	CHECK(s != NULL);
	if (!s)
		return;
	struct cuptrace_trace_info info = {.pid = PID,
	                                   .process_name = "loop",
	                                   .start_boottime_ns = 5000000000ll,
	                                   .start_realtime_ns = 1767225600000000000ll,
	                                   .trace_uuid_hi = 7,
	                                   .trace_uuid_lo = 9,
	                                   .meta = begin_meta,
	                                   .nmeta = 4};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	struct cuptrace_track p = {
	    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = PID, .name = "loop"};
	struct cuptrace_track g = {.uuid = 2,
	                           .kind = CUPTRACE_TRACK_GROUP,
	                           .parent_uuid = 1,
	                           .pid = PID,
	                           .name = "GPU 0: NVIDIA H200"};
	s->ops->track(s, &p);
	s->ops->track(s, &g);
	int64_t t[NT], kend[NT];
	char names[2 * NT][32];
	for (int i = 0; i < NT; i++) {
		snprintf(names[i], 32, "worker %d", i);
		snprintf(names[NT + i], 32, "Stream %d", 13 + i);
		struct cuptrace_track th = {.uuid = 100 + i,
		                            .kind = CUPTRACE_TRACK_THREAD,
		                            .parent_uuid = 1,
		                            .pid = PID,
		                            .tid = PID + 1 + i,
		                            .name = names[i]};
		struct cuptrace_track st = {.uuid = 200 + i,
		                            .kind = CUPTRACE_TRACK_SLICES,
		                            .parent_uuid = 2,
		                            .pid = PID,
		                            .name = names[NT + i],
		                            .sort_rank = 13 + i};
		s->ops->track(s, &th);
		s->ops->track(s, &st);
		t[i] = 1000000 + (int64_t)(rnd() % 1000);
		kend[i] = 0;
	}
	/* Per iteration and thread: cudaLaunchKernel ~2 us, ~0.4 us to the next call; the kernel
	 * ~1.5 us on the thread's stream, starting ~3 us after its launch or after the previous
	 * kernel. Jitter: a few hundred ns on the host, less on the GPU, at 1 ns resolution. */
	uint64_t corr = 100000;
	for (int it = 0; it < N / NT; it++) {
		for (int i = 0; i < NT; i++) {
			uint64_t flow = (uint64_t)PID << 32 | ++corr;
			int64_t ab = t[i], ad = 1900 + (int64_t)(rnd() % 300);
			int64_t kb = ab + 2900 + (int64_t)(rnd() % 200);
			if (kb < kend[i] + 150)
				kb = kend[i] + 150 + (int64_t)(rnd() % 50);
			int64_t kd = 1450 + (int64_t)(rnd() % 100);
			kend[i] = kb + kd;
			const struct cuptrace_arg args[] = {
			    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(256,1,1)"},
			    {.key = "block", .type = CUPTRACE_ARG_STRING, .v.s = "(128,1,1)"},
			    {.key = "registers", .type = CUPTRACE_ARG_UINT, .v.u = 16},
			    {.key = "shared_memory", .type = CUPTRACE_ARG_UINT, .v.u = 0},
			};
			struct cuptrace_slice api = {.track_uuid = 100 + i,
			                             .ts = ab,
			                             .dur = ad,
			                             .name = "cudaLaunchKernel",
			                             .category = "cuda_runtime",
			                             .correlation_id = corr,
			                             .flows_out = &flow,
			                             .nflows_out = 1};
			struct cuptrace_slice k = {.track_uuid = 200 + i,
			                           .ts = kb,
			                           .dur = kd,
			                           .name =
			                               "void add<float>(float*, float const*, int)",
			                           .category = "kernel",
			                           .correlation_id = corr,
			                           .args = args,
			                           .nargs = 4,
			                           .flows_in = &flow,
			                           .nflows_in = 1};
			CHECK_EQ_INT(s->ops->slice(s, &api), 0);
			CHECK_EQ_INT(s->ops->slice(s, &k), 0);
			t[i] = ab + ad + 300 + (int64_t)(rnd() % 200);
		}
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	struct stat st;
	CHECK_EQ_INT(stat(path, &st), 0);
	printf("launch loop: %d kernels on %d threads, %lld bytes, %.2f bytes per kernel "
	       "(chunks)\n",
	       N, NT, (long long)st.st_size, (double)st.st_size / N);

	struct cuptrace_pf_check ck;
	struct rec r;
	rec_init(&r);
	CHECK_EQ_INT(cuptrace_perfetto_read(path, &r.base, &ck), 0);
	check_clean(&ck);
	CHECK_EQ_INT(r.slices, 2 * N);
	size_t with_in = 0;
	for (size_t i = 0; i < r.nev; i++)
		with_in += r.ev[i].nin == 1 && r.ev[i].track >= 200;
	CHECK_EQ_INT(with_in, N);
	rec_free(&r);
	unlink(path);
}

/* ---- the hand-encoded hot packets ---- */

/* Own generator, so that the tests above keep their random sequences. */
static uint64_t enc_rng = 0xD1B54A32D192ED03ull;

static uint64_t enc_rnd(void)
{
	enc_rng ^= enc_rng << 13;
	enc_rng ^= enc_rng >> 7;
	enc_rng ^= enc_rng << 17;
	return enc_rng;
}

/* Random bits, cut to a random width: small and large varints alike. */
static uint64_t enc_bits(void)
{
	uint64_t r = enc_rnd();
	return r >> (enc_rnd() % 64);
}

static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	*len = 0;
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*len = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc(*len + 1);
	if (b && fread(b, 1, *len, f) != *len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

struct raw_field {
	uint64_t num;
	size_t pos; /* order in the packet, so that the sort is stable */
	const uint8_t *p;
	size_t n;
};

static int raw_field_cmp(const void *pa, const void *pb)
{
	const struct raw_field *a = pa, *b = pb;
	if (a->num != b->num)
		return a->num < b->num ? -1 : 1;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

struct canon_stats {
	size_t packets, bad, long_packets, long_events, long3_packets, long3_events;
};

/* A packet is canonical if protobuf-c packs what it decodes from it to the same bytes, once its
 * top-level fields are in field-number order (the writer puts them in another order on purpose,
 * for zlib, which protobuf allows). That pins everything below the top level: field order inside
 * each message, minimal varints, lengths, unpacked fixed64 flow ids. */
static void check_canonical(const uint8_t *body, size_t n, struct canon_stats *st)
{
	struct raw_field f[64];
	size_t nf = 0, rl = 0;
	const uint8_t *p = body, *end = body + n, *te;
	int ok = 1;

	st->packets++;
	st->long_packets += n >= 128;
	st->long3_packets += n >= 16384;
	if ((te = raw_event(body, n, &rl))) {
		st->long_events += rl >= 128;
		st->long3_events += rl >= 16384;
	}
	while (p < end && ok) {
		uint64_t tag, v;
		size_t k = varint(p, end, &tag), m = 0;
		if (!k || nf == 64) {
			ok = 0;
			break;
		}
		switch (tag & 7) {
		case 0:
			m = varint(p + k, end, &v);
			ok = m > 0;
			break;
		case 1:
			m = 8;
			break;
		case 5:
			m = 4;
			break;
		case 2:
			m = varint(p + k, end, &v);
			ok = m > 0 && v <= (uint64_t)(end - p - k - m);
			m += (size_t)v;
			break;
		default:
			ok = 0;
		}
		if (!ok || m > (size_t)(end - p - k)) {
			ok = 0;
		} else {
			f[nf] = (struct raw_field){tag >> 3, nf, p, k + m};
			nf++;
		}
		p += k + m;
	}
	Cuptrace__Pb__TracePacket *pk =
	    ok ? cuptrace__pb__trace_packet__unpack(NULL, n, body) : NULL;
	/* protobuf-c unpacks empty bytes as (NULL, 0), then packs them with memcpy from NULL. */
	static uint8_t empty[1];
	Cuptrace__Pb__InternedData *id = pk ? pk->interned_data : NULL;
	for (size_t i = 0; id && i < id->n_debug_annotation_string_values; i++)
		if (!id->debug_annotation_string_values[i]->str.data)
			id->debug_annotation_string_values[i]->str.data = empty;
	if (pk && cuptrace__pb__trace_packet__get_packed_size(pk) == n) {
		uint8_t *want = malloc(n + 1), *got = malloc(n + 1);
		size_t g = 0;
		qsort(f, nf, sizeof(f[0]), raw_field_cmp);
		for (size_t i = 0; i < nf; i++) {
			memcpy(got + g, f[i].p, f[i].n);
			g += f[i].n;
		}
		ok = g == n && cuptrace__pb__trace_packet__pack(pk, want) == n &&
		     !memcmp(want, got, n);
		free(want);
		free(got);
	} else {
		ok = 0;
	}
	for (size_t i = 0; id && i < id->n_debug_annotation_string_values; i++)
		if (id->debug_annotation_string_values[i]->str.data == empty)
			id->debug_annotation_string_values[i]->str.data = NULL;
	if (pk)
		cuptrace__pb__trace_packet__free_unpacked(pk, NULL);
	st->bad += !ok;
}

static void check_canonical_file(const char *path, struct canon_stats *st)
{
	size_t len = 0;
	uint8_t *buf = read_all(path, &len);
	CHECK(buf != NULL);
	for (const uint8_t *p = buf, *end = buf + len; buf && p < end;) {
		uint64_t plen;
		size_t k = p[0] == 0x0A ? varint(p + 1, end, &plen) : 0;
		CHECK(k > 0 && plen <= (uint64_t)(end - p - 1 - k));
		if (!k || plen > (uint64_t)(end - p - 1 - k))
			break;
		check_canonical(p + 1 + k, (size_t)plen, st);
		p += 1 + k + plen;
	}
	free(buf);
}

static const char *enc_pool[] = {
    "cudaLaunchKernel",
    "kernel",
    "",
    "x",
    nasty,
    "cuda_runtime",
    "a name longer than one hundred and twenty-seven bytes, so that its interned entry needs a "
    "two-byte length and the InternedData around it too, and then some more",
};
#define ENC_POOL_N (sizeof(enc_pool) / sizeof(enc_pool[0]))

/* A string for the next call: from the pool, or one of two buffers refilled with other text on
 * every use (the writer must not trust a pointer it has seen before), or NULL. */
static const char *enc_str(char **bufs, size_t cap, int allow_null, size_t id)
{
	uint64_t r = enc_rnd() % 16;
	if (allow_null && r == 0)
		return NULL;
	if (r < 9)
		return enc_pool[r % ENC_POOL_N];
	char *b = bufs[r & 1];
	if (r < 13)
		snprintf(b, cap, "buffered %zu", id % 5);
	else
		snprintf(b, cap, "%s", enc_pool[enc_rnd() % ENC_POOL_N]);
	return b;
}

enum { ENC_NT = 3 };

static struct cuptrace_sink *enc_open(const char *path, struct cuptrace_sink *also)
{
	struct cuptrace_sink *s =
	    cuptrace_perfetto_sink_new(cuptrace_output_open(path, CUPTRACE_COMPRESS_NONE, NULL));
	struct cuptrace_trace_info info = {.pid = PID,
	                                   .process_name = "enc",
	                                   .hostname = "enc-host",
	                                   .start_boottime_ns = 5000000000ll,
	                                   .start_realtime_ns = 1767225600000000000ll,
	                                   .trace_uuid_hi = 3,
	                                   .trace_uuid_lo = 4};
	struct cuptrace_sink *sinks[2] = {s, also};
	char names[3][32];
	CHECK(s != NULL);
	if (!s)
		return NULL;
	for (int k = 0; k < 2 && sinks[k]; k++) {
		struct cuptrace_sink *x = sinks[k];
		struct cuptrace_track p = {
		    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = PID, .name = "enc"};
		struct cuptrace_track g = {.uuid = 2,
		                           .kind = CUPTRACE_TRACK_GROUP,
		                           .parent_uuid = 1,
		                           .pid = PID,
		                           .name = "GPU 0"};
		CHECK_EQ_INT(x->ops->begin(x, &info), 0);
		CHECK_EQ_INT(x->ops->track(x, &p), 0);
		CHECK_EQ_INT(x->ops->track(x, &g), 0);
		for (int i = 0; i < ENC_NT; i++) {
			snprintf(names[0], 32, "thread %d", i);
			snprintf(names[1], 32, "Stream %d", i);
			snprintf(names[2], 32, "counter %d", i);
			struct cuptrace_track t[] = {
			    {.uuid = 100 + (uint64_t)i,
			     .kind = CUPTRACE_TRACK_THREAD,
			     .parent_uuid = 1,
			     .pid = PID,
			     .tid = PID + 1 + i,
			     .name = names[0]},
			    {.uuid = 200 + (uint64_t)i,
			     .kind = CUPTRACE_TRACK_SLICES,
			     .parent_uuid = 2,
			     .pid = PID,
			     .name = names[1],
			     .sort_rank = i},
			    {.uuid = 300 + (uint64_t)i,
			     .kind = CUPTRACE_TRACK_COUNTER,
			     .parent_uuid = 2,
			     .pid = PID,
			     .name = names[2],
			     .unit = CUPTRACE_UNIT_BYTES},
			};
			for (int j = 0; j < 3; j++)
				CHECK_EQ_INT(x->ops->track(x, &t[j]), 0);
		}
	}
	return s;
}

/* Random args of every kind; wild ones also get NULL keys and values, unknown types, and keys
 * or values from refilled buffers. */
static size_t enc_args(struct cuptrace_arg *a, size_t max, char **bufs, char *big, int wild,
                       size_t id)
{
	size_t n = enc_rnd() % 4 == 0 ? enc_rnd() % (max + 1) : enc_rnd() % 3;
	for (size_t i = 0; i < n; i++) {
		const char *key = enc_str(bufs, 300, wild, id + i);
		a[i].key = key ? key : (wild ? NULL : "k");
		a[i].type = (enum cuptrace_arg_type)(1 + enc_rnd() % (wild ? 7 : 6));
		uint64_t r = enc_rnd();
		switch ((int)a[i].type) {
		case CUPTRACE_ARG_INT:
			a[i].v.i = (int64_t)r >> (r % 64); /* negative ones take 10 bytes */
			break;
		case CUPTRACE_ARG_DOUBLE:
			a[i].v.d = (double)(int64_t)r / 1024.0;
			break;
		case CUPTRACE_ARG_BOOL:
			a[i].v.b = (int)(r % 3) * (wild ? 7 : 1);
			break;
		case CUPTRACE_ARG_STRING: {
			const char *v = enc_rnd() % 50 ? enc_str(bufs + 2, 300, wild, id + i) : big;
			a[i].v.s = v ? v : (wild ? NULL : "v");
			break;
		}
		case 7: /* not a type: written as an empty string */
			a[i].v.s = "ignored";
			break;
		default: /* UINT, POINTER */
			a[i].v.u = r >> (r % 64);
			break;
		}
		if (!wild && a[i].type == CUPTRACE_ARG_BOOL)
			a[i].v.b = !!a[i].v.b;
	}
	return n;
}

/* Random events, fed to the writer (and to want, if given) in a shuffled order so that many go
 * back in time. Wild: also overlapping slices, flows that make no sense, huge and negative
 * durations, thousands of flows on one slice; the writer must still encode them canonically.
 * Otherwise: disjoint slices, one flow per launch, so that the reader gives back exactly what
 * went in. */
static void enc_feed(struct cuptrace_sink *s, struct rec *want, size_t n, int wild)
{
	enum { MAXARGS = 12, MAXFLOWS = 2500 };
	struct cuptrace_arg args[MAXARGS];
	static uint64_t out[MAXFLOWS], in[MAXFLOWS];
	static char b0[300], b1[300], b2[300], b3[300];
	char *bufs[4] = {b0, b1, b2, b3};
	size_t *order = malloc(n * sizeof(*order));
	char *big = malloc(20001);

	memset(big, 'z', 20000); /* an interned value with a three-byte length */
	big[20000] = 0;
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	for (size_t i = 0; i + 1 < n; i++) {
		size_t j = i + (size_t)(enc_rnd() % (n - i < 40 ? n - i : 40));
		size_t t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (size_t x = 0; x < n; x++) {
		size_t i = order[x], slot = i / (3 * ENC_NT), kind = i % 3;
		int tr = (int)(i / 3 % ENC_NT);
		int64_t t0 = 1000 + (int64_t)slot * 4000;
		size_t nargs = kind == 2 ? 0 : enc_args(args, MAXARGS, bufs, big, wild, i);
		uint64_t flow = (uint64_t)slot << 8 | ((uint64_t)tr + 1);
		int err = 0;

		/* One call per statement: the order of calls within an initializer is unspecified,
		 * and the events must not depend on the compiler. */
		const char *name = enc_str(bufs, 300, 1, i);
		const char *cat = enc_str(bufs, 300, 1, i + 1);
		uint64_t corr = enc_rnd() % 4 ? enc_bits() : 0;
		int64_t dur = (int64_t)(enc_rnd() % 1000);

		if (kind == 0) {
			/* a launch on a thread, its kernel on a stream (maybe another's) */
			struct cuptrace_slice api = {.track_uuid = 100 + (uint64_t)tr,
			                             .ts = t0 + tr,
			                             .dur = dur,
			                             .name = name,
			                             .category = cat,
			                             .correlation_id = corr,
			                             .args = args,
			                             .nargs = nargs,
			                             .flows_out = &flow,
			                             .nflows_out = 1};
			struct cuptrace_slice k = api;
			k.track_uuid = 200 + (slot + (uint64_t)tr) % ENC_NT;
			k.ts = t0 + 1500 + tr;
			k.dur = (int64_t)(enc_rnd() % 1000);
			k.name = enc_str(bufs, 300, 1, i + 2);
			k.flows_out = NULL;
			k.nflows_out = 0;
			k.flows_in = &flow;
			k.nflows_in = 1;
			if (wild) {
				size_t no = enc_rnd() % 4 ? enc_rnd() % 4 : enc_rnd() % MAXFLOWS;
				size_t ni = enc_rnd() % 4 ? enc_rnd() % 4 : enc_rnd() % MAXFLOWS;
				for (size_t f = 0; f < no; f++)
					out[f] = enc_rnd() % 8 ? enc_rnd() % 6 : enc_rnd();
				for (size_t f = 0; f < ni; f++)
					in[f] = enc_rnd() % 8 ? enc_rnd() % 6 : enc_rnd();
				api.flows_out = out;
				api.nflows_out = no;
				api.flows_in = in;
				api.nflows_in = ni;
				api.ts = (int64_t)(enc_rnd() % 3 ? (uint64_t)t0 : enc_rnd() >> 1);
				if (enc_rnd() % 8)
					api.dur = (int64_t)(enc_rnd() % 5000);
				else
					api.dur = enc_rnd() % 2 ? INT64_MAX : -7;
			}
			if (want) {
				CHECK_EQ_INT(want->base.ops->slice(&want->base, &api), 0);
				CHECK_EQ_INT(want->base.ops->slice(&want->base, &k), 0);
			}
			err |= s->ops->slice(s, &api);
			err |= s->ops->slice(s, &k);
		} else if (kind == 1) {
			struct cuptrace_instant e = {.track_uuid = 100 + (uint64_t)tr,
			                             .ts = t0 + 3000 + tr,
			                             .name = name,
			                             .category = cat,
			                             .correlation_id = corr,
			                             .args = args,
			                             .nargs = nargs};
			if (want)
				CHECK_EQ_INT(want->base.ops->instant(&want->base, &e), 0);
			err |= s->ops->instant(s, &e);
		} else {
			struct cuptrace_counter e = {.track_uuid = 300 + (uint64_t)tr,
			                             .ts = t0 + 3500 + tr,
			                             .is_double = (int)(corr % 2),
			                             .i = (int64_t)enc_bits(),
			                             .d = (double)(int64_t)corr / 3.0};
			if (want)
				CHECK_EQ_INT(want->base.ops->counter(&want->base, &e), 0);
			err |= s->ops->counter(s, &e);
		}
		CHECK_EQ_INT(err, 0);
	}
	free(order);
	free(big);
}

/* The hot packets (BEGIN, END, instant, counter) are written by hand, not by protobuf-c: every
 * one must be exactly what protobuf-c makes of the same message, for random events including
 * ones no converter produces, and what is valid must read back unchanged. */
static void test_canonical_encoding(void)
{
	char path[512];
	struct canon_stats st;
	struct cuptrace_pf_check ck;
	struct rec want, got;

	snprintf(path, sizeof(path), "%s/test_perfetto_enc_%d.pftrace", tmpdir(), (int)getpid());
	for (int wild = 0; wild < 2; wild++) {
		rec_init(&want);
		struct cuptrace_sink *s = enc_open(path, wild ? NULL : &want.base);
		if (!s) {
			rec_free(&want);
			return;
		}
		enc_feed(s, wild ? NULL : &want, wild ? 6000 : 15000, wild);
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);

		memset(&st, 0, sizeof(st));
		check_canonical_file(path, &st);
		printf(
		    "canonical encoding (%s): %zu packets, %zu not canonical; %zu packets and %zu "
		    "events >= 128 bytes, %zu and %zu >= 16 KiB\n",
		    wild ? "wild" : "valid", st.packets, st.bad, st.long_packets, st.long_events,
		    st.long3_packets, st.long3_events);
		CHECK_EQ_INT(st.bad, 0);
		CHECK(st.packets > 10000);
		CHECK(st.long_packets > 0);
		CHECK(st.long_events > 0);
		CHECK(st.long3_packets > 0);
		if (wild)
			CHECK(st.long3_events > 0);

		rec_init(&got);
		if (!wild) {
			CHECK_EQ_INT(cuptrace_perfetto_read(path, &got.base, &ck), 0);
			check_clean(&ck);
			compare(&want, &got);
		} else {
			cuptrace_log_fn old = cuptrace_log_set(quiet);
			int rc = cuptrace_perfetto_read(path, &got.base, &ck);
			cuptrace_log_set(old);
			CHECK(rc == 0 || rc == -EINVAL);
		}
		rec_free(&got);
		rec_free(&want);
	}
	unlink(path);
}

/* The H200 captures in tests/data: what the converter produces goes through the writer and the
 * reader unchanged, and obeys every import rule. */
static void test_real_captures(void)
{
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	char path[1024], out[512];
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;
	int n = 0;

	if (!d) {
		printf("real captures: skipped (no CUPTRACE_TEST_DATA)\n");
		return;
	}
	snprintf(out, sizeof(out), "%s/test_perfetto_real_%d.pftrace", tmpdir(), (int)getpid());
	while ((de = readdir(d))) {
		if (!cuptrace_ends_with(de->d_name, ".cupti"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		struct rec want, got;
		struct cuptrace_pf_check ck;
		rec_init(&want);
		rec_init(&got);
		CHECK_EQ_INT(cuptrace_read_trace(path, &want.base, 0), 0);
		struct cuptrace_sink *w = cuptrace_perfetto_sink_new(
		    cuptrace_output_open(out, CUPTRACE_COMPRESS_CHUNKS, NULL));
		CHECK(w != NULL);
		if (w) {
			CHECK_EQ_INT(cuptrace_read_trace(path, w, 0), 0);
			CHECK_EQ_INT(w->ops->finish(w), 0);
			cuptrace_sink_destroy(w);
		}
		CHECK_EQ_INT(cuptrace_perfetto_read(out, &got.base, &ck), 0);
		check_clean(&ck);
		compare(&want, &got);
		struct stat st;
		size_t kernels = 0;
		for (size_t i = 0; i < got.nev; i++)
			kernels += got.ev[i].cat && !strcmp(got.ev[i].cat, "kernel");
		if (!stat(out, &st) && kernels >= 1000)
			printf("%s: %zu kernels, %lld bytes, %.2f bytes per kernel (whole file)\n",
			       de->d_name, kernels, (long long)st.st_size,
			       (double)st.st_size / (double)kernels);
		rec_free(&want);
		rec_free(&got);
		n++;
	}
	closedir(d);
	unlink(out);
	CHECK(n > 0);
}

/* Writes a trace whose traced host has this machine's host name and the given "os", and
 * returns the release, machine and version of its SystemInfo (empty where unset). */
static void system_info_of(const char *os, char rel[65], char mach[65], char ver[65])
{
	char host[256] = "", path[512];
	gethostname(host, sizeof(host) - 1);
	struct cuptrace_meta m = {.key = "os", .s = os};
	struct cuptrace_trace_info info = {
	    .pid = PID, .process_name = "si", .hostname = host, .meta = &m, .nmeta = 1};
	rel[0] = mach[0] = ver[0] = 0;
	snprintf(path, sizeof(path), "%s/test_perfetto_si_%d.pftrace", tmpdir(), (int)getpid());
	struct cuptrace_sink *s =
	    cuptrace_perfetto_sink_new(cuptrace_output_open(path, CUPTRACE_COMPRESS_NONE, NULL));
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	FILE *f = fopen(path, "rb");
	uint8_t *buf = malloc(4096);
	size_t len = f && buf ? fread(buf, 1, 4096, f) : 0;
	if (f)
		fclose(f);
	unlink(path);
	CHECK(len > 0 && len < 4096);
	for (const uint8_t *p = buf, *end = buf + len; buf && p < end;) {
		uint64_t plen;
		size_t k = varint(p + 1, end, &plen);
		if (!k || plen > (size_t)(end - p - 1 - k))
			break;
		Cuptrace__Pb__TracePacket *pk =
		    cuptrace__pb__trace_packet__unpack(NULL, (size_t)plen, p + 1 + k);
		p += 1 + k + plen;
		Cuptrace__Pb__Utsname *u = pk && pk->system_info ? pk->system_info->utsname : NULL;
		if (u) {
			snprintf(rel, 65, "%s", u->release ? u->release : "");
			snprintf(mach, 65, "%s", u->machine ? u->machine : "");
			snprintf(ver, 65, "%s", u->version ? u->version : "");
		}
		cuptrace__pb__trace_packet__free_unpacked(pk, NULL);
	}
	free(buf);
}

/* trace_processor shows the traced host's system (the collector's "os"), not the converting
 * machine's, even where both have the same host name, as VMs often do. Regression: a capture
 * from a GPU VM named "vm", converted on another "vm", got the converter's kernel release. */
static void test_system_info(void)
{
	struct utsname u;
	char rel[65], mach[65], ver[65], mine[3 * sizeof(u.release) + 3];
	system_info_of("Linux 1.2.3-elsewhere aarch64", rel, mach, ver);
	CHECK_EQ_STR(rel, "1.2.3-elsewhere");
	CHECK_EQ_STR(mach, "aarch64");
	CHECK_EQ_STR(ver, "");
	CHECK_EQ_INT(uname(&u), 0);
	snprintf(mine, sizeof(mine), "%s %s %s", u.sysname, u.release, u.machine);
	system_info_of(mine, rel, mach, ver); /* recorded here: uname(), with its version */
	CHECK_EQ_STR(rel, u.release);
	CHECK_EQ_STR(ver, u.version);
}

/* The field numbers the hand encoder and the reader use (format/perfetto_fields.h) are those of
 * proto/perfetto_trace.proto, as protobuf-c compiled it; the ones our proto leaves out are at
 * least not numbers of other fields there. Keys against the reference's pre-computed tags. */
static void test_field_names(void)
{
/* An entry's fields, less its braces: the message's descriptor and name, the field's name and
 * number, and whether our proto has it. */
#define FIELD(msg, name, num)  &cuptrace__pb__##msg##__descriptor, #msg, name, num, 1
#define NOT_IN(msg, name, num) &cuptrace__pb__##msg##__descriptor, #msg, name, num, 0
	static const struct {
		const ProtobufCMessageDescriptor *d;
		const char *msg, *name;
		unsigned num;
		int in_proto;
	} f[] = {
	    {FIELD(trace, "packet", PF_TRACE_PACKET)},
	    {FIELD(trace_packet, "timestamp", PF_PACKET_TIMESTAMP)},
	    {FIELD(trace_packet, "timestamp_clock_id", PF_PACKET_TIMESTAMP_CLOCK_ID)},
	    {FIELD(trace_packet, "trusted_packet_sequence_id", PF_PACKET_SEQUENCE_ID)},
	    {FIELD(trace_packet, "interned_data", PF_PACKET_INTERNED_DATA)},
	    {FIELD(trace_packet, "sequence_flags", PF_PACKET_SEQUENCE_FLAGS)},
	    {FIELD(trace_packet, "trace_packet_defaults", PF_PACKET_DEFAULTS)},
	    {NOT_IN(trace_packet, "incremental_state_cleared",
	            PF_PACKET_INCREMENTAL_STATE_CLEARED)},
	    {NOT_IN(trace_packet, "previous_packet_dropped", PF_PACKET_PREVIOUS_PACKET_DROPPED)},
	    {FIELD(trace_packet, "clock_snapshot", PF_PACKET_CLOCK_SNAPSHOT)},
	    {FIELD(trace_packet, "track_event", PF_PACKET_TRACK_EVENT)},
	    {FIELD(trace_packet, "system_info", PF_PACKET_SYSTEM_INFO)},
	    {FIELD(trace_packet, "compressed_packets", PF_PACKET_COMPRESSED_PACKETS)},
	    {FIELD(trace_packet, "track_descriptor", PF_PACKET_TRACK_DESCRIPTOR)},
	    {FIELD(trace_packet, "trace_uuid", PF_PACKET_TRACE_UUID)},
	    {FIELD(trace_packet, "trace_attributes", PF_PACKET_TRACE_ATTRIBUTES)},
	    {FIELD(trace_packet_defaults, "timestamp_clock_id", PF_DEFAULTS_TIMESTAMP_CLOCK_ID)},
	    {FIELD(trace_packet_defaults, "track_event_defaults",
	           PF_DEFAULTS_TRACK_EVENT_DEFAULTS)},
	    {FIELD(track_event_defaults, "track_uuid", PF_EVENT_DEFAULTS_TRACK_UUID)},
	    {FIELD(clock_snapshot, "clocks", PF_SNAPSHOT_CLOCKS)},
	    {FIELD(clock_snapshot, "primary_trace_clock", PF_SNAPSHOT_PRIMARY_TRACE_CLOCK)},
	    {FIELD(clock_snapshot__clock, "clock_id", PF_CLOCK_CLOCK_ID)},
	    {FIELD(clock_snapshot__clock, "timestamp", PF_CLOCK_TIMESTAMP)},
	    {FIELD(clock_snapshot__clock, "is_incremental", PF_CLOCK_IS_INCREMENTAL)},
	    {FIELD(clock_snapshot__clock, "unit_multiplier_ns", PF_CLOCK_UNIT_MULTIPLIER_NS)},
	    {FIELD(system_info, "machine_name", PF_SYSINFO_MACHINE_NAME)},
	    {FIELD(trace_uuid, "msb", PF_UUID_MSB)},
	    {FIELD(trace_uuid, "lsb", PF_UUID_LSB)},
	    {FIELD(trace_attributes, "attribute", PF_ATTRIBUTES_ATTRIBUTE)},
	    {FIELD(trace_attributes__attribute, "key", PF_ATTRIBUTE_KEY)},
	    {FIELD(trace_attributes__attribute, "long_value", PF_ATTRIBUTE_LONG_VALUE)},
	    {FIELD(trace_attributes__attribute, "string_value", PF_ATTRIBUTE_STRING_VALUE)},
	    {FIELD(track_descriptor, "uuid", PF_TRACK_UUID)},
	    {FIELD(track_descriptor, "name", PF_TRACK_NAME)},
	    {FIELD(track_descriptor, "process", PF_TRACK_PROCESS)},
	    {FIELD(track_descriptor, "thread", PF_TRACK_THREAD)},
	    {FIELD(track_descriptor, "parent_uuid", PF_TRACK_PARENT_UUID)},
	    {FIELD(track_descriptor, "counter", PF_TRACK_COUNTER)},
	    {NOT_IN(track_descriptor, "static_name", PF_TRACK_STATIC_NAME)},
	    {FIELD(track_descriptor, "child_ordering", PF_TRACK_CHILD_ORDERING)},
	    {FIELD(track_descriptor, "sibling_order_rank", PF_TRACK_SIBLING_ORDER_RANK)},
	    {NOT_IN(track_descriptor, "atrace_name", PF_TRACK_ATRACE_NAME)},
	    {FIELD(track_descriptor, "description", PF_TRACK_DESCRIPTION)},
	    {FIELD(process_descriptor, "pid", PF_PROCESS_PID)},
	    {FIELD(process_descriptor, "cmdline", PF_PROCESS_CMDLINE)},
	    {FIELD(process_descriptor, "process_name", PF_PROCESS_PROCESS_NAME)},
	    {FIELD(thread_descriptor, "pid", PF_THREAD_PID)},
	    {FIELD(thread_descriptor, "tid", PF_THREAD_TID)},
	    {FIELD(thread_descriptor, "thread_name", PF_THREAD_THREAD_NAME)},
	    {FIELD(counter_descriptor, "unit", PF_COUNTER_UNIT)},
	    {FIELD(track_event, "category_iids", PF_EVENT_CATEGORY_IIDS)},
	    {FIELD(track_event, "debug_annotations", PF_EVENT_DEBUG_ANNOTATIONS)},
	    {FIELD(track_event, "type", PF_EVENT_TYPE)},
	    {FIELD(track_event, "name_iid", PF_EVENT_NAME_IID)},
	    {FIELD(track_event, "track_uuid", PF_EVENT_TRACK_UUID)},
	    {FIELD(track_event, "categories", PF_EVENT_CATEGORIES)},
	    {FIELD(track_event, "name", PF_EVENT_NAME)},
	    {FIELD(track_event, "counter_value", PF_EVENT_COUNTER_VALUE)},
	    {NOT_IN(track_event, "flow_ids_old", PF_EVENT_FLOW_IDS_OLD)},
	    {NOT_IN(track_event, "terminating_flow_ids_old", PF_EVENT_TERMINATING_FLOW_IDS_OLD)},
	    {FIELD(track_event, "double_counter_value", PF_EVENT_DOUBLE_COUNTER_VALUE)},
	    {FIELD(track_event, "flow_ids", PF_EVENT_FLOW_IDS)},
	    {FIELD(track_event, "terminating_flow_ids", PF_EVENT_TERMINATING_FLOW_IDS)},
	    {FIELD(track_event, "correlation_id", PF_EVENT_CORRELATION_ID)},
	    {FIELD(debug_annotation, "name_iid", PF_ANNOTATION_NAME_IID)},
	    {FIELD(debug_annotation, "bool_value", PF_ANNOTATION_BOOL_VALUE)},
	    {FIELD(debug_annotation, "uint_value", PF_ANNOTATION_UINT_VALUE)},
	    {FIELD(debug_annotation, "int_value", PF_ANNOTATION_INT_VALUE)},
	    {FIELD(debug_annotation, "double_value", PF_ANNOTATION_DOUBLE_VALUE)},
	    {FIELD(debug_annotation, "string_value", PF_ANNOTATION_STRING_VALUE)},
	    {FIELD(debug_annotation, "pointer_value", PF_ANNOTATION_POINTER_VALUE)},
	    {FIELD(debug_annotation, "legacy_json_value", PF_ANNOTATION_LEGACY_JSON_VALUE)},
	    {FIELD(debug_annotation, "name", PF_ANNOTATION_NAME)},
	    {FIELD(debug_annotation, "dict_entries", PF_ANNOTATION_DICT_ENTRIES)},
	    {FIELD(debug_annotation, "array_values", PF_ANNOTATION_ARRAY_VALUES)},
	    {FIELD(debug_annotation, "string_value_iid", PF_ANNOTATION_STRING_VALUE_IID)},
	    {FIELD(interned_data, "event_categories", PF_INTERNED_EVENT_CATEGORIES)},
	    {FIELD(interned_data, "event_names", PF_INTERNED_EVENT_NAMES)},
	    {FIELD(interned_data, "debug_annotation_names", PF_INTERNED_DEBUG_ANNOTATION_NAMES)},
	    {FIELD(interned_data, "debug_annotation_string_values",
	           PF_INTERNED_DEBUG_ANNOTATION_STRING_VALUES)},
	    {FIELD(event_category, "iid", PF_ENTRY_IID)},
	    {FIELD(event_category, "name", PF_ENTRY_NAME)},
	    {FIELD(event_name, "iid", PF_ENTRY_IID)},
	    {FIELD(event_name, "name", PF_ENTRY_NAME)},
	    {FIELD(debug_annotation_name, "iid", PF_ENTRY_IID)},
	    {FIELD(debug_annotation_name, "name", PF_ENTRY_NAME)},
	    {FIELD(interned_string, "iid", PF_ENTRY_IID)},
	    {FIELD(interned_string, "str", PF_ENTRY_NAME)},
	};
#undef FIELD
#undef NOT_IN
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		const ProtobufCFieldDescriptor *byname =
		    protobuf_c_message_descriptor_get_field_by_name(f[i].d, f[i].name);
		const ProtobufCFieldDescriptor *bynum =
		    protobuf_c_message_descriptor_get_field(f[i].d, f[i].num);
		int ok = f[i].in_proto ? byname && byname->id == f[i].num : !byname && !bynum;
		if (!ok)
			fprintf(stderr, "%s.%s: %u; in the proto: %d by name, %s by number\n",
			        f[i].msg, f[i].name, f[i].num, byname ? (int)byname->id : -1,
			        bynum ? bynum->name : "none");
		CHECK(ok);
	}
	/* Keys as varint bytes, against the reference's table of tags. */
	static const struct {
		unsigned num, wt, b0, b1;
	} k[] = {
	    {PF_TRACE_PACKET, PF_WT_LEN, 0x0A, 0},
	    {PF_PACKET_TIMESTAMP, PF_WT_VARINT, 0x40, 0},
	    {PF_PACKET_CLOCK_SNAPSHOT, PF_WT_LEN, 0x32, 0},
	    {PF_PACKET_COMPRESSED_PACKETS, PF_WT_LEN, 0x92, 0x03},
	    {PF_PACKET_TIMESTAMP_CLOCK_ID, PF_WT_VARINT, 0xD0, 0x03},
	    {PF_PACKET_DEFAULTS, PF_WT_LEN, 0xDA, 0x03},
	    {PF_PACKET_TRACK_DESCRIPTOR, PF_WT_LEN, 0xE2, 0x03},
	    {PF_EVENT_TRACK_UUID, PF_WT_VARINT, 0x58, 0},
	    {PF_EVENT_NAME, PF_WT_LEN, 0xBA, 0x01},
	    {PF_EVENT_COUNTER_VALUE, PF_WT_VARINT, 0xF0, 0x01},
	    {PF_EVENT_DOUBLE_COUNTER_VALUE, PF_WT_FIXED64, 0xE1, 0x02},
	    {PF_EVENT_FLOW_IDS, PF_WT_FIXED64, 0xF9, 0x02},
	    {PF_EVENT_TERMINATING_FLOW_IDS, PF_WT_FIXED64, 0x81, 0x03},
	    {PF_EVENT_FLOW_IDS_OLD, PF_WT_VARINT, 0xA0, 0x02},
	};
	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		CHECK_EQ_INT(PF_KEY0(k[i].num, k[i].wt), k[i].b0);
		CHECK_EQ_INT(PF_KEY1(k[i].num, k[i].wt), k[i].b1);
	}
}

TEST_MAIN(T(test_round_trip_none), T(test_round_trip_gzip), T(test_round_trip_chunks),
          T(test_gzip_members), T(test_wire_rules), T(test_truncation), T(test_truncated_gzip),
          T(test_foreign_and_random), T(test_bit_flips), T(test_bad_packets), T(test_trace_time),
          T(test_negative_boottime_written), T(test_generation_rollover), T(test_real_captures),
          T(test_bytes_per_kernel), T(test_canonical_encoding), T(test_system_info),
          T(test_field_names))
