/*
 * test_faults.c - seeded fault injection (src/lib/transport/faults.c): spec parsing (accepted and
 * refused strings), determinism per seed, measured drop/dup frequencies against the
 * configured probabilities, the send path's reordering (a held packet is copied, survives the
 * caller reusing its buffer, and goes out after the next packet), and the receive path's
 * processing order (a permutation with drops and duplicates).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "harness.h"
#include "lib/transport/faults.h"
#include "lib/transport/transport.h"

static void parse_ok(faults_t *f, const char *spec)
{
    char err[256] = "";
    int rc = faults_parse(f, spec, err, sizeof(err));
    CHECK_MSG(rc == 0, "faults_parse(\"%s\") failed: %s", spec ? spec : "(null)", err);
}

static void parse_bad(const char *spec)
{
    faults_t f;
    char err[256] = "";
    int rc = faults_parse(&f, spec, err, sizeof(err));
    CHECK_MSG(rc == -EINVAL, "faults_parse(\"%s\") = %d, want -EINVAL", spec, rc);
    CHECK_MSG(err[0] != '\0', "faults_parse(\"%s\") gave no reason", spec);
    CHECK(!f.enabled);
    faults_free(&f);
}

TEST(faults_parse_accepts, 5)
{
    faults_t f;
    parse_ok(&f, "drop=0.1,dup=0.2,reorder=0.3,seed=5");
    CHECK(f.enabled);
    CHECK(f.drop == 0.1);
    CHECK(f.dup == 0.2);
    CHECK(f.reorder == 0.3);
    CHECK_EQ_INT(f.seed, 5);
    CHECK(f.held[0] != NULL && f.held[1] != NULL);
    CHECK_EQ_INT(f.held_len[0], -1);
    CHECK_EQ_INT(f.held_len[1], -1);
    CHECK_EQ_INT(f.dropped + f.duplicated + f.reordered, 0);
    faults_free(&f);
    CHECK(!f.enabled);
    CHECK(f.held[0] == NULL && f.held[1] == NULL);
    faults_free(&f); /* twice is harmless */

    parse_ok(&f, "");
    CHECK(!f.enabled);
    CHECK(f.drop == 0 && f.dup == 0 && f.reorder == 0);
    faults_free(&f);
    parse_ok(&f, NULL);
    CHECK(!f.enabled);
    faults_free(&f);

    /* Any subset, any order, the bounds 0 and 1 included. */
    parse_ok(&f, "dup=1");
    CHECK(f.enabled && f.dup == 1.0 && f.drop == 0 && f.reorder == 0);
    CHECK(f.held[0] == NULL); /* no reorder, no buffers */
    faults_free(&f);
    parse_ok(&f, "seed=18446744073709551615,drop=0");
    CHECK(!f.enabled); /* all probabilities zero */
    CHECK(f.seed == UINT64_MAX);
    faults_free(&f);
    parse_ok(&f, "reorder=1e-3,drop=.5");
    CHECK(f.enabled && f.reorder == 1e-3 && f.drop == 0.5);
    faults_free(&f);
    parse_ok(&f, "drop=1,dup=0,reorder=0.0");
    CHECK(f.enabled && f.drop == 1.0);
    faults_free(&f);
}

TEST(faults_parse_rejects, 5)
{
    parse_bad("bogus=0.1");
    parse_bad("drop=0.1,jitter=0.2");
    parse_bad("Drop=0.1");
    parse_bad("drop=1.5");
    parse_bad("drop=-0.1");
    parse_bad("dup=2");
    parse_bad("reorder=1.0000001");
    parse_bad("drop=nan");
    parse_bad("drop=inf");
    parse_bad("drop=abc");
    parse_bad("drop=0.1x");
    parse_bad("drop=");
    parse_bad("drop= 0.1x");
    parse_bad("seed=x");
    parse_bad("seed=5x");
    parse_bad("seed=");
    parse_bad("drop");
    parse_bad("drop0.1");
    parse_bad("drop=0.1,dup");
    parse_bad("=0.1");
    /* Longer than the parser's buffer. */
    char longspec[600];
    memset(longspec, 0, sizeof(longspec));
    for (size_t i = 0; i + 9 < sizeof(longspec) - 1; i += 9)
        memcpy(longspec + i, "drop=0.1,", 9);
    parse_bad(longspec);
    /* A refused spec leaves nothing enabled and nothing allocated. */
    faults_t f;
    char err[128];
    CHECK_EQ_INT(faults_parse(&f, "reorder=0.5,drop=7", err, sizeof(err)), -EINVAL);
    CHECK(!f.enabled);
    faults_free(&f);
}

