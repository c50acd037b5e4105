/* Converter tests on real captures (tests/data, recorded on an H200) and on hand-built CUPTI
 * records: counts by kind, names, tracks, API->GPU flows, lanes, nesting, timestamps. */
#include "check.h"

#include <dirent.h>
#include <unistd.h>

#include <cupti_activity.h>
#include <cupti_runtime_cbid.h>

#include "common/log.h"
#include "common/util.h"
#include "convert/capture.h"
#include "convert/convert.h"
#include "format/event.h"
#include "read/read.h"
#include "window/wfilter.h"
#include "rec_sink.h"

static struct rec_sink *replay(const char *name, int driver_all)
{
	struct rec_sink *s = rec_sink_new();
	char path[1024];
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", name);
	int r = cuptrace_read_trace(path, &s->base, driver_all);
	CHECK_EQ_INT(r, 0);
	CHECK(s->begun);
	return s;
}

static size_t count(struct rec_sink *s, const char *cat, const char *name_prefix)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nslices; i++)
		if ((!cat || !strcmp(s->slices[i].cat, cat)) &&
		    (!name_prefix || !strncmp(s->slices[i].name, name_prefix, strlen(name_prefix))))
			n++;
	return n;
}

static int64_t meta_int(struct rec_sink *s, const char *key)
{
	for (size_t i = 0; i < s->nmeta; i++)
		if (!strcmp(s->meta_keys[i], key))
			return s->meta_ints[i];
	return -1;
}

static int is_gpu_cat(const char *c)
{
	return !strcmp(c, "kernel") || !strcmp(c, "memcpy") || !strcmp(c, "memset") ||
	       !strcmp(c, "graph");
}

/* Invariants every conversion must hold. */
static void check_invariants(struct rec_sink *s)
{
	CHECK_EQ_INT(s->track_before_use_violations, 0);
	/* Unique uuids; one thread track per tid. */
	for (size_t i = 0; i < s->ntracks; i++)
		for (size_t j = i + 1; j < s->ntracks; j++) {
			CHECK(s->tracks[i].t.uuid != s->tracks[j].t.uuid);
			if (s->tracks[i].t.kind == CUPTRACE_TRACK_THREAD &&
			    s->tracks[j].t.kind == CUPTRACE_TRACK_THREAD)
				CHECK(s->tracks[i].t.tid != s->tracks[j].t.tid);
		}
	/* Every GPU activity has an incoming flow whose other end is an API slice. */
	struct cuptrace_u64map outs;
	cuptrace_u64map_init(&outs);
	for (size_t i = 0; i < s->nslices; i++)
		for (size_t k = 0; k < s->slices[i].nout; k++)
			*cuptrace_u64map_put(&outs, s->slices[i].out[k], NULL) = i + 1;
	size_t gpu = 0, linked = 0;
	for (size_t i = 0; i < s->nslices; i++) {
		struct rslice *r = &s->slices[i];
		CHECK(r->ts >= 0 && r->dur >= 0);
		if (!is_gpu_cat(r->cat))
			continue;
		gpu++;
		uint64_t *o = r->nin ? cuptrace_u64map_get(&outs, r->in) : NULL;
		if (o) {
			struct rslice *api = &s->slices[*o - 1];
			if (!strncmp(api->cat, "cuda_", 5) && api->corr == r->corr &&
			    api->ts <= r->ts)
				linked++;
		}
	}
	CHECK_EQ_INT(linked, gpu);
	cuptrace_u64map_free(&outs);
	/* No two slices on one track partially overlap. */
	size_t bad = 0;
	for (size_t i = 0; i < s->nslices; i++)
		for (size_t j = i + 1; j < s->nslices && j < i + 4000; j++) {
			struct rslice *a = &s->slices[i], *b = &s->slices[j];
			if (a->track != b->track)
				continue;
			int64_t ae = a->ts + a->dur, be = b->ts + b->dur;
			int disjoint = ae <= b->ts || be <= a->ts;
			int nested = (a->ts <= b->ts && be <= ae) || (b->ts <= a->ts && ae <= be);
			if (!disjoint && !nested)
				bad++;
		}
	CHECK_EQ_INT(bad, 0);
}

static void test_vector_add(void)
{
	struct rec_sink *s = replay("vector_add.cupti", 0);
	check_invariants(s);
	CHECK_EQ_INT(count(s, "kernel", NULL), 1);
	CHECK_EQ_INT(count(s, "kernel", "vector_add(float const*, float const*, float*, int)"), 1);
	CHECK_EQ_INT(count(s, "memcpy", "Memcpy HtoD"), 2);
	CHECK_EQ_INT(count(s, "memcpy", "Memcpy DtoH"), 1);
	CHECK_EQ_INT(count(s, "memset", NULL), 1);
	CHECK_EQ_INT(count(s, "cuda_runtime", "cudaLaunchKernel"), 1);
	CHECK_EQ_INT(count(s, "cuda_runtime", "cudaMemcpy"), 3);
	CHECK_EQ_INT(count(s, "cuda_runtime", "cudaMalloc"), 3);
	/* The runtime's own driver calls are filtered; none of the app's. */
	CHECK_EQ_INT(count(s, "cuda_driver", "cuDeviceGetAttribute"), 0);
	CHECK(meta_int(s, "driver_calls_filtered") > 100);
	CHECK_EQ_INT(meta_int(s, "flows"), 5);
	CHECK_EQ_INT(meta_int(s, "gpu_activities_without_api_record"), 0);
	/* The kernel slice carries its launch configuration. */
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].cat, "kernel"))
			CHECK(strstr(s->slices[i].args, "grid=(4096, 1, 1);block=(256, 1, 1);") !=
			      NULL);
	/* A GPU group named after the device, with a stream track under it. */
	int gpu = 0, stream = 0;
	for (size_t i = 0; i < s->ntracks; i++) {
		if (s->tracks[i].t.kind == CUPTRACE_TRACK_GROUP &&
		    !strcmp(s->tracks[i].name, "GPU 0: NVIDIA H200"))
			gpu++;
		if (s->tracks[i].t.kind == CUPTRACE_TRACK_SLICES &&
		    !strncmp(s->tracks[i].name, "Stream ", 7))
			stream++;
	}
	CHECK_EQ_INT(gpu, 1);
	CHECK(stream >= 1);
	/* With --driver all, the runtime's driver calls come back. */
	r_destroy(&s->base);
	s = replay("vector_add.cupti", 1);
	CHECK(count(s, "cuda_driver", "cuDeviceGetAttribute") > 100);
	r_destroy(&s->base);
}

static void test_multi_stream(void)
{
	struct rec_sink *s = replay("multi_stream.cupti", 0);
	check_invariants(s);
	/* 4 threads x 250 launches. */
	CHECK_EQ_INT(count(s, "kernel", "tiny(int*)"), 1000);
	CHECK_EQ_INT(count(s, "cuda_runtime", "cudaLaunchKernel"), 1000);
	CHECK_EQ_INT(meta_int(s, "flows"), 1000 + 2); /* + memset and the final copy */
	/* One thread track per worker, named by the OS. */
	int workers = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		if (s->tracks[i].t.kind == CUPTRACE_TRACK_THREAD &&
		    !strncmp(s->tracks[i].name, "worker-", 7))
			workers++;
	CHECK_EQ_INT(workers, 4);
	/* Each worker's stream is its own track. */
	int streams = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		if (s->tracks[i].t.kind == CUPTRACE_TRACK_SLICES && s->tracks[i].t.lane == 0 &&
		    !strncmp(s->tracks[i].name, "Stream ", 7))
			streams++;
	CHECK_EQ_INT(streams, 5); /* 4 workers + the default stream */
	CHECK_EQ_INT(count(s, "sync", "Wait: stream"), 4);
	r_destroy(&s->base);
}

static void test_driver_api(void)
{
	struct rec_sink *s = replay("driver_api.cupti", 0);
	check_invariants(s);
	CHECK_EQ_INT(count(s, "kernel", "scale"), 3);
	CHECK_EQ_INT(count(s, "cuda_driver", "cuLaunchKernel"), 3);
	CHECK_EQ_INT(count(s, "cuda_driver", "cuModuleLoadData"), 1);
	CHECK_EQ_INT(count(s, "cuda_driver", "cuMemcpyHtoD"), 1);
	CHECK_EQ_INT(count(s, "cuda_driver", "cuCtxSynchronize"), 1);
	CHECK_EQ_INT(count(s, "cuda_runtime", NULL), 0);
	CHECK_EQ_INT(count(s, "memcpy", NULL), 2);
	r_destroy(&s->base);
}

