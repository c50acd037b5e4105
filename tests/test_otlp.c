/* Unit tests of the OTLP sink (format/otlp.h) and sender (output/otlp_http.h) without a
 * collector: bodies go to a callback that unpacks them with the protobuf-c code generated from
 * our proto subset. Checks parents (nesting on a track, GPU work under its launch in either
 * arrival order), trace ids per run and per range, timestamps, attributes and their types,
 * resources, batching, the pending bound, the tee, option parsing, and the sender's bounded
 * failure against a closed port. tests/otlp_test.sh checks the same against OpenTelemetry's own
 * decoder. */
#include "check.h"
#include "common/util.h"
#include "format/formats.h"
#include "common/options.h"
#include "format/otlp.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "output/otlp_http.h"
#include "read/read.h"
#include "steps.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest Request;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;

#define MAXREQ   256
#define MAXSPANS 4096

/* Every request the sink emitted, unpacked, and every span with its resource. */
struct got {
	Request *req[MAXREQ];
	size_t nreq, max_per_req, emits_before_finish;
	const Span *span[MAXSPANS];
	const Opentelemetry__Proto__Resource__V1__Resource *res[MAXSPANS];
	size_t nspans;
	int finishing;
};

static int on_emit(void *ctx, uint8_t *body, size_t len, size_t nspans)
{
	struct got *g = ctx;
	Request *r =
	    opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
	        NULL, len, body);
	free(body);
	CHECK(r != NULL);
	if (!r || g->nreq == MAXREQ)
		return -EIO;
	g->req[g->nreq++] = r;
	size_t n = 0;
	for (size_t i = 0; i < r->n_resource_spans; i++)
		for (size_t j = 0; j < r->resource_spans[i]->n_scope_spans; j++) {
			const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss =
			    r->resource_spans[i]->scope_spans[j];
			CHECK_EQ_STR(ss->scope->name, "cuptrace");
			for (size_t k = 0; k < ss->n_spans && g->nspans < MAXSPANS; k++) {
				g->res[g->nspans] = r->resource_spans[i]->resource;
				g->span[g->nspans++] = ss->spans[k];
				n++;
			}
		}
	CHECK_EQ_INT(n, nspans);
	if (n > g->max_per_req)
		g->max_per_req = n;
	if (!g->finishing)
		g->emits_before_finish++;
	return 0;
}

static void got_free(struct got *g)
{
	for (size_t i = 0; i < g->nreq; i++)
		opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
		    g->req[i], NULL);
	free(g);
}

static uint64_t be64(const ProtobufCBinaryData *b)
{
	uint64_t v = 0;
	for (size_t i = 0; i < b->len && i < 8; i++)
		v = v << 8 | b->data[i];
	return b->len == 8 ? v : 0;
}

/* The n-th span (0-based, emission order) called name. */
static const Span *find(const struct got *g, const char *name, int nth)
{
	for (size_t i = 0; i < g->nspans; i++)
		if (!strcmp(g->span[i]->name, name) && nth-- == 0)
			return g->span[i];
	return NULL;
}

static const Span *by_id(const struct got *g, uint64_t id)
{
	for (size_t i = 0; i < g->nspans; i++)
		if (be64(&g->span[i]->span_id) == id)
			return g->span[i];
	return NULL;
}

static const char *parent_name(const struct got *g, const Span *s)
{
	if (!s || !s->parent_span_id.len)
		return "-";
	const Span *p = by_id(g, be64(&s->parent_span_id));
	return p ? p->name : "(missing)";
}

static const Opentelemetry__Proto__Common__V1__AnyValue *attr(const Span *s, const char *key)
{
	for (size_t i = 0; s && i < s->n_attributes; i++)
		if (!strcmp(s->attributes[i]->key, key))
			return s->attributes[i]->value;
	return NULL;
}

static const Opentelemetry__Proto__Common__V1__AnyValue *
res_attr(const Opentelemetry__Proto__Resource__V1__Resource *r, const char *key)
{
	for (size_t i = 0; r && i < r->n_attributes; i++)
		if (!strcmp(r->attributes[i]->key, key))
			return r->attributes[i]->value;
	return NULL;
}

