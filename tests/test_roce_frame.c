/*
 * test_roce_frame.c - RoCE v1 framing (src/lib/netio/roce_frame.c): the ICRC against a
 * known-answer frame and against a bitwise CRC-32 written here from the specification (not the
 * project's function) on random frames; every opcode written and parsed back; PSN arithmetic
 * across the 24-bit wrap; truncated, padded, corrupted and foreign frames refused with their
 * reason.
 */
#include <string.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/netio/roce_frame.h"

#define TEST_MTU ROCE_MTU_DEFAULT /* the path MTU most cases here frame */

/* A Write Only frame (QP 0x123, PSN 0xfffffe, A bit, RETH va 0x1122334455667788 rkey
 * 0xdeadbeef length 8, payload "01234567", traffic class 0x12, flow label 0x34567, hop limit
 * 64) whose every byte, ICRC included, was computed outside this project: Python's
 * zlib.crc32 over 8 bytes of 0xff, the GRH with traffic class, flow label and hop limit set to
 * ones, the BTH with resv8a set to ones, the rest; as the Linux rxe driver and Scapy's RoCE
 * layer mask them. ICRC 0x29ef6810, stored least significant byte first. */
static const uint8_t kat[94] = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x89, 0x15, 0x61, 0x23,
    0x45, 0x67, 0x00, 0x28, 0x1b, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x0a, 0x00, 0xff, 0xff, 0x00, 0x00, 0x01, 0x23, 0x80, 0xff,
    0xff, 0xfe, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00,
    0x00, 0x08, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x10, 0x68, 0xef, 0x29,
};

static roce_hdr_t kat_hdr(void)
{
    roce_hdr_t h;
    memset(&h, 0, sizeof(h));
    static const uint8_t d[6] = {2, 0, 0, 0, 0, 2}, s[6] = {2, 0, 0, 0, 0, 1};
    memcpy(h.dst_mac, d, 6);
    memcpy(h.src_mac, s, 6);
    h.sgid[0] = h.dgid[0] = 0xfe;
    h.sgid[1] = h.dgid[1] = 0x80;
    h.sgid[15] = 1;
    h.dgid[15] = 2;
    h.tclass = 0x12;
    h.flow = 0x34567;
    h.hop_limit = 64;
    h.opcode = ROCE_WRITE_ONLY;
    h.pkey = 0xffff;
    h.qp = 0x123;
    h.psn = 0xfffffe;
    h.ack_req = 1;
    h.va = 0x1122334455667788ull;
    h.rkey = 0xdeadbeef;
    h.dma_len = 8;
    return h;
}

/* The specification's CRC-32, one bit at a time, over an explicitly masked copy. */
static uint32_t ref_crc_bitwise(const uint8_t *p, size_t n, uint32_t crc)
{
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return crc;
}

static uint32_t ref_icrc(const uint8_t *frame, uint32_t len)
{
    static uint8_t buf[8 + 9216];
    uint32_t n = len - 14 - 4; /* GRH to the ICRC */
    memset(buf, 0xff, 8);
    memcpy(buf + 8, frame + 14, n);
    uint8_t *g = buf + 8;
    g[0] = (uint8_t)(0x60 | 0x0f); /* version 6, traffic class ones */
    g[1] = g[2] = g[3] = 0xff; /* traffic class, flow label */
    g[7] = 0xff; /* hop limit */
    g[40 + 4] = 0xff; /* BTH resv8a */
    return ~ref_crc_bitwise(buf, 8 + n, 0xffffffffu);
}

