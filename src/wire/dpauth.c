/* dpauth.c - per-packet MACs and their keys with libsodium (see dpauth.h). */
#include "wire/dpauth.h"

#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <string.h>

#define DPAUTH_CONTEXT "inaggdp3" /* crypto_kdf's 8-byte context */
enum { DPAUTH_SUBKEY_UP = 1, DPAUTH_SUBKEY_DOWN = 2 };

/* The packet nonce: 32 random bits of this process, then a 64-bit counter. */
static _Atomic uint32_t nonce_prefix;
static _Atomic uint64_t nonce_counter;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = -1;

static void new_prefix(void)
{
    atomic_store(&nonce_prefix, randombytes_random());
    atomic_store(&nonce_counter, 0);
}

static void init_process(void)
{
    if (sodium_init() < 0)
        return;
    new_prefix();
    /* a forked child seals under keys of its own, but never with its parent's nonces */
    init_rc = pthread_atfork(NULL, NULL, new_prefix) == 0 ? 0 : -1;
}

int dpauth_init(void)
{
    pthread_once(&init_once, init_process);
    return init_rc;
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

/* The tag of header + nonce (hdr, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES bytes) and payload
 * under the one-time key that key and the nonce give. */
static void tag_of(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *hdr, const void *payload,
                   size_t len, uint8_t tag[DPAUTH_TAG_BYTES])
{
    uint8_t otk[crypto_onetimeauth_KEYBYTES];
    crypto_stream_chacha20_ietf(otk, sizeof(otk), hdr + WIRE_HEADER_SIZE, key);
    crypto_onetimeauth_state st;
    crypto_onetimeauth_init(&st, otk);
    crypto_onetimeauth_update(&st, hdr, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
    if (len)
        crypto_onetimeauth_update(&st, payload, len);
    crypto_onetimeauth_final(&st, tag);
    sodium_memzero(otk, sizeof(otk));
}

void dpauth_seal(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr, const void *payload,
                 size_t len)
{
    uint8_t *n = hdr + WIRE_HEADER_SIZE;
    uint32_t p = atomic_load_explicit(&nonce_prefix, memory_order_relaxed);
    uint64_t c = atomic_fetch_add_explicit(&nonce_counter, 1, memory_order_relaxed);
    for (int i = 0; i < 4; i++)
        n[i] = (uint8_t)(p >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        n[4 + i] = (uint8_t)(c >> (56 - 8 * i));
    tag_of(key, hdr, payload, len, hdr + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
}

void dpauth_seal_packet(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *pkt, size_t payload_len)
{
    dpauth_seal(key, pkt, pkt + WIRE_HEADER_MAX, payload_len);
}

int dpauth_check(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len)
{
    uint8_t tag[DPAUTH_TAG_BYTES];
    tag_of(key, pkt, pkt + WIRE_HEADER_MAX, payload_len, tag);
    return crypto_verify_16(tag, pkt + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES) == 0;
}
