/* See opname.h. */
#include "convert/opname.h"

#include <string.h>

static const char *const keys[] = {"seq", "op_id", "sizes", "input_op_ids"};

/* A value in brackets, nested: returns the length through the closing bracket, 0 if s does
 * not hold one. */
static size_t bracketed(const char *s)
{
	if (*s != '[')
		return 0;
	int depth = 0;
	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '[' || s[i] == '(')
			depth++;
		else if ((s[i] == ']' || s[i] == ')') && --depth == 0)
			return i + 1;
	}
	return 0;
}

static size_t integer(const char *s, int64_t *v)
{
	size_t i = s[0] == '-';
	int64_t x = 0;
	size_t start = i;
	for (; s[i] >= '0' && s[i] <= '9' && i < start + 18; i++)
		x = x * 10 + (s[i] - '0');
	if (i == start || (s[i] >= '0' && s[i] <= '9'))
		return 0;
	*v = s[0] == '-' ? -x : x;
	return i;
}

/* The index of the key that starts ", KEY = " at s, or -1. */
static int key_at(const char *s, size_t *skip)
{
	if (s[0] != ',' || s[1] != ' ')
		return -1;
	for (int k = 0; k < 4; k++) {
		size_t kl = strlen(keys[k]);
		if (!strncmp(s + 2, keys[k], kl) && !strncmp(s + 2 + kl, " = ", 3)) {
			*skip = 2 + kl + 3;
			return k;
		}
	}
	return -1;
}

int cuptrace_opname_parse(const char *s, struct cuptrace_opname *out)
{
	memset(out, 0, sizeof(*out));
	if (!s)
		return 0;
	/* The name ends at the first ", KEY = "; a name may itself contain ", ". */
	const char *p = s;
	size_t skip = 0;
	for (; *p; p++)
		if (*p == ',' && key_at(p, &skip) >= 0)
			break;
	if (!*p || p == s)
		return 0;
	out->name_len = (size_t)(p - s);
	while (*p) {
		int k = key_at(p, &skip);
		if (k < 0)
			return 0;
		p += skip;
		size_t n;
		switch (k) {
		case 0:
			if (out->has_seq || !(n = integer(p, &out->seq)))
				return 0;
			out->has_seq = 1;
			break;
		case 1:
			if (out->has_op_id || !(n = integer(p, &out->op_id)))
				return 0;
			out->has_op_id = 1;
			break;
		case 2:
			if (out->sizes || !(n = bracketed(p)))
				return 0;
			out->sizes = p;
			out->sizes_len = n;
			break;
		default:
			if (out->input_op_ids || !(n = bracketed(p)))
				return 0;
			out->input_op_ids = p;
			out->input_op_ids_len = n;
			break;
		}
		p += n;
	}
	return 1;
}
