/* The strict JSON pull parser of json_parse.h. */
#include "read/json_parse.h"
#include "common/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jp_init(struct jp *j, const void *data, size_t len, const char *name)
{
	memset(j, 0, sizeof(*j));
	j->base = j->p = data;
	j->end = j->base + len;
	j->name = name ? name : "JSON";
}

void jp_free(struct jp *j)
{
	for (int i = 0; i < 2; i++) {
		free(j->scratch[i]);
		j->scratch[i] = NULL;
		j->scap[i] = 0;
	}
}

size_t jp_offset(const struct jp *j)
{
	return (size_t)(j->p - j->base);
}

int jp_fail(struct jp *j, const char *fmt, ...)
{
	if (j->failed)
		return -1;
	j->failed = 1;
	/* Line and column only now: counting them as we go would cost on every byte. */
	size_t line = 1;
	const uint8_t *ls = j->base, *q = j->base, *nl;
	while (q < j->p && (nl = memchr(q, '\n', (size_t)(j->p - q)))) {
		line++;
		ls = q = nl + 1;
	}
	int n = snprintf(j->msg, sizeof(j->msg), "%s: line %zu, column %zu (byte %zu): ", j->name,
	                 line, (size_t)(j->p - ls) + 1, jp_offset(j));
	if (n > 0 && (size_t)n < sizeof(j->msg)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(j->msg + n, sizeof(j->msg) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -1;
}

const char *jp_error(const struct jp *j)
{
	return j->failed ? j->msg : "";
}

int jp_cut(const struct jp *j)
{
	return j->failed && j->p >= j->end;
}

static void ws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
		j->p++;
}

/* What a byte is, for messages: 'x', or its value when it does not print. */
static const char *show(uint8_t c, char *buf, size_t n)
{
	if (c >= 0x20 && c < 0x7f)
		snprintf(buf, n, "'%c'", c);
	else
		snprintf(buf, n, "byte 0x%02x", c);
	return buf;
}

enum jtype jp_peek(struct jp *j)
{
	char b[16];

	if (j->failed)
		return JT_NONE;
	ws(j);
	if (j->p == j->end) {
		jp_fail(j, "the input ends where a value should be (a cut file?)");
		return JT_NONE;
	}
	switch (*j->p) {
	case '{':
		return JT_OBJECT;
	case '[':
		return JT_ARRAY;
	case '"':
		return JT_STRING;
	case 't':
		return JT_TRUE;
	case 'f':
		return JT_FALSE;
	case 'n':
		return JT_NULL;
	case '-':
		return JT_NUMBER;
	default:
		if (*j->p >= '0' && *j->p <= '9')
			return JT_NUMBER;
		jp_fail(j, "expected a value, found %s", show(*j->p, b, sizeof(b)));
		return JT_NONE;
	}
}

/* ---- strings ---- */

static int hex4(const uint8_t *p, uint32_t *out)
{
	uint32_t v = 0;
	for (int i = 0; i < 4; i++) {
		uint8_t c = p[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (uint32_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (uint32_t)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (uint32_t)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(uint8_t *d, uint32_t cp)
{
	if (cp < 0x80) {
		d[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		d[0] = (uint8_t)(0xC0 | (cp >> 6));
		d[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		d[0] = (uint8_t)(0xE0 | (cp >> 12));
		d[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
		d[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	d[0] = (uint8_t)(0xF0 | (cp >> 18));
	d[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
	d[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
	d[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

/* The \uXXXX escape at s (s[0] == '\\', s[1] == 'u', 4 hex digits checked by the caller's scan):
 * its code point, taking a following low surrogate escape with a high one. Sets *used. */
static uint32_t unicode_escape(const uint8_t *s, const uint8_t *end, size_t *used)
{
	uint32_t hi, lo;
	*used = 6;
	if (hex4(s + 2, &hi))
		return 0xFFFD; /* the caller's scan checked the digits: never happens */
	if (hi >= 0xD800 && hi <= 0xDBFF) {
		if (end - s >= 12 && s[6] == '\\' && s[7] == 'u' && !hex4(s + 8, &lo) &&
		    lo >= 0xDC00 && lo <= 0xDFFF) {
			*used = 12;
			return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
		}
		return 0xFFFD; /* unpaired */
	}
	if ((hi >= 0xDC00 && hi <= 0xDFFF) || hi == 0)
		return 0xFFFD; /* unpaired low surrogate; NUL cannot live in a C string */
	return hi;
}

/* Checks the string at j->p ('"'), leaves j->p after its closing quote; *body and *n give its
 * text between the quotes, *escaped whether it holds escapes. */
static int scan_string(struct jp *j, const uint8_t **body, size_t *n, int *escaped)
{
	const uint8_t *p = j->p + 1;
	char b[16];

	*escaped = 0;
	for (;;) {
		/* Plain bytes in bulk: most strings have no escape. */
		while (p < j->end && *p != '"' && *p != '\\' && (*p >= 0x20 || *p == '\t'))
			p++;
		if (p == j->end) {
			j->p = p;
			return jp_fail(j, "the input ends inside a string (a cut file?)");
		}
		if (*p == '"')
			break;
		if (*p != '\\') {
			j->p = p;
			return jp_fail(
			    j, "control character %s inside a string (JSON wants it escaped)",
			    show(*p, b, sizeof(b)));
		}
		*escaped = 1;
		if ((j->end - p) < 2) {
			j->p = j->end;
			return jp_fail(j, "the input ends inside a string (a cut file?)");
		}
		switch (p[1]) {
		case '"':
		case '\\':
		case '/':
		case 'b':
		case 'f':
		case 'n':
		case 'r':
		case 't':
			p += 2;
			break;
		case 'u': {
			uint32_t v;
			if (j->end - p < 6) {
				j->p = j->end;
				return jp_fail(j, "the input ends inside a string (a cut file?)");
			}
			if (hex4(p + 2, &v)) {
				j->p = p;
				return jp_fail(
				    j, "bad \\u escape in a string (4 hex digits expected)");
			}
			p += 6;
			break;
		}
		default:
			j->p = p;
			return jp_fail(j, "bad escape \\%s in a string", show(p[1], b, sizeof(b)));
		}
	}
	*body = j->p + 1;
	*n = (size_t)(p - *body);
	j->p = p + 1;
	return 0;
}

/* Decodes a checked string body into scratch slot k. */
static int decode(struct jp *j, int k, const uint8_t *s, size_t n, int escaped, const char **out,
                  size_t *outn)
{
	if (n == SIZE_MAX || CUPTRACE_GROW(j->scratch[k], j->scap[k], n + 1))
		return jp_fail(j, "out of memory for a string of %zu bytes", n);
	uint8_t *d = (uint8_t *)j->scratch[k];
	if (!escaped) {
		memcpy(d, s, n);
		d += n;
	} else {
		/* Every escape is at least as long as its UTF-8 (\uXXXX: 6 bytes for at most 3;
		 * a surrogate pair: 12 for 4), so the result fits in n bytes. */
		const uint8_t *e = s + n;
		while (s < e) {
			if (*s != '\\') {
				*d++ = *s++;
				continue;
			}
			size_t used = 2;
			switch (s[1]) {
			case 'b':
				*d++ = '\b';
				break;
			case 'f':
				*d++ = '\f';
				break;
			case 'n':
				*d++ = '\n';
				break;
			case 'r':
				*d++ = '\r';
				break;
			case 't':
				*d++ = '\t';
				break;
			case 'u':
				d += put_utf8(d, unicode_escape(s, e, &used));
				break;
			default: /* " \ / */
				*d++ = s[1];
				break;
			}
			s += used;
		}
	}
	*d = 0;
	*outn = (size_t)(d - (uint8_t *)j->scratch[k]);
	*out = j->scratch[k];
	return 0;
}

static int string_into(struct jp *j, int k, const char **s, size_t *n)
{
	const uint8_t *body;
	size_t len;
	int esc;

	if (jp_peek(j) != JT_STRING)
		return j->failed ? -1 : jp_fail(j, "expected a string");
	if (scan_string(j, &body, &len, &esc))
		return -1;
	return decode(j, k, body, len, esc, s, n);
}

int jp_string(struct jp *j, const char **s, size_t *n)
{
	return string_into(j, 1, s, n);
}

/* ---- containers ---- */

static int open_(struct jp *j, enum jtype t)
{
	if (jp_peek(j) != t)
		return j->failed
		           ? -1
		           : jp_fail(j, "expected %s", t == JT_OBJECT ? "an object" : "an array");
	if (j->depth >= JP_MAX_DEPTH)
		return jp_fail(j, "values nested deeper than %d levels", JP_MAX_DEPTH);
	j->p++;
	j->depth++;
	j->first = 1;
	return 0;
}

int jp_object_begin(struct jp *j)
{
	return open_(j, JT_OBJECT);
}

int jp_array_begin(struct jp *j)
{
	return open_(j, JT_ARRAY);
}

/* Before the next member or element: 1 if one follows, 0 if the container closed (close). */
static int next_(struct jp *j, uint8_t close, const char *what)
{
	char b[16];

	if (j->failed)
		return -1;
	ws(j);
	if (j->p == j->end)
		return jp_fail(j, "the input ends inside %s (a cut file?)", what);
	if (*j->p == close) {
		j->p++;
		j->depth--;
		j->first = 0;
		return 0;
	}
	if (j->first) {
		j->first = 0;
		return 1;
	}
	if (*j->p != ',')
		return jp_fail(j, "expected ',' or '%c' in %s, found %s", close, what,
		               show(*j->p, b, sizeof(b)));
	j->p++;
	ws(j);
	if (j->p < j->end && *j->p == close)
		return jp_fail(j, "trailing comma in %s", what);
	return 1;
}

static int member_(struct jp *j, int want, const char **key, size_t *klen)
{
	char b[16];
	int r = next_(j, '}', "an object");
	if (r <= 0)
		return r;
	if (j->p == j->end)
		return jp_fail(j, "the input ends inside an object (a cut file?)");
	if (*j->p != '"')
		return jp_fail(j, "expected a member name (a string) in an object, found %s",
		               show(*j->p, b, sizeof(b)));
	if (want) {
		if (string_into(j, 0, key, klen))
			return -1;
	} else {
		const uint8_t *body;
		size_t n;
		int esc;
		if (scan_string(j, &body, &n, &esc))
			return -1;
	}
	ws(j);
	if (j->p == j->end || *j->p != ':')
		return jp_fail(j, "expected ':' after a member name");
	j->p++;
	return 1;
}

int jp_object_next(struct jp *j, const char **key, size_t *klen)
{
	return member_(j, 1, key, klen);
}

int jp_array_next(struct jp *j)
{
	return next_(j, ']', "an array");
}

/* ---- numbers and literals ---- */

static int digits(const uint8_t **pp, const uint8_t *end)
{
	const uint8_t *p = *pp;
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	int n = p != *pp;
	*pp = p;
	return n;
}

int jp_number(struct jp *j, struct jnum *n)
{
	if (jp_peek(j) != JT_NUMBER)
		return j->failed ? -1 : jp_fail(j, "expected a number");
	const uint8_t *s = j->p, *p = s;
	int frac = 0;

	memset(n, 0, sizeof(*n));
	if (*p == '-')
		p++;
	if (p < j->end && *p == '0') {
		p++;
		if (p < j->end && *p >= '0' && *p <= '9')
			return jp_fail(j, "a number with a leading zero");
	} else if (!digits(&p, j->end)) {
		j->p = p; /* at the end of the input if it was cut there */
		return jp_fail(j, "a '-' without digits");
	}
	if (p < j->end && *p == '.') {
		p++;
		frac = 1;
		if (!digits(&p, j->end)) {
			j->p = p;
			return jp_fail(j, "a number with no digit after its '.'");
		}
	}
	if (p < j->end && (*p == 'e' || *p == 'E')) {
		p++;
		frac = 1;
		if (p < j->end && (*p == '+' || *p == '-'))
			p++;
		if (!digits(&p, j->end)) {
			j->p = p;
			return jp_fail(j, "a number with no digit in its exponent");
		}
	}
	n->text = (const char *)s;
	n->len = (size_t)(p - s);
	j->p = p;

	if (!frac) {
		uint64_t mag = 0, lim = *s == '-' ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
		int ok = 1;
		for (const uint8_t *q = s + (*s == '-'); q < p && ok; q++) {
			uint64_t dg = (uint64_t)(*q - '0');
			if (mag > (lim - dg) / 10)
				ok = 0;
			else
				mag = mag * 10 + dg;
		}
		if (ok) {
			n->is_int = 1;
			n->i = *s == '-' ? (int64_t)(0 - mag) : (int64_t)mag;
			n->d = (double)n->i;
			return 0;
		}
	}
	/* strtod wants a NUL: copy (the C locale's '.', which cuptrace never changes). */
	char small[128], *buf = small;
	if (n->len >= sizeof(small) && !(buf = malloc(n->len + 1)))
		return jp_fail(j, "out of memory for a number of %zu characters", n->len);
	memcpy(buf, s, n->len);
	buf[n->len] = 0;
	n->d = strtod(buf, NULL); /* out of range: +-HUGE_VAL or 0, which is what we want */
	if (buf != small)
		free(buf);
	return 0;
}

static int literal(struct jp *j, const char *word)
{
	size_t n = strlen(word), left = (size_t)(j->end - j->p);
	if (left < n && !memcmp(j->p, word, left)) {
		j->p = j->end;
		return jp_fail(j, "the input ends inside '%s' (a cut file?)", word);
	}
	if (left < n || memcmp(j->p, word, n))
		return jp_fail(j, "expected '%s'", word);
	j->p += n;
	return 0;
}

int jp_bool(struct jp *j, int *b)
{
	enum jtype t = jp_peek(j);
	if (t != JT_TRUE && t != JT_FALSE)
		return j->failed ? -1 : jp_fail(j, "expected true or false");
	*b = t == JT_TRUE;
	return literal(j, *b ? "true" : "false");
}

int jp_skip(struct jp *j)
{
	struct jnum num;
	const uint8_t *body;
	size_t n;
	int esc, r;

	switch (jp_peek(j)) {
	case JT_OBJECT:
		if (jp_object_begin(j))
			return -1;
		while ((r = member_(j, 0, NULL, NULL)) > 0)
			if (jp_skip(j))
				return -1;
		return r;
	case JT_ARRAY:
		if (jp_array_begin(j))
			return -1;
		while ((r = jp_array_next(j)) > 0)
			if (jp_skip(j))
				return -1;
		return r;
	case JT_STRING:
		return scan_string(j, &body, &n, &esc);
	case JT_NUMBER:
		return jp_number(j, &num);
	case JT_TRUE:
		return literal(j, "true");
	case JT_FALSE:
		return literal(j, "false");
	case JT_NULL:
		return literal(j, "null");
	default:
		return -1;
	}
}

int jp_raw(struct jp *j, const char **text, size_t *len)
{
	if (jp_peek(j) == JT_NONE)
		return -1;
	const uint8_t *s = j->p;
	if (jp_skip(j))
		return -1;
	*text = (const char *)s;
	*len = (size_t)(j->p - s);
	return 0;
}

int jp_finish(struct jp *j)
{
	char b[16];
	if (j->failed)
		return -1;
	ws(j);
	if (j->p != j->end)
		return jp_fail(j, "unexpected %s after the end of the JSON value",
		               show(*j->p, b, sizeof(b)));
	return 0;
}

/* ---- helpers on number and value text ---- */

int jnum_scaled(const struct jnum *n, int pow10, int64_t *out)
{
	const char *p = n->text, *e = n->text + n->len;
	int neg = 0;
	long exp10 = pow10;
	/* The significant digits, leading zeros dropped; those past 19 only round. */
	char dg[20];
	int nd = 0, round_digit = -1;

	if (p < e && *p == '-') {
		neg = 1;
		p++;
	}
	for (int in_frac = 0; p < e && *p != 'e' && *p != 'E'; p++) {
		if (*p == '.') {
			in_frac = 1;
			continue;
		}
		if (in_frac)
			exp10--;
		if (!nd && *p == '0')
			continue;
		if (nd < 19)
			dg[nd++] = *p;
		else {
			exp10++; /* a digit dropped from the integer's end */
			if (round_digit < 0)
				round_digit = *p - '0';
		}
	}
	if (p < e) { /* exponent, saturated: beyond +-100000 the result is 0 or overflow anyway */
		p++;
		int eneg = *p == '-';
		if (*p == '+' || *p == '-')
			p++;
		long ev = 0;
		for (; p < e; p++)
			if (ev < 100000)
				ev = ev * 10 + (*p - '0');
		exp10 += eneg ? -ev : ev;
	}
	uint64_t lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
	/* Digits kept: all of them when exp10 >= 0, else up to the decimal point. */
	long keep = exp10 >= 0 ? nd : nd + exp10;
	if (keep < 0)
		keep = 0;
	for (long i = 0; i < keep; i++) {
		uint64_t d = (uint64_t)(dg[i] - '0');
		if (v > (lim - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (exp10 >= 0) {
		for (long i = 0; i < exp10 && v; i++) {
			if (v > lim / 10)
				return -1;
			v *= 10;
		}
	} else {
		/* The first digit dropped decides the rounding (half away from zero). */
		long first = keep;
		int rd = nd + exp10 < 0 ? 0 : first < nd ? dg[first] - '0' : round_digit;
		if (rd >= 5) {
			if (v == lim)
				return -1;
			v++;
		}
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

size_t json_compact(const char *text, size_t len, char *dst, size_t cap)
{
	size_t o = 0;
	int in_str = 0;

	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (!in_str && (c == ' ' || c == '\n' || c == '\r' || c == '\t'))
			continue;
		if (o + 1 >= cap)
			return 0;
		dst[o++] = c;
		if (in_str && c == '\\' && i + 1 < len) {
			if (o + 1 >= cap)
				return 0;
			dst[o++] = text[++i];
		} else if (c == '"') {
			in_str = !in_str;
		}
	}
	if (!cap)
		return 0;
	dst[o] = 0;
	return o;
}