static void test_graphs(void)
{
	struct rec_sink *s = replay("graphs.cupti", 0);
	check_invariants(s);
	CHECK_EQ_INT(count(s, "kernel", "spin"), 12);
	CHECK_EQ_INT(count(s, "memset", NULL), 3);
	CHECK_EQ_INT(count(s, "memcpy", "Memcpy DtoD"), 3);
	/* Each cudaGraphLaunch fans out to its 6 nodes. */
	size_t launches = 0;
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].name, "cudaGraphLaunch")) {
			launches++;
			CHECK_EQ_INT(s->slices[i].nout, 6);
		}
	CHECK_EQ_INT(launches, 3);
	CHECK_EQ_INT(meta_int(s, "gpu_activities_in_graphs"), 18);
	CHECK_EQ_INT(meta_int(s, "graph_launches"), -1); /* only with --cuda-graphs graph */
	/* Graph nodes carry graph and node ids. */
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].cat, "kernel"))
			CHECK(strstr(s->slices[i].args, "graph_id=") &&
			      strstr(s->slices[i].args, "graph_node_id="));
	r_destroy(&s->base);
}

static void test_all_captures_clean(void)
{
	static const char *const caps[] = {"c_api.cupti", "memory.cupti", "peer_copy.cupti",
	                                   "nvtx.cupti", "torch_train.cupti"};
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		struct rec_sink *s = replay(caps[i], 0);
		check_invariants(s);
		CHECK_EQ_INT(meta_int(s, "gpu_activities_without_api_record"), 0);
		r_destroy(&s->base);
	}
}

static size_t tracks_named(struct rec_sink *s, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		n += !strcmp(s->tracks[i].name, name);
	return n;
}

static void test_torch(void)
{
	struct rec_sink *s = replay("torch_train.cupti", 0);
	/* torch.profiler saw 153 kernels, 17 copies and 13 memsets for the same work. */
	CHECK_EQ_INT(count(s, "kernel", NULL), 153);
	CHECK_EQ_INT(count(s, "memcpy", NULL), 17);
	CHECK_EQ_INT(count(s, "memset", NULL), 13);
	/* Stream 7's 176 slices come in two CUPTI buffers whose times interleave; none overlap,
	 * so all of them are on one track (check_invariants: none partially overlap). */
	check_invariants(s);
	CHECK_EQ_INT(tracks_named(s, "Stream 7"), 1);
	size_t on7 = 0;
	for (size_t i = 0; i < s->nslices; i++) {
		struct rtrack *t =
		    is_gpu_cat(s->slices[i].cat) ? find_track(s, s->slices[i].track) : NULL;
		on7 += t && !strcmp(t->name, "Stream 7");
	}
	CHECK_EQ_INT(on7, 176);
	r_destroy(&s->base);
}

static void test_c_api(void)
{
	struct rec_sink *s = replay("c_api.cupti", 0);
	CHECK_EQ_INT(count(s, "kernel", "work"), 5);
	r_destroy(&s->base);
}

/* Hand-built records: GPU work arriving before its API call, across batches, and overlapping
 * work on one stream. */
static void test_synthetic_order(void)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityKernel10 k[3];
	memset(k, 0, sizeof(k));
	for (int i = 0; i < 3; i++) {
		k[i].kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
		k[i].deviceId = 0;
		k[i].contextId = 1;
		k[i].streamId = 7;
		k[i].correlationId = 10 + (uint32_t)i;
		k[i].name = "k";
	}
	/* k0 [2000,3000), k1 [2500,3500) overlaps it, k2 [3000,4000) touches k0. */
	k[0].start = 2000, k[0].end = 3000;
	k[1].start = 2500, k[1].end = 3500;
	k[2].start = 3000, k[2].end = 4000;
	k[1].correlationId = 10; /* a second node of launch 10 (graph-like fan-out) */
	const CUpti_Activity *b1[] = {(CUpti_Activity *)&k[0], (CUpti_Activity *)&k[1],
	                              (CUpti_Activity *)&k[2]};
	CHECK_EQ_INT(cuptrace_converter_add(c, b1, 3), 0);
	/* The API records come in a later batch. */
	CUpti_ActivityAPI a[2];
	memset(a, 0, sizeof(a));
	a[0].kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a[0].cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
	a[0].start = 1500, a[0].end = 1600, a[0].threadId = 42, a[0].correlationId = 10;
	a[1] = a[0];
	a[1].cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
	a[1].start = 1700, a[1].end = 1800, a[1].correlationId = 12;
	const CUpti_Activity *b2[] = {(CUpti_Activity *)&a[0], (CUpti_Activity *)&a[1]};
	CHECK_EQ_INT(cuptrace_converter_add(c, b2, 2), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	check_invariants(s);
	CHECK_EQ_INT(count(s, "kernel", NULL), 3);
	/* The overlapping kernel went to a second lane with the same name. */
	size_t lanes = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		if (!strcmp(s->tracks[i].name, "Stream 7"))
			lanes++;
	CHECK_EQ_INT(lanes, 2);
	for (size_t i = 0; i < s->nslices; i++) {
		if (!strcmp(s->slices[i].name, "cudaGraphLaunch"))
			CHECK_EQ_INT(s->slices[i].nout, 2);
		if (!strcmp(s->slices[i].name, "cudaLaunchKernel"))
			CHECK_EQ_INT(s->slices[i].nout, 1);
		CHECK(s->slices[i].ts >= 0);
	}
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

static struct rtrack *track_of(struct rec_sink *s, const char *slice_name)
{
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].name, slice_name))
			return find_track(s, s->slices[i].track);
	return NULL;
}

static struct rslice *slice_named(struct rec_sink *s, const char *name)
{
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].name, name))
			return &s->slices[i];
	return NULL;
}

/* --cuda-graphs graph: CUPTI's GRAPH_TRACE records, one per graph launch. Each is a slice
 * "CUDA graph <id>" on its stream, with the flow from its cudaGraphLaunch; one whose first node
 * ran on the host takes the device and context where its last one ran; one with no GPU at all
 * is not drawn. The same records through a capture file give the same trace. */
static void graph_trace_records(CUpti_ActivityAPI *a, CUpti_ActivityGraphTrace2 *g,
                                CUpti_ActivityKernel10 *k)
{
	memset(a, 0, 4 * sizeof(*a));
	memset(g, 0, 3 * sizeof(*g));
	memset(k, 0, sizeof(*k));
	for (int i = 0; i < 4; i++) {
		a[i].kind = CUPTI_ACTIVITY_KIND_RUNTIME;
		a[i].cbid = i == 2 ? CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000
		                   : CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000;
		a[i].start = 1500 + 200 * (uint64_t)i, a[i].end = a[i].start + 100;
		a[i].processId = 42, a[i].threadId = 42, a[i].correlationId = 20 + (uint32_t)i;
	}
	for (int i = 0; i < 3; i++) {
		g[i].kind = CUPTI_ACTIVITY_KIND_GRAPH_TRACE;
		g[i].contextId = 1, g[i].streamId = 9, g[i].graphId = 3;
		g[i].correlationId = i == 2 ? 23 : 20 + (uint32_t)i;
	}
	g[0].start = 3000, g[0].end = 3600;
	/* started with a host node: device and context are INT_MAX, the end's are real */
	g[1].deviceId = INT32_MAX, g[1].contextId = INT32_MAX, g[1].endContextId = 1;
	g[1].start = 3700, g[1].end = 4100;
	/* host nodes only */
	g[2].deviceId = g[2].endDeviceId = INT32_MAX;
	g[2].contextId = g[2].endContextId = INT32_MAX;
	g[2].start = 4200, g[2].end = 4300;
	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->contextId = 1, k->streamId = 9, k->correlationId = 22, k->name = "k";
	k->start = 4400, k->end = 4500;
}

