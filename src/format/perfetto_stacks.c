/* Call stacks in the Perfetto sink (issue 27): the stack() op keeps each stack, and a slice that
 * names one gets TrackEvent.callstack_iid, its stack's frames interned on the slice's sequence
 * the first time that sequence (in its current generation) uses them: InternedData.callstacks,
 * frames, function_names, source_paths, mappings, build_ids and mapping_paths, which the UI shows
 * as the slice's call stack. A Python frame is a function, a source path and a line, with no
 * mapping (trace_processor gives such frames a dummy mapping); a native frame is a mapping (its
 * file, split into path components as trace_processor joins them with '/', and its raw build
 * id) and rel_pc, and its function if symbolized.
 *
 * iids are the sink's own ids of each thing (the same on every sequence), so what a sequence
 * was sent is a set of (table, iid). Called by perfetto_encode.c (slices) and perfetto_writer.c
 * (the op, and freeing); calls perfetto_seq.c only through s->out. Off the hot path: a trace
 * without stacks never comes here. */
#include "format/perfetto_sink.h"
#include "common/util.h"
#include "output/output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { T_FUNC, T_PATH, T_BUILD, T_MPATH, T_FRAME, T_MAPPING, T_STACK, T_N };

struct pfs_frame {
	uint32_t func, path, line, mapping; /* iids, 0: none */
	uint64_t rel_pc;
};

struct pfs_mapping {
	uint32_t build;
	uint32_t *comps; /* mapping_paths iids */
	size_t ncomps;
};

struct pfs_stack {
	uint32_t *frames; /* frame iids, outermost first */
	size_t n;
};

struct pf_stacks {
	struct cuptrace_strtab str[4];    /* T_FUNC .. T_MPATH: the strings, id = iid */
	struct cuptrace_strtab frame_key; /* a frame's fields as bytes, id = frame iid */
	struct pfs_frame *frames;
	size_t nframes, fcap;
	struct cuptrace_strtab mapping_key; /* module \0 build id, id = mapping iid */
	struct pfs_mapping *mappings;
	size_t nmappings, mcap;
	struct cuptrace_u64map stack_idx; /* stack id -> index + 1 */
	struct pfs_stack *stacks;
	size_t nstacks, scap;
	uint8_t *buf, *tmp; /* the packet, and a nested message being built */
	size_t len, cap, tlen, tcap;
};

static uint32_t str_id(struct pf_stacks *k, int t, const char *s, size_t n)
{
	return cuptrace_strtab_intern(&k->str[t], s, n);
}

static int hexval(int c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
	                              : -1;
}

static uint32_t mapping_id(struct pf_stacks *k, const char *module, const char *build)
{
	char key[8192];
	int n = snprintf(key, sizeof(key), "%s%c%s", module ? module : "", 0, build ? build : "");
	if (n < 0 || (size_t)n >= sizeof(key))
		return 0;
	size_t before = k->mapping_key.n;
	uint32_t id = cuptrace_strtab_intern(&k->mapping_key, key, (size_t)n);
	if (!id || k->mapping_key.n == before)
		return id;
	if (CUPTRACE_GROW(k->mappings, k->mcap, id))
		return 0;
	struct pfs_mapping *m = &k->mappings[id - 1];
	memset(m, 0, sizeof(*m));
	k->nmappings = id;
	if (build && *build) {
		uint8_t raw[64];
		size_t len = 0;
		for (const char *p = build; p[0] && p[1] && len < sizeof(raw); p += 2) {
			int a = hexval(p[0]), b = hexval(p[1]);
			if (a < 0 || b < 0)
				break;
			raw[len++] = (uint8_t)(a << 4 | b);
		}
		m->build = len ? str_id(k, T_BUILD, (const char *)raw, len) : 0;
	}
	const char *p = module ? module : "";
	while (*p) {
		while (*p == '/')
			p++;
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (!len)
			break;
		uint32_t c = str_id(k, T_MPATH, p, len);
		size_t cap = m->ncomps;
		if (!c || cuptrace_grow_to(&m->comps, &cap, m->ncomps + 1, sizeof(*m->comps)))
			return 0;
		m->comps[m->ncomps++] = c;
		p += len;
	}
	return id;
}

static uint32_t frame_id(struct pf_stacks *k, const struct cuptrace_frame *f)
{
	struct pfs_frame x = {0};
	if (f->function && !(x.func = str_id(k, T_FUNC, f->function, strlen(f->function))))
		return 0;
	if (f->file && !(x.path = str_id(k, T_PATH, f->file, strlen(f->file))))
		return 0;
	x.line = f->line;
	if (f->kind == CUPTRACE_FRAME_NATIVE) {
		if (!(x.mapping = mapping_id(k, f->module, f->build_id)))
			return 0;
		x.rel_pc = f->rel_pc;
	}
	size_t before = k->frame_key.n;
	uint32_t id = cuptrace_strtab_intern(&k->frame_key, (const char *)&x, sizeof(x));
	if (!id || k->frame_key.n == before)
		return id;
	if (CUPTRACE_GROW(k->frames, k->fcap, id))
		return 0;
	k->frames[id - 1] = x;
	k->nframes = id;
	return id;
}

