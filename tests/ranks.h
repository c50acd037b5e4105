/* A simulated distributed job, every clock known: the ranks' traces as `record` would write them
 * on machines whose clocks disagree, for the `merge --ranks` tests (tests/ranks_trace.c writes
 * one rank to a file; test_merge_ranks.c feeds the merge directly).
 *
 * True time T counts ns from the job's start. Machine h = rank / per_host; its clocks read
 *   BOOTTIME_h(T) = boot_h + T (1 + drift_h),  REALTIME_h(T) = R0 + skew_h + T (1 + drift_h)
 * (machine 0: no skew, no drift). Rank r starts at S_r = 1 ms + 1.7 ms (r mod 8), before the
 * first step however many ranks; everything in its
 * trace is at BOOTTIME_h(T) - BOOTTIME_h(S_r). Step i starts at T_i = 20 ms + i step_ns: on the
 * main thread an NVTX "step" range and two cudaLaunchKernel calls with flows to the kernels; on
 * Stream 7 "gemm" from T_i + 100 us for 2 ms + 300 us r (rank 1 twice as long on every 5th step:
 * a straggler); on Stream 13 "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" from the gemm's
 * end + 5 us until E_i = (the last gemm end) + 150 us + jitter_r,i, jitter in [0, jitter_ns)
 * (a rank cannot leave the all-reduce before the last one joined it). With p2p_ns, each step
 * also a pipeline's "ncclDevKernel_SendRecv(...)" on Stream 13 after it, which rank r leaves
 * p2p_ns r after rank 0 (the sender is done when its data left: not a symmetric collective).
 * With gpu_local, each rank sees every GPU of its machine in its metadata (gpuK, gpuK_uuid
 * "GPU-HHHHKKKK-...", gpuK_pci_bus_id) and names the one it used (gpus_used), as `record`
 * writes it. With kernels K, each step also K "layer" kernels of 5 us on Stream 9, 1 us apart
 * from the gemm's start, each launched from main inside the step's range (a real step's many
 * small kernels: the analyze streaming test's weight per rank). */
#ifndef CUPTRACE_TESTS_RANKS_H
#define CUPTRACE_TESTS_RANKS_H

#include <math.h>
#include <stdio.h>

#include "format/event.h"

#define RANKS_MAX_HOSTS 64
#define RANKS_MAX_GPUS  8                     /* per machine (per_host) */
#define RANKS_R0        1795000000000000000ll /* REALTIME at T = 0: 2026-11-18 */
#define RANKS_NCCL_NAME "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
#define RANKS_P2P_NAME  "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"

struct ranks_job {
	int world, per_host, steps;
	int64_t step_ns, jitter_ns;
	int64_t skew_ns[RANKS_MAX_HOSTS]; /* REALTIME error of each machine */
	double drift_ppm[RANKS_MAX_HOSTS];
	int64_t boot_ns[RANKS_MAX_HOSTS]; /* BOOTTIME at T = 0 */
	int gpu_local;  /* 1: each rank on "GPU <local rank>" (torchrun's way), else all on GPU 0 */
	int64_t p2p_ns; /* > 0: a SendRecv per step, rank r's ending p2p_ns r after rank 0's */
	int kernels;    /* "layer" kernels per step on Stream 9 (at most 256) */
};

#define RANKS_JOB_DEFAULT                                                                          \
	{                                                                                          \
		.world = 2, .per_host = 1, .steps = 40, .step_ns = 100000000, .jitter_ns = 3000,   \
		.boot_ns = {                                                                       \
			7000000000000ll,                                                           \
			3100000000000ll,                                                           \
			500000000000ll,                                                            \
			900000000000ll                                                             \
		}                                                                                  \
	}

static inline int ranks_host(const struct ranks_job *j, int r)
{
	return j->per_host > 0 ? r / j->per_host : r;
}

static inline int64_t ranks_start(int r)
{
	return 1000000 + 1700000 * (int64_t)(r % 8);
}

/* What machine h's clock reads at true time t, and rank r's relative time for t. */
static inline int64_t ranks_boot(const struct ranks_job *j, int h, int64_t t)
{
	return j->boot_ns[h] + (int64_t)llround((double)t * (1 + j->drift_ppm[h] * 1e-6));
}

static inline int64_t ranks_rel(const struct ranks_job *j, int r, int64_t t)
{
	int h = ranks_host(j, r);
	return ranks_boot(j, h, t) - ranks_boot(j, h, ranks_start(r));
}

