/* A synthetic trace of a training-like loop, every number known by construction, fed into any
 * sink: for the diff and merge tests (tests/steps_trace.c writes it to a file; test_merge.c
 * feeds it straight to the merge), until real captures of such a loop are in tests/data.
 *
 * Process pid ("steps"), threads main (tid pid) and loader (tid pid + 1), "GPU 0: NVIDIA H200"
 * with Stream 7, Stream 13 and a "Device memory in use" counter. With lead > 0, a cudaMalloc on
 * main starts at start - lead. Step i starts at start + 10 us * i and lasts 10 us: on main an
 * NVTX range "step" holding an op "aten::mm" (seq argument), one cudaLaunchKernel per kernel
 * and a cudaMemcpyAsync, each with a flow to its GPU work; on Stream 7
 * "void gemm<float, 128>(float const*, float*, int)" (gemm ns) at +1 us, "relu(float*)"
 * (500 ns) at +7 us and, with softmax, "void softmax<float>(float*)" (800 ns) at +8.5 us; on
 * Stream 13 "Memcpy HtoD (Pageable -> Device)" (1 us, 4096 bytes) at +7.5 us; on loader a
 * cudaStreamSynchronize (3 us) at +2 us; a counter value at +50 ns and an instant "step done" at
 * +9.99 us. Per step: 9 slices (11 with softmax), 3 flows (4), 1 counter value, 1 instant; 7
 * tracks in all. Does not finish the sink. */
#ifndef CUPTRACE_TESTS_STEPS_H
#define CUPTRACE_TESTS_STEPS_H

#include "format/event.h"

struct steps_spec {
	int steps;
	int64_t gemm_ns, start_ns, lead_ns;
	int softmax;
	int32_t pid;
	const char *step_name; /* the step ranges' name; NULL: "step" */
};

#define STEPS_DEFAULT                                                                              \
	{                                                                                          \
		.steps = 3, .gemm_ns = 3000, .start_ns = 1000, .pid = 4242                         \
	}

enum { STEPS_PROC = 1, STEPS_MAIN, STEPS_LOADER, STEPS_GPU, STEPS_S7, STEPS_S13, STEPS_MEM };

static int steps_err;

static inline void steps_track(struct cuptrace_sink *s, struct cuptrace_track t)
{
	if (!steps_err)
		steps_err = s->ops->track(s, &t);
}

static inline void steps_slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur,
                               const char *cat, const char *name, const struct cuptrace_arg *args,
                               size_t nargs, uint64_t out, uint64_t in)
{
	struct cuptrace_slice e = {.track_uuid = trk,
	                           .ts = ts,
	                           .dur = dur,
	                           .name = name,
	                           .category = cat,
	                           .args = args,
	                           .nargs = nargs,
	                           .flows_out = &out,
	                           .nflows_out = out != 0,
	                           .flows_in = &in,
	                           .nflows_in = in != 0};
	if (!steps_err)
		steps_err = s->ops->slice(s, &e);
}

