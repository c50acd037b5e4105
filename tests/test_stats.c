/* Unit tests of the stats sink: a synthetic trace whose every number is known by hand, fed out of
 * time order, and the text and markdown summaries printed from it. */
#include "check.h"
#include "stats/stats.h"

#include <errno.h>
#include <time.h>

/* Track uuids of the synthetic trace. */
enum {
	PROC = 1,
	MAIN = 2,   /* thread: nested API calls and NVTX */
	WORKER = 3, /* thread: a deliberately partially overlapping pair (and one more) */
	GPU0 = 10,  /* group */
	STREAM7 = 11,
	STREAM13 = 12,
	STREAM7_LANE1 = 13,
	IDLE = 14,   /* a slice track under the GPU that never gets a slice */
	MEM = 20,    /* counter under the GPU */
	PCOUNT = 21, /* counter under the process */
	UNKNOWN = 555,
};

static void track(struct cuptrace_sink *s, struct cuptrace_track t)
{
	CHECK_EQ_INT(s->ops->track(s, &t), 0);
}

static void slice_f(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                    const char *name, const uint64_t *out, size_t nout, const uint64_t *in,
                    size_t nin)
{
	struct cuptrace_slice e = {
	    .track_uuid = trk,
	    .ts = ts,
	    .dur = dur,
	    .name = name,
	    .category = cat,
	    .flows_out = out,
	    .nflows_out = nout,
	    .flows_in = in,
	    .nflows_in = nin,
	};
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
}

static void slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                  const char *name)
{
	slice_f(s, trk, ts, dur, cat, name, NULL, 0, NULL, 0);
}

static void instant(struct cuptrace_sink *s, uint64_t trk, int64_t ts, const char *name)
{
	struct cuptrace_instant e = {.track_uuid = trk, .ts = ts, .name = name, .category = "x"};
	CHECK_EQ_INT(s->ops->instant(s, &e), 0);
}

static void counter(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t v)
{
	struct cuptrace_counter e = {.track_uuid = trk, .ts = ts, .i = v};
	CHECK_EQ_INT(s->ops->counter(s, &e), 0);
}

static const uint64_t F1[] = {1}, F2[] = {2}, F3[] = {3}, F4[] = {4}, F6[] = {6}, F7[] = {7},
                      F345[] = {3, 4, 5}, F99[] = {99}, F98_5[] = {98, 5};

