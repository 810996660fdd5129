/*
 * proto_p4sgd.c - the p4sgd protocol on the switch (PROTOCOL.md section 9): one copy per slot
 * (p4slot.c), results acknowledged by every rank and the slot confirmed before it is reused.
 *
 * Confirmations travel two ways. When acknowledgements ride on contributions (results are
 * flowing), each rank's confirmation waits in a ring (one per dataplane thread and rank) and
 * rides back on that rank's next result from this thread. Otherwise, or when a ring is full,
 * it goes on its own to where the rank's acknowledgements come from.
 */
#include <stdlib.h>

#include "switchd/server/job.h"
#include "switchd/server/p4slot.h"

/* A confirmation waiting to ride on the next result to a rank (wire.h, piggyback). */
typedef struct p4_confirm {
    uint32_t slot, round;
} p4_confirm_t;

/* A ring of p4_confirm_t per (dataplane thread, rank); one thread writes it. */
typedef struct p4_confirm_ring {
    uint32_t head, count;
} p4_confirm_ring_t;

typedef struct p4sgd_job {
    p4slot_t *slots; /* [nslots] */
    uint32_t *arena; /* nslots * (world + 1) * elems words: a row per rank
                                         and the result */
    transport_addr_t *ack_addrs; /* [slot * world + rank]: where confirmations go (the
                                         source of the last acknowledgement), so they need
                                         not wake a worker that waits for a result on its
                                         other endpoint */
    p4_confirm_ring_t *confirm_rings; /* [thread * world + rank] */
    p4_confirm_t *confirm_items; /* [(thread * world + rank) * nslots + i] */
} p4sgd_job_t;

static uint64_t p4sgd_pool_bytes(uint32_t world, uint32_t nslots, uint32_t elems, uint32_t nthreads)
{
    return (uint64_t)nslots * (sizeof(p4slot_t) + ((uint64_t)world + 1u) * elems * 4u +
                               (uint64_t)world * (sizeof(transport_addr_t) +
                                                  (uint64_t)nthreads * sizeof(p4_confirm_t)));
}

static void p4sgd_destroy(void *state)
{
    p4sgd_job_t *s = state;
    free(s->slots);
    free(s->arena);
    free(s->ack_addrs);
    free(s->confirm_rings);
    free(s->confirm_items);
    free(s);
}

static void *p4sgd_create(const job_t *j)
{
    p4sgd_job_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    size_t rings = (size_t)j->nthreads * j->world;
    s->slots = calloc(j->nslots, sizeof(p4slot_t));
    s->arena = calloc((size_t)j->nslots * (j->world + 1u) * j->elems, sizeof(uint32_t));
    s->ack_addrs = calloc((size_t)j->nslots * j->world, sizeof(transport_addr_t));
    s->confirm_rings = calloc(rings, sizeof(p4_confirm_ring_t));
    s->confirm_items = calloc(rings * j->nslots, sizeof(p4_confirm_t));
    if (!s->slots || !s->arena || !s->ack_addrs || !s->confirm_rings || !s->confirm_items) {
        p4sgd_destroy(s);
        return NULL;
    }
    for (uint32_t i = 0; i < j->nslots; i++) {
        uint32_t *d = s->arena + (size_t)i * (j->world + 1u) * j->elems;
        p4slot_init(&s->slots[i], d, d + (size_t)j->world * j->elems);
    }
    return s;
}

/* The next confirmation queued for `rank` on this thread, or 0 (then *out is untouched). */
static int pop_confirm(const proto_ctx_t *x, uint32_t rank, p4_confirm_t *out)
{
    const p4sgd_job_t *s = x->state;
    size_t ring = (size_t)x->thread * x->job->world + rank;
    p4_confirm_ring_t *r = &s->confirm_rings[ring];
    if (r->count == 0)
        return 0;
    *out = s->confirm_items[ring * x->job->nslots + r->head];
    r->head = (r->head + 1) % x->job->nslots;
    r->count--;
    return 1;
}

