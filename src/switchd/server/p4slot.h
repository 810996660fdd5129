/*
 * p4slot.h - one aggregation slot of the p4sgd protocol (P4SGD Algorithm 2), as pure state:
 * no sockets, no clocks. The dataplane feeds it validated contributions and acknowledgements
 * and acts on the verdict; the tests drive it with scripted packet sequences.
 *
 * A slot has ONE copy. Workers use it for successive rounds 0, 1, 2, ... ; a round has two
 * phases:
 *   aggregation   contributions are collected (a bitmap finds duplicates); on the last one the
 *                 result goes to every rank at once: one round trip on the critical path.
 *   acknowledge   each rank acknowledges the result it received (retransmitting until the
 *                 switch confirms); a retransmitted contribution gets the result again. When
 *                 every rank has acknowledged, the switch confirms to all and the slot moves
 *                 to the next round; a rank reuses the slot only after that confirmation.
 *
 * Where P4SGD's registers hold no round number, this slot keeps the full 32-bit round, and
 * packets carry theirs: a delayed duplicate from an earlier round is recognised as stale
 * instead of being added to the round that reuses the slot. An acknowledgement for the round
 * just confirmed (its confirmation was lost) gets the confirmation again.
 *
 * Each rank's contribution is kept in its own row and the rows are summed in rank order when
 * the last one arrives, so a float32 result does not depend on arrival order (reproducible
 * run to run, and the same on every rank); int32 sums are exact in any order anyway.
 */
#ifndef INAGG_SWITCH_P4SLOT_H
#define INAGG_SWITCH_P4SLOT_H

#include <stdint.h>

#include "lib/wire/wire.h"

enum p4slot_phase {
    P4_AGGREGATING = 0,
    P4_ACKING = 1,
    P4_UPSTREAM = 2, /* a leaf switch: every rank contributed, the partial sum went upstream,
                        the upstream result is not yet in */
};

typedef struct p4slot {
    uint32_t round; /* round this slot serves */
    uint8_t phase; /* enum p4slot_phase */
    uint8_t dtype; /* enum wire_dtype of this round (set by its first contribution) */
    uint8_t overflow; /* an int32 add wrapped around */
    uint8_t set; /* an upload round (WIRE_FLAG_SET), in-switch optimizer jobs */
    uint8_t up_wait; /* a leaf switch in P4_ACKING: the upstream switch has not confirmed
                           the round yet, so the slot may not move on */
    uint16_t n_elems; /* elements in this round */
    uint32_t chunk; /* echoed back in the result */
    uint32_t agg_count, ack_count;
    uint64_t agg_bm, ack_bm;
    uint32_t *rows; /* [world][elems] contributions, host order */
    uint32_t *result; /* [elems] the sum in network order, valid in P4_ACKING */
} p4slot_t;

enum p4slot_verdict {
    P4V_PARTIAL = 0, /* contribution accepted; the round is still open */
    P4V_COMPLETE, /* contribution accepted and the round is complete: result to all */
    P4V_RESEND_RESULT, /* contribution for a complete round: result to the sender */
    P4V_DUP_OPEN, /* duplicate contribution to an open round: ignore */
    P4V_ACKED, /* acknowledgement accepted; others still missing */
    P4V_CONFIRMED, /* last acknowledgement: confirmation to all, slot moved on */
    P4V_RESEND_CONFIRM, /* acknowledgement of the round just confirmed: confirm to sender */
    P4V_DUP_ACK, /* duplicate acknowledgement of an unconfirmed round: ignore */
    P4V_STALE, /* a round already finished: ignore */
    P4V_AHEAD, /* a round or phase that cannot come yet (protocol violation) */
    P4V_MISMATCH, /* element count, dtype or upload flag differ within a round */
    P4V_HELD, /* a leaf's round waiting upstream, repeated: send it upstream again */
    P4V_UP_ACK_AGAIN, /* a leaf's round waiting for the upstream confirmation, repeated
                            acknowledgement: acknowledge upstream again */
    P4V_VERDICT_COUNT
};

const char *p4slot_verdict_name(enum p4slot_verdict v);

/* Set up an empty slot at round 0. rows holds world * elems words, result elems words. */
void p4slot_init(p4slot_t *s, uint32_t *rows, uint32_t *result);

/* Apply a WIRE_CONTRIB whose header passed wire_decode() and the job's range checks
 * (rank < world, count <= elems). payload_be holds h->count words. */
enum p4slot_verdict p4slot_contribute(p4slot_t *s, uint32_t world, uint32_t elems,
                                      const wire_header_t *h, const uint32_t *payload_be);

/* Apply a WIRE_ACK (same checks). On P4V_CONFIRMED and P4V_RESEND_CONFIRM the confirmation
 * carries h->round. */
enum p4slot_verdict p4slot_ack(p4slot_t *s, uint32_t world, const wire_header_t *h);

/* A leaf switch (PROTOCOL.md "Hierarchy"): the round that just completed here waits for the
 * upstream switch's result (its partial sum, in `result`, goes upstream). */
static inline void p4slot_hold(p4slot_t *s) { s->phase = P4_UPSTREAM; }

/* The upstream result of the held round: P4V_COMPLETE when it becomes the round's result
 * (then P4_ACKING, waiting for the upstream confirmation as well as the ranks'
 * acknowledgements), P4V_MISMATCH when its count or dtype differ, P4V_STALE otherwise (a
 * repeated or late result: ignore). */
enum p4slot_verdict p4slot_upstream_result(p4slot_t *s, const wire_header_t *h,
                                           const uint32_t *payload_be);
/* The upstream confirmation of the round: P4V_CONFIRMED when every rank had acknowledged it
 * too (the slot moves on: confirm to every rank), P4V_ACKED when some have not yet (the last
 * acknowledgement confirms), P4V_STALE for a repeated or late one. */
enum p4slot_verdict p4slot_upstream_confirm(p4slot_t *s, uint32_t world, const wire_header_t *h);

#endif /* INAGG_SWITCH_P4SLOT_H */
