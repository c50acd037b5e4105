/* Synchronizations from cuptrace's callbacks (src/inject/sync_watch.c, issue 45) against CUPTI's
 * own SYNCHRONIZATION records: on real captures (tests/data: a DDP rank on an H200, PyTorch
 * training, examples), every synchronizing call is replayed through the callback as
 * CUPTI would call it (ENTER and EXIT, the runtime call's driver call inside), the records go
 * through the writer's hold, and the converter must draw the same synchronization slices from
 * them as from CUPTI's: one per call, same name, same call, same stream, the same events. The
 * callback's rules (failed calls, queries not ready, driver calls inside runtime calls, per-
 * thread streams) are checked on their own. No GPU: the three CUPTI functions the callback
 * calls are stand-ins here that map handles back to the ids the capture holds. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#include "common/util.h"
#include "convert/capture.h"
#include "convert/convert.h"
#include "inject/sync_watch.h"
#include "rec_sink.h"

/* ---- stand-ins for CUPTI: a stream handle is 0x10000 + CUPTI's stream id ---- */

#define STREAM_BASE 0x10000u
#define EVENT_BASE  0x900000u
static int last_per_thread = -1;
static unsigned enabled_callbacks;

CUptiResult CUPTIAPI cuptiGetStreamIdEx(CUcontext context, CUstream stream, uint8_t per_thread,
                                        uint32_t *id)
{
	(void)context;
	last_per_thread = per_thread;
	*id = (uint32_t)((uintptr_t)stream - STREAM_BASE);
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetContextId(CUcontext context, uint32_t *id)
{
	(void)context;
	*id = 1;
	return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
                                         CUpti_CallbackDomain d, CUpti_CallbackId cbid)
{
	(void)sub;
	(void)d;
	(void)cbid;
	enabled_callbacks += enable;
	return CUPTI_SUCCESS;
}

/* The clock the callback reads: ENTER then EXIT take the next two values. */
static uint64_t times[2];
static int ntimes_read;
static uint64_t test_clock(void)
{
	return times[ntimes_read++ % 2];
}

/* One call through the callback as CUPTI makes it: ENTER, EXIT, with a nested call (the
 * runtime's driver call, with its own correlation id) in between if nested_cbid. */
struct call {
	CUpti_CallbackDomain d;
	uint32_t cbid, corr;
	void *a, *b;
	uint32_t ret;
	uint32_t nested_cbid;
};
static void run_call(const struct call *c)
{
	void *params[2] = {c->a, c->b};
	uint64_t cdata = 0, ndata = 0;
	uint32_t ret = c->ret;
	CUpti_CallbackData cd;
	memset(&cd, 0, sizeof(cd));
	cd.functionParams = params;
	cd.functionReturnValue = &ret;
	cd.correlationId = c->corr;
	cd.context = (CUcontext)(uintptr_t)0x1;
	cd.correlationData = &cdata;
	cd.callbackSite = CUPTI_API_ENTER;
	CHECK_EQ_INT(cuptrace_sync_watch_callback(c->d, c->cbid, &cd), 1);
	if (c->nested_cbid) {
		CUpti_CallbackData nd = cd;
		nd.correlationId = c->corr + 5000000;
		nd.correlationData = &ndata;
		CHECK_EQ_INT(
		    cuptrace_sync_watch_callback(CUPTI_CB_DOMAIN_DRIVER_API, c->nested_cbid, &nd),
		    1);
		nd.callbackSite = CUPTI_API_EXIT;
		CHECK_EQ_INT(
		    cuptrace_sync_watch_callback(CUPTI_CB_DOMAIN_DRIVER_API, c->nested_cbid, &nd),
		    1);
	}
	cd.callbackSite = CUPTI_API_EXIT;
	CHECK_EQ_INT(cuptrace_sync_watch_callback(c->d, c->cbid, &cd), 1);
}

/* ---- the capture's API and synchronization records, buffer by buffer ---- */

union rec {
	CUpti_Activity h;
	CUpti_ActivityAPI a;
	CUpti_ActivitySynchronization2 y;
};
struct cap {
	union rec *recs;
	size_t n, cap;
	size_t *batch_end; /* records of batch i: [batch_end[i - 1], batch_end[i]) */
	size_t nbatches, capb;
};

static int on_records(void *ctx, const CUpti_Activity *const *recs, size_t n)
{
	struct cap *c = ctx;
	for (size_t i = 0; i < n; i++) {
		size_t sz = recs[i]->kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
		                ? sizeof(CUpti_ActivitySynchronization2)
		            : recs[i]->kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
		                    recs[i]->kind == CUPTI_ACTIVITY_KIND_DRIVER
		                ? sizeof(CUpti_ActivityAPI)
		                : 0;
		if (!sz)
			continue; /* GPU and other records: their string fields need the reader */
		if (CUPTRACE_GROW(c->recs, c->cap, c->n + 1))
			return -1;
		memset(&c->recs[c->n], 0, sizeof(c->recs[0]));
		memcpy(&c->recs[c->n++], recs[i], sz);
	}
	if (CUPTRACE_GROW(c->batch_end, c->capb, c->nbatches + 1))
		return -1;
	c->batch_end[c->nbatches++] = c->n;
	return 0;
}

static void load(struct cap *c, const char *name)
{
	char path[1024];
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", name);
	struct cuptrace_capture_reader *r = cuptrace_capture_reader_open(path);
	CHECK(r != NULL);
	if (!r)
		return;
	struct cuptrace_capture_ops ops = {.ctx = c, .records = on_records};
	uint64_t cut = 0;
	const char *what = NULL;
	CHECK_EQ_INT(cuptrace_capture_replay(r, &ops, &cut, &what), 0);
	cuptrace_capture_reader_close(r);
}

static struct cuptrace_converter *converter(struct rec_sink *s)
{
	struct cuptrace_trace_info info = {.pid = 42, .process_name = "p", .start_boottime_ns = 1};
	return cuptrace_converter_new(&s->base, &info, NULL);
}

static void add(struct cuptrace_converter *cv, const union rec *const *p, size_t n)
{
	if (n)
		CHECK_EQ_INT(cuptrace_converter_add(cv, (const CUpti_Activity *const *)p, n), 0);
}

static const CUpti_ActivityAPI *api_of(const struct cap *c, uint32_t corr)
{
	for (size_t i = 0; i < c->n; i++)
		if ((c->recs[i].h.kind == CUPTI_ACTIVITY_KIND_RUNTIME ||
		     c->recs[i].h.kind == CUPTI_ACTIVITY_KIND_DRIVER) &&
		    c->recs[i].a.correlationId == corr)
			return &c->recs[i].a;
	return NULL;
}

/* The synchronizing call behind CUPTI's record y, through our callback. */
static void replay_sync(const struct cap *c, const CUpti_ActivitySynchronization2 *y)
{
	const CUpti_ActivityAPI *a = api_of(c, y->correlationId);
	CHECK(a != NULL);
	if (!a)
		return;
	int runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
	CHECK(cuptrace_sync_watch_is_sync_call(a->kind, a->cbid));
	void *stream = (void *)(uintptr_t)(STREAM_BASE + y->streamId);
	void *event = (void *)(uintptr_t)(EVENT_BASE + y->cudaEventId);
	struct call call = {
	    .d = runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
	    .cbid = a->cbid,
	    .corr = y->correlationId,
	    .ret = y->returnValue,
	};
	switch (y->type) {
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
		call.a = stream;
		call.nested_cbid = CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize;
		break;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
		call.a = event;
		call.nested_cbid = CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize;
		break;
	case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
		call.a = stream;
		call.b = event;
		call.nested_cbid = CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent;
		break;
	default:
		call.nested_cbid = CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize;
		break;
	}
	if (!runtime)
		call.nested_cbid = 0;
	times[0] = a->start;
	times[1] = a->end;
	ntimes_read = 0;
	run_call(&call);
	CHECK_EQ_INT(ntimes_read, 2); /* the nested driver call read no clock */
}

/* What the writer does with our records (collect_buffers.c): taken before each buffer, the
 * buffer's API records seen, the records that may go handed on after it. */
static void hand_ready(struct cuptrace_converter *cv, int all)
{
	CUpti_ActivitySynchronization2 *r;
	size_t n = cuptrace_sync_watch_ready(&r, all);
	const union rec **p = calloc(n ? n : 1, sizeof(*p));
	for (size_t i = 0; i < n; i++)
		p[i] = (const union rec *)&r[i];
	add(cv, p, n);
	free(p);
	free(r);
}

static int sync_cmp(const void *x, const void *y)
{
	const struct rslice *a = *(struct rslice *const *)x, *b = *(struct rslice *const *)y;
	return a->corr < b->corr ? -1 : a->corr > b->corr;
}

static size_t syncs_of(struct rec_sink *s, struct rslice **out)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].cat, "sync"))
			out[n++] = &s->slices[i];
	qsort(out, n, sizeof(*out), sync_cmp);
	return n;
}

