/*
 * test_p4sgd.c - the p4sgd protocol end to end: a switch child and worker children using
 * inagg_iallreduce_small / inagg_waitany / inagg_allreduce on p4sgd communicators. Proves
 * exactly-once results (int32 bit-identical to the exact sum) with many small allreduces in
 * flight under injected loss, duplication and reordering on both sides and under nftables
 * loss on loopback; reproducible float32 results; a large tensor pipelined over the slots
 * (inagg_allreduce, which runs as inagg_iallreduce's chunks);
 * that the acknowledgement phase shows in the switch's counters; the API's refusals; that
 * a dead rank fails the job with a clear error instead of a hang; and results sent once to a
 * multicast group (--multicast) on loopback, exact under faults, and only when every rank
 * offers to take them so.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/benchdata.h"
#include "harness.h"
#include "inagg.h"
#include "testutil.h"

#define SMALL_MAX_INFLIGHT 64

typedef struct small_spec {
    const char *addr, *job, *faults;
    uint32_t world, ops, elems, inflight, slots;
    uint32_t rto_us; /* the retransmission timeout, initial and floor (0: 1 ms) */
    inagg_dtype_t dtype;
    uint64_t seed;
    int victim; /* rank that exits after half its operations (-1: none) */
    int decliner; /* 1 + the rank that joins with INAGG_MULTICAST=0 (0: none) */
    int32_t *codes; /* shared: per rank result code */
    uint64_t *wrong; /* shared: per rank results that differ from the exact sum */
    uint64_t *retransmits;
    uint32_t *digest; /* shared: per rank, a hash of every result's bits (float runs) */
    char *errors; /* shared: per rank 256 bytes */
} small_spec_t;

static inagg_comm_t *join_p4(const small_spec_t *s, uint32_t rank)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = INAGG_PROTO_P4SGD;
    o.slots = s->slots ? s->slots : 16;
    o.packet_elems = 256;
    o.rto_us = s->rto_us ? s->rto_us : 1000;
    o.rto_min_us = o.rto_us;
    o.timeout_ms = 10000;
    o.faults = s->faults;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, s->addr, s->job, rank, s->world, &o, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        snprintf(s->errors + rank * 256, 256, "join: %s: %.200s", inagg_strerror(rc), detail);
        s->codes[rank] = rc;
        return NULL;
    }
    return comm;
}

typedef struct inflight {
    inagg_request_t *req;
    uint32_t op;
    int32_t send[256], recv[256];
} inflight_t;

/* Check one finished operation's result against the exact sum. */
static void check_result(const small_spec_t *s, uint32_t rank, const inflight_t *f)
{
    for (uint32_t k = 0; k < s->elems; k++) {
        uint64_t idx = (uint64_t)f->op * s->elems + k;
        if (s->dtype == INAGG_INT32) {
            if (f->recv[k] != bench_expected_i32(s->seed, s->world, idx))
                s->wrong[rank]++;
        } else {
            /* order-independent: ranks finish operations in different orders */
            s->digest[rank] += (uint32_t)bench_hash(1, (uint32_t)f->recv[k], idx);
        }
    }
}

