/*
 * test_p4slot.c - the p4sgd slot state machine (src/switchd/server/p4slot.c, P4SGD Algorithm 2 with
 * full round numbers), driven by scripted sequences: a lossless round and its acknowledgement
 * phase; duplicates in every phase; lost results and lost confirmations; stale and early
 * packets; mismatches; int32 overflow; float32 sums independent of arrival order; round
 * numbers wrapping at 2^32; and a randomized model check in which workers follow Algorithm 3
 * over a network that loses, duplicates and reorders packets.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "inagg/version.h"
#include "lib/base/util.h"
#include "lib/wire/wire.h"
#include "switchd/server/p4slot.h"

#define MAXW 8
#define MAXE 16

typedef struct fixture {
    p4slot_t s;
    uint32_t world;
    uint32_t rows[MAXW * MAXE], result[MAXE];
} fixture_t;

static void fx_init(fixture_t *f, uint32_t world)
{
    memset(f, 0, sizeof(*f));
    f->world = world;
    p4slot_init(&f->s, f->rows, f->result);
}

static wire_header_t hdr(uint8_t type, uint16_t rank, uint32_t round, uint16_t count, uint8_t dtype)
{
    wire_header_t h = {0};
    h.version = INAGG_PROTOCOL_VERSION;
    h.type = type;
    h.rank = rank;
    h.round = round;
    h.count = count;
    h.dtype = dtype;
    h.flags = wire_ver_of_round(round);
    return h;
}

/* Contribute int32 values v + k (k = 0..n-1), big-endian on the wire. */
static enum p4slot_verdict give_i32(fixture_t *f, uint16_t rank, uint32_t round, int32_t v,
                                    uint16_t n)
{
    uint32_t be[MAXE];
    for (uint16_t k = 0; k < n; k++)
        be[k] = htonl((uint32_t)(v + k));
    wire_header_t h = hdr(WIRE_CONTRIB, rank, round, n, WIRE_INT32);
    return p4slot_contribute(&f->s, f->world, MAXE, &h, be);
}

static enum p4slot_verdict ack(fixture_t *f, uint16_t rank, uint32_t round)
{
    wire_header_t h = hdr(WIRE_ACK, rank, round, 0, WIRE_INT32);
    return p4slot_ack(&f->s, f->world, &h);
}

static int32_t result_i32(const fixture_t *f, int k) { return (int32_t)ntohl(f->result[k]); }

TEST(p4slot_round_then_acknowledgements, 5)
{
    fixture_t f;
    fx_init(&f, 3);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 10, 4), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 2, 0, 20, 4), P4V_PARTIAL);
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_AHEAD); /* no result yet: nothing to acknowledge */
    CHECK_EQ_INT(give_i32(&f, 1, 0, 30, 4), P4V_COMPLETE);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_INT(result_i32(&f, k), 60 + 3 * k);
    CHECK_EQ_INT(f.s.phase, P4_ACKING);
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_DUP_ACK);
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_ACKED);
    CHECK_EQ_INT(f.s.round, 0u);
    CHECK_EQ_INT(ack(&f, 2, 0), P4V_CONFIRMED);
    CHECK_EQ_INT(f.s.round, 1u);
    CHECK_EQ_INT(f.s.phase, P4_AGGREGATING);
    /* The next round starts clean: the first contribution of round 1 does not see round 0. */
    CHECK_EQ_INT(give_i32(&f, 0, 1, 1, 2), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, 1, 1, 2), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 2, 1, 1, 2), P4V_COMPLETE);
    CHECK_EQ_INT(result_i32(&f, 0), 3);
    CHECK_EQ_INT(result_i32(&f, 1), 6);
}

TEST(p4slot_duplicates_and_losses, 5)
{
    fixture_t f;
    fx_init(&f, 2);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 5, 1), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 5, 1), P4V_DUP_OPEN); /* retransmitted while open */
    CHECK_EQ_INT(give_i32(&f, 1, 0, 7, 1), P4V_COMPLETE);
    /* Rank 0 lost the result: its retransmission gets it again, the sum is unchanged. */
    CHECK_EQ_INT(give_i32(&f, 0, 0, 5, 1), P4V_RESEND_RESULT);
    CHECK_EQ_INT(result_i32(&f, 0), 12);
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_CONFIRMED);
    /* Rank 1 lost the confirmation: its repeated ack is confirmed again. */
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_RESEND_CONFIRM);
    /* A contribution of round 0 delayed past the confirmation is stale, not round 1's. */
    CHECK_EQ_INT(give_i32(&f, 1, 0, 7, 1), P4V_STALE);
    CHECK_EQ_INT(f.s.agg_count, 0u);
    /* Nobody can be two rounds ahead, or acknowledge a round that has not run. */
    CHECK_EQ_INT(give_i32(&f, 0, 2, 1, 1), P4V_AHEAD);
    CHECK_EQ_INT(ack(&f, 0, 1), P4V_AHEAD);
    /* Round 1 runs; round 0's acknowledgements are now two rounds old only after round 1
     * is confirmed. */
    CHECK_EQ_INT(give_i32(&f, 0, 1, 1, 1), P4V_PARTIAL);
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_RESEND_CONFIRM);
    CHECK_EQ_INT(give_i32(&f, 1, 1, 2, 1), P4V_COMPLETE);
    CHECK_EQ_INT(ack(&f, 0, 1), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 1, 1), P4V_CONFIRMED);
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_STALE);
    CHECK_EQ_INT(give_i32(&f, 0, 1, 1, 1), P4V_STALE);
}