/* Deterministic jitter in [0, jitter_ns). */
static inline int64_t ranks_jitter(const struct ranks_job *j, int r, int i)
{
	uint64_t x = (uint64_t)(r * 1000003 + i * 7919 + 12345) * 0x9e3779b97f4a7c15ull;
	x ^= x >> 29;
	return j->jitter_ns > 0 ? (int64_t)(x % (uint64_t)j->jitter_ns) : 0;
}

static inline int64_t ranks_gemm_ns(int r, int i)
{
	int64_t d = 2000000 + 300000 * (int64_t)r;
	return r == 1 && i % 5 == 4 ? 2 * d : d;
}

/* True times of rank r's step i: gemm start and end, all-reduce start and end. */
struct ranks_step {
	int64_t gemm, gemm_end, ar, ar_end;
	int64_t p2p, p2p_end; /* with p2p_ns */
};

static inline struct ranks_step ranks_truth(const struct ranks_job *j, int r, int i)
{
	int64_t t = 20000000 + (int64_t)i * j->step_ns + 100000, last = 0;
	for (int q = 0; q < j->world; q++)
		if (t + ranks_gemm_ns(q, i) > last)
			last = t + ranks_gemm_ns(q, i);
	struct ranks_step s = {t, t + ranks_gemm_ns(r, i), 0, 0, 0, 0};
	s.ar = s.gemm_end + 5000;
	s.ar_end = last + 150000 + ranks_jitter(j, r, i);
	s.p2p = s.ar_end + 5000;
	s.p2p_end = last + 150000 + j->jitter_ns + 30000 + j->p2p_ns * r;
	return s;
}

static int ranks_err;

static inline void ranks_slice(struct cuptrace_sink *s, uint64_t trk, int64_t ts, int64_t end,
                               const char *cat, const char *name, uint64_t out, uint64_t in)
{
	struct cuptrace_slice e = {.track_uuid = trk,
	                           .ts = ts,
	                           .dur = end - ts,
	                           .name = name,
	                           .category = cat,
	                           .flows_out = &out,
	                           .nflows_out = out != 0,
	                           .flows_in = &in,
	                           .nflows_in = in != 0};
	if (!ranks_err)
		ranks_err = s->ops->slice(s, &e);
}

/* Rank r's trace into s (not finished). Process pid 1000 + r, threads main and "NCCL proxy";
 * "GPU 0: NVIDIA H200" (GPU <local rank> with gpu_local) with Stream 7 and Stream 13. Per step:
 * 5 slices, 2 flows. */