/* Queue a confirmation for `rank`; 0 if its ring is full (then send one on its own). */
static int push_confirm(const proto_ctx_t *x, uint32_t rank, uint32_t slot, uint32_t round)
{
    const p4sgd_job_t *s = x->state;
    uint32_t nslots = x->job->nslots;
    size_t ring = (size_t)x->thread * x->job->world + rank;
    p4_confirm_ring_t *r = &s->confirm_rings[ring];
    if (r->count == nslots)
        return 0;
    s->confirm_items[ring * nslots + (r->head + r->count) % nslots] = (p4_confirm_t){slot, round};
    r->count++;
    return 1;
}

/* Every result carries a waiting confirmation for its rank, if there is one. */
static void p4sgd_result_header(proto_ctx_t *x, wire_header_t *h)
{
    p4_confirm_t cf;
    if (!pop_confirm(x, h->rank, &cf))
        return;
    wire_put_piggyback(h, cf.slot, cf.round);
    STAT_ADD(x->c->v[STAT_CONFIRMS_SENT], 1);
    STAT_ADD(x->c->v[STAT_CONFIRMS_PIGGYBACKED], 1);
}

/* One result for every rank (multicast): alike when no rank has a confirmation waiting on
 * this thread, or when every rank's next is the same one (the ranks acknowledge in step). */
static int p4sgd_result_header_shared(proto_ctx_t *x, wire_header_t *h)
{
    const p4sgd_job_t *s = x->state;
    uint32_t world = x->job->world, nslots = x->job->nslots;
    const p4_confirm_ring_t *rings = &s->confirm_rings[(size_t)x->thread * world];
    const p4_confirm_t *first = NULL;
    for (uint32_t r = 0; r < world; r++) {
        if ((rings[r].count == 0) != (rings[0].count == 0))
            return 0;
        if (rings[r].count == 0)
            continue;
        const p4_confirm_t *c =
            &s->confirm_items[((size_t)x->thread * world + r) * nslots + rings[r].head];
        if (first && (c->slot != first->slot || c->round != first->round))
            return 0;
        first = first ? first : c;
    }
    if (!first)
        return 1;
    p4_confirm_t cf = *first, taken;
    for (uint32_t r = 0; r < world; r++)
        (void)pop_confirm(x, r, &taken);
    wire_put_piggyback(h, cf.slot, cf.round);
    STAT_ADD(x->c->v[STAT_CONFIRMS_SENT], world);
    STAT_ADD(x->c->v[STAT_CONFIRMS_PIGGYBACKED], world);
    return 1;
}

static void send_confirm(proto_ctx_t *x, const p4slot_t *s, uint32_t slot, uint32_t round,
                         uint32_t rank, const transport_addr_t *to)
{
    wire_header_t h = {
        .version = INAGG_PROTOCOL_VERSION,
        .type = WIRE_CONFIRM,
        .job = x->job->id,
        .rank = (uint16_t)rank,
        .token = x->job->token,
        .slot = slot,
        .round = round,
        .flags = wire_ver_of_round(round),
        .dtype = s->dtype,
    };
    dp_send(x, &h, NULL, to);
    STAT_ADD(x->c->v[STAT_CONFIRMS_SENT], 1);
    STAT_ADD(x->c->v[STAT_BYTES_OUT], job_header_bytes(x->job));
}

static const proto_verdict_t verdicts[P4V_VERDICT_COUNT] = {
    [P4V_PARTIAL] = {PROTO_PARTIAL, 0, PROTO_SEEN_ACCEPTED},
    [P4V_COMPLETE] = {PROTO_COMPLETE, 0, PROTO_SEEN_ACCEPTED},
    [P4V_RESEND_RESULT] = {PROTO_RESEND, 0, PROTO_SEEN_NONE},
    [P4V_DUP_OPEN] = {PROTO_DROP, DROP_DUP_OPEN, PROTO_SEEN_WAITING},
    [P4V_ACKED] = {PROTO_DONE, 0, PROTO_SEEN_ACCEPTED},
    [P4V_CONFIRMED] = {PROTO_DONE, 0, PROTO_SEEN_ACCEPTED},
    [P4V_RESEND_CONFIRM] = {PROTO_DONE, 0, PROTO_SEEN_NONE},
    [P4V_DUP_ACK] = {PROTO_DROP, DROP_DUP_ACK, PROTO_SEEN_WAITING},
    [P4V_STALE] = {PROTO_DROP, DROP_STALE, PROTO_SEEN_NONE},
    [P4V_AHEAD] = {PROTO_DROP, DROP_AHEAD, PROTO_SEEN_NONE},
    [P4V_MISMATCH] = {PROTO_DROP, DROP_MISMATCH, PROTO_SEEN_NONE},
    [P4V_HELD] = {PROTO_UP_AGAIN, 0, PROTO_SEEN_WAITING},
    [P4V_UP_ACK_AGAIN] = {PROTO_DONE, 0, PROTO_SEEN_WAITING},
};

