/* Writes a synthetic trace of a training-like loop, every number known by construction, for the
 * diff and merge tests (until real captures of such a loop are in tests/data):
 *
 *   steps_trace OUT [--steps N] [--gemm NS] [--softmax] [--pid P] [--start NS]
 *
 * Process P ("steps"), threads main (tid P) and loader (tid P + 1), "GPU 0: NVIDIA H200" with
 * Stream 7 and Stream 13 and a "Device memory in use" counter. Step i starts at
 * start + 10 us * i and lasts 10 us; on main an NVTX range "step" holding an op "aten::mm"
 * (seq argument), one cudaLaunchKernel per kernel and a cudaMemcpyAsync, each with a flow to
 * its GPU work; on Stream 7 "void gemm<float, 128>(float const*, float*, int)" (--gemm ns,
 * default 3000) from +1 us, "relu(float*)" (500 ns) at +7 us, and with --softmax
 * "void softmax<float>(float*)" (800 ns) at +8.5 us; on Stream 13 "Memcpy HtoD (Pageable ->
 * Device)" (1 us, 4096 bytes) at +7.5 us; on loader a cudaStreamSynchronize. One counter value
 * and one instant ("step done") per step. Output format from OUT's name, as `convert` picks it.
 * Exit status 0, or 1 with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/formats.h"

enum { PROC = 1, MAIN, LOADER, GPU, S7, S13, MEM };

static int err;

static void track(struct cuptrace_sink *s, struct cuptrace_track t)
{
	if (!err)
		err = s->ops->track(s, &t);
}

static void slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t dur, const char *cat,
                  const char *name, const struct cuptrace_arg *args, size_t nargs, uint64_t out,
                  uint64_t in)
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
	if (!err)
		err = s->ops->slice(s, &e);
}

int main(int argc, char **argv)
{
	int steps = 3, softmax = 0;
	long long gemm = 3000, start = 1000, pid = 4242;
	const char *out = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--softmax"))
			softmax = 1;
		else if (!strcmp(argv[i], "--steps") && i + 1 < argc)
			steps = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gemm") && i + 1 < argc)
			gemm = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--start") && i + 1 < argc)
			start = atoll(argv[++i]);
		else if (!strcmp(argv[i], "--pid") && i + 1 < argc)
			pid = atoll(argv[++i]);
		else if (!out && argv[i][0] != '-')
			out = argv[i];
		else {
			fprintf(stderr, "steps_trace: bad argument %s\n", argv[i]);
			return 1;
		}
	}
	if (!out || steps < 1) {
		fprintf(stderr, "usage: steps_trace OUT [--steps N] [--gemm NS] [--softmax] "
		                "[--pid P] [--start NS]\n");
		return 1;
	}
	struct cuptrace_sink *s = cuptrace_sink_open(out, NULL, NULL);
	if (!s) {
		fprintf(stderr, "steps_trace: cannot write %s\n", out);
		return 1;
	}
	static const struct cuptrace_meta meta[] = {
	    {.key = "gpu0", .s = "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB"},
	    {.key = "driver_version", .s = "580.159.04"},
	    {.key = "dropped_records_cupti", .is_int = 1, .i = 0},
	};
	static const char *const argv0[] = {"./steps"};
	struct cuptrace_trace_info info = {.pid = (int32_t)pid,
	                                   .process_name = "steps",
	                                   .hostname = "node1",
	                                   .start_realtime_ns = 1763703060000000000ll,
	                                   .start_boottime_ns = 5000000000ll,
	                                   .trace_uuid_hi = (uint64_t)pid,
	                                   .trace_uuid_lo = (uint64_t)(steps * 1000 + softmax),
	                                   .meta = meta,
	                                   .nmeta = 3};
	err = s->ops->begin(s, &info);
	track(s, (struct cuptrace_track){.uuid = PROC,
	                                 .kind = CUPTRACE_TRACK_PROCESS,
	                                 .pid = (int32_t)pid,
	                                 .name = "steps",
	                                 .cmdline = argv0,
	                                 .cmdline_len = 1});
	track(s, (struct cuptrace_track){.uuid = MAIN,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = PROC,
	                                 .pid = (int32_t)pid,
	                                 .tid = pid,
	                                 .name = "main"});
	track(s, (struct cuptrace_track){.uuid = LOADER,
	                                 .kind = CUPTRACE_TRACK_THREAD,
	                                 .parent_uuid = PROC,
	                                 .pid = (int32_t)pid,
	                                 .tid = pid + 1,
	                                 .name = "loader",
	                                 .sort_rank = 1});
	track(s, (struct cuptrace_track){.uuid = GPU,
	                                 .kind = CUPTRACE_TRACK_GROUP,
	                                 .parent_uuid = PROC,
	                                 .pid = (int32_t)pid,
	                                 .name = "GPU 0: NVIDIA H200",
	                                 .sort_rank = 100});
	track(s, (struct cuptrace_track){.uuid = S7,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU,
	                                 .pid = (int32_t)pid,
	                                 .name = "Stream 7",
	                                 .sort_rank = 7});
	track(s, (struct cuptrace_track){.uuid = S13,
	                                 .kind = CUPTRACE_TRACK_SLICES,
	                                 .parent_uuid = GPU,
	                                 .pid = (int32_t)pid,
	                                 .name = "Stream 13",
	                                 .sort_rank = 13});
	track(s, (struct cuptrace_track){.uuid = MEM,
	                                 .kind = CUPTRACE_TRACK_COUNTER,
	                                 .parent_uuid = GPU,
	                                 .pid = (int32_t)pid,
	                                 .name = "Device memory in use",
	                                 .unit = CUPTRACE_UNIT_BYTES,
	                                 .sort_rank = -1});
	uint64_t flow = 1;
	for (int i = 0; i < steps && !err; i++) {
		int64_t t = start + 10000 * (int64_t)i;
		struct cuptrace_arg seq = {.key = "seq", .type = CUPTRACE_ARG_INT, .v.i = i};
		struct cuptrace_arg grid[] = {
		    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(128,1,1)"},
		    {.key = "registers", .type = CUPTRACE_ARG_INT, .v.i = 32}};
		struct cuptrace_arg bytes[] = {
		    {.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = 4096},
		    {.key = "kind", .type = CUPTRACE_ARG_STRING, .v.s = "HtoD"}};
		slice(s, MAIN, t, 10000, "nvtx", "step", NULL, 0, 0, 0);
		slice(s, MAIN, t + 100, 400, "nvtx", "aten::mm", &seq, 1, 0, 0);
		slice(s, MAIN, t + 200, 100, "cuda_runtime", "cudaLaunchKernel", NULL, 0, flow, 0);
		slice(s, S7, t + 1000, gemm, "kernel",
		      "void gemm<float, 128>(float const*, float*, int)", grid, 2, 0, flow);
		flow++;
		slice(s, MAIN, t + 600, 100, "cuda_runtime", "cudaLaunchKernel", NULL, 0, flow, 0);
		slice(s, S7, t + 7000, 500, "kernel", "relu(float*)", grid, 2, 0, flow);
		flow++;
		slice(s, MAIN, t + 800, 150, "cuda_runtime", "cudaMemcpyAsync", NULL, 0, flow, 0);
		slice(s, S13, t + 7500, 1000, "memcpy", "Memcpy HtoD (Pageable -> Device)", bytes,
		      2, 0, flow);
		flow++;
		if (softmax) {
			slice(s, MAIN, t + 1000, 100, "cuda_runtime", "cudaLaunchKernel", NULL, 0,
			      flow, 0);
			slice(s, S7, t + 8500, 800, "kernel", "void softmax<float>(float*)", grid,
			      2, 0, flow);
			flow++;
		}
		slice(s, LOADER, t + 2000, 3000, "cuda_runtime", "cudaStreamSynchronize", NULL, 0,
		      0, 0);
		struct cuptrace_counter c = {
		    .track_uuid = MEM, .ts = t + 50, .i = 1048576 * (i + 1)};
		struct cuptrace_instant in = {
		    .track_uuid = MAIN, .ts = t + 9990, .name = "step done", .category = "nvtx"};
		if (!err)
			err = s->ops->counter(s, &c);
		if (!err)
			err = s->ops->instant(s, &in);
	}
	int f = s->ops->finish(s);
	cuptrace_sink_destroy(s);
	if (err || f) {
		fprintf(stderr, "steps_trace: writing %s failed\n", out);
		remove(out);
		return 1;
	}
	return 0;
}