/* A rank: `ops` small allreduces, up to `inflight` at a time, completed with waitany. */
static int small_worker(uint32_t rank, void *arg)
{
    const small_spec_t *s = arg;
    if (s->decliner == (int)rank + 1)
        setenv("INAGG_MULTICAST", "0", 1); /* this child's own environment */
    inagg_comm_t *comm = join_p4(s, rank);
    if (!comm)
        return 1;
    inflight_t *f = calloc(SMALL_MAX_INFLIGHT, sizeof(*f));
    inagg_request_t *reqs[SMALL_MAX_INFLIGHT] = {0};
    uint32_t next = 0, finished = 0;
    inagg_result_t rc = INAGG_OK;
    while (finished < s->ops && rc == INAGG_OK) {
        if ((int)rank == s->victim && next == s->ops / 2)
            _exit(3); /* dies mid-run without leaving */
        uint32_t in_use = next - finished;
        if (next < s->ops && in_use < s->inflight) {
            /* a free entry */
            uint32_t e = 0;
            while (reqs[e])
                e++;
            f[e].op = next;
            for (uint32_t k = 0; k < s->elems; k++) {
                uint64_t idx = (uint64_t)next * s->elems + k;
                if (s->dtype == INAGG_INT32)
                    f[e].send[k] = bench_value_i32(s->seed, rank, idx);
                else {
                    float v = bench_value_f32(s->seed, rank, idx);
                    memcpy(&f[e].send[k], &v, 4);
                }
            }
            rc = inagg_iallreduce_small(comm, f[e].send, f[e].recv, s->elems, s->dtype, INAGG_SUM,
                                        &reqs[e]);
            next++;
            continue;
        }
        size_t idx;
        rc = inagg_waitany(reqs, s->inflight, &idx);
        if (rc == INAGG_OK) {
            check_result(s, rank, &f[idx]);
            finished++;
        }
    }
    if (rc != INAGG_OK)
        snprintf(s->errors + rank * 256, 256, "%s: %s", inagg_strerror(rc), inagg_last_error(comm));
    s->codes[rank] = rc;
    inagg_stats_t st;
    inagg_get_stats(comm, &st);
    s->retransmits[rank] = st.retransmissions;
    for (uint32_t e = 0; e < s->inflight; e++)
        if (reqs[e])
            inagg_wait(reqs[e]);
    inagg_comm_destroy(comm);
    free(f);
    return rc != INAGG_OK;
}

static void alloc_small(small_spec_t *s)
{
    s->codes = shared_alloc(s->world * sizeof(int32_t));
    s->wrong = shared_alloc(s->world * sizeof(uint64_t));
    s->retransmits = shared_alloc(s->world * sizeof(uint64_t));
    s->digest = shared_alloc(s->world * sizeof(uint32_t));
    s->errors = shared_alloc(s->world * 256);
}

static void report_errors(const small_spec_t *s)
{
    for (uint32_t r = 0; r < s->world; r++)
        if (s->errors[r * 256])
            fprintf(stderr, "    rank %u: %s\n", r, s->errors + r * 256);
}

static uint64_t sum_u64(const uint64_t *v, uint32_t n)
{
    uint64_t t = 0;
    for (uint32_t i = 0; i < n; i++)
        t += v[i];
    return t;
}

static void run_small(small_spec_t *s, const switch_config_t *cfg, int timeout_s, char *stats,
                      size_t stats_len)
{
    test_switch_t ts;
    ts_start(&ts, cfg);
    s->addr = ts.addr;
    int failed = run_workers(s->world, small_worker, s, timeout_s);
    if (stats)
        ts_stats_json(&ts, stats, stats_len);
    ts_stop(&ts);
    report_errors(s);
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(sum_u64(s->wrong, s->world), 0);
}

TEST(p4sgd_small_allreduces_exact_and_acknowledged, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    small_spec_t s = {.job = "p4",
                      .world = 4,
                      .ops = 3000,
                      .elems = 8,
                      .inflight = 16,
                      .dtype = INAGG_INT32,
                      .seed = 5,
                      .victim = -1};
    alloc_small(&s);
    char stats[32768];
    run_small(&s, &cfg, 50, stats, sizeof(stats));
    /* Every round was aggregated once and acknowledged by every rank. */
    CHECK_EQ_INT(ts_number(stats, "rounds"), 3000);
    CHECK_EQ_INT(ts_number(stats, "contributions"), 4 * 3000);
    CHECK_EQ_INT(ts_number(stats, "acks"), 4 * 3000);
    CHECK(ts_number(stats, "confirms_sent") >= 4 * 3000);
}

/* Acknowledgements and confirmations ride on contributions and results when operations
 * follow each other (PROTOCOL.md 9.3): far fewer packets than four per rank per round. */
