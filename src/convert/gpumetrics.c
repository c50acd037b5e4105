/* GPU hardware metrics -> counter values: the known metrics, units, time alignment and gaps
 * (gpumetrics.h). */
#include "convert/gpumetrics.h"

#include <math.h>
#include <string.h>

/* Raw PM sampling names and how they are shown. The names are GH100's (H100, H200), as the
 * probe (tests/gpu/pm_probe.cu) found them; other chips share most of them. Byte counts are
 * divided by the sample's own length, so a GB/s value is exact even where a sample is shorter
 * or longer than the interval asked for. */
static const struct cuptrace_gm_metric known[] = {
    {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "SM active %", CUPTRACE_GM_AS_IS, 1, 1},
    {"sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed", "SM issue %",
     CUPTRACE_GM_AS_IS, 1, 2},
    {"tpc__warps_active_shader_cs_realtime.avg.pct_of_peak_sustained_elapsed", "Warp occupancy %",
     CUPTRACE_GM_AS_IS, 1, 3},
    {"sm__warps_active.avg.pct_of_peak_sustained_elapsed", "Warp occupancy %", CUPTRACE_GM_AS_IS, 1,
     3},
    {"sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
     "Tensor active %", CUPTRACE_GM_AS_IS, 1, 4},
    {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", "Tensor active %",
     CUPTRACE_GM_AS_IS, 1, 4},
    {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", "Tensor active %",
     CUPTRACE_GM_AS_IS, 1, 4},
    {"dram__bytes_read.sum", "DRAM read GB/s", CUPTRACE_GM_PER_SAMPLE, 1, 5},
    {"dram__bytes_write.sum", "DRAM write GB/s", CUPTRACE_GM_PER_SAMPLE, 1, 6},
    {"dram__bytes_read.sum.per_second", "DRAM read GB/s", CUPTRACE_GM_SCALE, 1e-9, 5},
    {"dram__bytes_write.sum.per_second", "DRAM write GB/s", CUPTRACE_GM_SCALE, 1e-9, 6},
    {"dramc__read_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM read % of peak",
     CUPTRACE_GM_AS_IS, 1, 5},
    {"dramc__write_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM write % of peak",
     CUPTRACE_GM_AS_IS, 1, 6},
    {"pcie__read_bytes.sum", "PCIe rx GB/s", CUPTRACE_GM_PER_SAMPLE, 1, 7},
    {"pcie__write_bytes.sum", "PCIe tx GB/s", CUPTRACE_GM_PER_SAMPLE, 1, 8},
    {"pcie__read_bytes.sum.per_second", "PCIe rx GB/s", CUPTRACE_GM_SCALE, 1e-9, 7},
    {"pcie__write_bytes.sum.per_second", "PCIe tx GB/s", CUPTRACE_GM_SCALE, 1e-9, 8},
    {"nvlrx__bytes.sum", "NVLink rx GB/s", CUPTRACE_GM_PER_SAMPLE, 1, 9},
    {"nvltx__bytes.sum", "NVLink tx GB/s", CUPTRACE_GM_PER_SAMPLE, 1, 10},
    {"nvlrx__bytes.sum.per_second", "NVLink rx GB/s", CUPTRACE_GM_SCALE, 1e-9, 9},
    {"nvltx__bytes.sum.per_second", "NVLink tx GB/s", CUPTRACE_GM_SCALE, 1e-9, 10},
};