/* The whole trace. Hand-computed results are asserted in test_numbers. */
static void feed(struct cuptrace_sink *s)
{
	static const char *const argv[] = {"./app", "--steps", "3"};
	/* As collect writes them: strings, some repeating the info's fields. */
	static const struct cuptrace_meta begin_meta[] = {
	    {.key = "pid", .s = "100"},
	    {.key = "start_realtime_ns", .s = "1763703060123456789"},
	    {.key = "driver_version", .s = "580.159.04"},
	    {.key = "cuda_driver_api_version", .s = "13.0"},
	    {.key = "cupti_version", .s = "130001"},
	    {.key = "dropped_records", .is_int = 1, .i = 0},
	    {.key = "records", .is_int = 1, .i = 100},
	};
	struct cuptrace_trace_info info = {
	    .pid = 100,
	    .process_name = "app",
	    .hostname = "node7",
	    .start_realtime_ns = 1763703060123456789ll, /* 2025-11-21 05:31:00.123456789 UTC */
	    .start_boottime_ns = 5000,
	    .meta = begin_meta,
	    .nmeta = sizeof(begin_meta) / sizeof(begin_meta[0]),
	};

	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	track(s, (struct cuptrace_track){.uuid = PROC,
	                                 .kind = CUPTRACE_TRACK_PROCESS,
	                                 .pid = 100,
	                                 .name = "app",
	                                 .cmdline = argv,
	                                 .cmdline_len = 3});
	track(s, (struct cuptrace_track){.uuid = MAIN,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .tid = 100,
	                                 .name = "main"});
	track(s, (struct cuptrace_track){.uuid = WORKER,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .tid = 101,
	                                 .name = "worker"});
	track(s, (struct cuptrace_track){.uuid = GPU0,
	                                 .kind = CUPTRACE_TRACK_GROUP,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .name = "GPU 0: NVIDIA H200"});
	/* Streams declared out of stream order; the summary lists them in order. */
	track(s, (struct cuptrace_track){.uuid = STREAM13,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU0,
	                                 .pid = 100,
	                                 .name = "Stream 13",
	                                 .sort_rank = 13});
	track(s, (struct cuptrace_track){.uuid = STREAM7,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU0,
	                                 .pid = 100,
	                                 .name = "Stream 7",
	                                 .sort_rank = 7});
	track(s, (struct cuptrace_track){.uuid = STREAM7_LANE1,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU0,
	                                 .pid = 100,
	                                 .name = "Stream 7",
	                                 .sort_rank = 7,
	                                 .lane = 1});
	track(s, (struct cuptrace_track){.uuid = IDLE,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU0,
	                                 .pid = 100,
	                                 .name = "Memory allocations",
	                                 .sort_rank = 1});
	track(s, (struct cuptrace_track){.uuid = MEM,
	                                 .kind = CUPTRACE_TRACK_COUNTER,
	                                 .parent_uuid = GPU0,
	                                 .pid = 100,
	                                 .name = "Memory in use",
	                                 .unit = CUPTRACE_UNIT_BYTES});
	track(s, (struct cuptrace_track){.uuid = PCOUNT,
	                                 .kind = CUPTRACE_TRACK_COUNTER,
	                                 .parent_uuid = PROC,
	                                 .pid = 100,
	                                 .name = "Queue depth"});

	/* GPU work first, as CUPTI delivers it: the flows' out ends come later. The first GPU slice
	 * has no flow (this once failed the sink with -ENOMEM). */
	slice(s, STREAM7_LANE1, 9000, 100, "memset", "Memset");
	slice_f(s, STREAM7, 12600, 1000, "memcpy", "Memcpy HtoD", NULL, 0, F6, 1);
	slice_f(s, STREAM7, 2600, 3000, "kernel", "gemm", NULL, 0, F1, 1);
	slice_f(s, STREAM13, 7000, 50, "kernel", "softmax", NULL, 0, F99, 1); /* dangling in */
	slice_f(s, STREAM13, 6000, 300, "kernel", "relu", NULL, 0, F4, 1);
	slice_f(s, STREAM7, 5600, 1000, "kernel", "gemm", NULL, 0, F3, 1);
	slice_f(s, STREAM13, 3500, 200, "kernel", "relu", NULL, 0, F2, 1);
	slice_f(s, STREAM7_LANE1, 5000, 3000, "kernel", "gemm", NULL, 0, F98_5, 2);
	instant(s, STREAM13, 8000, "sync");

	/* main: step [1000,10000) holds the API calls; F and M are top level. */
	slice_f(s, MAIN, 12000, 500, "cuda_runtime", "cudaMemcpyAsync", F6, 1, NULL, 0);
	slice_f(s, MAIN, 4000, 1000, "cuda_runtime", "cudaGraphLaunch", F345, 3, NULL, 0);
	slice(s, MAIN, 4100, 100, "cuda_driver", "cuGraphLaunch");
	slice(s, MAIN, 1000, 9000, "nvtx", "step");
	slice_f(s, MAIN, 3000, 400, "cuda_runtime", "cudaLaunchKernel", F2, 1, NULL, 0);
	slice_f(s, MAIN, 2000, 500, "cuda_runtime", "cudaLaunchKernel", F1, 1, NULL, 0);
	slice_f(s, MAIN, 10500, 200, "cuda_runtime", "cudaLaunchKernel", F7, 1, NULL, 0);
	slice(s, MAIN, 6000, 1000, "nvtx", "gemm"); /* same name as the kernel, other category */
	instant(s, MAIN, 1500, "marker");

	/* worker: G [1000,3000) and H [2000,4000) overlap partially; so do G and L [2900,3100).
	 * J, L and I are nested; K has no duration. */
	slice(s, WORKER, 3500, 100, "cuda_runtime", "cudaFree");               /* I */
	slice(s, WORKER, 2000, 2000, "cuda_runtime", "cudaEventRecord");       /* H */
	slice(s, WORKER, 2900, 200, "cuda_runtime", "cudaStreamQuery");        /* L */
	slice(s, WORKER, 1000, 2000, "cuda_runtime", "cudaStreamSynchronize"); /* G */
	slice(s, WORKER, 2500, 100, "cuda_runtime", "cudaMalloc");             /* J */
	slice(s, WORKER, 5000, 0, "cuda_runtime", "cudaGetDevice");            /* K */
	instant(s, WORKER, -50, "early");

	counter(s, MEM, 2600, 1 << 20);
	counter(s, MEM, 0, 0);
	counter(s, MEM, 13000, 0);
	counter(s, PCOUNT, 500, 3);

	/* As convert writes them: devices as they are seen, counts at the end. */
	static const struct cuptrace_meta later1[] = {
	    {.key = "gpu1", .s = "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB"},
	    {.key = "dropped_records", .is_int = 1, .i = 12},
	    {.key = "records", .is_int = 1, .i = 3456},
	};
	static const struct cuptrace_meta later2[] = {
	    {.key = "records", .is_int = 1, .i = 4000},
	    {.key = "gpu0", .s = "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB"},
	    {.key = "dropped_records_cuptrace", .is_int = 1, .i = 3},
	    {.key = "cuptrace_version", .s = "0.1.0"},
	};
	CHECK_EQ_INT(s->ops->meta(s, later1, 3), 0);
	CHECK_EQ_INT(s->ops->meta(s, later2, 4), 0);
}

static void run(struct cuptrace_stats *st)
{
	struct cuptrace_sink *s = cuptrace_stats_sink_new(st);
	CHECK(s != NULL);
	if (!s)
		return;
	feed(s);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
}

static const struct cuptrace_stats_track *trk(const struct cuptrace_stats *st, uint64_t uuid)
{
	for (size_t i = 0; i < st->ntrk; i++)
		if (st->trk[i].uuid == uuid)
			return &st->trk[i];
	return NULL;
}

static void check_track(const struct cuptrace_stats *st, uint64_t uuid, uint64_t slices,
                        uint64_t instants, uint64_t counters, int64_t first, int64_t last,
                        int64_t busy, uint64_t overlaps)
{
	const struct cuptrace_stats_track *t = trk(st, uuid);
	CHECK(t != NULL);
	if (!t)
		return;
	CHECK_EQ_INT(t->slices, slices);
	CHECK_EQ_INT(t->instants, instants);
	CHECK_EQ_INT(t->counters, counters);
	CHECK_EQ_INT(t->first_ts, first);
	CHECK_EQ_INT(t->last_end, last);
	CHECK_EQ_INT(t->busy_ns, busy);
	CHECK_EQ_INT(t->partial_overlaps, overlaps);
}

static void check_name(const struct cuptrace_stats *st, size_t i, const char *cat, const char *name,
                       uint64_t count, int64_t total, int64_t min, int64_t max, int on_gpu)
{
	CHECK(i < st->nnames);
	if (i >= st->nnames)
		return;
	const struct cuptrace_stats_name *n = &st->names[i];
	CHECK_EQ_STR(n->category, cat);
	CHECK_EQ_STR(n->name, name);
	CHECK_EQ_INT(n->count, count);
	CHECK_EQ_INT(n->total_ns, total);
	CHECK_EQ_INT(n->min_ns, min);
	CHECK_EQ_INT(n->max_ns, max);
	CHECK_EQ_INT(n->on_gpu, on_gpu);
}

