/* The raw capture file (.cupti): CUPTI activity records exactly as CUPTI wrote them, plus what is
 * needed to convert them later on any machine: the text behind every string pointer, host
 * thread names and trace metadata. Cheapest to write (no conversion in the traced process).
 *
 * Layout (little-endian, x86-64 only; see README "Capture format"):
 *   header   "CUPTCAP\0", u32 format version (1), u32 CUPTI_API_VERSION of the writer
 *   items    u32 type, u32 flags (0), u64 payload length, payload, zero padding to 8 bytes
 *     META    key\0value\0               (all META items come first)
 *     STRING  u64 pointer, text\0        (valid for later RECORDS, until redefined)
 *     THREAD  i64 tid, name\0
 *     RECORDS u32 count, u32 0, then count x (u32 kind, u32 size, size bytes padded to 8);
 *             besides CUPTI's records, cuptrace's call stacks (kinds CUPTRACE_REC_STACK and
 *             _STACK_CORR, convert/stackrec.h) in RECORDS items of their own: a reader that
 *             predates them passes them over as records of a kind it does not know
 *     DROPPED u64 dropped by CUPTI, u64 dropped by cuptrace (cumulative)
 *     END     u64 records written        (absent if the writer died: the file is still read)
 *     NVTX_STARTEND  u64 ids of NVTX start/end ranges (not push/pop), valid for later RECORDS
 *     GPU_METRICS  u32 device, u32 nmetrics, u64 interval ns, i64 clock offset ns (sampler clock
 *                  - trace clock), device name\0, nmetrics x metric name\0 (convert.h)
 *     GPU_SAMPLES  u32 device, u32 nmetrics, u64 count, count x (u64 start, u64 end) in the
 *                  sampler's clock, count x nmetrics x f64 values as CUPTI evaluated them
 * Threading: one thread per writer or reader. */
#ifndef CUPTRACE_CONVERT_CAPTURE_H
#define CUPTRACE_CONVERT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>
#include <cupti_version.h>

#include "convert/consumer.h"
#include "convert/convert.h"

enum cuptrace_capture_type {
	CUPTRACE_CAP_META = 1,
	CUPTRACE_CAP_STRING = 2,
	CUPTRACE_CAP_THREAD = 3,
	CUPTRACE_CAP_RECORDS = 4,
	CUPTRACE_CAP_DROPPED = 5,
	CUPTRACE_CAP_END = 6,
	CUPTRACE_CAP_NVTX_STARTEND = 7,
	CUPTRACE_CAP_GPU_METRICS = 8,
	CUPTRACE_CAP_GPU_SAMPLES = 9,
};

/* Writing: the writer is a record consumer (consumer.h), used through it only: each operation
 * writes its item (records: one CUPTI buffer's, preceded by the text of any string pointer not
 * written before or whose text changed; flush: write(2) of what is buffered, durable against
 * SIGKILL of the process; finish: END, then the file closed). Opens path for writing into *out:
 * 0, or a negative errno (nothing made). */
int cuptrace_capture_open(const char *path, struct cuptrace_consumer *out);

/* Reading: the whole capture is replayed into callbacks, in file order. */
struct cuptrace_capture_ops {
	void *ctx;
	int (*meta)(void *ctx, const char *key, const char *value);
	int (*thread)(void *ctx, int64_t tid, const char *name);
	/* Records are 8-byte aligned copies; string pointers in them resolve through
	 * cuptrace_capture_resolve() on the reader passed as resolve_ctx. */
	int (*records)(void *ctx, const CUpti_Activity *const *recs, size_t n);
	int (*dropped)(void *ctx, uint64_t cupti, uint64_t cuptrace);
	int (*nvtx_startend)(void *ctx, const uint64_t *ids, size_t n);
	/* times and values are 8-aligned pointers into the file's copy, valid during the call. */
	int (*gpu_metrics)(void *ctx, const struct cuptrace_gm_config *cfg);
	int (*gpu_samples)(void *ctx, uint32_t device, size_t nmetrics, const uint64_t *times,
	                   const double *values, size_t n);
};
struct cuptrace_capture_reader;
/* Opens and validates the header. NULL + errno (EINVAL: not a capture; a message is logged). */
struct cuptrace_capture_reader *cuptrace_capture_reader_open(const char *path);
/* Replays every item. A file cut short, or with a corrupt item, ends at the last complete item
 * before: *cut_at is the byte where the damage starts (0 for a whole file) and *corrupt_what,
 * for a corrupt item, what is wrong with it (NULL for a cut). Returns 0 or the first non-zero
 * callback result. */
int cuptrace_capture_replay(struct cuptrace_capture_reader *r,
                            const struct cuptrace_capture_ops *ops, uint64_t *cut_at,
                            const char **corrupt_what);
/* The capture file's size in bytes. */
size_t cuptrace_capture_size(const struct cuptrace_capture_reader *r);
/* A cuptrace_resolve_fn for the converter: ctx is the reader. Unknown pointers give NULL. */
const char *cuptrace_capture_resolve(void *reader, const char *ptr);
uint32_t cuptrace_capture_cupti_version(const struct cuptrace_capture_reader *r);
void cuptrace_capture_reader_close(struct cuptrace_capture_reader *r);

/* Tailing a capture that is still being written (cuptrace top): the reader keeps the file open
 * and each poll replays the items appended since the last one, stopping before an item that is
 * not whole yet (the writer flushes whole buffers, not whole items) and resuming there next
 * time. Memory: only the unreplayed tail and the strings are kept, not the file. The file may be
 * renamed while tailed (a partial file put in place). Opens path (it may be empty so far): NULL
 * and errno on failure. Close with cuptrace_capture_reader_close; resolve strings with
 * cuptrace_capture_resolve as for a whole file. */
struct cuptrace_capture_reader *cuptrace_capture_tail_open(const char *path);
/* Replays what was appended. *ended: the END item was read (the writer finished; later polls
 * replay nothing). Returns 0, the first non-zero callback result, -EINVAL (not a capture: a
 * message is logged) or -EBADMSG with *corrupt_what saying what is wrong. */
int cuptrace_capture_tail_poll(struct cuptrace_capture_reader *r,
                               const struct cuptrace_capture_ops *ops, int *ended,
                               const char **corrupt_what);

#endif
