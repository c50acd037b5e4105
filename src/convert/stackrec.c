/* Encoding and decoding of the call-stack records (see stackrec.h). */
#include "convert/stackrec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static size_t slen(const char *s)
{
	return s ? strlen(s) + 1 : 1;
}

size_t cuptrace_stackrec_size(const struct cuptrace_stack *st)
{
	uint64_t n = 24 + 16 * (uint64_t)st->nframes;
	for (size_t i = 0; i < st->nframes; i++) {
		const struct cuptrace_frame *f = &st->frames[i];
		n += slen(f->function) + slen(f->file) + slen(f->module) + slen(f->build_id);
	}
	n = (n + 7) & ~(uint64_t)7;
	return n > UINT32_MAX ? 0 : (size_t)n;
}

static uint8_t *put_s(uint8_t *p, const char *s)
{
	size_t n = slen(s);
	if (s)
		memcpy(p, s, n);
	else
		*p = 0;
	return p + n;
}

void cuptrace_stackrec_encode(const struct cuptrace_stack *st, void *out)
{
	size_t size = cuptrace_stackrec_size(st);
	uint8_t *p = out;
	memset(p, 0, size);
	uint32_t h[2] = {CUPTRACE_REC_STACK, (uint32_t)size}, nf[2] = {(uint32_t)st->nframes, 0};
	memcpy(p, h, 8);
	memcpy(p + 8, &st->id, 8);
	memcpy(p + 16, nf, 8);
	p += 24;
	for (size_t i = 0; i < st->nframes; i++) {
		const struct cuptrace_frame *f = &st->frames[i];
		uint32_t k[2] = {(uint32_t)f->kind, f->line};
		memcpy(p, k, 8);
		memcpy(p + 8, &f->rel_pc, 8);
		p += 16;
	}
	for (size_t i = 0; i < st->nframes; i++) {
		const struct cuptrace_frame *f = &st->frames[i];
		p = put_s(p, f->function);
		p = put_s(p, f->file);
		p = put_s(p, f->module);
		p = put_s(p, f->build_id);
	}
}

/* The next NUL-terminated string at *p before end, NULL for ""; -1 in *bad past the end. */
static const char *get_s(const char **p, const char *end, int *bad)
{
	const char *z = *p < end ? memchr(*p, 0, (size_t)(end - *p)) : NULL;
	if (!z) {
		*bad = 1;
		return NULL;
	}
	const char *s = *p;
	*p = z + 1;
	return *s ? s : NULL;
}

int cuptrace_stackrec_decode(const void *rec, size_t size, struct cuptrace_stack *st,
                             struct cuptrace_frame **frames, size_t *cap)
{
	const uint8_t *p = rec;
	uint32_t h[2], nf[2];
	if (size < 24)
		return -EINVAL;
	memcpy(h, p, 8);
	memcpy(nf, p + 16, 8);
	h[1] = nf[0];
	if (h[0] != CUPTRACE_REC_STACK || h[1] > (size - 24) / 16)
		return -EINVAL;
	memcpy(&st->id, p + 8, 8);
	if (!st->id)
		return -EINVAL;
	if (h[1] > *cap && cuptrace_grow_to(frames, cap, h[1], sizeof(**frames)))
		return -ENOMEM;
	const char *s = (const char *)p + 24 + 16 * (size_t)h[1], *end = (const char *)p + size;
	int bad = 0;
	for (uint32_t i = 0; i < h[1]; i++) {
		struct cuptrace_frame *f = &(*frames)[i];
		uint32_t k[2];
		memcpy(k, p + 24 + 16 * (size_t)i, 8);
		memcpy(&f->rel_pc, p + 32 + 16 * (size_t)i, 8);
		if (k[0] > CUPTRACE_FRAME_PYTHON)
			return -EINVAL;
		f->kind = (enum cuptrace_frame_kind)k[0];
		f->line = k[1];
		f->function = get_s(&s, end, &bad);
		f->file = get_s(&s, end, &bad);
		f->module = get_s(&s, end, &bad);
		f->build_id = get_s(&s, end, &bad);
		if (bad)
			return -EINVAL;
	}
	st->frames = *frames;
	st->nframes = h[1];
	return 0;
}

size_t cuptrace_stackrec_bytes(const void *rec)
{
	uint32_t h[2];
	memcpy(h, rec, 8);
	if (h[0] == CUPTRACE_REC_STACK)
		return h[1];
	if (h[0] == CUPTRACE_REC_STACK_CORR)
		return 8 + 16 * (size_t)h[1];
	if (h[0] == CUPTRACE_REC_SAMPLES)
		return 8 + sizeof(struct cuptrace_stackrec_sample) * (size_t)h[1];
	return 0;
}

int cuptrace_stackrec_samples(const void *rec, size_t size,
                              const struct cuptrace_stackrec_sample **samples, size_t *n)
{
	uint32_t h[2];
	if (size < 8)
		return -EINVAL;
	memcpy(h, rec, 8);
	if (h[0] != CUPTRACE_REC_SAMPLES || h[1] > (size - 8) / sizeof(**samples))
		return -EINVAL;
	*samples = (const struct cuptrace_stackrec_sample *)((const uint8_t *)rec + 8);
	*n = h[1];
	return 0;
}

int cuptrace_stackrec_corr(const void *rec, size_t size, const uint64_t **pairs, size_t *n)
{
	uint32_t h[2];
	if (size < 8)
		return -EINVAL;
	memcpy(h, rec, 8);
	if (h[0] != CUPTRACE_REC_STACK_CORR || h[1] > (size - 8) / 16)
		return -EINVAL;
	*pairs = (const uint64_t *)((const uint8_t *)rec + 8);
	*n = h[1];
	return 0;
}
