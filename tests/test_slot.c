/*
 * test_slot.c - the switchml slot state machine (src/switchd/server/slot.c, SwitchML Algorithm 3 with
 * full round numbers), driven by scripted contribution sequences: lossless rounds for several
 * world sizes with exact int32 sums; the SwitchML paper's Appendix A example step by step;
 * duplicates in every state (open, complete, stale after reuse); rounds that skip ahead;
 * count/dtype/exponent mismatches; int32 overflow; native float32 sums; the look-ahead
 * exponent maximum with its sentinels; and a randomized model check in which workers follow
 * Algorithm 4 over a network that loses, duplicates and reorders packets.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "inagg/version.h"
#include "lib/base/util.h"
#include "lib/wire/wire.h"
#include "switchd/server/slot.h"

#define MAXE 64 /* words per copy in these tests */

typedef struct fixture {
    slot_t s;
    uint32_t world;
    uint32_t d0[MAXE], d1[MAXE];
} fixture_t;

static void fx_init(fixture_t *f, uint32_t world)
{
    memset(f, 0, sizeof(*f));
    f->world = world;
    slot_init(&f->s, world, f->d0, f->d1);
}

static wire_header_t hdr(uint16_t rank, uint32_t round, uint16_t count, uint8_t dtype, int16_t exp,
                         int16_t next_exp)
{
    wire_header_t h = {0};
    h.version = INAGG_PROTOCOL_VERSION;
    h.type = WIRE_CONTRIB;
    h.job = 1;
    h.rank = rank;
    h.token = 0x1234u;
    h.slot = 0;
    h.round = round;
    h.chunk = round * 10u + 3u;
    h.count = count;
    h.flags = wire_ver_of_round(round);
    h.dtype = dtype;
    h.exp = exp;
    h.next_exp = next_exp;
    return h;
}

/* Contribute n int32 values (host order; converted to network order here). */
static enum slot_verdict put_i32(fixture_t *f, uint16_t rank, uint32_t round, const int32_t *v,
                                 uint16_t n)
{
    uint32_t be[MAXE];
    for (uint16_t i = 0; i < n; i++)
        be[i] = htonl((uint32_t)v[i]);
    wire_header_t h = hdr(rank, round, n, WIRE_INT32, 0, 0);
    return slot_contribute(&f->s, f->world, &h, be);
}

/* Contribute with a fully specified header; payload host-order words. */
static enum slot_verdict put_hdr(fixture_t *f, const wire_header_t *h, const uint32_t *words)
{
    uint32_t be[MAXE];
    for (uint16_t i = 0; i < h->count; i++)
        be[i] = htonl(words[i]);
    return slot_contribute(&f->s, f->world, h, be);
}

/* The value rank r contributes to element i of round `round` in the scripted tests. */
static int32_t val(uint32_t rank, uint32_t round, uint32_t i)
{
    uint64_t st = ((uint64_t)rank << 40) ^ ((uint64_t)round << 20) ^ i;
    return (int32_t)(util_splitmix64(&st) % 2000001u) - 1000000;
}

static enum slot_verdict put_val(fixture_t *f, uint16_t rank, uint32_t round, uint16_t n)
{
    int32_t v[MAXE];
    for (uint16_t i = 0; i < n; i++)
        v[i] = val(rank, round, i);
    return put_i32(f, rank, round, v, n);
}

/* Exact sum over the given ranks of val(). */
static int32_t sum_val(const uint16_t *ranks, int nranks, uint32_t round, uint32_t i)
{
    int64_t s = 0;
    for (int k = 0; k < nranks; k++)
        s += val(ranks[k], round, i);
    return (int32_t)s;
}

static int32_t sum_all(uint32_t world, uint32_t round, uint32_t i)
{
    int64_t s = 0;
    for (uint32_t r = 0; r < world; r++)
        s += val(r, round, i);
    return (int32_t)s;
}

/* The copy holding `round` is complete and its (network order) data is the exact sum. */
static void check_result(const fixture_t *f, uint32_t round, uint16_t n, int line)
{
    const slot_copy_t *c = slot_copy_of(&f->s, round);
    CHECK_MSG(c->round == round, "line %d: copy holds round %u, want %u", line, c->round, round);
    CHECK_MSG(c->count == f->world, "line %d: count %u != world %u", line, c->count, f->world);
    CHECK_EQ_INT(c->n_elems, n);
    CHECK_EQ_INT(c->overflow, 0);
    for (uint16_t i = 0; i < n; i++) {
        int32_t got = (int32_t)ntohl(c->data[i]);
        int32_t want = sum_all(f->world, round, i);
        CHECK_MSG(got == want, "line %d: round %u elem %u: %d != %d", line, round, i, got, want);
    }
}

/* The open copy holding `round` has the partial (host order) sum over `ranks`. */
static void check_partial(const fixture_t *f, uint32_t round, const uint16_t *ranks, int nranks,
                          uint16_t n, int line)
{
    const slot_copy_t *c = slot_copy_of(&f->s, round);
    CHECK_MSG(c->round == round, "line %d: copy holds round %u, want %u", line, c->round, round);
    CHECK_MSG(c->count == (uint32_t)nranks, "line %d: count %u != %d", line, c->count, nranks);
    uint64_t seen = 0;
    for (int k = 0; k < nranks; k++)
        seen |= 1ull << ranks[k];
    CHECK_MSG(c->seen == seen, "line %d: seen %llx != %llx", line, (unsigned long long)c->seen,
              (unsigned long long)seen);
    for (uint16_t i = 0; i < n; i++) {
        int32_t got = (int32_t)c->data[i];
        int32_t want = sum_val(ranks, nranks, round, i);
        CHECK_MSG(got == want, "line %d: round %u elem %u: %d != %d", line, round, i, got, want);
    }
}

#define EXPECT(expr, verdict)                                                                      \
    do {                                                                                           \
        enum slot_verdict v_ = (expr);                                                             \
        CHECK_MSG(v_ == (verdict), "%s: got %s, want %s", #expr, slot_verdict_name(v_),            \
                  slot_verdict_name(verdict));                                                     \
    } while (0)

