/*
 * test_wire.c - the packet format (src/lib/wire): every header field survives encode/decode at
 * its extremes and lands at the documented offset in network order; every malformed datagram
 * (short, bad magic, version, type, dtype, flags, length) is refused with the right
 * enum wire_status; and a bounded seeded fuzz loop shows wire_decode never reads past the
 * datagram (buffers are allocated to their exact length, so the sanitizer build catches it)
 * and that whatever it accepts re-encodes to the same header bytes.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "inagg/version.h"
#include "lib/base/util.h"
#include "lib/wire/wire.h"

/* A header that decodes: contribution, round 6 (pool version 0), 3 elements. */
static wire_header_t good_header(void)
{
    wire_header_t h = {0};
    h.version = INAGG_PROTOCOL_VERSION;
    h.type = WIRE_CONTRIB;
    h.job = 7;
    h.rank = 2;
    h.token = 0xdeadbeefcafef00dull;
    h.slot = 11;
    h.round = 6;
    h.chunk = 42;
    h.count = 3;
    h.flags = wire_ver_of_round(h.round);
    h.dtype = WIRE_INT32;
    h.exp = -3;
    h.next_exp = 5;
    return h;
}

/* Encode h plus h->count payload words (word i = i + 1, network order) into a buffer of
 * exactly the datagram's length. */
static uint8_t *make_packet(const wire_header_t *h, size_t *len)
{
    const uint32_t count = h->count;
    *len = WIRE_HEADER_SIZE + (size_t)count * 4u;
    uint8_t *p = malloc(*len);
    CHECK(p != NULL);
    wire_encode_header(h, p);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t w = htonl(i + 1u);
        memcpy(p + WIRE_HEADER_SIZE + 4u * i, &w, 4);
    }
    return p;
}

static int headers_equal(const wire_header_t *a, const wire_header_t *b)
{
    return a->version == b->version && a->type == b->type && a->job == b->job &&
           a->rank == b->rank && a->token == b->token && a->slot == b->slot &&
           a->round == b->round && a->chunk == b->chunk && a->count == b->count &&
           a->flags == b->flags && a->dtype == b->dtype && a->exp == b->exp &&
           a->next_exp == b->next_exp;
}

/* Encode, decode into a poisoned header, and compare every field. */
static void roundtrip(const wire_header_t *h)
{
    size_t len;
    uint8_t *p = make_packet(h, &len);
    wire_header_t d;
    memset(&d, 0xa5, sizeof(d));
    enum wire_status st = wire_decode(p, len, &d);
    CHECK_MSG(st == WIRE_OK, "decode: %s (round %u flags %u count %u)", wire_status_name(st),
              h->round, h->flags, h->count);
    CHECK(headers_equal(h, &d));
    /* The payload follows the header untouched. */
    for (uint32_t i = 0; i < h->count; i += (h->count / 7u) + 1u) {
        uint32_t w;
        memcpy(&w, p + WIRE_HEADER_SIZE + 4u * i, 4);
        CHECK_EQ_INT(ntohl(w), i + 1u);
    }
    free(p);
}

static uint16_t be16_at(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }

static uint32_t be32_at(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Decode a modified copy of a good packet and expect `want`. */
static void expect_status(const uint8_t *pkt, size_t len, enum wire_status want, const char *what)
{
    uint8_t *p = malloc(len ? len : 1);
    CHECK(p != NULL);
    if (len)
        memcpy(p, pkt, len);
    wire_header_t d;
    enum wire_status st = wire_decode(p, len, &d);
    CHECK_MSG(st == want, "%s: got %s, want %s", what, wire_status_name(st),
              wire_status_name(want));
    free(p);
}

TEST(wire_layout_offsets_network_order, 5)
{
    wire_header_t h = {0};
    h.version = INAGG_PROTOCOL_VERSION;
    h.type = WIRE_RESULT;
    h.job = 0x0102;
    h.rank = 0x0304;
    h.token = 0x0506070821222324ull;
    h.slot = 0x090a0b0cu;
    h.round = 0x0d0e0f11u; /* odd */
    h.chunk = 0x12131415u;
    h.count = 0x1617;
    h.flags = WIRE_FLAG_VER | WIRE_FLAG_OVERFLOW;
    h.dtype = WIRE_FLOAT32;
    h.exp = (int16_t)-2; /* 0xfffe */
    h.next_exp = (int16_t)0x191a;
    uint8_t b[WIRE_HEADER_SIZE];
    memset(b, 0xcc, sizeof(b));
    wire_encode_header(&h, b);
    CHECK_EQ_INT(be16_at(b + 0), WIRE_MAGIC);
    CHECK(b[0] == 'I' && b[1] == 'A');
    CHECK_EQ_INT(b[2], INAGG_PROTOCOL_VERSION);
    CHECK_EQ_INT(b[3], WIRE_RESULT);
    CHECK_EQ_INT(be16_at(b + 4), 0x0102);
    CHECK_EQ_INT(be16_at(b + 6), 0x0304);
    CHECK_EQ_INT(be32_at(b + 8), 0x05060708u); /* the 64-bit token, high word first */
    CHECK_EQ_INT(be32_at(b + 12), 0x21222324u);
    CHECK_EQ_INT(be32_at(b + 16), 0x090a0b0cu);
    CHECK_EQ_INT(be32_at(b + 20), 0x0d0e0f11u);
    CHECK_EQ_INT(be32_at(b + 24), 0x12131415u);
    CHECK_EQ_INT(be16_at(b + 28), 0x1617);
    CHECK_EQ_INT(b[30], 3);
    CHECK_EQ_INT(b[31], WIRE_FLOAT32);
    CHECK_EQ_INT(be16_at(b + 32), 0xfffe);
    CHECK_EQ_INT(be16_at(b + 34), 0x191a);
}

TEST(wire_roundtrip_every_field, 10)
{
    wire_header_t h = good_header();
    roundtrip(&h);

    /* Maximum values everywhere; round odd so the version bit is set. */
    h.type = WIRE_RESULT;
    h.job = UINT16_MAX;
    h.rank = UINT16_MAX;
    h.token = UINT64_MAX;
    h.slot = UINT32_MAX;
    h.round = UINT32_MAX;
    h.chunk = UINT32_MAX;
    h.count = 5;
    h.flags = WIRE_FLAG_VER | WIRE_FLAG_OVERFLOW;
    h.dtype = WIRE_FLOAT32;
    h.exp = INT16_MAX;
    h.next_exp = INT16_MAX;
    roundtrip(&h);

    /* Minimum values: zeros, negative exponents down to the sentinel INT16_MIN. */
    h = good_header();
    h.job = 0;
    h.rank = 0;
    h.token = 0;
    h.slot = 0;
    h.round = 0;
    h.chunk = 0;
    h.flags = 0;
    h.exp = INT16_MIN;
    h.next_exp = INT16_MIN;
    roundtrip(&h);
    h.exp = -1;
    h.next_exp = -32767;
    roundtrip(&h);
    h.exp = -126;
    h.next_exp = 127;
    roundtrip(&h);

    /* Every dtype, both types, both flag combinations for both round parities. */
    for (uint8_t dt = 0; dt < WIRE_DTYPE_COUNT; dt++)
        for (uint8_t ty = WIRE_CONTRIB; ty <= WIRE_RESULT; ty++) /* payload-carrying types */
            for (uint32_t round = 0; round < 6; round++)
                for (int ovf = 0; ovf < 2; ovf++) {
                    h = good_header();
                    h.dtype = dt;
                    h.type = ty;
                    h.round = round + (round >= 4 ? 0xfffffff0u : 0u);
                    h.flags =
                        (uint8_t)(wire_ver_of_round(h.round) | (ovf ? WIRE_FLAG_OVERFLOW : 0u));
                    roundtrip(&h);
                }
    CHECK_EQ_INT(wire_ver_of_round(0), 0);
    CHECK_EQ_INT(wire_ver_of_round(1), 1);
    CHECK_EQ_INT(wire_ver_of_round(UINT32_MAX), 1);
    CHECK_EQ_INT(wire_ver_of_round(UINT32_MAX - 1u), 0);
}

TEST(wire_roundtrip_payload_lengths, 10)
{
    wire_header_t h = good_header();
    const uint16_t counts[] = {0, 1, 2, 63, 64, 256, 1024, (uint16_t)WIRE_MAX_ELEMS};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(counts); i++) {
        h.count = counts[i];
        roundtrip(&h);
    }
    /* The largest datagram UDP carries is exactly header + WIRE_MAX_ELEMS words. */
    CHECK(WIRE_HEADER_SIZE + WIRE_MAX_ELEMS * 4u <= WIRE_MAX_DATAGRAM);
    CHECK(WIRE_HEADER_SIZE + (WIRE_MAX_ELEMS + 1u) * 4u > WIRE_MAX_DATAGRAM);
    /* A zero-length probe is exactly the header. */
    h.count = 0;
    size_t len;
    uint8_t *p = make_packet(&h, &len);
    CHECK_EQ_INT(len, WIRE_HEADER_SIZE);
    free(p);
}