TEST(p4slot_mismatch_and_overflow, 5)
{
    fixture_t f;
    fx_init(&f, 2);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 1, 3), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, 0, 1, 2), P4V_MISMATCH); /* another element count */
    uint32_t be[3] = {0, 0, 0};
    wire_header_t h = hdr(WIRE_CONTRIB, 1, 0, 3, WIRE_FLOAT32);
    CHECK_EQ_INT(p4slot_contribute(&f.s, 2, MAXE, &h, be), P4V_MISMATCH); /* another dtype */
    CHECK_EQ_INT(f.s.agg_count, 1u);

    fx_init(&f, 2);
    CHECK_EQ_INT(give_i32(&f, 0, 0, INT32_MAX, 1), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, 0, 1, 1), P4V_COMPLETE);
    CHECK_EQ_INT(f.s.overflow, 1);
    CHECK_EQ_INT(result_i32(&f, 0), INT32_MIN); /* wrapped, and flagged */
    /* Sums that leave the range only on the way but end inside it are not overflows. */
    fx_init(&f, 3);
    CHECK_EQ_INT(give_i32(&f, 0, 0, INT32_MAX, 1), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, 0, 5, 1), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 2, 0, -10, 1), P4V_COMPLETE);
    CHECK_EQ_INT(f.s.overflow, 0);
    CHECK_EQ_INT(result_i32(&f, 0), INT32_MAX - 5);
}

/* float32 sums are formed in rank order whatever order the contributions arrive in. */
TEST(p4slot_float_sum_is_independent_of_arrival_order, 5)
{
    const float v[4] = {1e8f, 1.0f, -1e8f, 3.5f}; /* order-sensitive in float arithmetic */
    uint32_t ref = 0;
    const int orders[6][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {1, 3, 0, 2},
                              {2, 0, 3, 1}, {1, 0, 2, 3}, {3, 1, 2, 0}};
    for (int o = 0; o < 6; o++) {
        fixture_t f;
        fx_init(&f, 4);
        enum p4slot_verdict last = P4V_PARTIAL;
        for (int i = 0; i < 4; i++) {
            int r = orders[o][i];
            uint32_t bits;
            memcpy(&bits, &v[r], 4);
            uint32_t be = htonl(bits);
            wire_header_t h = hdr(WIRE_CONTRIB, (uint16_t)r, 0, 1, WIRE_FLOAT32);
            last = p4slot_contribute(&f.s, 4, MAXE, &h, &be);
        }
        CHECK_EQ_INT(last, P4V_COMPLETE);
        if (o == 0)
            ref = f.result[0];
        CHECK_MSG(f.result[0] == ref, "arrival order %d gave other bits", o);
    }
    float want = ((1e8f + 1.0f) + -1e8f) + 3.5f, got;
    uint32_t host = ntohl(ref);
    memcpy(&got, &host, 4);
    CHECK(got == want);
}

TEST(p4slot_round_numbers_wrap, 5)
{
    fixture_t f;
    fx_init(&f, 2);
    f.s.round = UINT32_MAX;
    CHECK_EQ_INT(give_i32(&f, 0, UINT32_MAX, 1, 1), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, UINT32_MAX, 1, 1), P4V_COMPLETE);
    CHECK_EQ_INT(ack(&f, 0, UINT32_MAX), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 1, UINT32_MAX), P4V_CONFIRMED);
    CHECK_EQ_INT(f.s.round, 0u);
    CHECK_EQ_INT(ack(&f, 1, UINT32_MAX), P4V_RESEND_CONFIRM);
    CHECK_EQ_INT(give_i32(&f, 0, UINT32_MAX, 1, 1), P4V_STALE);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 2, 1), P4V_PARTIAL);
}

