/* Call stacks, the reading side (issue 27): the Perfetto reader's interned and inline
 * callstacks (a trace encoded by hand here, field by field), the JSON reader's "stack" arg, and
 * the libdw symbolizer on programs this test compiles, checked against binutils (nm, addr2line,
 * readelf). */
#include "check.h"

#include "symbolize/symbolize.h"
#include "format/formats.h"
#include "read/json_reader.h"
#include "read/perfetto_reader.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a sink that keeps stacks and the slices' stack ids ---- */

struct kframe {
	int kind;
	char fn[64], file[64], module[64], build[64];
	unsigned line;
	uint64_t pc;
};
struct kstack {
	uint64_t id;
	struct kframe f[8];
	size_t n;
};
struct keep {
	struct cuptrace_sink base;
	struct kstack st[16];
	size_t nst;
	uint64_t slice_stack[16];
	char slice_args[16][128];
	size_t nsl;
	int order_ok; /* every slice's stack was sent before it */
};

static void cp(char *d, const char *s)
{
	snprintf(d, 64, "%s", s ? s : "(null)");
}

static int k_begin(struct cuptrace_sink *s, const struct cuptrace_trace_info *i)
{
	return 0;
}
static int k_track(struct cuptrace_sink *s, const struct cuptrace_track *t)
{
	return 0;
}
static int k_instant(struct cuptrace_sink *s, const struct cuptrace_instant *e)
{
	return 0;
}
static int k_counter(struct cuptrace_sink *s, const struct cuptrace_counter *e)
{
	return 0;
}
static int k_meta(struct cuptrace_sink *s, const struct cuptrace_meta *m, size_t n)
{
	return 0;
}
static int k_finish(struct cuptrace_sink *s)
{
	return 0;
}
static void k_destroy(struct cuptrace_sink *s)
{
}

static int k_stack(struct cuptrace_sink *s, const struct cuptrace_stack *st)
{
	struct keep *k = (struct keep *)s;
	for (size_t i = 0; i < k->nst; i++)
		CHECK(k->st[i].id != st->id); /* once per id */
	if (k->nst == 16)
		return 0;
	struct kstack *d = &k->st[k->nst++];
	d->id = st->id;
	d->n = st->nframes < 8 ? st->nframes : 8;
	for (size_t i = 0; i < d->n; i++) {
		const struct cuptrace_frame *f = &st->frames[i];
		d->f[i].kind = f->kind;
		cp(d->f[i].fn, f->function);
		cp(d->f[i].file, f->file);
		cp(d->f[i].module, f->module);
		cp(d->f[i].build, f->build_id);
		d->f[i].line = f->line;
		d->f[i].pc = f->rel_pc;
	}
	return 0;
}

static const struct kstack *find(const struct keep *k, uint64_t id)
{
	for (size_t i = 0; i < k->nst; i++)
		if (k->st[i].id == id)
			return &k->st[i];
	return NULL;
}

static int k_slice(struct cuptrace_sink *s, const struct cuptrace_slice *e)
{
	struct keep *k = (struct keep *)s;
	if (e->stack_id && !find(k, e->stack_id))
		k->order_ok = 0;
	if (k->nsl < 16) {
		char *a = k->slice_args[k->nsl];
		a[0] = 0;
		for (size_t i = 0; i < e->nargs; i++)
			snprintf(a + strlen(a), 128 - strlen(a), "%s;", e->args[i].key);
		k->slice_stack[k->nsl++] = e->stack_id;
	}
	return 0;
}

static const struct cuptrace_sink_ops keep_ops = {
    .name = "keep",
    .begin = k_begin,
    .track = k_track,
    .slice = k_slice,
    .instant = k_instant,
    .counter = k_counter,
    .stack = k_stack,
    .meta = k_meta,
    .finish = k_finish,
    .destroy = k_destroy,
};

static void keep_init(struct keep *k)
{
	memset(k, 0, sizeof(*k));
	k->base.ops = &keep_ops;
	k->order_ok = 1;
}

/* ---- a protobuf encoder, just enough for the trace below ---- */

struct buf {
	uint8_t b[4096];
	size_t n;
};

