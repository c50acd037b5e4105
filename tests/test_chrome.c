/* Chrome JSON output without a GPU: the JSON writer's escaping and numbers, then synthetic
 * timelines through the sink, checked by a strict RFC 8259 parser, against golden files, cut at
 * many offsets, killed with SIGKILL, and gzip-compressed. */
#include "check.h"
#include "common/log.h"
#include "format/formats.h"
#include "format/json_writer.h"
#include "output/output.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ---------------------------------------------------------------------------------------------
 * Files
 */

static const char *tmp_dir(void)
{
	const char *d = getenv("CUPTRACE_TMP");
	return d && *d ? d : "/tmp";
}

static void tmp_path(char *buf, size_t n, const char *tag)
{
	snprintf(buf, n, "%s/test_chrome.%d.%s", tmp_dir(), (int)getpid(), tag);
}

/* tests/golden, from the ctest environment or else next to this source file. */
static void golden_path(char *buf, size_t n, const char *name)
{
	const char *data = getenv("CUPTRACE_TEST_DATA");
	if (data && *data) {
		snprintf(buf, n, "%s/../golden/%s", data, name);
		return;
	}
	const char *slash = strrchr(__FILE__, '/');
	int dirlen = slash ? (int)(slash - __FILE__) : 1;
	snprintf(buf, n, "%.*s/golden/%s", dirlen, slash ? __FILE__ : ".", name);
}

static char *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;
	size_t n = 0, cap = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (n + 65536 + 1 > cap) {
			cap = (n + 65536 + 1) * 2;
			char *nb = realloc(b, cap);
			if (!nb) {
				free(b);
				fclose(f);
				return NULL;
			}
			b = nb;
		}
		size_t r = fread(b + n, 1, 65536, f);
		n += r;
		if (r < 65536)
			break;
	}
	fclose(f);
	b[n] = 0;
	*len = n;
	return b;
}

static int write_all_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -1;
	size_t w = fwrite(p, 1, n, f);
	return fclose(f) || w != n ? -1 : 0;
}

/* CUPTRACE_KEEP_OUTPUT=1 keeps the files written, to look at them. */
static void cleanup(const char *path)
{
	const char *keep = getenv("CUPTRACE_KEEP_OUTPUT");
	if (!keep || !*keep || !strcmp(keep, "0"))
		unlink(path);
}

static int warnings;
static void quiet_log(enum cuptrace_log_level level, const char *msg)
{
	(void)level;
	(void)msg;
	warnings++;
}

/* ---------------------------------------------------------------------------------------------
 * A strict RFC 8259 parser that builds a small tree. Rejects: trailing commas, NaN/Infinity,
 * leading zeros, raw control characters in strings, bad or lone-surrogate \u escapes, invalid
 * UTF-8 (overlongs, encoded surrogates, > U+10FFFF), duplicate object keys, trailing data.
 */

enum jtype { JNULL, JBOOL, JNUM, JSTR, JARR, JOBJ };

struct jval {
	enum jtype t;
	int b;
	double num;
	char *text; /* JNUM: the token; JSTR: decoded bytes, NUL-terminated */
	size_t len; /* JSTR: decoded length */
	size_t n;   /* JARR, JOBJ: children */
	struct jval *kids;
	char **keys; /* JOBJ */
};

struct jparse {
	const unsigned char *start, *p, *end;
	const char *err;
	size_t at;
	int depth;
};

struct sbuf {
	char *b;
	size_t n, cap;
};

static void sb_put(struct sbuf *s, const void *p, size_t n)
{
	if (s->n + n + 1 > s->cap) {
		size_t cap = (s->n + n + 1) * 2;
		char *b = realloc(s->b, cap);
		if (!b)
			abort();
		s->b = b;
		s->cap = cap;
	}
	memcpy(s->b + s->n, p, n);
	s->n += n;
	s->b[s->n] = 0;
}

static void jfree(struct jval *v)
{
	for (size_t i = 0; i < v->n; i++) {
		jfree(&v->kids[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->kids);
	free(v->keys);
	free(v->text);
	memset(v, 0, sizeof(*v));
}

static int jerr(struct jparse *j, const char *msg)
{
	if (!j->err) {
		j->err = msg;
		j->at = (size_t)(j->p - j->start);
	}
	return -1;
}

static void jws(struct jparse *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

/* Decodes by bit pattern, then rejects what UTF-8 forbids. An implementation independent of
 * the writer's table-driven one. */
static int utf8_decode(const unsigned char *p, size_t n, uint32_t *cp)
{
	unsigned char c = p[0];
	size_t len;
	uint32_t v, min;

	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if ((c & 0xE0) == 0xC0) {
		len = 2, v = c & 0x1F, min = 0x80;
	} else if ((c & 0xF0) == 0xE0) {
		len = 3, v = c & 0x0F, min = 0x800;
	} else if ((c & 0xF8) == 0xF0) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xC0) != 0x80)
			return 0;
		v = v << 6 | (p[i] & 0x3F);
	}
	if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
		return 0;
	*cp = v;
	return (int)len;
}

static void put_utf8(struct sbuf *sb, uint32_t cp)
{
	unsigned char b[4];
	size_t n;
	if (cp < 0x80) {
		b[0] = (unsigned char)cp, n = 1;
	} else if (cp < 0x800) {
		b[0] = (unsigned char)(0xC0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (unsigned char)(0xE0 | cp >> 12);
		b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		b[2] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		b[0] = (unsigned char)(0xF0 | cp >> 18);
		b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
		b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
		b[3] = (unsigned char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	sb_put(sb, b, n);
}

static int hex4(struct jparse *j, uint32_t *out)
{
	uint32_t v = 0;
	if (j->end - j->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		unsigned char c = *j->p++;
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	*out = v;
	return 0;
}

static int jstring(struct jparse *j, char **out, size_t *outlen)
{
	struct sbuf sb = {0};
	sb_put(&sb, "", 0);
	j->p++;
	for (;;) {
		if (j->p >= j->end)
			goto bad_end;
		unsigned char c = *j->p;
		if (c == '"') {
			j->p++;
			break;
		}
		if (c < 0x20) {
			free(sb.b);
			return jerr(j, "raw control character in a string");
		}
		if (c == '\\') {
			uint32_t cp, lo;
			if (++j->p >= j->end)
				goto bad_end;
			c = *j->p++;
			switch (c) {
			case '"':
			case '\\':
			case '/':
				sb_put(&sb, &c, 1);
				break;
			case 'b':
				sb_put(&sb, "\b", 1);
				break;
			case 'f':
				sb_put(&sb, "\f", 1);
				break;
			case 'n':
				sb_put(&sb, "\n", 1);
				break;
			case 'r':
				sb_put(&sb, "\r", 1);
				break;
			case 't':
				sb_put(&sb, "\t", 1);
				break;
			case 'u':
				if (hex4(j, &cp))
					goto bad_escape;
				if (cp >= 0xD800 && cp <= 0xDBFF) {
					if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
						goto bad_escape;
					j->p += 2;
					if (hex4(j, &lo) || lo < 0xDC00 || lo > 0xDFFF)
						goto bad_escape;
					cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				} else if (cp >= 0xDC00 && cp <= 0xDFFF) {
					goto bad_escape;
				}
				put_utf8(&sb, cp);
				break;
			default:
				goto bad_escape;
			}
			continue;
		}
		if (c >= 0x80) {
			uint32_t cp;
			int l = utf8_decode(j->p, (size_t)(j->end - j->p), &cp);
			if (!l) {
				free(sb.b);
				return jerr(j, "invalid UTF-8");
			}
			sb_put(&sb, j->p, (size_t)l);
			j->p += l;
			continue;
		}
		sb_put(&sb, &c, 1);
		j->p++;
	}
	*out = sb.b;
	*outlen = sb.n;
	return 0;
bad_end:
	free(sb.b);
	return jerr(j, "unterminated string");
bad_escape:
	free(sb.b);
	return jerr(j, "invalid escape");
}

static int is_digit(const struct jparse *j)
{
	return j->p < j->end && *j->p >= '0' && *j->p <= '9';
}

static int jnumber(struct jparse *j, struct jval *v)
{
	const unsigned char *s = j->p;
	if (*j->p == '-')
		j->p++;
	if (!is_digit(j))
		return jerr(j, "bad number");
	if (*j->p == '0') {
		j->p++;
	} else {
		while (is_digit(j))
			j->p++;
	}
	if (j->p < j->end && *j->p == '.') {
		j->p++;
		if (!is_digit(j))
			return jerr(j, "bad fraction");
		while (is_digit(j))
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (!is_digit(j))
			return jerr(j, "bad exponent");
		while (is_digit(j))
			j->p++;
	}
	v->t = JNUM;
	v->text = strndup((const char *)s, (size_t)(j->p - s));
	v->num = strtod(v->text, NULL);
	return 0;
}

static int jlit(struct jparse *j, const char *lit, struct jval *v, enum jtype t, int b)
{
	size_t n = strlen(lit);
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n))
		return jerr(j, "bad literal");
	j->p += n;
	v->t = t;
	v->b = b;
	return 0;
}

static int jvalue(struct jparse *j, struct jval *v);

static void *grow_kids(struct jval *v, int with_keys)
{
	struct jval *k = realloc(v->kids, (v->n + 1) * sizeof(*k));
	if (!k)
		abort();
	v->kids = k;
	memset(&k[v->n], 0, sizeof(*k));
	if (with_keys) {
		char **ks = realloc(v->keys, (v->n + 1) * sizeof(*ks));
		if (!ks)
			abort();
		v->keys = ks;
		ks[v->n] = NULL;
	}
	return &k[v->n++];
}

static int jarray(struct jparse *j, struct jval *v)
{
	v->t = JARR;
	j->p++;
	jws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return 0;
	}
	for (;;) {
		if (jvalue(j, grow_kids(v, 0)))
			return -1;
		jws(j);
		if (j->p >= j->end)
			return jerr(j, "unterminated array");
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p == ']') {
			j->p++;
			return 0;
		}
		return jerr(j, "expected , or ]");
	}
}

