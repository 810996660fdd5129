/* p4slot.c - the p4sgd slot state machine (see p4slot.h for the protocol). */
#include "switchd/server/p4slot.h"

#include <arpa/inet.h>
#include <string.h>

#include "lib/kernels/vec.h"

static const char *const verdict_names[P4V_VERDICT_COUNT] = {
    [P4V_PARTIAL] = "partial",
    [P4V_COMPLETE] = "complete",
    [P4V_RESEND_RESULT] = "resend_result",
    [P4V_DUP_OPEN] = "dup_open",
    [P4V_ACKED] = "acked",
    [P4V_CONFIRMED] = "confirmed",
    [P4V_RESEND_CONFIRM] = "resend_confirm",
    [P4V_DUP_ACK] = "dup_ack",
    [P4V_STALE] = "stale",
    [P4V_AHEAD] = "ahead",
    [P4V_MISMATCH] = "mismatch",
    [P4V_HELD] = "held",
    [P4V_UP_ACK_AGAIN] = "up_ack_again",
};

const char *p4slot_verdict_name(enum p4slot_verdict v)
{
    return (unsigned)v < P4V_VERDICT_COUNT ? verdict_names[v] : "unknown";
}

void p4slot_init(p4slot_t *s, uint32_t *rows, uint32_t *result)
{
    memset(s, 0, sizeof(*s));
    s->phase = P4_AGGREGATING;
    s->dtype = WIRE_INT32;
    s->rows = rows;
    s->result = result;
}

/* Sum the rows in rank order into the result, in network order. */
static void finish_round(p4slot_t *s, uint32_t world, uint32_t elems)
{
    uint32_t n = s->n_elems;
    if (s->dtype == WIRE_FLOAT32) {
        for (uint32_t i = 0; i < n; i++) {
            float acc;
            memcpy(&acc, &s->rows[i], 4);
            for (uint32_t r = 1; r < world; r++) {
                float v;
                memcpy(&v, &s->rows[(size_t)r * elems + i], 4);
                acc += v;
            }
            uint32_t bits;
            memcpy(&bits, &acc, 4);
            s->result[i] = htonl(bits);
        }
        return;
    }
    int overflow = 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t acc = 0;
        for (uint32_t r = 0; r < world; r++)
            acc += (int32_t)s->rows[(size_t)r * elems + i];
        if (acc > INT32_MAX || acc < INT32_MIN)
            overflow = 1;
        s->result[i] = htonl((uint32_t)acc); /* two's complement wrap, flagged */
    }
    s->overflow = (uint8_t)overflow;
}

enum p4slot_verdict p4slot_contribute(p4slot_t *s, uint32_t world, uint32_t elems,
                                      const wire_header_t *h, const uint32_t *payload_be)
{
    int32_t ahead = (int32_t)(h->round - s->round);
    if (ahead < 0)
        return P4V_STALE; /* the round was confirmed: every rank has its result */
    if (ahead > 0)
        return P4V_AHEAD; /* the sender cannot have had this round's slot confirmed */
    if (s->phase == P4_ACKING)
        return P4V_RESEND_RESULT;
    if (s->phase == P4_UPSTREAM)
        return P4V_HELD; /* every rank contributed: this one lost its result */
    uint64_t bit = 1ull << h->rank;
    if (s->agg_bm & bit)
        return P4V_DUP_OPEN;
    if (s->agg_count == 0) {
        s->n_elems = h->count;
        s->dtype = h->dtype;
        s->chunk = h->chunk;
        s->overflow = 0;
        s->set = (h->flags & WIRE_FLAG_SET) != 0;
    } else if (h->count != s->n_elems || h->dtype != s->dtype ||
               ((h->flags & WIRE_FLAG_SET) != 0) != s->set) {
        return P4V_MISMATCH;
    }
    vec_be_load_i32((int32_t *)(s->rows + (size_t)h->rank * elems), payload_be, h->count);
    s->agg_bm |= bit;
    if (++s->agg_count < world)
        return P4V_PARTIAL;
    finish_round(s, world, elems);
    s->phase = P4_ACKING;
    s->ack_bm = 0;
    s->ack_count = 0;
    return P4V_COMPLETE;
}

/* Every rank has the result: clear the slot for the next round. */
static void next_round(p4slot_t *s)
{
    s->round++;
    s->phase = P4_AGGREGATING;
    s->agg_bm = 0;
    s->agg_count = 0;
}

enum p4slot_verdict p4slot_ack(p4slot_t *s, uint32_t world, const wire_header_t *h)
{
    int32_t ahead = (int32_t)(h->round - s->round);
    if (ahead == -1)
        return P4V_RESEND_CONFIRM; /* its confirmation was lost */
    if (ahead < -1)
        return P4V_STALE;
    if (ahead > 0 || s->phase != P4_ACKING)
        return P4V_AHEAD; /* acknowledging a result that does not exist yet */
    uint64_t bit = 1ull << h->rank;
    if (s->ack_bm & bit)
        return s->up_wait ? P4V_UP_ACK_AGAIN : P4V_DUP_ACK;
    s->ack_bm |= bit;
    if (++s->ack_count < world || s->up_wait)
        return P4V_ACKED;
    next_round(s);
    return P4V_CONFIRMED;
}

enum p4slot_verdict p4slot_upstream_result(p4slot_t *s, const wire_header_t *h,
                                           const uint32_t *payload_be)
{
    if (h->round != s->round || s->phase != P4_UPSTREAM)
        return P4V_STALE;
    if (h->count != s->n_elems || h->dtype != s->dtype)
        return P4V_MISMATCH;
    memcpy(s->result, payload_be, (size_t)h->count * 4u);
    s->overflow |= (uint8_t)((h->flags & WIRE_FLAG_OVERFLOW) != 0);
    s->phase = P4_ACKING;
    s->ack_bm = 0;
    s->ack_count = 0;
    s->up_wait = 1;
    return P4V_COMPLETE;
}

enum p4slot_verdict p4slot_upstream_confirm(p4slot_t *s, uint32_t world, const wire_header_t *h)
{
    if (h->round != s->round || s->phase != P4_ACKING || !s->up_wait)
        return P4V_STALE;
    s->up_wait = 0;
    if (s->ack_count < world)
        return P4V_ACKED;
    next_round(s);
    return P4V_CONFIRMED;
}