int pf_stack(struct cuptrace_sink *sk, const struct cuptrace_stack *st)
{
	struct pf_sink *s = to_pf(sk);
	if (s->err)
		return s->err;
	if (!s->stk) {
		if (!(s->stk = calloc(1, sizeof(*s->stk))))
			return fail(s, -ENOMEM);
		for (int t = 0; t < 4; t++)
			cuptrace_strtab_init(&s->stk->str[t]);
		cuptrace_strtab_init(&s->stk->frame_key);
		cuptrace_strtab_init(&s->stk->mapping_key);
		cuptrace_u64map_init(&s->stk->stack_idx);
	}
	struct pf_stacks *k = s->stk;
	int created;
	uint64_t *slot = cuptrace_u64map_put(&k->stack_idx, st->id, &created);
	if (!slot)
		return fail(s, -ENOMEM);
	if (!created)
		return 0;
	if (CUPTRACE_GROW(k->stacks, k->scap, k->nstacks + 1))
		return fail(s, -ENOMEM);
	struct pfs_stack *x = &k->stacks[k->nstacks];
	x->n = st->nframes;
	x->frames = malloc((st->nframes ? st->nframes : 1) * sizeof(*x->frames));
	if (!x->frames)
		return fail(s, -ENOMEM);
	for (size_t i = 0; i < st->nframes; i++)
		if (!(x->frames[i] = frame_id(k, &st->frames[i]))) {
			free(x->frames);
			return fail(s, -ENOMEM);
		}
	*slot = ++k->nstacks;
	return 0;
}

/* ---- encoding: a growable buffer; nested messages are built in tmp, then copied ---- */

static int put(uint8_t **b, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (cuptrace_grow_to(b, cap, *len + n, 1))
		return -ENOMEM;
	memcpy(*b + *len, p, n);
	*len += n;
	return 0;
}

static int put_varint(uint8_t **b, size_t *len, size_t *cap, uint64_t v)
{
	uint8_t x[10];
	return put(b, len, cap, x, cuptrace_put_varint(x, v));
}

#define T(k) &(k)->tmp, &(k)->tlen, &(k)->tcap
#define B(k) &(k)->buf, &(k)->len, &(k)->cap

static int tmp_field(struct pf_stacks *k, unsigned field, uint64_t v)
{
	return put_varint(T(k), PF_KEY(field, PF_WT_VARINT)) || put_varint(T(k), v) ? -ENOMEM : 0;
}

/* tmp as field `field` of the packet's InternedData (in buf), and tmp emptied. */
static int flush_tmp(struct pf_stacks *k, unsigned field)
{
	int r = put_varint(B(k), PF_KEY(field, PF_WT_LEN)) || put_varint(B(k), k->tlen) ||
	        put(B(k), k->tmp, k->tlen);
	k->tlen = 0;
	return r ? -ENOMEM : 0;
}

static int interned_string(struct pf_stacks *k, unsigned field, int t, uint32_t iid)
{
	size_t n = k->str[t].lens[iid - 1];
	if (tmp_field(k, 1, iid) || put_varint(T(k), PF_KEY(2, PF_WT_LEN)) || put_varint(T(k), n) ||
	    put(T(k), k->str[t].strs[iid - 1], n))
		return -ENOMEM;
	return flush_tmp(k, field);
}

/* Whether q was sent (table t, iid) in its generation; marks it sent. */
static int first_time(struct pf_seq *q, int t, uint32_t iid, int *err)
{
	int created = 0;
	if (!q->stk_sent.cap)
		cuptrace_u64map_init(&q->stk_sent);
	if (!cuptrace_u64map_put(&q->stk_sent, (uint64_t)t << 32 | iid, &created))
		*err = -ENOMEM;
	return created;
}

static int send_string(struct pf_stacks *k, struct pf_seq *q, int t, unsigned field, uint32_t iid,
                       int *err)
{
	return iid && first_time(q, t, iid, err) ? interned_string(k, field, t, iid) : 0;
}

