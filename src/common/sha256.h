/* SHA-256 and HMAC-SHA-256 (FIPS 180-4, RFC 2104), written from the specifications: `cuptrace
 * share --redact-names` turns names into tokens with a keyed hash that a reader of the token
 * cannot invert or test guesses against without the key. Not thread-safe per context. */
#ifndef CUPTRACE_COMMON_SHA256_H
#define CUPTRACE_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct cuptrace_sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
};

void cuptrace_sha256_init(struct cuptrace_sha256 *c);
void cuptrace_sha256_update(struct cuptrace_sha256 *c, const void *p, size_t n);
void cuptrace_sha256_final(struct cuptrace_sha256 *c, uint8_t out[32]);
void cuptrace_sha256(const void *p, size_t n, uint8_t out[32]);
void cuptrace_hmac_sha256(const void *key, size_t nkey, const void *msg, size_t nmsg,
                          uint8_t out[32]);

#endif
