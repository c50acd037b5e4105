/* Call stacks (issue 27) as records in the stream of CUPTI records: what the recorder hands to
 * the converter or the capture, so that stacks travel the way every other record does (a
 * capture stores them in its RECORDS items, where a cuptrace that predates them skips them as
 * records of an unknown kind; captures without them read exactly as before).
 *
 * Two record kinds, chosen far above CUPTI's own (CUpti_ActivityKind counts from 0 to about 60):
 *   STACK       u32 kind, u32 size (the record's bytes, a multiple of 8), u64 stack id,
 *               u32 nframes, u32 0, nframes x (u32 frame kind, u32 line, u64 rel_pc), then
 *               per frame four NUL-terminated strings: function, file, module, build id
 *               ("" for none); zero padding
 *   STACK_CORR  u32 kind, u32 n, n x (u64 correlation id, u64 stack id)
 *   SAMPLES     u32 kind, u32 n, n x (u64 time (CLOCK_BOOTTIME ns, as CUPTI's records), u32
 *               thread id (kernel), u32 0, u64 stack id): sampled host stacks (issue 46,
 *               inject/sampler.h), whose STACK ids start at CUPTRACE_SAMPLE_STACK_BASE
 * Each record says its own size (cuptrace_stackrec_bytes), which the capture reader checks
 * against the item, so the converter can read one from its pointer alone.
 * A STACK comes before any STACK_CORR or SAMPLES naming its id. Pure functions, no state. */
#ifndef CUPTRACE_CONVERT_STACKREC_H
#define CUPTRACE_CONVERT_STACKREC_H

#include <stddef.h>
#include <stdint.h>

#include "format/event.h"

#define CUPTRACE_REC_STACK      0x43540001u
#define CUPTRACE_REC_STACK_CORR 0x43540002u
#define CUPTRACE_REC_SAMPLES    0x43540003u
/* Sampled stacks' ids start here: apart from launch stacks' (1 .. STACKS_MAX). */
#define CUPTRACE_SAMPLE_STACK_BASE (1ull << 40)

struct cuptrace_stackrec_sample {
	uint64_t ts;
	uint32_t tid, zero;
	uint64_t stack;
};

/* Whether kind is one of these records. */
static inline int cuptrace_stackrec_kind(uint32_t kind)
{
	return kind == CUPTRACE_REC_STACK || kind == CUPTRACE_REC_STACK_CORR ||
	       kind == CUPTRACE_REC_SAMPLES;
}

/* Bytes the STACK record of st takes (a multiple of 8), or 0 if over 4 GiB. */
size_t cuptrace_stackrec_size(const struct cuptrace_stack *st);
/* Writes st's STACK record into out (cuptrace_stackrec_size bytes, 8-aligned). */
void cuptrace_stackrec_encode(const struct cuptrace_stack *st, void *out);
/* The size a STACK, STACK_CORR or SAMPLES record says it has, from its first 8 bytes; 0 for
 * others. */
size_t cuptrace_stackrec_bytes(const void *rec);
/* Reads a STACK record of size bytes: fills st (frames into *frames, grown as needed; strings
 * point into rec). 0, or -EINVAL for a malformed record, -ENOMEM. */
int cuptrace_stackrec_decode(const void *rec, size_t size, struct cuptrace_stack *st,
                             struct cuptrace_frame **frames, size_t *cap);
/* A STACK_CORR record of size bytes: its pairs (8-aligned in rec) and their count; -EINVAL if
 * malformed. */
int cuptrace_stackrec_corr(const void *rec, size_t size, const uint64_t **pairs, size_t *n);
/* A SAMPLES record of size bytes: its samples (8-aligned in rec) and their count; -EINVAL if
 * malformed. */
int cuptrace_stackrec_samples(const void *rec, size_t size,
                              const struct cuptrace_stackrec_sample **samples, size_t *n);

#endif
