/*
 * bench_mac.h - the run of `inagg bench mac`: what the authenticated dataplane's MACs
 * (wire/dpauth.h, PROTOCOL.md 1.4) cost one core of this machine per packet size. For each
 * payload size it times the product's seal and check (dpauth_seal_packet / dpauth_check:
 * libcrypto's Poly1305 above 256 bytes where OpenSSL offers it) against the same tag by
 * libsodium alone (dpauth_tag_sodium, the baseline), and verifies every size: the sealed tag
 * is the reference's, the check accepts it, and rejects the packet with one bit flipped.
 * The command's parsing and rendering are cli/cmd_bench_mac.c.
 */
#ifndef INAGG_BENCH_BENCH_MAC_H
#define INAGG_BENCH_BENCH_MAC_H

#include <stddef.h>
#include <stdint.h>

#include "lib/wire/dpauth.h"

#define BENCH_MAC_MAX_SIZES 16u
#define BENCH_MAC_MAX_PAYLOAD (WIRE_MAX_DATAGRAM - WIRE_HEADER_MAX) /* one datagram's */
#define BENCH_MAC_MAX_COUNT 10000000u
#define BENCH_MAC_MAX_REPEATS 99u

typedef struct bench_mac_opts {
    uint32_t sizes[BENCH_MAC_MAX_SIZES]; /* payload bytes per packet */
    uint32_t nsizes;
    uint32_t count; /* tags per timed loop */
    uint32_t repeats; /* timed loops per measurement; medians are reported */
} bench_mac_opts_t;

/* One payload size, per tag (medians over the repeats). */
typedef struct bench_mac_row {
    uint32_t size;
    double seal_ns; /* dpauth_seal_packet: a new nonce, the one-time key, the tag */
    double check_ns; /* dpauth_check */
    double sodium_ns; /* dpauth_tag_sodium: the same tag by libsodium alone */
    const char *library; /* where the product's Poly1305 of this size runs */
    int verified; /* bench_mac_verify_packet held, and every timed check passed */
} bench_mac_row_t;

/* "32,96,8192" into sizes (each 0..BENCH_MAC_MAX_PAYLOAD, at most BENCH_MAC_MAX_SIZES). 0, or
 * -EINVAL with the reason in err. */
int bench_mac_parse_sizes(const char *text, uint32_t *sizes, uint32_t *n, char *err, size_t errlen);

/* Is the tag of sealed packet pkt (payload_len bytes of payload after WIRE_HEADER_MAX) under
 * key the reference's (dpauth_tag_sodium), accepted by dpauth_check, and the packet with one
 * payload bit (or, without payload, one header bit) flipped refused? 1 or 0; pkt is as it was. */
int bench_mac_verify_packet(const uint8_t key[DPAUTH_KEY_BYTES], uint8_t *pkt, size_t payload_len);

/* Measure every size of o into rows[o->nsizes]. 0 (a row may still be unverified), or a
 * negative errno with the reason in err. */
int bench_mac_measure(const bench_mac_opts_t *o, bench_mac_row_t *rows, char *err, size_t errlen);

#endif /* INAGG_BENCH_BENCH_MAC_H */
