/* Streaming JSON writer (see json_writer.h): escaping, UTF-8 repair, exact numbers, and one
 * output record per line. */
#include "format/json_writer.h"
#include "common/util.h"
#include "output/output.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH  32
#define KEEP_BYTES (64u * 1024u) /* a buffer larger than this is released after its record */
#define MIN_BYTES  4096u
#define SAFE_INT   (1ull << 53) /* integers up to this are exact in a double */

enum { IN_OBJECT = 1, IN_ARRAY = 2 };

struct cuptrace_json {
	struct cuptrace_output *out; /* borrowed; NULL: keep everything in buf */
	int err;                     /* first error, sticky */
	char *buf;                   /* the current line (or everything, without an output) */
	size_t len, cap;
	unsigned depth;
	uint8_t kind[MAX_DEPTH];   /* IN_OBJECT or IN_ARRAY per open level */
	uint32_t count[MAX_DEPTH]; /* values (or names) written at that level so far */
	int want_value;            /* a name was written; its value comes next */
};

static void fail(struct cuptrace_json *w, int err)
{
	if (!w->err)
		w->err = err;
}

/* Makes room for n more bytes, plus one spare so that buf[len] can always hold a NUL. */
static int reserve(struct cuptrace_json *w, size_t n)
{
	if (w->err)
		return -1;
	if (n < w->cap - w->len)
		return 0;
	/* Room for the NUL a finished line may get. */
	if (n >= SIZE_MAX - w->len || CUPTRACE_GROW(w->buf, w->cap, w->len + n + 1)) {
		fail(w, -ENOMEM);
		return -1;
	}
	return 0;
}

static void put(struct cuptrace_json *w, const void *p, size_t n)
{
	if (!n || reserve(w, n))
		return;
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static void putc_(struct cuptrace_json *w, char c)
{
	put(w, &c, 1);
}

/* Hands the finished line to the output. Without an output the line stays in buf. */
static void emit_line(struct cuptrace_json *w)
{
	putc_(w, '\n');
	if (w->err || !w->out)
		return;
	int r = cuptrace_output_write(w->out, w->buf, w->len);
	if (r)
		fail(w, r);
	w->len = 0;
	if (w->cap > KEEP_BYTES) {
		/* One huge event (a long NVTX string) must not pin its buffer for the whole run. */
		char *b = realloc(w->buf, MIN_BYTES);
		if (b) {
			w->buf = b;
			w->cap = MIN_BYTES;
		}
	}
}

/* Called before every value: separators, and the check that a value may go here. */
static int begin_value(struct cuptrace_json *w)
{
	if (w->err)
		return -1;
	if (!w->depth)
		return 0;
	unsigned d = w->depth - 1;
	if (w->kind[d] == IN_OBJECT) {
		if (!w->want_value) {
			fail(w, -EINVAL);
			return -1;
		}
		w->want_value = 0;
		return 0;
	}
	if (w->count[d]++)
		putc_(w, ',');
	return w->err ? -1 : 0;
}

/* Called after every complete value: a top-level value or top-level array element ends a line. */
static void end_value(struct cuptrace_json *w)
{
	if (!w->depth || (w->depth == 1 && w->kind[0] == IN_ARRAY))
		emit_line(w);
}

struct cuptrace_json *cuptrace_json_new(struct cuptrace_output *out)
{
	struct cuptrace_json *w = calloc(1, sizeof(*w));
	if (!w) {
		errno = ENOMEM;
		return NULL;
	}
	w->out = out;
	w->buf = malloc(MIN_BYTES);
	if (!w->buf) {
		free(w);
		errno = ENOMEM;
		return NULL;
	}
	w->cap = MIN_BYTES;
	w->buf[0] = 0;
	return w;
}

void cuptrace_json_free(struct cuptrace_json *w)
{
	if (!w)
		return;
	free(w->buf);
	free(w);
}

int cuptrace_json_error(const struct cuptrace_json *w)
{
	return w->err;
}

const char *cuptrace_json_buffer(const struct cuptrace_json *w, size_t *len)
{
	w->buf[w->len] = 0; /* reserve() keeps a spare byte; buf is never NULL */
	if (len)
		*len = w->len;
	return w->buf;
}

void cuptrace_json_reset(struct cuptrace_json *w)
{
	w->len = 0;
	w->depth = 0;
	w->want_value = 0;
	w->err = 0;
}

static void open_level(struct cuptrace_json *w, uint8_t kind, char c)
{
	if (begin_value(w))
		return;
	if (w->depth == MAX_DEPTH) {
		fail(w, -E2BIG);
		return;
	}
	putc_(w, c);
	w->kind[w->depth] = kind;
	w->count[w->depth] = 0;
	w->depth++;
}

static void close_level(struct cuptrace_json *w, uint8_t kind, char c)
{
	if (w->err)
		return;
	if (!w->depth || w->kind[w->depth - 1] != kind || w->want_value) {
		fail(w, -EINVAL);
		return;
	}
	putc_(w, c);
	w->depth--;
	end_value(w);
}

void cuptrace_json_start_object(struct cuptrace_json *w)
{
	open_level(w, IN_OBJECT, '{');
}

void cuptrace_json_end_object(struct cuptrace_json *w)
{
	close_level(w, IN_OBJECT, '}');
}

void cuptrace_json_start_array(struct cuptrace_json *w)
{
	open_level(w, IN_ARRAY, '[');
}

void cuptrace_json_end_array(struct cuptrace_json *w)
{
	close_level(w, IN_ARRAY, ']');
}

/*
 * Length of the well-formed UTF-8 sequence at p (1..4), or 0 with *skip set to the length of its
 * maximal ill-formed subpart (>= 1), per Unicode Table 3-7: the second byte's range depends on
 * the lead byte so that overlongs (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF) and code
 * points above U+10FFFF (F4 90.., F5..FF) are all rejected at the earliest byte.
 */
static size_t utf8_seq(const uint8_t *p, size_t n, size_t *skip)
{
	uint8_t c = p[0], lo = 0x80, hi = 0xBF;
	size_t need;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		need = 2;
	} else if (c == 0xE0) {
		need = 3;
		lo = 0xA0;
	} else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
		need = 3;
	} else if (c == 0xED) {
		need = 3;
		hi = 0x9F;
	} else if (c == 0xF0) {
		need = 4;
		lo = 0x90;
	} else if (c >= 0xF1 && c <= 0xF3) {
		need = 4;
	} else if (c == 0xF4) {
		need = 4;
		hi = 0x8F;
	} else {
		*skip = 1; /* 80..BF without a lead, C0, C1, F5..FF */
		return 0;
	}
	for (size_t i = 1; i < need; i++) {
		if (i >= n || p[i] < lo || p[i] > hi) {
			*skip = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xBF;
	}
	return need;
}

