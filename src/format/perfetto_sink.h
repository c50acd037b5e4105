/* The Perfetto sink's state, its sequences and their interning tables: what perfetto_writer.c
 * (the sink's ops), perfetto_encode.c (the hot packets) and perfetto_seq.c (the packing buffer
 * and the sequences, which both of them call) share. Private to src/format.
 *
 * Calls go one way: perfetto_writer.c -> perfetto_encode.c -> perfetto_seq.c, and
 * perfetto_writer.c -> perfetto_seq.c; nothing calls back up (tests/layers_test.sh). */
#ifndef CUPTRACE_FORMAT_PERFETTO_SINK_H
#define CUPTRACE_FORMAT_PERFETTO_SINK_H

#include "format/formats.h"
#include "common/util.h"
#include "format/perfetto_fields.h"
#include "format/perfetto_wire.h"

#include <stddef.h>
#include <stdint.h>

/* Sequence 1 holds the metadata; track sequences are 2, 3, ... Clock 64 is each track
 * sequence's own incremental clock (perfetto_writer.c says why). */
#define SEQ_META  1
#define CLOCK_SEQ 64

/* Entries per table and sequence of the interning cache: 2 KiB per sequence. */
#define ICACHE_BITS 5
#define ICACHE_N    (1u << ICACHE_BITS)

/* A caller's string pointer and the iid its content had when it was last interned here. Callers
 * pass the same const char * again and again (literals, the converter's own interned names), so
 * this skips strlen and the hash of the string table. The pointer only says where to look: a
 * buffer may be refilled with other text between calls (event.h lends pointers per call), so a
 * hit still compares the content with the interned copy. */
struct pf_icache {
	const char *ptr;
	uint32_t iid; /* 0: empty */
};

struct pf_seq {
	uint32_t id;
	uint64_t track;
	int64_t last_ts; /* value of clock 64 after the last packet written on it */
	struct cuptrace_strtab tab[IT_N];
	size_t entries, bytes;                  /* in this generation */
	struct pf_icache cache[IT_N][ICACHE_N]; /* of this generation's tables */
	struct cuptrace_u64map stk_sent;        /* call-stack entries sent in this generation
	                                         * (perfetto_stacks.c); cap 0 until the first */
};

struct pf_meta;     /* perfetto_writer.c */
struct pf_stacks;   /* perfetto_stacks.c */
struct pf_arg_iids; /* perfetto_encode.c */

/* Small direct-mapped cache in front of seq_of: the same few tracks come back again and again. */
#define SEQ_HOT_BITS 4
#define SEQ_HOT_N    (1u << SEQ_HOT_BITS)

struct pf_sink {
	struct cuptrace_sink base;
	struct cuptrace_output *out; /* owned: closed by finish or destroy */
	int err;                     /* first error, sticky */
	int finished;
	int begun;
	int meta_packets; /* packets written on sequence 1 so far */
	int64_t start_boottime;
	int64_t max_ts;        /* latest time seen, where the summary instant goes */
	uint64_t process_uuid; /* the first process track */
	int32_t process_pid;
	/* Where the metadata instants go: the first process's main thread (tid = pid; 0: not
	 * declared yet), else at finish its first thread (first_thread), else the process track.
	 * info_written: the trace-info instant is out. */
	uint64_t meta_track, first_thread;
	int info_written, summary_pending;
	int process_ordering; /* the root descriptor that orders processes was written */
	struct pf_seq **seqs;
	size_t nseqs, seqcap;
	struct cuptrace_u64map seq_of; /* track uuid -> index + 1 in seqs */
	struct pf_seq *seq_hot[SEQ_HOT_N];
	uint8_t *buf; /* packing buffer: 0x0A varint(len) packet */
	size_t bufcap;
	struct pf_meta *meta; /* every metadata entry, last value per key, first-seen order */
	size_t nmeta, metacap;
	struct pf_arg_iids *ai; /* scratch for one event's args; grown, never shrunk */
	size_t aicap;
	struct pf_stacks *stk; /* call stacks, NULL until the first */
};

static inline struct pf_sink *to_pf(struct cuptrace_sink *s)
{
	return (struct pf_sink *)s;
}

static inline int fail(struct pf_sink *s, int err)
{
	if (!s->err)
		s->err = err;
	return s->err;
}

/* ---- perfetto_seq.c ---- */

struct Cuptrace__Pb__TracePacket; /* perfetto_trace.pb-c.h */

/* Makes room for need bytes in the packing buffer. */
int pf_buf_reserve(struct pf_sink *s, size_t need);
/* Packs p with protobuf-c, frames it and writes it as one output record; 0 or s->err. */
int pf_emit(struct pf_sink *s, struct Cuptrace__Pb__TracePacket *p);
/* The sequence of a track, opened (its first generation written) on first use; NULL on error
 * (in s->err). */
struct pf_seq *pf_seq_get(struct pf_sink *s, uint64_t track);
/* Starts a new generation of q's incremental state; 0 or s->err. */
int pf_seq_open_generation(struct pf_sink *s, struct pf_seq *q);
/* Frees a sequence and its tables; NULL is fine. */
void pf_seq_free(struct pf_seq *q);

/* ---- perfetto_stacks.c: call stacks (called by perfetto_encode.c and perfetto_writer.c) ---- */

/* The stack() op: keeps the stack. */
int pf_stack(struct cuptrace_sink *sk, const struct cuptrace_stack *st);
/* The sample() op (perfetto_encode.c): a PerfSample on the thread's sequence. */
int pf_sample(struct cuptrace_sink *sk, const struct cuptrace_sample *e);
/* The callstack iid of stack_id on q, its interned data written first (as a packet of its own)
 * if q's generation has not had it; 0 for an unknown stack or on error (in s->err). */
uint64_t pf_stack_intern(struct pf_sink *s, struct pf_seq *q, uint64_t stack_id);
void pf_stacks_free(struct pf_sink *s);

/* ---- perfetto_encode.c: the sink ops of the hot packets ---- */

int pf_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e);
int pf_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e);
int pf_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e);

#endif