static void check_meta(const struct cuptrace_stats *st, size_t i, const char *key, int is_int,
                       int64_t v, const char *s)
{
	CHECK(i < st->nmeta);
	if (i >= st->nmeta)
		return;
	CHECK_EQ_STR(st->meta[i].key, key);
	CHECK_EQ_INT(st->meta[i].is_int, is_int);
	if (is_int)
		CHECK_EQ_INT(st->meta[i].i, v);
	else
		CHECK_EQ_STR(st->meta[i].s, s);
}

static void test_numbers(void)
{
	struct cuptrace_stats st;
	run(&st);

	CHECK_EQ_INT(st.tracks, 10);
	CHECK_EQ_INT(st.ntrk, 10);
	CHECK_EQ_INT(st.slices, 22);
	CHECK_EQ_INT(st.instants, 3);
	CHECK_EQ_INT(st.counters, 4);
	/* 1..6 have both ends; 7 (out only), 98 and 99 (in only) dangle. */
	CHECK_EQ_INT(st.flows, 6);
	CHECK_EQ_INT(st.flows_dangling, 3);
	CHECK_EQ_INT(st.gpu_slices, 8);
	/* All but softmax (only 99) and the memset (no flow); the lane kernel counts once. */
	CHECK_EQ_INT(st.gpu_slices_with_flow_in, 6);
	/* The union of GPU0's kernels, copies and memsets: [2600,8000) (stream 7, its lane and
	 * stream 13 overlap there), [9000,9100), [12600,13600). */
	CHECK_EQ_INT(st.gpu_busy_ns, (8000 - 2600) + 100 + 1000);
	CHECK_EQ_INT(st.min_ts, -50);
	CHECK_EQ_INT(st.max_ts, 13600); /* the memcpy's end, after the last counter at 13000 */
	CHECK_EQ_INT(st.negative_ts, 1);
	CHECK_EQ_INT(st.negative_dur, 0);
	CHECK_EQ_INT(st.unknown_track_events, 0);

	/* Declaration order, and what each declaration said. */
	static const uint64_t order[] = {PROC,    MAIN,          WORKER, GPU0, STREAM13,
	                                 STREAM7, STREAM7_LANE1, IDLE,   MEM,  PCOUNT};
	for (size_t i = 0; i < 10 && i < st.ntrk; i++)
		CHECK_EQ_INT(st.trk[i].uuid, order[i]);
	const struct cuptrace_stats_track *t = trk(&st, PROC);
	if (t) {
		CHECK_EQ_INT(t->kind, CUPTRACE_TRACK_PROCESS);
		CHECK_EQ_INT(t->parent_uuid, 0);
		CHECK_EQ_INT(t->group_uuid, 0);
		CHECK_EQ_STR(t->name, "app");
		CHECK_EQ_STR(t->cmdline, "./app --steps 3");
	}
	if ((t = trk(&st, WORKER))) {
		CHECK_EQ_INT(t->kind, CUPTRACE_TRACK_THREAD);
		CHECK_EQ_INT(t->parent_uuid, PROC);
		CHECK_EQ_INT(t->pid, 100);
		CHECK_EQ_INT(t->tid, 101);
		CHECK_EQ_STR(t->name, "worker");
		CHECK(t->cmdline == NULL);
	}
	if ((t = trk(&st, GPU0))) {
		CHECK_EQ_INT(t->kind, CUPTRACE_TRACK_GROUP);
		CHECK_EQ_INT(t->group_uuid, 0);
	}
	if ((t = trk(&st, STREAM7_LANE1))) {
		CHECK_EQ_INT(t->kind, CUPTRACE_TRACK_SLICES);
		CHECK_EQ_INT(t->parent_uuid, GPU0);
		CHECK_EQ_INT(t->group_uuid, GPU0);
		CHECK_EQ_INT(t->lane, 1);
		CHECK_EQ_INT(t->sort_rank, 7);
		CHECK_EQ_STR(t->name, "Stream 7");
	}
	if ((t = trk(&st, MEM)))
		CHECK_EQ_INT(t->group_uuid, GPU0);
	if ((t = trk(&st, PCOUNT)))
		CHECK_EQ_INT(t->group_uuid, 0);

	/* uuid, slices, instants, counters, first ts, last end, busy, partial overlaps */
	check_track(&st, PROC, 0, 0, 0, 0, 0, 0, 0);
	check_track(&st, GPU0, 0, 0, 0, 0, 0, (8000 - 2600) + 100 + 1000, 0);
	check_track(&st, IDLE, 0, 0, 0, 0, 0, 0, 0);
	/* Host tracks do no GPU work: no busy time. */
	check_track(&st, MAIN, 8, 1, 0, 1000, 12500, 0, 0);
	check_track(&st, WORKER, 6, 1, 0, -50, 5000, 0, 2);
	check_track(&st, STREAM7, 3, 0, 0, 2600, 13600, 3000 + 1000 + 1000, 0);
	check_track(&st, STREAM13, 3, 1, 0, 3500, 8000, 50 + 300 + 200, 0);
	check_track(&st, STREAM7_LANE1, 2, 0, 0, 5000, 9100, 3000 + 100, 0);
	check_track(&st, MEM, 0, 0, 3, 0, 13000, 0, 0);
	check_track(&st, PCOUNT, 0, 0, 1, 500, 500, 0, 0);

	/* Sorted by total desc, then count desc, category, name. */
	CHECK_EQ_INT(st.nnames, 17);
	size_t i = 0;
	check_name(&st, i++, "nvtx", "step", 1, 9000, 9000, 9000, 0);
	check_name(&st, i++, "kernel", "gemm", 3, 7000, 1000, 3000, 1);
	check_name(&st, i++, "cuda_runtime", "cudaEventRecord", 1, 2000, 2000, 2000, 0);
	check_name(&st, i++, "cuda_runtime", "cudaStreamSynchronize", 1, 2000, 2000, 2000, 0);
	check_name(&st, i++, "cuda_runtime", "cudaLaunchKernel", 3, 1100, 200, 500, 0);
	check_name(&st, i++, "cuda_runtime", "cudaGraphLaunch", 1, 1000, 1000, 1000, 0);
	check_name(&st, i++, "memcpy", "Memcpy HtoD", 1, 1000, 1000, 1000, 1);
	check_name(&st, i++, "nvtx", "gemm", 1, 1000, 1000, 1000, 0);
	check_name(&st, i++, "kernel", "relu", 2, 500, 200, 300, 1);
	check_name(&st, i++, "cuda_runtime", "cudaMemcpyAsync", 1, 500, 500, 500, 0);
	check_name(&st, i++, "cuda_runtime", "cudaStreamQuery", 1, 200, 200, 200, 0);
	check_name(&st, i++, "cuda_driver", "cuGraphLaunch", 1, 100, 100, 100, 0);
	check_name(&st, i++, "cuda_runtime", "cudaFree", 1, 100, 100, 100, 0);
	check_name(&st, i++, "cuda_runtime", "cudaMalloc", 1, 100, 100, 100, 0);
	check_name(&st, i++, "memset", "Memset", 1, 100, 100, 100, 1);
	check_name(&st, i++, "kernel", "softmax", 1, 50, 50, 50, 1);
	check_name(&st, i++, "cuda_runtime", "cudaGetDevice", 1, 0, 0, 0, 0);

	/* Synthesized first; later values replace earlier ones in place. */
	CHECK_EQ_INT(st.nmeta, 13);
	i = 0;
	check_meta(&st, i++, "pid", 0, 0, "100");
	check_meta(&st, i++, "process_name", 0, 0, "app");
	check_meta(&st, i++, "hostname", 0, 0, "node7");
	check_meta(&st, i++, "start_realtime_ns", 0, 0, "1763703060123456789");
	check_meta(&st, i++, "driver_version", 0, 0, "580.159.04");
	check_meta(&st, i++, "cuda_driver_api_version", 0, 0, "13.0");
	check_meta(&st, i++, "cupti_version", 0, 0, "130001");
	check_meta(&st, i++, "dropped_records", 1, 12, NULL);
	check_meta(&st, i++, "records", 1, 4000, NULL);
	check_meta(&st, i++, "gpu1", 0, 0,
	           "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB");
	check_meta(&st, i++, "gpu0", 0, 0,
	           "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB");
	check_meta(&st, i++, "dropped_records_cuptrace", 1, 3, NULL);
	check_meta(&st, i++, "cuptrace_version", 0, 0, "0.1.0");

	cuptrace_stats_free(&st);
	cuptrace_stats_free(&st); /* twice is fine */
	CHECK(st.trk == NULL && st.ntrk == 0 && st.meta == NULL);
}

