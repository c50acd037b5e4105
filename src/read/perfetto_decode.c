/* Perfetto reader, wire level: finds the packets of a trace file (plain, compressed_packets
 * chunks, whole-file gzip) and keeps each sequence's incremental state and the clocks. */
#include "common/log.h"
#include "common/util.h"
#include "read/perfetto_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAX_PACKET (1u << 30)
/* Trace.packet's key, 0x0A: the first byte of every uncompressed trace and of each packet. */
#define PACKET_KEY PF_KEY0(PF_TRACE_PACKET, PF_WT_LEN)

/* ---- sequences, interning, clocks ---- */

static void seq_clear(struct rseq *q)
{
	for (int k = 0; k < IT_N; k++) {
		cuptrace_u64map_free(&q->tab[k]);
		cuptrace_u64map_init(&q->tab[k]);
	}
	for (int k = 0; k < CT_N; k++) {
		cuptrace_u64map_free(&q->ctab[k]);
		cuptrace_u64map_init(&q->ctab[k]);
	}
	q->has_def_clock = q->has_def_track = 0;
}

static struct rseq *seq_get(struct reader *r, uint32_t id, int *created)
{
	uint64_t *v = cuptrace_u64map_get(&r->seq_of, id);
	*created = 0;
	if (v)
		return &r->seqs[*v - 1];
	struct rseq *q = PUSH(r, seqs, nseqs, seqcap);
	if (!q)
		return NULL;
	if (!(v = cuptrace_u64map_put(&r->seq_of, id, NULL))) {
		r->nseqs--;
		r->err = -ENOMEM;
		return NULL;
	}
	*v = r->nseqs;
	memset(q, 0, sizeof(*q));
	q->id = id;
	*created = 1;
	r->ck.sequences++;
	return q;
}

/* InternedData: {iid, name or str} entries of the categories, event names, arg names and string
 * values tables. Other tables are not used by what we replay. */
static int parse_interned(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc, k;

	while ((rc = pb_next(&m, &f)) > 0) {
		switch (f.id) {
		case PF_INTERNED_EVENT_CATEGORIES:
			k = IT_CAT;
			break;
		case PF_INTERNED_EVENT_NAMES:
			k = IT_NAME;
			break;
		case PF_INTERNED_DEBUG_ANNOTATION_NAMES:
			k = IT_KEY;
			break;
		case PF_INTERNED_DEBUG_ANNOTATION_STRING_VALUES:
			k = IT_VAL;
			break;
		default:
			continue;
		}
		if (f.wt != PF_WT_LEN)
			continue;
		uint64_t iid = 0;
		const uint8_t *s = NULL;
		size_t sn = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.id == PF_ENTRY_IID && g.wt == PF_WT_VARINT)
				iid = g.v;
			else if (g.id == PF_ENTRY_NAME && g.wt == PF_WT_LEN)
				s = g.b, sn = g.n;
		}
		if (rc < 0)
			return -1;
		if (!iid)
			continue;
		uint32_t id = sid(r, s ? (const void *)s : "", sn);
		uint64_t *v = id ? cuptrace_u64map_put(&q->tab[k], iid, NULL) : NULL;
		if (!v) {
			r->err = -ENOMEM;
			return 0;
		}
		*v = id;
	}
	return rc;
}

static int parse_defaults(struct rseq *q, const uint8_t *b, size_t n)
{
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	int rc;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == PF_DEFAULTS_TIMESTAMP_CLOCK_ID && f.wt == PF_WT_VARINT) {
			q->has_def_clock = 1;
			q->def_clock = (uint32_t)f.v;
		} else if (f.id == PF_DEFAULTS_TRACK_EVENT_DEFAULTS && f.wt == PF_WT_LEN) {
			e = pb_of(f.b, f.n);
			while ((rc = pb_next(&e, &g)) > 0) {
				if (g.id == PF_EVENT_DEFAULTS_TRACK_UUID && g.wt == PF_WT_VARINT) {
					q->has_def_track = 1;
					q->def_track = g.v;
				}
			}
			if (rc < 0)
				return -1;
		}
	}
	return rc;
}