static uint32_t stored_icrc(const uint8_t *f, uint32_t len)
{
    const uint8_t *c = f + len - 4;
    return (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
}

TEST(roce_icrc_known_answer, 10)
{
    roce_hdr_t h = kat_hdr();
    uint8_t buf[ROCE_MAX_FRAME];
    uint32_t n = roce_write_frame(buf, &h, "0123", 4, "4567", 4);
    CHECK_EQ_INT(n, sizeof(kat));
    for (uint32_t i = 0; i < n; i++)
        CHECK_MSG(buf[i] == kat[i], "byte %u: %02x, known answer %02x", i, buf[i], kat[i]);
    CHECK_EQ_INT(stored_icrc(kat, sizeof(kat)), 0x29ef6810u);
    CHECK_EQ_INT(ref_icrc(kat, sizeof(kat)), 0x29ef6810u);
    roce_frame_t f;
    CHECK_EQ_INT(roce_parse(kat, sizeof(kat), 1, &f), ROCE_OK);
    CHECK(f.h.qp == 0x123 && f.h.psn == 0xfffffe && f.h.ack_req == 1 && f.h.rkey == 0xdeadbeef);
    CHECK(f.h.va == 0x1122334455667788ull && f.h.dma_len == 8 && f.h.tclass == 0x12);
    CHECK(f.h.flow == 0x34567 && f.h.hop_limit == 64 && f.payload_len == 8);
    CHECK(memcmp(f.payload, "01234567", 8) == 0);
    /* the variant fields do not change the ICRC: a router may rewrite them */
    uint8_t v[sizeof(kat)];
    memcpy(v, kat, sizeof(kat));
    v[14] = 0x6f;
    v[15] = 0xff;
    v[16] = 0x00;
    v[17] = 0x00;
    v[21] = 1;
    v[58] = 0xc0;
    CHECK_EQ_INT(roce_parse(v, sizeof(v), 1, &f), ROCE_OK);
    /* an invariant one does */
    memcpy(v, kat, sizeof(kat));
    v[22] ^= 1; /* SGID */
    CHECK_EQ_INT(roce_parse(v, sizeof(v), 1, &f), ROCE_BAD_ICRC);
    CHECK_EQ_INT(roce_parse(v, sizeof(v), 0, &f), ROCE_OK);
}

TEST(roce_icrc_agrees_with_bitwise_reference, 20)
{
    uint64_t rng = 0x5eed;
    static const uint8_t ops[] = {ROCE_WRITE_FIRST,    ROCE_WRITE_MIDDLE, ROCE_WRITE_LAST,
                                  ROCE_WRITE_LAST_IMM, ROCE_WRITE_ONLY,   ROCE_WRITE_ONLY_IMM};
    static uint8_t pay[TEST_MTU];
    uint8_t buf[ROCE_MAX_FRAME];
    for (int it = 0; it < 3000; it++) {
        roce_hdr_t h;
        uint8_t *hb = (uint8_t *)&h;
        for (size_t i = 0; i < sizeof(h); i++)
            hb[i] = (uint8_t)util_splitmix64(&rng);
        h.opcode = ops[util_splitmix64(&rng) % 6];
        h.flow &= 0xfffff;
        h.qp &= ROCE_QP_MASK;
        h.psn &= ROCE_PSN_MASK;
        h.ack_req &= 1;
        uint32_t len = TEST_MTU;
        if (h.opcode == ROCE_WRITE_LAST || h.opcode == ROCE_WRITE_LAST_IMM)
            len = 1 + (uint32_t)(util_splitmix64(&rng) % TEST_MTU);
        else if (roce_op_is_last(h.opcode))
            len = (uint32_t)(util_splitmix64(&rng) % (TEST_MTU + 1));
        for (uint32_t i = 0; i < len; i++)
            pay[i] = (uint8_t)util_splitmix64(&rng);
        uint32_t split = len ? (uint32_t)(util_splitmix64(&rng) % len) : 0;
        uint32_t n = roce_write_frame(buf, &h, pay, split, pay + split, len - split);
        CHECK_EQ_INT(n, roce_header_len(h.opcode) + len + ((4 - len % 4) % 4) + 4);
        CHECK_MSG(stored_icrc(buf, n) == ref_icrc(buf, n), "frame %d (%s, %u bytes)", it,
                  roce_opcode_name(h.opcode), len);
        roce_frame_t f;
        CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_OK);
        CHECK(f.payload_len == len && memcmp(f.payload, pay, len) == 0);
        CHECK(f.h.opcode == h.opcode && f.h.qp == h.qp && f.h.psn == h.psn);
        CHECK(f.h.ack_req == h.ack_req && f.h.pkey == h.pkey);
        if (roce_op_is_first(h.opcode))
            CHECK(f.h.va == h.va && f.h.rkey == h.rkey && f.h.dma_len == h.dma_len);
        if (roce_op_has_imm(h.opcode))
            CHECK(f.h.imm == h.imm);
        /* one flipped bit anywhere after the Ethernet header but outside the masked fields
         * is caught by the ICRC or by an earlier check */
        uint32_t at = 14 + (uint32_t)(util_splitmix64(&rng) % (n - 14));
        int masked = at == 14 || at == 15 || at == 16 || at == 17 || at == 21 || at == 58;
        buf[at] ^= (uint8_t)(1u << (util_splitmix64(&rng) % 8));
        if (at == 14)
            masked = (buf[14] >> 4) == 6; /* the version nibble is invariant */
        enum roce_reason r = roce_parse(buf, n, 1, &f);
        if (!masked)
            CHECK_MSG(r != ROCE_OK, "flip at %u of frame %d accepted", at, it);
    }
}