static void check_graph_trace(struct rec_sink *s)
{
	check_invariants(s); /* every graph slice linked to its API call */
	CHECK_EQ_INT(count(s, "graph", NULL), 2);
	CHECK_EQ_INT(count(s, "graph", "CUDA graph 3"), 2);
	CHECK_EQ_INT(count(s, "kernel", NULL), 1);
	CHECK_EQ_INT(meta_int(s, "graph_launches"), 2);
	CHECK_EQ_INT(meta_int(s, "kernels"), 1);
	size_t seen = 0;
	for (size_t i = 0; i < s->nslices; i++) {
		struct rslice *r = &s->slices[i];
		if (!strcmp(r->cat, "graph")) {
			/* times relative to the trace start (1000 ns) */
			CHECK(r->ts == 2000 || r->ts == 2700);
			CHECK_EQ_INT(r->dur, r->ts == 2000 ? 600 : 400);
			CHECK_EQ_INT(r->corr, r->ts == 2000 ? 20 : 21);
			CHECK_EQ_INT(r->nin, 1);
			struct rtrack *t = find_track(s, r->track);
			CHECK(t && !strcmp(t->name, "Stream 9"));
			CHECK(strstr(r->args, "graph_id") != NULL);
			seen++;
		}
		if (!strcmp(r->name, "cudaGraphLaunch"))
			/* launches 20 and 21 have their graph; 23's ran on the host only */
			CHECK_EQ_INT(r->nout, r->corr == 23 ? 0 : 1);
	}
	CHECK_EQ_INT(seen, 2);
	CHECK_EQ_INT(count(s, NULL, "cudaGraphLaunch"), 3);
}