TEST(p4sgd_acknowledgements_ride_on_data_packets, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    small_spec_t s = {.addr = ts.addr,
                      .job = "p4ride",
                      .world = 3,
                      .ops = 2000,
                      .elems = 8,
                      .inflight = 8,
                      .dtype = INAGG_INT32,
                      .seed = 6,
                      .victim = -1};
    alloc_small(&s);
    int failed = run_workers(3, small_worker, &s, 50);
    char stats[32768];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    report_errors(&s);
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(sum_u64(s.wrong, 3), 0);
    CHECK_EQ_INT(ts_number(stats, "acks"), 3 * 2000);
    double in = ts_number(stats, "packets_in");
    /* 3 contributions per round, plus standalone acknowledgements only now and then */
    CHECK_MSG(in < 1.5 * 3 * 2000, "%.0f packets in for %d rounds: acknowledgements did not ride",
              in, 2000);
}

/* The core promise under faults on the workers and on the switch, both directions. */
static void lossy_small(double p, uint64_t seed)
{
    char wf[128], sf[128];
    lossy_fault_specs(p, seed, wf, sf, sizeof(wf));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    small_spec_t s = {.job = "p4lossy",
                      .world = 4,
                      .ops = 2000,
                      .elems = 8,
                      .inflight = 16,
                      .dtype = INAGG_INT32,
                      .seed = seed,
                      .victim = -1,
                      .faults = wf};
    alloc_small(&s);
    char stats[32768];
    run_small(&s, &cfg, 100, stats, sizeof(stats));
    CHECK_MSG(sum_u64(s.retransmits, s.world) > 0, "loss injected but nothing retransmitted");
    CHECK_EQ_INT(ts_number(stats, "rounds"), 2000);
}

TEST(p4sgd_exact_under_1pct_loss_dup_reorder, 120) { lossy_small(0.01, 31); }
TEST(p4sgd_exact_under_5pct_loss_dup_reorder, 150) { lossy_small(0.05, 32); }

/* Inline aggregation (switch_config_t.inline_attach): the switch starts no dataplane threads
 * and an owner thread runs every queue's pass, as the L2 fabric's receive thread does. The
 * owner lives in the switch's child process (set up there by the attach call). */
typedef struct inline_owner {
    pthread_t tid;
    _Atomic int run;
    int started;
    int (*pass)(void *sw, uint32_t queue);
    void *sw;
    uint32_t queues;
    _Atomic uint64_t passes;
} inline_owner_t;

static void *inline_owner_main(void *arg)
{
    inline_owner_t *o = arg;
    while (atomic_load(&o->run)) {
        int n = 0;
        for (uint32_t q = 0; q < o->queues; q++)
            n += o->pass(o->sw, q);
        atomic_fetch_add(&o->passes, 1);
        if (n == 0)
            usleep(20);
    }
    return NULL;
}

static void inline_owner_attach(void *ctx, int (*pass)(void *sw, uint32_t queue), void *sw)
{
    inline_owner_t *o = ctx;
    if (pass && !o->started) {
        o->pass = pass;
        o->sw = sw;
        atomic_store(&o->run, 1);
        o->started = pthread_create(&o->tid, NULL, inline_owner_main, o) == 0;
    } else if (!pass && o->started) {
        atomic_store(&o->run, 0); /* no pass runs once the thread is joined */
        pthread_join(o->tid, NULL);
        o->started = 0;
    }
}

static inline_owner_t inline_owner;

TEST(p4sgd_exact_with_inline_aggregation_under_loss, 120)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.02, 41, wf, sf, sizeof(wf));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    inline_owner.queues = cfg.threads;
    cfg.inline_attach = inline_owner_attach;
    cfg.attach_ctx = &inline_owner;
    small_spec_t s = {.job = "p4inline",
                      .world = 4,
                      .ops = 2000,
                      .elems = 8,
                      .inflight = 16,
                      .dtype = INAGG_INT32,
                      .seed = 41,
                      .victim = -1,
                      .faults = wf};
    alloc_small(&s);
    char stats[32768];
    /* run_small also stops the switch and fails unless it exits cleanly: the detach joins
     * the owner before the switch frees its queues */
    run_small(&s, &cfg, 100, stats, sizeof(stats));
    CHECK_EQ_INT(ts_number(stats, "rounds"), 2000);
    CHECK_EQ_INT(ts_number(stats, "acks"), 4 * 2000);
    CHECK_MSG(sum_u64(s.retransmits, s.world) > 0, "loss injected but nothing retransmitted");
}