/* A leaf switch: acknowledge round `round` of `slot` upstream (first, or again when a rank
 * repeats its acknowledgement while the upstream confirmation is outstanding). */
static void ack_upstream(proto_ctx_t *x, const p4slot_t *s, uint32_t slot, uint32_t round)
{
    wire_header_t h = {
        .type = WIRE_ACK,
        .slot = slot,
        .round = round,
        .flags = wire_ver_of_round(round),
        .dtype = s->dtype,
    };
    dp_send_upstream(x, &h, NULL);
    STAT_ADD(x->c->v[STAT_UP_ACKS], 1);
}

/* Where rank `rank`'s confirmations of `slot` go: where its acknowledgements come from, or
 * where its results go if it only ever piggybacked. */
static const transport_addr_t *confirm_addr(const proto_ctx_t *x, uint32_t slot, uint32_t rank)
{
    const p4sgd_job_t *st = x->state;
    size_t k = (size_t)slot * x->job->world + rank;
    return transport_addr_is_set(&st->ack_addrs[k]) ? &st->ack_addrs[k] : &x->job->addrs[k];
}

/* Confirm round `round` of `slot` to every rank on its own (to where each rank's
 * acknowledgements come from). */
static void confirm_all(proto_ctx_t *x, const p4slot_t *s, uint32_t slot, uint32_t round)
{
    for (uint32_t r = 0; r < x->job->world; r++)
        send_confirm(x, s, slot, round, r, confirm_addr(x, slot, r));
}

/* Apply an acknowledgement of `slot` (standalone, or carried by a contribution:
 * `piggybacked`, whose sender is then best reached with the results). The rank's first
 * standalone one that the slot accepted says where its confirmations of the slot go; no
 * other does (a replay must not move them). */
static void ack(proto_ctx_t *x, const wire_header_t *h, int piggybacked, proto_outcome_t *out)
{
    const job_t *j = x->job;
    p4sgd_job_t *st = x->state;
    p4slot_t *s = &st->slots[h->slot];
    enum p4slot_verdict v = p4slot_ack(s, j->world, h);
    proto_verdict(out, &verdicts[v]);
    transport_addr_t *ack_to = &st->ack_addrs[(size_t)h->slot * j->world + h->rank];
    if (!piggybacked && out->seen == PROTO_SEEN_ACCEPTED && !transport_addr_is_set(ack_to))
        *ack_to = *x->from;
    if (v == P4V_ACKED || v == P4V_CONFIRMED)
        STAT_ADD(x->c->v[STAT_ACKS], 1);
    if (v == P4V_CONFIRMED) {
        for (uint32_t r = 0; r < j->world; r++) {
            /* Acknowledgements riding on contributions mean results are flowing: the
             * confirmations ride back on them. Otherwise (or when a ring is full) they go
             * on their own to where each rank's acknowledgements come from. */
            if (piggybacked && push_confirm(x, r, h->slot, h->round))
                continue;
            send_confirm(x, s, h->slot, h->round, r, confirm_addr(x, h->slot, r));
        }
    } else if (v == P4V_UP_ACK_AGAIN) {
        ack_upstream(x, s, h->slot, h->round);
    } else if (v == P4V_RESEND_CONFIRM) {
        send_confirm(x, s, h->slot, h->round, h->rank, confirm_addr(x, h->slot, h->rank));
        STAT_ADD(x->c->v[STAT_CONFIRM_RESENDS], 1);
    }
}

static void result_of(const p4slot_t *s, proto_outcome_t *out);

