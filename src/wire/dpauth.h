/*
 * dpauth.h - the authenticated dataplane (PROTOCOL.md 1.4): per-packet MACs under keys
 * derived from the JOIN handshake, with libsodium.
 *
 * Keys. A rank that joins a job with a secret knows the job's verifier V (auth.h) and the
 * nonce of the CHALLENGE that answered its HELLO; the switch knows both too. From them each
 * side derives the rank's key
 *     K = BLAKE2b-256(key V, "inagg dataplane key" | nonce | job | rank)
 * and from K two keys with crypto_kdf (BLAKE2b): `up` for what the rank sends (contributions,
 * acknowledgements) and `down` for what the switch sends it (results, confirmations). A key
 * is fresh with every JOIN (its nonce), belongs to one rank of one job, and is never on the
 * wire: who saw the token (any packet) still cannot make a packet that passes.
 *
 * MAC. tag = BLAKE2b-128(key, header bytes 0..35 | BLAKE2b-256(payload)), in the 16 bytes
 * after the header (wire.h, WIRE_FLAG_MAC). Hashing the payload first lets the switch hash a
 * result once per round and MAC it per rank with a 68-byte input. Keyed BLAKE2b is a PRF, so
 * this is a MAC without nonces (unlike Poly1305, whose one-time keys a retransmission of a
 * different packet under the same slot and round would reuse).
 */
#ifndef INAGG_WIRE_DPAUTH_H
#define INAGG_WIRE_DPAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define DPAUTH_KEY_BYTES 32u
#define DPAUTH_DIGEST_BYTES 32u

/* One rank's keys. */
typedef struct dpauth_keys {
    uint8_t up[DPAUTH_KEY_BYTES];   /* rank -> switch */
    uint8_t down[DPAUTH_KEY_BYTES]; /* switch -> rank */
} dpauth_keys_t;

/* libsodium's initialisation (once per process; safe to call again). 0 or -1. */
int dpauth_init(void);

/* The keys of `rank` of job `job` from the job's verifier and the rank's JOIN nonce. */
void dpauth_derive(const uint8_t verifier[32], const uint8_t nonce[16], const char *job,
                   uint32_t rank, dpauth_keys_t *out);

/* The payload's digest (the MAC's input besides the header). */
void dpauth_digest(const void *payload, size_t len, uint8_t out[DPAUTH_DIGEST_BYTES]);

/* Write the MAC of header `hdr` (its 36 encoded bytes, WIRE_FLAG_MAC set) and the payload
 * digest into hdr + WIRE_HEADER_SIZE. */
void dpauth_seal(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr,
                 const uint8_t digest[DPAUTH_DIGEST_BYTES]);

/* The same for a whole packet in one buffer: header, MAC room, payload_len bytes. */
void dpauth_seal_packet(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *pkt, size_t payload_len);

/* Does packet `pkt` (a header that decoded with WIRE_FLAG_MAC, its MAC and payload_len bytes
 * of payload) carry the right MAC under key? 1 or 0, in constant time. */
int dpauth_check(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len);

#endif /* INAGG_WIRE_DPAUTH_H */