static inline int ranks_feed(struct cuptrace_sink *s, const struct ranks_job *j, int r)
{
	int h = ranks_host(j, r);
	int64_t t0 = ranks_start(r);
	char host[32], boot[64], rank[16], local[16], world[16], gpu[48];
	char keys[RANKS_MAX_GPUS][3][24], vals[RANKS_MAX_GPUS][2][64], used[16];
	int lr = j->per_host > 0 ? r % j->per_host : 0;
	snprintf(host, sizeof(host), "node%d", h);
	snprintf(boot, sizeof(boot), "0b0070%02d-1111-2222-3333-444455556666", h);
	snprintf(rank, sizeof(rank), "%d", r);
	snprintf(local, sizeof(local), "%d", lr);
	snprintf(world, sizeof(world), "%d", j->world);
	snprintf(gpu, sizeof(gpu), "GPU %d: NVIDIA H200", j->gpu_local ? lr : 0);
	struct cuptrace_meta meta[9 + 3 * RANKS_MAX_GPUS + 1] = {
	    {.key = "rank", .s = rank},
	    {.key = "local_rank", .s = local},
	    {.key = "world_size", .s = world},
	    {.key = "launcher", .s = "torchrun"},
	    {.key = "hostname", .s = host},
	    {.key = "boot_id", .s = boot},
	    {.key = "nccl_version", .s = "2.27.5"},
	};
	size_t nmeta = 7;
	/* Every GPU of the machine with gpu_local; else the rank's own GPU 0 only. */
	int ngpu = j->gpu_local && j->per_host > 0 ? j->per_host : 1;
	for (int k = 0; k < ngpu && k < RANKS_MAX_GPUS; k++) {
		snprintf(keys[k][0], sizeof(keys[k][0]), "gpu%d", k);
		snprintf(keys[k][1], sizeof(keys[k][1]), "gpu%d_uuid", k);
		snprintf(keys[k][2], sizeof(keys[k][2]), "gpu%d_pci_bus_id", k);
		if (j->gpu_local)
			snprintf(vals[k][0], sizeof(vals[k][0]),
			         "GPU-%04d%04d-aaaa-bbbb-cccc-ddddeeeeffff", h, k);
		else
			snprintf(vals[k][0], sizeof(vals[k][0]),
			         "GPU-%08d-aaaa-bbbb-cccc-ddddeeeeffff", r);
		snprintf(vals[k][1], sizeof(vals[k][1]), "0000:%02x:00.0", 0x10 + k);
		meta[nmeta++] = (struct cuptrace_meta){
		    .key = keys[k][0],
		    .s = "NVIDIA H200, compute capability 9.0, 132 SMs, 139.8 GiB"};
		meta[nmeta++] = (struct cuptrace_meta){.key = keys[k][1], .s = vals[k][0]};
		if (j->gpu_local)
			meta[nmeta++] = (struct cuptrace_meta){.key = keys[k][2], .s = vals[k][1]};
	}
	if (j->gpu_local) {
		snprintf(used, sizeof(used), "%d", lr);
		meta[nmeta++] = (struct cuptrace_meta){.key = "gpus_used", .s = used};
	}
	int32_t pid = 1000 + r;
	struct cuptrace_trace_info info = {
	    .pid = pid,
	    .process_name = "python3",
	    .hostname = host,
	    .start_realtime_ns = RANKS_R0 + j->skew_ns[h] +
	                         (int64_t)llround((double)t0 * (1 + j->drift_ppm[h] * 1e-6)),
	    .start_boottime_ns = ranks_boot(j, h, t0),
	    .trace_uuid_hi = 77,
	    .trace_uuid_lo = (uint64_t)r + 1,
	    .meta = meta,
	    .nmeta = nmeta,
	};
	ranks_err = s->ops->begin(s, &info);
	const struct cuptrace_track tracks[] = {
	    {.uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = pid, .name = "python3"},
	    {.uuid = 2,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = 1,
	     .pid = pid,
	     .tid = pid,
	     .name = "main"},
	    {.uuid = 3,
	     .kind = CUPTRACE_TRACK_GROUP,
	     .parent_uuid = 1,
	     .pid = pid,
	     .name = gpu,
	     .sort_rank = 100},
	    {.uuid = 4,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = pid,
	     .name = "Stream 7",
	     .sort_rank = 7},
	    {.uuid = 5,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = pid,
	     .name = "Stream 13",
	     .sort_rank = 13},
	    {.uuid = 6,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = pid,
	     .name = "Stream 9",
	     .sort_rank = 9},
	};
	size_t ntracks = sizeof(tracks) / sizeof(tracks[0]) - (j->kernels > 0 ? 0 : 1);
	for (size_t k = 0; k < ntracks && !ranks_err; k++)
		ranks_err = s->ops->track(s, &tracks[k]);
	uint64_t flow = 1;
	for (int i = 0; i < j->steps; i++) {
		struct ranks_step t = ranks_truth(j, r, i);
		int64_t step = t.gemm - 100000;
		ranks_slice(s, 2, ranks_rel(j, r, step), ranks_rel(j, r, step + 90000), "nvtx",
		            "step", 0, 0);
		ranks_slice(s, 2, ranks_rel(j, r, step + 1000), ranks_rel(j, r, step + 6000),
		            "cuda_runtime", "cudaLaunchKernel", flow, 0);
		ranks_slice(s, 4, ranks_rel(j, r, t.gemm), ranks_rel(j, r, t.gemm_end), "kernel",
		            "gemm", 0, flow);
		flow++;
		ranks_slice(s, 2, ranks_rel(j, r, step + 8000), ranks_rel(j, r, step + 12000),
		            "cuda_runtime", "cudaLaunchKernel", flow, 0);
		ranks_slice(s, 5, ranks_rel(j, r, t.ar), ranks_rel(j, r, t.ar_end), "kernel",
		            RANKS_NCCL_NAME, 0, flow);
		flow++;
		if (j->p2p_ns > 0)
			ranks_slice(s, 5, ranks_rel(j, r, t.p2p), ranks_rel(j, r, t.p2p_end),
			            "kernel", RANKS_P2P_NAME, 0, 0);
		for (int k = 0; k < j->kernels && k < 256; k++) {
			int64_t l = step + 13000 + 350 * (int64_t)k, g = t.gemm + 6000 * (int64_t)k;
			ranks_slice(s, 2, ranks_rel(j, r, l), ranks_rel(j, r, l + 300),
			            "cuda_runtime", "cudaLaunchKernel", flow, 0);
			ranks_slice(s, 6, ranks_rel(j, r, g), ranks_rel(j, r, g + 5000), "kernel",
			            "layer", 0, flow);
			flow++;
		}
	}
	return ranks_err;
}

#endif