TEST(wire_short_datagrams, 5)
{
    wire_header_t h = good_header();
    h.count = 0;
    size_t len;
    uint8_t *p = make_packet(&h, &len);
    for (size_t n = 0; n < WIRE_HEADER_SIZE; n++) {
        char what[32];
        snprintf(what, sizeof(what), "length %zu", n);
        expect_status(p, n, WIRE_SHORT, what);
    }
    expect_status(p, WIRE_HEADER_SIZE, WIRE_OK, "exact header");
    free(p);
}

TEST(wire_bad_magic_version_type_dtype, 5)
{
    wire_header_t h = good_header();
    size_t len;
    uint8_t *p = make_packet(&h, &len);
    uint8_t *q = malloc(len);
    CHECK(q != NULL);

    const uint16_t magics[] = {0x0000, 0x4149, 0x4942, 0xc941, 0xffff};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(magics); i++) {
        memcpy(q, p, len);
        q[0] = (uint8_t)(magics[i] >> 8);
        q[1] = (uint8_t)magics[i];
        expect_status(q, len, WIRE_BAD_MAGIC, "magic");
    }
    /* Magic is checked first, even on an otherwise broken header. */
    memcpy(q, p, len);
    q[0] = 0;
    q[2] = 0;
    q[3] = 0;
    q[31] = 200;
    expect_status(q, len - 1, WIRE_BAD_MAGIC, "magic first");

    const uint8_t versions[] = {0, INAGG_PROTOCOL_VERSION + 1, 0x80 | INAGG_PROTOCOL_VERSION, 255};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(versions); i++) {
        memcpy(q, p, len);
        q[2] = versions[i];
        expect_status(q, len, WIRE_BAD_VERSION, "version");
    }

    const uint8_t types[] = {0, 5, 6, 0x81, 255};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(types); i++) {
        memcpy(q, p, len);
        q[3] = types[i];
        expect_status(q, len, WIRE_BAD_TYPE, "type");
    }
    for (uint8_t ty = WIRE_CONTRIB; ty <= WIRE_RESULT; ty++) {
        memcpy(q, p, len);
        q[3] = ty;
        expect_status(q, len, WIRE_OK, "good type");
    }

    for (unsigned dt = WIRE_DTYPE_COUNT; dt <= 255; dt++) {
        memcpy(q, p, len);
        q[31] = (uint8_t)dt;
        expect_status(q, len, WIRE_BAD_DTYPE, "dtype");
    }
    for (unsigned dt = 0; dt < WIRE_DTYPE_COUNT; dt++) {
        memcpy(q, p, len);
        q[31] = (uint8_t)dt;
        expect_status(q, len, WIRE_OK, "good dtype");
    }
    free(q);
    free(p);
}

