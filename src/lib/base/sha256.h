/*
 * sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the job secret's
 * verifier and the JOIN challenge (PROTOCOL.md "Authentication"); a constant-time compare;
 * hex encoding. No state is kept between calls.
 */
#ifndef INAGG_BASE_SHA256_H
#define INAGG_BASE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_BYTES 32

void sha256(const void *data, size_t len, uint8_t out[SHA256_BYTES]);
void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
                 uint8_t out[SHA256_BYTES]);
/* 1 if the n bytes are equal; the time taken does not depend on where they differ. */
int mem_equal_ct(const void *a, const void *b, size_t n);
/* Lower-case hex of n bytes into out (2n + 1 bytes with the NUL). */
void hex_encode(const uint8_t *in, size_t n, char *out);
/* Exactly 2n hex digits into n bytes: 0, or -EINVAL. */
int hex_decode(const char *in, uint8_t *out, size_t n);

#endif /* INAGG_BASE_SHA256_H */
