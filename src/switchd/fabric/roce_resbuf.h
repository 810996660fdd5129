/*
 * roce_resbuf.h - the switch's side of RoCE retransmission, after AllReduce-Switch's result
 * buffer (PROTOCOL.md 13.4); the fabric's aggregation port (port.h) keeps one per endpoint.
 *
 * The switch's result buffer keeps the result frames it sent on each aggregation flow, in R
 * rows of D frames (default 4 x 128, the paper's 512; a flow writes row flow % R), reused
 * cyclically. When the first frame of a contribution arrives again with a PSN the switch had
 * already taken (the sender's go-back-N retransmission, roce_flow.h's "repeat"), the switch
 * answers from the buffer, frame for frame, on the flow's next PSNs, without touching the
 * aggregation. A result that was overwritten since is counted as evicted and the repeat
 * dropped: the sender's next timeout recovers (with new PSNs, answered by the slot protocol's
 * kept result).
 *
 * Messages are named by their key (netio/roce_msgkey.h): the worker's replay table
 * (transport/roce_replay.h) reuses a contribution's PSNs by the same key.
 */
#ifndef INAGG_FABRIC_ROCE_RESBUF_H
#define INAGG_FABRIC_ROCE_RESBUF_H

#include <stdint.h>

#include "lib/netio/roce_frame.h"
#include "lib/netio/roce_msgkey.h"

#define ROCE_RESBUF_ROWS 4u
#define ROCE_RESBUF_DEPTH 128u
#define ROCE_RESBUF_MAX_FRAMES (1u << 16) /* rows x depth at most */

typedef struct roce_resbuf_ent {
    uint32_t flow; /* the owner flow + 1 (0: empty) */
    uint32_t seq; /* the buffer's message number: frames of one message share it */
    roce_msg_key_t key;
    uint16_t idx, nf; /* this frame's place in its message, the message's frames */
    uint16_t len;
    uint64_t sent_at; /* the frame queue position + 1 of the slot that sends this frame from
                         here (0: none); the entry is not reused until the queue has
                         released that slot */
    uint8_t frame[ROCE_MAX_FRAME];
} roce_resbuf_ent_t;

typedef struct roce_resbuf {
    uint32_t rows, depth;
    uint32_t *head; /* per row: the next entry to write */
    uint32_t next_seq;
    roce_resbuf_ent_t *ent; /* rows x depth */
} roce_resbuf_t;

/* rows x depth frames (0 x 0: none kept). 0 or -EINVAL (too many) / -ENOMEM. */
int roce_resbuf_init(roce_resbuf_t *b, uint32_t rows, uint32_t depth);
void roce_resbuf_free(roce_resbuf_t *b);

/* Start keeping a result message of nf frames: its sequence number, or 0 when it cannot be
 * kept (no buffer, or more frames than a row). */
uint32_t roce_resbuf_begin(roce_resbuf_t *b, uint32_t nf);

/* The entry that keeps frame idx of the message begun as seq (the frames in order, after
 * roce_resbuf_begin): the caller builds the frame in its `frame` (ROCE_MAX_FRAME bytes) and
 * sets its `len`, and may send it from there. sent_at is the position + 1 of the frame queue
 * slot that sends it from the entry (0: none does), released the slots that queue has
 * released. NULL when the row's next entry still holds a frame a queue has not sent
 * (e->sent_at > released): the message is then not kept whole, and its repeats are recovered
 * as evicted ones are. Building in place spares the copy that keeping a frame would cost. */
roce_resbuf_ent_t *roce_resbuf_claim(roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key,
                                     uint32_t seq, uint32_t idx, uint32_t nf, uint64_t sent_at,
                                     uint64_t released);

/* The newest kept result of (flow, key), all its frames in order into out (room for max): the
 * number of frames, or 0 when none is kept whole (never kept, or overwritten). */
uint32_t roce_resbuf_find(const roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key,
                          const roce_resbuf_ent_t **out, uint32_t max);

/* Write psn into a kept frame's BTH and its ICRC anew (a repeat answered on new PSNs). */
void roce_restamp_psn(uint8_t *frame, uint32_t len, uint32_t psn);

#endif /* INAGG_FABRIC_ROCE_RESBUF_H */