/* float32 is added in rank order on the switch: two runs give the same bits on every rank. */
TEST(p4sgd_float_results_reproducible, 60)
{
    uint32_t digest[2][3];
    for (int run = 0; run < 2; run++) {
        char faults[64];
        snprintf(faults, sizeof(faults), "reorder=0.2,seed=%d", run + 1);
        switch_config_t cfg = SWITCH_CONFIG_INIT;
        small_spec_t s = {.job = "p4float",
                          .world = 3,
                          .ops = 500,
                          .elems = 8,
                          .inflight = 8,
                          .dtype = INAGG_FLOAT32,
                          .seed = 9,
                          .victim = -1,
                          .faults = faults};
        alloc_small(&s);
        run_small(&s, &cfg, 50, NULL, 0);
        memcpy(digest[run], s.digest, sizeof(digest[run]));
    }
    CHECK(digest[0][0] == digest[0][1] && digest[0][1] == digest[0][2]);
    CHECK(memcmp(digest[0], digest[1], sizeof(digest[0])) == 0);
}

/* nftables drops a share of the switch's UDP traffic on loopback, both directions. */
TEST(p4sgd_exact_under_nftables_loss, 150)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    nft_loss_t nft;
    nft_loss_start(&nft, "p4", ts.port, 3, &ts);
    small_spec_t s = {.addr = ts.addr,
                      .job = "p4nft",
                      .world = 3,
                      .ops = 1500,
                      .elems = 8,
                      .inflight = 16,
                      .dtype = INAGG_INT32,
                      .seed = 45,
                      .victim = -1};
    alloc_small(&s);
    int failed = run_workers(3, small_worker, &s, 120);
    int dropped = nft_loss_dropped(&nft);
    nft_loss_stop(&nft);
    ts_stop(&ts);
    report_errors(&s);
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(sum_u64(s.wrong, s.world), 0);
    CHECK_MSG(dropped, "nftables dropped nothing");
    CHECK(sum_u64(s.retransmits, s.world) > 0);
}

/* A rank that dies mid-run fails the job for the others with a clear error, not a hang. */
TEST(p4sgd_dead_rank_fails_job, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    small_spec_t s = {.addr = ts.addr,
                      .job = "p4dead",
                      .world = 3,
                      .ops = 2000,
                      .elems = 8,
                      .inflight = 8,
                      .dtype = INAGG_INT32,
                      .seed = 3,
                      .victim = 1};
    alloc_small(&s);
    pid_t pids[3];
    spawn_workers(3, small_worker, &s, pids);
    int rc0 = wait_pid(pids[0], 40), rc1 = wait_pid(pids[1], 40), rc2 = wait_pid(pids[2], 40);
    ts_stop(&ts);
    CHECK_EQ_INT(rc1, 3);
    CHECK_MSG(rc0 == 1 && rc2 == 1, "survivors exited %d and %d", rc0, rc2);
    CHECK_EQ_INT(s.codes[0], INAGG_ERR_JOB_FAILED);
    CHECK_MSG(strstr(s.errors, "rank 1") != NULL, "error does not name the dead rank: %s",
              s.errors);
}

/* inagg_allreduce on a p4sgd communicator: a large tensor pipelined over the slots, under
 * loss; and the API's refusals. */
typedef struct big_spec {
    const char *addr;
    uint32_t world;
    size_t elems;
    int32_t *codes;
    uint64_t *wrong;
} big_spec_t;