/* One packet per buffer: a UDP address and a payload "#i". */
typedef struct msgs {
    int n;
    transport_tx_t *m;
    uint8_t (*buf)[16];
} msgs_t;

static transport_addr_t addr_of(int i)
{
    char text[64];
    snprintf(text, sizeof(text), "127.0.%d.%d:%d", (1 + i) / 256, (1 + i) % 256, 1000 + i % 5000);
    transport_addr_t a;
    CHECK(transport_parse_addr("udp", text, &a) == 0);
    return a;
}

static void msgs_make(msgs_t *ms, int n)
{
    ms->n = n;
    ms->m = calloc((size_t)n, sizeof(*ms->m));
    ms->buf = calloc((size_t)n, sizeof(*ms->buf));
    CHECK(ms->m && ms->buf);
    for (int i = 0; i < n; i++) {
        snprintf((char *)ms->buf[i], sizeof(ms->buf[i]), "#%d", i);
        ms->m[i] =
            (transport_tx_t){.head = ms->buf[i], .head_len = sizeof(ms->buf[i]), .to = addr_of(i)};
    }
}

static void msgs_free(msgs_t *ms)
{
    free(ms->m);
    free(ms->buf);
}

/* Which packet of ms an output refers to: its index, or -1 (a held copy). */
static int msg_index(const msgs_t *ms, const transport_tx_t *o)
{
    for (int i = 0; i < ms->n; i++)
        if (o->head == ms->buf[i])
            return i;
    return -1;
}

/* The packet index a held copy carries, from its bytes "#i". */
static int held_index(const transport_tx_t *o)
{
    CHECK_EQ_INT(o->body_len, 0);
    const char *p = o->head;
    CHECK(p[0] == '#');
    return atoi(p + 1);
}

TEST(faults_same_seed_same_decisions, 10)
{
    const char *spec = "drop=0.2,dup=0.3,reorder=0.25,seed=42";
    faults_t a, b, c;
    parse_ok(&a, spec);
    parse_ok(&b, spec);
    parse_ok(&c, "drop=0.2,dup=0.3,reorder=0.25,seed=43");
    int oa[64], ob[64], oc[64];
    int differ = 0;
    for (int batch = 0; batch < 200; batch++) {
        int n = 1 + batch % 32;
        int ka = faults_on_recv(&a, n, oa), kb = faults_on_recv(&b, n, ob);
        int kc = faults_on_recv(&c, n, oc);
        CHECK_EQ_INT(ka, kb);
        CHECK(memcmp(oa, ob, sizeof(int) * (size_t)ka) == 0);
        if (ka != kc || memcmp(oa, oc, sizeof(int) * (size_t)ka) != 0)
            differ = 1;
    }
    CHECK(differ); /* another seed decides otherwise */
    CHECK(a.dropped == b.dropped && a.duplicated == b.duplicated && a.reordered == b.reordered);

    /* The send path too, including what is held across calls. */
    msgs_t ms;
    msgs_make(&ms, 16);
    transport_tx_t outa[33], outb[33];
    for (int call = 0; call < 300; call++) {
        int n = 1 + call % 16;
        int ka = faults_on_send(&a, ms.m, n, outa), kb = faults_on_send(&b, ms.m, n, outb);
        CHECK_EQ_INT(ka, kb);
        for (int i = 0; i < ka; i++) {
            int ia = msg_index(&ms, &outa[i]), ib = msg_index(&ms, &outb[i]);
            CHECK_EQ_INT(ia, ib);
            if (ia < 0)
                CHECK_EQ_INT(held_index(&outa[i]), held_index(&outb[i]));
        }
    }
    CHECK(a.dropped == b.dropped && a.duplicated == b.duplicated && a.reordered == b.reordered);
    msgs_free(&ms);
    faults_free(&a);
    faults_free(&b);
    faults_free(&c);
}

/* |measured - expected| within 5 standard deviations of a binomial(n, p). */
static void check_freq(unsigned long hits, unsigned long n, double p, const char *what)
{
    double mean = (double)n * p, sd = sqrt((double)n * p * (1.0 - p));
    CHECK_MSG(fabs((double)hits - mean) <= 5.0 * sd + 1.0, "%s: %lu of %lu, expected %.0f +- %.0f",
              what, hits, n, mean, sd);
}

