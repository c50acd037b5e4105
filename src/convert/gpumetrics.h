/* GPU hardware metrics (CUPTI PM sampling) -> counter values: the pure part, no converter, no
 * CUPTI, no GPU, so that units, time alignment and gaps are unit-tested from recorded samples.
 *
 * A sample is what PM sampling reports for one interval of one GPU: [start, end) in the
 * sampler's clock and one double per configured metric, as CUPTI evaluated it. Each metric
 * becomes one counter track under the GPU; a sample's value is drawn from its start until the
 * next sample's start (a counter holds its value until the next). Where sampling stopped or
 * samples were lost (a gap between one sample's end and the next one's start), and after the
 * last sample, every track drops to 0, so no value is drawn over time nobody measured.
 *
 * Threading: none of its own; a stream is used by one thread. */
#ifndef CUPTRACE_CONVERT_GPUMETRICS_H
#define CUPTRACE_CONVERT_GPUMETRICS_H

#include <stddef.h>
#include <stdint.h>

/* How a raw value becomes the shown one. */
enum cuptrace_gm_conv {
	CUPTRACE_GM_AS_IS = 0,  /* shown as CUPTI evaluated it (%, ratios, unknown metrics) */
	CUPTRACE_GM_SCALE,      /* times scale (bytes per second -> GB/s: 1e-9) */
	CUPTRACE_GM_PER_SAMPLE, /* a count over the sample, divided by the sample's length in ns,
	                         * times scale (bytes per ns is GB/s: scale 1) */
};

/* What one raw metric is shown as. */
struct cuptrace_gm_metric {
	const char *raw;  /* CUPTI's name */
	const char *name; /* the counter track's name, unit included: "SM active %" */
	enum cuptrace_gm_conv conv;
	double scale;
	int rank; /* order of the tracks under the GPU, ascending */
};

/* The metric a known raw name is shown as; an unknown name is shown as itself, AS_IS, after the
 * known ones. out->raw is raw. */
void cuptrace_gm_describe(const char *raw, struct cuptrace_gm_metric *out);

/* The shown value of raw over a sample of len_ns; NaN where it has none (PER_SAMPLE over an
 * empty sample, a NaN or infinite raw value). */
double cuptrace_gm_value(const struct cuptrace_gm_metric *m, double raw, uint64_t len_ns);

/* The default set, for a timeline: per role, the raw names to try in order; the sampler takes
 * the first the GPU accepts in one pass with the roles before it, and leaves out a role with
 * none (a GPU without NVLink). NULL-terminated. */
struct cuptrace_gm_role {
	const char *role;
	const char *const *candidates; /* NULL-terminated */
};
extern const struct cuptrace_gm_role cuptrace_gm_default_roles[];

/* One GPU's sample stream: turns samples, in the order they were taken, into counter points
 * on the trace's time axis. trace_ns = sample_ts - offset_ns - trace_start_ns: offset_ns is the
 * sampler clock minus the trace clock (both ns), measured when sampling started. */
struct cuptrace_gm_stream {
	int64_t offset_ns, trace_start_ns;
	uint64_t gap_ns; /* a start this far past the previous end is a gap: about half an
	                  * interval, at least 1 us */
	uint64_t prev_start, prev_end;
	int have_prev;
	uint64_t samples, gaps, rejected; /* rejected: empty, reversed or out-of-order samples */
};
void cuptrace_gm_stream_init(struct cuptrace_gm_stream *s, int64_t offset_ns,
                             int64_t trace_start_ns, uint64_t interval_ns);

/* A sample's points, in time order: a 0 for every track at the end of the previous sample when
 * a gap came before this one (has_gap, gap_ts), then this sample's values at ts. */
struct cuptrace_gm_points {
	int accepted; /* 0: the sample was rejected, nothing to draw */
	int has_gap;
	int64_t gap_ts;
	int64_t ts;
};
/* Takes the next sample [start, end) (sampler clock). Relative times are clamped at 0. */
struct cuptrace_gm_points cuptrace_gm_stream_next(struct cuptrace_gm_stream *s, uint64_t start,
                                                  uint64_t end);
/* Where every track drops to 0 after the last sample; -1 if no sample was taken. */
int64_t cuptrace_gm_stream_end(const struct cuptrace_gm_stream *s);

/* The clock of a GPU's PM sample times. They follow CUPTI's clock (BOOTTIME under a BOOTTIME
 * timestamp callback, else CUPTI's default, REALTIME on an H100), and a GPU's first sample ends
 * just after the Start call (0.56 to 0.69 ms after it there): so the clock whose reading just
 * before Start is nearer to that end, if within 10 s; else UNKNOWN. */
enum cuptrace_gm_clock {
	CUPTRACE_GM_CLOCK_UNKNOWN,
	CUPTRACE_GM_CLOCK_REALTIME,
	CUPTRACE_GM_CLOCK_BOOTTIME,
};
enum cuptrace_gm_clock cuptrace_gm_pick_clock(uint64_t first_end, int64_t start_real,
                                              int64_t start_boot);

#endif
