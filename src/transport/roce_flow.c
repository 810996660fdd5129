/*
 * roce_flow.c - PSN check and message reassembly of one RoCE flow (see roce_flow.h).
 */
#include "transport/roce_flow.h"

#include <string.h>

static void abandon(roce_rx_flow_t *fl)
{
    if (fl->assembling)
        fl->abandoned++;
    fl->assembling = 0;
    fl->want = fl->got = 0;
}

enum roce_rx_verdict roce_rx_frame(roce_rx_flow_t *fl, const roce_frame_t *f)
{
    uint8_t op = f->h.opcode;
    int first = roce_op_is_first(op);
    if (!fl->synced) {
        if (!first)
            return ROCE_RX_NO_FIRST;
        fl->synced = 1;
        fl->epsn = f->h.psn;
        fl->first_psn = f->h.psn;
    }
    int32_t d = roce_psn_diff(f->h.psn, fl->epsn);
    if (d > (int32_t)ROCE_PSN_WINDOW || d < -(int32_t)ROCE_PSN_WINDOW)
        return ROCE_RX_WINDOW;
    if (d < 0)
        return ROCE_RX_DUP;
    if (d > 0 && !first) {
        abandon(fl);
        return ROCE_RX_GAP;
    }
    fl->epsn = roce_psn_add(f->h.psn, 1);
    if (first) {
        abandon(fl);
        if (f->h.dma_len > fl->cap)
            return ROCE_RX_TOO_BIG;
        fl->assembling = 1;
        fl->want = f->h.dma_len;
    } else if (!fl->assembling) {
        return ROCE_RX_NO_FIRST;
    }
    if (fl->got + f->payload_len > fl->want) {
        abandon(fl);
        return ROCE_RX_LENGTH;
    }
    memcpy(fl->buf + fl->got, f->payload, f->payload_len);
    fl->got += f->payload_len;
    if (!roce_op_is_last(op))
        return ROCE_RX_MORE;
    if (fl->got != fl->want) {
        abandon(fl);
        return ROCE_RX_LENGTH;
    }
    fl->assembling = 0;
    return ROCE_RX_DONE;
}

const char *roce_rx_verdict_name(enum roce_rx_verdict v)
{
    static const char *const names[ROCE_RX_VERDICT_COUNT] = {
        "more", "done", "psn_duplicate", "psn_gap", "psn_window", "no_first", "too_big",
        "length"};
    return (unsigned)v < ROCE_RX_VERDICT_COUNT ? names[v] : "unknown";
}