static int big_worker(uint32_t rank, void *arg)
{
    big_spec_t *b = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = INAGG_PROTO_P4SGD;
    o.slots = 32;
    o.packet_elems = 1000;
    o.faults = "drop=0.02,dup=0.02,reorder=0.02,seed=8";
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, b->addr, "p4big", rank, b->world, &o, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        fprintf(stderr, "    join: %s\n", detail);
        return 1;
    }
    int32_t *x = malloc(b->elems * 4);
    for (size_t i = 0; i < b->elems; i++)
        x[i] = bench_value_i32(77, rank, i);
    /* Refusals: no oversized small allreduce (test_event_fd.c runs inagg_iallreduce here). */
    inagg_request_t *req = NULL;
    int refusals_ok =
        inagg_iallreduce_small(comm, x, x, 1001, INAGG_INT32, INAGG_SUM, &req) ==
            INAGG_ERR_INVALID &&
        inagg_iallreduce_small(comm, x, x, 0, INAGG_INT32, INAGG_SUM, &req) == INAGG_ERR_INVALID;
    for (int it = 0; it < 2 && rc == INAGG_OK; it++) {
        for (size_t i = 0; i < b->elems; i++)
            x[i] = bench_value_i32(77, rank, i);
        rc = inagg_allreduce(comm, x, x, b->elems, INAGG_INT32, INAGG_SUM); /* in place */
        for (size_t i = 0; i < b->elems && rc == INAGG_OK; i++)
            if (x[i] != bench_expected_i32(77, b->world, i))
                b->wrong[rank]++;
    }
    b->codes[rank] = rc;
    inagg_comm_destroy(comm);
    free(x);
    return rc != INAGG_OK || !refusals_ok;
}

TEST(p4sgd_large_allreduce_pipelines_over_slots, 90)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    big_spec_t b = {.addr = ts.addr, .world = 3, .elems = 100003};
    b.codes = shared_alloc(3 * sizeof(int32_t));
    b.wrong = shared_alloc(3 * sizeof(uint64_t));
    int failed = run_workers(3, big_worker, &b, 80);
    ts_stop(&ts);
    CHECK_EQ_INT(failed, 0);
    CHECK_EQ_INT(sum_u64(b.wrong, 3), 0);
}

/* A switchml communicator runs the small call as an ordinary request (and refuses one larger
 * than a packet); a job cannot mix protocols. */
static int switchml_holder(uint32_t rank, void *arg)
{
    (void)rank;
    inagg_options_t o = INAGG_OPTIONS_INIT; /* switchml */
    o.timeout_ms = 10000;
    inagg_comm_t *comm;
    char detail[256];
    /* registers "mixed" as rank 0 of 2 and waits in the join barrier until killed */
    return inagg_comm_create(&comm, arg, "mixed", 0, 2, &o, detail, sizeof(detail)) == INAGG_OK;
}

TEST(p4sgd_protocol_mismatch_and_wrong_call_refused, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_options_t o = INAGG_OPTIONS_INIT; /* switchml */
    o.timeout_ms = 3000;
    inagg_comm_t *solo;
    char detail[256];
    CHECK_EQ_INT(inagg_comm_create(&solo, ts.addr, "solo", 0, 1, &o, detail, sizeof(detail)),
                 INAGG_OK);
    int32_t v = 1;
    inagg_request_t *req = NULL;
    CHECK_EQ_INT(inagg_iallreduce_small(solo, &v, &v, 1, INAGG_INT32, INAGG_SUM, &req), INAGG_OK);
    CHECK_EQ_INT(inagg_wait(req), INAGG_OK);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(inagg_iallreduce_small(solo, &v, &v, inagg_comm_packet_elems(solo) + 1,
                                        INAGG_INT32, INAGG_SUM, &req),
                 INAGG_ERR_INVALID);
    CHECK(strstr(inagg_last_error(solo), "packet_elems") != NULL);
    inagg_comm_destroy(solo);
    /* Rank 0 registers "mixed" as switchml; rank 1 asking for p4sgd is refused, saying why. */
    pid_t holder;
    spawn_workers(1, switchml_holder, ts.addr, &holder);
    char stats[32768] = "";
    for (int i = 0; i < 500 && !strstr(stats, "mixed"); i++) {
        ts_stats_json(&ts, stats, sizeof(stats));
        usleep(10000);
    }
    CHECK(strstr(stats, "mixed") != NULL);
    inagg_options_t p4 = INAGG_OPTIONS_INIT;
    p4.protocol = INAGG_PROTO_P4SGD;
    p4.timeout_ms = 3000;
    inagg_comm_t *comm = NULL;
    inagg_result_t rc =
        inagg_comm_create(&comm, ts.addr, "mixed", 1, 2, &p4, detail, sizeof(detail));
    kill(holder, SIGKILL);
    wait_pid(holder, 5);
    ts_stop(&ts);
    CHECK_EQ_INT(rc, INAGG_ERR_REFUSED);
    CHECK_MSG(strstr(detail, "protocol=p4sgd") != NULL, "refusal does not say why: %s", detail);
    CHECK(comm == NULL);
}