/* The summary printed to a memory buffer. */
static char *print_to_string(const struct cuptrace_stats *st, int markdown)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (!f)
		return NULL;
	cuptrace_stats_print(st, f, markdown);
	fclose(f);
	return buf;
}

/* The whitespace-separated words of the first line that starts with prefix, joined by one
 * space: checks an aligned text row without depending on column widths. */
static char *words_of_line(const char *text, const char *prefix, char *out, size_t cap)
{
	size_t plen = strlen(prefix), n = 0;
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, prefix, plen))
			continue;
		/* A long value wraps onto lines indented under it: they belong to it. */
		for (const char *p = l; *p && n + 2 < cap; p++) {
			if (*p == '\n' && strncmp(p + 1, "  ", 2))
				break;
			if (*p != ' ' && *p != '\n')
				out[n++] = *p;
			else if (n && out[n - 1] != ' ')
				out[n++] = ' ';
		}
		while (n && out[n - 1] == ' ')
			n--;
		break;
	}
	out[n] = 0;
	return out;
}

#define CHECK_CONTAINS(text, needle)                                                               \
	do {                                                                                       \
		check_count++;                                                                     \
		if (!(text) || !strstr((text), (needle))) {                                        \
			check_failures++;                                                          \
			fprintf(stderr, "%s:%d: output lacks \"%s\"\n", __FILE__, __LINE__,        \
			        (needle));                                                         \
		}                                                                                  \
	} while (0)