static void test_graph_trace(void)
{
	CUpti_ActivityAPI a[4];
	CUpti_ActivityGraphTrace2 g[3];
	CUpti_ActivityKernel10 k;
	graph_trace_records(a, g, &k);
	const CUpti_Activity *b1[] = {(CUpti_Activity *)&a[0], (CUpti_Activity *)&a[1],
	                              (CUpti_Activity *)&a[2], (CUpti_Activity *)&a[3]};
	const CUpti_Activity *b2[] = {(CUpti_Activity *)&g[0], (CUpti_Activity *)&g[1],
	                              (CUpti_Activity *)&g[2], (CUpti_Activity *)&k};

	/* Straight into the converter, API records first, the GPU's in a later batch. */
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CHECK_EQ_INT(cuptrace_converter_add(c, b1, 4), 0);
	CHECK_EQ_INT(cuptrace_converter_add(c, b2, 4), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	check_graph_trace(s);
	cuptrace_converter_free(c);
	r_destroy(&s->base);

	/* Through a capture file (the record's size is known to the reader). */
	char path[] = "/tmp/cuptrace-graph-trace-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	close(fd);
	struct cuptrace_consumer w;
	CHECK_EQ_INT(cuptrace_capture_open(path, &w), 0);
	if (!w.ops)
		return;
	cuptrace_consumer_meta(&w, "pid", "42");
	cuptrace_consumer_meta(&w, "process_name", "p");
	cuptrace_consumer_meta(&w, "start_boottime_ns", "1000");
	uint32_t sa[4], sg[4] = {sizeof(g[0]), sizeof(g[1]), sizeof(g[2]), sizeof(k)};
	for (int i = 0; i < 4; i++)
		sa[i] = sizeof(a[i]);
	CHECK_EQ_INT(cuptrace_consumer_records(&w, b1, sa, 4), 0);
	CHECK_EQ_INT(cuptrace_consumer_records(&w, b2, sg, 4), 0);
	CHECK_EQ_INT(cuptrace_consumer_close(&w), 0);
	s = rec_sink_new();
	CHECK_EQ_INT(cuptrace_read_trace(path, &s->base, 0), 0);
	check_graph_trace(s);
	r_destroy(&s->base);
	unlink(path);
}

/* Graphs launched from the GPU (--cuda-graphs graph), recorded on an H200 from
 * examples/device_graph 4 20: 20 host launches of a one-kernel "launcher" graph whose kernel
 * launches a 4-kernel "worker" graph (fire and forget). Each launch is one slice: the launcher's
 * with its flow from cudaGraphLaunch on the stream, the worker's, which no host call launched,
 * on a track of its own, saying which graph launched it and how, and starting while its
 * launcher runs. */
static void test_device_graphs(void)
{
	struct rec_sink *s = replay("device_graph.cupti", 0);
	CHECK_EQ_INT(count(s, "graph", NULL), 40);
	CHECK_EQ_INT(count(s, "kernel", NULL), 0); /* per graph: no node records */
	CHECK_EQ_INT(count(s, "cuda_runtime", "cudaGraphLaunch"), 20);
	CHECK_EQ_INT(meta_int(s, "graph_launches"), 40);
	CHECK_EQ_INT(meta_int(s, "device_graph_launches"), 20);
	struct rslice *host[20], *dev[20];
	size_t nh = 0, nd = 0;
	for (size_t i = 0; i < s->nslices; i++) {
		struct rslice *r = &s->slices[i];
		if (strcmp(r->cat, "graph"))
			continue;
		struct rtrack *t = find_track(s, r->track);
		CHECK(t != NULL);
		if (!t)
			continue;
		if (r->nin) {
			CHECK(nh < 20);
			if (nh < 20)
				host[nh++] = r;
			CHECK(!strncmp(t->name, "Stream ", 7));
		} else {
			CHECK(nd < 20);
			if (nd < 20)
				dev[nd++] = r;
			CHECK_EQ_STR(t->name, "Graphs launched from the GPU");
			CHECK(strstr(r->args, "device_launch=fire and forget;") != NULL);
		}
	}
	CHECK_EQ_INT(nh, 20);
	CHECK_EQ_INT(nd, 20);
	if (nh != 20 || nd != 20) {
		r_destroy(&s->base);
		return;
	}
	/* One graph launches the other, in launch order (the program waits for each replay). */
	char by[64];
	snprintf(by, sizeof(by), "launched_by_graph=%s", strstr(host[0]->args, "graph_id=") + 9);
	*strchr(by, ';') = 0;
	CHECK(strcmp(host[0]->name, dev[0]->name) != 0);
	for (size_t i = 0; i < 20; i++) {
		CHECK_EQ_STR(host[i]->name, host[0]->name);
		CHECK_EQ_STR(dev[i]->name, dev[0]->name);
		CHECK(strstr(dev[i]->args, by) != NULL);
		CHECK(dev[i]->ts >= host[i]->ts && dev[i]->ts <= host[i]->ts + host[i]->dur);
		CHECK(dev[i]->dur > 0);
	}
	r_destroy(&s->base);
}

/* A tail launch reports the launching stream's id: then it goes on that stream's track. */
static void test_device_graph_tail(void)
{
	CUpti_ActivityDeviceGraphTrace g;
	memset(&g, 0, sizeof(g));
	g.kind = CUPTI_ACTIVITY_KIND_DEVICE_GRAPH_TRACE;
	g.contextId = 1, g.streamId = 13, g.graphId = 7, g.launcherGraphId = 6;
	g.deviceLaunchMode = CUPTI_DEVICE_GRAPH_LAUNCH_MODE_TAIL;
	g.start = 3000, g.end = 3500;
	const CUpti_Activity *b[] = {(CUpti_Activity *)&g};
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CHECK_EQ_INT(cuptrace_converter_add(c, b, 1), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	struct rslice *r = slice_named(s, "CUDA graph 7");
	CHECK(r != NULL);
	if (r) {
		struct rtrack *t = find_track(s, r->track);
		CHECK(t && !strcmp(t->name, "Stream 13"));
		CHECK_EQ_INT(r->ts, 2000);
		CHECK_EQ_INT(r->dur, 500);
		CHECK(strstr(r->args, "launched_by_graph=6;device_launch=tail;") != NULL);
	}
	CHECK_EQ_INT(meta_int(s, "device_graph_launches"), 1);
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

/* Correlation ids over 65,536 apart share a state slot. A call whose kernel has not come when
 * its slot goes to the id 65,536 later is written then, without its arrow (and counted), and
 * the kernel, when it comes, is left unlinked; a call and its kernel that both come that late
 * still get their arrow (the stray state). */
static void add_launch(struct cuptrace_converter *c, CUpti_ActivityAPI *a,
                       CUpti_ActivityKernel10 *k, uint32_t corr, int with_api, int with_kernel)
{
	memset(a, 0, sizeof(*a));
	memset(k, 0, sizeof(*k));
	a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a->cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
	a->start = 10000 + 1000 * (uint64_t)corr, a->end = a->start + 100;
	a->processId = 42, a->threadId = 42, a->correlationId = corr;
	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->contextId = 1, k->streamId = 7, k->correlationId = corr, k->name = "k";
	k->start = a->start + 500, k->end = k->start + 300;
	const CUpti_Activity *b[2];
	size_t n = 0;
	if (with_api)
		b[n++] = (const CUpti_Activity *)a;
	if (with_kernel)
		b[n++] = (const CUpti_Activity *)k;
	CHECK_EQ_INT(cuptrace_converter_add(c, b, n), 0);
}

static struct rslice *launch_slice(struct rec_sink *s, const char *name, uint64_t corr)
{
	for (size_t i = 0; i < s->nslices; i++)
		if (s->slices[i].corr == corr && !strcmp(s->slices[i].name, name))
			return &s->slices[i];
	return NULL;
}

static void test_corr_wraparound(void)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {.pid = 42, .process_name = "p", .start_boottime_ns = 1};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityAPI a;
	CUpti_ActivityKernel10 k;
	const uint32_t last = 5 + 65536 + 10;
	add_launch(c, &a, &k, 5, 1, 0); /* held for its kernel */
	for (uint32_t id = 6; id <= last; id++)
		if (id != 9)
			add_launch(c, &a, &k, id, 1, 1);
	/* Id 5's slot went to 65541: its call is out, without its arrow. */
	struct rslice *call5 = launch_slice(s, "cudaLaunchKernel", 5);
	CHECK(call5 && call5->nout == 0);
	/* Id 9's call and kernel come after 65545 took their slot: linked all the same. */
	add_launch(c, &a, &k, 9, 1, 0);
	add_launch(c, &a, &k, 9, 0, 1);
	/* Then 5's kernel: unlinked. */
	add_launch(c, &a, &k, 5, 0, 1);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	const struct cuptrace_convert_counts *n = cuptrace_converter_counts(c);
	CHECK_EQ_INT(n->pending_forced, 1);
	CHECK_EQ_INT(meta_int(s, "gpu_activities_without_api_record"), 1);
	CHECK_EQ_INT(count(s, "kernel", NULL), last - 4);
	struct rslice *call9 = launch_slice(s, "cudaLaunchKernel", 9);
	struct rslice *k9 = launch_slice(s, "k", 9);
	CHECK(call9 && k9 && call9->nout == 1 && k9->nin == 1 && call9->out[0] == k9->in);
	/* Every other launch has its arrow. */
	size_t linked = 0;
	for (size_t i = 0; i < s->nslices; i++)
		linked += !strcmp(s->slices[i].name, "cudaLaunchKernel") && s->slices[i].nout == 1;
	CHECK_EQ_INT(linked, last - 5);
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

/* What finish counts and free releases, once every slot of the correlation table has had an
 * id (a program past 65,536 calls): kernels whose call never came are counted as unlinked
 * (three here), a kernel whose call came later is not, and syncs whose call never came are
 * neither drawn nor leaked (ASan's leak check runs with this test). */
static void test_orphans_at_finish(void)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {.pid = 42, .process_name = "p", .start_boottime_ns = 1};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityAPI a;
	CUpti_ActivityKernel10 k;
	const uint32_t last = 70000;
	for (uint32_t id = 1; id <= last; id++)
		add_launch(c, &a, &k, id, 1, 1);
	for (uint32_t id = last + 1; id <= last + 3; id++)
		add_launch(c, &a, &k, id, 0, 1); /* kernels only: their calls never come */
	add_launch(c, &a, &k, last + 4, 0, 1);   /* its kernel first, then its call */
	add_launch(c, &a, &k, last + 4, 1, 0);
	CUpti_ActivitySynchronization2 y = {
	    .kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
	    .type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
	    .start = 10000 + 1000 * (uint64_t)(last + 9),
	    .end = 10000 + 1000 * (uint64_t)(last + 9) + 50,
	    .correlationId = last + 9, /* its cudaStreamSynchronize never comes */
	    .contextId = 1,
	    .streamId = 7,
	    .cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE};
	const CUpti_Activity *b[2] = {(const CUpti_Activity *)&y, (const CUpti_Activity *)&y};
	CHECK_EQ_INT(cuptrace_converter_add(c, b, 2), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	CHECK_EQ_INT(meta_int(s, "gpu_activities_without_api_record"), 3);
	CHECK_EQ_INT(count(s, "kernel", NULL), last + 4);
	CHECK_EQ_INT(count(s, "sync", NULL), 0);
	struct rslice *call = launch_slice(s, "cudaLaunchKernel", last + 4);
	struct rslice *kern = launch_slice(s, "k", last + 4);
	CHECK(call && kern && call->nout == 1 && kern->nin == 1 && call->out[0] == kern->in);
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

/* GPU work that was over before the call with its id began (CUPTI stamped three kernels with
 * a later launch's id while a finish turned its kinds off, seen on an H100) gets no flow: the
 * arrow would point back in time and take the call's one expected kernel. Work that ends the
 * moment its call begins, or later, is linked. Both orders: the calls' buffer first (as seen),
 * and the kernels' first (held as orphans until the call comes). */
static void check_gpu_before_its_call(int kernels_first)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {.pid = 42, .process_name = "p", .start_boottime_ns = 1};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityAPI a[4];
	CUpti_ActivityKernel10 k[3], own;
	const CUpti_Activity *calls[4], *kerns[3];
	for (uint32_t id = 1; id <= 4; id++) {
		add_launch(c, &a[id - 1], &own, id, 0, 0); /* fills the records only */
		calls[id - 1] = (const CUpti_Activity *)&a[id - 1];
		if (id <= 3) {
			/* call id's kernel (500 ns after the call began), with the stale id */
			k[id - 1] = own;
			k[id - 1].correlationId = 4;
			kerns[id - 1] = (const CUpti_Activity *)&k[id - 1];
		}
	}
	if (kernels_first) {
		CHECK_EQ_INT(cuptrace_converter_add(c, kerns, 3), 0);
		CHECK_EQ_INT(cuptrace_converter_add(c, calls, 4), 0);
	} else {
		const CUpti_Activity *b[7];
		memcpy(b, calls, sizeof(calls));
		memcpy(b + 4, kerns, sizeof(kerns));
		CHECK_EQ_INT(cuptrace_converter_add(c, b, 7), 0);
	}
	/* Call 5's kernel ends the very nanosecond the call began: still its own (delivered in
	 * the order under test). */
	add_launch(c, &a[0], &own, 5, 0, 0);
	own.start = a[0].start - 300;
	own.end = a[0].start;
	const CUpti_Activity *call5 = (const CUpti_Activity *)&a[0],
	                     *kern5 = (const CUpti_Activity *)&own;
	CHECK_EQ_INT(cuptrace_converter_add(c, kernels_first ? &kern5 : &call5, 1), 0);
	CHECK_EQ_INT(cuptrace_converter_add(c, kernels_first ? &call5 : &kern5, 1), 0);
	add_launch(c, &a[1], &own, 6, 1, 1); /* an ordinary launch after it */
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	const struct cuptrace_convert_counts *cnt = cuptrace_converter_counts(c);
	CHECK_EQ_INT(cnt->unlinked_gpu, 3);
	CHECK_EQ_INT(cnt->unlinked_before_call, 3);
	CHECK_EQ_INT(cnt->flows, 2);
	CHECK_EQ_INT(cnt->pending_forced, 4); /* calls 1 to 4 never got a kernel of their own */
	CHECK_EQ_INT(meta_int(s, "gpu_activities_without_api_record"), 3);
	CHECK_EQ_INT(count(s, "kernel", NULL), 5);
	size_t stale = 0;
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].name, "k") && s->slices[i].corr == 4) {
			stale++;
			/* Kernels first: each keeps the flow id it got, which no call names. */
			CHECK_EQ_INT(s->slices[i].nin, kernels_first);
			for (size_t j = 0; s->slices[i].nin && j < s->nslices; j++)
				for (size_t o = 0; o < s->slices[j].nout; o++)
					CHECK(s->slices[j].out[o] != s->slices[i].in);
		}
	CHECK_EQ_INT(stale, 3);
	for (uint32_t id = 1; id <= 6; id++) {
		struct rslice *call = launch_slice(s, "cudaLaunchKernel", id);
		struct rslice *kern = launch_slice(s, "k", id);
		CHECK(call != NULL);
		if (!call)
			continue;
		CHECK_EQ_INT(call->nout, id >= 5);
		if (id >= 5)
			CHECK(kern && kern->nin == 1 && call->out[0] == kern->in);
	}
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

static void test_gpu_before_its_call(void)
{
	check_gpu_before_its_call(0);
	check_gpu_before_its_call(1);
}

/* The held-back calls' table full (max_pending 4): the lowest ids go out without their arrows,
 * entries freed by arriving kernels are used again, and the end writes what is still held. */
static void test_pending_full(void)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {.pid = 42, .process_name = "p", .start_boottime_ns = 1};
	struct cuptrace_convert_opts o = {.sz = sizeof(o), .max_pending = 4};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, &o);
	CUpti_ActivityAPI a;
	CUpti_ActivityKernel10 k;
	for (uint32_t id = 1; id <= 6; id++)
		add_launch(c, &a, &k, id, 1, 0); /* 5 pushes 1 out, 6 pushes 2 */
	for (uint32_t id = 3; id <= 6; id++)
		add_launch(c, &a, &k, id, 0, 1); /* linked: the table empties */
	for (uint32_t id = 7; id <= 10; id++)
		add_launch(c, &a, &k, id, 1, 0); /* four reused entries, no eviction */
	for (uint32_t id = 7; id <= 9; id++)
		add_launch(c, &a, &k, id, 0, 1);
	add_launch(c, &a, &k, 1, 0, 1);                /* after its call went out: unlinked */
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0); /* 10 still held: written, no arrow */
	const struct cuptrace_convert_counts *n = cuptrace_converter_counts(c);
	CHECK_EQ_INT(n->pending_forced, 3);
	CHECK_EQ_INT(count(s, NULL, "cudaLaunchKernel"), 10);
	CHECK_EQ_INT(count(s, "kernel", NULL), 8);
	for (uint32_t id = 1; id <= 10; id++) {
		struct rslice *call = launch_slice(s, "cudaLaunchKernel", id);
		struct rslice *kern = launch_slice(s, "k", id);
		int linked = id >= 3 && id <= 9;
		CHECK(call != NULL);
		if (call)
			CHECK_EQ_INT(call->nout, linked);
		if (linked)
			CHECK(kern && kern->nin == 1 && call && call->out[0] == kern->in);
	}
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