static void put_escaped(struct cuptrace_json *w, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	static const char short_esc[0x20] = {
	    ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};
	const uint8_t *p = (const uint8_t *)s;
	size_t i = 0, run = 0; /* p[run..i) is a pending run that needs no escaping */

	putc_(w, '"');
	while (i < n && !w->err) {
		uint8_t c = p[i];
		char esc[8];
		size_t elen = 0, adv = 1, skip = 0;

		if (c >= 0x20 && c != '"' && c != '\\' && c < 0x7F) {
			i++;
			continue;
		}
		if (c >= 0x80) {
			adv = utf8_seq(p + i, n - i, &skip);
			if (adv) {
				i += adv;
				continue;
			}
			adv = skip;
			memcpy(esc, "\xEF\xBF\xBD", 3); /* U+FFFD */
			elen = 3;
		} else if (c == '"' || (c == '\\' && i + 1 < n)) {
			esc[0] = '\\';
			esc[1] = (char)c;
			elen = 2;
		} else if (c < 0x20 && short_esc[c]) {
			esc[0] = '\\';
			esc[1] = short_esc[c];
			elen = 2;
		} else {
			/* Other controls, DEL, a backslash that ends the string (see header) */
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			elen = 6;
		}
		put(w, p + run, i - run);
		put(w, esc, elen);
		i += adv;
		run = i;
	}
	put(w, p + run, i - run);
	putc_(w, '"');
}

void cuptrace_json_name(struct cuptrace_json *w, const char *name)
{
	if (w->err)
		return;
	if (!w->depth || w->kind[w->depth - 1] != IN_OBJECT || w->want_value || !name) {
		fail(w, -EINVAL);
		return;
	}
	if (w->count[w->depth - 1]++)
		putc_(w, ',');
	put_escaped(w, name, strlen(name));
	putc_(w, ':');
	w->want_value = 1;
}

