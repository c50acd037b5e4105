/* The Perfetto sink's hot packets (slice BEGIN and END, instants, counters: all but a handful of
 * a trace's packets), hand-encoded straight into the packing buffer, and the interning they use.
 *
 * Why by hand: protobuf-c walks every field descriptor of every message twice (get_packed_size,
 * then pack) to write a dozen bytes, and that cost more than everything else the writer thread did.
 * Measured on the launch loop of convert_bench (4 x 20,000 launches, 160,000 slices), this sink
 * alone, uncompressed: about 780 ns per slice with protobuf-c (two thirds of it in get_packed_size
 * and pack, 9% in interning), about 90 ns hand-encoded with the interning cache below. In
 * convert_bench itself, the sink's CPU time went from 131 ms to 17 ms. The hand encoder writes
 * exactly the bytes protobuf-c would (fields in field-number order inside each message, minimal
 * varints); test_perfetto's test_canonical_encoding checks that against protobuf-c. */
#include "format/formats.h"
#include "common/util.h"
#include "format/perfetto_sink.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* A sequence starts a new interning generation past these, so that memory stays bounded. */
#define GEN_MAX_ENTRIES (64u * 1024u)
#define GEN_MAX_BYTES   (16u * 1024u * 1024u)

/* What interning found for one arg: its iids and whether they are new on the sequence. */
struct pf_arg_iids {
	uint32_t key, val; /* val: string values only */
	uint8_t key_new, val_new;
};

/* ---- interning ---- */

static size_t icache_slot(const char *p)
{
	return (size_t)(((uint64_t)(uintptr_t)p * 0x9E3779B97F4A7C15ull) >> (64 - ICACHE_BITS));
}

/* Returns the iid of str on q's table k (new entries are reported in *is_new), 0 on ENOMEM. */
static uint32_t intern(struct pf_seq *q, int k, const char *str, uint8_t *is_new)
{
	struct pf_icache *c = &q->cache[k][icache_slot(str)];

	if (c->ptr == str && c->iid && !strcmp(q->tab[k].strs[c->iid - 1], str)) {
		*is_new = 0;
		return c->iid;
	}
	size_t len = strlen(str);
	size_t before = q->tab[k].n;
	uint32_t id = cuptrace_strtab_intern(&q->tab[k], str, len);
	if (!id)
		return 0;
	*is_new = q->tab[k].n != before;
	if (*is_new) {
		q->entries++;
		q->bytes += len;
	}
	c->ptr = str;
	c->iid = id;
	return id;
}

/* ---- the hot path: TrackEvent packets, hand-encoded ----
 *
 * Tags are (field number << 3 | wire type) as varint bytes, made from the field numbers named
 * in perfetto_fields.h (those of proto/perfetto_trace.proto). Inside every message the fields go
 * in field-number order and repeated fields in the order given, as protobuf-c writes them. */