TEST(faults_frequencies_recv, 20)
{
    const double drops[] = {0.0, 0.01, 0.1, 0.5};
    const double dups[] = {0.0, 0.005, 0.2, 0.7};
    for (size_t i = 0; i < 4; i++) {
        char spec[96];
        snprintf(spec, sizeof(spec), "drop=%g,dup=%g,seed=%zu", drops[i], dups[i], i + 11);
        faults_t f;
        parse_ok(&f, spec);
        enum { N = 100000, B = 50 };
        int order[2 * B];
        unsigned long seen_total = 0, dropped = 0, dupd = 0;
        for (int done = 0; done < N; done += B) {
            int k = faults_on_recv(&f, B, order);
            int cnt[B];
            memset(cnt, 0, sizeof(cnt));
            for (int j = 0; j < k; j++) {
                CHECK(order[j] >= 0 && order[j] < B);
                cnt[order[j]]++;
            }
            for (int j = 0; j < B; j++) {
                CHECK(cnt[j] <= 2);
                dropped += cnt[j] == 0;
                dupd += cnt[j] == 2;
            }
            seen_total += (unsigned long)k;
        }
        CHECK_EQ_INT(f.dropped, dropped);
        CHECK_EQ_INT(f.duplicated, dupd);
        CHECK_EQ_INT(seen_total, (unsigned long)N - dropped + dupd);
        check_freq(dropped, (unsigned long)N, drops[i], "recv drop");
        check_freq(dupd, (unsigned long)N - dropped, dups[i], "recv dup");
        faults_free(&f);
    }
}

TEST(faults_frequencies_send, 20)
{
    faults_t f;
    parse_ok(&f, "drop=0.1,dup=0.05,seed=3");
    msgs_t ms;
    msgs_make(&ms, 64);
    transport_tx_t out[2 * 64 + 1];
    enum { N = 100000 };
    unsigned long sent = 0, dropped = 0, dupd = 0;
    for (int done = 0; done < N; done += 50) {
        int k = faults_on_send(&f, ms.m, 50, out);
        int cnt[50];
        memset(cnt, 0, sizeof(cnt));
        for (int j = 0; j < k; j++) {
            int idx = msg_index(&ms, &out[j]);
            CHECK(idx >= 0 && idx < 50); /* no reorder: nothing held */
            CHECK(transport_addr_equal(&out[j].to, &ms.m[idx].to));
            cnt[idx]++;
            /* Kept in order: indices never go backwards except for a duplicate. */
            if (j > 0)
                CHECK(msg_index(&ms, &out[j - 1]) <= idx);
        }
        for (int j = 0; j < 50; j++) {
            CHECK(cnt[j] <= 2);
            dropped += cnt[j] == 0;
            dupd += cnt[j] == 2;
        }
        sent += (unsigned long)k;
    }
    CHECK_EQ_INT(f.dropped, dropped);
    CHECK_EQ_INT(f.duplicated, dupd);
    CHECK_EQ_INT(sent, (unsigned long)N - dropped + dupd);
    check_freq(dropped, (unsigned long)N, 0.1, "send drop");
    check_freq(dupd, (unsigned long)N - dropped, 0.05, "send dup");
    msgs_free(&ms);
    faults_free(&f);

    /* Disabled: the messages pass through unchanged. */
    parse_ok(&f, "");
    msgs_make(&ms, 8);
    CHECK_EQ_INT(faults_on_send(&f, ms.m, 8, out), 8);
    for (int j = 0; j < 8; j++)
        CHECK(memcmp(&out[j], &ms.m[j], sizeof(out[j])) == 0);
    msgs_free(&ms);
    faults_free(&f);
}

/* One message at a time with reorder=1: A is held, B goes out followed by a copy of A; the
 * copy has A's original bytes and address even though the caller reused A's buffer. */
