/*
 * roce_flow.c - PSN check and message reassembly of one RoCE flow (see roce_flow.h).
 */
#include "lib/netio/roce_flow.h"

#include <string.h>

#include "lib/base/util.h"

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

/* A message completed: what it tells of the sender's path MTU (roce_flow.h). */
static void learn_path_mtu(roce_rx_flow_t *fl)
{
    if (fl->got > fl->mtu) {
        fl->path_mtu = fl->mtu; /* frames of several: the First carried exactly one MTU */
        fl->mtu_firm = 1;
        return;
    }
    uint32_t m = ROCE_MTU_MIN;
    while (m < fl->got && m < ROCE_MTU_MAX)
        m *= 2;
    if (!fl->mtu_firm && m > fl->path_mtu)
        fl->path_mtu = m;
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
        fl->mtu = f->payload_len;
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
    int off_mtu =
        !first && (roce_op_is_last(op) ? f->payload_len > fl->mtu : f->payload_len != fl->mtu);
    if (off_mtu || fl->got + f->payload_len > fl->want) {
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
    learn_path_mtu(fl);
    return ROCE_RX_DONE;
}

const char *roce_rx_verdict_name(enum roce_rx_verdict v)
{
    static const char *const names[ROCE_RX_VERDICT_COUNT] = {
        "more",     "done",    "psn_duplicate", "psn_gap", "psn_window",
        "no_first", "too_big", "length",        "repeat"};
    return util_name_of(names, ROCE_RX_VERDICT_COUNT, (unsigned)v);
}