static const char *const role_sm[] = {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed", NULL};
static const char *const role_issue[] = {
    "sm__inst_executed_realtime.avg.pct_of_peak_sustained_elapsed", NULL};
/* GH100 has no sm__warps_active in one pass with the two above; the TPC's realtime count of
 * compute warps is the same quantity for CUDA work (tests/gpu/pm_probe.sh). The tensor pipe's
 * realtime counter is GH100's; the HMMA ones, other chips'. */
static const char *const role_occ[] = {
    "tpc__warps_active_shader_cs_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_elapsed", NULL};
static const char *const role_tensor[] = {
    "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", NULL};
static const char *const role_dram_rd[] = {"dram__bytes_read.sum",
                                           "dram__bytes_read.sum.per_second", NULL};
static const char *const role_dram_wr[] = {"dram__bytes_write.sum",
                                           "dram__bytes_write.sum.per_second", NULL};
static const char *const role_pcie_rx[] = {"pcie__read_bytes.sum",
                                           "pcie__read_bytes.sum.per_second", NULL};
static const char *const role_pcie_tx[] = {"pcie__write_bytes.sum",
                                           "pcie__write_bytes.sum.per_second", NULL};
static const char *const role_nvl_rx[] = {"nvlrx__bytes.sum", "nvlrx__bytes.sum.per_second", NULL};
static const char *const role_nvl_tx[] = {"nvltx__bytes.sum", "nvltx__bytes.sum.per_second", NULL};

const struct cuptrace_gm_role cuptrace_gm_default_roles[] = {
    {"SM active", role_sm},
    {"SM issue", role_issue},
    {"warp occupancy", role_occ},
    {"tensor active", role_tensor},
    {"DRAM read", role_dram_rd},
    {"DRAM write", role_dram_wr},
    {"PCIe rx", role_pcie_rx},
    {"PCIe tx", role_pcie_tx},
    {"NVLink rx", role_nvl_rx},
    {"NVLink tx", role_nvl_tx},
    {NULL, NULL},
};

void cuptrace_gm_describe(const char *raw, struct cuptrace_gm_metric *out)
{
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (!strcmp(raw, known[i].raw)) {
			*out = known[i];
			return;
		}
	}
	*out = (struct cuptrace_gm_metric){raw, raw, CUPTRACE_GM_AS_IS, 1, 100};
}

double cuptrace_gm_value(const struct cuptrace_gm_metric *m, double raw, uint64_t len_ns)
{
	if (!isfinite(raw))
		return NAN;
	switch (m->conv) {
	case CUPTRACE_GM_SCALE:
		return raw * m->scale;
	case CUPTRACE_GM_PER_SAMPLE:
		return len_ns ? raw / (double)len_ns * m->scale : NAN;
	default:
		return raw;
	}
}

static int64_t abs64(int64_t v)
{
	return v < 0 ? -v : v;
}

enum cuptrace_gm_clock cuptrace_gm_pick_clock(uint64_t first_end, int64_t start_real,
                                              int64_t start_boot)
{
	int64_t e = (int64_t)(first_end & ((1ull << 62) - 1));
	int64_t dr = abs64(e - start_real), db = abs64(e - start_boot);
	int64_t best = db < dr ? db : dr;
	if (best > 10000000000ll)
		return CUPTRACE_GM_CLOCK_UNKNOWN;
	return db < dr ? CUPTRACE_GM_CLOCK_BOOTTIME : CUPTRACE_GM_CLOCK_REALTIME;
}

void cuptrace_gm_stream_init(struct cuptrace_gm_stream *s, int64_t offset_ns,
                             int64_t trace_start_ns, uint64_t interval_ns)
{
	memset(s, 0, sizeof(*s));
	s->offset_ns = offset_ns;
	s->trace_start_ns = trace_start_ns;
	s->gap_ns = interval_ns / 2 > 1000 ? interval_ns / 2 : 1000;
}

static int64_t rel(const struct cuptrace_gm_stream *s, uint64_t t)
{
	/* Sampler clocks are ns since some epoch, far below 2^62: no overflow in int64. */
	int64_t r = (int64_t)(t & ((1ull << 62) - 1)) - s->offset_ns - s->trace_start_ns;
	return r > 0 ? r : 0;
}

struct cuptrace_gm_points cuptrace_gm_stream_next(struct cuptrace_gm_stream *s, uint64_t start,
                                                  uint64_t end)
{
	struct cuptrace_gm_points p = {0};
	/* An empty or reversed sample, or one that starts before the previous one (samples come
	 * in the order taken): nothing sane to draw. */
	if (end <= start || (s->have_prev && start < s->prev_start) || start >= (1ull << 62)) {
		s->rejected++;
		return p;
	}
	if (s->have_prev && start > s->prev_end && start - s->prev_end >= s->gap_ns) {
		p.has_gap = 1;
		p.gap_ts = rel(s, s->prev_end);
		s->gaps++;
	}
	p.accepted = 1;
	p.ts = rel(s, start);
	s->prev_start = start;
	s->prev_end = end;
	s->have_prev = 1;
	s->samples++;
	return p;
}

int64_t cuptrace_gm_stream_end(const struct cuptrace_gm_stream *s)
{
	return s->have_prev ? rel(s, s->prev_end) : -1;
}
