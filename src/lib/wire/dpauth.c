/* dpauth.c - per-packet MACs and their keys with libsodium (see dpauth.h). Poly1305 itself
 * runs in OpenSSL's libcrypto for payloads over DPAUTH_SMALL_PAYLOAD bytes when it offers it
 * (its AVX2/AVX-512 code, measured 2.7 times libsodium 1.0.18's SSE2 Poly1305 on this
 * machine's 8 KiB packets: PERFORMANCE.md), and in libsodium for smaller ones, where
 * EVP_MAC_init's dispatch costs more than the bytes (a 32-byte payload: 251 ns against
 * 102); the tag is the same either way. */
#include "lib/wire/dpauth.h"

#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <string.h>

#define DPAUTH_CONTEXT "inaggdp4" /* crypto_kdf's 8-byte context */
enum { DPAUTH_SUBKEY_UP = 1 };
#define DPAUTH_TYPE_AT 3u /* the type's and the rank field's offsets in the encoded header */
#define DPAUTH_RANK_AT 6u
#define DPAUTH_SMALL_PAYLOAD 256u /* at most this many payload bytes: libsodium's Poly1305 */

/* The packet nonce: 32 random bits of this process, then a 64-bit counter. */
static _Atomic uint32_t nonce_prefix;
static _Atomic uint64_t nonce_counter;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = -EIO; /* until sodium_init succeeds */

/* OpenSSL's Poly1305 (NULL: libsodium's), and each thread's context of it. */
static EVP_MAC *poly1305;
static pthread_key_t poly1305_ctx_key;

static void free_poly1305_ctx(void *ctx) { EVP_MAC_CTX_free(ctx); }

