/*
 * auth.h - job secrets on the control connection (PROTOCOL.md "Authentication"). The secret
 * never crosses the wire: a rank derives the job's verifier V = HMAC-SHA256(secret,
 * "inagg job verifier " + job). The rank that registers a job gives V (`verifier=` on its
 * JOIN); every later rank asks for a challenge (HELLO, answered by CHALLENGE with a fresh
 * 128-bit nonce) and answers it with HMAC-SHA256(V, "inagg join " + nonce hex + " " + job +
 * " " + rank) (`proof=`), which the switch checks in constant time.
 */
#ifndef INAGG_WIRE_AUTH_H
#define INAGG_WIRE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "lib/base/sha256.h"

#define WIRE_NONCE_BYTES 16
#define WIRE_SECRET_MAX 4096 /* bytes of a secret (environment or file) */

void wire_auth_verifier(const void *secret, size_t len, const char *job, uint8_t out[SHA256_BYTES]);
void wire_auth_proof(const uint8_t verifier[SHA256_BYTES], const uint8_t nonce[WIRE_NONCE_BYTES],
                     const char *job, uint32_t rank, uint8_t out[SHA256_BYTES]);

#endif /* INAGG_WIRE_AUTH_H */