TEST(faults_send_reorder_holds_a_copy, 10)
{
    faults_t f;
    parse_ok(&f, "reorder=1,seed=9");
    msgs_t ms;
    msgs_make(&ms, 8);
    /* A has a header and a body: the held copy joins them. */
    uint8_t part2[5] = {'t', 'a', 'i', 'l', '!'};
    memcpy(ms.buf[0], "#0\0x", 4);
    ms.m[0].head_len = 4;
    ms.m[0].body = part2;
    ms.m[0].body_len = sizeof(part2);
    transport_tx_t out[3];

    CHECK_EQ_INT(faults_on_send(&f, &ms.m[0], 1, out), 0); /* A held */
    CHECK_EQ_INT(f.reordered, 1);
    /* The caller reuses A's buffers and address for something else. */
    memset(ms.buf[0], 'Z', sizeof(ms.buf[0]));
    memset(part2, 'Z', sizeof(part2));
    memset(&ms.m[0].to, 0xff, sizeof(ms.m[0].to));

    CHECK_EQ_INT(faults_on_send(&f, &ms.m[1], 1, out), 2);
    CHECK_EQ_INT(msg_index(&ms, &out[0]), 1);
    CHECK(transport_addr_equal(&out[0].to, &ms.m[1].to));
    CHECK_EQ_INT(msg_index(&ms, &out[1]), -1);
    CHECK_EQ_INT(out[1].body_len, 0);
    CHECK_EQ_INT(out[1].head_len, 4 + sizeof(part2));
    CHECK(memcmp(out[1].head, "#0\0xtail!", 9) == 0);
    transport_addr_t a0 = addr_of(0);
    CHECK(transport_addr_equal(&out[1].to, &a0));
    CHECK_EQ_INT(transport_addr_port(&out[1].to), 1000);

    /* And again: C held, D then C. */
    CHECK_EQ_INT(faults_on_send(&f, &ms.m[2], 1, out), 0);
    memset(ms.buf[2], 'Y', sizeof(ms.buf[2]));
    CHECK_EQ_INT(faults_on_send(&f, &ms.m[3], 1, out), 2);
    CHECK_EQ_INT(msg_index(&ms, &out[0]), 3);
    CHECK_EQ_INT(msg_index(&ms, &out[1]), -1);
    CHECK_EQ_INT(held_index(&out[1]), 2);
    CHECK_EQ_INT(transport_addr_port(&out[1].to), 1002);
    CHECK_EQ_INT(f.reordered, 2);

    /* A packet too large to copy is sent in place, not held. */
    static uint8_t big[FAULTS_MAX_PACKET + 1];
    transport_tx_t bm = ms.m[4];
    bm.head = big;
    bm.head_len = sizeof(big);
    CHECK_EQ_INT(faults_on_send(&f, &bm, 1, out), 1);
    CHECK(out[0].head == big);
    msgs_free(&ms);
    faults_free(&f);
}

/* Over a long run of random batches: every message that is not dropped goes out, a held one
 * exactly once, never before the packet after it, and held bytes are intact. */
TEST(faults_send_reorder_stream, 20)
{
    faults_t f;
    parse_ok(&f, "reorder=0.3,drop=0.05,dup=0.05,seed=1234");
    util_rng_t rng;
    util_rng_seed(&rng, 5);
    enum { TOTAL = 20000 };
    static int count[TOTAL];
    int next = 0, emitted_held = 0;
    int last_direct = -1;
    while (next < TOTAL - 64) {
        int n = 1 + (int)(util_rng_next(&rng) % 16u);
        msgs_t ms;
        msgs_make(&ms, n);
        for (int i = 0; i < n; i++)
            snprintf((char *)ms.buf[i], sizeof(ms.buf[i]), "#%d", next + i);
        transport_tx_t out[2 * 16 + 1];
        int k = faults_on_send(&f, ms.m, n, out);
        CHECK(k <= 2 * n + 1);
        for (int j = 0; j < k; j++) {
            int idx = msg_index(&ms, &out[j]);
            int id;
            if (idx >= 0) {
                id = next + idx;
                CHECK(id >= last_direct); /* direct sends keep their order */
                last_direct = id;
            } else {
                id = held_index(&out[j]);
                CHECK(id < next + n);
                /* A held packet goes out after at least one later packet. */
                CHECK(j > 0);
                CHECK(id < last_direct);
                emitted_held++;
            }
            CHECK(id >= 0 && id < TOTAL);
            count[id]++;
        }
        /* The caller reuses its buffers: clobber them. */
        memset(ms.buf, 0, sizeof(*ms.buf) * (size_t)n);
        msgs_free(&ms);
        next += n;
    }
    CHECK_EQ_INT(emitted_held + (f.held_len[0] >= 0 || f.held_len[1] >= 0), (long long)f.reordered);
    unsigned long zeros = 0, twos = 0;
    for (int i = 0; i < next; i++) {
        CHECK(count[i] <= 2);
        zeros += count[i] == 0;
        twos += count[i] == 2;
    }
    /* Dropped ones and possibly the one still held are missing. */
    int still_held = f.held_len[0] >= 0 || f.held_len[1] >= 0;
    CHECK_EQ_INT(zeros, f.dropped + (unsigned long)still_held);
    CHECK_EQ_INT(twos, f.duplicated);
    CHECK(f.reordered > 1000);
    faults_free(&f);
}