/* TracePacket */
#define P_TIMESTAMP  PF_KEY0(PF_PACKET_TIMESTAMP, PF_WT_VARINT)
#define P_SEQ_ID     PF_KEY0(PF_PACKET_SEQUENCE_ID, PF_WT_VARINT)
#define P_EVENT      PF_KEY0(PF_PACKET_TRACK_EVENT, PF_WT_LEN)
#define P_INTERNED   PF_KEY0(PF_PACKET_INTERNED_DATA, PF_WT_LEN)
#define P_FLAGS      PF_KEY0(PF_PACKET_SEQUENCE_FLAGS, PF_WT_VARINT)
#define P_CLOCK_ID_0 PF_KEY0(PF_PACKET_TIMESTAMP_CLOCK_ID, PF_WT_VARINT) /* D0 03 */
#define P_CLOCK_ID_1 PF_KEY1(PF_PACKET_TIMESTAMP_CLOCK_ID, PF_WT_VARINT)
/* TrackEvent; repeated fields unpacked */
#define E_CATEGORY_IID PF_KEY0(PF_EVENT_CATEGORY_IIDS, PF_WT_VARINT)
#define E_ANNOTATION   PF_KEY0(PF_EVENT_DEBUG_ANNOTATIONS, PF_WT_LEN)
#define E_TYPE         PF_KEY0(PF_EVENT_TYPE, PF_WT_VARINT)
#define E_NAME_IID     PF_KEY0(PF_EVENT_NAME_IID, PF_WT_VARINT)
#define E_COUNTER_0    PF_KEY0(PF_EVENT_COUNTER_VALUE, PF_WT_VARINT) /* F0 01 */
#define E_COUNTER_1    PF_KEY1(PF_EVENT_COUNTER_VALUE, PF_WT_VARINT)
#define E_DCOUNTER_0   PF_KEY0(PF_EVENT_DOUBLE_COUNTER_VALUE, PF_WT_FIXED64) /* E1 02 */
#define E_DCOUNTER_1   PF_KEY1(PF_EVENT_DOUBLE_COUNTER_VALUE, PF_WT_FIXED64)
#define E_FLOW_0       PF_KEY0(PF_EVENT_FLOW_IDS, PF_WT_FIXED64) /* F9 02 */
#define E_FLOW_1       PF_KEY1(PF_EVENT_FLOW_IDS, PF_WT_FIXED64)
#define E_CORR_0       PF_KEY0(PF_EVENT_CORRELATION_ID, PF_WT_VARINT) /* A0 03 */
#define E_CORR_1       PF_KEY1(PF_EVENT_CORRELATION_ID, PF_WT_VARINT)
#define E_STACK_0      PF_KEY0(PF_EVENT_CALLSTACK_IID, PF_WT_VARINT) /* C0 03 */
#define E_STACK_1      PF_KEY1(PF_EVENT_CALLSTACK_IID, PF_WT_VARINT)
/* DebugAnnotation */
#define A_NAME_IID  PF_KEY0(PF_ANNOTATION_NAME_IID, PF_WT_VARINT)
#define A_BOOL      PF_KEY0(PF_ANNOTATION_BOOL_VALUE, PF_WT_VARINT)
#define A_UINT      PF_KEY0(PF_ANNOTATION_UINT_VALUE, PF_WT_VARINT)
#define A_INT       PF_KEY0(PF_ANNOTATION_INT_VALUE, PF_WT_VARINT)
#define A_DOUBLE    PF_KEY0(PF_ANNOTATION_DOUBLE_VALUE, PF_WT_FIXED64)
#define A_POINTER   PF_KEY0(PF_ANNOTATION_POINTER_VALUE, PF_WT_VARINT)
#define A_STR_IID_0 PF_KEY0(PF_ANNOTATION_STRING_VALUE_IID, PF_WT_VARINT) /* 88 01 */
#define A_STR_IID_1 PF_KEY1(PF_ANNOTATION_STRING_VALUE_IID, PF_WT_VARINT)
/* InternedData, and EventCategory/EventName/DebugAnnotationName/InternedString inside it */
#define I_CATEGORY PF_KEY0(PF_INTERNED_EVENT_CATEGORIES, PF_WT_LEN)
#define I_NAME     PF_KEY0(PF_INTERNED_EVENT_NAMES, PF_WT_LEN)
#define I_KEY      PF_KEY0(PF_INTERNED_DEBUG_ANNOTATION_NAMES, PF_WT_LEN)
#define I_VALUE_0  PF_KEY0(PF_INTERNED_DEBUG_ANNOTATION_STRING_VALUES, PF_WT_LEN) /* EA 01 */
#define I_VALUE_1  PF_KEY1(PF_INTERNED_DEBUG_ANNOTATION_STRING_VALUES, PF_WT_LEN)
#define S_IID      PF_KEY0(PF_ENTRY_IID, PF_WT_VARINT)
#define S_STR      PF_KEY0(PF_ENTRY_NAME, PF_WT_LEN)
/* Trace.packet, the framing of every packet */
#define T_PACKET PF_KEY0(PF_TRACE_PACKET, PF_WT_LEN)

/* Bounds for pf_buf_reserve: a varint is at most 10 bytes, a tag here at most 2; a LEN field's
 * length is at most 10 bytes (1 kept by open_len, up to 9 more by close_len). */