static int jobject(struct jparse *j, struct jval *v)
{
	v->t = JOBJ;
	j->p++;
	jws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
		return 0;
	}
	for (;;) {
		size_t klen;
		jws(j);
		if (j->p >= j->end || *j->p != '"')
			return jerr(j, "expected a key");
		struct jval *kid = grow_kids(v, 1);
		if (jstring(j, &v->keys[v->n - 1], &klen))
			return -1;
		for (size_t i = 0; i + 1 < v->n; i++)
			if (!strcmp(v->keys[i], v->keys[v->n - 1]))
				return jerr(j, "duplicate key");
		jws(j);
		if (j->p >= j->end || *j->p != ':')
			return jerr(j, "expected :");
		j->p++;
		if (jvalue(j, kid))
			return -1;
		jws(j);
		if (j->p >= j->end)
			return jerr(j, "unterminated object");
		if (*j->p == ',') {
			j->p++;
			continue;
		}
		if (*j->p == '}') {
			j->p++;
			return 0;
		}
		return jerr(j, "expected , or }");
	}
}

static int jvalue(struct jparse *j, struct jval *v)
{
	int r;
	jws(j);
	if (j->p >= j->end)
		return jerr(j, "unexpected end");
	if (++j->depth > 64)
		return jerr(j, "too deep");
	switch (*j->p) {
	case '{':
		r = jobject(j, v);
		break;
	case '[':
		r = jarray(j, v);
		break;
	case '"':
		v->t = JSTR;
		r = jstring(j, &v->text, &v->len);
		break;
	case 't':
		r = jlit(j, "true", v, JBOOL, 1);
		break;
	case 'f':
		r = jlit(j, "false", v, JBOOL, 0);
		break;
	case 'n':
		r = jlit(j, "null", v, JNULL, 0);
		break;
	default:
		if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
			r = jnumber(j, v);
		else
			r = jerr(j, "unexpected character");
	}
	j->depth--;
	return r;
}

/* 0 and a tree in *out, or -1 with a message (out is then empty). */
static int jparse(const char *buf, size_t len, struct jval *out, char *msg, size_t msglen)
{
	struct jparse j = {.start = (const unsigned char *)buf,
	                   .p = (const unsigned char *)buf,
	                   .end = (const unsigned char *)buf + len};
	memset(out, 0, sizeof(*out));
	int r = jvalue(&j, out);
	if (!r) {
		jws(&j);
		if (j.p != j.end)
			r = jerr(&j, "trailing data");
	}
	if (r) {
		snprintf(msg, msglen, "%s at byte %zu", j.err, j.at);
		jfree(out);
	}
	return r;
}

static int jvalid(const char *buf, size_t len)
{
	struct jval v;
	char msg[128];
	if (jparse(buf, len, &v, msg, sizeof(msg))) {
		fprintf(stderr, "  strict parse: %s\n", msg);
		return 0;
	}
	jfree(&v);
	return 1;
}

static const struct jval *jget(const struct jval *o, const char *key)
{
	if (!o || o->t != JOBJ)
		return NULL;
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->keys[i], key))
			return &o->kids[i];
	return NULL;
}

static const char *jstr(const struct jval *o, const char *key)
{
	const struct jval *v = jget(o, key);
	return v && v->t == JSTR ? v->text : NULL;
}

static int64_t jint(const struct jval *o, const char *key, int64_t dflt)
{
	const struct jval *v = jget(o, key);
	return v && v->t == JNUM ? strtoll(v->text, NULL, 10) : dflt;
}

/* A ts/dur token as nanoseconds: it must be exactly "-?<digits>.<3 digits>". */
static int us_to_ns(const struct jval *v, int64_t *ns)
{
	const char *s, *dot;
	if (!v || v->t != JNUM)
		return -1;
	s = v->text;
	dot = strchr(s, '.');
	if (!dot || strlen(dot + 1) != 3 || strspn(dot + 1, "0123456789") != 3 || strchr(s, 'e'))
		return -1;
	int neg = *s == '-';
	int64_t whole = strtoll(s + neg, NULL, 10), frac = strtoll(dot + 1, NULL, 10);
	*ns = (neg ? -1 : 1) * (whole * 1000 + frac);
	return 0;
}

/* ---------------------------------------------------------------------------------------------
 * The JSON writer on its own (memory mode: no output).
 */

/* What the writer makes of one string value, without the quotes and the line end. */
static char *escaped(const char *s, size_t len)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	size_t n;
	cuptrace_json_string_len(w, s, len);
	const char *b = cuptrace_json_buffer(w, &n);
	char *r = NULL;
	if (!cuptrace_json_error(w) && n >= 3 && b[0] == '"' && b[n - 2] == '"' && b[n - 1] == '\n')
		r = strndup(b + 1, n - 3);
	cuptrace_json_free(w);
	return r ? r : strdup("<writer error>");
}

#define CHECK_ESC(in, want)                                                                        \
	do {                                                                                       \
		char *_got = escaped(in, sizeof(in) - 1);                                          \
		CHECK_EQ_STR(_got, want);                                                          \
		free(_got);                                                                        \
	} while (0)

#define FFFD "\xEF\xBF\xBD"

static void test_escape_controls(void)
{
	char in[40], want[300];
	size_t n = 0, m = 0;
	static const char *const named[32] = {
	    [8] = "\\b", [9] = "\\t", [10] = "\\n", [12] = "\\f", [13] = "\\r"};
	for (int c = 1; c < 0x20; c++) {
		in[n++] = (char)c;
		if (named[c])
			m += (size_t)sprintf(want + m, "%s", named[c]);
		else
			m += (size_t)sprintf(want + m, "\\u%04x", c);
	}
	in[n++] = 0x7f;
	m += (size_t)sprintf(want + m, "\\u007f");
	char *got = escaped(in, n);
	CHECK_EQ_STR(got, want);
	free(got);

	got = escaped("a\0b", 3); /* an embedded NUL through string_len */
	CHECK_EQ_STR(got, "a\\u0000b");
	free(got);

	CHECK_ESC("say \"hi\" / C:\\dir\\f", "say \\\"hi\\\" / C:\\\\dir\\\\f");
	/* A backslash that ends a string is \u005c (old trace_processor scanners, see header). */
	CHECK_ESC("dir\\", "dir\\u005c");
	CHECK_ESC("\\", "\\u005c");
	CHECK_ESC("\\\\", "\\\\\\u005c");
	CHECK_ESC("\\\"", "\\\\\\\"");
	CHECK_ESC("", "");
}