static struct rslice *api_slice(struct rec_sink *s, uint64_t corr)
{
	for (size_t i = 0; i < s->nslices; i++)
		if (s->slices[i].corr == corr && strcmp(s->slices[i].cat, "sync"))
			return &s->slices[i];
	return NULL;
}

static long arg(const char *args, const char *key)
{
	char k[32];
	snprintf(k, sizeof(k), "%s=", key);
	const char *p = strstr(args, k);
	return p ? atol(p + strlen(k)) : -1;
}

static void check_capture(const char *name, size_t want_syncs)
{
	struct cap c = {0};
	load(&c, name);
	size_t nsync = 0;
	for (size_t i = 0; i < c.n; i++)
		nsync += c.recs[i].h.kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	CHECK_EQ_INT(nsync, want_syncs);
	const union rec **p = calloc(c.n + 1, sizeof(*p));

	/* CUPTI's records, as recorded. */
	struct rec_sink *s1 = rec_sink_new();
	struct cuptrace_converter *cv = converter(s1);
	for (size_t b = 0, i = 0; b < c.nbatches; b++) {
		size_t k = 0;
		for (; i < c.batch_end[b]; i++)
			p[k++] = &c.recs[i];
		add(cv, p, k);
	}
	CHECK_EQ_INT(cuptrace_converter_finish(cv), 0);
	cuptrace_converter_free(cv);

	/* Ours: CUPTI's records left out, each call through the callback. Even ids are made
	 * before the buffer with their call's record arrives (held until it has gone), odd ids
	 * after (their call's record went first). */
	cuptrace_sync_watch_reset();
	cuptrace_sync_watch_clock(test_clock);
	struct rec_sink *s2 = rec_sink_new();
	cv = converter(s2);
	for (size_t b = 0, i0 = 0; b < c.nbatches; i0 = c.batch_end[b++]) {
		for (size_t i = i0; i < c.batch_end[b]; i++)
			if (c.recs[i].h.kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION &&
			    c.recs[i].y.correlationId % 2 == 0)
				replay_sync(&c, &c.recs[i].y);
		cuptrace_sync_watch_take();
		size_t k = 0;
		for (size_t i = i0; i < c.batch_end[b]; i++) {
			if (c.recs[i].h.kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION)
				continue;
			cuptrace_sync_watch_api_seen(&c.recs[i].a);
			p[k++] = &c.recs[i];
		}
		add(cv, p, k);
		hand_ready(cv, 0);
		for (size_t i = i0; i < c.batch_end[b]; i++)
			if (c.recs[i].h.kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION &&
			    c.recs[i].y.correlationId % 2 == 1)
				replay_sync(&c, &c.recs[i].y);
	}
	cuptrace_sync_watch_take();
	CHECK_EQ_INT(cuptrace_sync_watch_pending(), 0); /* every call's record had come */
	hand_ready(cv, 1);
	CHECK_EQ_INT(cuptrace_converter_finish(cv), 0);
	cuptrace_converter_free(cv);
	cuptrace_sync_watch_clock(NULL);

	struct rslice **a = calloc(s1->nslices + 1, sizeof(*a));
	struct rslice **o = calloc(s2->nslices + 1, sizeof(*o));
	size_t na = syncs_of(s1, a), no = syncs_of(s2, o);
	CHECK_EQ_INT(na, nsync);
	CHECK_EQ_INT(no, na);
	/* Events: ours are numbered by first synchronization, CUPTI's by creation; the same
	 * event must be the same number, and two events two numbers (a bijection). */
	long ev_of[4096], cupti_of[4096];
	for (size_t i = 0; i < 4096; i++)
		ev_of[i] = cupti_of[i] = -1;
	for (size_t i = 0; i < na && i < no; i++) {
		CHECK_EQ_INT(o[i]->corr, a[i]->corr);
		CHECK_EQ_STR(o[i]->name, a[i]->name);
		CHECK_EQ_INT(o[i]->track, a[i]->track);
		CHECK_EQ_INT(arg(o[i]->args, "stream"), arg(a[i]->args, "stream"));
		long ea = arg(a[i]->args, "event"), eo = arg(o[i]->args, "event");
		CHECK_EQ_INT(ea < 0, eo < 0);
		if (ea >= 0 && eo >= 0 && ea < 4096 && eo < 4096) {
			if (ev_of[ea] < 0)
				ev_of[ea] = eo;
			if (cupti_of[eo] < 0)
				cupti_of[eo] = ea;
			CHECK_EQ_INT(ev_of[ea], eo);
			CHECK_EQ_INT(cupti_of[eo], ea);
		}
		/* Ours are timed by the whole call: the API slice's span. CUPTI's lie within. */
		struct rslice *call = api_slice(s2, o[i]->corr);
		CHECK(call != NULL);
		if (call) {
			CHECK_EQ_INT(o[i]->ts, call->ts);
			CHECK_EQ_INT(o[i]->dur, call->dur);
			CHECK(a[i]->ts >= call->ts && a[i]->ts + a[i]->dur <= call->ts + call->dur);
		}
	}
	free(a);
	free(o);
	free(p);
	free(c.recs);
	free(c.batch_end);
	r_destroy(&s1->base);
	r_destroy(&s2->base);
}

