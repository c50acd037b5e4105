/* A cursor over protobuf wire format, field by field, without copying: what the Perfetto
 * reader's decoders walk messages with. Private to src/read. */
#ifndef CUPTRACE_READ_PB_CURSOR_H
#define CUPTRACE_READ_PB_CURSOR_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format/perfetto_fields.h"

struct pb {
	const uint8_t *p, *end;
};

struct pbf {
	uint32_t id;
	int wt;
	uint64_t v;       /* varint, fixed64, fixed32 */
	const uint8_t *b; /* LEN */
	size_t n;
};

/* 0 ok, 1 need more bytes, -1 malformed (more than 10 bytes). */
static inline int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out)
{
	const uint8_t *p = *pp;
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		if (p == end)
			return 1;
		uint8_t b = *p++;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			*pp = p;
			return 0;
		}
	}
	return -1;
}

/* 1 a field, 0 the end, -1 malformed or cut (inside a message both are corruption). */
static inline int pb_next(struct pb *m, struct pbf *f)
{
	uint64_t tag, v;

	/* Every field of *f is defined on return, whatever the outcome (callers only read it when
	 * 1 comes back, but GCC at -O3 cannot see that). */
	memset(f, 0, sizeof(*f));
	if (m->p == m->end)
		return 0;
	if (get_varint(&m->p, m->end, &tag) || tag >> 32 || !(tag >> 3))
		return -1;
	f->id = (uint32_t)(tag >> 3);
	f->wt = (int)(tag & 7);
	switch (f->wt) {
	case PF_WT_VARINT:
		return get_varint(&m->p, m->end, &f->v) ? -1 : 1;
	case PF_WT_FIXED64:
		if (m->end - m->p < 8)
			return -1;
		memcpy(&v, m->p, 8); /* little-endian hosts only, like the rest of cuptrace */
		f->v = v;
		m->p += 8;
		return 1;
	case PF_WT_FIXED32: {
		uint32_t w;
		if (m->end - m->p < 4)
			return -1;
		memcpy(&w, m->p, 4);
		f->v = w;
		m->p += 4;
		return 1;
	}
	case PF_WT_LEN:
		if (get_varint(&m->p, m->end, &v) || v > (uint64_t)(m->end - m->p))
			return -1;
		f->b = m->p;
		f->n = (size_t)v;
		m->p += v;
		return 1;
	default:
		return -1; /* groups and reserved wire types: protozero does not take them either */
	}
}

static inline struct pb pb_of(const uint8_t *b, size_t n)
{
	return (struct pb){b, b + n};
}

#endif
