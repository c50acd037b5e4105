/* A small strict JSON parser (RFC 8259) for the trace readers: a pull parser over a buffer in
 * memory that hands out one value at a time, so a reader walks a document of any size without
 * building a tree of it.
 *
 * Strict: one value and whitespace, no comments, trailing commas, single quotes, NaN, leading
 * zeros or other extensions; raw control characters in strings are refused except tab. Bytes
 * that are not valid UTF-8 are passed through as they are (event.h: sinks repair them); escapes
 * are decoded to UTF-8, an unpaired surrogate escape and \u0000 to U+FFFD.
 *
 * Bounded: it never recurses deeper than JP_MAX_DEPTH containers and allocates only its string
 * scratch buffers, each at most as long as the longest string of the input.
 *
 * Errors: the first one sticks (every later call fails at once) and is described in
 * jp_error() as "NAME: line L, column C (byte B): what is wrong".
 *
 * Threading: a parser is used by one thread; it never changes the buffer it reads. */
#ifndef CUPTRACE_READ_JSON_PARSE_H
#define CUPTRACE_READ_JSON_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define JP_MAX_DEPTH 64

enum jtype { JT_NONE = 0, JT_OBJECT, JT_ARRAY, JT_STRING, JT_NUMBER, JT_TRUE, JT_FALSE, JT_NULL };

struct jp {
	const uint8_t *base, *p, *end;
	const char *name; /* for messages; borrowed */
	int failed;
	int first;      /* just after '{' or '[': no ',' expected before the next member */
	unsigned depth; /* containers open */
	char msg[320];
	char *scratch[2]; /* decoded strings: [0] object keys, [1] values */
	size_t scap[2];
};

/* A number as written, and what it holds. */
struct jnum {
	const char *text; /* into the input; not NUL-terminated */
	size_t len;
	int is_int; /* no fraction or exponent, and within int64 */
	int64_t i;  /* is_int */
	double d;   /* always (may be +-inf for huge values) */
};

void jp_init(struct jp *j, const void *data, size_t len, const char *name);
void jp_free(struct jp *j);
/* Records an error at the current position (if none yet) and returns -1. */
int jp_fail(struct jp *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *jp_error(const struct jp *j);
/* Byte offset of the parser in the input. */
size_t jp_offset(const struct jp *j);

/* The type of the next value (after whitespace), without consuming it; JT_NONE at the end of
 * the input or after an error. */
enum jtype jp_peek(struct jp *j);
/* '{' ... '}': after jp_object_begin, each jp_object_next returns 1 with the member's key
 * (decoded, NUL-terminated, valid until the next key) and the parser at its value, which the
 * caller must consume (read it or jp_skip it); 0 once the object is closed; -1 on error. */
int jp_object_begin(struct jp *j);
int jp_object_next(struct jp *j, const char **key, size_t *klen);
/* '[' ... ']': likewise, jp_array_next returns 1 before each element. */
int jp_array_begin(struct jp *j);
int jp_array_next(struct jp *j);
/* A string value, decoded and NUL-terminated (it may hold no NUL), valid until the next string
 * value. */
int jp_string(struct jp *j, const char **s, size_t *len);
int jp_number(struct jp *j, struct jnum *n);
/* true or false. */
int jp_bool(struct jp *j, int *b);
/* Consumes any value, checking its syntax. */
int jp_skip(struct jp *j);
/* Consumes any value and gives its text as written (into the input). */
int jp_raw(struct jp *j, const char **text, size_t *len);
/* Only whitespace may follow. */
int jp_finish(struct jp *j);
/* Where the input ended early (a cut file), as opposed to a wrong byte: after a failure, 1 if
 * the parser had reached the end of the input. */
int jp_cut(const struct jp *j);

/* The number times 10^pow10, rounded half away from zero, exactly from its decimal text (no
 * floating point): "1234.5678" with pow10 3 gives 1234568. 0, or -1 if it does not fit in
 * int64. Used for timestamps in microseconds with nanosecond fractions. */
int jnum_scaled(const struct jnum *n, int pow10, int64_t *out);

/* Copies the JSON text of a value (as jp_raw gives it) without the whitespace outside strings,
 * into dst (at most cap - 1 bytes, NUL-terminated). Returns the length, or 0 if it does not
 * fit. */
size_t json_compact(const char *text, size_t len, char *dst, size_t cap);

#endif