#define B_FIXED 144 /* framing, packet header, time, TrackEvent scalars, LEN headers */
#define B_ARG   40  /* one DebugAnnotation: LEN header 11, name_iid 11, value 12 */
#define B_FLOW  10
#define B_ENTRY 40 /* one interned entry besides its string: LEN header 12, iid 11, str 11 */

static uint8_t *w_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static uint8_t *w_fixed64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return p + 8;
}

static uint8_t *w_double(uint8_t *p, double d)
{
	uint64_t v;
	memcpy(&v, &d, sizeof(v));
	return w_fixed64(p, v);
}

/* A LEN field whose size is not known yet: open_len keeps one byte for the length, which is
 * enough below 128 bytes (nearly always); close_len writes it, moving the body up if it needs
 * more. Returns the new end. */
static uint8_t *open_len(uint8_t *p)
{
	return p + 1;
}

static uint8_t *close_len(uint8_t *body, uint8_t *end)
{
	size_t n = (size_t)(end - body);
	uint8_t v[10];

	if (n < 0x80) {
		body[-1] = (uint8_t)n;
		return end;
	}
	size_t k = cuptrace_put_varint(v, n);
	memmove(body - 1 + k, body, n);
	memcpy(body - 1, v, k);
	return end + k - 1;
}

/* One interned entry: tag, then {iid, string}. */
static uint8_t *w_entry(uint8_t *p, const uint8_t *tag, size_t ntag, uint32_t iid,
                        const struct cuptrace_strtab *t)
{
	size_t len = t->lens[iid - 1];

	memcpy(p, tag, ntag);
	p = open_len(p + ntag);
	uint8_t *body = p;
	*p++ = S_IID;
	p = w_varint(p, iid);
	*p++ = S_STR;
	p = w_varint(p, len);
	memcpy(p, t->strs[iid - 1], len);
	return close_len(body, p + len);
}

/* One event's name, category and args, interned on its sequence. */
struct pf_ev {
	uint32_t name, cat; /* iids, 0 if none */
	uint8_t name_new, cat_new;
	size_t nnew;  /* new interned entries */
	size_t bytes; /* their strings' bytes */
};

/* Interns what an event names on q, into ev and s->ai. Returns 0 or a negative errno. */
static int ev_intern(struct pf_sink *s, struct pf_seq *q, struct pf_ev *ev, const char *name,
                     const char *category, const struct cuptrace_arg *args, size_t nargs)
{
	/* Worst case this event adds 2 + 2 * nargs entries; past the bound, start afresh. */
	if (q->entries + 2 + 2 * nargs > GEN_MAX_ENTRIES || q->bytes > GEN_MAX_BYTES) {
		if (pf_seq_open_generation(s, q))
			return s->err;
	}
	if (nargs > s->aicap) {
		struct pf_arg_iids *a = cuptrace_grow(s->ai, &s->aicap, nargs, sizeof(*a));
		if (!a)
			return -ENOMEM;
		s->ai = a;
	}
	size_t before = q->bytes;
	memset(ev, 0, sizeof(*ev));
	if (name) {
		if (!(ev->name = intern(q, IT_NAME, name, &ev->name_new)))
			return -ENOMEM;
		ev->nnew += ev->name_new;
	}
	if (category) {
		if (!(ev->cat = intern(q, IT_CAT, category, &ev->cat_new)))
			return -ENOMEM;
		ev->nnew += ev->cat_new;
	}
	for (size_t i = 0; i < nargs; i++) {
		const struct cuptrace_arg *a = &args[i];
		struct pf_arg_iids *x = &s->ai[i];

		if (!(x->key = intern(q, IT_KEY, a->key ? a->key : "", &x->key_new)))
			return -ENOMEM;
		ev->nnew += x->key_new;
		x->val = 0;
		x->val_new = 0;
		switch (a->type) {
		case CUPTRACE_ARG_INT:
		case CUPTRACE_ARG_UINT:
		case CUPTRACE_ARG_DOUBLE:
		case CUPTRACE_ARG_POINTER:
		case CUPTRACE_ARG_BOOL:
			break;
		case CUPTRACE_ARG_STRING:
		default: {
			/* Any bytes: InternedString.str is bytes, nothing needs escaping. */
			const char *v = a->type == CUPTRACE_ARG_STRING && a->v.s ? a->v.s : "";
			if (!(x->val = intern(q, IT_VAL, v, &x->val_new)))
				return -ENOMEM;
			ev->nnew += x->val_new;
			break;
		}
		}
	}
	ev->bytes = q->bytes - before; /* new entries' bytes: q->bytes counts exactly those */
	return 0;
}

