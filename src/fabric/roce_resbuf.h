/*
 * roce_resbuf.h - the retransmission side of the RoCE transport, after AllReduce-Switch's
 * result buffer (PROTOCOL.md 13.4).
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
 * The worker's replay table remembers the PSNs each recent contribution went out with, so
 * that its first retransmission reuses them (as an RC requester's go-back-N does) and later
 * ones take new PSNs.
 *
 * Messages are named by a key made of their aggregation header's job, slot and round (the
 * same for a contribution and its result); roce_msg_key reads it.
 */
#ifndef INAGG_FABRIC_ROCE_RESBUF_H
#define INAGG_FABRIC_ROCE_RESBUF_H

#include <stdint.h>

#include "netio/roce_frame.h"

#define ROCE_RESBUF_ROWS 4u
#define ROCE_RESBUF_DEPTH 128u
#define ROCE_RESBUF_MAX_FRAMES (1u << 16) /* rows x depth at most */

/* What names a message: its aggregation header's job, slot and round, and its type. */
typedef struct roce_msg_key {
    uint64_t slot_round; /* slot << 32 | round */
    uint16_t job;
    uint8_t type;        /* enum wire_type */
} roce_msg_key_t;

/* The key of a message of len bytes starting with its inagg header at msg (at least the
 * header's bytes there). 0, or -1 when the bytes are not a valid inagg header. */
int roce_msg_key(const uint8_t *msg, uint32_t len, roce_msg_key_t *k);

static inline int roce_key_eq(const roce_msg_key_t *a, const roce_msg_key_t *b)
{
    return a->slot_round == b->slot_round && a->job == b->job && a->type == b->type;
}

typedef struct roce_resbuf_ent {
    uint32_t flow;  /* the owner flow + 1 (0: empty) */
    uint32_t seq;   /* the buffer's message number: frames of one message share it */
    roce_msg_key_t key;
    uint16_t idx, nf; /* this frame's place in its message, the message's frames */
    uint16_t len;
    uint8_t frame[ROCE_MAX_FRAME];
} roce_resbuf_ent_t;

typedef struct roce_resbuf {
    uint32_t rows, depth;
    uint32_t *head;         /* per row: the next entry to write */
    uint32_t next_seq;
    roce_resbuf_ent_t *ent; /* rows x depth */
} roce_resbuf_t;

/* rows x depth frames (0 x 0: none kept). 0 or -EINVAL (too many) / -ENOMEM. */
int roce_resbuf_init(roce_resbuf_t *b, uint32_t rows, uint32_t depth);
void roce_resbuf_free(roce_resbuf_t *b);

/* Start keeping a result message of nf frames: its sequence number, or 0 when it cannot be
 * kept (no buffer, or more frames than a row). */
uint32_t roce_resbuf_begin(roce_resbuf_t *b, uint32_t nf);

/* Keep frame idx (len bytes) of the message begun as seq (the frames in order, after
 * roce_resbuf_begin). */
void roce_resbuf_put(roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key, uint32_t seq,
                     uint32_t idx, uint32_t nf, const uint8_t *frame, uint32_t len);

/* The newest kept result of (flow, key), all its frames in order into out (room for max): the
 * number of frames, or 0 when none is kept whole (never kept, or overwritten). */
uint32_t roce_resbuf_find(const roce_resbuf_t *b, uint32_t flow, const roce_msg_key_t *key,
                          const roce_resbuf_ent_t **out, uint32_t max);

/* Write psn into a kept frame's BTH and its ICRC anew (a repeat answered on new PSNs). */
void roce_restamp_psn(uint8_t *frame, uint32_t len, uint32_t psn);

/* ---- the worker's replay table ---------------------------------------------------------- */

#define ROCE_REPLAY_SLOTS 256u

typedef struct roce_replay_ent {
    roce_msg_key_t key;
    uint32_t psn, len;
    uint8_t sends; /* 0: empty */
} roce_replay_ent_t;

typedef struct roce_replay {
    roce_replay_ent_t e[ROCE_REPLAY_SLOTS];
} roce_replay_t;

/* The first PSN for a contribution with key of len bytes: the one its previous sending used
 * (*replay = 1) when this is its first retransmission, else next_psn (*replay = 0; recorded). */
uint32_t roce_replay_psn(roce_replay_t *r, const roce_msg_key_t *key, uint32_t len,
                         uint32_t next_psn, int *replay);

#endif /* INAGG_FABRIC_ROCE_RESBUF_H */
