/*
 * test_dpauth.c - the authenticated dataplane (wire/dpauth.h, PROTOCOL.md 1.4).
 *
 * The MAC itself: keys differ per rank, nonce, job and direction; every single bit flipped in
 * the header, the payload or the MAC, and another rank's key, fail the check.
 *
 * End to end, a job with a secret: a rank that holds the job's id and token (what any packet
 * shows) sends contributions in another rank's name for the rounds the job is about to use,
 * with a made-up MAC, without one, and a packet of its own with one payload bit flipped. The
 * switch counts each under its reason (bad_mac, missing_mac), exactly as many as were sent,
 * and the int32 sums stay exact. Toward the workers: a process captures the switch's results
 * on lo (root) and sends each of the first ones back to its rank with a payload bit flipped
 * or the MAC flag cleared; every rank counts exactly those as invalid and its results stay
 * exact, and the two ranks' copies of one result carry one seal (the job's down key). A job without a secret still works and counts a MAC it does not expect; a job with
 * a secret and no_dataplane_auth goes without MACs.
 */
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/util.h"
#include "lib/wire/dpauth.h"
#include "lib/wire/wire.h"
#include "lib/worker/comm.h"
#include "lib/worker/proto.h"
#include "testutil.h"

/* ---- the MAC ---------------------------------------------------------------------------- */

TEST(dpauth_keys_differ_and_every_flipped_bit_fails, 10)
{
    CHECK(dpauth_init() == 0);
    uint8_t v[32], n[16];
    for (int i = 0; i < 32; i++)
        v[i] = (uint8_t)(i * 7 + 1);
    for (int i = 0; i < 16; i++)
        n[i] = (uint8_t)(i * 13 + 5);
    dpauth_keys_t a, b, c, d, e;
    dpauth_derive(v, n, "job", 1, &a);
    dpauth_derive(v, n, "job", 1, &b);
    CHECK(memcmp(&a, &b, sizeof(a)) == 0); /* both sides derive the same */
    dpauth_derive(v, n, "job", 2, &c);
    dpauth_derive(v, n, "jobs", 1, &d);
    n[0] ^= 1;
    dpauth_derive(v, n, "job", 1, &e);
    dpauth_bind_job(&a, 0x1122334455667788ull);
    CHECK(memcmp(a.up, a.down, sizeof(a.up)) != 0);
    CHECK(memcmp(a.up, c.up, sizeof(a.up)) != 0);
    CHECK(memcmp(a.up, d.up, sizeof(a.up)) != 0);
    CHECK(memcmp(a.up, e.up, sizeof(a.up)) != 0);

    wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                       .type = WIRE_CONTRIB,
                       .job = 3,
                       .rank = 1,
                       .token = 0x1122334455667788ull,
                       .slot = 5,
                       .round = 9,
                       .count = 8,
                       .flags = WIRE_FLAG_VER | WIRE_FLAG_MAC,
                       .dtype = WIRE_INT32};
    uint8_t pkt[WIRE_HEADER_MAX + 32];
    for (int i = 0; i < 32; i++)
        pkt[WIRE_HEADER_MAX + i] = (uint8_t)i;
    wire_encode_header(&h, pkt);
    dpauth_seal_packet(a.up, pkt, 32);
    { /* the tag is PROTOCOL.md 1.4's, whichever library computed it: libsodium's reference */
        uint8_t otk[32], want[16], msg[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES + 32];
        crypto_stream_chacha20_ietf(otk, sizeof(otk), pkt + WIRE_HEADER_SIZE, a.up);
        memcpy(msg, pkt, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
        memcpy(msg + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES, pkt + WIRE_HEADER_MAX, 32);
        crypto_onetimeauth(want, msg, sizeof(msg), otk);
        CHECK(memcmp(want, pkt + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES, 16) == 0);
    }
    wire_header_t got;
    CHECK(wire_decode(pkt, sizeof(pkt), &got) == WIRE_OK);
    CHECK(dpauth_check(a.up, pkt, 32));
    { /* a payload large enough for libcrypto's Poly1305 gets the reference tag too */
        static uint8_t big[WIRE_HEADER_MAX + 2048],
            msg[WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES + 2048];
        uint8_t otk[32], want[16];
        memcpy(big, pkt, WIRE_HEADER_SIZE);
        for (int i = 0; i < 2048; i++)
            big[WIRE_HEADER_MAX + i] = (uint8_t)(i * 11);
        dpauth_seal_packet(a.up, big, 2048);
        crypto_stream_chacha20_ietf(otk, sizeof(otk), big + WIRE_HEADER_SIZE, a.up);
        memcpy(msg, big, WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES);
        memcpy(msg + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES, big + WIRE_HEADER_MAX, 2048);
        crypto_onetimeauth(want, msg, sizeof(msg), otk);
        CHECK(memcmp(want, big + WIRE_HEADER_SIZE + DPAUTH_NONCE_BYTES, 16) == 0);
        CHECK(dpauth_check(a.up, big, 2048));
    }
    CHECK(!dpauth_check(a.down, pkt, 32)); /* the other direction's key */
    CHECK(!dpauth_check(c.up, pkt, 32)); /* another rank's */
    for (size_t bit = 0; bit < sizeof(pkt) * 8; bit++) {
        pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK_MSG(!dpauth_check(a.up, pkt, 32), "bit %zu flipped still passes", bit);
        pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }
    CHECK(dpauth_check(a.up, pkt, 32));
}

