/*
 * roce_frame.c - RoCE v1 RDMA Write frames: writing, parsing with its checks, the ICRC
 * (see roce_frame.h). CRC-32 by ISA-L (libisal).
 */
#include "lib/netio/roce_frame.h"

#include <isa-l/crc.h>
#include <string.h>

#include "lib/base/util.h"

/* ISA-L's crc32_gzip_refl is the reflected CRC-32 of zlib and of the ICRC, folded with
 * carry-less multiplies (about 15x the table-driven loop this file had: the ICRC was a fifth
 * of the fabric's time at 1 Gbit/s). It takes and returns the value after the final
 * inversion; this interface carries the register between calls, hence the inversions. */
uint32_t roce_crc32_update(uint32_t crc, const uint8_t *p, uint32_t n)
{
    return ~crc32_gzip_refl(~crc, p, n);
}

uint32_t roce_icrc(const uint8_t *grh, uint32_t len)
{
    static const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    uint8_t m[ROCE_GRH_LEN + ROCE_BTH_LEN];
    uint32_t n = len < sizeof(m) ? len : (uint32_t)sizeof(m);
    memcpy(m, grh, n);
    if (n == sizeof(m)) {
        m[0] |= 0x0f; /* traffic class (high nibble of byte 0 is the version) */
        m[1] = 0xff; /* traffic class low nibble, flow label */
        m[2] = 0xff;
        m[3] = 0xff;
        m[7] = 0xff; /* hop limit */
        m[ROCE_GRH_LEN + 4] = 0xff; /* BTH resv8a */
    }
    uint32_t crc = roce_crc32_update(0xffffffffu, lrh, sizeof(lrh));
    crc = roce_crc32_update(crc, m, n);
    crc = roce_crc32_update(crc, grh + n, len - n);
    return ~crc;
}

static void put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static void put24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16);
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v)
{
    put16(p, v >> 16);
    put16(p + 2, v);
}
static uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t get24(const uint8_t *p) { return (uint32_t)p[0] << 16 | get16(p + 1); }
static uint32_t get32(const uint8_t *p) { return get16(p) << 16 | get16(p + 2); }

static uint32_t ext_len(uint8_t op)
{
    uint32_t n = 0;
    if (op == ROCE_WRITE_FIRST || op == ROCE_WRITE_ONLY || op == ROCE_WRITE_ONLY_IMM)
        n += ROCE_RETH_LEN;
    if (roce_op_has_imm(op))
        n += ROCE_IMM_LEN;
    return n;
}

uint32_t roce_header_len(uint8_t opcode)
{
    return ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN + ext_len(opcode);
}

uint32_t roce_write_frame(uint8_t *buf, const roce_hdr_t *h, const void *a, uint32_t alen,
                          const void *b, uint32_t blen)
{
    uint32_t pay = alen + blen, pad = (4u - (pay & 3u)) & 3u;
    uint32_t ext = ext_len(h->opcode);
    uint8_t *p = buf;
    memcpy(p, h->dst_mac, 6);
    memcpy(p + 6, h->src_mac, 6);
    put16(p + 12, ROCE_ETHERTYPE);
    uint8_t *g = p + ROCE_ETH_LEN;
    g[0] = (uint8_t)(0x60 | (h->tclass >> 4));
    g[1] = (uint8_t)((h->tclass & 0x0f) << 4 | ((h->flow >> 16) & 0x0f));
    put16(g + 2, h->flow & 0xffff);
    put16(g + 4, ROCE_BTH_LEN + ext + pay + pad + ROCE_ICRC_LEN);
    g[6] = ROCE_GRH_NEXT_HDR;
    g[7] = h->hop_limit;
    memcpy(g + 8, h->sgid, 16);
    memcpy(g + 24, h->dgid, 16);
    uint8_t *t = g + ROCE_GRH_LEN;
    t[0] = h->opcode;
    t[1] = (uint8_t)(pad << 4); /* SE 0, M 0, pad, transport header version 0 */
    put16(t + 2, h->pkey);
    t[4] = 0;
    put24(t + 5, h->qp & ROCE_QP_MASK);
    t[8] = h->ack_req ? 0x80 : 0;
    put24(t + 9, h->psn & ROCE_PSN_MASK);
    uint8_t *x = t + ROCE_BTH_LEN;
    if (ext >= ROCE_RETH_LEN) {
        put32(x, (uint32_t)(h->va >> 32));
        put32(x + 4, (uint32_t)h->va);
        put32(x + 8, h->rkey);
        put32(x + 12, h->dma_len);
        x += ROCE_RETH_LEN;
    }
    if (roce_op_has_imm(h->opcode)) {
        put32(x, h->imm);
        x += ROCE_IMM_LEN;
    }
    if (alen)
        memcpy(x, a, alen);
    if (blen)
        memcpy(x + alen, b, blen);
    memset(x + pay, 0, pad);
    uint8_t *ic = x + pay + pad;
    uint32_t crc = roce_icrc(g, (uint32_t)(ic - g));
    ic[0] = (uint8_t)crc;
    ic[1] = (uint8_t)(crc >> 8);
    ic[2] = (uint8_t)(crc >> 16);
    ic[3] = (uint8_t)(crc >> 24);
    return (uint32_t)(ic + ROCE_ICRC_LEN - buf);
}