struct snapclock {
	uint32_t id;
	uint64_t ts, mult;
	int incremental;
};

/* A snapshot with a sequence clock (64..127) defines it on its sequence; the first one with
 * builtin clocks only is the trace's: it maps relative time 0 to BOOTTIME and REALTIME. */
static int parse_snapshot(struct reader *r, struct rseq *q, const uint8_t *b, size_t n)
{
	struct snapclock c[MAX_SNAP_CLOCKS];
	struct pb m = pb_of(b, n), e;
	struct pbf f, g;
	size_t nc = 0;
	uint32_t primary = 0;
	int rc, seq_clocks = 0;

	while ((rc = pb_next(&m, &f)) > 0) {
		if (f.id == PF_SNAPSHOT_PRIMARY_TRACE_CLOCK && f.wt == PF_WT_VARINT)
			primary = (uint32_t)f.v;
		if (f.id != PF_SNAPSHOT_CLOCKS || f.wt != PF_WT_LEN || nc == MAX_SNAP_CLOCKS)
			continue;
		struct snapclock k = {.mult = 1};
		int has_id = 0;
		e = pb_of(f.b, f.n);
		while ((rc = pb_next(&e, &g)) > 0) {
			if (g.wt != PF_WT_VARINT)
				continue;
			if (g.id == PF_CLOCK_CLOCK_ID)
				k.id = (uint32_t)g.v, has_id = 1;
			else if (g.id == PF_CLOCK_TIMESTAMP)
				k.ts = g.v;
			else if (g.id == PF_CLOCK_IS_INCREMENTAL)
				k.incremental = !!g.v;
			else if (g.id == PF_CLOCK_UNIT_MULTIPLIER_NS && g.v)
				k.mult = g.v;
		}
		if (rc < 0)
			return -1;
		if (!has_id)
			continue;
		seq_clocks |= k.id >= 64;
		c[nc++] = k;
	}
	if (rc < 0)
		return -1;
	if (!seq_clocks) {
		if (r->have_snap || !nc)
			return 0;
		r->have_snap = 1;
		for (size_t i = 0; i < nc; i++) {
			r->snap_id[i] = c[i].id;
			r->snap_val[i] = c[i].ts;
		}
		r->nsnap = nc;
		r->snap_primary = primary;
		return 0;
	}
	if (!q) {
		r->ck.clock_errors++;
		return 0;
	}
	/* The builtin clock the sequence clocks are tied to: BOOTTIME if there, else the first. */
	const struct snapclock *ref = NULL;
	for (size_t i = 0; i < nc && (!ref || ref->id != CLOCK_BOOTTIME_ID); i++)
		if (c[i].id < 64 && (!ref || c[i].id == CLOCK_BOOTTIME_ID))
			ref = &c[i];
	for (size_t i = 0; i < nc; i++) {
		if (c[i].id < 64 || c[i].id > 127)
			continue;
		struct rclock *k = NULL;
		for (size_t j = 0; j < q->nclocks && !k; j++)
			if (q->clocks[j].id == c[i].id)
				k = &q->clocks[j];
		if (!k) {
			if (CUPTRACE_GROW(q->clocks, q->clocks_cap, q->nclocks + 1)) {
				r->err = -ENOMEM;
				return 0;
			}
			k = &q->clocks[q->nclocks++];
		}
		*k = (struct rclock){.id = c[i].id,
		                     .incremental = c[i].incremental,
		                     .snap = c[i].ts,
		                     .last = c[i].ts,
		                     .mult = c[i].mult,
		                     .ref_clock = ref ? ref->id : 0,
		                     .ref_val = ref ? ref->ts : 0};
	}
	return 0;
}

