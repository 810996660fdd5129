/*
 * bench_mac.c - see bench_mac.h: the authenticated dataplane's seal and check timed per
 * payload size on one core, against libsodium's tag, every size verified.
 */
#include "apps/bench/bench_mac.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bench/samples.h"
#include "inagg/version.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"

#define TAG_AT (WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES)

int bench_mac_parse_sizes(const char *text, uint32_t *sizes, uint32_t *n, char *err, size_t errlen)
{
    *n = 0;
    for (const char *p = text;; p++) { /* bounded: each pass takes a number or returns */
        if (*n == BENCH_MAC_MAX_SIZES)
            return set_err(err, errlen, -EINVAL, "more than %u sizes", BENCH_MAC_MAX_SIZES);
        char *end = NULL;
        errno = 0;
        unsigned long v = (*p >= '0' && *p <= '9') ? strtoul(p, &end, 10) : ULONG_MAX;
        if (v == ULONG_MAX || errno || (*end != ',' && *end != '\0'))
            return set_err(err, errlen, -EINVAL, "'%s' is not a list of byte counts", text);
        if (v > BENCH_MAC_MAX_PAYLOAD)
            return set_err(err, errlen, -EINVAL,
                           "%lu bytes: a payload is at most %u bytes (one datagram's)", v,
                           BENCH_MAC_MAX_PAYLOAD);
        sizes[(*n)++] = (uint32_t)v;
        if (*end == '\0')
            return 0;
        p = end;
    }
}

int bench_mac_verify_packet(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *pkt, size_t payload_len)
{
    uint8_t want[DPAUTH_TAG_BYTES];
    dpauth_tag_sodium(key, pkt, payload_len, want);
    if (memcmp(want, pkt + TAG_AT, DPAUTH_TAG_BYTES) != 0 || !dpauth_check(key, pkt, payload_len))
        return 0;
    size_t at = payload_len ? WIRE_HEADER_MAX + payload_len / 2 : WIRE_HEADER_SIZE / 2;
    pkt[at] ^= 0x10;
    int forged_passes = dpauth_check(key, pkt, payload_len);
    pkt[at] ^= 0x10;
    return !forged_passes;
}

/* A packet of `size` payload bytes with a CONTRIB header that asks for a MAC; NULL when out of
 * memory. */
static uint8_t *new_packet(uint32_t size)
{
    uint8_t *pkt = malloc(WIRE_HEADER_MAX + (size_t)size);
    if (!pkt)
        return NULL;
    wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                       .type = WIRE_CONTRIB,
                       .job = 1,
                       .rank = 1,
                       .token = 0x0123456789abcdefull,
                       .count = (uint16_t)(size / 4u),
                       .flags = WIRE_FLAG_VER | WIRE_FLAG_MAC,
                       .dtype = WIRE_INT32};
    wire_encode_header(&h, pkt);
    memset(pkt + WIRE_HEADER_SIZE, 0, WIRE_MAC_BYTES);
    for (uint32_t i = 0; i < size; i++)
        pkt[WIRE_HEADER_MAX + i] = (uint8_t)(i * 31u + 7u);
    return pkt;
}

enum { OP_SEAL, OP_CHECK, OP_SODIUM, OP_COUNT };

/* One timed loop of o->count operations `op` on pkt; ns per operation. *failed counts the
 * checks that did not pass. */
static double time_loop(int op, const bench_mac_opts_t *o, const uint8_t key[DPAUTH_KEY_BYTES],
                        uint8_t *pkt, uint32_t size, uint64_t *failed)
{
    uint8_t tag[DPAUTH_TAG_BYTES];
    uint64_t t0 = util_now_ns();
    for (uint32_t i = 0; i < o->count; i++) {
        if (op == OP_SEAL)
            dpauth_seal_packet(key, pkt, size);
        else if (op == OP_CHECK)
            *failed += !dpauth_check(key, pkt, size);
        else
            dpauth_tag_sodium(key, pkt, size, tag);
    }
    uint64_t t1 = util_now_ns();
    return (double)(t1 - t0) / o->count;
}

/* One size: the three operations' loops interleaved over the repeats (so a change of the
 * machine's pace touches all three alike), their medians, and the verification. */
static int measure_size(const bench_mac_opts_t *o, const uint8_t key[DPAUTH_KEY_BYTES],
                        uint32_t size, bench_mac_row_t *row)
{
    uint8_t *pkt = new_packet(size);
    double *ns = calloc((size_t)OP_COUNT * o->repeats, sizeof(double));
    if (!pkt || !ns) {
        free(pkt);
        free(ns);
        return -ENOMEM;
    }
    dpauth_seal_packet(key, pkt, size);
    uint64_t failed = 0;
    for (uint32_t r = 0; r < o->repeats; r++)
        for (int op = 0; op < OP_COUNT; op++)
            ns[(size_t)op * o->repeats + r] = time_loop(op, o, key, pkt, size, &failed);
    *row = (bench_mac_row_t){.size = size,
                             .seal_ns = bench_median(ns, o->repeats),
                             .check_ns = bench_median(ns + o->repeats, o->repeats),
                             .sodium_ns = bench_median(ns + 2 * (size_t)o->repeats, o->repeats),
                             .library = dpauth_poly1305_library(size),
                             .verified = failed == 0 && bench_mac_verify_packet(key, pkt, size)};
    free(pkt);
    free(ns);
    return 0;
}

int bench_mac_measure(const bench_mac_opts_t *o, bench_mac_row_t *rows, char *err, size_t errlen)
{
    if (dpauth_init() != 0)
        return set_err(err, errlen, -EIO, "libsodium could not start");
    uint8_t verifier[32], nonce[16];
    for (int i = 0; i < 32; i++)
        verifier[i] = (uint8_t)(i * 5 + 3);
    for (int i = 0; i < 16; i++)
        nonce[i] = (uint8_t)(i * 9 + 1);
    dpauth_keys_t keys;
    dpauth_derive(verifier, nonce, "bench-mac", 1, &keys);
    for (uint32_t k = 0; k < o->nsizes; k++) {
        int rc = measure_size(o, keys.up, o->sizes[k], &rows[k]);
        if (rc != 0)
            return set_err(err, errlen, rc, "%u-byte packets: out of memory", o->sizes[k]);
    }
    return 0;
}
