/* auth.c - the job verifier and the JOIN proof (see auth.h). */
#include "lib/wire/auth.h"

#include <stdio.h>
#include <string.h>

void wire_auth_verifier(const void *secret, size_t len, const char *job, uint8_t out[SHA256_BYTES])
{
    char msg[160];
    int n = snprintf(msg, sizeof(msg), "inagg job verifier %s", job);
    hmac_sha256(secret, len, msg, n > 0 ? (size_t)n : 0, out);
}

void wire_auth_proof(const uint8_t verifier[SHA256_BYTES], const uint8_t nonce[WIRE_NONCE_BYTES],
                     const char *job, uint32_t rank, uint8_t out[SHA256_BYTES])
{
    char hex[2 * WIRE_NONCE_BYTES + 1], msg[200];
    hex_encode(nonce, WIRE_NONCE_BYTES, hex);
    int n = snprintf(msg, sizeof(msg), "inagg join %s %s %u", hex, job, rank);
    hmac_sha256(verifier, SHA256_BYTES, msg, n > 0 ? (size_t)n : 0, out);
}