enum roce_reason roce_parse(const uint8_t *f, uint32_t len, int check_icrc, roce_frame_t *out)
{
    roce_hdr_t *h = &out->h;
    out->payload = NULL;
    out->payload_len = 0;
    if (len < ROCE_ETH_LEN)
        return ROCE_TRUNCATED;
    memcpy(h->dst_mac, f, 6);
    memcpy(h->src_mac, f + 6, 6);
    if (get16(f + 12) != ROCE_ETHERTYPE)
        return ROCE_NOT_ROCE;
    if (len < ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN + ROCE_ICRC_LEN)
        return ROCE_TRUNCATED;
    const uint8_t *g = f + ROCE_ETH_LEN;
    if ((g[0] >> 4) != 6 || g[6] != ROCE_GRH_NEXT_HDR)
        return ROCE_BAD_GRH;
    h->tclass = (uint8_t)((g[0] & 0x0f) << 4 | g[1] >> 4);
    h->flow = (uint32_t)(g[1] & 0x0f) << 16 | get16(g + 2);
    h->hop_limit = g[7];
    memcpy(h->sgid, g + 8, 16);
    memcpy(h->dgid, g + 24, 16);
    uint32_t paylen = get16(g + 4), room = len - ROCE_ETH_LEN - ROCE_GRH_LEN;
    if (paylen > room || paylen < ROCE_BTH_LEN + ROCE_ICRC_LEN)
        return ROCE_TRUNCATED;
    if (paylen < room)
        return ROCE_BAD_LENGTH;
    const uint8_t *t = g + ROCE_GRH_LEN;
    h->opcode = t[0];
    h->pkey = (uint16_t)get16(t + 2);
    h->qp = get24(t + 5);
    h->ack_req = t[8] >> 7;
    h->psn = get24(t + 9);
    h->va = 0;
    h->rkey = h->dma_len = h->imm = 0;
    if ((t[1] & 0x0f) != 0)
        return ROCE_BAD_BTH;
    if (!roce_op_is_write(h->opcode))
        return ROCE_NOT_WRITE;
    uint32_t ext = ext_len(h->opcode), pad = (t[1] >> 4) & 3u;
    if (paylen < ROCE_BTH_LEN + ext + pad + ROCE_ICRC_LEN)
        return ROCE_TRUNCATED;
    const uint8_t *x = t + ROCE_BTH_LEN;
    if (ext >= ROCE_RETH_LEN) {
        h->va = (uint64_t)get32(x) << 32 | get32(x + 4);
        h->rkey = get32(x + 8);
        h->dma_len = get32(x + 12);
        x += ROCE_RETH_LEN;
    }
    if (roce_op_has_imm(h->opcode)) {
        h->imm = get32(x);
        x += ROCE_IMM_LEN;
    }
    uint32_t pay = paylen - ROCE_BTH_LEN - ext - pad - ROCE_ICRC_LEN;
    uint8_t op = h->opcode;
    int ok;
    if (op == ROCE_WRITE_FIRST || op == ROCE_WRITE_MIDDLE)
        ok = roce_mtu_valid(pay) && pad == 0; /* which MTU: the flow holds a message to one */
    else if (op == ROCE_WRITE_LAST || op == ROCE_WRITE_LAST_IMM)
        ok = pay >= 1 && pay <= ROCE_MTU_MAX;
    else
        ok = pay <= ROCE_MTU_MAX;
    if (!ok)
        return ROCE_BAD_PAYLOAD;
    if (check_icrc) {
        const uint8_t *ic = g + ROCE_GRH_LEN + paylen - ROCE_ICRC_LEN;
        uint32_t want =
            (uint32_t)ic[0] | (uint32_t)ic[1] << 8 | (uint32_t)ic[2] << 16 | (uint32_t)ic[3] << 24;
        if (roce_icrc(g, (uint32_t)(ic - g)) != want)
            return ROCE_BAD_ICRC;
    }
    out->payload = x;
    out->payload_len = pay;
    return ROCE_OK;
}

