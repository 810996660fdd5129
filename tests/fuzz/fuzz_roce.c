/*
 * fuzz_roce.c - the RoCE v1 frame parser (src/lib/netio/roce_frame.c) and, behind it, one
 * flow's PSN check and reassembly (src/lib/netio/roce_flow.c). libFuzzer entry point; also
 * builds under AFL++ (afl-clang-fast -fsanitize=fuzzer).
 *
 * Input: frames, each a little-endian 16-bit length and that many bytes (at most 512 frames).
 * Every frame is parsed in a buffer of exactly its length (so ASan sees any read past it),
 * with and without the ICRC check. Checked: an accepted frame's payload lies inside it and has
 * the length its opcode allows; re-writing an accepted frame's fields and payload gives back
 * the same bytes apart from the fields the ICRC masks (and so the same ICRC); the flow never
 * delivers a message longer than its capacity or different from the frames' payloads; a
 * repeat names its own PSN; a valid frame given a new PSN (as the result buffer answers a
 * repeat) parses with a valid ICRC, that PSN and nothing else changed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/netio/roce_flow.h"
#include "lib/netio/roce_frame.h"
#include "switchd/fabric/roce_resbuf.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#define CAP (4u * ROCE_MTU_MAX)

static uint8_t flow_buf[CAP];
static uint8_t shadow[CAP]; /* what the flow should hold: the accepted payloads, in order */
static uint32_t shadow_len;

static void one_frame(roce_rx_flow_t *fl, const uint8_t *src, size_t len)
{
    uint8_t *f = malloc(len ? len : 1);
    if (!f)
        return;
    memcpy(f, src, len);
    roce_frame_t a, b;
    enum roce_reason r1 = roce_parse(f, (uint32_t)len, 1, &a);
    enum roce_reason r0 = roce_parse(f, (uint32_t)len, 0, &b);
    CHECK((unsigned)r1 < ROCE_REASON_COUNT && (unsigned)r0 < ROCE_REASON_COUNT);
    CHECK(r0 != ROCE_BAD_ICRC);
    CHECK(r1 == r0 || (r1 == ROCE_BAD_ICRC && r0 == ROCE_OK));
    if (r0 == ROCE_OK) {
        CHECK(b.payload >= f && b.payload + b.payload_len <= f + len);
        CHECK(b.payload_len <= ROCE_MTU_MAX);
        CHECK(roce_op_is_write(b.h.opcode));
        /* re-written from its fields, a frame our writer could have made (no SE/M bits, no
         * reserved bits, zero pad bytes) is the same where the ICRC looks */
        uint32_t pad = (f[55] >> 4) & 3u;
        int writable =
            (f[55] & 0xc0) == 0 && (f[62] & 0x7f) == 0 && pad == ((4u - (b.payload_len & 3u)) & 3u);
        for (uint32_t i = 0; i < pad; i++)
            writable &= b.payload[b.payload_len + i] == 0;
        uint8_t *w = writable ? malloc(ROCE_MAX_FRAME) : NULL;
        if (w) {
            uint32_t n = roce_write_frame(w, &b.h, b.payload, b.payload_len, NULL, 0);
            CHECK(n == len);
            uint32_t want = roce_icrc(f + ROCE_ETH_LEN, (uint32_t)len - ROCE_ETH_LEN - 4);
            uint32_t got = roce_icrc(w + ROCE_ETH_LEN, n - ROCE_ETH_LEN - 4);
            CHECK(want == got);
            free(w);
        }
    }
    if (r1 == ROCE_OK) {
        uint8_t *c = malloc(len);
        if (c) {
            memcpy(c, f, len);
            uint32_t psn = (a.h.psn * 2654435761u + 1u) & ROCE_PSN_MASK;
            roce_restamp_psn(c, (uint32_t)len, psn);
            roce_frame_t x;
            CHECK(roce_parse(c, (uint32_t)len, 1, &x) == ROCE_OK);
            CHECK(x.h.psn == psn && x.h.qp == a.h.qp && x.h.opcode == a.h.opcode);
            CHECK(x.payload_len == a.payload_len &&
                  memcmp(x.payload, a.payload, a.payload_len) == 0);
            free(c);
        }
        uint32_t before = fl->got;
        int assembling = fl->assembling;
        enum roce_rx_verdict v = roce_rx_frame(fl, &a);
        CHECK((unsigned)v < ROCE_RX_VERDICT_COUNT);
        if (v == ROCE_RX_REPEAT)
            CHECK(fl->repeat_psn == a.h.psn && roce_op_is_first(a.h.opcode));
        if (v == ROCE_RX_MORE || v == ROCE_RX_DONE) {
            if (roce_op_is_first(a.h.opcode) || !assembling)
                shadow_len = 0;
            else
                CHECK(before == shadow_len);
            CHECK(shadow_len + a.payload_len <= CAP);
            memcpy(shadow + shadow_len, a.payload, a.payload_len);
            shadow_len += a.payload_len;
        }
        if (v == ROCE_RX_DONE) {
            CHECK(fl->want <= CAP && fl->want == shadow_len);
            CHECK(memcmp(fl->buf, shadow, shadow_len) == 0);
        }
        CHECK(fl->got <= fl->cap);
    }
    free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    roce_rx_flow_t fl;
    memset(&fl, 0, sizeof(fl));
    fl.buf = flow_buf;
    fl.cap = CAP;
    shadow_len = 0;
    size_t off = 0;
    for (int k = 0; k < 512 && off + 2 <= size; k++) {
        size_t n = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        if (n > size - off)
            n = size - off;
        one_frame(&fl, data + off, n);
        off += n;
    }
    return 0;
}
