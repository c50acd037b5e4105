/* The text side of `cuptrace share` (share_scrub.c): what counts as a path, a URL, a host or
 * user name inside any string, and the keyed tokens of --redact-names. Used by the scan pass
 * (share_scan.c) and the rewriting sink (share.c). Private to src/analyze. */
#ifndef CUPTRACE_ANALYZE_SHARE_INTERNAL_H
#define CUPTRACE_ANALYZE_SHARE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* What scrubbing a string changed (flags). */
enum {
	SHARE_PATH = 1,  /* an absolute path reduced to its base name */
	SHARE_URL = 2,   /* a URL removed */
	SHARE_HOST = 4,  /* a host name replaced */
	SHARE_USER = 8,  /* a user name replaced */
	SHARE_TOKEN = 16 /* a name replaced by a token */
};

enum share_secret_kind { SHARE_SECRET_HOST, SHARE_SECRET_USER };

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
 * (/a/b, ~/a, C:\a\b) their base names (a home directory itself "~"), secret words "[host]"
 * or "[user]". Returns the SHARE_* flags of what changed, or -ENOMEM. */
int share_scrub_text(const struct share_secrets *s, const char *in, struct share_buf *out);

/* "PREFIX_" and 12 hex digits of HMAC-SHA-256(salt, name) into out (cap >= 64 is enough for
 * any prefix of up to 40 bytes). */
void share_token(const char *salt, const char *prefix, const char *name, char *out, size_t cap);

#endif

/* ---- the scan (share_scan.c), read by the rewrite (share.c) ---- */
#include "common/util.h"
#include "format/event.h"

/* Where a flow's ends are: its out slice and its in slice (has: 1 out seen, 2 in seen). */
struct share_flow {
	int64_t out_ts, out_end, in_ts, in_end;
	unsigned has;
};

struct share_span {
	int64_t ts, end;
};

struct share_ctr {
	uint64_t track;
	int64_t ts;
};

/* --window's two ends, each as NAME and as the whole NAME#K (torch.profiler's step names). */
#define SHARE_MAX_RANGE_NAMES 4

struct cuptrace_share_scan {
	struct cuptrace_sink base;
	struct share_secrets secrets;
	int windows;
	char *range_name[SHARE_MAX_RANGE_NAMES];
	size_t nnames;
	struct share_span *range[SHARE_MAX_RANGE_NAMES];
	size_t nrange[SHARE_MAX_RANGE_NAMES], rangecap[SHARE_MAX_RANGE_NAMES];
	struct cuptrace_u64map flow_idx; /* flow id -> index + 1 in flows */
	struct share_flow *flows;
	size_t nflows, flowcap;
	struct share_ctr *ctrs; /* every counter value's track and time */
	size_t nctrs, ctrcap;
	int64_t *times; /* start of every event; sorted by finish() */
	size_t ntimes, timecap;
	int64_t first, last;
	int any;
	int err;
};

/* Where a slice ends: ts + dur, saturated; ts for dur <= 0. */
static inline int64_t share_end(int64_t ts, int64_t dur)
{
	int64_t e;
	return dur > 0 && !__builtin_add_overflow(ts, dur, &e) ? e : dur > 0 ? INT64_MAX : ts;
}

/* The flow's ends, or NULL if the scan saw none. */
const struct share_flow *share_scan_flow(const struct cuptrace_share_scan *sc, uint64_t id);
