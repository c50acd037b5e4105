/* Paths, URLs, host and user names inside strings, and name tokens (see share_scrub.h). */
#include "rewrite/share_scrub.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/privacy.h"
#include "common/sha256.h"
#include "common/util.h"

void share_secrets_free(struct share_secrets *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->word[i]);
	free(s->word);
	free(s->len);
	free(s->kind);
	memset(s, 0, sizeof(*s));
}

int share_secret_add(struct share_secrets *s, const char *w, size_t n, enum share_secret_kind k)
{
	/* Not secrets, and replacing them would garble ordinary text. */
	static const char *const common[] = {"localhost", "localdomain", "root", "unknown",
	                                     "user",      "host",        "home", "none"};
	if (n < 2)
		return 0;
	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		if (strlen(common[i]) == n && !strncasecmp(w, common[i], n))
			return 0;
	for (size_t i = 0; i < n; i++)
		if (w[i] == '?' || isspace((unsigned char)w[i]))
			return 0;
	for (size_t i = 0; i < s->n; i++)
		if (s->len[i] == n && s->kind[i] == k && !strncasecmp(s->word[i], w, n))
			return 0;
	/* Three arrays of one capacity: each grows from the same one to the same one. */
	size_t cap_word = s->cap, cap_len = s->cap, cap_kind = s->cap;
	if (CUPTRACE_GROW(s->word, cap_word, s->n + 1) ||
	    CUPTRACE_GROW(s->len, cap_len, s->n + 1) || CUPTRACE_GROW(s->kind, cap_kind, s->n + 1))
		return -ENOMEM;
	s->cap = cap_word;
	if (!(s->word[s->n] = strndup(w, n)))
		return -ENOMEM;
	s->len[s->n] = n;
	s->kind[s->n++] = (unsigned char)k;
	return 0;
}

int share_secret_host(struct share_secrets *s, const char *host)
{
	if (!host)
		return 0;
	size_t n = strlen(host), first = strcspn(host, ".");
	int err = share_secret_add(s, host, n, SHARE_SECRET_HOST);
	if (!err && first < n && first)
		err = share_secret_add(s, host, first, SHARE_SECRET_HOST);
	return err;
}

int share_secret_gpu(struct share_secrets *s, const char *uuid)
{
	if (!uuid)
		return 0;
	size_t n = strlen(uuid);
	const char *d = strchr(uuid, '-');
	d = d ? strchr(d + 1, '-') : NULL;
	int err = share_secret_add(s, uuid, n, SHARE_SECRET_GPU);
	/* the short form only where it is one: "GPU-" and 8 hex digits, not a bare "GPU" */
	if (!err && d && d - uuid >= 12)
		err = share_secret_add(s, uuid, (size_t)(d - uuid), SHARE_SECRET_GPU);
	return err;
}

static int name_char(char c)
{
	return c && c != '/' && c != '\\' && !strchr(" \t\r\n\"'`<>|;,:()[]{}=", c);
}

/* The user names after each occurrence of prefix in text. */
static int users_after(struct share_secrets *s, const char *text, const char *prefix, int nocase)
{
	size_t np = strlen(prefix);
	for (const char *p = text; *p; p++) {
		if (nocase ? strncasecmp(p, prefix, np) : strncmp(p, prefix, np))
			continue;
		const char *w = p + np, *e = w;
		while (name_char(*e))
			e++;
		int err = share_secret_add(s, w, (size_t)(e - w), SHARE_SECRET_USER);
		if (err)
			return err;
	}
	return 0;
}

int share_find_users(struct share_secrets *s, const char *text)
{
	if (!text || !*text)
		return 0;
	int err = 0;
	if (strstr(text, "/home/"))
		err = users_after(s, text, "/home/", 0);
	if (!err && strstr(text, "/Users/"))
		err = users_after(s, text, "/Users/", 0);
	if (!err && strchr(text, '\\'))
		err = users_after(s, text, ":\\Users\\", 1);
	/* A home directory elsewhere (/data/alice): only the sharer's own is known. */
	const char *home = getenv("HOME");
	size_t nh = home ? strlen(home) : 0;
	while (nh > 1 && home[nh - 1] == '/')
		nh--;
	if (!err && nh > 1) {
		for (const char *p = strstr(text, home); p && !err; p = strstr(p + 1, home)) {
			if (p[nh] != '/' && name_char(p[nh]))
				continue;
			size_t n;
			const char *b = cuptrace_path_base(home, nh, &n);
			err = share_secret_add(s, b, n, SHARE_SECRET_USER);
		}
	}
	return err;
}

int share_buf_add(struct share_buf *b, const char *s, size_t n)
{
	if (n >= SIZE_MAX - b->n || CUPTRACE_GROW(b->p, b->cap, b->n + n + 1))
		return -ENOMEM;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return 0;
}

/* Where a path or URL may begin: the start, or after a separator of words or values. */
static int starts_word(const char *in, const char *p)
{
	return p == in || strchr(" \t\r\n\"'`=:,;([{<>|@", p[-1]);
}

static int path_char(char c)
{
	return c && !strchr(" \t\r\n\"'`<>|;,:()[]{}=", c);
}