/* The packet's time on a builtin clock (dom 0: the trace clock). Sequence clocks are resolved
 * here, in file order, because incremental deltas chain in file order. 0 or -1 (clock error). */
static int packet_time(struct reader *r, struct rseq *q, int has_clock, uint32_t clock, uint64_t ts,
                       uint64_t *out, uint32_t *dom)
{
	if (!has_clock && q && q->has_def_clock) {
		has_clock = 1;
		clock = q->def_clock;
	}
	if (!has_clock || clock < 64) {
		*out = ts;
		*dom = has_clock ? clock : 0;
		return 0;
	}
	struct rclock *k = NULL;
	for (size_t j = 0; q && j < q->nclocks && !k; j++)
		if (q->clocks[j].id == clock)
			k = &q->clocks[j];
	if (!k || !k->ref_clock)
		return -1;
	uint64_t v = k->incremental ? k->last + ts : ts;
	if (k->incremental)
		k->last = v;
	*out = k->ref_val + (v - k->snap) * k->mult; /* wraps on garbage, never traps */
	*dom = k->ref_clock;
	return 0;
}

/* ---- packets and streams ---- */

/* The first damage is the one reported: what comes before it is whole. */
static void damaged(struct reader *r, uint64_t at)
{
	if (!r->ck.corrupt && !r->ck.truncated_bytes)
		r->ck.damage_at = at;
}

static int parse_stream(struct reader *r, const uint8_t *b, size_t n, int depth, size_t *used);

static int inflate_chunk(struct reader *r, const uint8_t *b, size_t n, size_t *outn)
{
	z_stream z;
	int rc;
	/* A deflate stream expands at most ~1032:1; TP asks for chunks under 512 KB anyway. */
	size_t limit = n > (MAX_PACKET - 65536) / 1032 ? MAX_PACKET : n * 1032 + 65536;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK) {
		r->err = -ENOMEM;
		return -1;
	}
	z.next_in = (Bytef *)b;
	z.avail_in = (uInt)n;
	*outn = 0;
	for (;;) {
		if (*outn == r->zcap) {
			/* Chunks inflate ~4-10x; start near that, without a large first allocation.
			 */
			size_t cap = r->zcap ? r->zcap * 2 : n * 8 < 16384 ? 16384 : n * 8;
			if (r->zcap >= limit) {
				rc = Z_DATA_ERROR;
				break;
			}
			cap = cap > limit ? limit : cap;
			uint8_t *p = realloc(r->zbuf, cap);
			if (!p) {
				r->err = -ENOMEM;
				rc = Z_MEM_ERROR;
				break;
			}
			r->zbuf = p;
			r->zcap = cap;
		}
		z.next_out = r->zbuf + *outn;
		z.avail_out = (uInt)(r->zcap - *outn);
		rc = inflate(&z, Z_NO_FLUSH);
		*outn = r->zcap - z.avail_out;
		if (rc == Z_STREAM_END || (rc != Z_OK && !(rc == Z_BUF_ERROR && !z.avail_out)))
			break;
	}
	/* TP wants exactly one complete stream per field: no more, no less. */
	int ok = rc == Z_STREAM_END && !z.avail_in;
	inflateEnd(&z);
	return ok ? 0 : -1;
}

