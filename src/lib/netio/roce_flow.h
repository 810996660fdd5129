/*
 * roce_flow.h - the receive side of one RoCE flow (one sender's QP): the PSN check and the
 * reassembly of an RDMA Write message from its frames. A pure state machine over parsed
 * frames (roce_frame.h); the `roce` transport keeps one per flow.
 *
 * PSN rules (a go-back-N responder without acknowledgements: the slot protocols' results are
 * the acknowledgement and their timers the retransmission):
 *  - the expected PSN (epsn) is set by the first frame of the first message seen;
 *  - a frame at epsn is accepted (a First or Only starts a message, abandoning an unfinished
 *    one; a Middle or Last continues the message in assembly);
 *  - a First or Only up to ROCE_PSN_WINDOW ahead starts a message too (the frames between were
 *    lost): the unfinished message, if any, is abandoned;
 *  - a First or Only behind epsn (up to the window) is a retransmission that reuses its PSNs
 *    (go-back-N): if the flow delivered the message that started at that PSN (the last
 *    ROCE_RX_DONE_SLOTS messages are remembered), it is a repeat, which the caller may answer
 *    from its result buffer (roce_resbuf.h); if not (the message was lost on its way), it
 *    starts the message again, whose Middle and Last frames are then taken at their PSNs
 *    behind epsn, which stays where it is;
 *  - another frame behind epsn (up to the window) is a duplicate; a Middle or Last ahead is a
 *    gap (its message can no longer complete, and is abandoned); anything further than the
 *    window either way is outside it. All three are dropped and counted by the caller.
 * Lengths: a message is the First's RETH DMA length (at most the flow's capacity); its frames
 * must fill it exactly, the Last ending at its end. The path MTU is the First frame's payload
 * (roce_parse admits InfiniBand's five): every Middle carries exactly that much, the Last at
 * most that much, so a sender may pick its MTU per QP as an RC requester does.
 */
#ifndef INAGG_NETIO_ROCE_FLOW_H
#define INAGG_NETIO_ROCE_FLOW_H

#include <stdint.h>

#include "lib/netio/roce_frame.h"

#define ROCE_PSN_WINDOW (1u << 20)
#define ROCE_RX_DONE_SLOTS 256u /* delivered messages remembered by their first PSN */

enum roce_rx_verdict {
    ROCE_RX_MORE = 0, /* accepted; the message is not complete yet */
    ROCE_RX_DONE, /* accepted; the message is complete in buf[0..len) */
    ROCE_RX_DUP, /* PSN behind the expected one: a duplicate */
    ROCE_RX_GAP, /* a Middle or Last ahead of the expected PSN: frames were lost */
    ROCE_RX_WINDOW, /* PSN further than ROCE_PSN_WINDOW from the expected one */
    ROCE_RX_NO_FIRST, /* a Middle or Last with no message in assembly */
    ROCE_RX_TOO_BIG, /* a First whose DMA length exceeds the flow's capacity */
    ROCE_RX_LENGTH, /* frames overrun the DMA length, the Last ends short of it, or a
                       Middle / Last does not keep to its First's path MTU */
    ROCE_RX_REPEAT, /* the First of a message delivered before, at its old PSN (repeat_psn) */
    ROCE_RX_VERDICT_COUNT
};

typedef struct roce_rx_flow {
    uint32_t epsn;
    uint8_t synced; /* epsn is set */
    uint8_t assembling; /* a message is in buf */
    uint32_t want, got; /* its DMA length and the bytes so far */
    uint32_t mtu; /* its path MTU: its First frame's payload */
    uint32_t path_mtu; /* the sender's path MTU as far as its messages tell: the First's
                          payload of its last message of several frames; before one, the
                          smallest MTU that holds its largest one-frame message (0: none) */
    uint8_t mtu_firm; /* path_mtu came from a message of several frames */
    uint32_t anext; /* the PSN its next frame must have */
    uint32_t msg_psn; /* the PSN of its first frame */
    uint8_t resent; /* it started behind epsn: a retransmission of a lost message */
    uint32_t repeat_psn; /* ROCE_RX_REPEAT: the repeated message's first PSN */
    uint32_t done_psn[ROCE_RX_DONE_SLOTS]; /* first PSN + 1 of delivered messages (0: none),
                                              at first PSN % ROCE_RX_DONE_SLOTS */
    uint32_t first_psn; /* the PSN of the first frame ever accepted (the flow's start) */
    uint64_t abandoned; /* messages started and never completed */
    uint8_t *buf; /* cap bytes, the caller's */
    uint32_t cap;
} roce_rx_flow_t;

/* Apply frame f to the flow. */
enum roce_rx_verdict roce_rx_frame(roce_rx_flow_t *fl, const roce_frame_t *f);

const char *roce_rx_verdict_name(enum roce_rx_verdict v);

#endif /* INAGG_NETIO_ROCE_FLOW_H */