TEST(roce_every_opcode_and_sizes, 10)
{
    static uint8_t pay[ROCE_MTU_MAX + 1];
    for (uint32_t i = 0; i < sizeof(pay); i++)
        pay[i] = (uint8_t)(i * 7);
    uint8_t buf[ROCE_MAX_FRAME + 8];
    roce_frame_t f;
    struct {
        uint8_t op;
        uint32_t len;
        enum roce_reason want;
    } cases[] = {
        {ROCE_WRITE_FIRST, TEST_MTU, ROCE_OK},
        {ROCE_WRITE_FIRST, 1000, ROCE_BAD_PAYLOAD},
        {ROCE_WRITE_MIDDLE, TEST_MTU, ROCE_OK},
        {ROCE_WRITE_MIDDLE, 4, ROCE_BAD_PAYLOAD},
        {ROCE_WRITE_LAST, 1, ROCE_OK},
        {ROCE_WRITE_LAST, TEST_MTU, ROCE_OK},
        {ROCE_WRITE_LAST, 0, ROCE_BAD_PAYLOAD},
        {ROCE_WRITE_LAST_IMM, 333, ROCE_OK},
        {ROCE_WRITE_ONLY, 0, ROCE_OK},
        {ROCE_WRITE_ONLY, 1021, ROCE_OK},
        {ROCE_WRITE_ONLY_IMM, TEST_MTU, ROCE_OK},
        /* First and Middle carry one of InfiniBand's path MTUs, whichever the sender chose */
        {ROCE_WRITE_FIRST, 256, ROCE_OK},
        {ROCE_WRITE_FIRST, 4096, ROCE_OK},
        {ROCE_WRITE_MIDDLE, 2048, ROCE_OK},
        {ROCE_WRITE_FIRST, 3072, ROCE_BAD_PAYLOAD},
        {ROCE_WRITE_MIDDLE, 128, ROCE_BAD_PAYLOAD},
        {ROCE_WRITE_LAST, 4096, ROCE_OK},
        {ROCE_WRITE_LAST, 4097, ROCE_BAD_PAYLOAD},
        {ROCE_WRITE_ONLY, 4096, ROCE_OK},
        {ROCE_WRITE_ONLY, 4097, ROCE_BAD_PAYLOAD},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        roce_hdr_t h = kat_hdr();
        h.opcode = cases[c].op;
        h.imm = 0xabcdef01;
        uint32_t n = roce_write_frame(buf, &h, pay, cases[c].len, NULL, 0);
        enum roce_reason r = roce_parse(buf, n, 1, &f);
        CHECK_MSG(r == cases[c].want, "%s with %u bytes: %s, expected %s",
                  roce_opcode_name(cases[c].op), cases[c].len, roce_reason_name(r),
                  roce_reason_name(cases[c].want));
        if (r == ROCE_OK) {
            CHECK_EQ_INT(f.payload_len, cases[c].len);
            CHECK(memcmp(f.payload, pay, cases[c].len) == 0);
            CHECK_EQ_INT(f.h.opcode, cases[c].op);
            CHECK_EQ_INT(f.h.imm, roce_op_has_imm(cases[c].op) ? 0xabcdef01u : 0);
            CHECK_EQ_INT(roce_header_len(cases[c].op),
                         14 + 40 + 12 + (roce_op_is_first(cases[c].op) ? 16 : 0) +
                             (roce_op_has_imm(cases[c].op) ? 4 : 0));
        }
    }
    /* a Send (opcode 0x04) is RoCE but not a Write: its fields are still read for forwarding */
    roce_hdr_t h = kat_hdr();
    h.opcode = 0x04;
    uint32_t n = roce_write_frame(buf, &h, pay, 8, NULL, 0);
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_NOT_WRITE);
    CHECK(f.h.qp == 0x123 && f.h.psn == 0xfffffe);
    CHECK(strcmp(roce_opcode_name(ROCE_WRITE_LAST_IMM), "write_last_imm") == 0);
    /* Table IV's payload efficiency: a 20-byte header gives the paper's numbers */
    CHECK(roce_payload_efficiency(ROCE_WRITE_FIRST, TEST_MTU, 20) > 0.904 &&
          roce_payload_efficiency(ROCE_WRITE_FIRST, TEST_MTU, 20) < 0.906);
    CHECK(roce_payload_efficiency(ROCE_WRITE_MIDDLE, TEST_MTU, 20) > 0.935 &&
          roce_payload_efficiency(ROCE_WRITE_MIDDLE, TEST_MTU, 20) < 0.937);
    CHECK(roce_payload_efficiency(ROCE_WRITE_LAST_IMM, TEST_MTU, 20) > 0.932 &&
          roce_payload_efficiency(ROCE_WRITE_LAST_IMM, TEST_MTU, 20) < 0.934);
}