static int do_packet(struct reader *r, const uint8_t *b, size_t n, int depth)
{
	struct pkt k = {0};
	struct pb m = pb_of(b, n);
	struct pbf f;
	int rc, created = 0;

	while ((rc = pb_next(&m, &f)) > 0) {
		switch (f.id) {
		case PF_PACKET_TIMESTAMP:
			k.has_ts = f.wt == PF_WT_VARINT;
			k.ts = f.v;
			break;
		case PF_PACKET_TIMESTAMP_CLOCK_ID:
			k.has_clock = f.wt == PF_WT_VARINT;
			k.clock = (uint32_t)f.v;
			break;
		case PF_PACKET_SEQUENCE_ID:
			k.has_seq = f.wt == PF_WT_VARINT && f.v;
			k.seq = (uint32_t)f.v;
			break;
		case PF_PACKET_SEQUENCE_FLAGS:
			k.flags = (uint32_t)f.v;
			break;
		case PF_PACKET_INCREMENTAL_STATE_CLEARED:
			k.cleared_legacy = !!f.v;
			break;
		case PF_PACKET_PREVIOUS_PACKET_DROPPED:
			k.dropped = f.v;
			break;
		case PF_PACKET_INTERNED_DATA:
			k.interned = f;
			k.has_interned = f.wt == PF_WT_LEN;
			break;
		case PF_PACKET_DEFAULTS:
			k.defaults = f;
			k.has_defaults = f.wt == PF_WT_LEN;
			break;
		case PF_PACKET_CLOCK_SNAPSHOT:
		case PF_PACKET_TRACK_EVENT:
		case PF_PACKET_SYSTEM_INFO:
		case PF_PACKET_COMPRESSED_PACKETS:
		case PF_PACKET_TRACK_DESCRIPTOR:
		case PF_PACKET_TRACE_UUID:
		case PF_PACKET_TRACE_ATTRIBUTES:
		case PF_PACKET_PERF_SAMPLE:
		case PF_PACKET_SERVICE_EVENT:
			if (f.wt == PF_WT_LEN) {
				k.payload = f;
				k.payload_id = f.id;
			}
			break;
		}
	}
	if (rc < 0)
		return -1;
	if (k.payload_id == PF_PACKET_COMPRESSED_PACKETS) {
		/* The outer packet's other fields are ignored, as TP does. */
		size_t zn, used;
		if (depth) {
			damaged(r, r->pkt_off);
			r->ck.corrupt++; /* no chunks inside chunks */
			return 0;
		}
		r->ck.chunks++;
		if (inflate_chunk(r, k.payload.b, k.payload.n, &zn)) {
			damaged(r, r->pkt_off);
			r->ck.corrupt++;
			return 0;
		}
		/* r->zbuf is reused by the next chunk; packets inside cannot be chunks, so nothing
		 * touches it while its packets are parsed. */
		if (parse_stream(r, r->zbuf, zn, depth + 1, &used) || used != zn) {
			damaged(r, r->pkt_off);
			r->ck.corrupt++;
		}
		return 0;
	}
	r->ck.packets++;
	struct rseq *q = NULL;
	int cleared = (k.flags & SEQ_CLEARED) || k.cleared_legacy;
	int needs = (k.flags & SEQ_NEEDS) || k.has_interned;
	if (k.has_seq) {
		if (!(q = seq_get(r, k.seq, &created)))
			return 0;
		if (created)
			q->first_cleared = cleared;
		if (k.dropped)
			q->valid = 0;
		if (cleared) {
			seq_clear(q);
			q->valid = 1;
		}
		if (needs && !q->first_cleared && !q->reported) {
			q->reported = 1;
			r->ck.seq_first_not_cleared++;
		}
	} else if (k.flags & SEQ_NEEDS) {
		r->ck.missing_sequence_id++; /* fatal in TP */
		return 0;
	}
	if (k.has_defaults && q && parse_defaults(q, k.defaults.b, k.defaults.n))
		return -1;
	if (k.has_interned && q) {
		if (!q->valid)
			r->ck.incremental_state_invalid++;
		else if (parse_interned(r, q, k.interned.b, k.interned.n) ||
		         pf_parse_interned_stacks(r, q, k.interned.b, k.interned.n))
			return -1;
	}
	/* In TP's order: attributes and clock snapshots are taken even from a packet that is then
	 * skipped for invalid incremental state. */
	if (k.payload_id == PF_PACKET_TRACE_ATTRIBUTES)
		return pf_parse_attributes(r, k.payload.b, k.payload.n);
	if (k.payload_id == PF_PACKET_CLOCK_SNAPSHOT)
		return parse_snapshot(r, q, k.payload.b, k.payload.n);
	if ((k.flags & SEQ_NEEDS) && q && !q->valid) {
		r->ck.incremental_state_invalid++;
		return 0;
	}
	/* Every packet that gets this far has its time converted, which advances incremental
	 * clocks, whatever becomes of its payload. */
	if (k.has_ts)
		k.time_err = packet_time(r, q, k.has_clock, k.clock, k.ts, &k.abs_ts, &k.dom);
	switch (k.payload_id) {
	case PF_PACKET_TRACK_EVENT:
		return pf_parse_event(r, q, &k);
	case PF_PACKET_SERVICE_EVENT: {
		/* TP reads its time as BOOTTIME without a clock id; the last one read wins. */
		struct pb s = pb_of(k.payload.b, k.payload.n);
		struct pbf g;
		while (k.has_ts && pb_next(&s, &g) > 0)
			if (g.id == PF_SERVICE_ALL_STARTED && g.wt == PF_WT_VARINT && g.v) {
				r->view_raw = k.ts;
				r->has_view = 1;
			}
		return 0;
	}
	case PF_PACKET_SYSTEM_INFO:
		return pf_parse_sysinfo(r, k.payload.b, k.payload.n);
	case PF_PACKET_TRACK_DESCRIPTOR: {
		/* TP reserves the track when it reads the packet, but its sorter drops a packet
		 * with a negative time (trace_sorter_negative_timestamp_dropped), and with it what
		 * the parser would take from it: the process's or thread's name. */
		int64_t t;
		if (k.has_ts && !k.time_err && !pf_trace_time(r, k.abs_ts, k.dom, &t) && t < 0)
			r->ck.negative_packet_timestamps++;
		return pf_parse_track(r, k.payload.b, k.payload.n);
	}
	case PF_PACKET_TRACE_UUID:
		return pf_parse_uuid(r, k.payload.b, k.payload.n);
	case PF_PACKET_PERF_SAMPLE:
		return pf_parse_perf_sample(r, q, &k);
	}
	return 0;
}

