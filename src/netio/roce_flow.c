/*
 * roce_flow.c - PSN check and message reassembly of one RoCE flow (see roce_flow.h).
 */
#include "netio/roce_flow.h"

#include <string.h>

#include "base/util.h"

static void abandon(roce_rx_flow_t *fl)
{
    if (fl->assembling)
        fl->abandoned++;
    fl->assembling = 0;
    fl->want = fl->got = 0;
}

static int delivered(const roce_rx_flow_t *fl, uint32_t psn)
{
    return fl->done_psn[psn % ROCE_RX_DONE_SLOTS] == psn + 1;
}

enum roce_rx_verdict roce_rx_frame(roce_rx_flow_t *fl, const roce_frame_t *f)
{
    uint8_t op = f->h.opcode;
    uint32_t psn = f->h.psn;
    int first = roce_op_is_first(op);
    if (!fl->synced) {
        if (!first)
            return ROCE_RX_NO_FIRST;
        fl->synced = 1;
        fl->epsn = psn;
        fl->first_psn = psn;
    }
    int32_t d = roce_psn_diff(psn, fl->epsn);
    if (d > (int32_t)ROCE_PSN_WINDOW || d < -(int32_t)ROCE_PSN_WINDOW)
        return ROCE_RX_WINDOW;
    if (first) {
        if (d < 0 && delivered(fl, psn)) {
            fl->repeat_psn = psn;
            return ROCE_RX_REPEAT;
        }
        abandon(fl);
        if (d >= 0)
            fl->epsn = roce_psn_add(psn, 1);
        if (f->h.dma_len > fl->cap)
            return ROCE_RX_TOO_BIG;
        fl->assembling = 1;
        fl->want = f->h.dma_len;
        fl->msg_psn = psn;
        fl->resent = d < 0;
    } else if (fl->assembling && psn == fl->anext) {
        if (d >= 0)
            fl->epsn = roce_psn_add(psn, 1);
    } else if (d < 0) {
        return ROCE_RX_DUP;
    } else if (d > 0) {
        abandon(fl);
        return ROCE_RX_GAP;
    } else {
        abandon(fl); /* a frame at epsn that continues no message (or not the one resent) */
        fl->epsn = roce_psn_add(psn, 1);
        return ROCE_RX_NO_FIRST;
    }
    fl->anext = roce_psn_add(psn, 1);
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
    fl->done_psn[fl->msg_psn % ROCE_RX_DONE_SLOTS] = fl->msg_psn + 1;
    return ROCE_RX_DONE;
}

const char *roce_rx_verdict_name(enum roce_rx_verdict v)
{
    static const char *const names[ROCE_RX_VERDICT_COUNT] = {
        "more",     "done",    "psn_duplicate", "psn_gap", "psn_window",
        "no_first", "too_big", "length",        "repeat"};
    return util_name_of(names, ROCE_RX_VERDICT_COUNT, (unsigned)v);
}