static int same_trace(const Span *a, const Span *b)
{
	return a && b && a->trace_id.len == 16 && b->trace_id.len == 16 &&
	       !memcmp(a->trace_id.data, b->trace_id.data, 16);
}

/* ---- a synthetic trace ---- */

enum { PROC = 1, THREAD = 2, GPU = 3, STREAM = 4, MEM = 5, COUNTER = 6 };
#define PID 4242
#define T0  1700000000000000000LL /* start_realtime_ns */
#define US  1000

static void feed_begin(struct cuptrace_sink *s, const char *gpu)
{
	struct cuptrace_meta m[] = {{.key = "cmdline", .s = "./train --steps 2"},
	                            {.key = "rank", .s = "3"},
	                            {.key = "world_size", .s = "8"},
	                            {.key = "gpu0", .s = gpu},
	                            {.key = "gpu0_uuid", .s = "GPU-1234"}};
	struct cuptrace_trace_info info = {.pid = PID,
	                                   .process_name = "train",
	                                   .hostname = "node7",
	                                   .start_realtime_ns = T0,
	                                   .start_boottime_ns = 5000000000LL,
	                                   .trace_uuid_hi = 0x0102030405060708ull,
	                                   .trace_uuid_lo = 0x1112131415161718ull,
	                                   .meta = m,
	                                   .nmeta = 5};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	struct cuptrace_track t[] = {
	    {.uuid = PROC, .kind = CUPTRACE_TRACK_PROCESS, .pid = PID, .name = "train"},
	    {.uuid = THREAD,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = PROC,
	     .pid = PID,
	     .tid = 77,
	     .name = "main"},
	    {.uuid = GPU,
	     .kind = CUPTRACE_TRACK_GROUP,
	     .parent_uuid = PROC,
	     .pid = PID,
	     .name = "GPU 1: NVIDIA H200"},
	    {.uuid = STREAM,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = GPU,
	     .name = "compute (stream 13)"},
	    {.uuid = MEM,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = GPU,
	     .name = "Memory allocations"},
	    {.uuid = COUNTER,
	     .kind = CUPTRACE_TRACK_COUNTER,
	     .parent_uuid = GPU,
	     .name = "Device memory in use",
	     .unit = CUPTRACE_UNIT_BYTES},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		CHECK_EQ_INT(s->ops->track(s, &t[i]), 0);
}

/* One slice with at most one flow each way and a correlation id (which steps.h's helper has
 * not: the GPU work below must find its launch by it). */
static void slice(struct cuptrace_sink *s, uint64_t track, int64_t ts, int64_t dur,
                  const char *name, const char *cat, uint64_t corr, uint64_t flow_out,
                  uint64_t flow_in)
{
	struct cuptrace_slice e = {.track_uuid = track,
	                           .ts = ts,
	                           .dur = dur,
	                           .name = name,
	                           .category = cat,
	                           .correlation_id = corr,
	                           .flows_out = flow_out ? &flow_out : NULL,
	                           .nflows_out = flow_out != 0,
	                           .flows_in = flow_in ? &flow_in : NULL,
	                           .nflows_in = flow_in != 0};
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
}

/* Two "step" ranges inside an "epoch" range on the main thread, each around a launch (and its
 * driver call) and a sync; the kernels come first (as CUPTI often delivers them), the ranges
 * last. */
static void feed_steps(struct cuptrace_sink *s)
{
	for (int k = 0; k < 2; k++) {
		int64_t b = 1000 * US + k * 500 * US;
		struct cuptrace_arg ka[] = {
		    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(4096, 1, 1)"},
		    {.key = "registers", .type = CUPTRACE_ARG_INT, .v.i = 16},
		};
		struct cuptrace_slice kern = {.track_uuid = STREAM,
		                              .ts = b + 100 * US,
		                              .dur = 50 * US,
		                              .name = "busy(float*, int)",
		                              .category = "kernel",
		                              .correlation_id = 10 + (uint64_t)k,
		                              .args = ka,
		                              .nargs = 2,
		                              .flows_in = (uint64_t[]){900 + (uint64_t)k},
		                              .nflows_in = 1};
		if (k == 0)
			CHECK_EQ_INT(s->ops->slice(s, &kern), 0); /* before its launch */
		slice(s, THREAD, b + 20 * US, 30 * US, "cudaLaunchKernel", "cuda_runtime",
		      10 + (uint64_t)k, 900 + (uint64_t)k, 0);
		slice(s, THREAD, b + 25 * US, 10 * US, "cuLaunchKernel", "cuda_driver",
		      20 + (uint64_t)k, 0, 0);
		if (k == 1)
			CHECK_EQ_INT(s->ops->slice(s, &kern), 0); /* after it */
		slice(s, THREAD, b + 60 * US, 200 * US, "cudaStreamSynchronize", "cuda_runtime",
		      30 + (uint64_t)k, 0, 0);
		slice(s, THREAD, b, 300 * US, "step", "nvtx", 0, 0, 0);
	}
	struct cuptrace_instant mark = {
	    .track_uuid = THREAD, .ts = 1010 * US, .name = "checkpoint", .category = "nvtx"};
	CHECK_EQ_INT(s->ops->instant(s, &mark), 0);
	struct cuptrace_instant meta = {.track_uuid = THREAD,
	                                .ts = 0,
	                                .name = CUPTRACE_META_INFO,
	                                .category = CUPTRACE_META_CATEGORY};
	CHECK_EQ_INT(s->ops->instant(s, &meta), 0);
	struct cuptrace_counter c = {.track_uuid = COUNTER, .ts = 5, .i = 3};
	CHECK_EQ_INT(s->ops->counter(s, &c), 0);
	slice(s, THREAD, 900 * US, 1200 * US, "epoch", "nvtx", 0, 0, 0);
}

static struct cuptrace_sink *sink_to(struct got *g, const char *trace_per, size_t batch)
{
	struct cuptrace_otlp_opts o = {.sz = sizeof(o),
	                               .trace_per = trace_per,
	                               .batch_spans = batch,
	                               .emit = on_emit,
	                               .emit_ctx = g};
	struct cuptrace_sink *s = cuptrace_otlp_sink_new(&o);
	CHECK(s != NULL);
	return s;
}

static void test_span_model(void)
{
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_sink *s = sink_to(g, NULL, 0);
	if (!s)
		return;
	feed_begin(s, "NVIDIA H200, compute capability 9.0");
	feed_steps(s);
	g->finishing = 1;
	CHECK_EQ_INT(s->ops->finish(s), 0);
	/* 2 x (kernel, launch, driver, sync, step) + the mark + epoch; no meta instant, no
	 * counter. */
	CHECK_EQ_INT(g->nspans, 12);
	struct cuptrace_otlp_stats st;
	cuptrace_otlp_sink_stats(s, &st);
	CHECK_EQ_INT(st.spans, 12);
	CHECK_EQ_INT(st.spans_dropped, 0);
	for (int k = 0; k < 2; k++) {
		const Span *kern = find(g, "busy(float*, int)", k);
		const Span *launch = find(g, "cudaLaunchKernel", k);
		CHECK_EQ_STR(parent_name(g, kern), "cudaLaunchKernel");
		CHECK(kern && launch && be64(&kern->parent_span_id) == be64(&launch->span_id));
		CHECK_EQ_STR(parent_name(g, launch), "step");
		CHECK_EQ_STR(parent_name(g, find(g, "cuLaunchKernel", k)), "cudaLaunchKernel");
		CHECK_EQ_STR(parent_name(g, find(g, "cudaStreamSynchronize", k)), "step");
		CHECK_EQ_STR(parent_name(g, find(g, "step", k)), "epoch");
		CHECK(same_trace(kern, find(g, "epoch", 0)));
	}
	CHECK_EQ_STR(parent_name(g, find(g, "epoch", 0)), "-");
	CHECK_EQ_STR(parent_name(g, find(g, "checkpoint", 0)), "step");
	/* The run's trace id is the trace's uuid. */
	const Span *ep = find(g, "epoch", 0);
	static const uint8_t uuid[16] = {1,    2,    3,    4,    5,    6,    7,    8,
	                                 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
	CHECK(ep && ep->trace_id.len == 16 && !memcmp(ep->trace_id.data, uuid, 16));
	CHECK(ep && ep->start_time_unix_nano == (uint64_t)(T0 + 900 * US));
	CHECK(ep && ep->end_time_unix_nano == (uint64_t)(T0 + 2100 * US));
	const Span *mark = find(g, "checkpoint", 0);
	CHECK(mark && mark->start_time_unix_nano == mark->end_time_unix_nano);
	CHECK(ep &&
	      ep->kind == OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL);
	/* Attributes: args with their types, then category, correlation id, the track's. */
	const Span *kern = find(g, "busy(float*, int)", 0);
	const Opentelemetry__Proto__Common__V1__AnyValue *v;
	CHECK((v = attr(kern, "grid")) && !strcmp(v->string_value, "(4096, 1, 1)"));
	CHECK((v = attr(kern, "registers")) && v->int_value == 16);
	CHECK((v = attr(kern, "correlation_id")) && v->int_value == 10);
	CHECK((v = attr(kern, "category")) && !strcmp(v->string_value, "kernel"));
	CHECK((v = attr(kern, "device")) && v->int_value == 1);
	CHECK((v = attr(kern, "stream")) && v->int_value == 13);
	CHECK((v = attr(kern, "track")) && !strcmp(v->string_value, "compute (stream 13)"));
	const Span *launch = find(g, "cudaLaunchKernel", 0);
	CHECK((v = attr(launch, "thread.id")) && v->int_value == 77);
	CHECK((v = attr(launch, "thread.name")) && !strcmp(v->string_value, "main"));
	CHECK(attr(launch, "device") == NULL);
	/* The resource. */
	const Opentelemetry__Proto__Resource__V1__Resource *r = g->res[0];
	CHECK((v = res_attr(r, "service.name")) && !strcmp(v->string_value, "train"));
	CHECK((v = res_attr(r, "host.name")) && !strcmp(v->string_value, "node7"));
	CHECK((v = res_attr(r, "process.pid")) && v->int_value == PID);
	CHECK((v = res_attr(r, "process.command_line")) &&
	      !strcmp(v->string_value, "./train --steps 2"));
	CHECK((v = res_attr(r, "cuptrace.rank")) && v->int_value == 3);
	CHECK((v = res_attr(r, "cuptrace.world_size")) && v->int_value == 8);
	CHECK((v = res_attr(r, "cuptrace.gpu.0")) &&
	      !strcmp(v->string_value, "NVIDIA H200, compute capability 9.0"));
	CHECK(res_attr(r, "cuptrace.gpu.0_uuid") == NULL);
	/* Span ids unique and non-zero. */
	for (size_t i = 0; i < g->nspans; i++) {
		CHECK(be64(&g->span[i]->span_id) != 0);
		for (size_t j = 0; j < i; j++)
			CHECK(be64(&g->span[i]->span_id) != be64(&g->span[j]->span_id));
	}
	cuptrace_sink_destroy(s);
	got_free(g);
}

static void test_trace_per(void)
{
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_sink *s = sink_to(g, "step", 0);
	if (!s)
		return;
	feed_begin(s, "x");
	feed_steps(s);
	g->finishing = 1;
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 12);
	const Span *ep = find(g, "epoch", 0);
	for (int k = 0; k < 2; k++) {
		const Span *step = find(g, "step", k);
		CHECK(step && !step->parent_span_id.len);
		CHECK(!same_trace(step, ep));
		/* A link to the range around it, in the run's trace. */
		CHECK(step && step->n_links == 1 && ep &&
		      be64(&step->links[0]->span_id) == be64(&ep->span_id) &&
		      !memcmp(step->links[0]->trace_id.data, ep->trace_id.data, 16));
		CHECK(same_trace(find(g, "cudaLaunchKernel", k), step));
		CHECK(same_trace(find(g, "cuLaunchKernel", k), step));
		CHECK(same_trace(find(g, "busy(float*, int)", k), step));
		CHECK_EQ_STR(parent_name(g, find(g, "busy(float*, int)", k)), "cudaLaunchKernel");
	}
	CHECK(!same_trace(find(g, "step", 0), find(g, "step", 1)));
	CHECK(same_trace(find(g, "checkpoint", 0), find(g, "step", 0)));
	cuptrace_sink_destroy(s);
	got_free(g);
}

/* tests/steps.h's synthetic loop (3 steps, flows by id only, no correlation ids): one trace
 * per step holding its op, launches and kernels; the loader thread's syncs in the run's. */
static void test_steps_synthetic(void)
{
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_sink *s = sink_to(g, "step", 0);
	if (!s)
		return;
	struct steps_spec sp = STEPS_DEFAULT;
	CHECK_EQ_INT(steps_feed(s, &sp), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 3 * (9 + 1)); /* 9 slices and an instant per step */
	for (int k = 0; k < 3; k++) {
		const Span *step = find(g, "step", k);
		CHECK_EQ_STR(parent_name(g, find(g, "aten::mm", k)), "step");
		CHECK(same_trace(find(g, "aten::mm", k), step));
		CHECK_EQ_STR(parent_name(g, find(g, "relu(float*)", k)), "cudaLaunchKernel");
		CHECK(same_trace(find(g, "relu(float*)", k), step));
		CHECK_EQ_STR(parent_name(g, find(g, "Memcpy HtoD (Pageable -> Device)", k)),
		             "cudaMemcpyAsync");
		CHECK(!same_trace(find(g, "cudaStreamSynchronize", k), step));
		CHECK_EQ_STR(parent_name(g, find(g, "step done", k)), "step");
	}
	const Opentelemetry__Proto__Common__V1__AnyValue *v;
	CHECK((v = attr(find(g, "relu(float*)", 0), "stream")) && v->int_value == 7);
	cuptrace_sink_destroy(s);
	got_free(g);
}

/* Arguments of every type; strings that are not UTF-8 come out as valid UTF-8. */
static void test_arg_types(void)
{
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_sink *s = sink_to(g, NULL, 0);
	if (!s)
		return;
	feed_begin(s, "x");
	struct cuptrace_arg a[] = {
	    {.key = "i", .type = CUPTRACE_ARG_INT, .v.i = -5},
	    {.key = "u", .type = CUPTRACE_ARG_UINT, .v.u = 7},
	    {.key = "big", .type = CUPTRACE_ARG_UINT, .v.u = UINT64_MAX},
	    {.key = "d", .type = CUPTRACE_ARG_DOUBLE, .v.d = 2.5},
	    {.key = "p", .type = CUPTRACE_ARG_POINTER, .v.u = 0x7f00deadbeefull},
	    {.key = "b", .type = CUPTRACE_ARG_BOOL, .v.b = 1},
	    {.key = "s", .type = CUPTRACE_ARG_STRING, .v.s = "caf\xc3\xa9 \xff\xfe ok"},
	    {.key = "i", .type = CUPTRACE_ARG_INT, .v.i = 99}, /* a repeated key: dropped */
	};
	struct cuptrace_slice e = {.track_uuid = STREAM,
	                           .ts = 10,
	                           .dur = 5,
	                           .name = "bad \xc0\x80 name",
	                           .category = "memcpy",
	                           .args = a,
	                           .nargs = 8};
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
	/* Times from a damaged file: held at the range, no overflow (UBSan would say). */
	struct cuptrace_slice far = {
	    .track_uuid = STREAM, .ts = INT64_MAX - 5, .dur = 100, .name = "far"};
	CHECK_EQ_INT(s->ops->slice(s, &far), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 2);
	const Span *fs = find(g, "far", 0);
	CHECK(fs && fs->end_time_unix_nano == (uint64_t)INT64_MAX);
	const Span *sp = find(g, "bad ?? name", 0);
	const Opentelemetry__Proto__Common__V1__AnyValue *v;
	CHECK(sp && !strcmp(sp->name, "bad ?? name"));
	CHECK((v = attr(sp, "i")) && v->int_value == -5);
	CHECK((v = attr(sp, "u")) && v->int_value == 7);
	CHECK((v = attr(sp, "big")) && !strcmp(v->string_value, "18446744073709551615"));
	CHECK((v = attr(sp, "d")) && v->double_value == 2.5);
	CHECK((v = attr(sp, "p")) && !strcmp(v->string_value, "0x7f00deadbeef"));
	CHECK((v = attr(sp, "b")) && v->bool_value);
	CHECK((v = attr(sp, "s")) && !strcmp(v->string_value, "caf\xc3\xa9 ?? ok"));
	int is = 0;
	for (size_t i = 0; sp && i < sp->n_attributes; i++)
		is += !strcmp(sp->attributes[i]->key, "i");
	CHECK_EQ_INT(is, 1);
	cuptrace_sink_destroy(s);
	got_free(g);
}

/* Spans leave in batches while the trace goes on: when the window has passed, and when too
 * many wait. */
static void test_batches_and_bounds(void)
{
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_otlp_opts o = {
	    .sz = sizeof(o), .batch_spans = 7, .window_ms = 1, .emit = on_emit, .emit_ctx = g};
	struct cuptrace_sink *s = cuptrace_otlp_sink_new(&o);
	CHECK(s != NULL);
	if (!s)
		return;
	feed_begin(s, "x");
	for (int i = 0; i < 100; i++) /* 100 calls, 1 ms apart */
		slice(s, THREAD, (int64_t)i * 1000000, 1000, "cudaMemcpy", "cuda_runtime",
		      (uint64_t)i + 1, 0, 0);
	CHECK(g->emits_before_finish >= 10);
	g->finishing = 1;
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 100);
	CHECK_EQ_INT(g->max_per_req, 7);
	cuptrace_sink_destroy(s);
	got_free(g);

	/* max_pending: at most that many wait, whatever the window. */
	g = calloc(1, sizeof(*g));
	struct cuptrace_otlp_opts o2 = {
	    .sz = sizeof(o2), .batch_spans = 4, .max_pending = 16, .emit = on_emit, .emit_ctx = g};
	s = cuptrace_otlp_sink_new(&o2);
	if (!s)
		return;
	feed_begin(s, "x");
	for (int i = 0; i < 100; i++)
		slice(s, THREAD, (int64_t)i * 10, 5, "k", "kernel", 0, 0, 0);
	/* at most 16 pending + a batch not yet full */
	CHECK(g->nspans >= 100 - 16 - 4);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 100);
	cuptrace_sink_destroy(s);
	got_free(g);
}