/* Parses the complete framed packets at the start of b; *used says how far it got. Returns -1
 * on bytes that cannot be a Trace (the rest is unreadable), 0 otherwise (what is left is an
 * incomplete packet, for the caller to judge). */
static int parse_stream(struct reader *r, const uint8_t *b, size_t n, int depth, size_t *used)
{
	const uint8_t *p = b, *end = b + n;

	*used = 0;
	while (p < end && !r->err) {
		const uint8_t *q = p;
		uint64_t tag, len;
		int rc = get_varint(&q, end, &tag);
		if (rc)
			return rc < 0 ? -1 : 0;
		/* Inside a chunk every record must be a packet (TP: "Expected TracePacket tag");
		 * at the top level other fields are skipped. */
		if ((tag != PACKET_KEY && depth) || !(tag >> 3) || tag >> 32)
			return -1;
		switch (tag & 7) {
		case PF_WT_VARINT:
			if ((rc = get_varint(&q, end, &len)))
				return rc < 0 ? -1 : 0;
			break;
		case PF_WT_FIXED64:
		case PF_WT_FIXED32:
			if ((size_t)(end - q) < ((tag & 7) == PF_WT_FIXED64 ? 8u : 4u))
				return 0;
			q += (tag & 7) == PF_WT_FIXED64 ? 8 : 4;
			break;
		case PF_WT_LEN:
			if ((rc = get_varint(&q, end, &len)))
				return rc < 0 ? -1 : 0;
			if (len > MAX_PACKET)
				return -1;
			if (len > (uint64_t)(end - q))
				return 0;
			if (!depth)
				r->pkt_off = r->base_off + (uint64_t)(p - b);
			if (tag == PACKET_KEY && len && do_packet(r, q, (size_t)len, depth)) {
				damaged(r, r->pkt_off);
				r->ck.corrupt++; /* the framing holds: skip just this packet */
			}
			q += len;
			break;
		default:
			return -1;
		}
		p = q;
		*used = (size_t)(p - b);
	}
	return 0;
}