TEST(slot_verdict_names, 5)
{
    for (int v = 0; v < SLOT_VERDICT_COUNT; v++) {
        const char *n = slot_verdict_name((enum slot_verdict)v);
        CHECK(n && *n && strcmp(n, "unknown") != 0);
        for (int w = 0; w < v; w++)
            CHECK(strcmp(n, slot_verdict_name((enum slot_verdict)w)) != 0);
    }
    CHECK(strcmp(slot_verdict_name(SLOT_VERDICT_COUNT), "unknown") == 0);
}

TEST(slot_lossless_rounds_worlds, 20)
{
    const uint32_t worlds[] = {1, 2, 3, 4, 64};
    util_rng_t rng;
    util_rng_seed(&rng, 99);
    for (size_t wi = 0; wi < INAGG_ARRAY_LEN(worlds); wi++) {
        fixture_t f;
        fx_init(&f, worlds[wi]);
        for (uint32_t round = 0; round < 9; round++) {
            uint16_t n = (uint16_t)(1u + (round * 7u) % MAXE);
            /* A random arrival order of the ranks. */
            uint16_t order[64];
            for (uint16_t r = 0; r < f.world; r++)
                order[r] = r;
            for (uint32_t i = f.world; i > 1; i--) {
                uint32_t j = (uint32_t)(util_rng_next(&rng) % i);
                uint16_t t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
            }
            for (uint32_t k = 0; k < f.world; k++) {
                enum slot_verdict want = k + 1 < f.world ? SLOT_PARTIAL : SLOT_COMPLETE;
                EXPECT(put_val(&f, order[k], round, n), want);
                if (k + 1 < f.world)
                    check_partial(&f, round, order, (int)k + 1, n, __LINE__);
            }
            check_result(&f, round, n, __LINE__);
            const slot_copy_t *c = slot_copy_of(&f.s, round);
            CHECK(c->seen == (f.world == 64 ? ~0ull : (1ull << f.world) - 1u));
            CHECK_EQ_INT(c->chunk, round * 10u + 3u);
            CHECK_EQ_INT(c->dtype, WIRE_INT32);
            /* The other copy still holds the previous round's result. */
            if (round > 0)
                check_result(&f, round - 1, (uint16_t)(1u + ((round - 1) * 7u) % MAXE), __LINE__);
        }
    }
}

/* SwitchML Appendix A, for one slot x, with w1, w2, w3 = ranks 0, 1, 2. */
TEST(slot_switchml_appendix_a, 10)
{
    fixture_t f;
    fx_init(&f, 3);
    const uint16_t n = 8;
    const uint32_t r0 = 0, r1 = 1, r2 = 2;
    const uint16_t w1w2[] = {0, 1};
    /* t0, t1: w1 and w2 send their updates for slot x (pool 0). */
    EXPECT(put_val(&f, 0, r0, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, r0, n), SLOT_PARTIAL);
    /* t2, t3: w3's update is lost upstream: nothing reaches the switch. */
    check_partial(&f, r0, w1w2, 2, n, __LINE__);
    /* t4, t5: w1's and w2's timeouts retransmit; the switch ignores both. */
    EXPECT(put_val(&f, 0, r0, n), SLOT_DUP_OPEN);
    check_partial(&f, r0, w1w2, 2, n, __LINE__);
    EXPECT(put_val(&f, 1, r0, n), SLOT_DUP_OPEN);
    check_partial(&f, r0, w1w2, 2, n, __LINE__);
    /* t6: w3's retransmission arrives and completes the slot: three results go out. */
    EXPECT(put_val(&f, 2, r0, n), SLOT_COMPLETE);
    check_result(&f, r0, n, __LINE__);
    uint32_t result0[MAXE];
    memcpy(result0, slot_copy_of(&f.s, r0)->data, sizeof(uint32_t) * n);
    /* t7: the result for w1 is lost. t8: w1 retransmits; the switch answers it alone with
     * the same result. */
    EXPECT(put_val(&f, 0, r0, n), SLOT_RESEND);
    CHECK(memcmp(slot_copy_of(&f.s, r0)->data, result0, sizeof(uint32_t) * n) == 0);
    check_result(&f, r0, n, __LINE__);
    /* t9, t10, t12, t13: w2 and w3 got the result and use slot x in pool 1 for the next
     * offset. */
    EXPECT(put_val(&f, 1, r1, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 2, r1, n), SLOT_PARTIAL);
    /* Pool 0 still holds the complete first result while w1 has not moved on: another late
     * retransmission from w1 is still answered. */
    EXPECT(put_val(&f, 0, r0, n), SLOT_RESEND);
    CHECK(memcmp(slot_copy_of(&f.s, r0)->data, result0, sizeof(uint32_t) * n) == 0);
    /* t11, t14, t15: w1 got its unicast result and sends for pool 1: complete. */
    EXPECT(put_val(&f, 0, r1, n), SLOT_COMPLETE);
    check_result(&f, r1, n, __LINE__);
    check_result(&f, r0, n, __LINE__);
    /* The round after reuses pool 0: its old result is overwritten only now. */
    EXPECT(put_val(&f, 2, r2, n), SLOT_PARTIAL);
    const uint16_t w3[] = {2};
    check_partial(&f, r2, w3, 1, n, __LINE__);
    EXPECT(put_val(&f, 0, r0, n), SLOT_STALE); /* a very late duplicate of the first round */
    check_partial(&f, r2, w3, 1, n, __LINE__);
    EXPECT(put_val(&f, 1, r2, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 0, r2, n), SLOT_COMPLETE);
    check_result(&f, r2, n, __LINE__);
    check_result(&f, r1, n, __LINE__);
}