/* Bytes the packet of an interned event may take, or 0 if that does not fit in a size_t. */
static size_t ev_bound(const struct pf_ev *ev, size_t nargs, size_t nflows)
{
	size_t n = B_FIXED + ev->bytes, t;

	if (nargs > SIZE_MAX / 64 || nflows > SIZE_MAX / 64 || ev->nnew > SIZE_MAX / 64)
		return 0;
	t = B_ARG * nargs + B_FLOW * nflows + B_ENTRY * ev->nnew;
	return n + t < n ? 0 : n + t;
}

/* The start of every event packet that names things: the track's sequence, the event interned
 * on it (into ev and s->ai), and room in the packing buffer for the whole packet. Returns the
 * sequence, or NULL with the error in s->err. */
static struct pf_seq *ev_prepare(struct pf_sink *s, uint64_t track, struct pf_ev *ev,
                                 const char *name, const char *category,
                                 const struct cuptrace_arg *args, size_t nargs, size_t nflows)
{
	struct pf_seq *q;
	size_t need;
	int err;

	if (s->err || !(q = pf_seq_get(s, track)))
		return NULL;
	if ((err = ev_intern(s, q, ev, name, category, args, nargs))) {
		fail(s, err);
		return NULL;
	}
	if (!(need = ev_bound(ev, nargs, nflows))) {
		fail(s, -ENOMEM);
		return NULL;
	}
	return pf_buf_reserve(s, need) ? NULL : q;
}

/* Whether the event uses interned data, which its packet must then say (SEQ_NEEDS). */
static int ev_needs(const struct pf_ev *ev, size_t nargs)
{
	return ev->name || ev->cat || nargs;
}

/* The packet's InternedData field, if the event made new entries. */
static uint8_t *w_interned(uint8_t *p, struct pf_sink *s, const struct pf_seq *q,
                           const struct pf_ev *ev, size_t nargs)
{
	static const uint8_t t_cat[] = {I_CATEGORY}, t_name[] = {I_NAME}, t_key[] = {I_KEY},
	                     t_val[] = {I_VALUE_0, I_VALUE_1};

	if (!ev->nnew)
		return p;
	*p++ = P_INTERNED;
	p = open_len(p);
	uint8_t *body = p;
	if (ev->cat_new)
		p = w_entry(p, t_cat, 1, ev->cat, &q->tab[IT_CAT]);
	if (ev->name_new)
		p = w_entry(p, t_name, 1, ev->name, &q->tab[IT_NAME]);
	for (size_t i = 0; i < nargs; i++)
		if (s->ai[i].key_new)
			p = w_entry(p, t_key, 1, s->ai[i].key, &q->tab[IT_KEY]);
	for (size_t i = 0; i < nargs; i++)
		if (s->ai[i].val_new)
			p = w_entry(p, t_val, 2, s->ai[i].val, &q->tab[IT_VAL]);
	return close_len(body, p);
}

/* The TrackEvent fields up to type (category, args), as interned in ev and s->ai. */
static uint8_t *w_event_head(uint8_t *p, struct pf_sink *s, const struct pf_ev *ev,
                             const struct cuptrace_arg *args, size_t nargs)
{
	if (ev->cat) {
		*p++ = E_CATEGORY_IID;
		p = w_varint(p, ev->cat);
	}
	for (size_t i = 0; i < nargs; i++) {
		const struct cuptrace_arg *a = &args[i];

		*p++ = E_ANNOTATION;
		p = open_len(p);
		uint8_t *body = p;
		*p++ = A_NAME_IID;
		p = w_varint(p, s->ai[i].key);
		switch (a->type) {
		case CUPTRACE_ARG_INT:
			*p++ = A_INT;
			p = w_varint(p, (uint64_t)a->v.i);
			break;
		case CUPTRACE_ARG_UINT:
			*p++ = A_UINT;
			p = w_varint(p, a->v.u);
			break;
		case CUPTRACE_ARG_DOUBLE:
			*p++ = A_DOUBLE;
			p = w_double(p, a->v.d);
			break;
		case CUPTRACE_ARG_POINTER:
			*p++ = A_POINTER;
			p = w_varint(p, a->v.u);
			break;
		case CUPTRACE_ARG_BOOL:
			*p++ = A_BOOL;
			*p++ = !!a->v.b;
			break;
		case CUPTRACE_ARG_STRING:
		default:
			*p++ = A_STR_IID_0;
			*p++ = A_STR_IID_1;
			p = w_varint(p, s->ai[i].val);
			break;
		}
		p = close_len(body, p);
	}
	return p;
}

