/* slot.c - the switchml slot state machine (see slot.h for the protocol). */
#include "switchd/server/slot.h"

#include <string.h>

#include "lib/kernels/vec.h"

static const char *const verdict_names[SLOT_VERDICT_COUNT] = {
    [SLOT_PARTIAL] = "partial",   [SLOT_COMPLETE] = "complete", [SLOT_RESEND] = "resend",
    [SLOT_DUP_OPEN] = "dup_open", [SLOT_STALE] = "stale",       [SLOT_AHEAD] = "ahead",
    [SLOT_MISMATCH] = "mismatch", [SLOT_HELD] = "held",
};

const char *slot_verdict_name(enum slot_verdict v)
{
    return (unsigned)v < SLOT_VERDICT_COUNT ? verdict_names[v] : "unknown";
}

void slot_init(slot_t *s, uint32_t world, uint32_t *data0, uint32_t *data1)
{
    /* Both copies look complete, holding rounds -2 and -1, so round 0 starts copy 0. */
    for (int v = 0; v < 2; v++) {
        slot_copy_t *c = &s->copy[v];
        c->round = (uint32_t)(v - 2);
        c->count = world;
        c->seen = world >= 64 ? ~0ull : (1ull << world) - 1; /* complete: every rank seen */
        c->chunk = 0;
        c->n_elems = 0;
        c->dtype = WIRE_INT32;
        c->overflow = 0;
        c->held = 0;
        c->exp = 0;
        c->next_exp = 0;
        c->data = v == 0 ? data0 : data1;
    }
}

static void start_round(slot_copy_t *c, const wire_header_t *h, const uint32_t *payload_be)
{
    c->round = h->round;
    c->count = 0;
    c->seen = 0;
    c->chunk = h->chunk;
    c->n_elems = h->count;
    c->dtype = h->dtype;
    c->overflow = 0;
    c->held = 0;
    c->set = (h->flags & WIRE_FLAG_SET) != 0;
    c->exp = h->exp;
    c->next_exp = h->next_exp;
    if (h->dtype == WIRE_FLOAT32)
        vec_be_to_f32(payload_be, (float *)c->data, h->count);
    else
        vec_be_load_i32((int32_t *)c->data, payload_be, h->count);
}

static enum slot_verdict add_to_round(slot_copy_t *c, const wire_header_t *h,
                                      const uint32_t *payload_be)
{
    if (h->count != c->n_elems || h->dtype != c->dtype ||
        (h->dtype == WIRE_FIXED32 && h->exp != c->exp) ||
        ((h->flags & WIRE_FLAG_SET) != 0) != c->set)
        return SLOT_MISMATCH;
    if (h->dtype == WIRE_FLOAT32)
        vec_be_add_f32((float *)c->data, payload_be, h->count);
    else
        c->overflow |= (uint8_t)vec_be_add_i32((int32_t *)c->data, payload_be, h->count);
    /* The exponent sentinels are INT16_MIN (all zero) and INT16_MAX (non-finite), so the
     * plain maximum combines them correctly. */
    if (h->next_exp > c->next_exp)
        c->next_exp = h->next_exp;
    return SLOT_PARTIAL;
}

/* A round every rank can have the result of: complete, and not held for an upstream result. */
static int done(const slot_copy_t *c, uint32_t world) { return c->count == world && !c->held; }

/* A rank's repeated contribution to the round c holds. */
static enum slot_verdict dup_verdict(const slot_copy_t *c, uint32_t world)
{
    if (c->count < world)
        return SLOT_DUP_OPEN;
    return c->held ? SLOT_HELD : SLOT_RESEND;
}

enum slot_verdict slot_precheck(const slot_t *s, uint32_t world, const wire_header_t *h)
{
    const slot_copy_t *c = &s->copy[h->round & 1u];
    const slot_copy_t *other = &s->copy[(h->round & 1u) ^ 1u];
    int32_t ahead = (int32_t)(h->round - c->round);
    if (ahead < 0)
        return SLOT_STALE;
    if (ahead == 0)
        return (c->seen & (1ull << h->rank)) ? dup_verdict(c, world) : SLOT_PARTIAL;
    if (ahead != 2 || !done(c, world) || other->round != h->round - 1u || !done(other, world))
        return SLOT_AHEAD;
    return SLOT_PARTIAL;
}

enum slot_verdict slot_contribute(slot_t *s, uint32_t world, const wire_header_t *h,
                                  const uint32_t *payload_be)
{
    slot_copy_t *c = &s->copy[h->round & 1u];
    const slot_copy_t *other = &s->copy[(h->round & 1u) ^ 1u];
    uint64_t bit = 1ull << h->rank;
    int32_t ahead = (int32_t)(h->round - c->round); /* even: same pool version */

    if (ahead < 0)
        return SLOT_STALE;
    if (ahead == 0) {
        if (c->seen & bit)
            return dup_verdict(c, world);
        enum slot_verdict v = add_to_round(c, h, payload_be);
        if (v != SLOT_PARTIAL)
            return v;
    } else {
        /* Next use of this copy: its last round and the round before this one (held by the
         * other copy) must both be complete, or the sender skipped ahead. */
        if (ahead != 2 || !done(c, world) || other->round != h->round - 1u || !done(other, world))
            return SLOT_AHEAD;
        start_round(c, h, payload_be);
    }
    c->seen |= bit;
    c->count++;
    if (c->count < world)
        return SLOT_PARTIAL;
    vec_bswap32_inplace(c->data, c->n_elems); /* publish in network order */
    return SLOT_COMPLETE;
}

enum slot_verdict slot_upstream_result(slot_t *s, const wire_header_t *h,
                                       const uint32_t *payload_be)
{
    slot_copy_t *c = &s->copy[h->round & 1u];
    if (c->round != h->round || !c->held)
        return SLOT_STALE;
    if (h->count != c->n_elems || h->dtype != c->dtype ||
        (h->dtype == WIRE_FIXED32 && h->exp != c->exp))
        return SLOT_MISMATCH;
    memcpy(c->data, payload_be, (size_t)h->count * 4u); /* stays in network order */
    c->overflow |= (uint8_t)((h->flags & WIRE_FLAG_OVERFLOW) != 0);
    c->next_exp = h->next_exp;
    c->held = 0;
    return SLOT_COMPLETE;
}