static void varint(struct buf *b, uint64_t v)
{
	do {
		b->b[b->n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
		v >>= 7;
	} while (v);
}
static void fv(struct buf *b, unsigned field, uint64_t v)
{
	varint(b, (uint64_t)field << 3);
	varint(b, v);
}
static void fbytes(struct buf *b, unsigned field, const void *p, size_t n)
{
	varint(b, (uint64_t)field << 3 | 2);
	varint(b, n);
	memcpy(b->b + b->n, p, n);
	b->n += n;
}
static void fs(struct buf *b, unsigned field, const char *s)
{
	fbytes(b, field, s, strlen(s));
}
static void fm(struct buf *b, unsigned field, const struct buf *m)
{
	fbytes(b, field, m->b, m->n);
}
/* InternedString / EventName {iid, str}. */
static void istr(struct buf *b, unsigned field, uint64_t iid, const char *s)
{
	struct buf e = {0};
	fv(&e, 1, iid);
	fs(&e, 2, s);
	fm(b, field, &e);
}
static void packet(struct buf *trace, const struct buf *p)
{
	fm(trace, 1, p);
}

/* A slice begin/end pair on track 10 at ts, on sequence seq, with the given extra TrackEvent
 * fields (ev) and InternedData (in, may be NULL), flags as sequence_flags. */
static void slice(struct buf *t, uint32_t seq, uint64_t ts, uint32_t flags, const struct buf *in,
                  const struct buf *ev)
{
	struct buf p = {0}, e = {0};
	fv(&p, 8, ts);
	fv(&p, 10, seq);
	fv(&p, 13, flags);
	if (in)
		fm(&p, 12, in);
	fv(&e, 9, 1); /* TYPE_SLICE_BEGIN */
	fv(&e, 11, 10);
	fs(&e, 23, "cudaLaunchKernel");
	memcpy(e.b + e.n, ev->b, ev->n);
	e.n += ev->n;
	fm(&p, 11, &e);
	packet(t, &p);
	struct buf q = {0}, end = {0};
	fv(&q, 8, ts + 100);
	fv(&q, 10, seq);
	fv(&q, 13, 2);
	fv(&end, 9, 2);
	fv(&end, 11, 10);
	fm(&q, 11, &end);
	packet(t, &q);
}

/* The interned tables of one stack: main (app.c:10) -> an unsymbolized frame, under iid 7. The
 * callstack comes before its frames in the message: the reader must not depend on the order. */
static void interned(struct buf *in, const char *fn0)
{
	struct buf m = {0}, f1 = {0}, f2 = {0}, cs = {0};
	fv(&cs, 1, 7);
	fv(&cs, 2, 1); /* outermost first */
	fv(&cs, 2, 2);
	fm(in, 7, &cs);
	fv(&f1, 1, 1);
	fv(&f1, 2, 1);
	fv(&f1, 3, 1);
	fv(&f1, 4, 0x1000);
	fv(&f1, 5, 1);
	fv(&f1, 6, 10);
	fm(in, 6, &f1);
	fv(&f2, 1, 2);
	fv(&f2, 3, 1);
	fv(&f2, 4, 0x2000);
	fm(in, 6, &f2);
	istr(in, 5, 1, fn0);
	istr(in, 18, 1, "/src/app.c");
	istr(in, 16, 1, "ABCDEF01"); /* hex in upper case: read as lower */
	istr(in, 17, 1, "/opt/app/bin/app");
	fv(&m, 1, 1);
	fv(&m, 2, 1);
	fv(&m, 7, 1);
	fm(in, 19, &m);
}

static void test_perfetto_callstacks(void)
{
	static struct buf t;
	struct buf p = {0}, c = {0}, clk = {0}, td = {0}, th = {0};
	memset(&t, 0, sizeof(t));
	/* clock snapshot: boottime at 0, the trace clock */
	fv(&clk, 1, 6);
	fv(&clk, 2, 0);
	fm(&c, 1, &clk);
	fv(&c, 2, 6);
	fm(&p, 6, &c);
	packet(&t, &p);
	/* a thread track, uuid 10 */
	memset(&p, 0, sizeof(p));
	fv(&th, 1, 5);
	fv(&th, 2, 6);
	fv(&td, 1, 10);
	fs(&td, 2, "main");
	fm(&td, 4, &th);
	fm(&p, 60, &td);
	packet(&t, &p);

	struct buf in = {0}, ev = {0};
	interned(&in, "main");
	fv(&ev, 56, 7);
	slice(&t, 1, 1000, 1, &in, &ev); /* the state cleared, then interned */

	struct buf inl = {0}, fr = {0}, ev2 = {0};
	fs(&fr, 1, "train");
	fs(&fr, 2, "/w/train.py");
	fv(&fr, 3, 3);
	fm(&inl, 1, &fr);
	memset(&fr, 0, sizeof(fr));
	fs(&fr, 1, "step");
	fs(&fr, 2, "/w/model.py");
	fv(&fr, 3, 42);
	fm(&inl, 1, &fr);
	fm(&ev2, 55, &inl);
	slice(&t, 1, 2000, 2, NULL, &ev2);

	/* The state cleared: iid 7 now names another stack. */
	struct buf in3 = {0};
	interned(&in3, "other");
	slice(&t, 1, 3000, 1, &in3, &ev);
	/* Another sequence: its iid 7 is its own, the same content as the first: the same id. */
	slice(&t, 2, 4000, 1, &in, &ev);
	/* An unknown iid: no stack. */
	struct buf ev5 = {0};
	fv(&ev5, 56, 99);
	slice(&t, 1, 5000, 2, NULL, &ev5);

	struct keep k;
	keep_init(&k);
	struct cuptrace_pf_check ck;
	CHECK_EQ_INT(cuptrace_perfetto_read_mem(t.b, t.n, &k.base, &ck), 0);
	CHECK_EQ_INT(k.nsl, 5);
	CHECK_EQ_INT(k.nst, 3);
	CHECK(k.order_ok);
	const struct kstack *s1 = find(&k, k.slice_stack[0]);
	const struct kstack *s2 = find(&k, k.slice_stack[1]);
	const struct kstack *s3 = find(&k, k.slice_stack[2]);
	CHECK(s1 && s2 && s3);
	CHECK_EQ_INT(k.slice_stack[3], k.slice_stack[0]);
	CHECK_EQ_INT(k.slice_stack[4], 0);
	CHECK(k.slice_stack[2] != k.slice_stack[0]);
	if (!s1 || !s2 || !s3)
		return;
	CHECK_EQ_INT(s1->n, 2);
	CHECK_EQ_INT(s1->f[0].kind, CUPTRACE_FRAME_NATIVE);
	CHECK_EQ_STR(s1->f[0].fn, "main");
	CHECK_EQ_STR(s1->f[0].file, "/src/app.c");
	CHECK_EQ_INT(s1->f[0].line, 10);
	CHECK_EQ_STR(s1->f[0].module, "/opt/app/bin/app");
	CHECK_EQ_STR(s1->f[0].build, "abcdef01");
	CHECK_EQ_INT(s1->f[0].pc, 0x1000);
	CHECK_EQ_STR(s1->f[1].fn, "(null)");
	CHECK_EQ_STR(s1->f[1].file, "(null)");
	CHECK_EQ_INT(s1->f[1].pc, 0x2000);
	CHECK_EQ_STR(s1->f[1].module, "/opt/app/bin/app");
	CHECK_EQ_INT(s2->n, 2);
	CHECK_EQ_INT(s2->f[0].kind, CUPTRACE_FRAME_PYTHON);
	CHECK_EQ_STR(s2->f[0].fn, "train");
	CHECK_EQ_STR(s2->f[1].file, "/w/model.py");
	CHECK_EQ_INT(s2->f[1].line, 42);
	CHECK_EQ_STR(s2->f[1].module, "(null)");
	CHECK_EQ_STR(s3->f[0].fn, "other");
	CHECK(ck.unknown_iid >= 1);
}

/* ---- JSON: the "stack" arg ---- */

static void check_json_stack(const struct keep *k)
{
	CHECK_EQ_INT(k->nsl, 1);
	CHECK_EQ_INT(k->nst, 1);
	CHECK(k->order_ok);
	CHECK(!strstr(k->slice_args[0], "stack;"));
	CHECK(strstr(k->slice_args[0], "grid;") != NULL);
	const struct kstack *s = find(k, k->slice_stack[0]);
	CHECK(s != NULL);
	if (!s)
		return;
	CHECK_EQ_INT(s->n, 3); /* outermost first: the text is innermost first */
	CHECK_EQ_INT(s->f[0].kind, CUPTRACE_FRAME_NATIVE);
	CHECK_EQ_STR(s->f[0].module, "/lib/libfoo.so");
	CHECK_EQ_INT(s->f[0].pc, 0x1a2b);
	CHECK_EQ_STR(s->f[0].fn, "(null)");
	CHECK_EQ_STR(s->f[1].fn, "main");
	CHECK_EQ_STR(s->f[1].file, "/a/c.py");
	CHECK_EQ_INT(s->f[1].line, 3);
	CHECK_EQ_INT(s->f[1].kind, CUPTRACE_FRAME_PYTHON);
	CHECK_EQ_STR(s->f[2].fn, "launch (x)");
	CHECK_EQ_STR(s->f[2].file, "/a/b.py");
	CHECK_EQ_INT(s->f[2].line, 7);
}

static const char stack_text[] =
    "launch (x) (/a/b.py:7)\nmain (/a/c.py:3)\n?? (/lib/libfoo.so+0x1a2b)";

static void test_json_stack_arg(void)
{
	char json[1024];
	snprintf(json, sizeof(json),
	         "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"k\",\"cat\":\"kernel\",\"pid\":1,"
	         "\"tid\":1,\"ts\":1,\"dur\":2,\"args\":{\"grid\":\"1\",\"stack\":\"%s\"}}]}",
	         "launch (x) (/a/b.py:7)\\nmain (/a/c.py:3)\\n?? (/lib/libfoo.so+0x1a2b)");
	struct keep k;
	keep_init(&k);
	CHECK_EQ_INT(cuptrace_json_read_mem(json, strlen(json), "t.json", &k.base, NULL), 0);
	check_json_stack(&k);
}

/* Through cuptrace's own Chrome writer: a slice whose arg "stack" holds the text comes back as
 * a stack, and the arg is gone. */
static void test_json_round_trip(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/stacks_rt.json",
	         getenv("CUPTRACE_TMP") ? getenv("CUPTRACE_TMP") : "/tmp");
	struct cuptrace_sink *w = cuptrace_sink_open(path, NULL, NULL);
	CHECK(w != NULL);
	if (!w)
		return;
	struct cuptrace_trace_info info = {.pid = 1, .process_name = "p"};
	struct cuptrace_track pt = {
	    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 1, .name = "p"};
	struct cuptrace_track tt = {.uuid = 2,
	                            .kind = CUPTRACE_TRACK_THREAD,
	                            .parent_uuid = 1,
	                            .pid = 1,
	                            .tid = 1,
	                            .name = "t"};
	struct cuptrace_arg args[] = {
	    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "1"},
	    {.key = "stack", .type = CUPTRACE_ARG_STRING, .v.s = stack_text},
	};
	struct cuptrace_slice sl = {.track_uuid = 2,
	                            .ts = 1000,
	                            .dur = 500,
	                            .name = "cudaLaunchKernel",
	                            .category = "cuda_runtime",
	                            .args = args,
	                            .nargs = 2};
	CHECK_EQ_INT(w->ops->begin(w, &info), 0);
	CHECK_EQ_INT(w->ops->track(w, &pt), 0);
	CHECK_EQ_INT(w->ops->track(w, &tt), 0);
	CHECK_EQ_INT(w->ops->slice(w, &sl), 0);
	CHECK_EQ_INT(w->ops->finish(w), 0);
	cuptrace_sink_destroy(w);
	FILE *f = fopen(path, "rb");
	static char data[1 << 16];
	size_t n = f ? fread(data, 1, sizeof(data), f) : 0;
	if (f)
		fclose(f);
	struct keep k;
	keep_init(&k);
	CHECK_EQ_INT(cuptrace_json_read_mem(data, n, path, &k.base, NULL), 0);
	check_json_stack(&k);
	unlink(path);
}

TEST_MAIN({"perfetto_callstacks", test_perfetto_callstacks},
          {"json_stack_arg", test_json_stack_arg}, {"json_round_trip", test_json_round_trip})