/* Whole-file gzip (multi-member too), parsed as it inflates so that memory follows the largest
 * packet, not the file. A cut stream is read up to its last complete packet, but counted as
 * corrupt: trace_processor refuses such a file. */
static int read_gzip(struct reader *r, const uint8_t *data, size_t len)
{
	z_stream z;
	uint8_t *buf = NULL;
	size_t cap = 0, have = 0, used;
	uint64_t total = 0;
	int rc = Z_OK, ended = 0, err = 0, sniffed = 0, bad = 0;
	size_t limit = len > (MAX_PACKET - 65536) / 1032 ? MAX_PACKET : len * 1032 + 65536;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
	const uint8_t *in_end = data + len;
	for (;;) {
		if (have == cap) {
			size_t ncap = cap ? cap * 2 : len < 8192 ? 65536 : 1024 * 1024;
			if (cap >= limit) {
				bad = 1; /* a packet longer than the input could ever inflate to */
				break;
			}
			uint8_t *p = realloc(buf, ncap > limit ? limit : ncap);
			if (!p) {
				err = -ENOMEM;
				break;
			}
			buf = p;
			cap = ncap > limit ? limit : ncap;
		}
		if (!z.avail_in && z.next_in < in_end) {
			size_t left = (size_t)(in_end - z.next_in);
			z.avail_in = (uInt)(left > UINT32_MAX ? UINT32_MAX : left);
		}
		z.next_out = buf + have;
		z.avail_out = (uInt)(cap - have);
		rc = inflate(&z, Z_NO_FLUSH);
		total += (cap - have) - z.avail_out;
		have = cap - z.avail_out;
		if (!sniffed && have) {
			sniffed = 1;
			if (buf[0] != PACKET_KEY) {
				cuptrace_err("gzip file does not hold a Perfetto protobuf trace "
				             "(first byte 0x%02x)",
				             buf[0]);
				err = -EINVAL;
				break;
			}
		}
		r->base_off = total - have; /* where buf starts in the inflated trace */
		if (parse_stream(r, buf, have, 0, &used)) {
			damaged(r, r->base_off + used);
			bad = 1;
			have = 0;
			break;
		}
		memmove(buf, buf + used, have - used);
		have -= used;
		if (r->err)
			break;
		if (rc == Z_STREAM_END) {
			size_t left = (size_t)(in_end - z.next_in);
			if (!left) {
				ended = 1;
				break;
			}
			if (left >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
				inflateReset(&z); /* the next member */
				continue;
			}
			ended = bad = 1; /* garbage after the gzip stream */
			break;
		}
		if (rc == Z_BUF_ERROR && z.avail_out)
			break; /* input exhausted mid-stream */
		if (rc == Z_MEM_ERROR) {
			err = -ENOMEM;
			break;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR) {
			bad = 1; /* corrupt deflate data */
			break;
		}
	}
	/* Offsets into the inflated trace: the compressed file has no packet boundaries. */
	if (bad || (!err && !r->err && !ended) || have)
		damaged(r, total - have);
	if (bad || (!err && !r->err && !ended))
		r->ck.corrupt++; /* ui.perfetto.dev refuses a cut gzip stream */
	r->ck.truncated_bytes += have;
	inflateEnd(&z);
	free(buf);
	if (!err && !sniffed && !total && !ended)
		return 0; /* cut within the gzip header: nothing to read */
	return err;
}

/* ---- the whole file ---- */