static void test_escape_utf8(void)
{
	/* Well-formed text passes through byte for byte, the edges of each range included. */
	CHECK_ESC("\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80",
	          "\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
	CHECK_ESC("\xC2\x80\xDF\xBF", "\xC2\x80\xDF\xBF");                 /* U+0080, U+07FF */
	CHECK_ESC("\xE0\xA0\x80\xED\x9F\xBF", "\xE0\xA0\x80\xED\x9F\xBF"); /* U+0800, U+D7FF */
	CHECK_ESC("\xEE\x80\x80\xEF\xBF\xBF", "\xEE\x80\x80\xEF\xBF\xBF"); /* U+E000, U+FFFF */
	CHECK_ESC("\xF0\x90\x80\x80\xF4\x8F\xBF\xBF", "\xF0\x90\x80\x80\xF4\x8F\xBF\xBF");
	/* One U+FFFD per maximal ill-formed subpart (what Python's errors="replace" gives too). */
	CHECK_ESC("a\xC0\x80z", "a" FFFD FFFD "z");         /* overlong NUL */
	CHECK_ESC("\xC1\xBF", FFFD FFFD);                   /* overlong */
	CHECK_ESC("\xE0\x80\x80", FFFD FFFD FFFD);          /* overlong 3-byte */
	CHECK_ESC("\xF0\x80\x80\x80", FFFD FFFD FFFD FFFD); /* overlong 4-byte */
	CHECK_ESC("\xED\xA0\x80", FFFD FFFD FFFD);          /* surrogate U+D800 */
	CHECK_ESC("\xED\xBF\xBF", FFFD FFFD FFFD);          /* surrogate U+DFFF */
	CHECK_ESC("\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD); /* U+110000 */
	CHECK_ESC("\xF5\x80\x80\x80", FFFD FFFD FFFD FFFD); /* lead F5 */
	CHECK_ESC("\xFF\xFE", FFFD FFFD);
	CHECK_ESC("\x80\xBF", FFFD FFFD);                       /* stray continuations */
	CHECK_ESC("x\xC2", "x" FFFD);                           /* truncated at the end */
	CHECK_ESC("\xE2\x82", FFFD);                            /* truncated 3-byte */
	CHECK_ESC("\xF0\x9F\x98", FFFD);                        /* truncated 4-byte */
	CHECK_ESC("\xE2\x82x", FFFD "x");                       /* cut short by ASCII */
	CHECK_ESC("\xE1\x80\xE2\x82\xAC", FFFD "\xE2\x82\xAC"); /* cut short by a valid char */
	CHECK_ESC("\xC2\"", FFFD "\\\"");                       /* cut short by a quote */
	CHECK_ESC("\xF0\x9F\x98\\", FFFD "\\u005c");
}

static char *one_value(void (*fn)(struct cuptrace_json *, int64_t), int64_t v)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	size_t n;
	fn(w, v);
	const char *b = cuptrace_json_buffer(w, &n);
	char *r = n && b[n - 1] == '\n' ? strndup(b, n - 1) : strdup("<bad>");
	cuptrace_json_free(w);
	return r;
}

static void us_fn(struct cuptrace_json *w, int64_t v)
{
	cuptrace_json_us(w, v);
}
static void int_safe_fn(struct cuptrace_json *w, int64_t v)
{
	cuptrace_json_int_safe(w, v);
}
static void uint_safe_fn(struct cuptrace_json *w, int64_t v)
{
	cuptrace_json_uint_safe(w, (uint64_t)v);
}
static void double_fn(struct cuptrace_json *w, int64_t v)
{
	double d;
	memcpy(&d, &v, sizeof(d));
	cuptrace_json_double(w, d);
}
static void hex_fn(struct cuptrace_json *w, int64_t v)
{
	cuptrace_json_hex(w, (uint64_t)v);
}

#define CHECK_VAL(fn, v, want)                                                                     \
	do {                                                                                       \
		char *_s = one_value(fn, v);                                                       \
		CHECK_EQ_STR(_s, want);                                                            \
		free(_s);                                                                          \
	} while (0)

static int64_t dbits(double d)
{
	int64_t v;
	memcpy(&v, &d, sizeof(v));
	return v;
}

static void check_double_roundtrip(double d)
{
	char *s = one_value(double_fn, dbits(d));
	CHECK(jvalid(s, strlen(s)));
	CHECK(strtod(s, NULL) == d);
	free(s);
}

static void test_numbers(void)
{
	CHECK_VAL(us_fn, 0, "0.000");
	CHECK_VAL(us_fn, 5, "0.005");
	CHECK_VAL(us_fn, 1000, "1.000");
	CHECK_VAL(us_fn, 1234567, "1234.567");
	CHECK_VAL(us_fn, 1234567890123, "1234567890.123");
	CHECK_VAL(us_fn, -1500, "-1.500");
	CHECK_VAL(us_fn, INT64_MAX, "9223372036854775.807");
	CHECK_VAL(us_fn, INT64_MIN, "-9223372036854775.808");

	CHECK_VAL(int_safe_fn, 42, "42");
	CHECK_VAL(int_safe_fn, -7, "-7");
	CHECK_VAL(int_safe_fn, 9007199254740992ll, "9007199254740992");
	CHECK_VAL(int_safe_fn, -9007199254740992ll, "-9007199254740992");
	CHECK_VAL(int_safe_fn, 9007199254740993ll, "\"9007199254740993\"");
	CHECK_VAL(int_safe_fn, INT64_MIN, "\"-9223372036854775808\"");
	CHECK_VAL(uint_safe_fn, (int64_t)UINT64_MAX, "\"18446744073709551615\"");
	CHECK_VAL(uint_safe_fn, 1ll << 53, "9007199254740992");
	CHECK_VAL(hex_fn, 0xdeadbeef, "\"0xdeadbeef\"");
	CHECK_VAL(hex_fn, 0, "\"0x0\"");

	CHECK_VAL(double_fn, dbits(0.1), "0.1");
	CHECK_VAL(double_fn, dbits(0.25), "0.25");
	CHECK_VAL(double_fn, dbits(123.0), "123");
	CHECK_VAL(double_fn, dbits(-0.0), "-0");
	CHECK_VAL(double_fn, dbits(1e300), "1e+300");
	CHECK_VAL(double_fn, dbits(NAN), "null");
	CHECK_VAL(double_fn, dbits(INFINITY), "null");
	CHECK_VAL(double_fn, dbits(-INFINITY), "null");
	check_double_roundtrip(1.0 / 3.0);
	check_double_roundtrip(2.0 / 3.0 * 1e-300);
	check_double_roundtrip(5e-324);
	check_double_roundtrip(1.7976931348623157e308);
	check_double_roundtrip(123456789.123456789);

	/* The traced application may have set a locale whose decimal point is ','. */
	static const char *const comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8", "de_DE",
	                                            "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8"};
	const char *got = NULL;
	for (size_t i = 0; i < sizeof(comma_locales) / sizeof(comma_locales[0]) && !got; i++)
		got = setlocale(LC_NUMERIC, comma_locales[i]);
	if (got) {
		CHECK_VAL(double_fn, dbits(0.5), "0.5");
		CHECK_VAL(double_fn, dbits(-1234.0625), "-1234.0625");
		CHECK_VAL(double_fn, dbits(1.0 / 3.0), "0.3333333333333333");
		CHECK_VAL(us_fn, 1500, "1.500");
		setlocale(LC_NUMERIC, "C");
	} else {
		printf("note: no locale with a decimal comma installed; locale check skipped\n");
	}
}

static void test_writer_structure(void)
{
	struct cuptrace_json *w = cuptrace_json_new(NULL);
	size_t n;

	/* Top-level array: one element per line, '[' with the first, ',' leading the others. */
	cuptrace_json_start_array(w);
	cuptrace_json_int(w, 1);
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "a");
	cuptrace_json_start_array(w);
	cuptrace_json_null(w);
	cuptrace_json_bool(w, 0);
	cuptrace_json_end_array(w);
	cuptrace_json_name(w, "b\"");
	cuptrace_json_start_object(w);
	cuptrace_json_end_object(w);
	cuptrace_json_end_object(w);
	cuptrace_json_end_array(w);
	CHECK_EQ_INT(cuptrace_json_error(w), 0);
	CHECK_EQ_STR(cuptrace_json_buffer(w, &n), "[1\n,{\"a\":[null,false],\"b\\\"\":{}}\n]\n");

	cuptrace_json_reset(w);
	cuptrace_json_start_array(w);
	cuptrace_json_string(w, NULL);
	cuptrace_json_string_len(w, NULL, 0);
	cuptrace_json_string_len(w, "", 0);
	cuptrace_json_end_array(w);
	CHECK_EQ_STR(cuptrace_json_buffer(w, &n), "[null\n,null\n,\"\"\n]\n");

	/* Misuse is an error, and errors stick. */
	cuptrace_json_reset(w);
	cuptrace_json_name(w, "x");
	CHECK_EQ_INT(cuptrace_json_error(w), -EINVAL);
	cuptrace_json_int(w, 1);
	cuptrace_json_buffer(w, &n);
	CHECK_EQ_INT(n, 0);

	cuptrace_json_reset(w);
	cuptrace_json_start_object(w);
	cuptrace_json_string(w, "no name");
	CHECK_EQ_INT(cuptrace_json_error(w), -EINVAL);

	cuptrace_json_reset(w);
	cuptrace_json_start_object(w);
	cuptrace_json_end_array(w);
	CHECK_EQ_INT(cuptrace_json_error(w), -EINVAL);

	cuptrace_json_reset(w);
	cuptrace_json_start_object(w);
	cuptrace_json_name(w, "dangling");
	cuptrace_json_end_object(w);
	CHECK_EQ_INT(cuptrace_json_error(w), -EINVAL);

	cuptrace_json_reset(w);
	cuptrace_json_end_object(w);
	CHECK_EQ_INT(cuptrace_json_error(w), -EINVAL);

	cuptrace_json_reset(w);
	for (int i = 0; i < 33; i++)
		cuptrace_json_start_array(w);
	CHECK_EQ_INT(cuptrace_json_error(w), -E2BIG);

	/* A long string is written whole (no fixed buffers) and parses back to the same bytes. */
	cuptrace_json_reset(w);
	size_t big = 3u << 20;
	char *s = malloc(big + 1);
	for (size_t i = 0; i < big; i++)
		s[i] = "ab\"\\\n\x01\xC3\xA9z"[i % 9];
	s[big] = 0;
	cuptrace_json_string(w, s);
	const char *b = cuptrace_json_buffer(w, &n);
	struct jval v;
	char msg[128];
	CHECK(n > big);
	if (!jparse(b, n, &v, msg, sizeof(msg))) {
		CHECK(v.t == JSTR && v.len == big && !memcmp(v.text, s, big));
		jfree(&v);
	} else {
		CHECK(!"long string did not parse");
	}
	free(s);
	cuptrace_json_free(w);
	cuptrace_json_free(NULL);
}

/* ---------------------------------------------------------------------------------------------
 * Synthetic timelines.
 */

enum {
	U_PROC = 1,
	U_MAIN,
	U_WORKER,
	U_GPU,
	U_S7,
	U_S13,
	U_S7L1,
	U_MEM,
	U_QUEUE,
};

#define HOST_PID 4242
#define GPU_PID  1000004242 /* 1000000000 + 10000000 * 0 + 4242: see chrome_writer.c */
#define BIG_FLOW ((1ull << 60) + 5)

/* Control characters, DEL, quotes, backslashes, valid multi-byte text and invalid bytes. */
static const char NASTY[] = "ctl:\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
                            "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"
                            "\x7f q\"b\\s/ \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 bad:\xC0\x80|"
                            "\xED\xA0\x80|\xF4\x90\x80\x80|\xFF|\xE2\x82";
/* What a reader must get back: the same, invalid parts replaced by U+FFFD. */
static const char NASTY_DECODED[] =
    "ctl:\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
    "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"
    "\x7f q\"b\\s/ \xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80 bad:" FFFD FFFD "|" FFFD FFFD FFFD
    "|" FFFD FFFD FFFD FFFD "|" FFFD "|" FFFD;

static const uint64_t out_launch[] = {101}, in_launch[] = {101};
static const uint64_t out_graph[] = {201, 202, BIG_FLOW};
static const uint64_t in_g0[] = {201}, in_g1[] = {202}, in_g2[] = {BIG_FLOW};
static const uint64_t out_copy[] = {301}, in_copy[] = {301};