/* The TrackEvent fields from type to name (type = 9, name_iid = 10). */
static uint8_t *w_event_type(uint8_t *p, int type, const struct pf_ev *ev)
{
	*p++ = E_TYPE;
	*p++ = (uint8_t)type;
	if (ev->name) {
		*p++ = E_NAME_IID;
		p = w_varint(p, ev->name);
	}
	return p;
}

static uint8_t *w_corr(uint8_t *p, uint64_t corr)
{
	if (corr) {
		*p++ = E_CORR_0;
		*p++ = E_CORR_1;
		p = w_varint(p, corr);
	}
	return p;
}

/* The packet's time: a delta on clock 64 if it does not go back, else absolute BOOTTIME, which
 * then needs timestamp_clock_id (*boottime). */
static uint64_t pkt_time(struct pf_sink *s, struct pf_seq *q, int64_t ts, int *boottime)
{
	uint64_t v;

	if (ts >= q->last_ts) {
		v = (uint64_t)ts - (uint64_t)q->last_ts;
		q->last_ts = ts;
		*boottime = 0;
	} else {
		v = (uint64_t)s->start_boottime + (uint64_t)ts;
		*boottime = 1;
	}
	if (ts > s->max_ts)
		s->max_ts = ts;
	return v;
}

static uint8_t *w_clock_id(uint8_t *p, int boottime)
{
	if (boottime) {
		*p++ = P_CLOCK_ID_0;
		*p++ = P_CLOCK_ID_1;
		*p++ = CLOCK_BOOTTIME_ID;
	}
	return p;
}

/* Opens the packet of an event at ts on q's sequence in s->buf, with the common head of the
 * packets that start with their time: 0A len, timestamp, sequence id. The body's start goes in
 * *body (w_packet_done), whether the time needs its clock in *bt (w_clock_id). */
static uint8_t *w_open_timed(struct pf_sink *s, struct pf_seq *q, int64_t ts, uint8_t **body,
                             int *bt)
{
	uint64_t time = pkt_time(s, q, ts, bt);
	uint8_t *p = s->buf;
	*p++ = T_PACKET;
	p = open_len(p);
	*body = p;
	*p++ = P_TIMESTAMP;
	p = w_varint(p, time);
	*p++ = P_SEQ_ID;
	return w_varint(p, q->id);
}

/* The sequence of track for a packet of at most B_FIXED bytes, s->buf reserved for it; NULL
 * once s has failed (s->err says why). */
static struct pf_seq *fixed_packet_seq(struct pf_sink *s, uint64_t track)
{
	struct pf_seq *q;
	if (s->err || !(q = pf_seq_get(s, track)) || pf_buf_reserve(s, B_FIXED))
		return NULL;
	return q;
}

/* Closes the packet framed at s->buf and hands it to the output. */
static int w_packet_done(struct pf_sink *s, uint8_t *body, uint8_t *end)
{
	end = close_len(body, end);
	int err = cuptrace_output_write(s->out, s->buf, (size_t)(end - s->buf));
	return err ? fail(s, err) : 0;
}

/* ---- ops ---- */

/* Every flow id of the slice, out and in alike, goes in flow_ids: trace_processor orders the
 * two ends by time (the reference's pattern B), so the order in which CUPTI delivers the API
 * record and the GPU record does not matter. An id on both lists (a step) is written once. */