/* This thread's Poly1305 context, or NULL (then libsodium computes the tag). */
static EVP_MAC_CTX *thread_poly1305(void)
{
    if (!poly1305)
        return NULL;
    EVP_MAC_CTX *ctx = pthread_getspecific(poly1305_ctx_key);
    if (ctx)
        return ctx;
    ctx = EVP_MAC_CTX_new(poly1305);
    if (ctx && pthread_setspecific(poly1305_ctx_key, ctx) != 0) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

static void new_prefix(void)
{
    atomic_store(&nonce_prefix, randombytes_random());
    atomic_store(&nonce_counter, 0);
}

static void init_process(void)
{
    if (sodium_init() < 0)
        return;
    if (pthread_key_create(&poly1305_ctx_key, free_poly1305_ctx) == 0)
        poly1305 = EVP_MAC_fetch(NULL, "POLY1305", NULL); /* NULL: not offered, libsodium's */
    new_prefix();
    /* a forked child seals under keys of its own, but never with its parent's nonces */
    init_rc = -pthread_atfork(NULL, NULL, new_prefix);
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
    uint8_t master[crypto_kdf_KEYBYTES], rank_be[4] = {(uint8_t)(rank >> 24), (uint8_t)(rank >> 16),
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
    crypto_kdf_derive_from_key(out->up, sizeof(out->up), DPAUTH_SUBKEY_UP, DPAUTH_CONTEXT, master);
    static const char down_label[] = "inagg dataplane down key";
    crypto_generichash_init(&st, verifier, 32, sizeof(out->down_base));
    crypto_generichash_update(&st, (const uint8_t *)down_label, sizeof(down_label) - 1);
    crypto_generichash_update(&st, (const uint8_t *)job, strlen(job));
    crypto_generichash_update(&st, &zero, 1);
    crypto_generichash_final(&st, out->down_base, sizeof(out->down_base));
    memset(out->down, 0, sizeof(out->down));
    sodium_memzero(master, sizeof(master));
    sodium_memzero(&st, sizeof(st));
}

void dpauth_bind_job(dpauth_keys_t *keys, uint64_t token)
{
    uint8_t token_be[8];
    for (int i = 0; i < 8; i++)
        token_be[i] = (uint8_t)(token >> (56 - 8 * i));
    crypto_generichash(keys->down, sizeof(keys->down), token_be, sizeof(token_be), keys->down_base,
                       sizeof(keys->down_base));
}

/* The libcrypto context that computes the Poly1305 of a payload of len bytes in this thread,
 * or NULL: libsodium computes it (small payloads, or libcrypto without Poly1305). */
static EVP_MAC_CTX *poly1305_for(size_t len)
{
    return len > DPAUTH_SMALL_PAYLOAD ? thread_poly1305() : NULL;
}

/* The tag by libsodium alone: Poly1305 under one-time key otk over header + nonce (hdr,
 * WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES bytes) and payload. */
static void tag_by_sodium(const uint8_t otk[crypto_onetimeauth_KEYBYTES], const uint8_t *hdr,
                          const void *payload, size_t len, uint8_t tag[DPAUTH_TAG_BYTES])
{
    crypto_onetimeauth_state st;
    crypto_onetimeauth_init(&st, otk);
    crypto_onetimeauth_update(&st, hdr, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
    if (len)
        crypto_onetimeauth_update(&st, payload, len);
    crypto_onetimeauth_final(&st, tag);
    sodium_memzero(&st, sizeof(st));
}

/* The tag of header + nonce (hdr, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES bytes) and payload
 * under the one-time key that key and the nonce give. */
static void tag_of(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *hdr, const void *payload,
                   size_t len, uint8_t tag[DPAUTH_TAG_BYTES])
{
    uint8_t otk[crypto_onetimeauth_KEYBYTES];
    crypto_stream_chacha20_ietf(otk, sizeof(otk), hdr + WIRE_HEADER_SIZE, key);
    EVP_MAC_CTX *ctx = poly1305_for(len);
    size_t tag_len = 0;
    if (!(ctx && EVP_MAC_init(ctx, otk, sizeof(otk), NULL) == 1 &&
          EVP_MAC_update(ctx, hdr, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES) == 1 &&
          (len == 0 || EVP_MAC_update(ctx, payload, len) == 1) &&
          EVP_MAC_final(ctx, tag, &tag_len, DPAUTH_TAG_BYTES) == 1 && tag_len == DPAUTH_TAG_BYTES))
        tag_by_sodium(otk, hdr, payload, len, tag);
    sodium_memzero(otk, sizeof(otk));
}

void dpauth_tag_sodium(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len,
                       uint8_t tag[DPAUTH_TAG_BYTES])
{
    uint8_t otk[crypto_onetimeauth_KEYBYTES];
    crypto_stream_chacha20_ietf(otk, sizeof(otk), pkt + WIRE_HEADER_SIZE, key);
    tag_by_sodium(otk, pkt, pkt + WIRE_HEADER_MAX, payload_len, tag);
    sodium_memzero(otk, sizeof(otk));
}

const char *dpauth_poly1305_library(size_t payload_len)
{
    return poly1305_for(payload_len) ? "libcrypto" : "libsodium";
}

static void next_nonce(uint8_t *n)
{
    uint32_t p = atomic_load_explicit(&nonce_prefix, memory_order_relaxed);
    uint64_t c = atomic_fetch_add_explicit(&nonce_counter, 1, memory_order_relaxed);
    for (int i = 0; i < 4; i++)
        n[i] = (uint8_t)(p >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        n[4 + i] = (uint8_t)(c >> (56 - 8 * i));
}

void dpauth_seal(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr, const void *payload, size_t len)
{
    next_nonce(hdr + WIRE_HEADER_SIZE);
    tag_of(key, hdr, payload, len, hdr + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
}

void dpauth_down_header(const uint8_t *hdr, uint8_t out[WIRE_HEADER_SIZE])
{
    memcpy(out, hdr, WIRE_HEADER_SIZE);
    if (hdr[DPAUTH_TYPE_AT] != WIRE_RESULT)
        return; /* a confirmation is one rank's: its rank stays under the MAC */
    out[DPAUTH_RANK_AT] = 0;
    out[DPAUTH_RANK_AT + 1] = 0;
}

/* hdr's header and nonce as a down MAC covers them. */
static void down_bytes(const uint8_t *hdr, uint8_t out[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES])
{
    dpauth_down_header(hdr, out);
    memcpy(out + WIRE_HEADER_SIZE, hdr + WIRE_HEADER_SIZE, DPAUTH_NONCE_BYTES);
}

void dpauth_seal_down(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *hdr, const void *payload,
                      size_t len)
{
    uint8_t covered[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES];
    next_nonce(hdr + WIRE_HEADER_SIZE);
    down_bytes(hdr, covered);
    tag_of(key, covered, payload, len, hdr + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
}

int dpauth_check_down(const uint8_t key[DPAUTH_KEY_BYTES], const uint8_t *pkt, size_t payload_len)
{
    uint8_t covered[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES], tag[DPAUTH_TAG_BYTES];
    down_bytes(pkt, covered);
    tag_of(key, covered, pkt + WIRE_HEADER_MAX, payload_len, tag);
    return crypto_verify_16(tag, pkt + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES) == 0;
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
