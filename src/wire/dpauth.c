/* dpauth.c - per-packet MACs and their keys with libsodium (see dpauth.h). */
#include "wire/dpauth.h"

#include <sodium.h>
#include <string.h>

#define DPAUTH_CONTEXT "inaggdp3" /* crypto_kdf's 8-byte context */
enum { DPAUTH_SUBKEY_UP = 1, DPAUTH_SUBKEY_DOWN = 2 };

int dpauth_init(void)
{
    return sodium_init() < 0 ? -1 : 0;
}

void dpauth_derive(const uint8_t verifier[32], const uint8_t nonce[16], const char *job,
                   uint32_t rank, dpauth_keys_t *out)
{
    static const char label[] = "inagg dataplane key";
    uint8_t master[crypto_kdf_KEYBYTES], rank_be[4] = {(uint8_t)(rank >> 24),
                                                       (uint8_t)(rank >> 16),
                                                       (uint8_t)(rank >> 8), (uint8_t)rank};
    uint8_t zero = 0;
    crypto_generichash_state st;
    crypto_generichash_init(&st, verifier, 32, sizeof(master));
    crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label) - 1);
    crypto_generichash_update(&st, nonce, 16);
    crypto_generichash_update(&st, (const uint8_t *)job, strlen(job));
    crypto_generichash_update(&st, &zero, 1); /* the name ends here */
    crypto_generichash_update(&st, rank_be, sizeof(rank_be));
    crypto_generichash_final(&st, master, sizeof(master));
    crypto_kdf_derive_from_key(out->up, sizeof(out->up), DPAUTH_SUBKEY_UP, DPAUTH_CONTEXT,
                               master);
    crypto_kdf_derive_from_key(out->down, sizeof(out->down), DPAUTH_SUBKEY_DOWN, DPAUTH_CONTEXT,
                               master);
    sodium_memzero(master, sizeof(master));
    sodium_memzero(&st, sizeof(st));
}

void dpauth_digest(const void *payload, size_t len, uint8_t out[DPAUTH_DIGEST_BYTES])
{
    crypto_generichash(out, DPAUTH_DIGEST_BYTES, payload, len, NULL, 0);
}

static void tag_of(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *hdr,
                   const uint8_t digest[DPAUTH_DIGEST_BYTES], uint8_t tag[WIRE_MAC_BYTES])
{
    uint8_t in[WIRE_HEADER_SIZE + DPAUTH_DIGEST_BYTES];
    memcpy(in, hdr, WIRE_HEADER_SIZE);
    memcpy(in + WIRE_HEADER_SIZE, digest, DPAUTH_DIGEST_BYTES);
    crypto_generichash(tag, WIRE_MAC_BYTES, in, sizeof(in), key, DPAUTH_KEY_BYTES);
}

void dpauth_seal(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr,
                 const uint8_t digest[DPAUTH_DIGEST_BYTES])
{
    tag_of(key, hdr, digest, hdr + WIRE_HEADER_SIZE);
}

void dpauth_seal_packet(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *pkt, size_t payload_len)
{
    uint8_t d[DPAUTH_DIGEST_BYTES];
    dpauth_digest(pkt + WIRE_HEADER_MAX, payload_len, d);
    dpauth_seal(key, pkt, d);
}

int dpauth_check(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len)
{
    uint8_t d[DPAUTH_DIGEST_BYTES], tag[WIRE_MAC_BYTES];
    dpauth_digest(pkt + WIRE_HEADER_MAX, payload_len, d);
    tag_of(key, pkt, d, tag);
    return crypto_verify_16(tag, pkt + WIRE_HEADER_SIZE) == 0;
}