const char *roce_reason_name(enum roce_reason r)
{
    static const char *const names[ROCE_REASON_COUNT] = {"ok",        "not_roce",    "truncated",
                                                         "bad_grh",   "bad_length",  "bad_bth",
                                                         "not_write", "bad_payload", "bad_icrc"};
    return util_name_of(names, ROCE_REASON_COUNT, (unsigned)r);
}

const char *roce_opcode_name(uint8_t op)
{
    switch (op) {
        case ROCE_WRITE_FIRST: return "write_first";
        case ROCE_WRITE_MIDDLE: return "write_middle";
        case ROCE_WRITE_LAST: return "write_last";
        case ROCE_WRITE_LAST_IMM: return "write_last_imm";
        case ROCE_WRITE_ONLY: return "write_only";
        case ROCE_WRITE_ONLY_IMM: return "write_only_imm";
        default: return "other";
    }
}

uint32_t roce_mtu_for_link(uint32_t if_mtu)
{
    uint32_t over = ROCE_GRH_LEN + ROCE_BTH_LEN + ROCE_RETH_LEN + ROCE_IMM_LEN + ROCE_ICRC_LEN;
    for (uint32_t mtu = ROCE_MTU_MAX; mtu > ROCE_MTU_MIN; mtu /= 2)
        if (mtu + over <= if_mtu)
            return mtu;
    return ROCE_MTU_MIN;
}

double roce_payload_efficiency(uint8_t opcode, uint32_t mtu, uint32_t agg_header)
{
    uint32_t pay = mtu, data = roce_op_is_first(opcode) ? mtu - agg_header : pay;
    return (double)data / (double)(roce_header_len(opcode) + pay + ROCE_ICRC_LEN);
}

double roce_message_efficiency(uint32_t msg_len, uint32_t mtu, uint32_t data_bytes,
                               uint32_t *frames)
{
    uint32_t nf = roce_frames_for(msg_len, mtu);
    uint64_t total = 0;
    for (uint32_t i = 0; i < nf; i++) {
        uint8_t op = nf == 1       ? ROCE_WRITE_ONLY
                     : i == 0      ? ROCE_WRITE_FIRST
                     : i + 1 == nf ? ROCE_WRITE_LAST
                                   : ROCE_WRITE_MIDDLE;
        uint32_t pay = msg_len - i * mtu < mtu ? msg_len - i * mtu : mtu;
        total += roce_header_len(op) + pay + ((4u - (pay & 3u)) & 3u) + ROCE_ICRC_LEN;
    }
    *frames = nf;
    return total ? (double)data_bytes / (double)total : 0;
}