TEST(slot_duplicates_in_every_state, 10)
{
    fixture_t f;
    fx_init(&f, 3);
    const uint16_t n = 5;
    const uint16_t r0only[] = {0}, r01[] = {0, 1};

    /* Open round: a duplicate is ignored and the sum is unchanged. */
    EXPECT(put_val(&f, 0, 0, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 0, 0, n), SLOT_DUP_OPEN);
    check_partial(&f, 0, r0only, 1, n, __LINE__);
    /* Even a duplicate carrying other numbers (or another shape) does not touch the sum. */
    {
        int32_t other[MAXE];
        for (int i = 0; i < MAXE; i++)
            other[i] = 1000 + i;
        EXPECT(put_i32(&f, 0, 0, other, n), SLOT_DUP_OPEN);
        EXPECT(put_i32(&f, 0, 0, other, (uint16_t)(n + 1)), SLOT_DUP_OPEN);
        check_partial(&f, 0, r0only, 1, n, __LINE__);
    }
    EXPECT(put_val(&f, 1, 0, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, 0, n), SLOT_DUP_OPEN);
    EXPECT(put_val(&f, 0, 0, n), SLOT_DUP_OPEN);
    check_partial(&f, 0, r01, 2, n, __LINE__);
    EXPECT(put_val(&f, 2, 0, n), SLOT_COMPLETE);

    /* Complete round: every rank's duplicate asks for a resend; data unchanged. */
    uint32_t res[MAXE];
    memcpy(res, f.d0, sizeof(res));
    for (int rep = 0; rep < 3; rep++)
        for (uint16_t r = 0; r < 3; r++) {
            EXPECT(put_val(&f, r, 0, n), SLOT_RESEND);
            CHECK(memcmp(res, f.d0, sizeof(res)) == 0);
        }
    check_result(&f, 0, n, __LINE__);

    /* Round 1 on copy 1, complete; round 0 duplicates are still answered. */
    for (uint16_t r = 0; r < 3; r++)
        EXPECT(put_val(&f, r, 1, n), r < 2 ? SLOT_PARTIAL : SLOT_COMPLETE);
    EXPECT(put_val(&f, 2, 0, n), SLOT_RESEND);
    CHECK(memcmp(res, f.d0, sizeof(res)) == 0);

    /* Round 2 reuses copy 0: a delayed duplicate of round 0 is stale, round 2's partial sum
     * is untouched; a duplicate of round 1 still gets its result. */
    EXPECT(put_val(&f, 1, 2, n), SLOT_PARTIAL);
    const uint16_t r1only[] = {1};
    for (uint16_t r = 0; r < 3; r++) {
        EXPECT(put_val(&f, r, 0, n), SLOT_STALE);
        check_partial(&f, 2, r1only, 1, n, __LINE__);
        EXPECT(put_val(&f, r, 1, n), SLOT_RESEND);
        check_result(&f, 1, n, __LINE__);
    }
    EXPECT(put_val(&f, 1, 2, n), SLOT_DUP_OPEN);
    EXPECT(put_val(&f, 0, 2, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 2, 2, n), SLOT_COMPLETE);
    check_result(&f, 2, n, __LINE__);
    /* Stale also after the reused copy completed, and for rounds further back. */
    memcpy(res, f.d0, sizeof(res));
    EXPECT(put_val(&f, 0, 0, n), SLOT_STALE);
    CHECK(memcmp(res, f.d0, sizeof(res)) == 0);
    /* Round 3 on copy 1, then round 4 on copy 0: round 1, 2 duplicates go stale in turn. */
    for (uint16_t r = 0; r < 3; r++)
        EXPECT(put_val(&f, r, 3, n), r < 2 ? SLOT_PARTIAL : SLOT_COMPLETE);
    EXPECT(put_val(&f, 0, 1, n), SLOT_STALE);
    EXPECT(put_val(&f, 0, 2, n), SLOT_RESEND);
    EXPECT(put_val(&f, 0, 4, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, 2, n), SLOT_STALE);
    EXPECT(put_val(&f, 1, 0, n), SLOT_STALE);
    check_partial(&f, 4, r0only, 1, n, __LINE__);
    check_result(&f, 3, n, __LINE__);
}

TEST(slot_ahead_is_refused, 10)
{
    fixture_t f;
    fx_init(&f, 3);
    const uint16_t n = 4;
    const uint16_t r0only[] = {0};
    /* From the start: round 1 before round 0 is complete, round 2, 3, 4. */
    EXPECT(put_val(&f, 0, 1, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 2, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 3, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 4, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 0, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, 1, n), SLOT_AHEAD); /* round 0 still open */
    EXPECT(put_val(&f, 1, 2, n), SLOT_AHEAD);
    check_partial(&f, 0, r0only, 1, n, __LINE__);
    EXPECT(put_val(&f, 1, 0, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 2, 0, n), SLOT_COMPLETE);

    /* Round 0 complete, round 1 open: round 2 (r + 2 with r + 1 incomplete) is ahead. */
    EXPECT(put_val(&f, 0, 1, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 0, 2, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 1, 2, n), SLOT_AHEAD);
    check_result(&f, 0, n, __LINE__); /* copy 0 kept its result */
    EXPECT(put_val(&f, 0, 4, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 3, n), SLOT_AHEAD);
    check_partial(&f, 1, r0only, 1, n, __LINE__);
    EXPECT(put_val(&f, 1, 1, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 2, 1, n), SLOT_COMPLETE);

    /* Rounds 0 and 1 complete: round 3 (its copy's next use before round 2 exists) and
     * round 4 (r + 4) are ahead; round 2 is the legal next one. */
    EXPECT(put_val(&f, 0, 3, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 4, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 6, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 0, 0x7ffffffeu, n), SLOT_AHEAD);
    check_result(&f, 0, n, __LINE__);
    check_result(&f, 1, n, __LINE__);
    EXPECT(put_val(&f, 0, 2, n), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, 4, n), SLOT_AHEAD);
    EXPECT(put_val(&f, 1, 3, n), SLOT_AHEAD); /* round 2 not complete */
    check_partial(&f, 2, r0only, 1, n, __LINE__);
    check_result(&f, 1, n, __LINE__);
}

