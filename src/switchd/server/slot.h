/*
 * slot.h - one aggregation slot of the switchml protocol (SwitchML Algorithm 3), as pure
 * state: no sockets, no clocks. The dataplane feeds it validated contributions and acts on
 * the verdict; the tests drive it with scripted packet sequences.
 *
 * A slot has two copies (pool versions 0 and 1). Workers use a slot for successive rounds
 * 0, 1, 2, ... ; round r lives in copy r & 1. Each copy keeps the round it holds, how many
 * ranks contributed, which ones (a bitmap), and the running sum. The first contribution of a
 * round overwrites the copy, later ones add; when all ranks have contributed the copy is
 * complete and its result goes to every rank. A contribution for round r + 2 (the next use of
 * a copy) proves that its sender received round r + 1's result, which only exists once every
 * rank moved past round r: so a copy is reused only when every rank has its result.
 *
 * Where SwitchML tracks one version bit, this slot keeps the full 32-bit round number: a
 * delayed duplicate from two rounds ago (possible on a real network that reorders) is
 * recognised as stale instead of being added to the wrong round.
 */
#ifndef INAGG_SWITCH_SLOT_H
#define INAGG_SWITCH_SLOT_H

#include <stdint.h>

#include "lib/wire/wire.h"

typedef struct slot_copy {
    uint32_t round; /* round this copy holds */
    uint32_t count; /* contributions received; == world when complete */
    uint64_t seen; /* bit r set: rank r contributed to this round */
    uint32_t chunk; /* echoed back in the result */
    uint16_t n_elems; /* elements in this round */
    uint8_t dtype; /* enum wire_dtype of this round */
    uint8_t overflow; /* an int32 add wrapped around */
    uint8_t set; /* an upload round (WIRE_FLAG_SET), in-switch optimizer jobs */
    uint8_t held; /* a leaf switch's round: complete here, its partial sum sent upstream,
                          the upstream result not yet in (slot_upstream_result) */
    int16_t exp; /* block exponent every contribution must carry (fixed point) */
    int16_t next_exp; /* max of the contributions' look-ahead exponents */
    uint32_t *data; /* the sum: host order while open, network order once complete */
} slot_copy_t;

typedef struct slot {
    slot_copy_t copy[2];
} slot_t;

enum slot_verdict {
    SLOT_PARTIAL = 0, /* accepted; the round is still open */
    SLOT_COMPLETE, /* accepted and the round is now complete: send the result to all */
    SLOT_RESEND, /* duplicate for a complete round: send the result to the sender */
    SLOT_DUP_OPEN, /* duplicate for an open round: ignore */
    SLOT_STALE, /* a round older than the copy holds: ignore */
    SLOT_AHEAD, /* a round that cannot come yet (protocol violation): ignore */
    SLOT_MISMATCH, /* element count, dtype, exponent or upload flag differ within a round:
                         ignore */
    SLOT_HELD, /* duplicate for a round held for its upstream result: send the partial
                         sum upstream again (the sender's retransmission drives the leaf's) */
    SLOT_VERDICT_COUNT
};

const char *slot_verdict_name(enum slot_verdict v);

/* Set up an empty slot for `world` ranks whose copies sum into data0 and data1 (each as
 * many words as the job's elements per packet). */
void slot_init(slot_t *s, uint32_t world, uint32_t *data0, uint32_t *data1);

/* Apply a contribution whose header passed wire_decode() and the job's range checks
 * (rank < world, count <= elements per packet). payload_be holds h->count words. */
enum slot_verdict slot_contribute(slot_t *s, uint32_t world, const wire_header_t *h,
                                  const uint32_t *payload_be);

/* What slot_contribute would answer without looking at the payload: SLOT_STALE, SLOT_RESEND,
 * SLOT_DUP_OPEN or SLOT_AHEAD, or SLOT_PARTIAL when it would take the contribution (its
 * verdict may then still be SLOT_COMPLETE or SLOT_MISMATCH). Changes nothing: a compressed
 * job decodes only contributions the slot will take. */
enum slot_verdict slot_precheck(const slot_t *s, uint32_t world, const wire_header_t *h);

/* A leaf switch: the round that just completed here is held (its result is the upstream
 * switch's, not yet in). */
static inline void slot_hold(slot_t *s, uint32_t round) { s->copy[round & 1u].held = 1; }

/* A leaf switch: the upstream switch's result for a held round. SLOT_COMPLETE when it
 * replaces the held round's partial sum (payload_be: h->count words, network order; the
 * overflow flag and look-ahead exponent are the upstream's, the overflow ORed with ours);
 * SLOT_STALE when no round of that number is held (a duplicate or a late result: ignore);
 * SLOT_MISMATCH when its count, dtype or exponent differ from the round's. */
enum slot_verdict slot_upstream_result(slot_t *s, const wire_header_t *h,
                                       const uint32_t *payload_be);

/* The copy holding round `round` (the one a verdict refers to). */
static inline const slot_copy_t *slot_copy_of(const slot_t *s, uint32_t round)
{
    return &s->copy[round & 1u];
}

#endif /* INAGG_SWITCH_SLOT_H */