TEST(wire_bad_flags, 5)
{
    for (uint32_t round = 6; round <= 7; round++) {
        wire_header_t h = good_header();
        h.round = round;
        h.flags = wire_ver_of_round(round);
        size_t len;
        uint8_t *p = make_packet(&h, &len);
        uint8_t *q = malloc(len);
        CHECK(q != NULL);
        for (unsigned fl = 0; fl <= 255; fl++) {
            memcpy(q, p, len);
            q[30] = (uint8_t)fl;
            int unknown = (fl & ~WIRE_FLAGS_KNOWN) != 0;
            int ver_ok = (fl & WIRE_FLAG_VER) == (round & 1u);
            enum wire_status want = (!unknown && ver_ok) ? WIRE_OK : WIRE_BAD_FLAGS;
            if (want == WIRE_OK && (fl & WIRE_FLAG_MAC)) /* a MAC would follow the header */
                want = WIRE_BAD_LENGTH;
            char what[48];
            snprintf(what, sizeof(what), "round %u flags 0x%02x", round, fl);
            expect_status(q, len, want, what);
        }
        free(q);
        free(p);
    }
    /* The version bit follows the low bit of the full round, also across the wrap. */
    wire_header_t h = good_header();
    h.round = UINT32_MAX;
    h.flags = 0;
    size_t len;
    uint8_t *p = make_packet(&h, &len);
    expect_status(p, len, WIRE_BAD_FLAGS, "round 2^32-1 with version 0");
    free(p);
    h.round = 0;
    h.flags = WIRE_FLAG_VER;
    p = make_packet(&h, &len);
    expect_status(p, len, WIRE_BAD_FLAGS, "round 0 with version 1");
    free(p);
}

TEST(wire_bad_length, 5)
{
    const uint16_t counts[] = {0, 1, 3, 256, (uint16_t)WIRE_MAX_ELEMS};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(counts); i++) {
        wire_header_t h = good_header();
        h.count = counts[i];
        size_t len;
        uint8_t *p = make_packet(&h, &len);
        uint8_t *q = malloc(len + 8);
        CHECK(q != NULL);
        memcpy(q, p, len);
        memset(q + len, 0, 8);
        expect_status(q, len, WIRE_OK, "exact");
        expect_status(q, len + 1, WIRE_BAD_LENGTH, "one byte long");
        expect_status(q, len + 4, WIRE_BAD_LENGTH, "one word long");
        expect_status(q, len + 8, WIRE_BAD_LENGTH, "two words long");
        if (h.count > 0) {
            expect_status(q, len - 1, WIRE_BAD_LENGTH, "one byte short");
            expect_status(q, len - 4, WIRE_BAD_LENGTH, "one word short");
            expect_status(q, WIRE_HEADER_SIZE, WIRE_BAD_LENGTH, "header only");
        }
        free(q);
        free(p);
    }
    /* count claims more elements than the datagram holds (including more than UDP can). */
    wire_header_t h = good_header();
    h.count = 4;
    size_t len;
    uint8_t *p = make_packet(&h, &len);
    const uint16_t claims[] = {5, 100, (uint16_t)WIRE_MAX_ELEMS, (uint16_t)(WIRE_MAX_ELEMS + 1u),
                               UINT16_MAX};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(claims); i++) {
        p[28] = (uint8_t)(claims[i] >> 8);
        p[29] = (uint8_t)claims[i];
        expect_status(p, len, WIRE_BAD_LENGTH, "count claims more");
    }
    free(p);
    /* Length is checked last: a datagram wrong in flags and length reports flags. */
    h = good_header();
    h.flags = 0x80;
    p = make_packet(&h, &len);
    expect_status(p, len + 0, WIRE_BAD_FLAGS, "flags before length");
    free(p);
}

TEST(wire_status_names, 5)
{
    for (int s = 0; s < WIRE_STATUS_COUNT; s++) {
        const char *n = wire_status_name((enum wire_status)s);
        CHECK(n != NULL && n[0] != '\0');
        CHECK(strcmp(n, "unknown") != 0);
        for (int t = 0; t < s; t++)
            CHECK(strcmp(n, wire_status_name((enum wire_status)t)) != 0);
    }
    CHECK(strcmp(wire_status_name(WIRE_OK), "ok") == 0);
    CHECK(strcmp(wire_status_name(WIRE_STATUS_COUNT), "unknown") == 0);
    CHECK(strcmp(wire_status_name((enum wire_status)1000), "unknown") == 0);
}

/* 200000 buffers of random length 0..200. Half are pure noise; the rest start from a valid
 * header with a few random bytes changed, so every branch of wire_decode is reached. */
