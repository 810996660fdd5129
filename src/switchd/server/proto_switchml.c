/*
 * proto_switchml.c - the switchml protocol on the switch (PROTOCOL.md section 2): each slot
 * has two copies (slot.c), a round's result is the completed copy itself, already in network
 * order, and stays there until every rank has it, so results go out without a payload copy.
 * A compressed job's contributions are decoded to float32 before the slot sees them, and its
 * results are the sum re-encoded once per round (codecjob.h).
 */
#include <stdlib.h>

#include "lib/base/util.h"
#include "switchd/server/codecjob.h"
#include "switchd/server/job.h"
#include "switchd/server/slot.h"

typedef struct switchml_job {
    slot_t *slots; /* [nslots] */
    uint32_t *arena; /* the copies' sums: nslots * 2 * elems words */
} switchml_job_t;

static uint64_t switchml_pool_bytes(uint32_t world, uint32_t nslots, uint32_t elems,
                                    uint32_t nthreads)
{
    (void)world;
    (void)nthreads;
    return (uint64_t)nslots * (sizeof(slot_t) + 2u * (uint64_t)elems * 4u);
}

static void switchml_destroy(void *state)
{
    switchml_job_t *s = state;
    free(s->slots);
    free(s->arena);
    free(s);
}

static void *switchml_create(const job_t *j)
{
    switchml_job_t *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->slots = calloc(j->nslots, sizeof(slot_t));
    s->arena = calloc((size_t)j->nslots * 2u * j->elems, sizeof(uint32_t));
    if (!s->slots || !s->arena) {
        switchml_destroy(s);
        return NULL;
    }
    for (uint32_t i = 0; i < j->nslots; i++) {
        uint32_t *d = s->arena + (size_t)i * 2u * j->elems;
        slot_init(&s->slots[i], j->world, d, d + j->elems);
    }
    return s;
}

static const proto_verdict_t verdicts[SLOT_VERDICT_COUNT] = {
    [SLOT_PARTIAL] = {PROTO_PARTIAL, 0, PROTO_SEEN_ACCEPTED},
    [SLOT_COMPLETE] = {PROTO_COMPLETE, 0, PROTO_SEEN_ACCEPTED},
    [SLOT_RESEND] = {PROTO_RESEND, 0, PROTO_SEEN_NONE},
    [SLOT_DUP_OPEN] = {PROTO_DROP, DROP_DUP_OPEN, PROTO_SEEN_WAITING},
    [SLOT_STALE] = {PROTO_DROP, DROP_STALE, PROTO_SEEN_NONE},
    [SLOT_AHEAD] = {PROTO_DROP, DROP_AHEAD, PROTO_SEEN_NONE},
    [SLOT_MISMATCH] = {PROTO_DROP, DROP_MISMATCH, PROTO_SEEN_NONE},
    [SLOT_HELD] = {PROTO_UP_AGAIN, 0, PROTO_SEEN_WAITING},
};

/* The outcome's result (or upstream contribution) from the copy holding round `round`. */
static void plain_result(const slot_t *slot, uint32_t round, proto_outcome_t *out)
{
    const slot_copy_t *c = slot_copy_of(slot, round);
    out->set = c->set;
    out->chunk = c->chunk;
    out->data = c->data;
    out->result = (wire_header_t){
        .round = c->round,
        .chunk = c->chunk,
        .count = c->n_elems,
        .flags = (uint8_t)(wire_ver_of_round(c->round) | (c->overflow ? WIRE_FLAG_OVERFLOW : 0)),
        .dtype = c->dtype,
        .exp = c->exp,
        .next_exp = c->next_exp,
    };
}