/* ---- randomized model check ------------------------------------------------------------- */

enum { SIM_WORLD = 4, SIM_ROUNDS = 300, SIM_QUEUE = 4096 };

typedef struct sim_pkt {
    wire_header_t h;
    int32_t value;
    int to_switch; /* 1: worker -> switch; 0: switch -> worker h.rank */
} sim_pkt_t;

typedef struct sim {
    sim_pkt_t q[SIM_QUEUE];
    int n;
    util_rng_t rng;
    double drop, dup;
} sim_t;

static void sim_send(sim_t *s, const sim_pkt_t *p)
{
    if (util_rng_double(&s->rng) < s->drop)
        return;
    int copies = util_rng_double(&s->rng) < s->dup ? 2 : 1;
    for (int c = 0; c < copies && s->n < SIM_QUEUE; c++)
        s->q[s->n++] = *p;
}

/* A worker per Algorithm 3, one slot: phase 0 free, 1 waiting for the result, 2 waiting for
 * the confirmation. Timers are modelled as "may resend at any step". */
typedef struct sim_worker {
    uint32_t round;
    int phase;
    int64_t results[SIM_ROUNDS];
    int got[SIM_ROUNDS];
} sim_worker_t;

static int32_t sim_value(uint32_t rank, uint32_t round) { return (int32_t)(rank * 1000 + round); }

static void run_model(double drop, double dup, uint64_t seed)
{
    fixture_t f;
    fx_init(&f, SIM_WORLD);
    sim_t *s = calloc(1, sizeof(*s));
    sim_worker_t w[SIM_WORLD];
    memset(w, 0, sizeof(w));
    util_rng_seed(&s->rng, seed);
    s->drop = drop;
    s->dup = dup;
    long steps = 0;
    int all_done = 0;
    while (!all_done && steps < 2000000) {
        steps++;
        int r = (int)(util_rng_next(&s->rng) % SIM_WORLD);
        sim_worker_t *me = &w[r];
        /* A worker acts: start a round, or a timer fires and it resends its phase's packet. */
        if (me->round < SIM_ROUNDS && util_rng_double(&s->rng) < 0.3) {
            sim_pkt_t p = {.to_switch = 1, .value = sim_value((uint32_t)r, me->round)};
            p.h = hdr(me->phase == 2 ? WIRE_ACK : WIRE_CONTRIB, (uint16_t)r, me->round,
                      me->phase == 2 ? 0 : 1, WIRE_INT32);
            if (me->phase == 0)
                me->phase = 1;
            sim_send(s, &p);
        }
        /* The network delivers a random packet (reordering). */
        if (s->n == 0)
            continue;
        int k = (int)(util_rng_next(&s->rng) % (uint64_t)s->n);
        sim_pkt_t p = s->q[k];
        s->q[k] = s->q[--s->n];
        if (p.to_switch) {
            enum p4slot_verdict v;
            if (p.h.type == WIRE_ACK) {
                v = p4slot_ack(&f.s, SIM_WORLD, &p.h);
            } else {
                uint32_t be = htonl((uint32_t)p.value);
                v = p4slot_contribute(&f.s, SIM_WORLD, MAXE, &p.h, &be);
            }
            CHECK_MSG(v != P4V_MISMATCH && v != P4V_AHEAD, "verdict %s in the model",
                      p4slot_verdict_name(v));
            sim_pkt_t out = {.to_switch = 0};
            if (v == P4V_COMPLETE || v == P4V_RESEND_RESULT) {
                out.h = hdr(WIRE_RESULT, 0, f.s.round, 1, WIRE_INT32);
                out.value = result_i32(&f, 0);
            } else if (v == P4V_CONFIRMED || v == P4V_RESEND_CONFIRM) {
                out.h = hdr(WIRE_CONFIRM, 0, p.h.round, 0, WIRE_INT32);
            } else {
                continue;
            }
            for (int d = 0; d < SIM_WORLD; d++) {
                int multicast = v == P4V_COMPLETE || v == P4V_CONFIRMED;
                if (!multicast && d != p.h.rank)
                    continue;
                out.h.rank = (uint16_t)d;
                sim_send(s, &out);
            }
        } else {
            sim_worker_t *dst = &w[p.h.rank];
            if (p.h.round != dst->round)
                continue; /* old duplicate */
            if (p.h.type == WIRE_RESULT) {
                CHECK_MSG(!dst->got[p.h.round] || dst->results[p.h.round] == p.value,
                          "rank %u round %u: two different results", p.h.rank, p.h.round);
                if (dst->phase == 1) {
                    dst->results[p.h.round] = p.value;
                    dst->got[p.h.round] = 1;
                    dst->phase = 2;
                }
            } else if (dst->phase == 2) {
                dst->phase = 0;
                dst->round++;
            }
        }
        all_done = 1;
        for (int d = 0; d < SIM_WORLD; d++)
            all_done &= w[d].round == SIM_ROUNDS;
    }
    CHECK_MSG(all_done, "model did not finish in %ld steps", steps);
    for (uint32_t round = 0; round < SIM_ROUNDS; round++) {
        int64_t want = 0;
        for (uint32_t d = 0; d < SIM_WORLD; d++)
            want += sim_value(d, round);
        for (int d = 0; d < SIM_WORLD; d++)
            CHECK_MSG(w[d].got[round] && w[d].results[round] == want,
                      "rank %d round %u: got %lld want %lld", d, round,
                      (long long)w[d].results[round], (long long)want);
    }
    free(s);
}

