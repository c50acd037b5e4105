/* The Perfetto sink's packing buffer and its sequences: framing and writing a packet, opening a
 * track's sequence and each generation of its incremental state. Called by perfetto_writer.c
 * (the sink's ops) and perfetto_encode.c (the hot packets); calls neither. */
#include "format/perfetto_sink.h"
#include "common/util.h"
#include "perfetto_trace.pb-c.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int pf_buf_reserve(struct pf_sink *s, size_t need)
{
	return CUPTRACE_GROW(s->buf, s->bufcap, need) ? fail(s, -ENOMEM) : 0;
}

/* Frames and writes one packet: one output record, so chunks are cut between packets only. The
 * packet is the concatenation of parts[0..n), each packed by protobuf-c: a protobuf message may
 * list its fields in any order (trace_processor decodes the whole packet before acting on it). */
static int emit_parts(struct pf_sink *s, Cuptrace__Pb__TracePacket **parts, int n)
{
	size_t len[3], total = 0;

	if (s->err)
		return s->err;
	if (n > 3)
		return fail(s, -EINVAL);
	for (int i = 0; i < n; i++)
		total += len[i] = protobuf_c_message_get_packed_size(&parts[i]->base);
	if (pf_buf_reserve(s, total + 11))
		return s->err;
	s->buf[0] = PF_KEY0(PF_TRACE_PACKET, PF_WT_LEN);
	size_t h = 1 + cuptrace_put_varint(s->buf + 1, total);
	for (int i = 0; i < n; i++) {
		if (protobuf_c_message_pack(&parts[i]->base, s->buf + h) != len[i])
			return fail(s, -EIO);
		h += len[i];
	}
	int err = cuptrace_output_write(s->out, s->buf, h);
	return err ? fail(s, err) : 0;
}

int pf_emit(struct pf_sink *s, Cuptrace__Pb__TracePacket *p)
{
	return emit_parts(s, &p, 1);
}

/* ---- sequences ---- */

/* Opens a generation: clears the incremental state (interning and defaults), sets the defaults
 * again, and pins clock 64 to its current value; a fresh sequence starts at 0. */
int pf_seq_open_generation(struct pf_sink *s, struct pf_seq *q)
{
	Cuptrace__Pb__TracePacket a = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__TracePacketDefaults d = CUPTRACE__PB__TRACE_PACKET_DEFAULTS__INIT;
	Cuptrace__Pb__TrackEventDefaults ted = CUPTRACE__PB__TRACK_EVENT_DEFAULTS__INIT;
	Cuptrace__Pb__TracePacket b = CUPTRACE__PB__TRACE_PACKET__INIT;
	Cuptrace__Pb__ClockSnapshot cs = CUPTRACE__PB__CLOCK_SNAPSHOT__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock c64 = CUPTRACE__PB__CLOCK_SNAPSHOT__CLOCK__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock cbt = CUPTRACE__PB__CLOCK_SNAPSHOT__CLOCK__INIT;
	Cuptrace__Pb__ClockSnapshot__Clock *clocks[2] = {&c64, &cbt};

	for (int k = 0; k < IT_N; k++) {
		cuptrace_strtab_free(&q->tab[k]);
		cuptrace_strtab_init(&q->tab[k]);
	}
	memset(q->cache, 0, sizeof(q->cache));
	q->entries = q->bytes = 0;
	if (q->stk_sent.cap) { /* interned call-stack entries are gone with the generation */
		cuptrace_u64map_free(&q->stk_sent);
		memset(&q->stk_sent, 0, sizeof(q->stk_sent));
	}

	ted.has_track_uuid = 1;
	ted.track_uuid = q->track;
	d.has_timestamp_clock_id = 1;
	d.timestamp_clock_id = CLOCK_SEQ;
	d.track_event_defaults = &ted;
	a.has_trusted_packet_sequence_id = 1;
	a.trusted_packet_sequence_id = q->id;
	a.has_sequence_flags = 1;
	a.sequence_flags = SEQ_CLEARED | SEQ_NEEDS;
	a.trace_packet_defaults = &d;
	if (pf_emit(s, &a))
		return s->err;

	c64.has_clock_id = c64.has_timestamp = c64.has_is_incremental = 1;
	c64.clock_id = CLOCK_SEQ;
	c64.timestamp = (uint64_t)q->last_ts;
	c64.is_incremental = 1;
	cbt.has_clock_id = cbt.has_timestamp = 1;
	cbt.clock_id = CLOCK_BOOTTIME_ID;
	cbt.timestamp = (uint64_t)s->start_boottime + (uint64_t)q->last_ts;
	cs.n_clocks = 2;
	cs.clocks = clocks;
	b.has_trusted_packet_sequence_id = 1;
	b.trusted_packet_sequence_id = q->id;
	b.clock_snapshot = &cs;
	return pf_emit(s, &b);
}

static size_t seq_hot_slot(uint64_t track)
{
	return (size_t)((track * 0x9E3779B97F4A7C15ull) >> (64 - SEQ_HOT_BITS));
}

struct pf_seq *pf_seq_get(struct pf_sink *s, uint64_t track)
{
	struct pf_seq **hot = &s->seq_hot[seq_hot_slot(track)];
	if (*hot && (*hot)->track == track)
		return *hot;

	uint64_t *v = cuptrace_u64map_get(&s->seq_of, track);
	if (v)
		return *hot = s->seqs[*v - 1];

	struct pf_seq **arr = cuptrace_grow(s->seqs, &s->seqcap, s->nseqs + 1, sizeof(*arr));
	struct pf_seq *q = arr ? calloc(1, sizeof(*q)) : NULL;
	if (arr)
		s->seqs = arr;
	if (!q || !(v = cuptrace_u64map_put(&s->seq_of, track, NULL))) {
		free(q);
		fail(s, -ENOMEM);
		return NULL;
	}
	s->seqs[s->nseqs++] = q;
	*v = s->nseqs;
	q->id = SEQ_META + (uint32_t)s->nseqs;
	q->track = track;
	for (int k = 0; k < IT_N; k++)
		cuptrace_strtab_init(&q->tab[k]);
	if (pf_seq_open_generation(s, q))
		return NULL;
	return *hot = q;
}

void pf_seq_free(struct pf_seq *q)
{
	if (!q)
		return;
	for (int k = 0; k < IT_N; k++)
		cuptrace_strtab_free(&q->tab[k]);
	if (q->stk_sent.cap)
		cuptrace_u64map_free(&q->stk_sent);
	free(q);
}