TEST(roce_path_mtu_from_the_link, 10)
{
    /* the largest of 256..4096 whose frame (GRH 40, BTH 12, RETH 16, immediate 4, ICRC 4
     * around the payload) fits the interface's MTU */
    static const uint32_t cases[][2] = {{9000, 4096}, {4172, 4096}, {4171, 2048},
                                        {1500, 1024}, {1100, 1024}, {1099, 512},
                                        {588, 512},   {587, 256},   {68, 256}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK_MSG(roce_mtu_for_link(cases[i][0]) == cases[i][1], "link MTU %u: %u, expected %u",
                  cases[i][0], roce_mtu_for_link(cases[i][0]), cases[i][1]);
    CHECK(roce_mtu_valid(256) && roce_mtu_valid(4096) && !roce_mtu_valid(3072) &&
          !roce_mtu_valid(128) && !roce_mtu_valid(8192) && !roce_mtu_valid(0));
    /* a packet of 2048 int32 and its 36-byte header: 9 frames at 1024, 3 at 4096 */
    uint32_t nf;
    double e1 = roce_message_efficiency(36 + 8192, 1024, 8192, &nf);
    CHECK_EQ_INT(nf, 9);
    double e4 = roce_message_efficiency(36 + 8192, 4096, 8192, &nf);
    CHECK_EQ_INT(nf, 3);
    CHECK(e4 > e1 && e4 > 0.96 && e4 < 0.98);
}

TEST(roce_truncated_and_malformed_frames, 10)
{
    uint8_t buf[ROCE_MAX_FRAME + 8];
    roce_frame_t f;
    roce_hdr_t h = kat_hdr();
    h.opcode = ROCE_WRITE_FIRST;
    static uint8_t pay[TEST_MTU];
    uint32_t n = roce_write_frame(buf, &h, pay, TEST_MTU, NULL, 0);
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_OK);
    for (uint32_t cut = 0; cut < n; cut++) {
        enum roce_reason r = roce_parse(buf, cut, 1, &f);
        CHECK_MSG(r == ROCE_TRUNCATED, "cut to %u: %s", cut, roce_reason_name(r));
    }
    buf[n] = 0;
    CHECK_EQ_INT(roce_parse(buf, n + 1, 1, &f), ROCE_BAD_LENGTH);
    buf[12] = 0x08;
    buf[13] = 0x00;
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_NOT_ROCE);
    buf[12] = 0x89;
    buf[13] = 0x15;
    buf[14] = 0x41; /* IP version 4 */
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_BAD_GRH);
    buf[14] = 0x61;
    buf[20] = 0x11; /* next header UDP */
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_BAD_GRH);
    buf[20] = 0x1b;
    buf[55] = 0x01; /* transport header version 1 */
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_BAD_BTH);
    buf[55] = 0x00;
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_OK);
    buf[n - 1] ^= 0x80;
    CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_BAD_ICRC);
    /* a pad count larger than the payload it pads */
    h.opcode = ROCE_WRITE_ONLY;
    n = roce_write_frame(buf, &h, pay, 0, NULL, 0);
    buf[55] = 0x30;
    CHECK(roce_parse(buf, n, 0, &f) != ROCE_OK);
    for (int r = 0; r <= ROCE_REASON_COUNT; r++)
        CHECK(roce_reason_name((enum roce_reason)r)[0] != 0);
}

TEST(roce_psn_wraps, 10)
{
    CHECK_EQ_INT(roce_psn_add(0xffffff, 1), 0);
    CHECK_EQ_INT(roce_psn_add(0xfffffe, 5), 3);
    CHECK_EQ_INT(roce_psn_diff(3, 0xfffffe), 5);
    CHECK_EQ_INT(roce_psn_diff(0xfffffe, 3), -5);
    CHECK_EQ_INT(roce_psn_diff(0x7fffff, 0), 0x7fffff);
    CHECK_EQ_INT(roce_psn_diff(0x800000, 0), -0x800000);
    CHECK_EQ_INT(roce_psn_diff(10, 10), 0);
    /* the PSN field carries 24 bits through a frame at the wrap */
    uint8_t buf[ROCE_MAX_FRAME];
    roce_frame_t f;
    for (uint32_t psn = 0xfffffd; psn != 3; psn = roce_psn_add(psn, 1)) {
        roce_hdr_t h = kat_hdr();
        h.opcode = ROCE_WRITE_MIDDLE;
        h.psn = psn;
        static uint8_t pay[TEST_MTU];
        uint32_t n = roce_write_frame(buf, &h, pay, TEST_MTU, NULL, 0);
        CHECK_EQ_INT(roce_parse(buf, n, 1, &f), ROCE_OK);
        CHECK_EQ_INT(f.h.psn, psn);
    }
}
