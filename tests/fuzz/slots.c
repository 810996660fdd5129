/*
 * slots.c - the slot state machines under a fuzzer's packets (see slots.h). Beyond "no
 * crash", after every packet: the verdict matches its documented condition (PROTOCOL.md 2.4
 * and 9.1); a verdict that drops the packet leaves the slot untouched; counts equal their
 * bitmaps and never exceed the world; a switchml copy is reused only when both copies are
 * complete, its sum equals a shadow sum of what was accepted, and its overflow flag is right;
 * a p4sgd result is the rank-order sum of the rows; a confirmation moves the slot on.
 */
#include "slots.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "switchd/server/p4slot.h"
#include "switchd/server/slot.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static uint32_t g_world, g_elems;
static uint64_t g_mask; /* every rank's bit */

/* switchml */
static slot_t g_sm[FUZZ_SLOTS];
static uint32_t g_sm_data[FUZZ_SLOTS][2][FUZZ_MAX_ELEMS];
static uint32_t g_sm_shadow[FUZZ_SLOTS][2][FUZZ_MAX_ELEMS]; /* host order int32 or float bits */
static int g_sm_shadow_ovf[FUZZ_SLOTS][2];

/* p4sgd */
static p4slot_t g_p4[FUZZ_SLOTS];
static uint32_t g_p4_rows[FUZZ_SLOTS][64 * FUZZ_MAX_ELEMS];
static uint32_t g_p4_result[FUZZ_SLOTS][FUZZ_MAX_ELEMS];

static int popcount64(uint64_t x) { return __builtin_popcountll(x); }