static void scalar(struct cuptrace_json *w, const char *text, size_t n)
{
	if (begin_value(w))
		return;
	put(w, text, n);
	end_value(w);
}

void cuptrace_json_string_len(struct cuptrace_json *w, const char *s, size_t len)
{
	if (!s) {
		cuptrace_json_null(w);
		return;
	}
	if (begin_value(w))
		return;
	put_escaped(w, s, len);
	end_value(w);
}

void cuptrace_json_string(struct cuptrace_json *w, const char *s)
{
	cuptrace_json_string_len(w, s, s ? strlen(s) : 0);
}

void cuptrace_json_int(struct cuptrace_json *w, int64_t v)
{
	char b[24];
	int n = snprintf(b, sizeof(b), "%" PRId64, v);
	scalar(w, b, (size_t)n);
}

void cuptrace_json_uint(struct cuptrace_json *w, uint64_t v)
{
	char b[24];
	int n = snprintf(b, sizeof(b), "%" PRIu64, v);
	scalar(w, b, (size_t)n);
}

void cuptrace_json_int_safe(struct cuptrace_json *w, int64_t v)
{
	uint64_t mag = v < 0 ? -(uint64_t)v : (uint64_t)v;
	char b[24];
	if (mag <= SAFE_INT) {
		cuptrace_json_int(w, v);
		return;
	}
	snprintf(b, sizeof(b), "%" PRId64, v);
	cuptrace_json_string(w, b);
}

void cuptrace_json_uint_safe(struct cuptrace_json *w, uint64_t v)
{
	char b[24];
	if (v <= SAFE_INT) {
		cuptrace_json_uint(w, v);
		return;
	}
	snprintf(b, sizeof(b), "%" PRIu64, v);
	cuptrace_json_string(w, b);
}

/*
 * printf and strtod follow LC_NUMERIC, and the traced application may have set a locale whose
 * decimal point is ',' (or a multi-byte character). Both sides use the same locale, so the
 * round-trip test holds; the result is then rewritten with '.' as the decimal point.
 */
void cuptrace_json_double(struct cuptrace_json *w, double v)
{
	char b[64], out[64];
	size_t n = 0;

	if (!isfinite(v)) {
		cuptrace_json_null(w);
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(b, sizeof(b), "%.*g", prec, v);
		if (strtod(b, NULL) == v)
			break;
	}
	for (const char *p = b; *p && n < sizeof(out) - 1; p++) {
		if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e')
			out[n++] = *p;
		else if (!n || out[n - 1] != '.')
			out[n++] = '.';
	}
	scalar(w, out, n);
}

void cuptrace_json_bool(struct cuptrace_json *w, int v)
{
	if (v)
		scalar(w, "true", 4);
	else
		scalar(w, "false", 5);
}

void cuptrace_json_null(struct cuptrace_json *w)
{
	scalar(w, "null", 4);
}

void cuptrace_json_us(struct cuptrace_json *w, int64_t ns)
{
	uint64_t mag = ns < 0 ? -(uint64_t)ns : (uint64_t)ns; /* INT64_MIN included */
	char b[32];
	int n = snprintf(b, sizeof(b), "%s%" PRIu64 ".%03u", ns < 0 ? "-" : "", mag / 1000,
	                 (unsigned)(mag % 1000));
	scalar(w, b, (size_t)n);
}

void cuptrace_json_hex(struct cuptrace_json *w, uint64_t v)
{
	char b[24];
	snprintf(b, sizeof(b), "0x%" PRIx64, v);
	cuptrace_json_string(w, b);
}

void cuptrace_json_string_field(struct cuptrace_json *w, const char *name, const char *s)
{
	cuptrace_json_name(w, name);
	cuptrace_json_string(w, s);
}

void cuptrace_json_int_field(struct cuptrace_json *w, const char *name, int64_t v)
{
	cuptrace_json_name(w, name);
	cuptrace_json_int(w, v);
}

void cuptrace_json_us_field(struct cuptrace_json *w, const char *name, int64_t ns)
{
	cuptrace_json_name(w, name);
	cuptrace_json_us(w, ns);
}