/* Live (record): the clock moves time on, so a span leaves on tick once the window has passed
 * even when nothing else happens, and a partial batch goes after the interval. */
static void test_live_tick(void)
{
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_otlp_opts o = {.sz = sizeof(o),
	                               .live = 1,
	                               .interval_ms = 1,
	                               .window_ms = 10000,
	                               .emit = on_emit,
	                               .emit_ctx = g};
	struct cuptrace_sink *s = cuptrace_otlp_sink_new(&o);
	CHECK(s != NULL);
	if (!s)
		return;
	/* The trace started a minute ago. */
	struct cuptrace_trace_info info = {.pid = PID,
	                                   .process_name = "live",
	                                   .start_realtime_ns = T0,
	                                   .start_boottime_ns =
	                                       cuptrace_now_ns(CLOCK_BOOTTIME) - 60 * 1000000000LL};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	slice(s, THREAD, 1000000000, 1000, "early", "cuda_runtime", 1, 0, 0); /* 59 s ago */
	usleep(2000);
	CHECK_EQ_INT(g->nspans, 0);
	CHECK_EQ_INT(s->ops->tick(s), 0); /* nothing newer came: the clock says it may go */
	CHECK_EQ_INT(g->nspans, 1);
	slice(s, THREAD, 59 * 1000000000LL, 1000, "recent", "cuda_runtime", 2, 0, 0); /* 1 s */
	CHECK_EQ_INT(s->ops->tick(s), 0);
	CHECK_EQ_INT(g->nspans, 1); /* within the window: waits */
	g->finishing = 1;
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 2);
	cuptrace_sink_destroy(s);
	got_free(g);
}