/* A kernel on stream 7 of [start, end) ns, relative to a trace start of 1000 ns. */
static void stream7_kernel(CUpti_ActivityKernel10 *k, uint64_t start, uint64_t end,
                           const char *name)
{
	memset(k, 0, sizeof(*k));
	k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k->contextId = 1;
	k->streamId = 7;
	k->name = name;
	k->start = 1000 + start;
	k->end = 1000 + end;
}

/* Kernels on stream 7 of [start, end) ns (relative), each with its cudaLaunchKernel record
 * (correlation id 100 + i, in batch 0), in the batches given: the lane tracks they need. */
struct kspan {
	uint64_t start, end;
	int batch;
};
static size_t stream7_lanes(const struct kspan *ks, size_t n, int nbatches)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityKernel10 *k = calloc(n, sizeof(*k));
	CUpti_ActivityAPI *a = calloc(n, sizeof(*a));
	const CUpti_Activity **b = calloc(2 * n, sizeof(*b));
	for (size_t i = 0; i < n; i++) {
		uint32_t corr = 100 + (uint32_t)i;
		stream7_kernel(&k[i], ks[i].start, ks[i].end, "k");
		k[i].correlationId = corr;
		a[i] = (CUpti_ActivityAPI){.kind = CUPTI_ACTIVITY_KIND_RUNTIME,
		                           .cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
		                           .start = 1000 + 10 * (uint64_t)i,
		                           .end = 1005 + 10 * (uint64_t)i,
		                           .threadId = 42,
		                           .correlationId = corr};
	}
	for (int batch = 0; batch < nbatches; batch++) {
		size_t m = 0;
		for (size_t i = 0; i < n && !batch; i++)
			b[m++] = (const CUpti_Activity *)&a[i];
		for (size_t i = 0; i < n; i++)
			if (ks[i].batch == batch)
				b[m++] = (const CUpti_Activity *)&k[i];
		CHECK_EQ_INT(cuptrace_converter_add(c, b, m), 0);
	}
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	check_invariants(s);
	CHECK_EQ_INT(count(s, "kernel", NULL), n);
	for (size_t i = 0; i < s->nslices; i++)
		if (!strcmp(s->slices[i].name, "cudaLaunchKernel"))
			CHECK_EQ_INT(s->slices[i].nout, 1);
	size_t lanes = tracks_named(s, "Stream 7");
	cuptrace_converter_free(c);
	r_destroy(&s->base);
	free(k);
	free(a);
	free(b);
	return lanes;
}

/* A stream's work in batches out of time order: one track unless it truly overlaps. */
static void test_stream_order_across_batches(void)
{
	/* Batch 0 brings the later half, batch 1 the earlier half (interleaved, none overlap):
	 * one track, every launch linked to its kernel. */
	static const struct kspan apart[] = {
	    {2000, 2500, 1}, {3000, 3500, 0}, {4000, 4500, 1}, {5000, 5500, 0}, {6000, 6500, 0}};
	CHECK_EQ_INT(stream7_lanes(apart, 5, 2), 1);
	/* Over three batches, the earliest last. */
	static const struct kspan three[] = {
	    {2000, 2500, 2}, {2500, 3000, 1}, {3000, 3500, 0}, {4000, 4500, 2}, {5000, 5500, 1}};
	CHECK_EQ_INT(stream7_lanes(three, 5, 3), 1);
	/* Work that truly overlaps (graph branches) still gets a second lane, whichever batch
	 * brings it. */
	static const struct kspan branch[] = {
	    {2000, 3000, 1}, {2500, 3500, 0}, {3000, 4000, 0}, {4000, 4500, 1}};
	CHECK_EQ_INT(stream7_lanes(branch, 4, 2), 2);
}

/* More GPU work than the reorder window holds (32768 records, convert_gpu.c): the oldest is
 * drawn to make room, so work that comes later than that still opens a lane, as it did before
 * the window, and no track gets partially overlapping slices; later work that finds its
 * neighbours still held goes in its place. */