/* The job-wide down key: the same for every rank of one job instance (its token), another
 * for another token, job name or verifier; a RESULT sealed once verifies for every rank (its
 * rank field is outside the MAC), every other bit flipped fails, and a confirmation keeps its
 * rank under the MAC. A member holds the down key and its own up key: with neither can it
 * make a contribution in another member's name, nor a result with its up key. */
TEST(dpauth_down_key_shared_results_verify_for_every_rank_up_keys_stay_apart, 10)
{
    CHECK(dpauth_init() == 0);
    uint8_t v[32], n1[16], n2[16];
    for (int i = 0; i < 32; i++)
        v[i] = (uint8_t)(i * 3 + 2);
    for (int i = 0; i < 16; i++) {
        n1[i] = (uint8_t)(i * 17 + 1);
        n2[i] = (uint8_t)(i * 29 + 9);
    }
    const uint64_t token = 0x0102030405060708ull;
    dpauth_keys_t r1, r2, other_token, other_job, other_v;
    dpauth_derive(v, n1, "job", 1, &r1);
    dpauth_derive(v, n2, "job", 2, &r2);
    dpauth_bind_job(&r1, token);
    dpauth_bind_job(&r2, token);
    CHECK(memcmp(r1.down, r2.down, sizeof(r1.down)) == 0); /* one key for the job */
    CHECK(memcmp(r1.up, r2.up, sizeof(r1.up)) != 0); /* one per rank */
    dpauth_derive(v, n1, "job", 1, &other_token);
    dpauth_bind_job(&other_token, token + 1);
    dpauth_derive(v, n1, "jobs", 1, &other_job);
    dpauth_bind_job(&other_job, token);
    v[5] ^= 0x40;
    dpauth_derive(v, n1, "job", 1, &other_v);
    dpauth_bind_job(&other_v, token);
    CHECK(memcmp(r1.down, other_token.down, sizeof(r1.down)) != 0);
    CHECK(memcmp(r1.down, other_job.down, sizeof(r1.down)) != 0);
    CHECK(memcmp(r1.down, other_v.down, sizeof(r1.down)) != 0);

    /* a result sealed once, for rank 1; every rank's copy differs in the rank field only */
    wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                       .type = WIRE_RESULT,
                       .job = 3,
                       .rank = 1,
                       .token = token,
                       .slot = 5,
                       .round = 9,
                       .count = 8,
                       .flags = WIRE_FLAG_VER | WIRE_FLAG_MAC,
                       .dtype = WIRE_INT32};
    uint8_t pkt[WIRE_HEADER_MAX + 32];
    for (int i = 0; i < 32; i++)
        pkt[WIRE_HEADER_MAX + i] = (uint8_t)(i * 9);
    wire_encode_header(&h, pkt);
    dpauth_seal_down(r1.down, pkt, pkt + WIRE_HEADER_MAX, 32);
    for (uint16_t rank = 0; rank < 300; rank++) {
        h.rank = rank;
        wire_encode_header(&h, pkt); /* the MAC bytes after the header stay */
        CHECK_MSG(dpauth_check_down(r2.down, pkt, 32), "rank %u's copy fails", rank);
    }
    CHECK(!dpauth_check_down(r1.up, pkt, 32));
    CHECK(!dpauth_check_down(other_token.down, pkt, 32)); /* a result of another instance */
    for (size_t bit = 0; bit < sizeof(pkt) * 8; bit++) {
        if (bit / 8 == 6 || bit / 8 == 7)
            continue; /* the rank field */
        pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        CHECK_MSG(!dpauth_check_down(r2.down, pkt, 32), "result bit %zu flipped passes", bit);
        pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    }

    /* a confirmation is one rank's: its rank field is under the MAC */
    wire_header_t cf = {.version = INAGG_PROTOCOL_VERSION,
                        .type = WIRE_CONFIRM,
                        .job = 3,
                        .rank = 1,
                        .token = token,
                        .slot = 5,
                        .round = 9};
    uint8_t cpkt[WIRE_HEADER_MAX];
    cf.flags = WIRE_FLAG_MAC;
    wire_encode_header(&cf, cpkt);
    dpauth_seal_down(r1.down, cpkt, NULL, 0);
    CHECK(dpauth_check_down(r2.down, cpkt, 0));
    cpkt[7] ^= 0x03; /* rank 1 -> 2 */
    CHECK(!dpauth_check_down(r2.down, cpkt, 0));

    /* rank 1 forges a contribution in rank 2's name with each key it holds; the switch
     * checks rank 2's contributions with r2.up */
    wire_header_t ct = {.version = INAGG_PROTOCOL_VERSION,
                        .type = WIRE_CONTRIB,
                        .job = 3,
                        .rank = 2,
                        .token = token,
                        .slot = 5,
                        .round = 9,
                        .count = 8,
                        .flags = WIRE_FLAG_VER | WIRE_FLAG_MAC,
                        .dtype = WIRE_INT32};
    wire_encode_header(&ct, pkt);
    dpauth_seal_packet(r2.up, pkt, 32);
    CHECK(dpauth_check(r2.up, pkt, 32)); /* rank 2's own passes */
    const uint8_t *held[] = {r1.up, r1.down, r1.down_base};
    for (size_t k = 0; k < sizeof(held) / sizeof(held[0]); k++) {
        wire_encode_header(&ct, pkt);
        dpauth_seal_packet(held[k], pkt, 32);
        CHECK_MSG(!dpauth_check(r2.up, pkt, 32), "rank 1's key %zu forges rank 2", k);
        wire_encode_header(&ct, pkt);
        dpauth_seal_down(held[k], pkt, pkt + WIRE_HEADER_MAX, 32);
        CHECK_MSG(!dpauth_check(r2.up, pkt, 32), "rank 1's down seal %zu forges rank 2", k);
    }
}