/* Per faults.h, a packet held for reordering is "sent right after the next packet that goes
 * out (on a later call if need be)": in one batch [A, B, C, D] with A held, B then A.
 * BUG (faults.c, faults_on_send): `pending` is computed once at entry, so a packet held during
 * a call is only emitted after the first packet of the *next* call; within the batch the
 * output is B, C, D and A follows the next call's first packet. This test fails until fixed. */
TEST(faults_send_reorder_within_batch, 10)
{
    faults_t f;
    parse_ok(&f, "reorder=1,seed=9");
    msgs_t ms;
    msgs_make(&ms, 4);
    transport_tx_t out[9];
    int k = faults_on_send(&f, ms.m, 4, out);
    CHECK_EQ_INT(f.reordered, 1);
    CHECK_MSG(k == 4,
              "batch of 4 with one held gave %d messages (held one not sent after the "
              "next packet of the batch)",
              k);
    CHECK_EQ_INT(msg_index(&ms, &out[0]), 1);
    CHECK_EQ_INT(msg_index(&ms, &out[1]), -1);
    CHECK_EQ_INT(held_index(&out[1]), 0);
    msgs_free(&ms);
    faults_free(&f);
}

TEST(faults_recv_permutation, 10)
{
    /* Disabled: identity. */
    faults_t f;
    parse_ok(&f, NULL);
    int order[128];
    CHECK_EQ_INT(faults_on_recv(&f, 50, order), 50);
    for (int i = 0; i < 50; i++)
        CHECK_EQ_INT(order[i], i);
    CHECK_EQ_INT(faults_on_recv(&f, 0, order), 0);
    faults_free(&f);

    /* Reorder only: a permutation, not always the identity. */
    parse_ok(&f, "reorder=0.5,seed=77");
    int moved = 0;
    for (int batch = 0; batch < 500; batch++) {
        int n = 1 + batch % 64;
        int k = faults_on_recv(&f, n, order);
        CHECK_EQ_INT(k, n);
        int cnt[64] = {0};
        for (int j = 0; j < k; j++) {
            CHECK(order[j] >= 0 && order[j] < n);
            cnt[order[j]]++;
            moved |= order[j] != j;
        }
        for (int j = 0; j < n; j++)
            CHECK_EQ_INT(cnt[j], 1);
    }
    CHECK(moved);
    CHECK(f.reordered > 0);
    CHECK_EQ_INT(f.dropped + f.duplicated, 0);
    faults_free(&f);

    /* All three: each index 0, 1 or 2 times, consistent with the counters. */
    parse_ok(&f, "reorder=0.3,drop=0.2,dup=0.2,seed=78");
    unsigned long zeros = 0, twos = 0;
    for (int batch = 0; batch < 500; batch++) {
        int n = 1 + batch % 64;
        int k = faults_on_recv(&f, n, order);
        CHECK(k >= 0 && k <= 2 * n);
        int cnt[64] = {0};
        for (int j = 0; j < k; j++) {
            CHECK(order[j] >= 0 && order[j] < n);
            cnt[order[j]]++;
        }
        for (int j = 0; j < n; j++) {
            CHECK(cnt[j] <= 2);
            zeros += cnt[j] == 0;
            twos += cnt[j] == 2;
        }
    }
    CHECK_EQ_INT(zeros, f.dropped);
    CHECK_EQ_INT(twos, f.duplicated);
    CHECK(zeros > 0 && twos > 0);
    faults_free(&f);

    /* drop=1 drops everything; dup=1 doubles everything. */
    parse_ok(&f, "drop=1");
    CHECK_EQ_INT(faults_on_recv(&f, 40, order), 0);
    faults_free(&f);
    parse_ok(&f, "dup=1");
    CHECK_EQ_INT(faults_on_recv(&f, 40, order), 80);
    for (int j = 0; j < 80; j++)
        CHECK_EQ_INT(order[j], j / 2);
    faults_free(&f);
}
