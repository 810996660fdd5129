/*
 * dpauth.h - the authenticated dataplane (PROTOCOL.md 1.4): per-packet MACs under keys
 * derived from the JOIN handshake, with libsodium.
 *
 * Keys. A rank that joins a job with a secret knows the job's verifier V (auth.h) and the
 * nonce of the CHALLENGE that answered its HELLO; the switch knows both too. From them each
 * side derives the rank's key
 *     K = BLAKE2b-256(key V, "inagg dataplane key" | nonce | job | 0 | rank)
 * and from K two keys with crypto_kdf (BLAKE2b): `up` for what the rank sends (contributions,
 * acknowledgements) and `down` for what the switch sends it (results, confirmations). A key
 * is fresh with every JOIN (its nonce), belongs to one rank of one job, and is never on the
 * wire: who saw the token (any packet) still cannot make a packet that passes.
 *
 * MAC. Poly1305 (crypto_onetimeauth) under a one-time key that is the first 32 bytes of
 * ChaCha20 (IETF) under the packet key and a 96-bit packet nonce, over the header, the nonce
 * and the payload: the construction of ChaCha20-Poly1305 and of NaCl's secretbox, computed
 * over the header and the payload in place. Every seal takes a new nonce (a 64-bit counter of
 * the process after 32 random bits, renewed in a forked child), so no one-time key is ever
 * used for two messages; a retransmission resends the same bytes. Layout after the 36-byte
 * header: the nonce (12 bytes), then the tag (16): WIRE_MAC_BYTES in all.
 */
#ifndef INAGG_WIRE_DPAUTH_H
#define INAGG_WIRE_DPAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define DPAUTH_KEY_BYTES 32u
#define DPAUTH_NONCE_BYTES 12u
#define DPAUTH_TAG_BYTES 16u

/* One rank's keys. */
typedef struct dpauth_keys {
    uint8_t up[DPAUTH_KEY_BYTES];   /* rank -> switch */
    uint8_t down[DPAUTH_KEY_BYTES]; /* switch -> rank */
} dpauth_keys_t;

/* libsodium's initialisation and the nonce counter's random prefix (once per process; safe
 * to call again, and from several threads). 0 or -1. */
int dpauth_init(void);

/* The keys of `rank` of job `job` from the job's verifier and the rank's JOIN nonce. */
void dpauth_derive(const uint8_t verifier[32], const uint8_t nonce[16], const char *job,
                   uint32_t rank, dpauth_keys_t *out);

/* Seal a packet: hdr holds its 36 encoded header bytes (WIRE_FLAG_MAC set) and room for the
 * MAC after them (WIRE_HEADER_MAX bytes in all); the payload (len bytes) may be elsewhere.
 * Writes a fresh nonce and the tag. */
void dpauth_seal(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr, const void *payload,
                 size_t len);

/* The same for a whole packet in one buffer: header, MAC room, payload_len bytes. */
void dpauth_seal_packet(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *pkt, size_t payload_len);

/* Does packet `pkt` (a header that decoded with WIRE_FLAG_MAC, its MAC and payload_len bytes
 * of payload) carry the right tag under key? 1 or 0; the comparison takes constant time. */
int dpauth_check(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len);

#endif /* INAGG_WIRE_DPAUTH_H */