static void test_stream_order_window_bound(void)
{
	const size_t n = 40000;
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityKernel10 *k = calloc(n + 2, sizeof(*k));
	const CUpti_Activity **b = calloc(n, sizeof(*b));
	/* [1000 i, 1000 i + 500) from 10 us on, gaps of 500 ns between */
	for (size_t i = 0; i < n; i++) {
		stream7_kernel(&k[i], 10000 + 1000 * (uint64_t)i, 10500 + 1000 * (uint64_t)i, "k");
		b[i] = (const CUpti_Activity *)&k[i];
	}
	stream7_kernel(&k[n], 1000, 2000, "too-late");   /* before all: its neighbours are drawn */
	uint64_t gap = 1000 * (uint64_t)(n - 2) + 10600; /* after the last but one */
	stream7_kernel(&k[n + 1], gap, gap + 300, "in-time");
	CHECK_EQ_INT(cuptrace_converter_add(c, b, n), 0);
	const CUpti_Activity *late[] = {(const CUpti_Activity *)&k[n],
	                                (const CUpti_Activity *)&k[n + 1]};
	CHECK_EQ_INT(cuptrace_converter_add(c, late, 2), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	CHECK_EQ_INT(s->nslices, n + 2);
	CHECK_EQ_INT(tracks_named(s, "Stream 7"), 2);
	struct rtrack *lane0 = track_of(s, "k");
	struct rtrack *too_late = track_of(s, "too-late"), *in_time = track_of(s, "in-time");
	CHECK(lane0 && too_late && in_time);
	if (lane0 && too_late && in_time) {
		CHECK(too_late->t.uuid != lane0->t.uuid);
		CHECK(in_time->t.uuid == lane0->t.uuid);
	}
	/* Each track's slices come in start order and none overlaps the one before. */
	int64_t last_end[2] = {0, 0};
	uint64_t uuid[2] = {lane0 ? lane0->t.uuid : 0, too_late ? too_late->t.uuid : 0};
	size_t bad = 0;
	for (size_t i = 0; i < s->nslices; i++)
		for (int l = 0; l < 2; l++)
			if (s->slices[i].track == uuid[l]) {
				bad += s->slices[i].ts < last_end[l];
				last_end[l] = s->slices[i].ts + s->slices[i].dur;
			}
	CHECK_EQ_INT(bad, 0);
	cuptrace_converter_free(c);
	r_destroy(&s->base);
	free(k);
	free(b);
}

static void test_nvtx(void)
{
	struct rec_sink *s = replay("nvtx.cupti", 0);
	check_invariants(s);
	/* Push/pop ranges nest on the thread named by nvtxNameOsThread. */
	struct rslice *outer = slice_named(s, "outer"), *inner = slice_named(s, "inner");
	CHECK(outer && inner);
	if (outer && inner) {
		CHECK(outer->track == inner->track);
		CHECK(outer->ts < inner->ts && inner->ts + inner->dur < outer->ts + outer->dur);
		CHECK_EQ_STR(find_track(s, outer->track)->name, "main-loop");
		CHECK_EQ_STR(outer->cat, "nvtx");
	}
	/* Start/end ranges go on tracks of their own: one that ended on another thread, and one
	 * that nests on its thread but is no push/pop range (told apart by the NVTX callbacks). */
	struct rtrack *t = track_of(s, "async-range");
	CHECK(t && !strcmp(t->name, "NVTX ranges") && t->t.kind == CUPTRACE_TRACK_SLICES);
	t = track_of(s, "nested-start-end");
	CHECK(t && !strcmp(t->name, "NVTX ranges"));
	CHECK_EQ_INT(meta_int(s, "nvtx_start_end_ranges"), 2);
	/* nvtxNameCudaDevice names the GPU group, next to the model. */
	int named = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		named += s->tracks[i].t.kind == CUPTRACE_TRACK_GROUP &&
		         !strcmp(s->tracks[i].name, "GPU 0: main-gpu (NVIDIA H200)");
	CHECK_EQ_INT(named, 1);
	/* Domain, color, category and payload. */
	struct rslice *d = slice_named(s, "domain-range");
	CHECK(d && !strcmp(d->cat, "cuptrace-demo"));
	CHECK(d && strstr(d->args, "color=#00ff00;") && strstr(d->args, "nvtx_category=7;") &&
	      strstr(d->args, "payload=77;"));
	CHECK(slice_named(s, "registered") != NULL);
	CHECK_EQ_INT(s->ninstants >= 1, 1);
	int mark = 0;
	for (size_t i = 0; i < s->ninstants && i < 64; i++)
		mark += !strcmp(s->instants[i], "checkpoint");
	CHECK_EQ_INT(mark, 1);
	/* nvtxNameCudaStream names the stream track; kernels are on it. */
	t = track_of(s, "busy(float*, int)");
	CHECK(t && !strcmp(t->name, "compute (stream 13)"));
	int ender = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		ender += s->tracks[i].t.kind == CUPTRACE_TRACK_THREAD &&
		         !strcmp(s->tracks[i].name, "ender");
	CHECK_EQ_INT(ender, 0); /* the ender thread made no CUDA call: no track of its own */
	r_destroy(&s->base);
}

static void test_memory(void)
{
	struct rec_sink *s = replay("memory.cupti", 0);
	check_invariants(s);
	/* Device memory in use, in MiB: +64, +32, -64, +16 (pool), -16, -32. */
	static const int64_t want[] = {64, 96, 32, 48, 32, 0};
	CHECK_EQ_INT(s->ncounters, 6);
	for (size_t i = 0; i < 6 && i < s->ncounters; i++)
		CHECK_EQ_INT(s->counters[i], want[i] * 1024 * 1024);
	size_t dev_alloc = 0, pinned = 0, managed = 0, pool = 0;
	for (size_t i = 0; i < s->ninstants && i < 64; i++) {
		dev_alloc += !strcmp(s->instants[i], "alloc device");
		pinned += !strncmp(s->instants[i], "alloc pinned", 12) ||
		          !strncmp(s->instants[i], "free pinned", 11);
		managed += !strncmp(s->instants[i], "alloc managed", 13) ||
		           !strncmp(s->instants[i], "free managed", 12);
		pool += !strncmp(s->instants[i], "pool ", 5);
	}
	CHECK_EQ_INT(dev_alloc, 3);
	CHECK_EQ_INT(pinned, 2);
	CHECK_EQ_INT(managed, 2);
	CHECK(pool >= 1);
	r_destroy(&s->base);
}

static void quiet(enum cuptrace_log_level level, const char *msg)
{
}

/* Corrupted captures: every replay ends in a clean result or a clean error, never a crash
 * (the sanitizers watch this run). */
static void test_fuzzed_captures(void)
{
	static const char *const caps[] = {"vector_add.cupti", "nvtx.cupti", "graphs.cupti",
	                                   "memory.cupti"};
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	const char *tmp = getenv("CUPTRACE_TMP");
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int errors = 0, ok = 0;
	cuptrace_log_fn old = cuptrace_log_set(quiet); /* hundreds of expected error messages */
	for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		char path[1024], out[1024];
		snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", caps[c]);
		snprintf(out, sizeof(out), "%s/fuzz.cupti", tmp ? tmp : "/tmp");
		FILE *f = fopen(path, "rb");
		CHECK(f != NULL);
		if (!f)
			continue;
		uint8_t *orig = malloc(1 << 20);
		size_t n = fread(orig, 1, 1 << 20, f);
		fclose(f);
		uint8_t *buf = malloc(n);
		for (int round = 0; round < 60; round++) {
			memcpy(buf, orig, n);
			int flips = 1 + round % 8;
			for (int k = 0; k < flips; k++) {
				rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
				size_t at = 16 + (size_t)(rng % (n - 16));
				buf[at] = round % 3 ? (uint8_t)(rng >> 32) : 0xFF;
			}
			size_t len = round % 5 == 4 ? 16 + (size_t)(rng % (n - 16)) : n;
			FILE *o = fopen(out, "wb");
			fwrite(buf, 1, len, o);
			fclose(o);
			struct rec_sink *s = rec_sink_new();
			int r = cuptrace_read_trace(out, &s->base, round & 1);
			if (r)
				errors++;
			else
				ok++;
			for (size_t i = 0; i < s->nslices; i++)
				CHECK(s->slices[i].dur >= 0);
			r_destroy(&s->base);
		}
		free(buf);
		free(orig);
	}
	cuptrace_log_set(old);
	CHECK(ok > 0 && errors > 0 && ok + errors == 240);
	unlink(getenv("CUPTRACE_TMP") ? "" : "/tmp/fuzz.cupti");
}

/* Captured on a machine with two H200s. */
static void test_two_gpus(void)
{
	struct rec_sink *s = replay("multi_gpu_2gpu.cupti", 0);
	check_invariants(s);
	int groups = 0;
	for (size_t i = 0; i < s->ntracks; i++)
		if (s->tracks[i].t.kind == CUPTRACE_TRACK_GROUP)
			groups += !strcmp(s->tracks[i].name, "GPU 0: NVIDIA H200") ||
			          !strcmp(s->tracks[i].name, "GPU 1: NVIDIA H200");
	CHECK_EQ_INT(groups, 2);
	CHECK_EQ_INT(count(s, "kernel", "fill"), 4);
	CHECK_EQ_INT(count(s, "memset", NULL), 2);
	CHECK_EQ_INT(count(s, "memcpy", "Memcpy PtoP"), 1);
	/* Kernels of each GPU are on a stream under that GPU's group. */
	size_t per_gpu[2] = {0, 0};
	for (size_t i = 0; i < s->nslices; i++) {
		if (strcmp(s->slices[i].cat, "kernel"))
			continue;
		struct rtrack *t = find_track(s, s->slices[i].track);
		struct rtrack *g = t ? find_track(s, t->t.parent_uuid) : NULL;
		if (g && !strncmp(g->name, "GPU ", 4))
			per_gpu[g->name[4] == '1']++;
	}
	CHECK_EQ_INT(per_gpu[0], 2);
	CHECK_EQ_INT(per_gpu[1], 2);
	r_destroy(&s->base);

	/* A peer copy without peer access: staged as two copies, both linked to the call. */
	s = replay("peer_copy_2gpu.cupti", 0);
	check_invariants(s);
	CHECK_EQ_INT(count(s, "memcpy", NULL), 6);
	struct rslice *peer = slice_named(s, "cudaMemcpyPeer");
	CHECK(peer && peer->nout == 2);
	CHECK_EQ_INT(meta_int(s, "gpu_activities_without_api_record"), 0);
	r_destroy(&s->base);
}

/* The GPUs a process used, told from those it saw (issue 41): DEVICE records come for every
 * visible GPU; a context, GPU work or an allocation on one means the process used it, module
 * globals CUPTI reports on another GPU (as a PyTorch rank on GPU 1 showed on GPU 0) do not. */