static uint8_t *w_flows(uint8_t *p, const struct cuptrace_slice *e)
{
	for (size_t i = 0; i < e->nflows_out; i++) {
		*p++ = E_FLOW_0;
		*p++ = E_FLOW_1;
		p = w_fixed64(p, e->flows_out[i]);
	}
	int dedupe = e->nflows_out && e->nflows_out * e->nflows_in <= 65536;
	for (size_t i = 0; i < e->nflows_in; i++) {
		size_t j = 0;
		while (dedupe && j < e->nflows_out && e->flows_out[j] != e->flows_in[i])
			j++;
		if (!dedupe || j == e->nflows_out) {
			*p++ = E_FLOW_0;
			*p++ = E_FLOW_1;
			p = w_fixed64(p, e->flows_in[i]);
		}
	}
	return p;
}

int pf_slice(struct cuptrace_sink *sk, const struct cuptrace_slice *e)
{
	struct pf_sink *s = to_pf(sk);
	size_t nflows = e->nflows_out + e->nflows_in;
	struct pf_ev ev;
	struct pf_seq *q;
	uint8_t *p, *body, *te;
	uint64_t t;
	int bt;

	if (nflows < e->nflows_out)
		nflows = SIZE_MAX; /* the sum overflowed: ev_bound refuses it (ENOMEM) */
	if (!(q = ev_prepare(s, e->track_uuid, &ev, e->name, e->category, e->args, e->nargs,
	                     nflows)))
		return s->err;
	/* After ev_prepare, which may have started a new generation on q; in a packet of its own
	 * (perfetto_stacks.c keeps its own buffer, so s->buf's reservation stands). */
	uint64_t stack = e->stack_id ? pf_stack_intern(s, q, e->stack_id) : 0;
	if (s->err)
		return s->err;

	/* Field order for zlib: the bytes that change from one slice to the next (flow ids,
	 * correlation id, then the time, which the END continues) form as few runs as possible
	 * between bytes that repeat, and each run costs a match. So: sequence id and flags, the
	 * event (flows and correlation id last, by field number), new interned data, then the
	 * time. */
	p = s->buf;
	*p++ = T_PACKET;
	p = open_len(p);
	body = p;
	*p++ = P_SEQ_ID;
	p = w_varint(p, q->id);
	if (ev_needs(&ev, e->nargs) || stack) {
		*p++ = P_FLAGS;
		*p++ = SEQ_NEEDS;
	}
	*p++ = P_EVENT;
	p = open_len(p);
	te = p;
	p = w_event_head(p, s, &ev, e->args, e->nargs);
	p = w_event_type(p, TE_BEGIN, &ev);
	p = w_flows(p, e);
	p = w_corr(p, e->correlation_id);
	if (stack) {
		*p++ = E_STACK_0;
		*p++ = E_STACK_1;
		p = w_varint(p, stack);
	}
	p = close_len(te, p);
	p = w_interned(p, s, q, &ev, e->nargs);
	t = pkt_time(s, q, e->ts, &bt);
	*p++ = P_TIMESTAMP;
	p = w_varint(p, t);
	p = w_clock_id(p, bt);
	if (w_packet_done(s, body, p))
		return s->err;

	/* END right after BEGIN: on one track slices nest or are disjoint, so an unnamed END closes
	 * the right slice once trace_processor has sorted by (ts, file order). The buffer holds
	 * B_FIXED bytes at least, more than this packet's 40. */
	static const uint8_t end_event[] = {P_EVENT, 2, E_TYPE, TE_END};
	int64_t end;
	if (__builtin_add_overflow(e->ts, e->dur > 0 ? e->dur : 0, &end))
		end = INT64_MAX;
	p = w_open_timed(s, q, end, &body, &bt);
	memcpy(p, end_event, sizeof(end_event));
	p = w_clock_id(p + sizeof(end_event), bt);
	return w_packet_done(s, body, p);
}