/* A real capture: every slice and instant the stats count becomes a span; every GPU slice with
 * an incoming flow has its launch as parent; one trace. */
static void test_capture(void)
{
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	char path[512];
	snprintf(path, sizeof(path), "%s/nvtx.cupti", dir ? dir : "tests/data");
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_sink *s = sink_to(g, NULL, 0);
	if (!s)
		return;
	CHECK_EQ_INT(cuptrace_read_trace(path, s, 0), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(g->nspans, 38 + 3); /* cuptrace stats: 38 slices, 3 instants */
	int kernels = 0;
	for (size_t i = 0; i < g->nspans; i++) {
		const Span *sp = g->span[i];
		CHECK(same_trace(sp, g->span[0]));
		if (sp->parent_span_id.len)
			CHECK(by_id(g, be64(&sp->parent_span_id)) != NULL);
		const Opentelemetry__Proto__Common__V1__AnyValue *c = attr(sp, "category");
		if (c && !strcmp(c->string_value, "kernel")) {
			kernels++;
			CHECK_EQ_STR(parent_name(g, sp), "cudaLaunchKernel");
			CHECK(attr(sp, "grid") && attr(sp, "block") && attr(sp, "stream"));
		}
	}
	CHECK_EQ_INT(kernels, 4);
	CHECK_EQ_STR(parent_name(g, find(g, "inner", 0)), "outer");
	CHECK_EQ_STR(parent_name(g, find(g, "Wait: stream", 0)), "cudaStreamSynchronize");
	cuptrace_sink_destroy(s);
	got_free(g);
}

/* The tee: the file gets everything, the OTLP side too. */
static void test_tee(void)
{
	const char *tmp = getenv("CUPTRACE_TMP");
	char path[512];
	snprintf(path, sizeof(path), "%s/otlp_tee.json", tmp ? tmp : "/tmp");
	struct got *g = calloc(1, sizeof(*g));
	struct cuptrace_sink *file = cuptrace_sink_open(path, NULL, NULL);
	struct cuptrace_sink *s = cuptrace_tee_sink_new(file, sink_to(g, NULL, 0));
	CHECK(file && s);
	if (!s)
		return;
	feed_begin(s, "x");
	feed_steps(s);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	CHECK_EQ_INT(g->nspans, 12);
	FILE *f = fopen(path, "r");
	char buf[8192] = "";
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	buf[n] = 0;
	if (f)
		fclose(f);
	CHECK(strstr(buf, "\"epoch\"") && strstr(buf, "cuLaunchKernel"));
	unlink(path);
	got_free(g);
}

static void test_opts(void)
{
	/* The values through the settings table (common/options.c), as the command line and the
	 * library read them, then into the sink's options. */
	struct cuptrace_otlp_opts o = {.sz = sizeof(o)};
	struct cuptrace_setting_value v;
	char err[256];
	const struct cuptrace_setting *batch = cuptrace_setting_by_option("otlp-batch");
	CHECK(batch && batch == cuptrace_setting_by_env("CUPTRACE_OTLP_BATCH"));
	CHECK_EQ_INT(cuptrace_setting_parse(batch, "100", CUPTRACE_FROM_OPTION, &v, err, 256), 0);
	CHECK_EQ_INT(cuptrace_otlp_opts_set(&o, batch->id, &v), 0);
	CHECK_EQ_INT(o.batch_spans, 100);
	CHECK_EQ_INT(cuptrace_setting_parse(batch, "0", CUPTRACE_FROM_OPTION, &v, err, 256),
	             -EINVAL);
	CHECK_EQ_STR(err, "bad value for --otlp-batch: '0' (a span count from 1 to 65536)");
	CHECK_EQ_INT(cuptrace_setting_parse(batch, "12x", CUPTRACE_FROM_ENV, &v, err, 256),
	             -EINVAL);
	CHECK_EQ_STR(err,
	             "bad value for CUPTRACE_OTLP_BATCH: '12x' (a span count from 1 to 65536)");
	const struct cuptrace_setting *tmo = cuptrace_setting_by_env("CUPTRACE_OTLP_TIMEOUT_MS");
	CHECK(tmo && tmo == cuptrace_setting_by_option("otlp-timeout"));
	CHECK_EQ_INT(cuptrace_setting_parse(tmo, "250", CUPTRACE_FROM_OPTION, &v, err, 256), 0);
	CHECK_EQ_INT(cuptrace_otlp_opts_set(&o, tmo->id, &v), 0);
	CHECK_EQ_INT(o.http.timeout_ms, 250);
	CHECK_EQ_INT(o.batch_spans, 100); /* the others stay */
	const struct cuptrace_setting *win = cuptrace_setting_by_option("otlp-window");
	CHECK(win && cuptrace_setting_parse(win, "-1", CUPTRACE_FROM_OPTION, &v, err, 256));
	const struct cuptrace_setting *svc = cuptrace_setting_by_option("service");
	CHECK(svc && cuptrace_setting_parse(svc, "", CUPTRACE_FROM_OPTION, &v, err, 256));
	CHECK_EQ_INT(cuptrace_setting_parse(svc, "trainer", CUPTRACE_FROM_OPTION, &v, err, 256), 0);
	CHECK_EQ_INT(cuptrace_otlp_opts_set(&o, svc->id, &v), 0);
	CHECK_EQ_STR(o.service, "trainer");
	/* Not an OTLP setting: nothing set. */
	CHECK_EQ_INT(cuptrace_otlp_opts_set(&o, CUPTRACE_SET_DRIVER, &v), -ENOENT);
	char *u = cuptrace_otlp_http_full_url("http://127.0.0.1:4318");
	CHECK_EQ_STR(u, "http://127.0.0.1:4318/v1/traces");
	free(u);
	u = cuptrace_otlp_http_full_url("https://tempo.example:443/otlp/");
	CHECK_EQ_STR(u, "https://tempo.example:443/otlp/v1/traces");
	free(u);
	u = cuptrace_otlp_http_full_url("http://c:4318/v1/traces");
	CHECK_EQ_STR(u, "http://c:4318/v1/traces");
	free(u);
	CHECK(cuptrace_otlp_http_full_url("ftp://x") == NULL);
	CHECK(cuptrace_otlp_http_full_url("http://") == NULL);
	CHECK(cuptrace_otlp_http_full_url("http://a b") == NULL);
	struct cuptrace_otlp_opts bad = {.sz = sizeof(bad), .url = "localhost:4318"};
	errno = 0;
	CHECK(cuptrace_otlp_sink_new(&bad) == NULL);
	CHECK_EQ_INT(errno, EINVAL);
}

/* Nothing listens: the spans are dropped and counted within the timeout, never hanging. */
static void test_sender_refused(void)
{
	char why[256];
	if (cuptrace_otlp_http_available(why, sizeof(why))) {
		printf("skip test_sender_refused: %s\n", why);
		return;
	}
	struct cuptrace_otlp_http_opts o = {.sz = sizeof(o), .timeout_ms = 700, .backoff_ms = 50};
	struct cuptrace_otlp_http *h = cuptrace_otlp_http_open("http://127.0.0.1:1", &o);
	CHECK(h != NULL);
	if (!h)
		return;
	int64_t t0 = cuptrace_now_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < 5; i++) {
		uint8_t *body = malloc(16);
		memset(body, 0, 16);
		cuptrace_otlp_http_send(h, body, 16, 10);
	}
	struct cuptrace_otlp_stats st = {.spans = 50};
	cuptrace_otlp_http_close(h, &st);
	double s = (double)(cuptrace_now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
	CHECK(s < 2.0);
	CHECK_EQ_INT(st.spans, 50);
	CHECK_EQ_INT(st.spans_sent, 0);
	CHECK_EQ_INT(st.spans_dropped, 50);
	CHECK(st.requests_failed >= 1);
	CHECK(st.retries >= 1);
}

TEST_MAIN(T(test_span_model), T(test_trace_per), T(test_steps_synthetic), T(test_arg_types),
          T(test_batches_and_bounds), T(test_live_tick), T(test_capture), T(test_tee), T(test_opts),
          T(test_sender_refused))