static void test_print_markdown(void)
{
	struct cuptrace_stats st;
	run(&st);
	char *md = print_to_string(&st, 1);

	CHECK_CONTAINS(md, "### cuptrace stats\n");
	/* GPUs by number, though gpu1 came first. */
	CHECK_CONTAINS(md, "- **GPU 0:** NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB\n"
	                   "- **GPU 1:** NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB\n"
	                   "- **Driver:** 580.159.04\n");
	CHECK_CONTAINS(md, "- **CUDA:** 13.0\n");
	CHECK_CONTAINS(md, "- **CUPTI:** 130001\n");
	CHECK_CONTAINS(md, "- **Host:** node7\n");
	CHECK_CONTAINS(md, "- **Process:** app (pid 100)\n");
	CHECK_CONTAINS(md, "- **Command line:** `./app --steps 3`\n");
	CHECK_CONTAINS(md, "- **Start:** 2025-11-21 05:31:00.123456789 UTC\n");
	CHECK_CONTAINS(md, "- **Dropped records:** 15 (the trace is incomplete)\n");
	CHECK_CONTAINS(md, "- **records:** 4000\n");
	CHECK_CONTAINS(md, "- **dropped_records_cuptrace:** 3\n");
	CHECK(md && !strstr(md, "**pid:**") && !strstr(md, "**start_realtime_ns:**") &&
	      !strstr(md, "**gpu0:**") && !strstr(md, "**cuda_driver_api_version:**"));
	CHECK_CONTAINS(md, "- **cuptrace_version:** 0.1.0\n");
	CHECK_CONTAINS(md, "- **Time span:** 13.65 us (from -50 ns to 13.60 us)\n");
	CHECK_CONTAINS(md,
	               "- **Events:** 10 tracks, 22 slices (8 on GPU tracks, 6 with an incoming "
	               "flow), 3 instants, 4 counter values\n");
	CHECK_CONTAINS(md, "- **Flows:** 6 complete, 3 with one end only\n");
	CHECK_CONTAINS(md, "- **Problems:** negative timestamps: 1; partially overlapping slice "
	                   "pairs: 2\n");
	/* Totals in the unit that fits: nvtx 9000 + 1000, kernels 7000 + 500 + 50, the 11 calls
	 * 7000 ns. */
	CHECK_CONTAINS(md, "| Category | Slices | Total |\n|---|---:|---:|\n"
	                   "| nvtx | 2 | 10.00 us |\n| kernel | 6 | 7.550 us |\n"
	                   "| cuda_runtime | 11 | 7.000 us |\n");
	CHECK_CONTAINS(md, "| Name | Category | Count | Total | Avg | Max | % GPU work |\n"
	                   "|---|---|---:|---:|---:|---:|---:|\n"
	                   "| step | nvtx | 1 | 9.000 us | 9.000 us | 9.000 us |  |\n"
	                   "| gemm | kernel | 3 | 7.000 us | 2.333 us | 3.000 us | 80.9 |\n");
	/* % GPU work: of all GPU work summed, memset 100 + memcpy 1000 + gemm 7000 + softmax 50 +
	 * relu 500 = 8650 ns (gemm's three overlap on two lanes: a union would give it 107.7%). */
	CHECK_CONTAINS(md,
	               "| Memcpy HtoD | memcpy | 1 | 1.000 us | 1.000 us | 1.000 us | 11.6 |\n");
	CHECK_CONTAINS(md, "| relu | kernel | 2 | 500 ns | 250 ns | 300 ns | 5.8 |\n");
	CHECK_CONTAINS(md, "| cudaGetDevice | cuda_runtime | 1 | 0 ns | 0 ns | 0 ns |  |\n");
	/* Busy % of the GPU's window, its first work (gemm at 2600) to its last end (the memcpy,
	 * 13600): 11000 ns. Stream 7: 3000 + 1000 + 1000; lane 1: 3000 + 100; 13: 200 + 300 + 50.
	 */
	CHECK_CONTAINS(md, "| GPU | Track | Slices | Busy | Busy % |\n"
	                   "|---|---|---:|---:|---:|\n"
	                   "| GPU 0: NVIDIA H200 | Stream 7 | 3 | 5.000 us | 45.5 |\n"
	                   "| GPU 0: NVIDIA H200 | Stream 7 (lane 1) | 2 | 3.100 us | 28.2 |\n"
	                   "| GPU 0: NVIDIA H200 | Stream 13 | 3 | 550 ns | 5.0 |\n\n");
	CHECK(md && !strstr(md, "Memory allocations")); /* no slices: not a row */
	CHECK(md && !strstr(md, "0x"));                 /* no addresses */
	free(md);
	cuptrace_stats_free(&st);
}

static void test_print_text(void)
{
	struct cuptrace_stats st;
	char w[512];
	run(&st);
	char *txt = print_to_string(&st, 0);

	CHECK_CONTAINS(txt, "cuptrace stats\n");
	CHECK_EQ_STR(words_of_line(txt, "GPU 0:", w, sizeof(w)),
	             "GPU 0: NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB");
	CHECK_EQ_STR(words_of_line(txt, "Start:", w, sizeof(w)),
	             "Start: 2025-11-21 05:31:00.123456789 UTC");
	CHECK_EQ_STR(words_of_line(txt, "Command line:", w, sizeof(w)),
	             "Command line: ./app --steps 3");
	CHECK_EQ_STR(words_of_line(txt, "Dropped records:", w, sizeof(w)),
	             "Dropped records: 15 (the trace is incomplete)");
	CHECK_EQ_STR(words_of_line(txt, "Name ", w, sizeof(w)),
	             "Name Category Count Total Avg Max % GPU work");
	CHECK_EQ_STR(words_of_line(txt, "gemm ", w, sizeof(w)),
	             "gemm kernel 3 7.000 us 2.333 us 3.000 us 80.9");
	CHECK_EQ_STR(words_of_line(txt, "kernel ", w, sizeof(w)), "kernel 6 7.550 us");
	CHECK_EQ_STR(words_of_line(txt, "GPU 0: NVIDIA H200  Stream 7 (", w, sizeof(w)),
	             "GPU 0: NVIDIA H200 Stream 7 (lane 1) 2 3.100 us 28.2");
	/* Aligned: the Count column ends at the same offset on every row of the names table. */
	const char *head = strstr(txt ? txt : "", "Name ");
	const char *row = strstr(txt ? txt : "", "\ncudaStreamSynchronize ");
	CHECK(head && row);
	if (head && row) {
		const char *hc = strstr(head, "Count"), *rc = strstr(row, " 1 ");
		CHECK(hc && rc && (hc + 5) - head == (rc + 2) - (row + 1));
	}
	/* Other metadata last, aligned on its longest key. */
	CHECK_CONTAINS(txt, "\nOther metadata:\n"
	                    "dropped_records:          12\n"
	                    "records:                  4000\n"
	                    "dropped_records_cuptrace: 3\n"
	                    "cuptrace_version:         0.1.0\n");
	CHECK(txt && !strchr(txt, '|'));
	free(txt);
	cuptrace_stats_free(&st);
}

static void test_print_empty(void)
{
	struct cuptrace_stats st;
	memset(&st, 0, sizeof(st));
	char *txt = print_to_string(&st, 0), *md = print_to_string(&st, 1);
	CHECK_CONTAINS(txt, "no events");
	CHECK_CONTAINS(txt, "GPU:              not recorded\n");
	CHECK_CONTAINS(md, "No GPU tracks.");
	free(txt);
	free(md);
	cuptrace_stats_free(&st);

	/* A sink that saw nothing at all, not even begin(). */
	struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
	CHECK(s != NULL);
	if (s) {
		CHECK_EQ_INT(s->ops->finish(s), 0);
		CHECK_EQ_INT(s->ops->finish(s), -EINVAL); /* once only */
		cuptrace_sink_destroy(s);
	}
	CHECK_EQ_INT(st.tracks, 0);
	CHECK_EQ_INT(st.min_ts, 0);
	CHECK_EQ_INT(st.max_ts, 0);
	txt = print_to_string(&st, 1);
	CHECK_CONTAINS(txt, "No slices.");
	free(txt);
	cuptrace_stats_free(&st);
}