static const struct cuptrace_arg kernel_args[] = {
    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "(128,1,1)"},
    {.key = "regs", .type = CUPTRACE_ARG_INT, .v.i = 32},
    {.key = "neg", .type = CUPTRACE_ARG_INT, .v.i = -3},
    {.key = "big_i", .type = CUPTRACE_ARG_INT, .v.i = INT64_MIN},
    {.key = "smem", .type = CUPTRACE_ARG_UINT, .v.u = 49152},
    {.key = "big_u", .type = CUPTRACE_ARG_UINT, .v.u = UINT64_MAX},
    {.key = "ratio", .type = CUPTRACE_ARG_DOUBLE, .v.d = 0.25},
    {.key = "nan", .type = CUPTRACE_ARG_DOUBLE, .v.d = NAN},
    {.key = "ptr", .type = CUPTRACE_ARG_POINTER, .v.u = 0x7f00deadbeefull},
    {.key = "async", .type = CUPTRACE_ARG_BOOL, .v.b = 1},
    {.key = "str_nasty", .type = CUPTRACE_ARG_STRING, .v.s = NASTY},
    {.key = "correlation_id", .type = CUPTRACE_ARG_UINT, .v.u = 7},   /* not written twice */
    {.key = "grid", .type = CUPTRACE_ARG_STRING, .v.s = "duplicate"}, /* skipped */
    {.key = NULL, .type = CUPTRACE_ARG_INT, .v.i = 1},                /* skipped */
};
static const struct cuptrace_arg copy_args[] = {
    {.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = 1 << 20},
    {.key = "kind", .type = CUPTRACE_ARG_STRING, .v.s = "HtoD"},
};

struct fslice {
	uint64_t track;
	int64_t ts, dur;
	const char *name, *cat;
	uint64_t corr;
	const uint64_t *out;
	size_t nout;
	const uint64_t *in;
	size_t nin;
	const struct cuptrace_arg *args;
	size_t nargs;
};

#define FL(a) a, sizeof(a) / sizeof(a[0])
#define NOFL  NULL, 0

static const struct fslice slices[] = {
    {U_MAIN, 1000, 5000, "cudaLaunchKernel", "cuda_runtime", 7, FL(out_launch), NOFL, NOFL},
    /* The nested driver call covers the API slice's midpoint: the 's' must not bind to it. */
    {U_MAIN, 1500, 3000, "cuLaunchKernel", "cuda_driver", 8, NOFL, NOFL, NOFL},
    {U_MAIN, 10000, 8000, "cudaGraphLaunch", "cuda_runtime", 9, FL(out_graph), NOFL, NOFL},
    {U_WORKER, 500, 29500, NASTY, "nvtx", 0, NOFL, NOFL, NOFL},
    {U_WORKER, 2000, 500, "cudaMemcpyAsync", "cuda_runtime", 10, FL(out_copy), NOFL, NOFL},
    {U_WORKER, 40000, 1, "tiny", "nvtx", 0, NOFL, NOFL, NOFL},
    {U_WORKER, 41000, 0, "zero", "nvtx", 0, NOFL, NOFL, NOFL},
    {U_S7, 6000, 3000, "kernel_a<float>", "kernel", 7, NOFL, FL(in_launch), FL(kernel_args)},
    {U_S7, 20000, 1000, "graph_node_0", "kernel", 9, NOFL, FL(in_g0), NOFL},
    /* Overlaps graph_node_0 on stream 7: the producer put it on a lane. */
    {U_S7L1, 20500, 1500, "graph_node_1", "kernel", 9, NOFL, FL(in_g1), NOFL},
    {U_S13, 20200, 600, "graph_node_2", "kernel", 9, NOFL, FL(in_g2), NOFL},
    {U_S13, 3000, 400, "memcpy HtoD", "memcpy", 10, NOFL, FL(in_copy), FL(copy_args)},
    {U_S7, 1234567890123, 7, "late", "kernel", 0, NOFL, NOFL, NOFL},
};
#define NSLICES (sizeof(slices) / sizeof(slices[0]))

static struct cuptrace_track mk_track(uint64_t uuid, enum cuptrace_track_kind kind, uint64_t parent,
                                      int64_t tid, const char *name, int32_t rank, uint32_t lane)
{
	return (struct cuptrace_track){.uuid = uuid,
	                               .kind = kind,
	                               .parent_uuid = parent,
	                               .pid = HOST_PID,
	                               .tid = tid,
	                               .name = name,
	                               .sort_rank = rank,
	                               .lane = lane};
}

static const char *const app_argv[] = {"./app", "--x=1", "\"q\""};

static void feed_full(struct cuptrace_sink *s)
{
	const struct cuptrace_meta m0[] = {
	    {.key = "gpu0.name", .s = "NVIDIA H200"},
	    {.key = "driver_version", .s = "550.54.15"},
	    {.key = "cupti_dropped", .is_int = 1, .i = 0},
	    {.key = "command_line", .s = "./app --x=1 \"q\""},
	};
	const struct cuptrace_trace_info info = {
	    .pid = HOST_PID,
	    .process_name = "app",
	    .hostname = "node\x01-7",
	    .start_realtime_ns = 1700000000123456789ll,
	    .start_boottime_ns = 123456789,
	    .trace_uuid_hi = 0x0011223344556677ull,
	    .trace_uuid_lo = 0x8899aabbccddeeffull,
	    .meta = m0,
	    .nmeta = 4,
	};
	struct cuptrace_track t;
	const struct cuptrace_sink_ops *ops = s->ops;

	CHECK_EQ_INT(ops->begin(s, &info), 0);
	t = mk_track(U_PROC, CUPTRACE_TRACK_PROCESS, 0, 0, "app \"quoted\"", 0, 0);
	t.cmdline = app_argv;
	t.cmdline_len = 3;
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_MAIN, CUPTRACE_TRACK_THREAD, U_PROC, HOST_PID, "main", 0, 0);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_WORKER, CUPTRACE_TRACK_THREAD, U_PROC, 4250, "worker\ttab", 1, 0);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_GPU, CUPTRACE_TRACK_GROUP, U_PROC, 0, "GPU 0: NVIDIA H200", 0, 0);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_S7, CUPTRACE_TRACK_SLICES, U_GPU, 0, "Stream 7", 7, 0);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_S13, CUPTRACE_TRACK_SLICES, U_GPU, 0, "Stream 13", 13, 0);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_S7L1, CUPTRACE_TRACK_SLICES, U_GPU, 0, "Stream 7", 7, 1);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_MEM, CUPTRACE_TRACK_COUNTER, U_GPU, 0, "Device memory used", 0, 0);
	t.unit = CUPTRACE_UNIT_BYTES;
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_QUEUE, CUPTRACE_TRACK_COUNTER, U_PROC, 0, "Launch queue", 0, 0);
	CHECK_EQ_INT(ops->track(s, &t), 0);
	t = mk_track(U_MAIN, CUPTRACE_TRACK_THREAD, U_PROC, 1, "again", 0, 0); /* skipped */
	CHECK_EQ_INT(ops->track(s, &t), 0);

	/* Events arrive in any order: last first. */
	for (size_t i = NSLICES; i-- > 0;) {
		const struct fslice *f = &slices[i];
		struct cuptrace_slice e = {
		    .track_uuid = f->track,
		    .ts = f->ts,
		    .dur = f->dur,
		    .name = f->name,
		    .category = f->cat,
		    .correlation_id = f->corr,
		    .args = f->args,
		    .nargs = f->nargs,
		    .flows_out = f->out,
		    .nflows_out = f->nout,
		    .flows_in = f->in,
		    .nflows_in = f->nin,
		};
		CHECK_EQ_INT(ops->slice(s, &e), 0);
		if (i == 6) {
			const struct cuptrace_meta m1[] = {
			    {.key = "cupti_dropped", .is_int = 1, .i = 5},
			    {.key = "records", .is_int = 1, .i = 12345}};
			CHECK_EQ_INT(ops->meta(s, m1, 2), 0);
		}
	}
	const struct cuptrace_arg iargs[] = {{.key = "n", .type = CUPTRACE_ARG_INT, .v.i = 1}};
	struct cuptrace_instant in[] = {
	    {.track_uuid = U_MAIN,
	     .ts = 7000,
	     .name = "marker",
	     .category = "mark",
	     .args = iargs,
	     .nargs = 1},
	    {.track_uuid = U_GPU, .ts = 8000, .name = "gpu event"},
	    {.track_uuid = U_WORKER, .ts = 2100, .name = "nested instant", .correlation_id = 3},
	};
	for (size_t i = 0; i < 3; i++)
		CHECK_EQ_INT(ops->instant(s, &in[i]), 0);

	struct cuptrace_counter c[] = {
	    {.track_uuid = U_MEM, .ts = 0, .i = 0},
	    {.track_uuid = U_MEM, .ts = 6000, .i = 1 << 20},
	    {.track_uuid = U_MEM, .ts = 9000, .i = 0},
	    {.track_uuid = U_MEM, .ts = 20000, .i = (1ll << 53) + 1},
	    {.track_uuid = U_QUEUE, .ts = 100, .is_double = 1, .d = 0.5},
	    {.track_uuid = U_QUEUE, .ts = 200, .is_double = 1, .d = 1.25},
	    {.track_uuid = U_QUEUE, .ts = 300, .is_double = 1, .d = INFINITY}, /* skipped */
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		CHECK_EQ_INT(ops->counter(s, &c[i]), 0);

	const struct cuptrace_meta m2[] = {{.key = "key \"with\"\nnewline", .s = "v\x01"}};
	CHECK_EQ_INT(ops->meta(s, m2, 1), 0);

	/* Malformed events are skipped and counted, not fatal. */
	struct cuptrace_instant bad_i = {.track_uuid = U_MEM, .ts = 1, .name = "on a counter"};
	struct cuptrace_slice bad_s = {.track_uuid = 999, .ts = 1, .dur = 1, .name = "nowhere"};
	struct cuptrace_counter bad_c = {.track_uuid = U_MAIN, .ts = 1, .i = 1};
	CHECK_EQ_INT(ops->instant(s, &bad_i), 0);
	CHECK_EQ_INT(ops->slice(s, &bad_s), 0);
	CHECK_EQ_INT(ops->counter(s, &bad_c), 0);
}

/* 1 skipped track + 3 skipped events + 1 infinite counter value */
#define SKIPPED 5

static struct cuptrace_sink *open_sink(const char *path, enum cuptrace_compress mode)
{
	struct cuptrace_output *o = cuptrace_output_open(path, mode, NULL);
	CHECK(o != NULL);
	if (!o)
		return NULL;
	struct cuptrace_sink *s = cuptrace_chrome_sink_new(o);
	CHECK(s != NULL);
	return s;
}

