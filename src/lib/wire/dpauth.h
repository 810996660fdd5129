/*
 * dpauth.h - the authenticated dataplane (PROTOCOL.md 1.4): per-packet MACs under keys
 * derived from the JOIN handshake, with libsodium.
 *
 * Keys. A rank that joins a job with a secret knows the job's verifier V (auth.h) and the
 * nonce of the CHALLENGE that answered its HELLO; the switch knows both too. From them each
 * side derives the rank's key
 *     K = BLAKE2b-256(key V, "inagg dataplane key" | nonce | job | 0 | rank)
 * and from K with crypto_kdf (BLAKE2b) the key `up` for what the rank sends (contributions,
 * acknowledgements): fresh with every JOIN (its nonce), one rank's of one job. What the
 * switch sends (results, confirmations) goes under one key of the whole job,
 *     D = BLAKE2b-256(key V, "inagg dataplane down key" | job | 0), down = BLAKE2b-256(key D, token)
 * with the job's token (64 random bits the switch draws when it creates the job, in JOINED):
 * every member derives the same `down`, fresh with every job, so a result that is the same
 * for every rank is sealed once (PROTOCOL.md 1.4, 5.8 says why a member holding the key that
 * others hold gains nothing). No key is ever on the wire: who saw the token (any packet)
 * still cannot make a packet that passes.
 *
 * MAC. Poly1305 (crypto_onetimeauth) under a one-time key that is the first 32 bytes of
 * ChaCha20 (IETF) under the packet key and a 96-bit packet nonce, over the header, the nonce
 * and the payload: the construction of ChaCha20-Poly1305 and of NaCl's secretbox, computed
 * over the header and the payload in place. Every seal takes a new nonce (a 64-bit counter of
 * the process after 32 random bits, renewed in a forked child), so no one-time key is ever
 * used for two messages; a retransmission resends the same bytes. Layout after the 36-byte
 * header: the nonce (12 bytes), then the tag (16): WIRE_MAC_BYTES in all. A RESULT under the
 * down key is MAC'd with its header's rank field as zero: the rank a result is addressed to
 * is the one byte pair in which the results of a round differ, so one seal serves all of
 * them. Every other packet (a confirmation) keeps its rank under the MAC.
 */
#ifndef INAGG_WIRE_DPAUTH_H
#define INAGG_WIRE_DPAUTH_H

#include <stddef.h>
#include <stdint.h>

#include "lib/wire/wire.h"

#define DPAUTH_KEY_BYTES 32u
#define DPAUTH_NONCE_BYTES 12u
#define DPAUTH_TAG_BYTES 16u

/* One rank's keys. */
typedef struct dpauth_keys {
    uint8_t up[DPAUTH_KEY_BYTES]; /* rank -> switch, this rank's */
    uint8_t down[DPAUTH_KEY_BYTES]; /* switch -> ranks, the job's (dpauth_bind_job) */
    uint8_t down_base[DPAUTH_KEY_BYTES]; /* D: the job's name under its verifier */
} dpauth_keys_t;

/* libsodium's initialisation and the nonce counter's random prefix (once per process; safe
 * to call again, and from several threads). 0, or -EIO when libsodium cannot start, or
 * -ENOMEM. */
int dpauth_init(void);

/* The keys of `rank` of job `job` from the job's verifier and the rank's JOIN nonce: `up`
 * and `down_base`; `down` is set by dpauth_bind_job once the job's token is known. */
void dpauth_derive(const uint8_t verifier[32], const uint8_t nonce[16], const char *job,
                   uint32_t rank, dpauth_keys_t *out);

/* The job-wide `down` key from down_base and the job's token (JOINED). */
void dpauth_bind_job(dpauth_keys_t *keys, uint64_t token);

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

/* The same for what the switch sends under the job's down key: a RESULT's MAC leaves the
 * header's rank field out (taken as zero), so one seal serves every rank's copy of it. */
void dpauth_seal_down(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr, const void *payload,
                      size_t len);
int dpauth_check_down(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len);

/* The tag dpauth_seal_packet gave packet `pkt` (header, nonce, payload_len bytes of payload
 * after WIRE_HEADER_MAX), computed by libsodium alone: PROTOCOL.md 1.4's construction
 * without libcrypto's Poly1305. The reference and the baseline of `inagg bench mac`. */
void dpauth_tag_sodium(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len,
                       uint8_t tag[DPAUTH_TAG_BYTES]);

/* Which library computes the Poly1305 of a payload of this many bytes in this thread:
 * "libcrypto" (OpenSSL's, for payloads over 256 bytes where it offers one) or "libsodium".
 * Call dpauth_init first. */
const char *dpauth_poly1305_library(size_t payload_len);

/* The header bytes (WIRE_HEADER_SIZE) a down MAC covers: hdr, a RESULT's rank field zero. Two
 * packets whose down_header and payload agree carry the same valid nonce and tag. */
void dpauth_down_header(const uint8_t *hdr, uint8_t out[WIRE_HEADER_SIZE]);

#endif /* INAGG_WIRE_DPAUTH_H */
