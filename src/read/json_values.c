/* JSON reader: a trace event's values (ids, arguments), read from the parser into the compact
 * records of the first pass (json_events.c). Leaves: they call the parser and nothing above. */
#include "read/json_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ---- */

/* "0" or a decimal integer without sign or leading zero that fits int64_t. */
static int decimal_id(const char *s, size_t n, int64_t *out)
{
	uint64_t v = 0;
	if (!n || n > 18 || (s[0] == '0' && n > 1))
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = (int64_t)v;
	return 1;
}

/* A pid, tid or flow id: a number (an integer; anything else by its text) or a string. */
int jr_parse_id(struct jr *r, struct jr_id *id)
{
	struct jp *j = &r->jp;
	const char *s;
	size_t n;

	memset(id, 0, sizeof(*id));
	switch (jp_peek(j)) {
	case JT_NUMBER: {
		struct jnum num;
		if (jp_number(j, &num))
			return -1;
		if (num.is_int) {
			id->i = num.i;
			return 0;
		}
		id->is_str = 1;
		id->s = jr_str(r, num.text, num.len);
		return 0;
	}
	case JT_STRING:
		if (jp_string(j, &s, &n))
			return -1;
		/* torch.profiler's 2021 format writes a thread's tid as "25738" on its slices and
		 * as 25738 on its flow events: one thread. */
		if (decimal_id(s, n, &id->i))
			return 0;
		id->is_str = 1;
		id->s = jr_str(r, s, n);
		return 0;
	case JT_OBJECT: { /* "id2": {"local": ...} or {"global": ...} */
		const char *k;
		size_t kn;
		int rc;
		if (jp_object_begin(j))
			return -1;
		while ((rc = jp_object_next(j, &k, &kn)) > 0) {
			if (!id->s && (!strcmp(k, "local") || !strcmp(k, "global"))) {
				struct jr_id in;
				if (jr_parse_id(r, &in))
					return -1;
				char buf[48];
				if (in.is_str) {
					*id = in;
				} else {
					int m = snprintf(buf, sizeof(buf), "%" PRId64, in.i);
					id->is_str = 1;
					id->s = jr_str(r, buf, (size_t)m);
				}
			} else if (jp_skip(j)) {
				return -1;
			}
		}
		return rc;
	}
	default:
		return jp_skip(j);
	}
}

/* The text of a nested value without its whitespace, interned; 0 if longer than max. */
static uint32_t compact_value(struct jr *r, size_t max)
{
	const char *text;
	size_t len;

	if (jp_raw(&r->jp, &text, &len))
		return 0;
	if (len > max)
		return 0;
	char *buf = malloc(len + 1);
	if (!buf) {
		r->err = -ENOMEM;
		return 0;
	}
	size_t n = json_compact(text, len, buf, len + 1);
	uint32_t id = jr_str(r, buf, n);
	free(buf);
	return id;
}

/* An integer written without sign, fraction or exponent that is too large for int64. */
static int big_uint(const struct jnum *num, uint64_t *out)
{
	uint64_t v = 0;
	for (size_t i = 0; i < num->len; i++) {
		char c = num->text[i];
		if (c < '0' || c > '9' || v > (UINT64_MAX - (uint64_t)(c - '0')) / 10)
			return 0;
		v = v * 10 + (uint64_t)(c - '0');
	}
	*out = v;
	return 1;
}

/* One value as an arg: numbers INT, UINT or DOUBLE, strings, true/false, nested values as
 * their compact JSON text (left out past max bytes); null is left out. 1 taken, 0 left out,
 * -1 on error. */
int jr_parse_value(struct jr *r, struct jr_arg *a, size_t max)
{
	struct jp *j = &r->jp;
	struct jnum num;
	const char *s;
	size_t n;

	switch (jp_peek(j)) {
	case JT_STRING:
		if (jp_string(j, &s, &n))
			return -1;
		a->type = CUPTRACE_ARG_STRING;
		a->v.s = jr_str(r, s, n);
		break;
	case JT_NUMBER:
		if (jp_number(j, &num))
			return -1;
		if (num.is_int) {
			a->type = CUPTRACE_ARG_INT;
			a->v.i = num.i;
		} else if (big_uint(&num, &a->v.u)) {
			a->type = CUPTRACE_ARG_UINT;
		} else {
			a->type = CUPTRACE_ARG_DOUBLE;
			a->v.d = num.d;
		}
		break;
	case JT_TRUE:
	case JT_FALSE:
		a->type = CUPTRACE_ARG_BOOL;
		return jp_bool(j, &a->v.b) ? -1 : 1;
	case JT_NULL:
		return jp_skip(j) ? -1 : 0;
	case JT_OBJECT:
	case JT_ARRAY:
		a->type = CUPTRACE_ARG_STRING;
		if (!(a->v.s = compact_value(r, max)))
			return r->err || j->failed ? -1 : 0;
		break;
	default:
		return -1;
	}
	return r->err ? -1 : 1;
}

/* "args": every member as an arg (parse_value). */
int jr_parse_args(struct jr *r)
{
	struct jp *j = &r->jp;
	const char *k;
	size_t kn;
	int rc;

	if (jp_peek(j) != JT_OBJECT)
		return jp_skip(j);
	if (jp_object_begin(j))
		return -1;
	while ((rc = jp_object_next(j, &k, &kn)) > 0) {
		struct jr_arg a = {.key = jr_str(r, k, kn)}, *p;
		int t = jr_parse_value(r, &a, SIZE_MAX);
		if (t < 0)
			return -1;
		if (t && !(p = JR_PUSH(r, args, nargs, argcap)))
			return -1;
		if (t)
			*p = a;
	}
	return rc;
}

const struct jr_arg *jr_find_arg(const struct jr *r, uint32_t a0, uint32_t n, const char *key)
{
	for (uint32_t i = a0; i < a0 + n; i++) {
		const char *k = jr_s(r, r->args[i].key);
		if (k && !strcmp(k, key))
			return &r->args[i];
	}
	return NULL;
}
