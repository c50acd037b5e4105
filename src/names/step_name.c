/* Step names: a family name and its numbered members (see step_name.h). */
#include "names/step_name.h"

#include <ctype.h>
#include <string.h>

static int is_sep(char c)
{
	return c == ' ' || c == '#' || c == '_' || c == '-' || c == ':' || c == '=' || c == '.';
}

static int all_digits(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

int cuptrace_step_name_matches(const char *name, const char *want)
{
	size_t n;
	if (!name || !want)
		return 0;
	n = strlen(want);
	if (strncmp(name, want, n))
		return 0;
	if (!name[n])
		return 1;
	const char *p = name + n;
	/* "ProfilerStep#7" is not "ProfilerStep#71": a name ending in a digit goes on at a
	 * separator only. */
	if (n && isdigit((unsigned char)want[n - 1]) && !is_sep(*p))
		return 0;
	while (is_sep(*p))
		p++;
	return all_digits(p);
}

int cuptrace_step_family(const char *name, size_t *prefix_len, int64_t *number)
{
	if (!name)
		return 0;
	size_t n = strlen(name), d = n;
	while (d > 0 && isdigit((unsigned char)name[d - 1]))
		d--;
	if (d == n || n - d > 18 || d == 0 || !is_sep(name[d - 1]))
		return 0;
	size_t p = d;
	while (p > 0 && is_sep(name[p - 1]))
		p--;
	int letter = 0;
	for (size_t i = 0; i < p && !letter; i++)
		letter = isalpha((unsigned char)name[i]) != 0;
	if (!letter)
		return 0;
	int64_t v = 0;
	for (size_t i = d; i < n; i++)
		v = v * 10 + (name[i] - '0');
	*prefix_len = p;
	*number = v;
	return 1;
}