TEST(slot_mismatch_within_round, 10)
{
    fixture_t f;
    fx_init(&f, 3);
    const uint16_t r0only[] = {0}, r01[] = {0, 1};
    uint32_t w[MAXE];
    for (int i = 0; i < MAXE; i++)
        w[i] = (uint32_t)(i * 3 + 1);

    /* int32 round of 6 elements: another count or dtype is refused. */
    wire_header_t h = hdr(0, 0, 6, WIRE_INT32, 0, 0);
    uint32_t first[MAXE];
    for (int i = 0; i < 6; i++)
        first[i] = (uint32_t)val(0, 0, (uint32_t)i);
    EXPECT(put_hdr(&f, &h, first), SLOT_PARTIAL);
    check_partial(&f, 0, r0only, 1, 6, __LINE__);
    h = hdr(1, 0, 5, WIRE_INT32, 0, 0);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    h = hdr(1, 0, 7, WIRE_INT32, 0, 0);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    h = hdr(1, 0, 0, WIRE_INT32, 0, 0);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    h = hdr(1, 0, 6, WIRE_FIXED32, 0, 0);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    h = hdr(1, 0, 6, WIRE_FLOAT32, 0, 0);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    check_partial(&f, 0, r0only, 1, 6, __LINE__); /* sum, count and seen untouched */
    CHECK_EQ_INT(slot_copy_of(&f.s, 0)->n_elems, 6);
    CHECK_EQ_INT(slot_copy_of(&f.s, 0)->dtype, WIRE_INT32);
    /* The refused rank can still contribute properly. */
    EXPECT(put_val(&f, 1, 0, 6), SLOT_PARTIAL);
    check_partial(&f, 0, r01, 2, 6, __LINE__);
    EXPECT(put_val(&f, 2, 0, 6), SLOT_COMPLETE);
    check_result(&f, 0, 6, __LINE__);

    /* Fixed point round with exponent -5: another exponent is refused. */
    h = hdr(0, 1, 4, WIRE_FIXED32, -5, 1);
    EXPECT(put_hdr(&f, &h, w), SLOT_PARTIAL);
    uint32_t snap[MAXE];
    memcpy(snap, f.d1, sizeof(snap));
    const int16_t bad_exps[] = {-4, -6, 0, 5, INT16_MIN, INT16_MAX};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(bad_exps); i++) {
        h = hdr(1, 1, 4, WIRE_FIXED32, bad_exps[i], 1);
        EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
        CHECK(memcmp(snap, f.d1, sizeof(snap)) == 0);
        CHECK_EQ_INT(slot_copy_of(&f.s, 1)->count, 1);
        CHECK_EQ_INT(slot_copy_of(&f.s, 1)->exp, -5);
    }
    h = hdr(1, 1, 4, WIRE_INT32, -5, 1);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    h = hdr(1, 1, 3, WIRE_FIXED32, -5, 1);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    CHECK(memcmp(snap, f.d1, sizeof(snap)) == 0);
    h = hdr(1, 1, 4, WIRE_FIXED32, -5, 1);
    EXPECT(put_hdr(&f, &h, w), SLOT_PARTIAL);
    h = hdr(2, 1, 4, WIRE_FIXED32, -5, 1);
    EXPECT(put_hdr(&f, &h, w), SLOT_COMPLETE);
    for (int i = 0; i < 4; i++)
        CHECK_EQ_INT((int32_t)ntohl(f.d1[i]), 3 * (int32_t)w[i]);
    CHECK_EQ_INT(slot_copy_of(&f.s, 1)->exp, -5);
    CHECK_EQ_INT(slot_copy_of(&f.s, 1)->dtype, WIRE_FIXED32);
    /* A mismatching duplicate of a complete round is still just a resend request. */
    h = hdr(0, 1, 2, WIRE_FLOAT32, 9, 1);
    EXPECT(put_hdr(&f, &h, w), SLOT_RESEND);

    /* The next use of a copy may change shape: it starts a new round. */
    h = hdr(0, 2, 9, WIRE_FLOAT32, 0, 0);
    EXPECT(put_hdr(&f, &h, w), SLOT_PARTIAL);
    CHECK_EQ_INT(slot_copy_of(&f.s, 2)->n_elems, 9);
    CHECK_EQ_INT(slot_copy_of(&f.s, 2)->dtype, WIRE_FLOAT32);
}

TEST(slot_int32_overflow_flag, 10)
{
    fixture_t f;
    fx_init(&f, 2);
    int32_t a[3] = {INT32_MAX, INT32_MIN, 5};
    int32_t b[3] = {0, 0, 7};
    /* No overflow: flag clear. */
    EXPECT(put_i32(&f, 0, 0, a, 3), SLOT_PARTIAL);
    EXPECT(put_i32(&f, 1, 0, b, 3), SLOT_COMPLETE);
    CHECK_EQ_INT(slot_copy_of(&f.s, 0)->overflow, 0);
    CHECK_EQ_INT((int32_t)ntohl(f.d0[0]), INT32_MAX);
    CHECK_EQ_INT((int32_t)ntohl(f.d0[1]), INT32_MIN);
    CHECK_EQ_INT((int32_t)ntohl(f.d0[2]), 12);
    /* Positive overflow wraps and sets the flag. */
    int32_t one[3] = {1, 0, 0};
    EXPECT(put_i32(&f, 0, 1, a, 3), SLOT_PARTIAL);
    CHECK_EQ_INT(slot_copy_of(&f.s, 1)->overflow, 0);
    EXPECT(put_i32(&f, 1, 1, one, 3), SLOT_COMPLETE);
    CHECK_EQ_INT(slot_copy_of(&f.s, 1)->overflow, 1);
    CHECK_EQ_INT((int32_t)ntohl(f.d1[0]), INT32_MIN);
    CHECK_EQ_INT((int32_t)ntohl(f.d1[2]), 5);
    /* The next use of copy 0 starts without the flag; negative overflow sets it. */
    int32_t m1[3] = {0, -1, 0};
    EXPECT(put_i32(&f, 0, 2, a, 3), SLOT_PARTIAL);
    CHECK_EQ_INT(slot_copy_of(&f.s, 2)->overflow, 0);
    EXPECT(put_i32(&f, 1, 2, m1, 3), SLOT_COMPLETE);
    CHECK_EQ_INT(slot_copy_of(&f.s, 2)->overflow, 1);
    CHECK_EQ_INT((int32_t)ntohl(f.d0[1]), INT32_MAX);
    /* The flag of copy 1 is reset by its reuse too, and an overflow in an earlier add is
     * remembered after later adds that do not overflow (world 3). */
    EXPECT(put_i32(&f, 0, 3, b, 3), SLOT_PARTIAL);
    CHECK_EQ_INT(slot_copy_of(&f.s, 3)->overflow, 0);
    EXPECT(put_i32(&f, 1, 3, b, 3), SLOT_COMPLETE);
    CHECK_EQ_INT(slot_copy_of(&f.s, 3)->overflow, 0);

    fixture_t g;
    fx_init(&g, 3);
    EXPECT(put_i32(&g, 0, 0, a, 3), SLOT_PARTIAL);
    EXPECT(put_i32(&g, 1, 0, one, 3), SLOT_PARTIAL);
    CHECK_EQ_INT(slot_copy_of(&g.s, 0)->overflow, 1);
    int32_t zeros[3] = {0, 0, 0}; /* an add that does not overflow keeps the flag */
    EXPECT(put_i32(&g, 2, 0, zeros, 3), SLOT_COMPLETE);
    CHECK_EQ_INT(slot_copy_of(&g.s, 0)->overflow, 1);
    CHECK_EQ_INT((int32_t)ntohl(g.d0[0]), INT32_MIN);
    /* A duplicate (DUP_OPEN/RESEND) never adds, so it cannot set the flag. */
    EXPECT(put_i32(&g, 0, 1, a, 3), SLOT_PARTIAL);
    EXPECT(put_i32(&g, 0, 1, one, 3), SLOT_DUP_OPEN);
    EXPECT(put_i32(&g, 0, 1, a, 3), SLOT_DUP_OPEN);
    CHECK_EQ_INT(slot_copy_of(&g.s, 1)->overflow, 0);
}