static int run_full(const char *path, enum cuptrace_compress mode)
{
	struct cuptrace_sink *s = open_sink(path, mode);
	if (!s)
		return -1;
	warnings = 0;
	cuptrace_log_fn prev = cuptrace_log_set(quiet_log);
	feed_full(s);
	int r = s->ops->finish(s);
	CHECK_EQ_INT(r, 0);
	CHECK_EQ_INT(warnings, 2); /* one when the first is skipped, one summary at finish */
	cuptrace_log_set(prev);
	cuptrace_sink_destroy(s);
	return r;
}

/* The events of a trace, parsed strictly. */
struct trace {
	struct jval root;
	char *buf;
	size_t len;
};

static int load_trace(const char *path, struct trace *t)
{
	char msg[128];
	memset(t, 0, sizeof(*t));
	t->buf = read_all(path, &t->len);
	if (!t->buf)
		return -1;
	if (jparse(t->buf, t->len, &t->root, msg, sizeof(msg))) {
		fprintf(stderr, "%s: %s\n", path, msg);
		return -1;
	}
	return t->root.t == JARR ? 0 : -1;
}

static void free_trace(struct trace *t)
{
	jfree(&t->root);
	free(t->buf);
}

static const struct jval *find_x(const struct trace *t, const char *name)
{
	for (size_t i = 0; i < t->root.n; i++) {
		const struct jval *e = &t->root.kids[i];
		const char *ph = jstr(e, "ph"), *n = jstr(e, "name");
		if (ph && !strcmp(ph, "X") && n && !strcmp(n, name))
			return e;
	}
	return NULL;
}

static const char *decoded_name(const struct fslice *f)
{
	return f->name == NASTY ? NASTY_DECODED : f->name;
}

static int same_thread(const struct jval *a, const struct jval *b)
{
	return jint(a, "pid", -1) == jint(b, "pid", -2) && jint(a, "tid", -1) == jint(b, "tid", -2);
}

/* The deepest 'X' on e's pid/tid that contains e's ts: the slice trace_processor binds a flow
 * event to. Nested slices are strictly inside their parents, so the shortest one wins. */
static const struct jval *binding_slice(const struct trace *t, const struct jval *e)
{
	const struct jval *best = NULL;
	int64_t ts, bdur = INT64_MAX, xts, xdur;
	if (us_to_ns(jget(e, "ts"), &ts))
		return NULL;
	for (size_t i = 0; i < t->root.n; i++) {
		const struct jval *x = &t->root.kids[i];
		const char *ph = jstr(x, "ph");
		if (!ph || strcmp(ph, "X") || !same_thread(x, e))
			continue;
		if (us_to_ns(jget(x, "ts"), &xts) || us_to_ns(jget(x, "dur"), &xdur))
			continue;
		if (xts <= ts && (ts < xts + xdur || (xdur == 0 && ts == xts)) && xdur < bdur) {
			best = x;
			bdur = xdur;
		}
	}
	return best;
}

static const struct jval *find_meta(const struct trace *t, const char *what, int64_t pid,
                                    int64_t tid)
{
	for (size_t i = 0; i < t->root.n; i++) {
		const struct jval *e = &t->root.kids[i];
		const char *ph = jstr(e, "ph"), *n = jstr(e, "name");
		if (!ph || strcmp(ph, "M") || !n || strcmp(n, what) || jint(e, "pid", -1) != pid)
			continue;
		if (tid < 0 || jint(e, "tid", -1) == tid)
			return jget(e, "args");
	}
	return NULL;
}

static const char *flow_id_text(const struct jval *e, char *buf, size_t n)
{
	const struct jval *id = jget(e, "id");
	if (!id || (id->t != JNUM && id->t != JSTR))
		return NULL;
	snprintf(buf, n, "%s%s", id->t == JSTR ? "s:" : "n:", id->text);
	return buf;
}