static void switchml_handle(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                            proto_outcome_t *out)
{
    switchml_job_t *s = x->state;
    slot_t *slot = &s->slots[h->slot];
    codecjob_t *cj = x->job->codec_state;
    wire_header_t plain;
    enum slot_verdict v = SLOT_PARTIAL;
    if (h->dtype == WIRE_CODED) /* decode only what the slot will take */
        v = slot_precheck(slot, x->job->world, h);
    if (h->dtype == WIRE_CODED && v == SLOT_PARTIAL) {
        /* the dataplane lets it through only in a codec job */
        const uint32_t *be = NULL;
        int sat = 0;
        uint64_t t0 = util_now_ns();
        uint32_t n = codecjob_decode(cj, x->thread, payload, h->count, &be, &sat);
        STAT_ADD(x->c->v[STAT_CODEC_NS], util_now_ns() - t0);
        STAT_ADD(x->c->v[STAT_CODEC_VALUES], n);
        if (n == 0) {
            out->action = PROTO_DROP;
            out->drop = DROP_BAD_CODE;
            out->seen = PROTO_SEEN_NONE;
            return;
        }
        plain = *h;
        plain.dtype = WIRE_FLOAT32;
        if (sat)
            plain.flags |= WIRE_FLAG_OVERFLOW;
        plain.count = (uint16_t)n;
        h = &plain;
        payload = be;
    }
    if (v == SLOT_PARTIAL) {
        v = slot_contribute(slot, x->job->world, h, payload);
        /* a coded contribution flagged non-finite (sent as zeros) marks the round */
        if (cj && (h->flags & WIRE_FLAG_OVERFLOW) && (v == SLOT_PARTIAL || v == SLOT_COMPLETE))
            slot->copy[h->round & 1u].overflow = 1;
    }
    proto_verdict(out, &verdicts[v]);
    if (out->action == PROTO_COMPLETE && x->job->up.on) {
        /* a leaf: the round's result is the upstream's; its partial sum goes up */
        slot_hold(slot, h->round);
        out->action = PROTO_UP_SEND;
    }
    if (out->action == PROTO_UP_SEND || out->action == PROTO_UP_AGAIN) {
        plain_result(slot, h->round, out);
        return;
    }
    if (out->action != PROTO_COMPLETE && out->action != PROTO_RESEND)
        return;
    const slot_copy_t *c = slot_copy_of(slot, h->round);
    if (cj && c->dtype == WIRE_FLOAT32) { /* a compressed job's float round */
        int saturated = 0;
        const uint32_t *coded;
        uint64_t t0 = util_now_ns();
        uint32_t words =
            out->action == PROTO_COMPLETE
                ? codecjob_encode_result(cj, x->thread, h->slot, h->round & 1u, c->chunk, c->data,
                                         c->n_elems, &coded, &saturated)
                : codecjob_result(cj, h->slot, h->round & 1u, &coded);
        if (out->action == PROTO_COMPLETE) {
            STAT_ADD(x->c->v[STAT_CODEC_NS], util_now_ns() - t0);
            STAT_ADD(x->c->v[STAT_CODEC_VALUES], c->n_elems);
        }
        if (out->action == PROTO_RESEND || c->overflow)
            saturated = c->overflow;
        else if (saturated)
            slot->copy[h->round & 1u].overflow = 1;
        out->set = c->set;
        out->chunk = c->chunk;
        out->data = (uint32_t *)coded;
        out->result = (wire_header_t){
            .round = c->round,
            .chunk = c->chunk,
            .count = (uint16_t)words,
            .flags = (uint8_t)(wire_ver_of_round(c->round) | (saturated ? WIRE_FLAG_OVERFLOW : 0)),
            .dtype = WIRE_CODED,
        };
        return;
    }
    plain_result(slot, h->round, out);
}

/* A leaf switch: the upstream switch's result of a held round becomes its result. */
static void switchml_upstream(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                              proto_outcome_t *out)
{
    switchml_job_t *s = x->state;
    slot_t *slot = &s->slots[h->slot];
    out->action = PROTO_DROP;
    if (h->type != WIRE_RESULT) {
        out->drop = DROP_WRONG_PROTOCOL;
        return;
    }
    enum slot_verdict v = slot_upstream_result(slot, h, payload);
    if (v != SLOT_COMPLETE) {
        out->drop = v == SLOT_STALE ? DROP_UP_STALE : DROP_MISMATCH;
        return;
    }
    out->action = PROTO_UP_DONE;
    plain_result(slot, h->round, out);
}

const switch_proto_ops_t proto_switchml = {
    .name = "switchml",
    .id = INAGG_PROTO_SWITCHML,
    .accepts = 1u << WIRE_CONTRIB,
    .pool_bytes = switchml_pool_bytes,
    .create = switchml_create,
    .destroy = switchml_destroy,
    .handle = switchml_handle,
    .upstream = switchml_upstream,
};