int pf_instant(struct cuptrace_sink *sk, const struct cuptrace_instant *e)
{
	struct pf_sink *s = to_pf(sk);
	struct pf_ev ev;
	struct pf_seq *q;
	uint8_t *p, *body, *te;
	int bt;

	if (!(q = ev_prepare(s, e->track_uuid, &ev, e->name, e->category, e->args, e->nargs, 0)))
		return s->err;

	/* Field-number order, as protobuf-c packed it before this was hand-encoded. */
	p = w_open_timed(s, q, e->ts, &body, &bt);
	*p++ = P_EVENT;
	p = open_len(p);
	te = p;
	p = w_event_head(p, s, &ev, e->args, e->nargs);
	p = w_event_type(p, TE_INSTANT, &ev);
	p = w_corr(p, e->correlation_id);
	p = close_len(te, p);
	p = w_interned(p, s, q, &ev, e->nargs);
	if (ev_needs(&ev, e->nargs)) {
		*p++ = P_FLAGS;
		*p++ = SEQ_NEEDS;
	}
	p = w_clock_id(p, bt);
	return w_packet_done(s, body, p);
}

/* Counter values go on the counter track's own sequence; its descriptor was written by track(),
 * so it precedes every value in file order as trace_processor requires. */
int pf_counter(struct cuptrace_sink *sk, const struct cuptrace_counter *e)
{
	struct pf_sink *s = to_pf(sk);
	struct pf_seq *q;
	uint8_t *p, *body, *te;
	int bt;

	if (!(q = fixed_packet_seq(s, e->track_uuid)))
		return s->err;
	p = w_open_timed(s, q, e->ts, &body, &bt);
	*p++ = P_EVENT;
	p = open_len(p);
	te = p;
	*p++ = E_TYPE;
	*p++ = TE_COUNTER;
	if (e->is_double) {
		*p++ = E_DCOUNTER_0;
		*p++ = E_DCOUNTER_1;
		p = w_double(p, e->d);
	} else {
		*p++ = E_COUNTER_0;
		*p++ = E_COUNTER_1;
		p = w_varint(p, (uint64_t)e->i);
	}
	p = close_len(te, p);
	p = w_clock_id(p, bt);
	return w_packet_done(s, body, p);
}

/* A host stack sample (issue 46) as Perfetto's own CPU sample: TracePacket.perf_sample
 * (PerfSample{pid, tid, callstack_iid, cpu_mode}), on the thread track's sequence, where its
 * callstack is interned (trace_processor resolves a PerfSample's callstack_iid on the packet's
 * sequence and puts the sample in its perf_sample table, which the UI draws per thread). */
int pf_sample(struct cuptrace_sink *sk, const struct cuptrace_sample *e)
{
	struct pf_sink *s = to_pf(sk);
	struct pf_seq *q;
	uint8_t *p, *body, *ps;
	int bt;

	if (!(q = fixed_packet_seq(s, e->track_uuid)))
		return s->err;
	/* perfetto_stacks.c writes its packets from a buffer of its own: s->buf's stands. */
	uint64_t stack = pf_stack_intern(s, q, e->stack_id);
	if (s->err || !stack)
		return s->err;
	p = w_open_timed(s, q, e->ts, &body, &bt);
	*p++ = P_FLAGS;
	*p++ = SEQ_NEEDS;
	*p++ = PF_KEY0(PF_PACKET_PERF_SAMPLE, PF_WT_LEN);
	*p++ = PF_KEY1(PF_PACKET_PERF_SAMPLE, PF_WT_LEN);
	p = open_len(p);
	ps = p;
	*p++ = PF_KEY0(PF_PERF_SAMPLE_PID, PF_WT_VARINT);
	p = w_varint(p, (uint32_t)e->pid);
	*p++ = PF_KEY0(PF_PERF_SAMPLE_TID, PF_WT_VARINT);
	p = w_varint(p, (uint32_t)e->tid);
	*p++ = PF_KEY0(PF_PERF_SAMPLE_CALLSTACK_IID, PF_WT_VARINT);
	p = w_varint(p, stack);
	*p++ = PF_KEY0(PF_PERF_SAMPLE_CPU_MODE, PF_WT_VARINT);
	*p++ = PF_CPU_MODE_USER;
	p = close_len(ps, p);
	p = w_clock_id(p, bt);
	return w_packet_done(s, body, p);
}