/* (b): every event accounted for against what feed_full() fed. */
static void check_full_events(const struct trace *t)
{
	size_t nx = 0, ns = 0, nf = 0, nc = 0, ni_t = 0, ni_p = 0, ninfo = 0, nsum = 0;
	const struct jval *last_sum = NULL, *info = NULL;

	for (size_t i = 0; i < t->root.n; i++) {
		const struct jval *e = &t->root.kids[i];
		const char *ph = jstr(e, "ph");
		int64_t ns_ts;
		CHECK(e->t == JOBJ && ph);
		if (!ph)
			continue;
		if (strcmp(ph, "M"))
			CHECK(!us_to_ns(jget(e, "ts"), &ns_ts)); /* "<us>.<3 digits>" everywhere */
		if (!strcmp(ph, "X")) {
			nx++;
		} else if (!strcmp(ph, "s")) {
			ns++;
		} else if (!strcmp(ph, "f")) {
			nf++;
		} else if (!strcmp(ph, "C")) {
			nc++;
		} else if (!strcmp(ph, "i")) {
			const char *sc = jstr(e, "s"), *n = jstr(e, "name");
			if (sc && !strcmp(sc, "t") && n && !strcmp(n, "cuptrace: trace info")) {
				ninfo++;
				info = e;
			} else if (sc && !strcmp(sc, "t") && n && !strcmp(n, "cuptrace: summary")) {
				nsum++;
				last_sum = e;
			} else if (sc && !strcmp(sc, "t")) {
				ni_t++;
			} else if (sc && !strcmp(sc, "p")) {
				ni_p++;
				CHECK_EQ_INT(jint(e, "pid", 0), GPU_PID);
			}
		} else {
			CHECK(!strcmp(ph, "M"));
		}
	}
	CHECK_EQ_INT(nx, NSLICES);
	CHECK_EQ_INT(ns, 5);
	CHECK_EQ_INT(nf, 5);
	CHECK_EQ_INT(nc, 6);
	CHECK_EQ_INT(ni_t, 2);
	CHECK_EQ_INT(ni_p, 1);
	CHECK_EQ_INT(ninfo, 1);
	CHECK_EQ_INT(nsum, 3); /* two meta() calls, and the skipped count at finish */
	/* The trace info comes first, at 0. */
	CHECK(info == &t->root.kids[0]);

	/* Trace metadata. */
	const struct jval *ia = jget(info, "args"), *sa = jget(last_sum, "args");
	CHECK_EQ_INT(jint(ia, "pid", 0), HOST_PID);
	CHECK_EQ_STR(jstr(ia, "process_name"), "app");
	CHECK_EQ_STR(jstr(ia, "hostname"), "node\x01-7");
	CHECK_EQ_STR(jstr(ia, "start_realtime_ns"), "1700000000123456789"); /* > 2^53 */
	CHECK_EQ_INT(jint(ia, "start_boottime_ns", 0), 123456789);
	CHECK_EQ_STR(jstr(ia, "trace_uuid"), "00112233-4455-6677-8899-aabbccddeeff");
	CHECK_EQ_STR(jstr(ia, "gpu0.name"), "NVIDIA H200");
	CHECK_EQ_STR(jstr(ia, "command_line"), "./app --x=1 \"q\"");
	CHECK_EQ_INT(jint(ia, "cupti_dropped", -1), 0);
	CHECK_EQ_INT(jint(sa, "cupti_dropped", -1), 5);
	CHECK_EQ_INT(jint(sa, "records", -1), 12345);
	CHECK_EQ_STR(jstr(sa, "driver_version"), "550.54.15");
	CHECK_EQ_STR(jstr(sa, "key \"with\"\nnewline"), "v\x01");
	CHECK_EQ_INT(jint(sa, "chrome_skipped_events", -1), SKIPPED);
	int64_t sum_ts = -1;
	CHECK(!us_to_ns(jget(last_sum, "ts"), &sum_ts));
	CHECK_EQ_INT(sum_ts, 1234567890123 + 7); /* the latest end seen */

	/* Processes: host, then its GPU under a synthetic pid, sorted after it. */
	const struct jval *pa = find_meta(t, "process_name", HOST_PID, -1);
	const struct jval *ga = find_meta(t, "process_name", GPU_PID, -1);
	CHECK_EQ_STR(jstr(pa, "name"), "app \"quoted\"");
	CHECK_EQ_STR(jstr(ga, "name"), "GPU 0: NVIDIA H200");
	CHECK_EQ_STR(jstr(find_meta(t, "process_labels", HOST_PID, -1), "labels"),
	             "./app --x=1 \"q\"");
	int64_t hs = jint(find_meta(t, "process_sort_index", HOST_PID, -1), "sort_index", -1);
	int64_t gs = jint(find_meta(t, "process_sort_index", GPU_PID, -1), "sort_index", -1);
	CHECK(hs >= 0 && gs > hs);

	/* Slices: exact times, one tid per track, the same tid for a track's slices. */
	const struct jval *x[NSLICES];
	for (size_t i = 0; i < NSLICES; i++) {
		const struct fslice *f = &slices[i];
		int64_t ts = -1, dur = -1;
		x[i] = find_x(t, decoded_name(f));
		CHECK(x[i] != NULL);
		if (!x[i])
			return;
		CHECK(!us_to_ns(jget(x[i], "ts"), &ts));
		CHECK(!us_to_ns(jget(x[i], "dur"), &dur));
		CHECK_EQ_INT(ts, f->ts);
		CHECK_EQ_INT(dur, f->dur);
		CHECK_EQ_STR(jstr(x[i], "cat"), f->cat);
		int64_t pid = jint(x[i], "pid", -1), tid = jint(x[i], "tid", -1);
		if (f->track == U_MAIN || f->track == U_WORKER) {
			CHECK_EQ_INT(pid, HOST_PID);
			CHECK_EQ_INT(tid, f->track == U_MAIN ? HOST_PID : 4250);
		} else {
			CHECK_EQ_INT(pid, GPU_PID);
			CHECK(tid >= (1 << 22)); /* synthetic: no real tid */
		}
		const struct jval *tn = find_meta(t, "thread_name", pid, tid);
		const char *want = f->track == U_MAIN     ? "main"
		                   : f->track == U_WORKER ? "worker\ttab"
		                   : f->track == U_S13    ? "Stream 13"
		                                          : "Stream 7";
		CHECK_EQ_STR(jstr(tn, "name"), want);
		CHECK(find_meta(t, "thread_sort_index", pid, tid) != NULL);
		if (f->corr)
			CHECK_EQ_INT(jint(jget(x[i], "args"), "correlation_id", 0),
			             (int64_t)f->corr);
		for (size_t k = 0; k < i; k++)
			CHECK((slices[k].track == f->track) == same_thread(x[k], x[i]));
	}
	/* Stream 7, its lane right after it, then stream 13. */
	int64_t s7 = -1, l7 = -1, s13 = -1;
	for (size_t i = 0; i < NSLICES; i++) {
		int64_t si = jint(
		    find_meta(t, "thread_sort_index", jint(x[i], "pid", -1), jint(x[i], "tid", -1)),
		    "sort_index", -1);
		if (slices[i].track == U_S7)
			s7 = si;
		if (slices[i].track == U_S7L1)
			l7 = si;
		if (slices[i].track == U_S13)
			s13 = si;
	}
	CHECK(s7 < l7 && l7 < s13);

	/* No two 'X' on one tid partially overlap. */
	for (size_t i = 0; i < NSLICES; i++)
		for (size_t k = 0; k < i; k++) {
			if (!same_thread(x[i], x[k]))
				continue;
			int64_t a0 = slices[i].ts, a1 = a0 + slices[i].dur;
			int64_t b0 = slices[k].ts, b1 = b0 + slices[k].dur;
			int disjoint = a1 <= b0 || b1 <= a0;
			int nested = (a0 >= b0 && a1 <= b1) || (b0 >= a0 && b1 <= a1);
			CHECK(disjoint || nested);
		}

	/* All arg types, escaped strings, no repeated keys. */
	const struct jval *ka = jget(find_x(t, "kernel_a<float>"), "args");
	CHECK(ka && ka->n == 12);
	CHECK_EQ_STR(jstr(ka, "grid"), "(128,1,1)");
	CHECK_EQ_INT(jint(ka, "regs", 0), 32);
	CHECK_EQ_INT(jint(ka, "neg", 0), -3);
	CHECK_EQ_STR(jstr(ka, "big_i"), "-9223372036854775808");
	CHECK_EQ_INT(jint(ka, "smem", 0), 49152);
	CHECK_EQ_STR(jstr(ka, "big_u"), "18446744073709551615");
	CHECK(jget(ka, "ratio") && jget(ka, "ratio")->num == 0.25);
	CHECK_EQ_STR(jstr(ka, "nan"), "nan");
	CHECK_EQ_STR(jstr(ka, "ptr"), "0x7f00deadbeef");
	CHECK(jget(ka, "async") && jget(ka, "async")->t == JBOOL && jget(ka, "async")->b);
	CHECK_EQ_STR(jstr(ka, "str_nasty"), NASTY_DECODED);
	CHECK_EQ_INT(jint(ka, "correlation_id", 0), 7);

	/* Flows: s/f pairs with one id, cat and name; s in its API slice, f ("bp":"e") in its GPU
	 * slice, each bound (deepest enclosing slice) to the slice it was fed on. */
	for (size_t i = 0; i < t->root.n; i++) {
		const struct jval *e = &t->root.kids[i];
		const char *ph = jstr(e, "ph");
		char id[64], id2[64];
		if (!ph || (strcmp(ph, "s") && strcmp(ph, "f")))
			continue;
		int in = !strcmp(ph, "f");
		CHECK_EQ_STR(jstr(e, "cat"), "cuda_flow");
		CHECK_EQ_STR(jstr(e, "name"), "launch");
		if (in)
			CHECK_EQ_STR(jstr(e, "bp"), "e");
		else
			CHECK(!jget(e, "bp"));
		CHECK(flow_id_text(e, id, sizeof(id)) != NULL);
		/* exactly one partner */
		int partners = 0;
		for (size_t k = 0; k < t->root.n; k++) {
			const struct jval *o = &t->root.kids[k];
			const char *oph = jstr(o, "ph");
			if (!oph || strcmp(oph, in ? "s" : "f"))
				continue;
			if (flow_id_text(o, id2, sizeof(id2)) && !strcmp(id, id2) &&
			    !strcmp(jstr(o, "cat"), jstr(e, "cat")) &&
			    !strcmp(jstr(o, "name"), jstr(e, "name")))
				partners++;
		}
		CHECK_EQ_INT(partners, 1);
		/* the slice it was fed on */
		const struct fslice *owner = NULL;
		for (size_t k = 0; k < NSLICES && !owner; k++) {
			const uint64_t *ids = in ? slices[k].in : slices[k].out;
			size_t n = in ? slices[k].nin : slices[k].nout;
			for (size_t m = 0; m < n; m++) {
				char want[64];
				if (ids[m] <= (1ull << 53))
					snprintf(want, sizeof(want), "n:%" PRIu64, ids[m]);
				else
					snprintf(want, sizeof(want), "s:0x%" PRIx64, ids[m]);
				if (!strcmp(want, id))
					owner = &slices[k];
			}
		}
		CHECK(owner != NULL);
		const struct jval *b = binding_slice(t, e);
		CHECK(b != NULL && owner && !strcmp(jstr(b, "name"), decoded_name(owner)));
		int64_t fts = -1;
		CHECK(!us_to_ns(jget(e, "ts"), &fts));
		if (owner && owner->dur >= 2)
			CHECK(fts > owner->ts &&
			      fts < owner->ts + owner->dur); /* strictly inside */
	}

	/* Counters: name, unit key, values in order. */
	const char *const mem_vals[] = {"0", "1048576", "0", "s:9007199254740993"};
	const double q_vals[] = {0.5, 1.25};
	size_t nm = 0, nq = 0;
	for (size_t i = 0; i < t->root.n; i++) {
		const struct jval *e = &t->root.kids[i];
		const char *ph = jstr(e, "ph"), *n = jstr(e, "name");
		if (!ph || strcmp(ph, "C") || !n)
			continue;
		const struct jval *a = jget(e, "args");
		CHECK(a && a->n == 1);
		if (!strcmp(n, "Device memory used")) {
			CHECK_EQ_INT(jint(e, "pid", 0), GPU_PID);
			const struct jval *v = jget(a, "bytes");
			char got[64] = "";
			if (v)
				snprintf(got, sizeof(got), "%s%s", v->t == JSTR ? "s:" : "",
				         v->text ? v->text : "");
			if (nm < 4)
				CHECK_EQ_STR(got, mem_vals[nm]);
			nm++;
		} else if (!strcmp(n, "Launch queue")) {
			CHECK_EQ_INT(jint(e, "pid", 0), HOST_PID);
			const struct jval *v = jget(a, "value");
			CHECK(v && v->t == JNUM && nq < 2 && v->num == q_vals[nq]);
			nq++;
		} else {
			CHECK(!"unexpected counter");
		}
	}
	CHECK_EQ_INT(nm, 4);
	CHECK_EQ_INT(nq, 2);
}

/* (a) second opinion: Python's json module, strict about constants, duplicate keys and UTF-8,
 * and Python's own U+FFFD replacement as the oracle for NASTY. */
static const char py_check[] =
    "import json, sys\n"
    "def const(c): raise ValueError('non-standard constant ' + c)\n"
    "def pairs(p):\n"
    "    keys = [k for k, _ in p]\n"
    "    if len(keys) != len(set(keys)): raise ValueError('duplicate key')\n"
    "    return dict(p)\n"
    "with open(sys.argv[1], encoding='utf-8', errors='strict') as f:\n"
    "    ev = json.load(f, parse_constant=const, object_pairs_hook=pairs)\n"
    "assert isinstance(ev, list) and ev, 'not a non-empty array'\n"
    "want = open(sys.argv[2], 'rb').read().decode('utf-8', 'replace')\n"
    "names = [e.get('name') for e in ev]\n"
    "assert want in names, 'replacement differs from Python'\n"
    "print('python3: %d events OK' % len(ev))\n";

static void python_check(const char *trace)
{
	char script[512], nasty[512], cmd[2048];
	if (system("command -v python3 >/dev/null 2>&1") != 0) {
		printf("note: python3 not found; the json.load cross-check is skipped\n");
		return;
	}
	tmp_path(script, sizeof(script), "check.py");
	tmp_path(nasty, sizeof(nasty), "nasty.bin");
	CHECK(!write_all_file(script, py_check, sizeof(py_check) - 1));
	CHECK(!write_all_file(nasty, NASTY, sizeof(NASTY) - 1));
	snprintf(cmd, sizeof(cmd), "python3 '%s' '%s' '%s'", script, trace, nasty);
	fflush(stdout);
	int r = system(cmd);
	CHECK(r == 0);
	cleanup(script);
	cleanup(nasty);
}

/* Every line: '[' or ',' then one complete event; the last line is "]". */
static void check_lines(const char *buf, size_t len, int complete)
{
	size_t start = 0, line = 0;
	CHECK(len > 2 && buf[0] == '[' && buf[1] == '{');
	while (start < len) {
		const char *nl = memchr(buf + start, '\n', len - start);
		if (!nl) {
			CHECK(!complete); /* a cut file: a partial last line */
			break;
		}
		size_t end = (size_t)(nl - buf);
		if (complete && end + 1 == len) {
			CHECK(end - start == 1 && buf[start] == ']');
		} else {
			CHECK(buf[start] == (line ? ',' : '['));
			CHECK(jvalid(buf + start + 1, end - start - 1));
		}
		start = end + 1;
		line++;
	}
}

/* What trace_processor v49+ does with a bare array cut anywhere: it drops the partial last event
 * and reads the rest as if the array were closed. That must be valid JSON with every complete
 * line's event in it. */