TEST(p4slot_model_check_lossless, 30) { run_model(0, 0, 1); }
TEST(p4slot_model_check_loss_dup_reorder, 60) { run_model(0.1, 0.1, 2); }
TEST(p4slot_model_check_heavy_loss, 60) { run_model(0.3, 0.2, 3); }

/* A leaf switch's p4sgd slot (PROTOCOL.md section 11): held until the upstream result,
 * confirmed to the hosts only after every host acknowledged and the upstream confirmed, in
 * either order; repeats in each phase say what to send upstream again. */
TEST(p4slot_leaf_upstream_phases, 5)
{
    fixture_t f;
    fx_init(&f, 2);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 10, 4), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, 0, 20, 4), P4V_COMPLETE);
    p4slot_hold(&f.s);
    CHECK_EQ_INT(give_i32(&f, 1, 0, 20, 4), P4V_HELD);
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_AHEAD); /* no result at the hosts yet */
    uint32_t up[MAXE];
    for (int k = 0; k < 4; k++)
        up[k] = htonl((uint32_t)(500 + k));
    wire_header_t r = hdr(WIRE_RESULT, 0, 0, 4, WIRE_INT32);
    wire_header_t wrong = hdr(WIRE_RESULT, 0, 0, 4, WIRE_FLOAT32);
    CHECK_EQ_INT(p4slot_upstream_result(&f.s, &wrong, up), P4V_MISMATCH);
    wire_header_t cf = hdr(WIRE_CONFIRM, 0, 0, 0, WIRE_INT32);
    CHECK_EQ_INT(p4slot_upstream_confirm(&f.s, 2, &cf), P4V_STALE); /* nothing acked upstream */
    CHECK_EQ_INT(p4slot_upstream_result(&f.s, &r, up), P4V_COMPLETE);
    CHECK_EQ_INT(p4slot_upstream_result(&f.s, &r, up), P4V_STALE);
    CHECK_EQ_INT(result_i32(&f, 3), 503);
    CHECK_EQ_INT(give_i32(&f, 0, 0, 10, 4), P4V_RESEND_RESULT);
    /* every host acknowledges before the upstream confirms: the slot waits */
    CHECK_EQ_INT(ack(&f, 0, 0), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_UP_ACK_AGAIN);
    CHECK_EQ_INT(give_i32(&f, 0, 1, 10, 4), P4V_AHEAD);
    CHECK_EQ_INT(p4slot_upstream_confirm(&f.s, 2, &cf), P4V_CONFIRMED);
    CHECK_EQ_INT(p4slot_upstream_confirm(&f.s, 2, &cf), P4V_STALE);
    CHECK_EQ_INT(ack(&f, 1, 0), P4V_RESEND_CONFIRM);
    /* round 1: the upstream confirms first, the last host's acknowledgement confirms */
    CHECK_EQ_INT(give_i32(&f, 0, 1, 1, 4), P4V_PARTIAL);
    CHECK_EQ_INT(give_i32(&f, 1, 1, 2, 4), P4V_COMPLETE);
    p4slot_hold(&f.s);
    r.round = 1;
    r.flags = wire_ver_of_round(1);
    cf.round = 1;
    cf.flags = wire_ver_of_round(1);
    CHECK_EQ_INT(p4slot_upstream_result(&f.s, &r, up), P4V_COMPLETE);
    CHECK_EQ_INT(ack(&f, 0, 1), P4V_ACKED);
    CHECK_EQ_INT(p4slot_upstream_confirm(&f.s, 2, &cf), P4V_ACKED);
    CHECK_EQ_INT(ack(&f, 0, 1), P4V_DUP_ACK); /* upstream confirmed: an ordinary repeat */
    CHECK_EQ_INT(ack(&f, 1, 1), P4V_CONFIRMED);
}