/* ---- multicast of results (PROTOCOL.md 9.6) ------------------------------------------------ */

/* One operation at a time: the ranks acknowledge in step, so every round's result, with the
 * confirmation riding on it, is the same for every rank and leaves once; the few results sent
 * again answer a rank that retransmitted. Three CPU-bound loops beside the ASan build brought
 * those resends to 271 (1 ms timeout) and 158 (5 ms, which the ranks use here) of the 2000
 * rounds: the line is 1.5 results per round, far below the 4 that unicast copies would send. */
TEST(p4sgd_results_multicast_once_per_round, 60)
{
    switch_config_t cfg = ts_mcast_config(77);
    small_spec_t s = {.job = "p4mc",
                      .world = 4,
                      .ops = 2000,
                      .elems = 8,
                      .inflight = 1,
                      .rto_us = 5000,
                      .dtype = INAGG_INT32,
                      .seed = 51,
                      .victim = -1};
    alloc_small(&s);
    char stats[32768];
    run_small(&s, &cfg, 50, stats, sizeof(stats));
    double rounds = ts_number(stats, "rounds"), mc = ts_number(stats, "results_multicast");
    double sent = ts_number(stats, "results_sent");
    CHECK_EQ_INT(rounds, 2000);
    CHECK_MSG(mc >= 0.95 * rounds, "%.0f of %.0f rounds multicast", mc, rounds);
    CHECK_MSG(sent < 1.5 * rounds, "%.0f results sent for %.0f rounds: not once each", sent,
              rounds);
    CHECK_EQ_INT(ts_number(stats, "acks"), 4 * 2000);
}

/* The core promise with the group: loss, duplication and reordering on every endpoint (the
 * workers' group endpoints too) and on the switch; lost multicast results come back as
 * unicast resends. int32 results equal the exact sums. */
TEST(p4sgd_multicast_exact_under_5pct_loss_dup_reorder, 150)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.05, 52, wf, sf, sizeof(wf));
    switch_config_t cfg = ts_mcast_config(77);
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    small_spec_t s = {.job = "p4mclossy",
                      .world = 4,
                      .ops = 2000,
                      .elems = 8,
                      .inflight = 16,
                      .dtype = INAGG_INT32,
                      .seed = 52,
                      .victim = -1,
                      .faults = wf};
    alloc_small(&s);
    char stats[32768];
    run_small(&s, &cfg, 130, stats, sizeof(stats));
    CHECK_EQ_INT(ts_number(stats, "rounds"), 2000);
    CHECK_MSG(ts_number(stats, "results_multicast") > 0, "no result went to the group");
    CHECK_MSG(ts_number(stats, "resends") > 0, "loss injected but no result re-sent");
    CHECK_MSG(sum_u64(s.retransmits, s.world) > 0, "loss injected but nothing retransmitted");
}

/* A rank that does not offer (INAGG_MULTICAST=0) keeps the whole job unicast. */
TEST(p4sgd_multicast_needs_every_rank, 60)
{
    switch_config_t cfg = ts_mcast_config(77);
    small_spec_t s = {.job = "p4mcno",
                      .world = 3,
                      .ops = 500,
                      .elems = 8,
                      .inflight = 1,
                      .dtype = INAGG_INT32,
                      .seed = 53,
                      .victim = -1,
                      .decliner = 2};
    alloc_small(&s);
    char stats[32768];
    run_small(&s, &cfg, 50, stats, sizeof(stats));
    CHECK_EQ_INT(ts_number(stats, "rounds"), 500);
    CHECK_EQ_INT(ts_number(stats, "results_multicast"), 0);
    /* a result to each rank per round, and one more per resend (a slow rank's retransmission) */
    CHECK_EQ_INT(ts_number(stats, "results_sent"), 3 * 500 + ts_number(stats, "resends"));
}
