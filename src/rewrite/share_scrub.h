/* The text side of `cuptrace share`, defined in share_scrub.c: what counts as a path, a URL, a
 * host or user name inside any string, and the keyed tokens of --redact-names. Used by the scan
 * pass (share_scan.c) and the rewriting sink (share.c). Private to src/rewrite. */
#ifndef CUPTRACE_REWRITE_SHARE_SCRUB_H
#define CUPTRACE_REWRITE_SHARE_SCRUB_H

#include <stddef.h>
#include <stdint.h>

/* What scrubbing a string changed (flags). */
enum {
	SHARE_PATH = 1,   /* an absolute path reduced to its base name */
	SHARE_URL = 2,    /* a URL removed */
	SHARE_HOST = 4,   /* a host name replaced */
	SHARE_USER = 8,   /* a user name replaced */
	SHARE_TOKEN = 16, /* a name replaced by a token */
	SHARE_GPU = 32    /* a GPU's UUID replaced */
};

enum share_secret_kind { SHARE_SECRET_HOST, SHARE_SECRET_USER, SHARE_SECRET_GPU };

/* Words that must not reach the output, found in the input (host names of the metadata, the
 * owners of home directories in paths). Matched as whole words: host names in any case, user
 * names exactly. */
struct share_secrets {
	char **word;
	size_t *len;
	unsigned char *kind;
	size_t n, cap;
};

void share_secrets_free(struct share_secrets *s);
/* Adds w[0..n) unless it is too short or too common to be one ("localhost", "root", ...), or
 * already there. 0 or -ENOMEM. */
int share_secret_add(struct share_secrets *s, const char *w, size_t n, enum share_secret_kind k);
/* Adds the host name and its first label ("node7" of "node7.corp.example"). */
int share_secret_host(struct share_secrets *s, const char *host);
/* Adds a GPU's UUID ("GPU-5865b8d5-d36a-58e4-3ed4-4c141def8088") and its short form
 * ("GPU-5865b8d5", as `merge --ranks` names a rank's GPU). */
int share_secret_gpu(struct share_secrets *s, const char *uuid);
/* Adds the owner of every home directory text names: /home/NAME, /Users/NAME, C:\Users\NAME,
 * and the base name of $HOME where text holds $HOME/ (home directories elsewhere). */
int share_find_users(struct share_secrets *s, const char *text);

/* A growable string. */
struct share_buf {
	char *p;
	size_t n, cap;
};
int share_buf_add(struct share_buf *b, const char *s, size_t n);

/* in, scrubbed, into out (replaced, NUL-terminated): URLs become "[url]", absolute paths
 * (/a/b, ~/a, C:\a\b) their base names (a home directory itself "~"), secret words "[host]",
 * "[user]" or "[gpu]". Returns the SHARE_* flags of what changed, or -ENOMEM. */
int share_scrub_text(const struct share_secrets *s, const char *in, struct share_buf *out);

/* "PREFIX_" and 12 hex digits of HMAC-SHA-256(salt, name) into out (cap >= 64 is enough for
 * any prefix of up to 40 bytes). */
void share_token(const char *salt, const char *prefix, const char *name, char *out, size_t cap);

#endif