/* CUPTI's synchronization records in tests/data's captures (one per synchronizing call in
 * each, counted from their API records when they were added): a DDP rank's event queries,
 * stream waits and syncs; PyTorch training; stream waits while capturing a graph; the driver's
 * cuCtxSynchronize; device and stream syncs; syncs on worker threads. */
static void test_capture_same_slices(void)
{
	check_capture("ddp2_rank0.cupti", 281);
	check_capture("torch_train.cupti", 19);
	check_capture("graphs.cupti", 3);
	check_capture("driver_api.cupti", 1);
	check_capture("memory.cupti", 3);
	check_capture("multi_stream.cupti", 4);
}

/* The callback's rules, one call at a time. */
static void test_callback_rules(void)
{
	cuptrace_sync_watch_reset();
	cuptrace_sync_watch_clock(test_clock);
	times[0] = 1000;
	times[1] = 3000;
	CUpti_ActivitySynchronization2 *r = NULL;
	/* A failed synchronization: no record (CUPTI writes none). */
	run_call(&(struct call){CUPTI_CB_DOMAIN_RUNTIME_API,
	                        CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 10,
	                        (void *)(uintptr_t)(STREAM_BASE + 7), NULL, 400, 0});
	/* A query not ready yet: recorded with its return value, as CUPTI does by default. */
	run_call(&(struct call){CUPTI_CB_DOMAIN_RUNTIME_API,
	                        CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020, 11,
	                        (void *)(uintptr_t)0xabc0, NULL, 600, 0});
	/* The program's own driver call, on the per-thread default stream. */
	run_call(&(struct call){CUPTI_CB_DOMAIN_DRIVER_API,
	                        CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz, 12,
	                        (void *)(uintptr_t)(STREAM_BASE + 3), NULL, 0, 0});
	CHECK_EQ_INT(last_per_thread, 1);
	/* A runtime call and the driver call inside it: one record, the runtime call's. */
	run_call(&(struct call){CUPTI_CB_DOMAIN_RUNTIME_API,
	                        CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020, 13, NULL,
	                        NULL, 0, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize});
	/* The same event again: the same number; another event: another. */
	run_call(&(struct call){CUPTI_CB_DOMAIN_RUNTIME_API,
	                        CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 14,
	                        (void *)(uintptr_t)(STREAM_BASE + 9), (void *)(uintptr_t)0xabc0, 0,
	                        CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent});
	run_call(&(struct call){CUPTI_CB_DOMAIN_RUNTIME_API,
	                        CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020, 15,
	                        (void *)(uintptr_t)0xdef0, NULL, 0, 0});
	/* Not a synchronizing call: not ours. */
	CUpti_CallbackData cd;
	memset(&cd, 0, sizeof(cd));
	CHECK_EQ_INT(cuptrace_sync_watch_callback(CUPTI_CB_DOMAIN_RUNTIME_API,
	                                          CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
	                                          &cd),
	             0);
	CHECK(!cuptrace_sync_watch_is_sync_call(CUPTI_ACTIVITY_KIND_RUNTIME,
	                                        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));

	/* Held until their calls' records have gone. */
	cuptrace_sync_watch_take();
	CHECK_EQ_INT(cuptrace_sync_watch_ready(&r, 0), 0);
	CUpti_ActivityAPI api = {.kind = CUPTI_ACTIVITY_KIND_RUNTIME,
	                         .cbid = CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020,
	                         .correlationId = 11};
	cuptrace_sync_watch_api_seen(&api);
	CHECK_EQ_INT(cuptrace_sync_watch_ready(&r, 0), 1);
	CHECK(r && r[0].correlationId == 11 && r[0].returnValue == 600 &&
	      r[0].type == CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE &&
	      r[0].streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE && r[0].start == 1000 &&
	      r[0].end == 3000);
	uint32_t ev11 = r ? r[0].cudaEventId : 0;
	free(r);
	r = NULL;
	/* The end of the run: the rest, in the order made. */
	CHECK_EQ_INT(cuptrace_sync_watch_ready(&r, 1), 4);
	if (r) {
		CHECK_EQ_INT(r[0].correlationId, 12);
		CHECK_EQ_INT(r[0].type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
		CHECK_EQ_INT(r[0].streamId, 3);
		CHECK_EQ_INT(r[0].cudaEventId, CUPTI_SYNCHRONIZATION_INVALID_VALUE);
		CHECK_EQ_INT(r[1].correlationId, 13);
		CHECK_EQ_INT(r[1].type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
		CHECK_EQ_INT(r[1].streamId, CUPTI_SYNCHRONIZATION_INVALID_VALUE);
		CHECK_EQ_INT(r[2].correlationId, 14);
		CHECK_EQ_INT(r[2].type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
		CHECK_EQ_INT(r[2].streamId, 9);
		CHECK_EQ_INT(last_per_thread, 0);
		CHECK_EQ_INT(r[2].cudaEventId, ev11);
		CHECK_EQ_INT(r[3].correlationId, 15);
		CHECK(r[3].cudaEventId != ev11 &&
		      r[3].cudaEventId != CUPTI_SYNCHRONIZATION_INVALID_VALUE);
	}
	free(r);
	CHECK_EQ_INT(cuptrace_sync_watch_pending(), 0);
	/* Setup turns on the ten runtime and ten driver calls, nothing else. */
	enabled_callbacks = 0;
	cuptrace_sync_watch_setup(NULL);
	CHECK_EQ_INT(enabled_callbacks, 20);
	cuptrace_sync_watch_clock(NULL);
	cuptrace_sync_watch_reset();
}

TEST_MAIN(T(test_callback_rules), T(test_capture_same_slices))
