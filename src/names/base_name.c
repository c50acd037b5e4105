/* Base names of demangled C++ functions (see base_name.h): one left-to-right pass that copies the
 * name, drops template argument lists, parameter lists and bracketed suffixes, keeps operator
 * names, "(anonymous namespace)" and lambda names whole, and remembers where the last word
 * before the signature began (so that a return type is cut off). */
#include "names/base_name.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

static int is_ident(char c)
{
	unsigned char u = (unsigned char)c;
	return (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') ||
	       u == '_' || u == '$' || u == '~' || u >= 0x80;
}

/* The index just past the group that opens at s[i] ('<', '(', '[' or '{'), or 0 if it never
 * closes. Inside parentheses, brackets and braces '<' and '>' are comparisons, not template
 * brackets; inside template arguments they nest. */
static size_t group_end(const char *s, size_t i)
{
	char stack[MAX_DEPTH];
	size_t n = 0;

	for (; s[i]; i++) {
		char c = s[i], top = n ? stack[n - 1] : 0;
		char close = c == '<' ? '>' : c == '(' ? ')' : c == '[' ? ']' : c == '{' ? '}' : 0;
		if (close && (c != '<' || !n || top == '>')) {
			if (n == MAX_DEPTH)
				return 0;
			stack[n++] = close;
		} else if (n && c == top) {
			if (!--n)
				return i + 1;
		} else if (c == ')' || c == ']' || c == '}') {
			/* A closer that is not the innermost one: unbalanced. */
			if (top != '>')
				return 0;
		}
	}
	return 0;
}

static int starts_word(const char *s, size_t i, const char *w)
{
	size_t n = strlen(w);
	return !strncmp(s + i, w, n) && (!i || !is_ident(s[i - 1])) && !is_ident(s[i + n]);
}

/* The characters of an operator symbol after "operator": "()", "[]", or up to three of +-*...
 * ("<<=", "->*", "<=>"). Returns how many. */
static size_t operator_symbol(const char *s)
{
	static const char ops[] = "+-*/%^&|~!=<>,";
	size_t n = 0;

	if ((s[0] == '(' && s[1] == ')') || (s[0] == '[' && s[1] == ']'))
		return 2;
	while (n < 3 && s[n] && strchr(ops, s[n]))
		n++;
	return n;
}

/* The base of s into out, which has room for strlen(s) + 1 bytes. */
static size_t base_of(const char *s, char *out)
{
	size_t len = strlen(s), i = 0, o = 0, start = 0, end = 0, e;
	int sig = 0, params = 0; /* seen a signature part; seen a parameter list */
	int callable = 0;        /* what came last ends a name: a parameter list may follow */

	while (i < len) {
		char c = s[i];
		if (starts_word(s, i, "operator")) {
			memcpy(out + o, "operator", 8);
			o += 8;
			i += 8;
			size_t k = operator_symbol(s + i);
			if (!k && s[i] == ' ' && is_ident(s[i + 1])) {
				/* operator new[], operator bool: a word, not a symbol. */
				out[o++] = ' ';
				for (i++; is_ident(s[i]); i++)
					out[o++] = s[i];
				k = s[i] == '[' && s[i + 1] == ']' ? 2 : 0;
			}
			for (; k; k--)
				out[o++] = s[i++];
			/* "operator<< <float>": its template arguments come after a space. */
			size_t j = i;
			while (s[j] == ' ')
				j++;
			if (s[j] == '<' && (e = group_end(s, j))) {
				i = e;
				sig = 1;
			}
			callable = 1;
			continue;
		}
		if (c == '<' && callable && i && s[i - 1] != ' ') {
			if (!(e = group_end(s, i)))
				return 0;
			i = e;
			sig = 1;
			continue;
		}
		if (c == '(' && !strncmp(s + i, "(anonymous namespace)", 21)) {
			memcpy(out + o, s + i, 21);
			o += 21;
			i += 21;
			callable = 0;
			continue;
		}
		if (c == '(' && callable && s[i - 1] != ' ') {
			if (!(e = group_end(s, i)))
				return 0;
			i = e;
			end = o;
			sig = params = 1;
			continue; /* callable stays: "f(int)(float)", "operator()(int)" */
		}
		if (c == '[' && (params || (callable && s[i - 1] != ' '))) {
			/* [abi:cxx11] tags, " [clone .cold]" suffixes. */
			if (!(e = group_end(s, i)))
				return 0;
			i = e;
			continue;
		}
		if (c == '(' || c == '{' || c == '[') {
			/* Kept as part of the name: a lambda, "{unnamed type#1}", a note. */
			if (!(e = group_end(s, i)))
				return 0;
			memcpy(out + o, s + i, e - i);
			o += e - i;
			i = e;
			callable = c == '{';
			continue;
		}
		out[o++] = c;
		i++;
		callable = is_ident(c);
		/* A word before the signature is a return type (or a qualifier); after a parameter
		 * list, words are qualifiers (const, noexcept) and end up past `end`. */
		if (c == ' ' && !params)
			start = o;
	}
	if (!sig)
		return 0;
	if (!params)
		end = o;
	while (start < end && out[start] == ' ')
		start++;
	while (end > start && out[end - 1] == ' ')
		end--;
	if (end <= start)
		return 0;
	memmove(out, out + start, end - start);
	out[end - start] = 0;
	return end - start;
}

size_t cuptrace_name_base(const char *s, char *out, size_t cap)
{
	size_t len = strlen(s), n;
	char *tmp = NULL, *buf = out;

	if (!cap)
		return 0;
	if (cap <= len && !(buf = tmp = malloc(len + 1)))
		buf = NULL;
	/* 0: not a signature, or unbalanced: the name is its own base. */
	n = buf ? base_of(s, buf) : 0;
	if (!n) {
		buf = (char *)s;
		n = len;
	}
	if (n >= cap)
		n = cap - 1;
	memmove(out, buf, n);
	out[n] = 0;
	free(tmp);
	return n;
}