/* A trace that says what CUPTI did not record (graphs launched from the GPU, node by node)
 * has it in its header, beside the dropped records, in text and in Markdown; none, no line. */
static void test_print_not_recorded(void)
{
	struct cuptrace_meta m[] = {
	    {.key = "graphs_for_device_launch_unrecorded", .is_int = 1, .i = 2},
	    {.key = "dropped_records", .is_int = 1, .i = 0}};
	struct cuptrace_stats st;
	char w[512];
	memset(&st, 0, sizeof(st));
	st.meta = m, st.nmeta = 2;
	char *txt = print_to_string(&st, 0), *md = print_to_string(&st, 1);
	CHECK_EQ_STR(words_of_line(txt, "Not recorded:", w, sizeof(w)),
	             "Not recorded: what CUDA graphs launched from the GPU ran (2 instantiated for "
	             "it; node by node CUPTI records none of it, `record --cuda-graphs graph` "
	             "does)");
	CHECK_CONTAINS(md, "- **Not recorded:** what CUDA graphs launched from the GPU ran (2 ");
	free(txt);
	free(md);
	m[0].i = 0;
	txt = print_to_string(&st, 0);
	CHECK(txt && !strstr(txt, "Not recorded"));
	free(txt);
}

/* Contract violations from a foreign trace are counted, not fatal. */
static void test_bad_input(void)
{
	struct cuptrace_stats st;
	struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
	CHECK(s != NULL);
	if (!s)
		return;
	track(s, (struct cuptrace_track){.uuid = MAIN,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = PROC,
	                                 .name = "orphan"});
	slice(s, UNKNOWN, 10, 5, "cuda_runtime", "cudaFree");
	slice(s, MAIN, 100, -5, NULL, NULL);
	slice(s, MAIN, INT64_MAX - 1, 10, "c", "late"); /* the end saturates */
	instant(s, UNKNOWN, 7, "i");
	CHECK_EQ_INT(s->ops->finish(s), 0);
	CHECK_EQ_INT(st.slices, 3);
	CHECK_EQ_INT(st.instants, 1);
	CHECK_EQ_INT(st.unknown_track_events, 2);
	CHECK_EQ_INT(st.negative_dur, 1);
	CHECK_EQ_INT(st.min_ts, 7);
	CHECK_EQ_INT(st.max_ts, INT64_MAX);
	CHECK_EQ_INT(st.nmeta, 0);
	CHECK_EQ_INT(st.ntrk, 1);
	if (st.ntrk) {
		CHECK_EQ_INT(st.trk[0].slices, 2);
		CHECK_EQ_INT(st.trk[0].busy_ns, 0); /* a host track: no GPU work */
		CHECK_EQ_INT(st.trk[0].group_uuid, 0);
	}
	CHECK(st.nnames == 3 && !strcmp(st.names[2].name, "") && !strcmp(st.names[2].category, ""));
	cuptrace_sink_destroy(s);
	char *txt = print_to_string(&st, 0);
	CHECK_CONTAINS(txt,
	               "Problems:         negative durations: 1; events on undeclared tracks: 2\n");
	free(txt);
	cuptrace_stats_free(&st);

	/* Destroyed without finish: everything released (ASan checks). */
	s = cuptrace_stats_sink_new(&st);
	CHECK(s != NULL);
	if (s) {
		feed(s);
		cuptrace_sink_destroy(s);
	}
	CHECK(st.ntrk == 0 && st.meta == NULL);
}

/* Long names are cut at a UTF-8 boundary; control characters and '|' cannot break a table. */
static void test_print_names_cleaned(void)
{
	struct cuptrace_stats st;
	char longname[300];
	struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
	CHECK(s != NULL);
	if (!s)
		return;
	memset(longname, 'a', sizeof(longname));
	memcpy(longname + 59, "\xc3\xa9", 2); /* é straddles the 60-byte cut */
	longname[sizeof(longname) - 1] = 0;
	track(s, (struct cuptrace_track){.uuid = MAIN, .kind = CUPTRACE_TRACK_THREAD, .name = "t"});
	slice(s, MAIN, 0, 10, "c", longname);
	slice(s, MAIN, 20, 5, "c", "a|b\nc");
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	char *txt = print_to_string(&st, 0), *md = print_to_string(&st, 1);
	/* The name is shortened for the line to fit 100 columns: its start, "...", cut at a
	 * UTF-8 boundary (never inside the é). */
	const char *row = strstr(txt ? txt : "", "\naaaaaaaaaa");
	const char *dots = row ? strstr(row, "...") : NULL;
	const char *eol = row ? strchr(row + 1, '\n') : NULL;
	CHECK(row && dots && eol && dots < eol);
	CHECK(dots && (unsigned char)dots[-1] != 0xc3);
	CHECK(row && eol && eol - row - 1 <= 100);
	CHECK_CONTAINS(txt, "\na|b?c ");
	CHECK_CONTAINS(md, "| a\\|b?c | c |");
	free(txt);
	free(md);
	cuptrace_stats_free(&st);
}

/* Busy time and partial overlaps against a brute force over every pair, on random slices with
 * duplicates, zero durations and heavy overlap. */