TEST(wire_fuzz_decode, 60)
{
    util_rng_t rng;
    util_rng_seed(&rng, 0x1a2b3c4d5eull);
    unsigned long accepted = 0, by_status[WIRE_STATUS_COUNT] = {0};
    for (int iter = 0; iter < 200000; iter++) {
        uint64_t mode = util_rng_next(&rng) % 4u;
        size_t len;
        if (mode == 3) {
            /* A length that matches some count, so acceptance is reachable. */
            len = WIRE_HEADER_SIZE + 4u * (size_t)(util_rng_next(&rng) % 43u);
        } else {
            len = (size_t)(util_rng_next(&rng) % 201u);
        }
        uint8_t *b = malloc(len ? len : 1);
        CHECK(b != NULL);
        for (size_t i = 0; i < len; i++)
            b[i] = (uint8_t)util_rng_next(&rng);
        if (mode >= 2 && len >= WIRE_HEADER_SIZE) {
            wire_header_t h = good_header();
            h.round = (uint32_t)util_rng_next(&rng);
            h.flags = (uint8_t)(wire_ver_of_round(h.round) |
                                ((util_rng_next(&rng) & 1u) ? WIRE_FLAG_OVERFLOW : 0u));
            h.count = (uint16_t)((len - WIRE_HEADER_SIZE) / 4u);
            h.dtype = (uint8_t)(util_rng_next(&rng) % WIRE_DTYPE_COUNT);
            h.exp = (int16_t)util_rng_next(&rng);
            h.next_exp = (int16_t)util_rng_next(&rng);
            wire_encode_header(&h, b);
            int flips = (int)(util_rng_next(&rng) % 3u);
            for (int k = 0; k < flips; k++)
                b[util_rng_next(&rng) % WIRE_HEADER_SIZE] ^=
                    (uint8_t)(1u << (util_rng_next(&rng) % 8u));
        }
        wire_header_t d;
        enum wire_status st = wire_decode(b, len, &d);
        CHECK((unsigned)st < WIRE_STATUS_COUNT);
        by_status[st]++;
        if (len < WIRE_HEADER_SIZE)
            CHECK_EQ_INT(st, WIRE_SHORT);
        if (st == WIRE_OK) {
            accepted++;
            CHECK_EQ_INT(len, WIRE_HEADER_SIZE + (size_t)d.count * 4u);
            CHECK(d.type >= WIRE_CONTRIB && d.type <= WIRE_CONFIRM);
            if (d.type == WIRE_ACK || d.type == WIRE_CONFIRM)
                CHECK_EQ_INT(d.count, 0);
            CHECK(d.dtype < WIRE_DTYPE_COUNT);
            CHECK_EQ_INT(d.flags & WIRE_FLAG_VER, d.round & 1u);
            CHECK_EQ_INT(d.flags & ~WIRE_FLAGS_KNOWN, 0);
            uint8_t re[WIRE_HEADER_SIZE];
            wire_encode_header(&d, re);
            CHECK_MSG(memcmp(re, b, WIRE_HEADER_SIZE) == 0,
                      "iteration %d: accepted header does not re-encode identically", iter);
        }
        free(b);
    }
    /* The generator reached every outcome, acceptance included. */
    for (int s = 0; s < WIRE_STATUS_COUNT; s++)
        CHECK_MSG(by_status[s] > 0, "fuzz never produced %s",
                  wire_status_name((enum wire_status)s));
    CHECK(accepted > 1000);
}

TEST(wire_ack_and_confirm_carry_no_payload, 10)
{
    for (uint8_t ty = WIRE_ACK; ty <= WIRE_CONFIRM; ty++) {
        wire_header_t h = good_header();
        h.type = ty;
        h.count = 0;
        uint8_t b[WIRE_HEADER_SIZE + 8];
        wire_encode_header(&h, b);
        wire_header_t d;
        CHECK_EQ_INT(wire_decode(b, WIRE_HEADER_SIZE, &d), WIRE_OK);
        CHECK_EQ_INT(d.type, ty);
        h.count = 2; /* an acknowledgement with a payload is malformed */
        wire_encode_header(&h, b);
        CHECK_EQ_INT(wire_decode(b, sizeof(b), &d), WIRE_BAD_LENGTH);
    }
}