static uint32_t f2u(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

TEST(slot_float32_native_sums, 10)
{
    fixture_t f;
    fx_init(&f, 3);
    /* Exactly representable values: the sum is exact whatever the order. */
    const float a[5] = {1.5f, -0.25f, 1024.0f, 0.0f, -3.0f};
    const float b[5] = {2.0f, 0.125f, -1024.0f, -0.0f, 1e-3f};
    const float c[5] = {-0.5f, 0.125f, 0.5f, 0.0f, 3.0f};
    uint32_t wa[5], wb[5], wc[5];
    for (int i = 0; i < 5; i++) {
        wa[i] = f2u(a[i]);
        wb[i] = f2u(b[i]);
        wc[i] = f2u(c[i]);
    }
    wire_header_t h = hdr(0, 0, 5, WIRE_FLOAT32, 0, 0);
    EXPECT(put_hdr(&f, &h, wa), SLOT_PARTIAL);
    h.rank = 2;
    EXPECT(put_hdr(&f, &h, wc), SLOT_PARTIAL);
    h.rank = 1;
    EXPECT(put_hdr(&f, &h, wb), SLOT_COMPLETE);
    const slot_copy_t *cp = slot_copy_of(&f.s, 0);
    CHECK_EQ_INT(cp->dtype, WIRE_FLOAT32);
    CHECK_EQ_INT(cp->overflow, 0);
    float got[5];
    for (int i = 0; i < 5; i++)
        got[i] = u2f(ntohl(cp->data[i]));
    CHECK(got[0] == 3.0f);
    CHECK(got[1] == 0.0f);
    CHECK(got[2] == 0.5f);
    CHECK(got[3] == 0.0f);
    CHECK(f2u(got[4]) == f2u(1e-3f)); /* arrival order: (-3 + 3) + 1e-3 */

    /* Random floats: bit-identical to adding in arrival order, in float. */
    util_rng_t rng;
    util_rng_seed(&rng, 7);
    for (uint32_t round = 1; round < 40; round++) {
        float vals[3][MAXE], want[MAXE];
        uint16_t n = (uint16_t)(1u + util_rng_next(&rng) % MAXE);
        for (int r = 0; r < 3; r++)
            for (int i = 0; i < n; i++)
                vals[r][i] = (float)((util_rng_double(&rng) - 0.5) * 1e6);
        for (int i = 0; i < n; i++) {
            volatile float acc = vals[0][i];
            acc = acc + vals[1][i];
            acc = acc + vals[2][i];
            want[i] = acc;
        }
        for (uint16_t r = 0; r < 3; r++) {
            uint32_t w[MAXE];
            for (int i = 0; i < n; i++)
                w[i] = f2u(vals[r][i]);
            h = hdr(r, round, n, WIRE_FLOAT32, 0, 0);
            EXPECT(put_hdr(&f, &h, w), r < 2 ? SLOT_PARTIAL : SLOT_COMPLETE);
        }
        cp = slot_copy_of(&f.s, round);
        for (int i = 0; i < n; i++)
            CHECK_MSG(ntohl(cp->data[i]) == f2u(want[i]), "round %u elem %d: %a != %a", round, i,
                      (double)u2f(ntohl(cp->data[i])), (double)want[i]);
    }
}

/* next_exp of a round of contributions with the given look-ahead exponents. */
static int16_t next_exp_of(const int16_t *ne, uint32_t world)
{
    fixture_t f;
    fx_init(&f, world);
    uint32_t w[2] = {1, 2};
    for (uint32_t r = 0; r < world; r++) {
        wire_header_t h = hdr((uint16_t)r, 0, 2, WIRE_FIXED32, 3, ne[r]);
        EXPECT(put_hdr(&f, &h, w), r + 1 < world ? SLOT_PARTIAL : SLOT_COMPLETE);
        /* The running value is the max so far. */
        int16_t m = ne[0];
        for (uint32_t k = 1; k <= r; k++)
            if (ne[k] > m)
                m = ne[k];
        CHECK_EQ_INT(slot_copy_of(&f.s, 0)->next_exp, m);
    }
    CHECK_EQ_INT(slot_copy_of(&f.s, 0)->exp, 3);
    return slot_copy_of(&f.s, 0)->next_exp;
}

TEST(slot_next_exp_max_and_sentinels, 10)
{
    const int16_t zero = INT16_MIN, inf = INT16_MAX;
    struct {
        int16_t ne[4];
        uint32_t world;
        int16_t want;
    } cases[] = {
        {{3, -5, 7, 0}, 4, 7},
        {{-20, -30, -25, -21}, 4, -20},
        {{-1, -1, -1, -1}, 4, -1},
        {{zero, zero, zero, zero}, 4, zero}, /* all-zero next block stays all zero */
        {{zero, -100, zero, zero}, 4, -100}, /* the zero sentinel is the identity */
        {{zero, zero, zero, -126}, 4, -126},
        {{-126, zero, zero, zero}, 4, -126},
        {{zero, 127, zero, -3}, 4, 127},
        {{inf, -5, zero, 100}, 4, inf}, /* non-finite dominates */
        {{zero, zero, zero, inf}, 4, inf},
        {{5, inf, 6, zero}, 4, inf},
        {{zero, zero, 0, 0}, 2, zero},
        {{inf, 0, 0, 0}, 1, inf},
        {{-7, 0, 0, 0}, 1, -7},
    };
    for (size_t i = 0; i < INAGG_ARRAY_LEN(cases); i++) {
        int16_t got = next_exp_of(cases[i].ne, cases[i].world);
        CHECK_MSG(got == cases[i].want, "case %zu: next_exp %d, want %d", i, got, cases[i].want);
    }
    /* A new use of a copy starts from its first contribution, not the old maximum. */
    fixture_t f;
    fx_init(&f, 2);
    uint32_t w[1] = {1};
    wire_header_t h;
    for (uint32_t round = 0; round < 4; round++) {
        int16_t a = round < 2 ? inf : -50, b = round < 2 ? 10 : zero;
        h = hdr(0, round, 1, WIRE_FIXED32, 0, a);
        EXPECT(put_hdr(&f, &h, w), SLOT_PARTIAL);
        h = hdr(1, round, 1, WIRE_FIXED32, 0, b);
        EXPECT(put_hdr(&f, &h, w), SLOT_COMPLETE);
        CHECK_EQ_INT(slot_copy_of(&f.s, round)->next_exp, round < 2 ? inf : -50);
    }
    /* Duplicates and refused contributions do not move it. */
    h = hdr(0, 4, 1, WIRE_FIXED32, 0, -9);
    EXPECT(put_hdr(&f, &h, w), SLOT_PARTIAL);
    h = hdr(0, 4, 1, WIRE_FIXED32, 0, inf);
    EXPECT(put_hdr(&f, &h, w), SLOT_DUP_OPEN);
    h = hdr(1, 4, 1, WIRE_FIXED32, 1, inf);
    EXPECT(put_hdr(&f, &h, w), SLOT_MISMATCH);
    CHECK_EQ_INT(slot_copy_of(&f.s, 4)->next_exp, -9);
}

/* ---- randomized model check: workers following SwitchML Algorithm 4 over a bad network. */

#define MC_MAX_W 5
#define MC_SLOTS 3
#define MC_ELEMS 6
#define MC_ROUNDS 40

typedef struct mc_pkt {
    uint8_t is_result;
    uint16_t rank; /* sender (contribution) or receiver (result) */
    uint32_t slot, round;
    uint16_t count;
    int16_t exp, next_exp;
    uint8_t overflow;
    uint32_t words[MC_ELEMS]; /* network order */
} mc_pkt_t;

typedef struct mc_net {
    mc_pkt_t *q;
    size_t n, cap;
} mc_net_t;

static void mc_push(mc_net_t *net, const mc_pkt_t *p)
{
    if (net->n == net->cap) {
        net->cap = net->cap ? net->cap * 2 : 256;
        CHECK(net->cap < 1000000);
        net->q = realloc(net->q, net->cap * sizeof(*net->q));
        CHECK(net->q != NULL);
    }
    net->q[net->n++] = *p;
}

static uint16_t mc_count(uint32_t slot, uint32_t round)
{
    return (uint16_t)(1u + (slot * 5u + round) % MC_ELEMS);
}

static int16_t mc_exp(uint32_t slot, uint32_t round)
{
    return (int16_t)((int)((slot * 7u + round) % 50u) - 25);
}

static int32_t mc_val(uint64_t seed, uint32_t w, uint32_t slot, uint32_t round, uint32_t i)
{
    uint64_t st = seed ^ ((uint64_t)w << 48) ^ ((uint64_t)slot << 36) ^ ((uint64_t)round << 12) ^ i;
    return (int32_t)(util_splitmix64(&st) % 200000001u) - 100000000;
}

static int16_t mc_next(uint64_t seed, uint32_t w, uint32_t slot, uint32_t round)
{
    uint64_t st = seed ^ 0x5555u ^ ((uint64_t)w << 48) ^ ((uint64_t)slot << 36) ^ round;
    uint64_t x = util_splitmix64(&st);
    if (x % 17u == 0)
        return INT16_MIN;
    if (x % 53u == 1)
        return INT16_MAX;
    return (int16_t)((int)(x % 301u) - 150);
}

static void mc_contrib(uint64_t seed, uint32_t w, uint32_t slot, uint32_t round, mc_pkt_t *p)
{
    memset(p, 0, sizeof(*p));
    p->rank = (uint16_t)w;
    p->slot = slot;
    p->round = round;
    p->count = mc_count(slot, round);
    p->exp = mc_exp(slot, round);
    p->next_exp = mc_next(seed, w, slot, round);
    for (uint32_t i = 0; i < p->count; i++)
        p->words[i] = htonl((uint32_t)mc_val(seed, w, slot, round, i));
}

typedef struct mc_stats {
    unsigned long verdicts[SLOT_VERDICT_COUNT];
    unsigned long delivered, lost, duplicated, timeouts;
} mc_stats_t;

/* Runs MC_ROUNDS rounds on MC_SLOTS slots; if res is given, stores the result each worker
 * accepted, per slot and round (MC_ELEMS words, network order), and checks that all workers
 * got the same bytes. */
static void model_check(uint32_t world, uint64_t seed, double loss, double dup, double timeout_p,
                        mc_stats_t *st, uint32_t *res)
{
    util_rng_t rng;
    util_rng_seed(&rng, seed);
    slot_t slots[MC_SLOTS];
    uint32_t data[MC_SLOTS][2][MC_ELEMS];
    for (int s = 0; s < MC_SLOTS; s++)
        slot_init(&slots[s], world, data[s][0], data[s][1]);
    /* Worker state per slot: the round it waits on (MC_ROUNDS when done). */
    uint32_t cur[MC_MAX_W][MC_SLOTS];
    unsigned completes[MC_SLOTS][MC_ROUNDS] = {{0}};
    unsigned got[MC_MAX_W][MC_SLOTS] = {{0}};
    uint8_t got_any[MC_SLOTS][MC_ROUNDS] = {{0}};
    mc_net_t net = {0};
    mc_pkt_t p;
    for (uint32_t w = 0; w < world; w++)
        for (uint32_t s = 0; s < MC_SLOTS; s++) {
            cur[w][s] = 0;
            mc_contrib(seed, w, s, 0, &p);
            mc_push(&net, &p);
        }
    unsigned remaining = world * MC_SLOTS;
    long steps = 0;
    while (remaining > 0) {
        CHECK_MSG(++steps < 3000000, "model check did not finish (world %u seed %llu)", world,
                  (unsigned long long)seed);
        int fire_all = net.n == 0;
        if (fire_all || util_rng_double(&rng) < timeout_p) {
            /* Timers: everyone (network idle) or one random waiting worker retransmits. */
            for (uint32_t w = 0; w < world; w++)
                for (uint32_t s = 0; s < MC_SLOTS; s++) {
                    if (cur[w][s] >= MC_ROUNDS)
                        continue;
                    if (!fire_all && util_rng_next(&rng) % (world * MC_SLOTS) != 0)
                        continue;
                    mc_contrib(seed, w, s, cur[w][s], &p);
                    mc_push(&net, &p);
                    st->timeouts++;
                }
            continue;
        }
        /* Deliver a random in-flight packet: arbitrary reordering. */
        size_t k = (size_t)(util_rng_next(&rng) % net.n);
        p = net.q[k];
        if (util_rng_double(&rng) < dup) {
            st->duplicated++; /* a copy stays in flight */
        } else {
            net.q[k] = net.q[--net.n];
        }
        if (util_rng_double(&rng) < loss) {
            st->lost++;
            continue;
        }
        st->delivered++;
        if (!p.is_result) {
            wire_header_t h = {0};
            h.version = INAGG_PROTOCOL_VERSION;
            h.type = WIRE_CONTRIB;
            h.rank = p.rank;
            h.slot = p.slot;
            h.round = p.round;
            h.chunk = p.slot * 1000u + p.round;
            h.count = p.count;
            h.flags = wire_ver_of_round(p.round);
            h.dtype = WIRE_FIXED32;
            h.exp = p.exp;
            h.next_exp = p.next_exp;
            slot_t *sl = &slots[p.slot];
            enum slot_verdict v = slot_contribute(sl, world, &h, p.words);
            st->verdicts[v]++;
            CHECK_MSG(v != SLOT_AHEAD && v != SLOT_MISMATCH,
                      "protocol-following worker refused: %s (rank %u slot %u round %u)",
                      slot_verdict_name(v), p.rank, p.slot, p.round);
            if (v != SLOT_COMPLETE && v != SLOT_RESEND)
                continue;
            const slot_copy_t *c = slot_copy_of(sl, p.round);
            CHECK_EQ_INT(c->round, p.round);
            CHECK_EQ_INT(c->count, world);
            CHECK_EQ_INT(c->chunk, p.slot * 1000u + p.round);
            if (v == SLOT_COMPLETE) {
                CHECK(p.round < MC_ROUNDS);
                completes[p.slot][p.round]++;
                CHECK_MSG(completes[p.slot][p.round] == 1, "slot %u round %u completed twice",
                          p.slot, p.round);
            }
            mc_pkt_t r;
            memset(&r, 0, sizeof(r));
            r.is_result = 1;
            r.slot = p.slot;
            r.round = p.round;
            r.count = c->n_elems;
            r.exp = c->exp;
            r.next_exp = c->next_exp;
            r.overflow = c->overflow;
            memcpy(r.words, c->data, sizeof(uint32_t) * c->n_elems);
            for (uint32_t w = 0; w < world; w++) {
                if (v == SLOT_RESEND && w != p.rank)
                    continue;
                r.rank = (uint16_t)w;
                mc_push(&net, &r);
            }
        } else {
            uint32_t w = p.rank, s = p.slot;
            if (cur[w][s] != p.round) {
                /* Only results of rounds the worker already has can be late. */
                CHECK_MSG(p.round < cur[w][s], "result of round %u before worker %u sent it",
                          p.round, w);
                continue;
            }
            /* The result equals the exact integer sum, bit for bit. */
            CHECK_EQ_INT(p.count, mc_count(s, p.round));
            CHECK_EQ_INT(p.exp, mc_exp(s, p.round));
            CHECK_EQ_INT(p.overflow, 0);
            int16_t ne = INT16_MIN;
            for (uint32_t r = 0; r < world; r++) {
                int16_t x = mc_next(seed, r, s, p.round);
                if (x > ne)
                    ne = x;
            }
            CHECK_EQ_INT(p.next_exp, ne);
            for (uint32_t i = 0; i < p.count; i++) {
                int64_t sum = 0;
                for (uint32_t r = 0; r < world; r++)
                    sum += mc_val(seed, r, s, p.round, i);
                CHECK_MSG((int32_t)ntohl(p.words[i]) == (int32_t)sum,
                          "world %u slot %u round %u elem %u: %d != %lld", world, s, p.round, i,
                          (int32_t)ntohl(p.words[i]), (long long)sum);
            }
            if (res) {
                uint32_t *dst = res + ((size_t)s * MC_ROUNDS + p.round) * MC_ELEMS;
                if (got_any[s][p.round])
                    CHECK(memcmp(dst, p.words, sizeof(uint32_t) * p.count) == 0);
                memcpy(dst, p.words, sizeof(uint32_t) * p.count);
                got_any[s][p.round] = 1;
            }
            got[w][s]++;
            cur[w][s]++;
            if (cur[w][s] < MC_ROUNDS) {
                mc_contrib(seed, w, s, cur[w][s], &p);
                mc_push(&net, &p);
            } else {
                remaining--;
            }
        }
    }
    for (uint32_t s = 0; s < MC_SLOTS; s++)
        for (uint32_t r = 0; r < MC_ROUNDS; r++)
            CHECK_MSG(completes[s][r] == 1, "slot %u round %u completed %u times", s, r,
                      completes[s][r]);
    for (uint32_t w = 0; w < world; w++)
        for (uint32_t s = 0; s < MC_SLOTS; s++)
            CHECK_EQ_INT(got[w][s], MC_ROUNDS);
    /* Drain what is still in flight: late duplicates may only be stale or resent. */
    for (size_t i = 0; i < net.n; i++) {
        if (net.q[i].is_result)
            continue;
        mc_pkt_t *q = &net.q[i];
        wire_header_t h = {0};
        h.version = INAGG_PROTOCOL_VERSION;
        h.type = WIRE_CONTRIB;
        h.rank = q->rank;
        h.round = q->round;
        h.count = q->count;
        h.flags = wire_ver_of_round(q->round);
        h.dtype = WIRE_FIXED32;
        h.exp = q->exp;
        h.next_exp = q->next_exp;
        enum slot_verdict v = slot_contribute(&slots[q->slot], world, &h, q->words);
        CHECK_MSG(v == SLOT_STALE || v == SLOT_RESEND, "late packet got %s", slot_verdict_name(v));
    }
    free(net.q);
}

TEST(slot_model_check_loss_dup_reorder, 120)
{
    const uint32_t worlds[] = {2, 3, 5};
    mc_stats_t st;
    memset(&st, 0, sizeof(st));
    for (size_t wi = 0; wi < INAGG_ARRAY_LEN(worlds); wi++) {
        for (uint64_t seed = 1; seed <= 36; seed++) {
            double loss = (double)(seed % 4) * 0.1; /* 0, 0.1, 0.2, 0.3 */
            double dup = (double)((seed / 4) % 3) * 0.1; /* 0, 0.1, 0.2 */
            model_check(worlds[wi], seed * 1000003u + worlds[wi], loss, dup, 0.03, &st, NULL);
        }
    }
    /* The runs reached every verdict a protocol-following worker can cause. */
    CHECK(st.verdicts[SLOT_PARTIAL] > 0);
    CHECK(st.verdicts[SLOT_COMPLETE] > 0);
    CHECK(st.verdicts[SLOT_DUP_OPEN] > 0);
    CHECK(st.verdicts[SLOT_RESEND] > 0);
    CHECK(st.verdicts[SLOT_STALE] > 0);
    CHECK(st.lost > 0 && st.duplicated > 0 && st.timeouts > 0);
}

TEST(slot_model_check_lossy_bit_identical_to_lossless, 60)
{
    /* Same data (same seed for the values), one run without faults or timers and one with
     * heavy loss, duplication and reordering: every result is the same bytes. */
    static uint32_t clean_res[MC_SLOTS * MC_ROUNDS * MC_ELEMS];
    static uint32_t lossy_res[MC_SLOTS * MC_ROUNDS * MC_ELEMS];
    const uint32_t worlds[] = {2, 3, 5};
    for (size_t wi = 0; wi < INAGG_ARRAY_LEN(worlds); wi++) {
        uint32_t world = worlds[wi];
        mc_stats_t clean, lossy;
        memset(&clean, 0, sizeof(clean));
        memset(&lossy, 0, sizeof(lossy));
        memset(clean_res, 0, sizeof(clean_res));
        memset(lossy_res, 0xee, sizeof(lossy_res));
        model_check(world, 77, 0.0, 0.0, 0.0, &clean, clean_res);
        CHECK_EQ_INT(clean.verdicts[SLOT_COMPLETE], MC_SLOTS * MC_ROUNDS);
        CHECK_EQ_INT(clean.verdicts[SLOT_PARTIAL], MC_SLOTS * MC_ROUNDS * (world - 1));
        CHECK_EQ_INT(clean.verdicts[SLOT_DUP_OPEN] + clean.verdicts[SLOT_RESEND] +
                         clean.verdicts[SLOT_STALE],
                     0);
        model_check(world, 77, 0.3, 0.2, 0.05, &lossy, lossy_res);
        CHECK_EQ_INT(lossy.verdicts[SLOT_COMPLETE], MC_SLOTS * MC_ROUNDS);
        CHECK(lossy.lost > 0 && lossy.duplicated > 0);
        for (uint32_t s = 0; s < MC_SLOTS; s++)
            for (uint32_t r = 0; r < MC_ROUNDS; r++) {
                size_t off = ((size_t)s * MC_ROUNDS + r) * MC_ELEMS;
                CHECK_MSG(memcmp(clean_res + off, lossy_res + off,
                                 sizeof(uint32_t) * mc_count(s, r)) == 0,
                          "world %u slot %u round %u differs from lossless", world, s, r);
            }
    }
}

/* A leaf switch's slot (PROTOCOL.md section 11): a round completed here is held until the
 * upstream result; repeats drive the upstream again; the copy is not reused while held; the
 * upstream result is applied once. */
TEST(slot_leaf_hold_and_upstream_result, 5)
{
    fixture_t f;
    fx_init(&f, 2);
    EXPECT(put_val(&f, 0, 0, 4), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, 0, 4), SLOT_COMPLETE);
    slot_hold(&f.s, 0);
    EXPECT(put_val(&f, 1, 0, 4), SLOT_HELD); /* a host repeats: the partial sum goes up again */
    wire_header_t pre = hdr(0, 0, 4, WIRE_INT32, 0, 0);
    CHECK_EQ_INT(slot_precheck(&f.s, 2, &pre), SLOT_HELD);
    /* no host has round 0's result: round 1 cannot start */
    EXPECT(put_val(&f, 0, 1, 4), SLOT_AHEAD);
    /* the upstream result of round 0: another count is refused, the right one applied once */
    uint32_t up[4];
    for (int i = 0; i < 4; i++)
        up[i] = htonl((uint32_t)(1000 + i));
    wire_header_t r = hdr(0, 0, 3, WIRE_INT32, 0, 0);
    r.type = WIRE_RESULT;
    CHECK_EQ_INT(slot_upstream_result(&f.s, &r, up), SLOT_MISMATCH);
    r.count = 4;
    r.flags |= WIRE_FLAG_OVERFLOW;
    CHECK_EQ_INT(slot_upstream_result(&f.s, &r, up), SLOT_COMPLETE);
    CHECK_EQ_INT(slot_upstream_result(&f.s, &r, up), SLOT_STALE); /* a repeat */
    CHECK_EQ_INT((int32_t)ntohl(f.d0[2]), 1002);
    CHECK(f.s.copy[0].overflow == 1);
    EXPECT(put_val(&f, 0, 0, 4), SLOT_RESEND); /* complete now: the result itself */
    EXPECT(put_val(&f, 0, 1, 4), SLOT_PARTIAL);
    EXPECT(put_val(&f, 1, 1, 4), SLOT_COMPLETE);
    slot_hold(&f.s, 1);
    EXPECT(put_val(&f, 0, 2, 4), SLOT_AHEAD); /* copy 0 is not reused over held round 1 */
    r.round = 1;
    r.flags = wire_ver_of_round(1);
    r.chunk = 13;
    CHECK_EQ_INT(slot_upstream_result(&f.s, &r, up), SLOT_COMPLETE);
    EXPECT(put_val(&f, 0, 2, 4), SLOT_PARTIAL); /* now it is */
    r.round = 0;
    r.flags = wire_ver_of_round(0);
    CHECK_EQ_INT(slot_upstream_result(&f.s, &r, up), SLOT_STALE); /* late: copy 0 moved on */
}