/* ---- forgery toward the switch ---------------------------------------------------------- */

#define F_ELEMS 4096u /* one allreduce: 16 packets of 256 */
#define F_EACH 20u /* forged packets of each kind per slot round */

typedef struct forge_spec {
    const char *addr;
    const char *job;
    const char *secret; /* NULL: a job without a secret */
    int no_dpauth; /* options.no_dataplane_auth */
    inagg_protocol_t protocol;
    int32_t *out; /* [2][F_ELEMS], shared */
    uint32_t *sent; /* [3]: forged with a made-up MAC, without one, bit-flipped */
    int *dp_auth; /* what the job said (rank 0) */
} forge_spec_t;

static int32_t forge_value(uint32_t rank, uint32_t i)
{
    return (int32_t)(i * 11u + rank * 100003u) % 70000 - 35000;
}

/* Send one datagram to the switch queue that serves `slot`. */
static int send_to_slot(int fd, const worker_params_t *p, uint32_t slot, const void *buf,
                        size_t len)
{
    struct sockaddr_in q0;
    memcpy(&q0, p->sw_queue0.u.bytes, sizeof(q0));
    struct sockaddr_in to = {
        .sin_family = AF_INET,
        .sin_port = htons(
            (uint16_t)(ntohs(q0.sin_port) + transport_slot_queue(p->sw_base, p->sw_queues, slot))),
        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    return sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len ? 0 : -1;
}

/* Rank 0, holding the job's id and token (and its own key, not rank 1's): contributions of
 * round 0 on every slot the allreduce will use, each of which would change the sum. */
static int forge(const inagg_comm_t *c, uint32_t *sent)
{
    const worker_params_t *p = (const worker_params_t *)c->ps;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
        return 20;
    uint8_t pkt[WIRE_HEADER_MAX + 256 * 4];
    uint32_t nslots = F_ELEMS / 256u;
    for (uint32_t k = 0; k < F_EACH; k++) {
        for (uint32_t s = 0; s < nslots; s++) {
            for (int kind = 0; kind < 3; kind++) {
                if (kind != 0 && !p->dp_auth)
                    continue; /* a job without MACs: only packets that carry one */
                wire_header_t h = worker_header(p, WIRE_CONTRIB, s, 0);
                h.chunk = s;
                h.count = 256;
                h.dtype = WIRE_INT32;
                h.rank = kind == 2 ? 0 : 1;
                uint32_t hdr = kind == 1 ? WIRE_HEADER_SIZE : WIRE_HEADER_MAX;
                for (uint32_t i = 0; i < 256; i++) {
                    uint32_t v = htonl(1000000u + i);
                    memcpy(pkt + hdr + 4 * i, &v, 4);
                }
                if (kind != 1)
                    h.flags |= WIRE_FLAG_MAC;
                wire_encode_header(&h, pkt);
                if (kind == 0) { /* a MAC made up without the key */
                    for (uint32_t i = 0; i < WIRE_MAC_BYTES; i++)
                        pkt[WIRE_HEADER_SIZE + i] = (uint8_t)(k * 31 + s * 7 + i);
                } else if (kind == 2) { /* its own packet, changed on the way */
                    dpauth_seal_packet(worker_shard_of(p, s)->keys.up, pkt, 256 * 4);
                    pkt[hdr + 4 * (k % 256) + 3] ^= 0x10;
                }
                if (send_to_slot(fd, p, s, pkt, hdr + 256 * 4) != 0) {
                    close(fd);
                    return 21;
                }
                sent[kind]++;
            }
        }
        usleep(1000); /* well inside the switch's socket buffer */
    }
    close(fd);
    return 0;
}

static int forge_worker(uint32_t rank, void *arg)
{
    forge_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.slots = 16;
    o.packet_elems = 256;
    o.timeout_ms = 10000;
    o.secret = s->secret;
    o.no_dataplane_auth = (uint32_t)s->no_dpauth;
    inagg_comm_t *c;
    char d[256];
    if (!s->secret)
        unsetenv("INAGG_JOB_SECRET");
    if (inagg_comm_create(&c, s->addr, s->job, rank, 2, &o, d, sizeof(d)) != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        return 1;
    }
    int rc = 0;
    if (rank == 0) {
        *s->dp_auth = ((const worker_params_t *)c->ps)->dp_auth;
        rc = forge(c, s->sent);
    }
    if (rc == 0 && inagg_barrier(c) != INAGG_OK)
        rc = 2;
    int32_t in[F_ELEMS], *out = s->out + (size_t)rank * F_ELEMS;
    for (uint32_t i = 0; i < F_ELEMS; i++)
        in[i] = forge_value(rank, i);
    if (rc == 0) {
        inagg_result_t r = inagg_allreduce(c, in, out, F_ELEMS, INAGG_INT32, INAGG_SUM);
        if (r != INAGG_OK) {
            fprintf(stderr, "    rank %u: allreduce: %s: %s\n", rank, inagg_strerror(r),
                    inagg_last_error(c));
            rc = 3;
        }
    }
    inagg_comm_destroy(c);
    return rc;
}

static double reason_count(const char *stats, const char *reason)
{
    const char *r = strstr(stats, "\"drops_by_reason\"");
    CHECK_MSG(r != NULL, "no drops_by_reason in %s", stats);
    return ts_number(r, reason);
}

/* Run the two ranks of spec (rank 0 forging) on a fresh switch: the retired job's stats. */
static void forge_run(forge_spec_t *s, char *stats, size_t cap)
{
    setenv("INAGG_UDP_GSO", "0", 1); /* the forger reads and writes one datagram at a time */
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    s->addr = ts.addr;
    s->out = shared_alloc(2 * F_ELEMS * sizeof(int32_t));
    s->sent = shared_alloc(3 * sizeof(uint32_t));
    s->dp_auth = shared_alloc(sizeof(int));
    int rc = run_workers(2, forge_worker, s, 60);
    ts_stats_json(&ts, stats, cap);
    ts_stop(&ts);
    unsetenv("INAGG_UDP_GSO");
    CHECK_EQ_INT(rc, 0);
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t i = 0; i < F_ELEMS; i++) {
            int32_t want = forge_value(0, i) + forge_value(1, i);
            CHECK_MSG(s->out[r * F_ELEMS + i] == want, "rank %u elem %u: %d != %d", r, i,
                      s->out[r * F_ELEMS + i], want);
        }
}