static float f32_of(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Equal words: float NaNs are equal whatever their payload (the order of an add's operands
 * decides which payload survives). */
static int same_word(uint8_t dtype, uint32_t a, uint32_t b)
{
    if (dtype == WIRE_FLOAT32 && isnan(f32_of(a)) && isnan(f32_of(b)))
        return 1;
    return a == b;
}

void slots_reset(uint32_t world, uint32_t elems)
{
    g_world = world;
    g_elems = elems;
    g_mask = world >= 64 ? ~0ull : (1ull << world) - 1;
    memset(g_sm_data, 0, sizeof(g_sm_data));
    memset(g_p4_rows, 0, sizeof(g_p4_rows));
    memset(g_p4_result, 0, sizeof(g_p4_result));
    for (int k = 0; k < FUZZ_SLOTS; k++) {
        slot_init(&g_sm[k], world, g_sm_data[k][0], g_sm_data[k][1]);
        p4slot_init(&g_p4[k], g_p4_rows[k], g_p4_result[k]);
    }
}

/* ---- switchml ------------------------------------------------------------------------- */

typedef struct sm_snap {
    slot_copy_t copy[2];
    uint32_t data[2][FUZZ_MAX_ELEMS];
} sm_snap_t;

static void sm_snap(int k, sm_snap_t *s)
{
    for (int v = 0; v < 2; v++) {
        s->copy[v] = g_sm[k].copy[v];
        s->copy[v].data = NULL;
        memcpy(s->data[v], g_sm_data[k][v], sizeof(s->data[v]));
    }
}

static int sm_same(const sm_snap_t *a, const sm_snap_t *b) { return memcmp(a, b, sizeof(*a)) == 0; }

static void sm_check_copies(int k)
{
    const slot_t *s = &g_sm[k];
    for (int v = 0; v < 2; v++) {
        const slot_copy_t *c = &s->copy[v];
        CHECK((c->round & 1u) == (uint32_t)v); /* round r lives in copy r & 1 */
        CHECK(c->count <= g_world);
        CHECK((c->seen & ~g_mask) == 0);
        CHECK((uint32_t)popcount64(c->seen) == c->count);
    }
    /* The two copies always hold adjacent rounds. */
    int32_t d = (int32_t)(s->copy[1].round - s->copy[0].round);
    CHECK(d == 1 || d == -1);
}

static void sm_feed(int k, const wire_header_t *h, const uint32_t *payload_be)
{
    slot_t *s = &g_sm[k];
    sm_snap_t before, after;
    sm_snap(k, &before);
    const int v = (int)(h->round & 1u);
    const slot_copy_t *c0 = &before.copy[v], *o0 = &before.copy[v ^ 1];
    const uint64_t bit = 1ull << h->rank;
    const int32_t d = (int32_t)(h->round - c0->round);

    enum slot_verdict verdict = slot_contribute(s, g_world, h, payload_be);
    CHECK((unsigned)verdict < SLOT_VERDICT_COUNT);
    sm_snap(k, &after);
    const slot_copy_t *c = &s->copy[v];

    switch (verdict) {
        case SLOT_STALE: CHECK(d < 0); break;
        case SLOT_RESEND: CHECK(d == 0 && (c0->seen & bit) && c0->count == g_world); break;
        case SLOT_DUP_OPEN: CHECK(d == 0 && (c0->seen & bit) && c0->count < g_world); break;
        case SLOT_AHEAD:
            CHECK(d > 0);
            CHECK(!(d == 2 && c0->count == g_world && o0->round == h->round - 1u &&
                    o0->count == g_world));
            break;
        case SLOT_MISMATCH: CHECK(d == 0 && !(c0->seen & bit)); break;
        case SLOT_PARTIAL:
        case SLOT_COMPLETE: {
            const int start = d != 0;
            if (start) {
                /* The next use of the copy: both copies were complete, the other one holding the
             * round just before. Nobody can still need the result overwritten here. */
                CHECK(d == 2 && c0->count == g_world && o0->round == h->round - 1u &&
                      o0->count == g_world);
                CHECK(c->count == 1);
            } else {
                CHECK(!(c0->seen & bit) && c->count == c0->count + 1);
            }
            CHECK(c->round == h->round && (c->seen & bit));
            CHECK((verdict == SLOT_COMPLETE) == (c->count == g_world));
            CHECK(c->n_elems == h->count && c->dtype == h->dtype);
            /* The other copy is untouched. */
            CHECK(memcmp(&before.copy[v ^ 1], &after.copy[v ^ 1], sizeof(slot_copy_t)) == 0);
            CHECK(memcmp(before.data[v ^ 1], after.data[v ^ 1], sizeof(before.data[0])) == 0);
            /* The shadow sum of every contribution accepted in this round. */
            uint32_t *sh = g_sm_shadow[k][v];
            if (start)
                g_sm_shadow_ovf[k][v] = 0;
            for (uint32_t i = 0; i < h->count; i++) {
                uint32_t x = ntohl(payload_be[i]);
                if (start) {
                    sh[i] = x;
                } else if (h->dtype == WIRE_FLOAT32) {
                    sh[i] = bits_of(f32_of(sh[i]) + f32_of(x));
                } else {
                    int32_t a = (int32_t)sh[i], b = (int32_t)x, r;
                    if (__builtin_add_overflow(a, b, &r))
                        g_sm_shadow_ovf[k][v] = 1;
                    sh[i] = (uint32_t)a + (uint32_t)b;
                }
            }
            for (uint32_t i = 0; i < h->count; i++) {
                uint32_t got = verdict == SLOT_COMPLETE ? ntohl(c->data[i]) : c->data[i];
                CHECK(same_word(h->dtype, got, sh[i]));
            }
            if (h->dtype != WIRE_FLOAT32)
                CHECK(c->overflow == g_sm_shadow_ovf[k][v]);
            /* The largest look-ahead exponent of the round. */
            CHECK(c->next_exp >= h->next_exp);
            CHECK(start || c->next_exp >= c0->next_exp);
            sm_check_copies(k);
            return;
        }
        default: CHECK(0);
    }
    /* Every other verdict drops the packet: nothing may change. */
    CHECK(sm_same(&before, &after));
    sm_check_copies(k);
}

/* ---- p4sgd ---------------------------------------------------------------------------- */

typedef struct p4_snap {
    p4slot_t s;
    uint32_t rows[64 * FUZZ_MAX_ELEMS];
    uint32_t result[FUZZ_MAX_ELEMS];
} p4_snap_t;

static p4_snap_t g_before, g_after; /* static: too large for a comfortable stack frame */

static void p4_snap(int k, p4_snap_t *s)
{
    s->s = g_p4[k];
    s->s.rows = NULL;
    s->s.result = NULL;
    memcpy(s->rows, g_p4_rows[k], sizeof(s->rows));
    memcpy(s->result, g_p4_result[k], sizeof(s->result));
}

static void p4_check(int k)
{
    const p4slot_t *s = &g_p4[k];
    CHECK(s->phase == P4_AGGREGATING || s->phase == P4_ACKING);
    CHECK((s->agg_bm & ~g_mask) == 0 && (s->ack_bm & ~g_mask) == 0);
    CHECK((uint32_t)popcount64(s->agg_bm) == s->agg_count && s->agg_count <= g_world);
    CHECK((uint32_t)popcount64(s->ack_bm) == s->ack_count && s->ack_count <= g_world);
    if (s->phase == P4_ACKING)
        CHECK(s->agg_count == g_world); /* a result exists only once everyone contributed */
}

static void p4_ack(int k, const wire_header_t *h)
{
    p4slot_t *s = &g_p4[k];
    p4_snap(k, &g_before);
    const p4slot_t *b = &g_before.s;
    const int32_t d = (int32_t)(h->round - b->round);
    const uint64_t bit = 1ull << h->rank;

    enum p4slot_verdict v = p4slot_ack(s, g_world, h);
    CHECK((unsigned)v < P4V_VERDICT_COUNT);
    switch (v) {
        case P4V_RESEND_CONFIRM: CHECK(d == -1); break;
        case P4V_STALE: CHECK(d < -1); break;
        case P4V_AHEAD: CHECK(d > 0 || (d == 0 && b->phase != P4_ACKING)); break;
        case P4V_DUP_ACK: CHECK(d == 0 && b->phase == P4_ACKING && (b->ack_bm & bit)); break;
        case P4V_ACKED:
            CHECK(d == 0 && b->phase == P4_ACKING && !(b->ack_bm & bit));
            CHECK(s->round == b->round && s->phase == P4_ACKING && (s->ack_bm & bit));
            CHECK(s->ack_count == b->ack_count + 1 && s->ack_count < g_world);
            p4_check(k);
            return;
        case P4V_CONFIRMED:
            /* Every rank acknowledged: only now does the slot move to the next round. */
            CHECK(d == 0 && b->phase == P4_ACKING && !(b->ack_bm & bit));
            CHECK(b->ack_count + 1 == g_world);
            CHECK(s->round == b->round + 1u && s->phase == P4_AGGREGATING);
            CHECK(s->agg_bm == 0 && s->agg_count == 0);
            p4_check(k);
            return;
        default: CHECK(0);
    }
    p4_snap(k, &g_after);
    CHECK(memcmp(&g_before, &g_after, sizeof(g_before)) == 0);
    p4_check(k);
}

static void p4_contribute(int k, const wire_header_t *h, const uint32_t *payload_be)
{
    p4slot_t *s = &g_p4[k];
    p4_snap(k, &g_before);
    const p4slot_t *b = &g_before.s;
    const int32_t d = (int32_t)(h->round - b->round);
    const uint64_t bit = 1ull << h->rank;

    enum p4slot_verdict v = p4slot_contribute(s, g_world, g_elems, h, payload_be);
    CHECK((unsigned)v < P4V_VERDICT_COUNT);
    switch (v) {
        case P4V_STALE: CHECK(d < 0); break;
        case P4V_AHEAD: CHECK(d > 0); break;
        case P4V_RESEND_RESULT: CHECK(d == 0 && b->phase == P4_ACKING); break;
        case P4V_DUP_OPEN: CHECK(d == 0 && b->phase == P4_AGGREGATING && (b->agg_bm & bit)); break;
        case P4V_MISMATCH:
            CHECK(d == 0 && b->phase == P4_AGGREGATING && !(b->agg_bm & bit) && b->agg_count > 0);
            break;
        case P4V_PARTIAL:
        case P4V_COMPLETE: {
            CHECK(d == 0 && b->phase == P4_AGGREGATING && !(b->agg_bm & bit));
            CHECK(s->round == b->round && (s->agg_bm & bit) && s->agg_count == b->agg_count + 1);
            CHECK(s->n_elems == h->count && s->dtype == h->dtype);
            const uint32_t *row = g_p4_rows[k] + (size_t)h->rank * g_elems;
            for (uint32_t i = 0; i < h->count; i++)
                CHECK(row[i] == ntohl(payload_be[i]));
            if (v == P4V_PARTIAL) {
                CHECK(s->phase == P4_AGGREGATING && s->agg_count < g_world);
                break;
            }
            CHECK(s->phase == P4_ACKING && s->agg_count == g_world);
            CHECK(s->ack_bm == 0 && s->ack_count == 0);
            /* The result: the rows summed in rank order (int32 exactly, wrapping; float32 in
         * that order, so every run gives the same bits). */
            int ovf = 0;
            for (uint32_t i = 0; i < s->n_elems; i++) {
                uint32_t want;
                if (s->dtype == WIRE_FLOAT32) {
                    float acc = f32_of(g_p4_rows[k][i]);
                    for (uint32_t r = 1; r < g_world; r++)
                        acc += f32_of(g_p4_rows[k][(size_t)r * g_elems + i]);
                    want = bits_of(acc);
                } else {
                    int64_t acc = 0;
                    for (uint32_t r = 0; r < g_world; r++)
                        acc += (int32_t)g_p4_rows[k][(size_t)r * g_elems + i];
                    if (acc > INT32_MAX || acc < INT32_MIN)
                        ovf = 1;
                    want = (uint32_t)acc;
                }
                CHECK(same_word(s->dtype, ntohl(g_p4_result[k][i]), want));
            }
            if (s->dtype != WIRE_FLOAT32)
                CHECK(s->overflow == ovf);
            break;
        }
        default: CHECK(0);
    }
    if (v != P4V_PARTIAL && v != P4V_COMPLETE) {
        p4_snap(k, &g_after);
        CHECK(memcmp(&g_before, &g_after, sizeof(g_before)) == 0);
    }
    p4_check(k);
}

/* ---- the dataplane's part ------------------------------------------------------------- */

void slots_feed(const wire_header_t *h, const uint32_t *payload_be)
{
    /* handle_packet's context checks, so far as the slots need them. */
    if (h->type != WIRE_CONTRIB && h->type != WIRE_ACK)
        return; /* result_to_switch */
    if (h->rank >= g_world || h->count > g_elems)
        return; /* bad_rank, bad_count */
    int k = (int)(h->slot % FUZZ_SLOTS);
    if (h->type == WIRE_ACK) {
        p4_ack(k, h);
        return;
    }
    /* switchml job */
    sm_feed(k, h, payload_be);
    /* p4sgd job: an acknowledgement riding on the contribution is applied first. */
    uint32_t ack_slot, ack_round;
    if (wire_get_piggyback(h, &ack_slot, &ack_round) && ack_slot < FUZZ_SLOTS) {
        wire_header_t ack = *h;
        ack.type = WIRE_ACK;
        ack.slot = ack_slot;
        ack.round = ack_round;
        ack.count = 0;
        p4_ack((int)ack_slot, &ack);
    }
    p4_contribute(k, h, payload_be);
}