static void test_sweep_random(void)
{
	enum { N = 400 };
	static int64_t ts[N], dur[N];
	uint64_t x = 12345;
	for (int round = 0; round < 20; round++) {
		struct cuptrace_stats st;
		struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
		CHECK(s != NULL);
		if (!s)
			return;
		track(s, (struct cuptrace_track){
		             .uuid = GPU0, .kind = CUPTRACE_TRACK_GROUP, .name = "GPU 0"});
		track(s, (struct cuptrace_track){.uuid = MAIN,
		                                 .kind = CUPTRACE_TRACK_SLICES,
		                                 .parent_uuid = GPU0,
		                                 .name = "Stream 7"});
		int spread = round < 10 ? 1000 : 100000;
		for (int i = 0; i < N; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			ts[i] = (int64_t)((x >> 33) % (uint64_t)spread);
			dur[i] = (int64_t)((x >> 13) % 300);
			if (i % 7 == 0)
				dur[i] = 0;
			if (i % 11 == 1) { /* an exact duplicate of the previous one */
				ts[i] = ts[i - 1];
				dur[i] = dur[i - 1];
			}
			slice(s, MAIN, ts[i], dur[i], "kernel", "n");
		}
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);

		/* Busy: the nanoseconds some slice covers, counted one by one. */
		static unsigned char covered[100000 + 300];
		int64_t busy = 0;
		memset(covered, 0, sizeof(covered));
		for (int i = 0; i < N; i++)
			for (int64_t t = ts[i]; t < ts[i] + dur[i]; t++)
				busy += !covered[t]++;
		uint64_t partial = 0;
		for (int i = 0; i < N; i++) {
			for (int j = 0; j < N; j++) {
				if (j > i && ((ts[i] < ts[j] && ts[j] < ts[i] + dur[i] &&
				               ts[i] + dur[i] < ts[j] + dur[j]) ||
				              (ts[j] < ts[i] && ts[i] < ts[j] + dur[j] &&
				               ts[j] + dur[j] < ts[i] + dur[i])))
					partial++;
			}
		}
		CHECK_EQ_INT(st.ntrk, 2);
		if (st.ntrk == 2) {
			CHECK_EQ_INT(st.trk[1].busy_ns, busy);
			CHECK_EQ_INT(st.trk[0].busy_ns, busy); /* the GPU: its one stream */
			CHECK_EQ_INT(st.trk[1].partial_overlaps, partial);
		}
		cuptrace_stats_free(&st);
	}
}

/* The JSON summary of the synthetic trace: the hand-computed numbers, keys in their places. */
static void test_print_json(void)
{
	struct cuptrace_stats st;
	char *buf = NULL;
	size_t len = 0;
	run(&st);
	FILE *f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ_INT(cuptrace_stats_print_json(&st, f), 0);
	fclose(f);
	CHECK(buf && len && strchr(buf, '\n') == buf + len - 1); /* one line */
	CHECK_CONTAINS(buf,
	               "{\"schema\":\"cuptrace-stats/1\",\"header\":{\"gpus\":[{\"key\":\"gpu0\",");
	CHECK_CONTAINS(buf, "\"driver\":\"580.159.04\",\"cuda\":\"13.0\",\"cupti\":\"130001\","
	                    "\"host\":\"node7\",\"process_name\":\"app\",\"pid\":\"100\","
	                    "\"command_line\":\"./app --steps 3\","
	                    "\"start_realtime_ns\":1763703060123456789,"
	                    "\"start_utc\":\"2025-11-21 05:31:00.123456789 UTC\","
	                    "\"dropped_records\":15,\"damage\":null}");
	CHECK_CONTAINS(buf, "\"records\":4000,");
	CHECK_CONTAINS(buf, "\"span\":{\"start_ns\":-50,\"end_ns\":13600,\"duration_ns\":13650}");
	CHECK_CONTAINS(buf, "\"events\":{\"tracks\":10,\"slices\":22,\"gpu_slices\":8,"
	                    "\"gpu_slices_with_flow_in\":6,\"instants\":3,\"counter_values\":4}");
	CHECK_CONTAINS(buf, "\"flows\":{\"complete\":6,\"one_end_only\":3}");
	CHECK_CONTAINS(buf, "\"partially_overlapping_slice_pairs\":2}");
	CHECK_CONTAINS(buf,
	               "\"categories\":[{\"category\":\"nvtx\",\"slices\":2,\"total_ns\":10000},"
	               "{\"category\":\"kernel\",\"slices\":6,\"total_ns\":7550}");
	CHECK_CONTAINS(buf, "\"names\":[{\"name\":\"step\",\"category\":\"nvtx\",\"count\":1,"
	                    "\"total_ns\":9000,\"avg_ns\":9000,\"min_ns\":9000,\"max_ns\":9000,"
	                    "\"gpu_share_pct\":null}");
	CHECK_CONTAINS(buf,
	               "{\"name\":\"relu\",\"category\":\"kernel\",\"count\":2,\"total_ns\":500,"
	               "\"avg_ns\":250,\"min_ns\":200,\"max_ns\":300,"
	               "\"gpu_share_pct\":5.780346820809249}"); /* 500 of 8650 */
	/* Every name, not only the top 20; the last one too. */
	CHECK_CONTAINS(buf,
	               "{\"name\":\"cudaGetDevice\",\"category\":\"cuda_runtime\",\"count\":1,");
	/* gpu_work_ns: memset 100 + memcpy 1000 + gemm 7000 + softmax 50 + relu 500. */
	CHECK_CONTAINS(buf, "\"gpu_busy_ns\":6500,\"gpu_work_ns\":8650,\"devices\":[{\"name\":"
	                    "\"GPU 0: NVIDIA H200\","
	                    "\"slices\":8,\"busy_ns\":6500}],");
	CHECK_CONTAINS(buf,
	               "\"gpu_tracks\":[{\"gpu\":\"GPU 0: NVIDIA H200\",\"track\":\"Stream 7\","
	               "\"lane\":0,\"slices\":3,\"busy_ns\":5000,");
	CHECK_CONTAINS(buf, "{\"gpu\":\"GPU 0: NVIDIA H200\",\"track\":\"Stream 7\",\"lane\":1,");
	free(buf);
	cuptrace_stats_free(&st);

	/* Nothing recorded: nulls, not made-up values. */
	memset(&st, 0, sizeof(st));
	buf = NULL;
	f = open_memstream(&buf, &len);
	CHECK(f != NULL);
	if (!f)
		return;
	CHECK_EQ_INT(cuptrace_stats_print_json(&st, f), 0);
	fclose(f);
	CHECK_CONTAINS(buf, "\"driver\":null,");
	CHECK_CONTAINS(buf, "\"command_line\":null,\"start_realtime_ns\":null,\"start_utc\":null,"
	                    "\"dropped_records\":null,\"damage\":null}");
	CHECK_CONTAINS(buf, "\"metadata\":{},\"span\":null,");
	CHECK_CONTAINS(buf, "\"names\":[],\"gpu_busy_ns\":0,\"gpu_work_ns\":0,\"devices\":[],"
	                    "\"gpu_tracks\":[]}");
	free(buf);
}

