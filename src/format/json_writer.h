/* A small streaming JSON writer (after bpftool's json_writer): it owns the comma and nesting
 * state, escapes every string, and hands each finished line to an output as one record. */
#ifndef CUPTRACE_FORMAT_JSON_WRITER_H
#define CUPTRACE_FORMAT_JSON_WRITER_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_output;
struct cuptrace_json;

/*
 * Layout: every element of a top-level array, and every top-level value, ends with '\n' and is
 * passed to cuptrace_output_write() as one record, together with what preceded it on its line
 * (the opening '[' or the ',' separator). So a top-level array comes out as
 *
 *   [{...}\n  ,{...}\n  ,{...}\n  ]\n
 *
 * one element per line, and only a nested value is ever buffered: memory is bounded by the
 * largest element (the buffer grows as needed, nothing is truncated, and a large buffer is
 * released after its record is written).
 *
 * Strings are UTF-8 on output whatever the input: '"' and '\\' are escaped, every control
 * character below 0x20 becomes a short escape (\b \f \n \r \t) or \u00XX, DEL becomes \u007f,
 * and each ill-formed UTF-8 sequence (stray continuation byte, overlong form, surrogate,
 * truncated sequence, code point above U+10FFFF, bytes F5..FF) is replaced by U+FFFD, one per
 * maximal ill-formed subpart (Unicode ch. 3, "U+FFFD substitution of maximal subparts").
 * Characters above U+007F are written as raw UTF-8, never as \u escapes: trace_processor rejects
 * surrogate-pair escapes. A backslash that ends a string is written \u005c rather than \\:
 * trace_processor's JSON scanner before late 2025 (perfetto PR #3369) took the `\\"` that ends
 * such a string for an escaped quote and lost the rest of the event.
 *
 * Misuse (a value in an object without a name, unbalanced end, nesting deeper than 32) is an
 * error like a failed write. Errors are sticky: every call after the first error does nothing
 * and cuptrace_json_error() returns it (0 or a negative errno).
 *
 * Threading: one thread at a time per writer.
 */

/* out is borrowed (the caller closes it after cuptrace_json_free). With out == NULL the records
 * stay in memory, readable with cuptrace_json_buffer() (tests, small documents). Returns NULL
 * and sets errno on failure. */
struct cuptrace_json *cuptrace_json_new(struct cuptrace_output *out);
/* NULL is fine. Drops anything not yet handed to the output (an unfinished line). */
void cuptrace_json_free(struct cuptrace_json *w);
int cuptrace_json_error(const struct cuptrace_json *w);
/* out == NULL only: everything written so far, NUL-terminated. cuptrace_json_reset empties it
 * and clears a sticky error (tests reuse one writer). */
const char *cuptrace_json_buffer(const struct cuptrace_json *w, size_t *len);
void cuptrace_json_reset(struct cuptrace_json *w);

void cuptrace_json_start_object(struct cuptrace_json *w);
void cuptrace_json_end_object(struct cuptrace_json *w);
void cuptrace_json_start_array(struct cuptrace_json *w);
void cuptrace_json_end_array(struct cuptrace_json *w);
/* The key of the next value in the current object. */
void cuptrace_json_name(struct cuptrace_json *w, const char *name);

/* NULL writes null. s may hold any bytes (see above). */
void cuptrace_json_string(struct cuptrace_json *w, const char *s);
/* len bytes, NUL included (written as \u0000); NULL writes null. */
void cuptrace_json_string_len(struct cuptrace_json *w, const char *s, size_t len);
void cuptrace_json_int(struct cuptrace_json *w, int64_t v);
void cuptrace_json_uint(struct cuptrace_json *w, uint64_t v);
/* An integer as a number when a double holds it exactly (|v| <= 2^53), otherwise as a string of
 * its decimal digits: JavaScript readers (the legacy trace viewer, web tools) would round it. */
void cuptrace_json_int_safe(struct cuptrace_json *w, int64_t v);
void cuptrace_json_uint_safe(struct cuptrace_json *w, uint64_t v);
/* The shortest of 15, 16 or 17 significant digits that reads back as the same double, with '.'
 * whatever the C locale. JSON has no NaN or infinity: those are written as null. */
void cuptrace_json_double(struct cuptrace_json *w, double v);
void cuptrace_json_bool(struct cuptrace_json *w, int v);
void cuptrace_json_null(struct cuptrace_json *w);
/* Nanoseconds as microseconds with exactly three decimals, printed from the integer (no floating
 * point): 1234567 -> 1234.567, 5 -> 0.005, -1500 -> -1.500. */
void cuptrace_json_us(struct cuptrace_json *w, int64_t ns);
/* "0x1f" (a string: pointers and ids that JSON numbers cannot hold exactly). */
void cuptrace_json_hex(struct cuptrace_json *w, uint64_t v);

/* name + value in one call. */
void cuptrace_json_string_field(struct cuptrace_json *w, const char *name, const char *s);
void cuptrace_json_int_field(struct cuptrace_json *w, const char *name, int64_t v);
void cuptrace_json_us_field(struct cuptrace_json *w, const char *name, int64_t ns);

#endif