static void forgery_test(inagg_protocol_t protocol)
{
    char stats[32768];
    forge_spec_t s = {.job = "forged", .secret = "the job's secret", .protocol = protocol};
    forge_run(&s, stats, sizeof(stats));
    CHECK_MSG(*s.dp_auth == 1, "a job with a secret joined without dataplane MACs");
    CHECK(s.sent[0] > 0 && s.sent[1] > 0 && s.sent[2] > 0);
    CHECK_MSG(reason_count(stats, "bad_mac") == s.sent[0] + s.sent[2],
              "bad_mac %g, forged %u + flipped %u\n%s", reason_count(stats, "bad_mac"), s.sent[0],
              s.sent[2], stats);
    CHECK_MSG(reason_count(stats, "missing_mac") == s.sent[1], "missing_mac %g, sent %u\n%s",
              reason_count(stats, "missing_mac"), s.sent[1], stats);
}

TEST(dpauth_forged_and_flipped_contributions_counted_switchml, 60)
{
    forgery_test(INAGG_PROTO_SWITCHML);
}
TEST(dpauth_forged_and_flipped_contributions_counted_p4sgd, 60) { forgery_test(INAGG_PROTO_P4SGD); }

/* A job without MACs (no secret; or a secret and no_dataplane_auth) works, and a packet
 * that carries a MAC is counted and dropped (it would have changed the sum). */
