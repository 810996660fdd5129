/*
 * test_bench_mac.c - `inagg bench mac`'s measurement (bench/bench_mac.h): its --sizes
 * parser refuses what is not a list of payload sizes; its verification accepts a sealed
 * packet and refuses one whose tag or payload changed; its reference tag (dpauth_tag_sodium)
 * is PROTOCOL.md 1.4's, computed here with libsodium independently; and a short measurement
 * verifies every size, times all three operations, and names the library per size.
 */
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bench/bench_mac.h"
#include "harness.h"
#include "inagg/version.h"

TEST(bench_mac_sizes_parse_and_refuse, 5)
{
    uint32_t s[BENCH_MAC_MAX_SIZES], n = 0;
    char err[160];
    CHECK(bench_mac_parse_sizes("32,8192,0", s, &n, err, sizeof(err)) == 0);
    CHECK(n == 3 && s[0] == 32 && s[1] == 8192 && s[2] == 0);
    CHECK(bench_mac_parse_sizes("65443", s, &n, err, sizeof(err)) == 0 && s[0] == 65443);
    const char *bad[] = {"", "32,", ",32", "a", "-1", "+4", "32;64", "65444", "1,,2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_MSG(bench_mac_parse_sizes(bad[i], s, &n, err, sizeof(err)) == -EINVAL,
                  "'%s' accepted", bad[i]);
        CHECK_MSG(err[0] != '\0', "'%s' refused without a reason", bad[i]);
    }
    CHECK(strstr((bench_mac_parse_sizes("65444", s, &n, err, sizeof(err)), err), "65443"));
    char many[128] = "1";
    for (unsigned k = 1; k <= BENCH_MAC_MAX_SIZES; k++)
        strcat(many, ",1");
    CHECK(bench_mac_parse_sizes(many, s, &n, err, sizeof(err)) == -EINVAL);
    CHECK(strstr(err, "more than"));
}

/* A packet of len payload bytes sealed under key. */
static uint8_t *sealed(const uint8_t *key, uint32_t len)
{
    uint8_t *pkt = calloc(1, WIRE_HEADER_MAX + len);
    wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                       .type = WIRE_CONTRIB,
                       .job = 2,
                       .rank = 0,
                       .token = 7,
                       .count = (uint16_t)(len / 4),
                       .flags = WIRE_FLAG_VER | WIRE_FLAG_MAC,
                       .dtype = WIRE_INT32};
    wire_encode_header(&h, pkt);
    for (uint32_t i = 0; i < len; i++)
        pkt[WIRE_HEADER_MAX + i] = (uint8_t)(i * 3 + 1);
    dpauth_seal_packet(key, pkt, len);
    return pkt;
}

TEST(bench_mac_reference_tag_and_verification, 10)
{
    CHECK(dpauth_init() == 0);
    uint8_t key[DPAUTH_KEY_BYTES];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(i + 40);
    const uint32_t sizes[] = {0, 32, 300, 8192};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint32_t len = sizes[k];
        uint8_t *pkt = sealed(key, len);
        /* the reference, independently: ChaCha20's first block as the key, Poly1305 over
         * header, nonce and payload */
        uint8_t otk[32], want[16], got[16];
        uint8_t *msg = malloc(WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES + (size_t)len + 1);
        crypto_stream_chacha20_ietf(otk, sizeof(otk), pkt + WIRE_HEADER_SIZE, key);
        memcpy(msg, pkt, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
        memcpy(msg + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES, pkt + WIRE_HEADER_MAX, len);
        crypto_onetimeauth(want, msg, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES + len, otk);
        dpauth_tag_sodium(key, pkt, len, got);
        CHECK_MSG(memcmp(got, want, 16) == 0, "%u bytes: dpauth_tag_sodium is not the reference",
                  len);
        CHECK_MSG(bench_mac_verify_packet(key, pkt, len) == 1, "%u bytes: a sealed packet refused",
                  len);
        pkt[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES + 3] ^= 1; /* the tag */
        CHECK_MSG(bench_mac_verify_packet(key, pkt, len) == 0, "%u bytes: a wrong tag passes", len);
        pkt[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES + 3] ^= 1;
        pkt[len ? WIRE_HEADER_MAX + len - 1 : 5] ^= 0x80; /* the payload (or the header) */
        CHECK_MSG(bench_mac_verify_packet(key, pkt, len) == 0, "%u bytes: a changed packet passes",
                  len);
        free(msg);
        free(pkt);
    }
}

TEST(bench_mac_measures_and_verifies_every_size, 20)
{
    bench_mac_opts_t o = {.sizes = {0, 96, 300, 8192}, .nsizes = 4, .count = 300, .repeats = 5};
    bench_mac_row_t rows[BENCH_MAC_MAX_SIZES];
    char err[160] = "";
    CHECK_MSG(bench_mac_measure(&o, rows, err, sizeof(err)) == 0, "%s", err);
    for (uint32_t k = 0; k < o.nsizes; k++) {
        const bench_mac_row_t *r = &rows[k];
        printf("    %5u B: seal %.0f ns, check %.0f ns, libsodium %.0f ns (%s)\n", r->size,
               r->seal_ns, r->check_ns, r->sodium_ns, r->library);
        CHECK_MSG(r->verified, "%u bytes not verified", r->size);
        CHECK(r->size == o.sizes[k]);
        CHECK(r->seal_ns > 0 && r->check_ns > 0 && r->sodium_ns > 0);
        CHECK(strcmp(r->library, "libsodium") == 0 || strcmp(r->library, "libcrypto") == 0);
    }
    CHECK(strcmp(rows[0].library, "libsodium") == 0 && strcmp(rows[1].library, "libsodium") == 0);
    /* a larger packet costs more to seal than an empty one */
    CHECK(rows[3].seal_ns > rows[0].seal_ns);
}