/* Returns 0 or the sink's first error. */
static inline int steps_feed(struct cuptrace_sink *s, const struct steps_spec *sp)
{
	static const struct cuptrace_meta meta[] = {
	    {.key = "gpu0", .s = "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB"},
	    {.key = "driver_version", .s = "580.159.04"},
	    {.key = "dropped_records_cupti", .is_int = 1, .i = 0},
	};
	static const char *const argv0[] = {"./steps"};
	int32_t pid = sp->pid;
	struct cuptrace_trace_info info = {.pid = pid,
	                                   .process_name = "steps",
	                                   .hostname = "node1",
	                                   .start_realtime_ns = 1763703060000000000ll,
	                                   .start_boottime_ns = 5000000000ll,
	                                   .trace_uuid_hi = (uint64_t)pid,
	                                   .trace_uuid_lo = (uint64_t)sp->steps,
	                                   .meta = meta,
	                                   .nmeta = 3};
	steps_err = s->ops->begin(s, &info);
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_PROC,
	                                       .kind = CUPTRACE_TRACK_PROCESS,
	                                       .pid = pid,
	                                       .name = "steps",
	                                       .cmdline = argv0,
	                                       .cmdline_len = 1});
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_MAIN,
	                                       .kind = CUPTRACE_TRACK_THREAD,
	                                       .parent_uuid = STEPS_PROC,
	                                       .pid = pid,
	                                       .tid = pid,
	                                       .name = "main"});
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_LOADER,
	                                       .kind = CUPTRACE_TRACK_THREAD,
	                                       .parent_uuid = STEPS_PROC,
	                                       .pid = pid,
	                                       .tid = pid + 1,
	                                       .name = "loader",
	                                       .sort_rank = 1});
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_GPU,
	                                       .kind = CUPTRACE_TRACK_GROUP,
	                                       .parent_uuid = STEPS_PROC,
	                                       .pid = pid,
	                                       .name = "GPU 0: NVIDIA H200",
	                                       .sort_rank = 100});
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_S7,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = STEPS_GPU,
	                                       .pid = pid,
	                                       .name = "Stream 7",
	                                       .sort_rank = 7});
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_S13,
	                                       .kind = CUPTRACE_TRACK_SLICES,
	                                       .parent_uuid = STEPS_GPU,
	                                       .pid = pid,
	                                       .name = "Stream 13",
	                                       .sort_rank = 13});
	steps_track(s, (struct cuptrace_track){.uuid = STEPS_MEM,
	                                       .kind = CUPTRACE_TRACK_COUNTER,
	                                       .parent_uuid = STEPS_GPU,
	                                       .pid = pid,
	                                       .name = "Device memory in use",
	                                       .unit = CUPTRACE_UNIT_BYTES,
	                                       .sort_rank = -1});
	if (sp->lead_ns > 0)
		steps_slice(s, STEPS_MAIN, sp->start_ns - sp->lead_ns, sp->lead_ns / 2,
		            "cuda_runtime", "cudaMalloc", NULL, 0, 0, 0);
	uint64_t flow = 1;
	for (int i = 0; i < sp->steps; i++) {
		int64_t t = sp->start_ns + 10000 * (int64_t)i;
		struct cuptrace_arg seq = {.key = "seq", .type = CUPTRACE_ARG_INT, .v.i = i};
		struct cuptrace_arg grid[] = {
		    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(128,1,1)"},
		    {.key = "registers", .type = CUPTRACE_ARG_INT, .v.i = 32}};
		struct cuptrace_arg bytes[] = {
		    {.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = 4096},
		    {.key = "kind", .type = CUPTRACE_ARG_STRING, .v.s = "HtoD"}};
		steps_slice(s, STEPS_MAIN, t, 10000, "nvtx", sp->step_name ? sp->step_name : "step",
		            NULL, 0, 0, 0);
		steps_slice(s, STEPS_MAIN, t + 100, 400, "nvtx", "aten::mm", &seq, 1, 0, 0);
		steps_slice(s, STEPS_MAIN, t + 200, 100, "cuda_runtime", "cudaLaunchKernel", NULL,
		            0, flow, 0);
		steps_slice(s, STEPS_S7, t + 1000, sp->gemm_ns, "kernel",
		            "void gemm<float, 128>(float const*, float*, int)", grid, 2, 0, flow++);
		steps_slice(s, STEPS_MAIN, t + 600, 100, "cuda_runtime", "cudaLaunchKernel", NULL,
		            0, flow, 0);
		steps_slice(s, STEPS_S7, t + 7000, 500, "kernel", "relu(float*)", grid, 2, 0,
		            flow++);
		steps_slice(s, STEPS_MAIN, t + 800, 150, "cuda_runtime", "cudaMemcpyAsync", NULL, 0,
		            flow, 0);
		steps_slice(s, STEPS_S13, t + 7500, 1000, "memcpy",
		            "Memcpy HtoD (Pageable -> Device)", bytes, 2, 0, flow++);
		if (sp->softmax) {
			steps_slice(s, STEPS_MAIN, t + 1000, 100, "cuda_runtime",
			            "cudaLaunchKernel", NULL, 0, flow, 0);
			steps_slice(s, STEPS_S7, t + 8500, 800, "kernel",
			            "void softmax<float>(float*)", grid, 2, 0, flow++);
		}
		steps_slice(s, STEPS_LOADER, t + 2000, 3000, "cuda_runtime",
		            "cudaStreamSynchronize", NULL, 0, 0, 0);
		struct cuptrace_counter c = {
		    .track_uuid = STEPS_MEM, .ts = t + 50, .i = 1048576 * (int64_t)(i + 1)};
		struct cuptrace_instant in = {.track_uuid = STEPS_MAIN,
		                              .ts = t + 9990,
		                              .name = "step done",
		                              .category = "nvtx"};
		if (!steps_err)
			steps_err = s->ops->counter(s, &c);
		if (!steps_err)
			steps_err = s->ops->instant(s, &in);
	}
	return steps_err;
}

#endif