static void gpus_used(int with_work)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	CUpti_ActivityDevice5 d[3];
	CUpti_ActivityContext3 x;
	CUpti_ActivityMemory4 m[2];
	CUpti_ActivityKernel10 k;
	memset(d, 0, sizeof(d));
	memset(&x, 0, sizeof(x));
	memset(m, 0, sizeof(m));
	memset(&k, 0, sizeof(k));
	for (uint32_t i = 0; i < 3; i++) {
		d[i].kind = CUPTI_ACTIVITY_KIND_DEVICE;
		d[i].id = i;
		d[i].name = "NVIDIA H200";
	}
	x.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
	x.contextId = 1;
	x.deviceId = 2;
	for (int i = 0; i < 2; i++) {
		m[i].kind = CUPTI_ACTIVITY_KIND_MEMORY2;
		m[i].memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
		m[i].timestamp = 1500;
		m[i].bytes = 64;
	}
	m[0].memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC;
	m[0].deviceId = 0; /* a module global: not a use of GPU 0 */
	m[1].memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m[1].deviceId = 2;
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.deviceId = 1; /* work on GPU 1 with no context record: a capture that started late */
	k.contextId = 5;
	k.streamId = 7;
	k.start = 2000, k.end = 3000;
	k.name = "k";
	const CUpti_Activity *b[] = {(CUpti_Activity *)&d[0], (CUpti_Activity *)&d[1],
	                             (CUpti_Activity *)&d[2], (CUpti_Activity *)&x,
	                             (CUpti_Activity *)&m[0], (CUpti_Activity *)&m[1],
	                             (CUpti_Activity *)&k};
	CHECK_EQ_INT(cuptrace_converter_add(c, b, with_work ? 7 : 3), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	CHECK_EQ_STR(rec_meta(s, "gpus_used"), with_work ? "1,2" : "");
	CHECK(rec_meta(s, "gpu0_uuid") && rec_meta(s, "gpu2_uuid")); /* every visible GPU */
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

static void test_gpus_used(void)
{
	gpus_used(1);
	gpus_used(0); /* saw three GPUs, used none */
	/* The real job: two GPUs seen by each rank, one used, a different one each. */
	for (int r = 0; r < 2; r++) {
		char name[32], want[4];
		snprintf(name, sizeof(name), "ddp2_rank%d.cupti", r);
		snprintf(want, sizeof(want), "%d", r);
		struct rec_sink *s = replay(name, 0);
		CHECK_EQ_STR(rec_meta(s, "gpus_used"), want);
		CHECK(rec_meta(s, "gpu0_uuid") && rec_meta(s, "gpu1_uuid"));
		r_destroy(&s->base);
	}
}

static size_t count_named(struct rec_sink *s, const char *name)
{
	size_t n = 0;
	for (size_t i = 0; i < s->nslices; i++)
		n += !strcmp(s->slices[i].name, name);
	return n;
}

/* A PyTorch capture recorded with every runtime call: converted by default, the trivial calls
 * are gone and nothing else is; with CUPTRACE_READ_RUNTIME_ALL they are all back. */
static void test_runtime_filter_capture(void)
{
	struct rec_sink *d = replay("torch_train.cupti", 0);
	struct rec_sink *a = replay("torch_train.cupti", CUPTRACE_READ_RUNTIME_ALL);
	static const char *const trivial[] = {"cudaGetDevice", "cudaGetLastError",
	                                      "cudaPeekAtLastError", "cudaStreamIsCapturing"};
	for (size_t i = 0; i < sizeof(trivial) / sizeof(trivial[0]); i++) {
		/* What stays is exactly what failed or took 50 us or more. */
		size_t worth = 0;
		for (size_t j = 0; j < a->nslices; j++)
			if (!strcmp(a->slices[j].name, trivial[i]) &&
			    (a->slices[j].dur >= 50000 ||
			     strstr(a->slices[j].args, "return_value")))
				worth++;
		CHECK_EQ_INT(count_named(d, trivial[i]), worth);
		CHECK(count_named(a, trivial[i]) > worth + 5);
	}
	/* Every runtime slice missing by default is one of a name the filter takes. */
	size_t all_rt = count(a, "cuda_runtime", NULL), def_rt = count(d, "cuda_runtime", NULL);
	size_t gone = 0;
	for (size_t i = 0; i < a->nslices; i++)
		if (!strcmp(a->slices[i].cat, "cuda_runtime") &&
		    count_named(d, a->slices[i].name) == 0)
			gone++;
	CHECK(gone > 0);
	CHECK(all_rt - def_rt >= gone);
	/* Kept: the slow ones (the first cudaDeviceGetStreamPriorityRange creates the context,
	 * about 100 ms) and everything that is not trivial. */
	CHECK_EQ_INT(count_named(d, "cudaDeviceGetStreamPriorityRange"), 1);
	CHECK_EQ_INT(count_named(d, "cudaLaunchKernel"), count_named(a, "cudaLaunchKernel"));
	CHECK_EQ_INT(count_named(d, "cudaMemcpyAsync"), count_named(a, "cudaMemcpyAsync"));
	CHECK_EQ_INT(count(d, "kernel", NULL), count(a, "kernel", NULL));
	CHECK_EQ_INT(count(d, "kernel", NULL), 153);
	r_destroy(&d->base);
	r_destroy(&a->base);
}

/* Hand-built: which trivial calls a conversion keeps. */
static void test_runtime_filter_rule(void)
{
	for (int all = 0; all < 2; all++) {
		struct rec_sink *s = rec_sink_new();
		struct cuptrace_trace_info info = {
		    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
		struct cuptrace_convert_opts o = {.sz = sizeof(o), .runtime_all = all};
		struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, &o);
		CUpti_ActivityAPI a[5];
		memset(a, 0, sizeof(a));
		for (int i = 0; i < 5; i++) {
			a[i].kind = CUPTI_ACTIVITY_KIND_RUNTIME;
			a[i].cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
			a[i].start = 2000 + 100000 * (uint64_t)i;
			a[i].end = a[i].start + 500;
			a[i].threadId = 42;
			a[i].correlationId = 20 + (uint32_t)i;
		}
		a[1].returnValue = 100;                                   /* failed: kept */
		a[2].end = a[2].start + 60000;                            /* 60 us: kept */
		a[3].cbid = CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020; /* the source decided */
		const CUpti_Activity *b[] = {(CUpti_Activity *)&a[0], (CUpti_Activity *)&a[1],
		                             (CUpti_Activity *)&a[2], (CUpti_Activity *)&a[3],
		                             (CUpti_Activity *)&a[4]};
		CHECK_EQ_INT(cuptrace_converter_add(c, b, 5), 0);
		CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
		CHECK_EQ_INT(count_named(s, "cudaGetDevice"), all ? 4 : 2);
		CHECK_EQ_INT(count_named(s, "cudaSetDevice"), 1);
		CHECK_EQ_INT(cuptrace_converter_counts(c)->runtime_filtered, all ? 0 : 2);
		int failed_shown = 0;
		for (size_t i = 0; i < s->nslices; i++)
			failed_shown |= !strcmp(s->slices[i].name, "cudaGetDevice") &&
			                strstr(s->slices[i].args, "return_value=100;") != NULL;
		CHECK(failed_shown);
		cuptrace_converter_free(c);
		r_destroy(&s->base);
	}
}

/* PyTorch's NVTX op names become clean slice names with their numbers as arguments; other
 * NVTX names stay as they are. */
static void test_pytorch_op_ranges(void)
{
	struct rec_sink *s = rec_sink_new();
	struct cuptrace_trace_info info = {
	    .pid = 42, .process_name = "p", .start_boottime_ns = 1000};
	struct cuptrace_converter *c = cuptrace_converter_new(&s->base, &info, NULL);
	static const char *const names[] = {
	    "step 1", "aten::mm, seq = 3, op_id = 17",
	    "aten::add, seq = 4, op_id = 18, sizes = [[2], [2], []], input_op_ids = [(17, 0)]",
	    "aten::mm, seq = 5, op_id = 19"};
	CUpti_ActivityMarker2 m[8];
	memset(m, 0, sizeof(m));
	/* step 1 [2000, 9000) around three ops in a row. */
	for (int i = 0; i < 4; i++) {
		m[2 * i].kind = m[2 * i + 1].kind = CUPTI_ACTIVITY_KIND_MARKER;
		m[2 * i].objectKind = m[2 * i + 1].objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
		m[2 * i].objectId.pt.threadId = m[2 * i + 1].objectId.pt.threadId = 42;
		m[2 * i].id = m[2 * i + 1].id = 100 + (uint32_t)i;
		m[2 * i].flags = CUPTI_ACTIVITY_FLAG_MARKER_START;
		m[2 * i + 1].flags = CUPTI_ACTIVITY_FLAG_MARKER_END;
		m[2 * i].name = names[i];
		m[2 * i].timestamp = i ? 3000 + 2000 * (uint64_t)(i - 1) : 2000;
		m[2 * i + 1].timestamp = i ? m[2 * i].timestamp + 1000 : 9000;
	}
	const CUpti_Activity *b[] = {(CUpti_Activity *)&m[0], (CUpti_Activity *)&m[2],
	                             (CUpti_Activity *)&m[3], (CUpti_Activity *)&m[4],
	                             (CUpti_Activity *)&m[5], (CUpti_Activity *)&m[6],
	                             (CUpti_Activity *)&m[7], (CUpti_Activity *)&m[1]};
	CHECK_EQ_INT(cuptrace_converter_add(c, b, 8), 0);
	CHECK_EQ_INT(cuptrace_converter_finish(c), 0);
	check_invariants(s);
	CHECK_EQ_INT(count_named(s, "step 1"), 1);
	CHECK_EQ_INT(count_named(s, "aten::mm"), 2);
	CHECK_EQ_INT(count_named(s, "aten::add"), 1);
	CHECK_EQ_INT(count(s, NULL, "aten::mm,"), 0);
	CHECK_EQ_INT(cuptrace_converter_counts(c)->pytorch_ops, 3);
	for (size_t i = 0; i < s->nslices; i++) {
		struct rslice *r = &s->slices[i];
		if (!strcmp(r->name, "aten::mm")) /* no op id without the input op ids */
			CHECK(!strcmp(r->args, "seq=3;") || !strcmp(r->args, "seq=5;"));
		if (!strcmp(r->name, "aten::add"))
			CHECK_EQ_STR(r->args, "seq=4;op_id=18;input_shapes=[[2], [2], []];"
			                      "input_op_ids=[(17, 0)];");
		if (!strcmp(r->name, "step 1"))
			CHECK_EQ_STR(r->args, "");
	}
	cuptrace_converter_free(c);
	r_destroy(&s->base);
}

/* --driver work (the default) keeps every driver call that a record names by its correlation id
 * (convert_records.c's driver_work): on every capture in tests/data, recorded with every driver
 * call, each driver API record named by a GPU, synchronization, event, memory or stream record
 * must be one that is kept (unless --driver user left it out as well: the runtime's own calls).
 * And the getters and context calls it is there to leave out are. */
extern const char *const cuptrace_driver_cbid_names[];
extern const unsigned cuptrace_driver_cbid_names_len;

struct linked {
	uint32_t *corr;
	size_t n, cap;
	uint32_t *drv_cbid, *drv_corr;
	size_t nd, capd, capd2;
};

static int linked_records(void *ctx, const CUpti_Activity *const *recs, size_t n)
{
	struct linked *l = ctx;
	for (size_t i = 0; i < n; i++) {
		int64_t t;
		uint32_t corr = 0;
		if (recs[i]->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
			const CUpti_ActivityAPI *a = (const void *)recs[i];
			if (CUPTRACE_GROW(l->drv_cbid, l->capd, l->nd + 1) ||
			    CUPTRACE_GROW(l->drv_corr, l->capd2, l->nd + 1))
				return -1;
			l->drv_cbid[l->nd] = a->cbid;
			l->drv_corr[l->nd++] = a->correlationId;
			continue;
		}
		if (recs[i]->kind == CUPTI_ACTIVITY_KIND_RUNTIME)
			continue;
		if (recs[i]->kind == CUPTI_ACTIVITY_KIND_STREAM)
			corr = ((const CUpti_ActivityStream *)(const void *)recs[i])->correlationId;
		else
			cuptrace_wrecord_place(recs[i], &t, &corr);
		if (!corr)
			continue;
		if (CUPTRACE_GROW(l->corr, l->cap, l->n + 1))
			return -1;
		l->corr[l->n++] = corr;
	}
	return 0;
}

static int cmp_corr(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static uint32_t driver_cbid(const char *name)
{
	for (uint32_t i = 0; i < cuptrace_driver_cbid_names_len; i++)
		if (cuptrace_driver_cbid_names[i] && !strcmp(cuptrace_driver_cbid_names[i], name))
			return i;
	return 0;
}

static void test_driver_work_table(void)
{
	static const char *const kept[] = {
	    "cuLaunchKernel",    "cuLaunchKernelEx",    "cuMemcpyHtoD_v2",    "cuMemcpyAsync",
	    "cuMemsetD32Async",  "cuGraphLaunch",       "cuMemAlloc_v2",      "cuMemFree_v2",
	    "cuMemAllocAsync",   "cuEventRecord",       "cuEventSynchronize", "cuEventQuery",
	    "cuStreamWaitEvent", "cuStreamSynchronize", "cuStreamQuery",      "cuCtxSynchronize",
	    "cuStreamCreate",    "cuModuleLoadData"};
	static const char *const left_out[] = {
	    "cuCtxGetCurrent",           "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2",
	    "cuStreamGetCaptureInfo_v2", "cuFuncGetAttribute",  "cuFuncSetAttribute",
	    "cuPointerGetAttribute",     "cuGetProcAddress_v2", "cuDeviceGet",
	    "cuDeviceGetCount",          "cuMemGetInfo_v2",     "cuEventCreate",
	    "cuEventDestroy_v2",         "cuModuleGetFunction"};
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		uint32_t id = driver_cbid(kept[i]);
		CHECK(id != 0);
		if (!cuptrace_driver_cbid_is_work(id))
			fprintf(stderr, "not kept: %s\n", kept[i]);
		CHECK(cuptrace_driver_cbid_is_work(id));
	}
	for (size_t i = 0; i < sizeof(left_out) / sizeof(left_out[0]); i++) {
		uint32_t id = driver_cbid(left_out[i]);
		CHECK(id != 0);
		if (cuptrace_driver_cbid_is_work(id))
			fprintf(stderr, "kept: %s\n", left_out[i]);
		CHECK(!cuptrace_driver_cbid_is_work(id));
	}
	const char *dir = getenv("CUPTRACE_TEST_DATA");
	DIR *d = opendir(dir ? dir : "tests/data");
	CHECK(d != NULL);
	if (!d)
		return;
	size_t checked = 0, captures = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 6 || strcmp(e->d_name + len - 6, ".cupti"))
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir ? dir : "tests/data", e->d_name);
		struct cuptrace_capture_reader *r = cuptrace_capture_reader_open(path);
		if (!r)
			continue;
		struct linked l = {0};
		struct cuptrace_capture_ops ops = {.ctx = &l, .records = linked_records};
		uint64_t cut = 0;
		const char *what = NULL;
		cuptrace_capture_replay(r, &ops, &cut, &what);
		cuptrace_capture_reader_close(r);
		captures++;
		qsort(l.corr, l.n, sizeof(*l.corr), cmp_corr);
		for (size_t i = 0; i < l.nd; i++) {
			/* The runtime's own calls were left out before (--driver user) too. */
			if (!bsearch(&l.drv_corr[i], l.corr, l.n, sizeof(*l.corr), cmp_corr) ||
			    cuptrace_driver_cbid_is_noise(l.drv_cbid[i]))
				continue;
			checked++;
			if (!cuptrace_driver_cbid_is_work(l.drv_cbid[i]))
				fprintf(stderr, "%s: %s names a record but is left out\n",
				        e->d_name,
				        l.drv_cbid[i] < cuptrace_driver_cbid_names_len
				            ? cuptrace_driver_cbid_names[l.drv_cbid[i]]
				            : "?");
			CHECK(cuptrace_driver_cbid_is_work(l.drv_cbid[i]));
		}
		free(l.corr);
		free(l.drv_cbid);
		free(l.drv_corr);
	}
	closedir(d);
	CHECK(captures >= 10);
	CHECK(checked >= 10); /* driver_api.cupti launches, copies and syncs through the driver */
	fprintf(stderr, "driver work table: %zu linked driver calls in %zu captures\n", checked,
	        captures);
}

TEST_MAIN(T(test_fuzzed_captures), T(test_two_gpus), T(test_gpus_used), T(test_nvtx),
          T(test_memory), T(test_vector_add), T(test_multi_stream), T(test_driver_api),
          T(test_graphs), T(test_all_captures_clean), T(test_torch), T(test_c_api),
          T(test_synthetic_order), T(test_stream_order_across_batches),
          T(test_stream_order_window_bound), T(test_runtime_filter_capture),
          T(test_runtime_filter_rule), T(test_pytorch_op_ranges), T(test_graph_trace),
          T(test_device_graphs), T(test_device_graph_tail), T(test_corr_wraparound),
          T(test_orphans_at_finish), T(test_pending_full), T(test_gpu_before_its_call),
          T(test_driver_work_table))