static void plain_test(const char *secret)
{
    char stats[32768];
    forge_spec_t s = {.job = "plain",
                      .secret = secret,
                      .no_dpauth = secret != NULL,
                      .protocol = INAGG_PROTO_SWITCHML};
    forge_run(&s, stats, sizeof(stats));
    CHECK_MSG(*s.dp_auth == 0, "the job authenticates its dataplane");
    CHECK(s.sent[0] > 0 && s.sent[1] == 0 && s.sent[2] == 0);
    CHECK_MSG(reason_count(stats, "unexpected_mac") == s.sent[0], "unexpected_mac %g, sent %u\n%s",
              reason_count(stats, "unexpected_mac"), s.sent[0], stats);
}

TEST(dpauth_job_without_secret_works_and_counts_a_mac, 60) { plain_test(NULL); }
TEST(dpauth_turned_off_with_a_secret_works_without_macs, 60) { plain_test("a secret"); }

/* ---- forgery toward the workers --------------------------------------------------------- */

#define R_ELEMS 65536u /* one allreduce: 256 results per rank */
#define R_ITERS 12u
#define R_FORGE 200u /* results forged (the first ones captured) */

typedef struct result_forgery {
    _Atomic int stop, ready;
    _Atomic uint32_t forged;
    uint64_t invalid[2]; /* each rank's invalid_dropped at the end */
    int bad[2]; /* wrong elements per rank */
    uint32_t seal_shared, seal_apart; /* captured result pairs (one round, both ranks) whose
                                         nonce and tag agree, and those whose do not */
    uint32_t capture_drops; /* frames the capture socket lost (PACKET_STATISTICS) */
} result_forgery_t;

/* The results captured per rank, first copies only, to compare the two ranks' copies of one
 * round: the switch hands its queue to the transport grouped by rank, so one rank's copies
 * of several rounds may pass before the other rank's. */
#define RF_SEEN 512
typedef struct rf_copy {
    uint8_t covered[WIRE_HEADER_SIZE];
    uint8_t mac[WIRE_MAC_BYTES];
} rf_copy_t;
typedef struct rf_seen {
    rf_copy_t copy[RF_SEEN]; /* a ring: the newest RF_SEEN first copies */
    uint32_t n;
} rf_seen_t;

static const rf_copy_t *rf_find(const rf_seen_t *s, const uint8_t *covered)
{
    for (uint32_t i = 0; i < s->n && i < RF_SEEN; i++)
        if (memcmp(s->copy[i].covered, covered, WIRE_HEADER_SIZE) == 0)
            return &s->copy[i];
    return NULL;
}

