/* Putting the ranks of a distributed job on one time axis (`cuptrace merge --ranks`).
 *
 * Each rank's trace counts time from its own start, and knows that start on two clocks of its
 * machine: BOOTTIME and REALTIME. Three steps, each as far as the mode asks:
 *  1. ranks on the reference's machine (same boot id, or same host name where a trace has no
 *     boot id) share BOOTTIME: their start times' BOOTTIME difference places them exactly;
 *  2. other machines' ranks are placed through REALTIME, which is as good as the machines' time
 *     synchronisation (NTP: milliseconds; a bad one: seconds);
 *  3. then refined with the collectives: the k-th NCCL kernel of a given name ends at the same
 *     moment on every rank that runs it, up to the link latency, when it is symmetric
 *     (all-reduce, all-gather, reduce-scatter, all-to-all: no rank can finish before every rank
 *     contributed; common/nccl.h). Per machine, the differences between its ranks' ends and the
 *     reference machine's give the offset (their median) and, over a long enough run, a drift
 *     (a least-squares line, outliers dropped): the two machines' clocks may run at rates a few
 *     parts per million apart. The other collectives (broadcast, reduce, send/recv), whose root
 *     or sender may finish long before a late receiver, are used only where a machine shares no
 *     symmetric one with the reference's.
 * What is left is measured apart for the two kinds: the end spread of the symmetric
 * collectives says how well the ranks line up; that of the others says how the job behaved.
 * Matching by occurrence assumes that every rank's trace holds the job's collectives from the
 * first on (tracing started before the first collective everywhere), as `record` does.
 *
 * Threading: none; pure computation on what the caller probed. */
#ifndef CUPTRACE_MERGE_ALIGN_H
#define CUPTRACE_MERGE_ALIGN_H

#include <stddef.h>
#include <stdint.h>

enum cuptrace_align_mode {
	CUPTRACE_ALIGN_NONE =
	    0, /* every rank's earliest event at 0; file clocks kept as they are */
	CUPTRACE_ALIGN_REALTIME, /* steps 1 and 2 */
	CUPTRACE_ALIGN_NCCL,     /* steps 1, 2 and 3 (the default of --ranks) */
};

/* How a rank was placed. */
enum cuptrace_align_clock {
	CUPTRACE_CLOCK_REFERENCE = 0, /* the reference rank itself */
	CUPTRACE_CLOCK_BOOTTIME,      /* same machine as the reference */
	CUPTRACE_CLOCK_REALTIME,      /* another machine, wall clocks only */
	CUPTRACE_CLOCK_NCCL,          /* another machine, refined by collective ends */
	CUPTRACE_CLOCK_NONE,          /* --align none: first event at 0 */
};

/* One collective kernel of one rank: key says which (name and occurrence), end when it ended
 * (relative to the rank's start), symmetric what kind (cuptrace_nccl_symmetric: the same for
 * every occurrence of a name). */
struct cuptrace_align_coll {
	uint64_t key;
	int64_t end;
	int symmetric;
};

struct cuptrace_align_in {
	const char *machine; /* boot id or host name: equal strings = one BOOTTIME */
	int64_t start_boottime_ns, start_realtime_ns;
	int64_t first_ts; /* earliest event, relative */
	/* No BOOTTIME (a torch.profiler or other JSON trace): start_realtime_ns is the start on
	 * the clock the file's timestamps are written in, which the ranks of a job share (the
	 * wall clock); ranks of one host are then placed by it, and --align none keeps it where
	 * every input has one. */
	int file_clock;
	const struct cuptrace_align_coll *coll;
	size_t ncoll;
};

/* Where a rank's relative time t goes on the output axis:
 *   t' = t + offset_ns + drift * (t - anchor_ns). */
struct cuptrace_align_out {
	int64_t offset_ns;
	double drift; /* dimensionless: 1e-6 is one part per million */
	int64_t anchor_ns;
	enum cuptrace_align_clock clock;
	size_t machine; /* the first input of the same machine: equal values, one machine */
	size_t matched; /* collectives matched with the reference machine (NCCL refinement) */
	int64_t realtime_error_ns; /* NCCL: how far the REALTIME placement was off at the anchor */
};

/* Over collectives seen on at least two ranks: how many, and the spread of their ends after
 * alignment (latest end - earliest end): median, 99th percentile, max. All 0 without any. */
struct cuptrace_align_spread {
	size_t collectives;
	int64_t median, p99, max;
};

struct cuptrace_align_summary {
	size_t machines;
	struct cuptrace_align_spread symmetric; /* what the alignment is judged by */
	struct cuptrace_align_spread other;     /* broadcast, reduce, send/recv, generic */
};

/* in[0] is the reference. Fills out[0..n) and *sum; the output axis has the earliest event of
 * all at 0. Returns 0 or -ENOMEM. */
int cuptrace_align(const struct cuptrace_align_in *in, size_t n, enum cuptrace_align_mode mode,
                   struct cuptrace_align_out *out, struct cuptrace_align_summary *sum);

/* t mapped by o (saturating). */
int64_t cuptrace_align_apply(const struct cuptrace_align_out *o, int64_t t);

#endif