static int send_frame(struct pf_stacks *k, struct pf_seq *q, uint32_t iid, int *err)
{
	if (!first_time(q, T_FRAME, iid, err))
		return 0;
	const struct pfs_frame *f = &k->frames[iid - 1];
	int r = send_string(k, q, T_FUNC, PF_INTERNED_FUNCTION_NAMES, f->func, err) ||
	        send_string(k, q, T_PATH, PF_INTERNED_SOURCE_PATHS, f->path, err);
	if (!r && f->mapping && first_time(q, T_MAPPING, f->mapping, err)) {
		const struct pfs_mapping *m = &k->mappings[f->mapping - 1];
		r = send_string(k, q, T_BUILD, PF_INTERNED_BUILD_IDS, m->build, err);
		for (size_t i = 0; i < m->ncomps && !r; i++)
			r = send_string(k, q, T_MPATH, PF_INTERNED_MAPPING_PATHS, m->comps[i], err);
		r = r || tmp_field(k, PF_MAPPING_IID, f->mapping) ||
		    (m->build && tmp_field(k, PF_MAPPING_BUILD_ID, m->build));
		for (size_t i = 0; i < m->ncomps && !r; i++)
			r = tmp_field(k, PF_MAPPING_PATH_STRING_IDS, m->comps[i]);
		r = r || flush_tmp(k, PF_INTERNED_MAPPINGS);
	}
	r = r || tmp_field(k, PF_FRAME_IID, iid) ||
	    (f->func && tmp_field(k, PF_FRAME_FUNCTION_NAME_ID, f->func)) ||
	    (f->mapping && tmp_field(k, PF_FRAME_MAPPING_ID, f->mapping)) ||
	    (f->mapping && tmp_field(k, PF_FRAME_REL_PC, f->rel_pc)) ||
	    (f->path && tmp_field(k, PF_FRAME_SOURCE_PATH_IID, f->path)) ||
	    (f->line && tmp_field(k, PF_FRAME_LINE_NUMBER, f->line)) ||
	    flush_tmp(k, PF_INTERNED_FRAMES);
	return r ? -ENOMEM : 0;
}

uint64_t pf_stack_intern(struct pf_sink *s, struct pf_seq *q, uint64_t stack_id)
{
	struct pf_stacks *k = s->stk;
	uint64_t *v = k && stack_id ? cuptrace_u64map_get(&k->stack_idx, stack_id) : NULL;
	if (!v || s->err)
		return 0;
	int err = 0;
	if (!first_time(q, T_STACK, (uint32_t)*v, &err))
		return err ? (fail(s, err), 0) : *v;
	const struct pfs_stack *x = &k->stacks[*v - 1];
	/* InternedData into buf (after room for the packet's header), then the header. */
	k->len = 0;
	int r = put(B(k), (uint8_t[32]){0}, 32);
	for (size_t i = 0; i < x->n && !r; i++)
		r = send_frame(k, q, x->frames[i], &err);
	r = r || tmp_field(k, PF_CALLSTACK_IID, *v);
	for (size_t i = 0; i < x->n && !r; i++)
		r = tmp_field(k, PF_CALLSTACK_FRAME_IDS, x->frames[i]);
	r = r || flush_tmp(k, PF_INTERNED_CALLSTACKS);
	if (r || err) {
		fail(s, -ENOMEM);
		return 0;
	}
	/* TracePacket{trusted_packet_sequence_id, interned_data, sequence_flags}, framed. */
	uint8_t head[32], pk[48];
	size_t body = k->len - 32, h = 0, n = 0;
	head[h++] = PF_KEY0(PF_PACKET_INTERNED_DATA, PF_WT_LEN);
	h += cuptrace_put_varint(head + h, body);
	pk[n++] = PF_KEY0(PF_PACKET_SEQUENCE_ID, PF_WT_VARINT);
	n += cuptrace_put_varint(pk + n, q->id);
	pk[n++] = PF_KEY0(PF_PACKET_SEQUENCE_FLAGS, PF_WT_VARINT);
	pk[n++] = SEQ_NEEDS;
	uint8_t frame[16];
	size_t f = 0;
	frame[f++] = PF_KEY0(PF_TRACE_PACKET, PF_WT_LEN);
	f += cuptrace_put_varint(frame + f, n + h + body);
	/* frame, pk and head go just before the body, in the 32 bytes kept for them. */
	if (f + n + h > 32) {
		fail(s, -EIO);
		return 0;
	}
	uint8_t *start = k->buf + 32 - (f + n + h);
	memcpy(start, frame, f);
	memcpy(start + f, pk, n);
	memcpy(start + f + n, head, h);
	int e = cuptrace_output_write(s->out, start, f + n + h + body);
	if (e) {
		fail(s, e);
		return 0;
	}
	return *v;
}

void pf_stacks_free(struct pf_sink *s)
{
	struct pf_stacks *k = s->stk;
	if (!k)
		return;
	for (int t = 0; t < 4; t++)
		cuptrace_strtab_free(&k->str[t]);
	cuptrace_strtab_free(&k->frame_key);
	cuptrace_strtab_free(&k->mapping_key);
	for (size_t i = 0; i < k->nmappings; i++)
		free(k->mappings[i].comps);
	free(k->mappings);
	free(k->frames);
	for (size_t i = 0; i < k->nstacks; i++)
		free(k->stacks[i].frames);
	free(k->stacks);
	cuptrace_u64map_free(&k->stack_idx);
	free(k->buf);
	free(k->tmp);
	free(k);
	s->stk = NULL;
}