/* A result p (MAC'd) captured: is the other rank's first copy of it sealed alike? A result
 * sent to the same rank again (a resend, sealed anew) is not compared. */
static void rf_compare_seals(rf_seen_t seen[2], const uint8_t *p, result_forgery_t *sh)
{
    uint32_t rank = (uint32_t)p[6] << 8 | p[7];
    if (rank > 1)
        return;
    uint8_t covered[WIRE_HEADER_SIZE];
    dpauth_down_header(p, covered);
    if (rf_find(&seen[rank], covered))
        return;
    rf_copy_t *mine = &seen[rank].copy[seen[rank].n++ % RF_SEEN];
    memcpy(mine->covered, covered, sizeof(covered));
    memcpy(mine->mac, p + WIRE_HEADER_SIZE, WIRE_MAC_BYTES);
    const rf_copy_t *theirs = rf_find(&seen[1 - rank], covered);
    if (theirs) {
        if (memcmp(theirs->mac, mine->mac, WIRE_MAC_BYTES) == 0)
            sh->seal_shared++;
        else
            sh->seal_apart++;
    }
}

typedef struct rf_spec {
    const char *addr;
    result_forgery_t *sh;
} rf_spec_t;

static int32_t rf_value(uint32_t rank, uint32_t it, uint32_t i)
{
    return (int32_t)(i * 5u + it * 977u + rank * 70001u) % 90000 - 45000;
}

static int rf_worker(uint32_t rank, void *arg)
{
    const rf_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 16;
    o.packet_elems = 256;
    o.timeout_ms = 20000;
    o.secret = "results are ours";
    inagg_comm_t *c;
    char d[256];
    if (inagg_comm_create(&c, s->addr, "results", rank, 2, &o, d, sizeof(d)) != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        return 1;
    }
    int32_t *in = malloc(R_ELEMS * 4), *out = malloc(R_ELEMS * 4);
    int rc = in && out ? 0 : 2;
    for (uint32_t it = 0; rc == 0 && it < R_ITERS; it++) {
        for (uint32_t i = 0; i < R_ELEMS; i++)
            in[i] = rf_value(rank, it, i);
        if (inagg_allreduce(c, in, out, R_ELEMS, INAGG_INT32, INAGG_SUM) != INAGG_OK) {
            fprintf(stderr, "    rank %u: %s\n", rank, inagg_last_error(c));
            rc = 3;
        }
        for (uint32_t i = 0; rc == 0 && i < R_ELEMS; i++)
            s->sh->bad[rank] += out[i] != rf_value(0, it, i) + rf_value(1, it, i);
    }
    inagg_stats_t st;
    if (inagg_get_stats(c, &st) == INAGG_OK)
        s->sh->invalid[rank] = st.invalid_dropped;
    free(in);
    free(out);
    inagg_comm_destroy(c);
    return rc;
}

/* Capture the switch's results on lo; send each of the first R_FORGE back to its rank, one
 * payload bit flipped (odd ones: the MAC flag cleared and the MAC left out instead). */