/* More than 20 names: the table shows the top 20 and says how many there are. */
static void test_print_top20(void)
{
	struct cuptrace_stats st;
	struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
	char name[32];
	CHECK(s != NULL);
	if (!s)
		return;
	track(s, (struct cuptrace_track){.uuid = MAIN, .kind = CUPTRACE_TRACK_THREAD, .name = "t"});
	for (int i = 1; i <= 25; i++) {
		snprintf(name, sizeof(name), "k%02d", i);
		slice(s, MAIN, i * 1000, i * 10, "c", name);
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	char *md = print_to_string(&st, 1);
	CHECK_CONTAINS(md, "#### Top 20 of 25 names by total time\n");
	CHECK_CONTAINS(md, "| k25 | c | 1 |");
	CHECK_CONTAINS(md, "| k06 | c | 1 |");
	CHECK(md && !strstr(md, "| k05 |"));
	free(md);
	cuptrace_stats_free(&st);
}

/* Many streams: 100,000 on one GPU and 10,000 GPUs of one stream each. Finding each stream's
 * GPU by a linear search over the tracks (the GPU-track table and per-device totals) or one pass
 * over the tracks per GPU (busy time) took seconds to minutes here; each is now O(n log n). The
 * summaries must be complete and finish in well under the limit (a linear run takes a fraction
 * of a second even under the sanitizers). */
static void test_many_streams(void)
{
	enum { NS = 100000, NG = 10000, G0 = 10, S0 = 1000000, H0 = 2000000, HS0 = 3000000 };
	struct cuptrace_stats st;
	struct cuptrace_sink *s = cuptrace_stats_sink_new(&st);
	char name[32];
	CHECK(s != NULL);
	if (!s)
		return;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	track(s, (struct cuptrace_track){.uuid = G0, .kind = CUPTRACE_TRACK_GROUP, .name = "G0"});
	for (int i = 0; i < NS; i++) {
		snprintf(name, sizeof(name), "s%d", i);
		track(s, (struct cuptrace_track){.uuid = S0 + (uint64_t)i,
		                                 .kind = CUPTRACE_TRACK_SLICES,
		                                 .parent_uuid = G0,
		                                 .name = name});
		slice(s, S0 + (uint64_t)i, (int64_t)i * 10, 5, "kernel", "k");
	}
	for (int g = 0; g < NG; g++) {
		snprintf(name, sizeof(name), "H%d", g);
		track(s, (struct cuptrace_track){
		             .uuid = H0 + (uint64_t)g, .kind = CUPTRACE_TRACK_GROUP, .name = name});
		track(s, (struct cuptrace_track){.uuid = HS0 + (uint64_t)g,
		                                 .kind = CUPTRACE_TRACK_SLICES,
		                                 .parent_uuid = H0 + (uint64_t)g,
		                                 .name = "s"});
		/* two overlapping kernels: 7 ns busy, not 10 */
		slice(s, HS0 + (uint64_t)g, (int64_t)g * 10, 5, "kernel", "k");
		slice(s, HS0 + (uint64_t)g, (int64_t)g * 10 + 2, 5, "kernel", "k");
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	/* the streams of G0 never overlap: 5 ns each */
	CHECK(st.gpu_busy_ns == (int64_t)NS * 5 + (int64_t)NG * 7);
	size_t groups = 0;
	for (size_t i = 0; i < st.ntrk; i++) {
		if (st.trk[i].kind != CUPTRACE_TRACK_GROUP)
			continue;
		groups++;
		CHECK(st.trk[i].busy_ns == (st.trk[i].uuid == G0 ? (int64_t)NS * 5 : 7));
	}
	CHECK(groups == NG + 1);
	char *txt = print_to_string(&st, 0);
	size_t rows_g0 = 0, rows_h = 0;
	for (const char *p = txt; p && *p;) {
		const char *nl = strchr(p, '\n');
		rows_g0 += !strncmp(p, "G0 ", 3);
		rows_h += p[0] == 'H' && p[1] >= '0' && p[1] <= '9';
		p = nl ? nl + 1 : p + strlen(p);
	}
	CHECK(rows_g0 == NS);
	CHECK(rows_h == NG);
	free(txt);
	char *js = NULL;
	size_t jlen = 0;
	FILE *f = open_memstream(&js, &jlen);
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ_INT(cuptrace_stats_print_json(&st, f), 0);
		fclose(f);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr, "many streams: %.2f s\n", secs);
	CHECK(secs < 10.0); /* quadratic: 6 s in Release, several times that here */
	free(js);
	cuptrace_stats_free(&st);
}

TEST_MAIN(T(test_numbers), T(test_print_markdown), T(test_print_text), T(test_print_empty),
          T(test_print_not_recorded), T(test_bad_input), T(test_print_names_cleaned),
          T(test_sweep_random), T(test_print_top20), T(test_print_json), T(test_many_streams))