/* Length of a URL (scheme://...) at p, or 0. */
static size_t url_at(const char *p)
{
	const char *q = p;
	if (!isalpha((unsigned char)*q))
		return 0;
	while (isalnum((unsigned char)*q) || *q == '+' || *q == '.' || *q == '-')
		q++;
	if (strncmp(q, "://", 3))
		return 0;
	q += 3;
	while (*q && !strchr(" \t\r\n\"'`<>", *q))
		q++;
	return (size_t)(q - p);
}

/* Length of an absolute path at p (/a, ~/a, ~, C:\a), or 0. */
static size_t path_at(const char *p)
{
	const char *q = p;
	if (p[0] == '/' && (path_char(p[1]) && p[1] != '/'))
		q = p + 1;
	else if (p[0] == '~' && (p[1] == '/' || !path_char(p[1])))
		q = p + 1;
	else if (isalpha((unsigned char)p[0]) && p[1] == ':' && p[2] == '\\')
		q = p + 3;
	else
		return 0;
	while (path_char(*q))
		q++;
	return (size_t)(q - p);
}

/* /home/x, /Users/x, /root, ~ (with or without a trailing separator). */
static int is_home(const char *p, size_t n)
{
	while (n > 1 && (p[n - 1] == '/' || p[n - 1] == '\\'))
		n--;
	if ((n == 1 && p[0] == '~') || (n == 5 && !strncmp(p, "/root", 5)))
		return 1;
	static const char *const homes[] = {"/home/", "/Users/"};
	for (size_t i = 0; i < 2; i++) {
		size_t k = strlen(homes[i]);
		if (n > k && !strncmp(p, homes[i], k) && !memchr(p + k, '/', n - k))
			return 1;
	}
	return n > 9 && isalpha((unsigned char)p[0]) && !strncasecmp(p + 1, ":\\Users\\", 8) &&
	       !memchr(p + 9, '\\', n - 9);
}

static int alnum(char c)
{
	return isalnum((unsigned char)c);
}

/* Secret words of s in text[0..n) replaced, appended to out. */
static int replace_secrets(const struct share_secrets *s, const char *t, size_t n,
                           struct share_buf *out, int *flags)
{
	size_t i = 0, copied = 0;
	while (i < n) {
		size_t hit = 0;
		int kind = SHARE_SECRET_USER;
		if (!i || !alnum(t[i - 1])) {
			/* The longest that matches: a full host name before its first label, a
			 * whole UUID before its short form. */
			for (size_t k = 0; k < s->n; k++) {
				size_t l = s->len[k];
				if (l <= hit || l > n - i || (i + l < n && alnum(t[i + l])))
					continue;
				int anycase = s->kind[k] != SHARE_SECRET_USER; /* host names, hex */
				if (anycase ? !strncasecmp(t + i, s->word[k], l)
				            : !strncmp(t + i, s->word[k], l)) {
					hit = l;
					kind = s->kind[k];
				}
			}
		}
		if (!hit) {
			i++;
			continue;
		}
		const char *r = kind == SHARE_SECRET_HOST  ? "[host]"
		                : kind == SHARE_SECRET_GPU ? "[gpu]"
		                                           : "[user]";
		if (share_buf_add(out, t + copied, i - copied) || share_buf_add(out, r, strlen(r)))
			return -ENOMEM;
		*flags |= kind == SHARE_SECRET_HOST  ? SHARE_HOST
		          : kind == SHARE_SECRET_GPU ? SHARE_GPU
		                                     : SHARE_USER;
		i += hit;
		copied = i;
	}
	return share_buf_add(out, t + copied, n - copied);
}

int share_scrub_text(const struct share_secrets *s, const char *in, struct share_buf *out)
{
	struct share_buf mid = {0};
	int flags = 0, err = 0;
	const char *p = in, *copied = in;

	out->n = 0;
	if (share_buf_add(out, "", 0))
		return -ENOMEM;
	for (; *p && !err;) {
		size_t n = 0;
		if (!starts_word(in, p)) {
			p++;
			continue;
		}
		if ((n = url_at(p))) {
			err = share_buf_add(&mid, copied, (size_t)(p - copied)) ||
			      share_buf_add(&mid, "[url]", 5);
			flags |= SHARE_URL;
		} else if ((n = path_at(p))) {
			size_t bn = 1;
			const char *b = "~";
			if (!is_home(p, n))
				b = cuptrace_path_base(p, n, &bn);
			err = share_buf_add(&mid, copied, (size_t)(p - copied)) ||
			      share_buf_add(&mid, b, bn);
			flags |= SHARE_PATH;
		} else {
			p++;
			continue;
		}
		p += n;
		copied = p;
	}
	if (!err)
		err = share_buf_add(&mid, copied, strlen(copied));
	if (!err)
		err = replace_secrets(s, mid.p ? mid.p : "", mid.n, out, &flags);
	free(mid.p);
	return err ? -ENOMEM : flags;
}

void share_token(const char *salt, const char *prefix, const char *name, char *out, size_t cap)
{
	uint8_t h[32];
	salt = salt ? salt : "";
	cuptrace_hmac_sha256(salt, strlen(salt), name, strlen(name), h);
	snprintf(out, cap, "%.40s_%02x%02x%02x%02x%02x%02x", prefix, h[0], h[1], h[2], h[3], h[4],
	         h[5]);
}