/* The ts of an event relative to the first global snapshot; -1 if its clock is not in it. */
static int to_rel(struct reader *r, struct rev *e)
{
	if (!r->have_snap) {
		if (e->dom && e->dom != CLOCK_BOOTTIME_ID)
			return -1;
		return 0;
	}
	uint32_t c = e->dom;
	if (!c) {
		c = r->snap_primary;
		if (!c) {
			c = r->snap_id[0];
			for (size_t i = 0; i < r->nsnap; i++)
				if (r->snap_id[i] == CLOCK_BOOTTIME_ID)
					c = CLOCK_BOOTTIME_ID;
		}
	}
	for (size_t i = 0; i < r->nsnap; i++) {
		if (r->snap_id[i] == c) {
			e->ts = (int64_t)((uint64_t)e->ts - r->snap_val[i]);
			return 0;
		}
	}
	return -1;
}

int pf_decode(struct reader *r, const void *data, size_t len)
{
	const uint8_t *b = data;
	int err = 0;

	memset(r, 0, sizeof(*r));
	cuptrace_strtab_init(&r->strs);
	cuptrace_stacktab_init(&r->stk);
	r->ck.file_bytes = len;
	if (!len) {
		cuptrace_info("empty trace file");
	} else if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b) {
		r->ck.damage_in_gzip = 1;
		err = read_gzip(r, b, len);
	} else if (b[0] == PACKET_KEY) {
		size_t used;
		if (parse_stream(r, b, len, 0, &used)) {
			damaged(r, used);
			r->ck.corrupt++; /* bytes that cannot be a Trace: the rest is not read */
			r->ck.truncated_bytes += len - used;
		} else if (used < len) {
			damaged(r, used);
			r->ck.truncated_bytes += len - used;
		}
	} else if (len >= 4 && !memcmp(b, "\x28\xb5\x2f\xfd", 4)) {
		cuptrace_err("zstd-compressed traces are not supported: decompress it first");
		err = -EINVAL;
	} else {
		cuptrace_err("not a Perfetto protobuf trace (first byte 0x%02x; expected 0x0a, or "
		             "1f 8b for gzip)",
		             b[0]);
		err = -EINVAL;
	}
	if (!err)
		err = r->err;
	if (!err && r->ck.corrupt && !r->ck.packets) {
		cuptrace_err("not a Perfetto trace, or corrupt from its start");
		err = -EINVAL;
	}
	if (err)
		return err;

	/* Now that the snapshot is known: the events whose clock could not be converted when
	 * they were read (TP defers those to the end of the file too) are checked against
	 * trace_processor's rule; the others passed it in pf_parse_event already. */
	for (size_t i = 0; i < r->nevs; i++) {
		struct rev *e = &r->evs[i];
		int64_t t;
		if (!pf_trace_time(r, (uint64_t)e->ts, e->dom, &t) && t < 0) {
			e->dropped = 1;
			r->ck.negative_timestamps++;
		} else if (to_rel(r, e)) {
			e->dropped = 1;
			r->ck.clock_errors++;
		}
	}
	if (r->has_view) {
		struct rev v = {.ts = (int64_t)r->view_raw, .dom = CLOCK_BOOTTIME_ID};
		if (!to_rel(r, &v)) {
			r->ck.view_start_ns = v.ts;
			r->ck.has_view_start = 1;
		}
	}
	return 0;
}

void pf_reader_free(struct reader *r)
{
	for (size_t i = 0; i < r->nseqs; i++) {
		for (int k = 0; k < IT_N; k++)
			cuptrace_u64map_free(&r->seqs[i].tab[k]);
		for (int k = 0; k < CT_N; k++)
			cuptrace_u64map_free(&r->seqs[i].ctab[k]);
		free(r->seqs[i].clocks);
	}
	free(r->seqs);
	cuptrace_u64map_free(&r->seq_of);
	cuptrace_u64map_free(&r->trk_of);
	cuptrace_u64map_free(&r->pid_of);
	cuptrace_u64map_free(&r->tid_of);
	cuptrace_strtab_free(&r->strs);
	free(r->evs);
	free(r->args);
	free(r->flows);
	free(r->trk);
	free(r->cmds);
	free(r->meta0);
	free(r->meta);
	free(r->zbuf);
	free(r->maps);
	free(r->frames);
	cuptrace_stacktab_free(&r->stk);
}
