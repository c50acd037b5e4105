/* Metadata policy and path helpers for sharing and private recording (see privacy.h). */
#include "common/privacy.h"

#include <ctype.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>
#include <string.h>

static int is_gpu_key_with(const char *key, const char *suffix)
{
	if (strncmp(key, "gpu", 3))
		return 0;
	const char *p = key + 3;
	if (*p < '0' || *p > '9')
		return 0;
	while (*p >= '0' && *p <= '9')
		p++;
	return !strcmp(p, suffix);
}

const char *cuptrace_meta_base_key(const char *key)
{
	const char *colon = key ? strrchr(key, ':') : NULL;
	return colon && colon[1] == ' ' ? colon + 2 : key;
}

int cuptrace_meta_is_gpu_uuid(const char *key)
{
	return key && is_gpu_key_with(cuptrace_meta_base_key(key), "_uuid");
}

static int word_in(const char *w, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && !strncasecmp(w, *list, n))
			return 1;
	return 0;
}

enum cuptrace_identity cuptrace_meta_identity(const char *key)
{
	static const char *const host[] = {"host", "hostname", "machine", "nodename", NULL};
	static const char *const user[] = {"user", "username", "login", "owner", "email", NULL};
	static const char *const place[] = {"home", "homedir", "cwd", "pwd", NULL};
	enum cuptrace_identity id = CUPTRACE_ID_NONE;

	key = cuptrace_meta_base_key(key);
	for (const char *p = key; p && *p;) {
		while (*p && !isalnum((unsigned char)*p))
			p++;
		const char *w = p;
		/* one word: a run of letters and digits, cut before an upper-case letter that
		 * follows a lower-case one ("hostName") */
		while (*p && isalnum((unsigned char)*p) &&
		       !(p > w && isupper((unsigned char)*p) && islower((unsigned char)p[-1])))
			p++;
		size_t n = (size_t)(p - w);
		if (!n)
			continue;
		if (word_in(w, n, host))
			return CUPTRACE_ID_HOST; /* "host_user": the host first, its name is longer
			                          */
		if (word_in(w, n, user))
			id = CUPTRACE_ID_USER;
		else if (!id && word_in(w, n, place))
			id = CUPTRACE_ID_PLACE;
	}
	return id;
}

enum cuptrace_meta_policy cuptrace_meta_policy(const char *key)
{
	/* The machine and the person: boot_id and GPU UUIDs are serial numbers that tie every
	 * trace of one machine together; host, user and home keys by rule. */
	static const char *const drop[] = {"boot_id"};
	static const char *const program[] = {"cmdline", "record_cmdline"};
	static const char *const time[] = {"start_time",        "start_realtime_ns",
	                                   "start_boottime_ns", "end_realtime_ns",
	                                   "end_boottime_ns",   "baseTimeNanoseconds"};
	if (!key)
		return CUPTRACE_META_SCRUB;
	key = cuptrace_meta_base_key(key);
	for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
		if (!strcmp(key, drop[i]))
			return CUPTRACE_META_DROP;
	if (cuptrace_meta_identity(key))
		return CUPTRACE_META_DROP;
	if (is_gpu_key_with(key, "_uuid"))
		return CUPTRACE_META_DROP;
	for (size_t i = 0; i < sizeof(program) / sizeof(program[0]); i++)
		if (!strcmp(key, program[i]))
			return CUPTRACE_META_PROGRAM;
	for (size_t i = 0; i < sizeof(time) / sizeof(time[0]); i++)
		if (!strcmp(key, time[i]))
			return CUPTRACE_META_TIME;
	return CUPTRACE_META_SCRUB;
}

int cuptrace_private_env(void)
{
	const char *v = getenv("CUPTRACE_PRIVATE");
	return v && *v && strcmp(v, "0");
}

static int blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

const char *cuptrace_path_base(const char *path, size_t len, size_t *n)
{
	size_t end = len;
	while (end && (path[end - 1] == '/' || path[end - 1] == '\\'))
		end--;
	if (!end) {
		*n = len;
		return path;
	}
	size_t start = end;
	while (start && path[start - 1] != '/' && path[start - 1] != '\\')
		start--;
	*n = end - start;
	return path + start;
}

size_t cuptrace_cmdline_program(const char *cmdline, char *buf, size_t cap)
{
	const char *p = cmdline ? cmdline : "";
	while (blank(*p))
		p++;
	const char *w = p;
	while (*p && !blank(*p))
		p++;
	size_t n;
	const char *b = cuptrace_path_base(w, (size_t)(p - w), &n);
	snprintf(buf, cap, "%.*s", (int)n, b);
	size_t args = 0;
	while (*p) {
		while (blank(*p))
			p++;
		if (!*p)
			break;
		args++;
		while (*p && !blank(*p))
			p++;
	}
	return args;
}

size_t cuptrace_private_filter(void *entries, size_t n, size_t stride, size_t key_off,
                               size_t val_off, size_t val_cap)
{
	char *base = entries;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		char *e = base + i * stride, *val = e + val_off;
		enum cuptrace_meta_policy p = cuptrace_meta_policy(e + key_off);
		if (p == CUPTRACE_META_DROP)
			continue;
		if (p == CUPTRACE_META_PROGRAM) {
			char prog[256];
			cuptrace_cmdline_program(val, prog, sizeof(prog));
			snprintf(val, val_cap, "%s", prog);
		}
		if (k != i)
			memmove(base + k * stride, e, stride);
		k++;
	}
	return k;
}