static int rf_forger(uint16_t port0, uint32_t nports, result_forgery_t *sh)
{
    int cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
    int out = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_ll ll = {.sll_family = AF_PACKET,
                             .sll_protocol = htons(ETH_P_IP),
                             .sll_ifindex = (int)if_nametoindex("lo")};
    if (cap < 0 || out < 0 || bind(cap, (struct sockaddr *)&ll, sizeof(ll)) != 0)
        return 10;
    atomic_store(&sh->ready, 1);
    static uint8_t f[65536];
    static rf_seen_t seen[2];
    memset(seen, 0, sizeof(seen));
    uint64_t deadline = util_now_ns() + 60ull * 1000000000ull;
    while (!atomic_load(&sh->stop) && atomic_load(&sh->forged) < R_FORGE &&
           util_now_ns() < deadline) {
        struct pollfd pf = {.fd = cap, .events = POLLIN};
        (void)poll(&pf, 1, 5);
        struct sockaddr_ll from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(cap, f, sizeof(f), 0, (struct sockaddr *)&from, &fl);
        if (n <= 0 || from.sll_pkttype == PACKET_OUTGOING || (size_t)n < sizeof(struct iphdr))
            continue;
        const struct iphdr *ip = (const void *)f;
        size_t ihl = (size_t)ip->ihl * 4u;
        if (ip->protocol != IPPROTO_UDP || (size_t)n < ihl + sizeof(struct udphdr))
            continue;
        const struct udphdr *u = (const void *)(f + ihl);
        uint16_t sport = ntohs(u->source);
        size_t len = ntohs(u->len) - sizeof(*u);
        uint8_t *p = f + ihl + sizeof(*u);
        if (sport < port0 || sport >= port0 + nports || len < WIRE_HEADER_MAX ||
            ihl + sizeof(*u) + len > (size_t)n || p[3] != WIRE_RESULT || !(p[30] & WIRE_FLAG_MAC))
            continue;
        rf_compare_seals(seen, p, sh);
        uint32_t k = atomic_load(&sh->forged);
        size_t send_len = len;
        if (k % 2 == 0) {
            p[len - 1] ^= 0x01; /* the last payload byte (or the MAC, with no payload) */
        } else {
            p[30] &= (uint8_t)~WIRE_FLAG_MAC;
            memmove(p + WIRE_HEADER_SIZE, p + WIRE_HEADER_MAX, len - WIRE_HEADER_MAX);
            send_len = len - WIRE_MAC_BYTES;
        }
        struct sockaddr_in to = {
            .sin_family = AF_INET, .sin_port = u->dest, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (sendto(out, p, send_len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)send_len)
            atomic_fetch_add(&sh->forged, 1);
    }
    struct tpacket_stats ps = {0};
    socklen_t psl = sizeof(ps);
    if (getsockopt(cap, SOL_PACKET, PACKET_STATISTICS, &ps, &psl) == 0)
        sh->capture_drops = ps.tp_drops;
    close(cap);
    close(out);
    return 0;
}

TEST(dpauth_forged_and_flipped_results_counted_by_workers, 90)
{
    if (geteuid() != 0)
        SKIP("capturing on lo needs root (AF_PACKET)");
    setenv("INAGG_UDP_GSO", "0", 1); /* the capture reads one datagram per frame */
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    result_forgery_t *sh = shared_alloc(sizeof(*sh));
    pid_t fp = fork();
    CHECK(fp >= 0);
    if (fp == 0)
        _exit(rf_forger(ts.port, 2, sh));
    for (int k = 0; k < 2000 && !atomic_load(&sh->ready); k++)
        usleep(1000);
    rf_spec_t spec = {.addr = ts.addr, .sh = sh};
    int rc = run_workers(2, rf_worker, &spec, 80);
    atomic_store(&sh->stop, 1);
    CHECK_EQ_INT(wait_pid(fp, 10), 0);
    ts_stop(&ts);
    unsetenv("INAGG_UDP_GSO");
    CHECK_EQ_INT(rc, 0);
    printf("    forged %u results; ranks counted %llu and %llu invalid\n", atomic_load(&sh->forged),
           (unsigned long long)sh->invalid[0], (unsigned long long)sh->invalid[1]);
    CHECK_MSG(atomic_load(&sh->forged) == R_FORGE, "forged only %u", atomic_load(&sh->forged));
    CHECK_MSG(sh->bad[0] == 0 && sh->bad[1] == 0, "wrong elements: %d, %d", sh->bad[0], sh->bad[1]);
    CHECK_MSG(sh->invalid[0] + sh->invalid[1] == R_FORGE, "invalid %llu + %llu, forged %u",
              (unsigned long long)sh->invalid[0], (unsigned long long)sh->invalid[1], R_FORGE);
    /* One seal per round: both ranks' copies of a result carry the same nonce and tag. A
     * resend is sealed anew, so when the capture lost a rank's first copy (a slow, sanitized
     * run overflows the capture socket) its resend is paired with the other rank's first copy
     * and differs: at most one such pair per frame the capture lost. */
    printf("    result pairs sealed once: %u, apart: %u (capture lost %u frames)\n",
           sh->seal_shared, sh->seal_apart, sh->capture_drops);
    CHECK_MSG(sh->seal_shared > 0 && sh->seal_apart <= sh->capture_drops,
              "seals shared %u, apart %u, capture lost %u", sh->seal_shared, sh->seal_apart,
              sh->capture_drops);
}