static int loads_when_cut(const char *buf, size_t cut, size_t *events)
{
	size_t keep = cut;
	while (keep && buf[keep - 1] != '\n')
		keep--;
	*events = 0;
	if (!keep)
		return 1; /* nothing complete yet: an empty trace, nothing we could do */
	/* The whole file is already closed; anything shorter gets the "]" the importer assumes. */
	int closed = keep >= 2 && buf[keep - 2] == ']';
	char *doc = malloc(keep + 2);
	memcpy(doc, buf, keep);
	memcpy(doc + keep, closed ? "" : "]", closed ? 1 : 2);
	struct jval v;
	char msg[128];
	int ok = 0;
	if (!jparse(doc, keep + !closed, &v, msg, sizeof(msg))) {
		ok = v.t == JARR;
		*events = v.n;
		jfree(&v);
	} else {
		fprintf(stderr, "  cut at %zu: %s\n", cut, msg);
	}
	free(doc);
	return ok;
}

static void test_full_plain_and_gzip(void)
{
	char plain[512], gz[512];
	struct trace t;

	tmp_path(plain, sizeof(plain), "full.json");
	tmp_path(gz, sizeof(gz), "full.json.gz");
	if (run_full(plain, CUPTRACE_COMPRESS_NONE) || run_full(gz, CUPTRACE_COMPRESS_GZIP))
		return;

	/* (a) strict parse, both parsers */
	CHECK(!load_trace(plain, &t));
	python_check(plain);
	/* (b) */
	check_full_events(&t);

	/* (d) layout and truncation at every offset */
	check_lines(t.buf, t.len, 1);
	size_t lines = 0, prev = 0;
	for (size_t i = 0; i < t.len; i++)
		lines += t.buf[i] == '\n';
	for (size_t cut = 1; cut <= t.len; cut++) {
		size_t ev;
		int ok = loads_when_cut(t.buf, cut, &ev);
		CHECK(ok);
		if (!ok)
			break;
		CHECK(ev >= prev); /* more bytes never lose events */
		prev = ev;
	}
	CHECK_EQ_INT(prev, t.root.n);
	CHECK_EQ_INT(lines, t.root.n + 1);

	/* (e) gzip decompresses to the same bytes */
	size_t zlen;
	unsigned char *z = (unsigned char *)read_all(gz, &zlen);
	CHECK(z && zlen > 2 && z[0] == 0x1f && z[1] == 0x8b);
	if (z) {
		z_stream zs = {0};
		size_t cap = t.len + 1024;
		unsigned char *out = malloc(cap);
		CHECK(inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK);
		zs.next_in = z;
		zs.avail_in = (uInt)zlen;
		zs.next_out = out;
		zs.avail_out = (uInt)cap;
		CHECK_EQ_INT(inflate(&zs, Z_FINISH), Z_STREAM_END);
		CHECK_EQ_INT(zs.total_out, t.len);
		CHECK(zs.total_out == t.len && !memcmp(out, t.buf, t.len));
		CHECK_EQ_INT(zs.avail_in, 0);
		inflateEnd(&zs);
		free(out);
		free(z);
	}
	free_trace(&t);
	cleanup(plain);
	cleanup(gz);
}

/* (c) golden files, byte for byte. */
static void check_golden(const char *actual_path, const char *golden_name)
{
	char gpath[1024];
	size_t alen, glen;
	golden_path(gpath, sizeof(gpath), golden_name);
	char *a = read_all(actual_path, &alen), *g = read_all(gpath, &glen);
	CHECK(g != NULL);
	CHECK(a != NULL);
	if (a && g) {
		int same = alen == glen && !memcmp(a, g, alen);
		CHECK(same);
		if (!same)
			fprintf(stderr, "  golden mismatch: diff %s %s\n", gpath, actual_path);
		else
			cleanup(actual_path);
		CHECK(jvalid(a, alen));
	}
	free(a);
	free(g);
}

static void test_golden_escape(void)
{
	char path[512];
	tmp_path(path, sizeof(path), "escape.json");
	struct cuptrace_sink *s = open_sink(path, CUPTRACE_COMPRESS_NONE);
	if (!s)
		return;
	const struct cuptrace_trace_info info = {
	    .pid = 7,
	    .process_name = "esc",
	    .hostname = "host",
	    .start_realtime_ns = 1700000000000000000ll,
	    .start_boottime_ns = 5000,
	    .trace_uuid_hi = 0x0123456789abcdefull,
	    .trace_uuid_lo = 0xfedcba9876543210ull,
	};
	struct cuptrace_track p = {
	    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 7, .name = "esc \"proc\""};
	struct cuptrace_track th = {.uuid = 2,
	                            .kind = CUPTRACE_TRACK_THREAD,
	                            .parent_uuid = 1,
	                            .pid = 7,
	                            .tid = 7,
	                            .name = "tab\there"};
	const struct cuptrace_arg args[] = {
	    {.key = "s", .type = CUPTRACE_ARG_STRING, .v.s = "line\nbreak\r\n"},
	    {.key = "ctl", .type = CUPTRACE_ARG_STRING, .v.s = "\x02\x1b[0m"},
	    {.key = "ptr", .type = CUPTRACE_ARG_POINTER, .v.u = 0xdeadbeef},
	    {.key = "big", .type = CUPTRACE_ARG_UINT, .v.u = UINT64_MAX},
	    {.key = "neg", .type = CUPTRACE_ARG_INT, .v.i = -5},
	    {.key = "d", .type = CUPTRACE_ARG_DOUBLE, .v.d = 0.1},
	    {.key = "nan", .type = CUPTRACE_ARG_DOUBLE, .v.d = NAN},
	    {.key = "yes", .type = CUPTRACE_ARG_BOOL, .v.b = 1},
	};
	struct cuptrace_slice e = {
	    .track_uuid = 2,
	    .ts = 1234567,
	    .dur = 1000,
	    /* é, C0 AF (overlong '/'), 😀, F0 9F (cut short), a final backslash */
	    .name = "q\" b\\ /\x01\x1f\x7f \xC3\xA9\xC0\xAF\xF0\x9F\x98\x80\xF0\x9F end\\",
	    .category = "cuda_runtime",
	    .args = args,
	    .nargs = sizeof(args) / sizeof(args[0]),
	};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	CHECK_EQ_INT(s->ops->track(s, &p), 0);
	CHECK_EQ_INT(s->ops->track(s, &th), 0);
	CHECK_EQ_INT(s->ops->slice(s, &e), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	check_golden(path, "chrome_escape.json");
}

static void test_golden_flow(void)
{
	char path[512];
	tmp_path(path, sizeof(path), "flow.json");
	struct cuptrace_sink *s = open_sink(path, CUPTRACE_COMPRESS_NONE);
	if (!s)
		return;
	const struct cuptrace_meta m0[] = {{.key = "gpu0.name", .s = "NVIDIA H200"},
	                                   {.key = "cupti_dropped", .is_int = 1, .i = 0}};
	const struct cuptrace_trace_info info = {
	    .pid = 100, .process_name = "flow", .hostname = "h", .meta = m0, .nmeta = 2};
	static const char *const argv[] = {"./flow", "-n", "2"};
	const struct cuptrace_track tracks[] = {
	    {.uuid = 1,
	     .kind = CUPTRACE_TRACK_PROCESS,
	     .pid = 100,
	     .name = "flow",
	     .cmdline = argv,
	     .cmdline_len = 3},
	    {.uuid = 2,
	     .kind = CUPTRACE_TRACK_THREAD,
	     .parent_uuid = 1,
	     .pid = 100,
	     .tid = 101,
	     .name = "main"},
	    {.uuid = 3,
	     .kind = CUPTRACE_TRACK_GROUP,
	     .parent_uuid = 1,
	     .pid = 100,
	     .name = "GPU 0: NVIDIA H200"},
	    {.uuid = 4,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = 100,
	     .name = "Stream 7",
	     .sort_rank = 7},
	    {.uuid = 5,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = 100,
	     .name = "Stream 9",
	     .sort_rank = 9},
	    {.uuid = 6,
	     .kind = CUPTRACE_TRACK_SLICES,
	     .parent_uuid = 3,
	     .pid = 100,
	     .name = "Stream 7",
	     .sort_rank = 7,
	     .lane = 1},
	    {.uuid = 7,
	     .kind = CUPTRACE_TRACK_COUNTER,
	     .parent_uuid = 3,
	     .pid = 100,
	     .name = "Device memory used",
	     .unit = CUPTRACE_UNIT_BYTES},
	};
	const uint64_t big = 0x1000000000000001ull;
	const uint64_t in1[] = {7}, in2[] = {big}, in3[] = {8}, out[] = {7, 8, big};
	const struct cuptrace_arg bytes[] = {
	    {.key = "bytes", .type = CUPTRACE_ARG_UINT, .v.u = 4096}};
	const struct cuptrace_slice ev[] = {
	    {.track_uuid = 4,
	     .ts = 4000,
	     .dur = 2500,
	     .name = "k1",
	     .category = "kernel",
	     .correlation_id = 11,
	     .flows_in = in1,
	     .nflows_in = 1},
	    {.track_uuid = 5,
	     .ts = 3500,
	     .dur = 1,
	     .name = "HtoD",
	     .category = "memcpy",
	     .correlation_id = 12,
	     .args = bytes,
	     .nargs = 1,
	     .flows_in = in2,
	     .nflows_in = 1},
	    {.track_uuid = 6,
	     .ts = 5000,
	     .dur = 2000,
	     .name = "k2",
	     .category = "kernel",
	     .correlation_id = 13,
	     .flows_in = in3,
	     .nflows_in = 1},
	    {.track_uuid = 2,
	     .ts = 1000,
	     .dur = 2000,
	     .name = "cudaGraphLaunch",
	     .category = "cuda_runtime",
	     .correlation_id = 11,
	     .flows_out = out,
	     .nflows_out = 3},
	};
	const struct cuptrace_counter c = {.track_uuid = 7, .ts = 4000, .i = 1048576};
	const struct cuptrace_instant mark = {.track_uuid = 2, .ts = 2500, .name = "mark"};
	const struct cuptrace_meta m1[] = {{.key = "cupti_dropped", .is_int = 1, .i = 3}};

	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	for (size_t i = 0; i < sizeof(tracks) / sizeof(tracks[0]); i++)
		CHECK_EQ_INT(s->ops->track(s, &tracks[i]), 0);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		CHECK_EQ_INT(s->ops->slice(s, &ev[i]), 0);
	CHECK_EQ_INT(s->ops->counter(s, &c), 0);
	CHECK_EQ_INT(s->ops->instant(s, &mark), 0);
	CHECK_EQ_INT(s->ops->meta(s, m1, 1), 0);
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);
	check_golden(path, "chrome_flow.json");
}