/* Contributions (maybe carrying an acknowledgement) and acknowledgements. */
static void p4sgd_handle(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                         proto_outcome_t *out)
{
    const job_t *j = x->job;
    p4sgd_job_t *st = x->state;
    if (h->type == WIRE_ACK) {
        ack(x, h, 0, out);
        return;
    }
    wire_header_t a = *h;
    /* An acknowledgement riding on this contribution (wire.h). Applied first, so its
     * confirmations can ride on this very round's results. Optimizer jobs use `chunk` for
     * the chunk index and send acknowledgements on their own. */
    if (!j->opt && wire_get_piggyback(h, &a.slot, &a.round)) {
        a.type = WIRE_ACK;
        a.count = 0;
        if (a.slot < j->nslots && job_slot_owner(j, a.slot) == x->thread) {
            ack(x, &a, 1, out);
            if (out->action == PROTO_DROP)
                STAT_ADD(x->c->v[out->drop], 1);
        } else {
            STAT_ADD(x->c->v[DROP_BAD_SLOT], 1);
        }
    }
    p4slot_t *s = &st->slots[h->slot];
    enum p4slot_verdict v = p4slot_contribute(s, j->world, j->elems, h, payload);
    proto_verdict(out, &verdicts[v]);
    if (out->action == PROTO_COMPLETE && j->up.on) {
        p4slot_hold(s); /* a leaf: the round's result is the upstream's */
        out->action = PROTO_UP_SEND;
    }
    if (out->action != PROTO_COMPLETE && out->action != PROTO_RESEND &&
        out->action != PROTO_UP_SEND && out->action != PROTO_UP_AGAIN)
        return;
    result_of(s, out);
}

/* A leaf switch: the upstream result of a held round (acknowledged upstream at once, and
 * given to every rank), or the upstream confirmation (which, with every rank's
 * acknowledgement, confirms the round to every rank). */
static void p4sgd_upstream(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                           proto_outcome_t *out)
{
    p4sgd_job_t *st = x->state;
    p4slot_t *s = &st->slots[h->slot];
    out->action = PROTO_DROP;
    out->drop = DROP_UP_STALE;
    if (h->type == WIRE_RESULT) {
        enum p4slot_verdict v = p4slot_upstream_result(s, h, payload);
        if (v == P4V_MISMATCH)
            out->drop = DROP_MISMATCH;
        if (v != P4V_COMPLETE)
            return;
        ack_upstream(x, s, h->slot, h->round);
        out->action = PROTO_UP_DONE;
        result_of(s, out);
        return;
    }
    enum p4slot_verdict v = p4slot_upstream_confirm(s, x->job->world, h);
    if (v == P4V_STALE)
        return;
    STAT_ADD(x->c->v[STAT_UP_CONFIRMS], 1);
    out->action = PROTO_DONE;
    if (v == P4V_CONFIRMED)
        confirm_all(x, s, h->slot, h->round);
}

static void result_of(const p4slot_t *s, proto_outcome_t *out)
{
    out->set = s->set;
    out->chunk = s->chunk;
    out->data = s->result;
    out->result = (wire_header_t){
        .round = s->round,
        .count = s->n_elems,
        .flags = (uint8_t)(wire_ver_of_round(s->round) | (s->overflow ? WIRE_FLAG_OVERFLOW : 0)),
        .dtype = s->dtype,
    };
}

const switch_proto_ops_t proto_p4sgd = {
    .name = "p4sgd",
    .id = INAGG_PROTO_P4SGD,
    .accepts = (1u << WIRE_CONTRIB) | (1u << WIRE_ACK),
    .float_native = 1, /* float32 added natively, in rank order */
    .stats = (1ull << STAT_ACKS) | (1ull << STAT_CONFIRMS_SENT) |
             (1ull << STAT_CONFIRMS_PIGGYBACKED) | (1ull << STAT_CONFIRM_RESENDS),
    .pool_bytes = p4sgd_pool_bytes,
    .create = p4sgd_create,
    .destroy = p4sgd_destroy,
    .handle = p4sgd_handle,
    .result_header = p4sgd_result_header,
    .result_header_shared = p4sgd_result_header_shared,
    .upstream = p4sgd_upstream,
};