/* A tracer killed with SIGKILL mid-run leaves a file that loads: '[' + complete lines + at most
 * one partial line. */
static void test_sigkill(void)
{
	char path[512];
	tmp_path(path, sizeof(path), "killed.json");
	pid_t child = fork();
	CHECK(child >= 0);
	if (child < 0)
		return;
	if (child == 0) {
		struct cuptrace_output_opts o = {.sz = sizeof(o), .flush_ms = 1};
		struct cuptrace_output *out =
		    cuptrace_output_open(path, CUPTRACE_COMPRESS_NONE, &o);
		struct cuptrace_sink *s = out ? cuptrace_chrome_sink_new(out) : NULL;
		const struct cuptrace_trace_info info = {
		    .pid = 1, .process_name = "k", .hostname = "h"};
		const struct cuptrace_track p = {
		    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 1, .name = "k"};
		const struct cuptrace_track th = {.uuid = 2,
		                                  .kind = CUPTRACE_TRACK_THREAD,
		                                  .parent_uuid = 1,
		                                  .pid = 1,
		                                  .tid = 1,
		                                  .name = "t"};
		if (!s || s->ops->begin(s, &info) || s->ops->track(s, &p) || s->ops->track(s, &th))
			_exit(2);
		for (int64_t i = 0;; i++) {
			struct cuptrace_slice e = {.track_uuid = 2,
			                           .ts = i * 10,
			                           .dur = 5,
			                           .name = NASTY,
			                           .category = "x"};
			if (s->ops->slice(s, &e))
				_exit(3);
		}
	}
	struct stat st;
	int waited = 0;
	/* Enough for well over 1000 events of ~400 bytes each, wherever the kill cuts. */
	while (waited < 20000 && (stat(path, &st) || st.st_size < 600000)) {
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
		waited += 2;
	}
	kill(child, SIGKILL);
	int status = 0;
	waitpid(child, &status, 0);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	size_t len, ev = 0;
	char *buf = read_all(path, &len);
	CHECK(buf && len >= 600000);
	if (buf) {
		CHECK(len < 2 || memcmp(buf + len - 2, "]\n", 2)); /* no closing bracket */
		check_lines(buf, len, 0);
		CHECK(loads_when_cut(buf, len, &ev));
		CHECK(ev > 1000);
	}
	free(buf);
	cleanup(path);
}

/* Errors: a full disk sticks and finish reports it; misuse; destroy without finish. */
static void test_errors(void)
{
	char path[512];
	size_t len, ev;

	/* /dev/full: writes fail with ENOSPC once the output drains its buffer. */
	struct cuptrace_output *o = cuptrace_output_open("/dev/full", CUPTRACE_COMPRESS_NONE, NULL);
	if (o) {
		struct cuptrace_sink *s = cuptrace_chrome_sink_new(o);
		const struct cuptrace_trace_info info = {
		    .pid = 1, .process_name = "f", .hostname = "h"};
		const struct cuptrace_track p = {
		    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 1, .name = "p"};
		const struct cuptrace_track th = {.uuid = 2,
		                                  .kind = CUPTRACE_TRACK_THREAD,
		                                  .parent_uuid = 1,
		                                  .pid = 1,
		                                  .tid = 1,
		                                  .name = "t"};
		CHECK_EQ_INT(s->ops->begin(s, &info), 0);
		CHECK_EQ_INT(s->ops->track(s, &p), 0);
		CHECK_EQ_INT(s->ops->track(s, &th), 0);
		int r = 0;
		for (int i = 0; i < 100000 && !r; i++) {
			struct cuptrace_slice e = {
			    .track_uuid = 2, .ts = i, .dur = 1, .name = NASTY};
			r = s->ops->slice(s, &e);
		}
		CHECK_EQ_INT(r, -ENOSPC);
		struct cuptrace_counter c = {.track_uuid = 2, .ts = 1};
		CHECK_EQ_INT(s->ops->counter(s, &c), -ENOSPC);
		CHECK_EQ_INT(s->ops->finish(s), -ENOSPC);
		CHECK(s->ops->finish(s) < 0);
		cuptrace_sink_destroy(s);
	} else {
		printf("note: /dev/full not available; disk-full check skipped\n");
	}

	/* Constructor failure owns nothing it cannot release; NULL is refused. */
	errno = 0;
	CHECK(cuptrace_chrome_sink_new(NULL) == NULL && errno == EINVAL);
	cuptrace_sink_destroy(NULL);

	/* finish without begin: still a valid (empty) trace. */
	tmp_path(path, sizeof(path), "empty.json");
	struct cuptrace_sink *s = open_sink(path, CUPTRACE_COMPRESS_NONE);
	if (s) {
		struct cuptrace_slice e = {.track_uuid = 1, .name = "before begin"};
		CHECK_EQ_INT(s->ops->slice(s, &e), -EINVAL);
		CHECK_EQ_INT(s->ops->finish(s), 0);
		cuptrace_sink_destroy(s);
		char *b = read_all(path, &len);
		CHECK(b && len == 3 && !memcmp(b, "[]\n", 3));
		free(b);
		cleanup(path);
	}

	/* destroy without finish: the file keeps complete lines and no "]", and loads. */
	tmp_path(path, sizeof(path), "nofinish.json");
	s = open_sink(path, CUPTRACE_COMPRESS_NONE);
	if (s) {
		const struct cuptrace_trace_info info = {
		    .pid = 3, .process_name = "n", .hostname = "h"};
		const struct cuptrace_track p = {
		    .uuid = 1, .kind = CUPTRACE_TRACK_PROCESS, .pid = 3, .name = "p"};
		CHECK_EQ_INT(s->ops->begin(s, &info), 0);
		CHECK_EQ_INT(s->ops->track(s, &p), 0);
		CHECK_EQ_INT(s->ops->begin(s, &info), -EINVAL); /* once */
		cuptrace_sink_destroy(s);
		char *b = read_all(path, &len);
		CHECK(b && len > 0 && b[len - 1] == '\n' && b[len - 2] == '}');
		if (b) {
			check_lines(b, len, 0);
			CHECK(loads_when_cut(b, len, &ev));
			CHECK_EQ_INT(ev, 3);
		}
		free(b);
		cleanup(path);
	}
}

/* Many groups: synthetic pids stay distinct, in int32, and never in the real pid range. */
static void test_pid_scheme(void)
{
	char path[512];
	tmp_path(path, sizeof(path), "pids.json");
	struct cuptrace_sink *s = open_sink(path, CUPTRACE_COMPRESS_NONE);
	if (!s)
		return;
	const struct cuptrace_trace_info info = {
	    .pid = 9999999, .process_name = "p", .hostname = "h"};
	CHECK_EQ_INT(s->ops->begin(s, &info), 0);
	/* Two processes; the second's pid does not fit the decimal scheme (>= 10^7). */
	const int32_t pids[2] = {9999999, 12345678};
	uint64_t uuid = 1;
	for (int p = 0; p < 2; p++) {
		struct cuptrace_track t = {
		    .uuid = uuid++, .kind = CUPTRACE_TRACK_PROCESS, .pid = pids[p], .name = "proc"};
		CHECK_EQ_INT(s->ops->track(s, &t), 0);
		uint64_t parent = t.uuid;
		for (int g = 0; g < 120; g++) {
			struct cuptrace_track gt = {.uuid = uuid++,
			                            .kind = CUPTRACE_TRACK_GROUP,
			                            .parent_uuid = parent,
			                            .pid = pids[p],
			                            .name = "GPU",
			                            .sort_rank = g};
			CHECK_EQ_INT(s->ops->track(s, &gt), 0);
		}
	}
	CHECK_EQ_INT(s->ops->finish(s), 0);
	cuptrace_sink_destroy(s);

	struct trace t;
	CHECK(!load_trace(path, &t));
	int64_t seen[512];
	size_t n = 0;
	for (size_t i = 0; i < t.root.n; i++) {
		const struct jval *e = &t.root.kids[i];
		const char *ph = jstr(e, "ph"), *name = jstr(e, "name");
		if (!ph || strcmp(ph, "M") || strcmp(name, "process_name"))
			continue;
		int64_t pid = jint(e, "pid", -1);
		if (pid == pids[0] || pid == pids[1])
			continue;
		CHECK(pid >= (1 << 22) && pid <= INT32_MAX);
		for (size_t k = 0; k < n; k++)
			CHECK(seen[k] != pid);
		if (n < 512)
			seen[n++] = pid;
	}
	CHECK_EQ_INT(n, 240);
	CHECK_EQ_INT(seen[0], 1000000000ll + 9999999); /* first group of pid 9999999 */
	CHECK_EQ_INT(seen[1], 1010000000ll + 9999999);
	free_trace(&t);
	cleanup(path);
}

TEST_MAIN(T(test_escape_controls), T(test_escape_utf8), T(test_numbers), T(test_writer_structure),
          T(test_golden_escape), T(test_golden_flow), T(test_full_plain_and_gzip), T(test_sigkill),
          T(test_errors), T(test_pid_scheme))
