/*
 * test_integration.c - real processes on loopback: a switch child, worker children, the
 * public API. Proves exactly-once aggregation under injected loss, duplication and
 * reordering (int32 bit-identical to the lossless run), the float32 error bound, job
 * isolation, failure of a job whose rank dies or stalls, and that foreign and malformed
 * packets are counted and dropped while a job still completes.
 */
#include <arpa/inet.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apps/bench/benchdata.h"
#include "harness.h"
#include "inagg.h"
#include "lib/base/netaddr.h"
#include "lib/base/util.h"
#include "lib/client/ctl.h"
#include "lib/wire/wire.h"
#include "lib/worker/quant.h"
#include "testutil.h"

typedef struct job_spec {
    const char *addr;
    const char *job;
    uint32_t world;
    size_t elems;
    inagg_dtype_t dtype;
    inagg_op_t op;
    inagg_float_mode_t float_mode;
    uint32_t iters;
    uint32_t slots, packet_elems, threads, timeout_ms;
    uint32_t rto_us; /* the retransmission timeout, initial and floor (0: 1 ms) */
    const char *faults;
    uint64_t seed;
    uint32_t *out; /* shared: world * elems words, each rank's last result */
    uint64_t *retransmits; /* shared: world counters */
    int32_t *codes; /* shared: world result codes */
} job_spec_t;

static inagg_options_t spec_options(const job_spec_t *s)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    if (s->slots)
        o.slots = s->slots;
    if (s->packet_elems)
        o.packet_elems = s->packet_elems;
    if (s->threads)
        o.threads = s->threads;
    if (s->timeout_ms)
        o.timeout_ms = s->timeout_ms;
    o.float_mode = s->float_mode;
    o.faults = s->faults;
    o.rto_us = s->rto_us ? s->rto_us : 1000;
    o.rto_min_us = o.rto_us;
    return o;
}

static void fill(const job_spec_t *s, uint32_t rank, void *buf)
{
    for (size_t i = 0; i < s->elems; i++) {
        if (s->dtype == INAGG_INT32)
            ((int32_t *)buf)[i] = bench_value_i32(s->seed, rank, i);
        else
            ((float *)buf)[i] = bench_value_f32(s->seed, rank, i);
    }
}

/* Join the spec's job as `rank`; NULL (reason printed, code recorded) on failure. */
static inagg_comm_t *spec_join(const job_spec_t *s, uint32_t rank)
{
    inagg_options_t o = spec_options(s);
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, s->addr, s->job, rank, s->world, &o, detail, sizeof(detail));
    if (rc == INAGG_OK)
        return comm;
    fprintf(stderr, "    rank %u: join: %s: %s\n", rank, inagg_strerror(rc), detail);
    if (s->codes)
        s->codes[rank] = rc;
    return NULL;
}

/* A rank: join, run `iters` allreduces (each result checked against the previous one),
 * store the last result and counters in shared memory. */
static int spec_worker(uint32_t rank, void *arg)
{
    const job_spec_t *s = arg;
    inagg_comm_t *comm = spec_join(s, rank);
    if (!comm)
        return 1;
    inagg_result_t rc = INAGG_OK;
    void *send = malloc(s->elems * 4), *recv = malloc(s->elems * 4), *prev = malloc(s->elems * 4);
    fill(s, rank, send);
    int bad = 0;
    for (uint32_t it = 0; it < (s->iters ? s->iters : 1) && !bad; it++) {
        memset(recv, 0xA5, s->elems * 4);
        rc = inagg_allreduce(comm, send, recv, s->elems, s->dtype, s->op);
        if (rc != INAGG_OK) {
            fprintf(stderr, "    rank %u iter %u: %s: %s\n", rank, it, inagg_strerror(rc),
                    inagg_last_error(comm));
            bad = 1;
        } else if (it > 0 && s->dtype == INAGG_INT32 && memcmp(prev, recv, s->elems * 4) != 0) {
            fprintf(stderr, "    rank %u iter %u: result differs from iteration %u\n", rank, it,
                    it - 1);
            bad = 1;
        }
        memcpy(prev, recv, s->elems * 4);
    }
    if (s->codes)
        s->codes[rank] = rc;
    if (s->out)
        memcpy(s->out + (size_t)rank * s->elems, recv, s->elems * 4);
    inagg_stats_t st;
    inagg_get_stats(comm, &st);
    if (s->retransmits)
        s->retransmits[rank] = st.retransmissions;
    inagg_comm_destroy(comm);
    free(send);
    free(recv);
    free(prev);
    return bad;
}

static void alloc_outputs(job_spec_t *s)
{
    s->out = shared_alloc((size_t)s->world * s->elems * 4);
    s->retransmits = shared_alloc(s->world * sizeof(uint64_t));
    s->codes = shared_alloc(s->world * sizeof(int32_t));
}

static uint64_t total_retransmits(const job_spec_t *s)
{
    uint64_t t = 0;
    for (uint32_t r = 0; r < s->world; r++)
        t += s->retransmits[r];
    return t;
}

/* Every rank's int32 result equals the exact sum (which is what the lossless run gives). */
static void check_int32_exact(const job_spec_t *s)
{
    for (uint32_t r = 0; r < s->world; r++)
        for (size_t i = 0; i < s->elems; i++) {
            int32_t want = bench_expected_i32(s->seed, s->world, i);
            if (s->op == INAGG_AVG)
                want /= (int32_t)s->world;
            int32_t got = (int32_t)s->out[(size_t)r * s->elems + i];
            CHECK_MSG(got == want, "rank %u element %zu: got %d, want %d", r, i, got, want);
        }
}

static void run_spec(job_spec_t *s, const switch_config_t *cfg, int timeout_s)
{
    test_switch_t ts;
    ts_start(&ts, cfg);
    s->addr = ts.addr;
    int failed = run_workers(s->world, spec_worker, s, timeout_s);
    ts_stop(&ts);
    CHECK_EQ_INT(failed, 0);
}

TEST(int32_lossless_matches_exact_sum, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    job_spec_t s = {.job = "lossless",
                    .world = 4,
                    .elems = 300000,
                    .dtype = INAGG_INT32,
                    .iters = 3,
                    .seed = 11,
                    .packet_elems = 1024,
                    .slots = 64};
    alloc_outputs(&s);
    run_spec(&s, &cfg, 50);
    check_int32_exact(&s);
}

/* The core promise: results under loss, duplication and reordering are bit-identical to
 * the lossless run. Faults on both the workers and the switch, both directions. */
static void lossy_int32(double p, uint64_t seed)
{
    char wf[128], sf[128];
    lossy_fault_specs(p, seed, wf, sf, sizeof(wf));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    job_spec_t lossless = {.job = "ref",
                           .world = 4,
                           .elems = 200000,
                           .dtype = INAGG_INT32,
                           .iters = 1,
                           .seed = seed,
                           .slots = 32,
                           .packet_elems = 256};
    alloc_outputs(&lossless);
    switch_config_t clean = SWITCH_CONFIG_INIT;
    run_spec(&lossless, &clean, 50);
    job_spec_t lossy = lossless;
    lossy.job = "lossy";
    lossy.faults = wf;
    lossy.iters = 3;
    alloc_outputs(&lossy);
    run_spec(&lossy, &cfg, 100);
    CHECK(memcmp(lossy.out, lossless.out, (size_t)lossy.world * lossy.elems * 4) == 0);
    check_int32_exact(&lossy);
    CHECK_MSG(total_retransmits(&lossy) > 0, "loss injected but nothing was retransmitted");
}

TEST(int32_bit_identical_under_1pct_loss_dup_reorder, 120) { lossy_int32(0.01, 21); }
TEST(int32_bit_identical_under_5pct_loss_dup_reorder, 150) { lossy_int32(0.05, 22); }

/* ---- switchml results to the job's multicast group (PROTOCOL.md 9.6) ---------------------- */

/* run_spec, with the switch's counters (JSON) taken before it stops. */
static void run_spec_stats(job_spec_t *s, const switch_config_t *cfg, int timeout_s, char *stats,
                           size_t len)
{
    test_switch_t ts;
    ts_start(&ts, cfg);
    s->addr = ts.addr;
    int failed = run_workers(s->world, spec_worker, s, timeout_s);
    ts_stats_json(&ts, stats, len);
    ts_stop(&ts);
    CHECK_EQ_INT(failed, 0);
}

/* Every round's result leaves once, to the group, and every rank's sum is exact. The ranks
 * wait 40 ms before they retransmit: with 1 ms, a loaded machine (ASan, the suite's parts side
 * by side) had them time out on 480 of 588 rounds although every result went to the group. */
TEST(switchml_results_multicast_once_per_round, 60)
{
    switch_config_t cfg = ts_mcast_config(78);
    job_spec_t s = {.job = "smlmc",
                    .world = 4,
                    .elems = 200000,
                    .dtype = INAGG_INT32,
                    .iters = 3,
                    .seed = 31,
                    .packet_elems = 1024,
                    .slots = 32,
                    .rto_us = 40000};
    alloc_outputs(&s);
    char stats[32768];
    run_spec_stats(&s, &cfg, 50, stats, sizeof(stats));
    check_int32_exact(&s);
    double rounds = ts_number(stats, "rounds"), mc = ts_number(stats, "results_multicast");
    double sent = ts_number(stats, "results_sent"), resends = ts_number(stats, "resends");
    CHECK_EQ_INT(rounds, 3 * ((200000 + 1023) / 1024));
    CHECK_MSG(mc == rounds, "%.0f of %.0f rounds multicast", mc, rounds);
    CHECK_MSG(sent == rounds + resends, "%.0f results sent for %.0f rounds and %.0f resends", sent,
              rounds, resends);
    /* the ranks took them from the group: a result resent now and then (a slow rank's
     * timeout), not one per round */
    CHECK_MSG(resends < rounds / 2, "%.0f resends for %.0f rounds", resends, rounds);
}

/* The core promise with the group: loss, duplication and reordering on every endpoint (the
 * group's too) and on the switch; a lost group result comes back as a unicast resend. int32
 * results are bit-identical to the exact sums. */
TEST(switchml_multicast_exact_under_5pct_loss_dup_reorder, 150)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.05, 32, wf, sf, sizeof(wf));
    switch_config_t cfg = ts_mcast_config(78);
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    job_spec_t s = {.job = "smlmclossy",
                    .world = 4,
                    .elems = 200000,
                    .dtype = INAGG_INT32,
                    .iters = 3,
                    .seed = 32,
                    .packet_elems = 256,
                    .slots = 32,
                    .faults = wf};
    alloc_outputs(&s);
    char stats[32768];
    run_spec_stats(&s, &cfg, 130, stats, sizeof(stats));
    check_int32_exact(&s);
    CHECK_MSG(ts_number(stats, "results_multicast") > 0, "no result went to the group");
    CHECK_MSG(ts_number(stats, "resends") > 0, "loss injected but no result re-sent");
    CHECK_MSG(total_retransmits(&s) > 0, "loss injected but nothing retransmitted");
}

/* A rank with two engine threads does not offer the group (each engine owns half the slots
 * and would hear every result): the job stays unicast, and exact. */
TEST(switchml_multicast_needs_one_engine, 60)
{
    switch_config_t cfg = ts_mcast_config(78);
    job_spec_t s = {.job = "smlmc2",
                    .world = 3,
                    .elems = 100000,
                    .dtype = INAGG_INT32,
                    .iters = 2,
                    .seed = 33,
                    .packet_elems = 1024,
                    .slots = 32,
                    .threads = 2};
    alloc_outputs(&s);
    char stats[32768];
    run_spec_stats(&s, &cfg, 50, stats, sizeof(stats));
    check_int32_exact(&s);
    CHECK_EQ_INT(ts_number(stats, "results_multicast"), 0);
    CHECK(ts_number(stats, "rounds") > 0);
}

static void check_float_bound(const job_spec_t *s)
{
    float *tmp = malloc(s->packet_elems * sizeof(float));
    for (size_t c = 0; c * s->packet_elems < s->elems; c++) {
        size_t off = c * s->packet_elems;
        size_t len = s->elems - off < s->packet_elems ? s->elems - off : s->packet_elems;
        int16_t m = QUANT_EXP_ZERO;
        for (uint32_t r = 0; r < s->world; r++) {
            for (size_t k = 0; k < len; k++)
                tmp[k] = bench_value_f32(s->seed, r, off + k);
            m = quant_exp_max(m, quant_block_exponent(tmp, len));
        }
        for (uint32_t r = 0; r < s->world; r++)
            for (size_t k = 0; k < len; k++) {
                double exact = bench_expected_f32(s->seed, s->world, off + k, NULL);
                float got;
                memcpy(&got, &s->out[(size_t)r * s->elems + off + k], 4);
                double bound = quant_error_bound(m, s->world, fabs(exact));
                CHECK_MSG(fabs((double)got - exact) <= bound,
                          "rank %u element %zu: got %.9g, exact %.9g, bound %.3g", r, off + k,
                          (double)got, exact, bound);
            }
    }
    free(tmp);
}

/* Fixed float mode adds integers, so the arrival order does not matter: two runs whose
 * packets arrive in different orders (reordering and loss with different seeds) give the same
 * bits (include/inagg.h, PROTOCOL.md 4.2: native mode does not promise that). */
TEST(float32_fixed_bit_identical_run_to_run_under_reordering, 120)
{
    float *out[2];
    size_t bytes = 0;
    for (int run = 0; run < 2; run++) {
        char faults[96];
        snprintf(faults, sizeof(faults), "drop=0.01,reorder=0.3,seed=%d", 40 + run);
        switch_config_t cfg = SWITCH_CONFIG_INIT;
        job_spec_t s = {.job = run ? "fixed-b" : "fixed-a",
                        .world = 4,
                        .elems = 60000,
                        .dtype = INAGG_FLOAT32,
                        .float_mode = INAGG_FLOAT_FIXED,
                        .iters = 1,
                        .seed = 33,
                        .slots = 32,
                        .packet_elems = 256,
                        .faults = faults};
        alloc_outputs(&s);
        run_spec(&s, &cfg, 100);
        bytes = (size_t)s.world * s.elems * 4;
        out[run] = (float *)s.out;
    }
    CHECK_MSG(memcmp(out[0], out[1], bytes) == 0, "two runs of the same inputs differ");
}

TEST(float32_fixed_point_within_bound_under_loss, 120)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    job_spec_t s = {.job = "float",
                    .world = 3,
                    .elems = 100000,
                    .dtype = INAGG_FLOAT32,
                    .iters = 2,
                    .seed = 31,
                    .slots = 32,
                    .packet_elems = 512,
                    .faults = "drop=0.02,dup=0.02,reorder=0.02,seed=4"};
    alloc_outputs(&s);
    run_spec(&s, &cfg, 100);
    check_float_bound(&s);
    /* Every rank got the same bits. */
    for (uint32_t r = 1; r < s.world; r++)
        CHECK(memcmp(s.out, s.out + (size_t)r * s.elems, s.elems * 4) == 0);
}

/* Native float add is exact for small integers, whatever the order of arrival. */
static int native_worker(uint32_t rank, void *arg)
{
    job_spec_t *s = arg;
    inagg_comm_t *comm = spec_join(s, rank);
    if (!comm)
        return 1;
    float *x = malloc(s->elems * 4);
    for (size_t i = 0; i < s->elems; i++)
        x[i] = (float)((int)(i % 1000) - 500 + (int)rank);
    int rc = inagg_allreduce(comm, x, x, s->elems, INAGG_FLOAT32, INAGG_SUM); /* in place */
    if (rc != INAGG_OK)
        fprintf(stderr, "    rank %u: %s: %s\n", rank, inagg_strerror(rc), inagg_last_error(comm));
    for (size_t i = 0; rc == INAGG_OK && i < s->elems; i++) {
        int w = (int)s->world;
        float want = (float)(w * ((int)(i % 1000) - 500) + w * (w - 1) / 2);
        if (x[i] != want) {
            fprintf(stderr, "    rank %u element %zu: got %g, want %g\n", rank, i, (double)x[i],
                    (double)want);
            rc = -100;
        }
    }
    inagg_comm_destroy(comm);
    free(x);
    return rc != INAGG_OK;
}

TEST(float32_native_exact_in_place, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    job_spec_t s = {.job = "native",
                    .world = 4,
                    .elems = 50000,
                    .float_mode = INAGG_FLOAT_NATIVE,
                    .faults = "drop=0.01,seed=9"};
    test_switch_t ts;
    ts_start(&ts, &cfg);
    s.addr = ts.addr;
    CHECK_EQ_INT(run_workers(4, native_worker, &s, 50), 0);
    ts_stop(&ts);
}

TEST(int32_average_and_threads, 90)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    job_spec_t s = {.job = "avg",
                    .world = 3,
                    .elems = 123457,
                    .dtype = INAGG_INT32,
                    .op = INAGG_AVG,
                    .iters = 2,
                    .seed = 5,
                    .threads = 2,
                    .slots = 16,
                    .packet_elems = 1000,
                    .faults = "drop=0.01,seed=3"};
    alloc_outputs(&s);
    run_spec(&s, &cfg, 80);
    check_int32_exact(&s);
}

/* Two jobs at once on one switch, different world sizes and data: each gets its own sum. */
TEST(two_concurrent_jobs_are_isolated, 90)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    job_spec_t a = {.addr = ts.addr,
                    .job = "job-a",
                    .world = 2,
                    .elems = 100000,
                    .dtype = INAGG_INT32,
                    .iters = 4,
                    .seed = 100,
                    .slots = 32};
    job_spec_t b = {.addr = ts.addr,
                    .job = "job-b",
                    .world = 3,
                    .elems = 70000,
                    .dtype = INAGG_INT32,
                    .iters = 4,
                    .seed = 200,
                    .slots = 32,
                    .packet_elems = 256};
    alloc_outputs(&a);
    alloc_outputs(&b);
    pid_t pa[2], pb[3];
    spawn_workers(2, spec_worker, &a, pa);
    spawn_workers(3, spec_worker, &b, pb);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(wait_pid(pa[i], 80), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(wait_pid(pb[i], 80), 0);
    ts_stop(&ts);
    check_int32_exact(&a);
    check_int32_exact(&b);
}

/* Async: several requests in flight complete in order with the right results. */
static int async_worker(uint32_t rank, void *arg)
{
    job_spec_t *s = arg;
    inagg_comm_t *comm = spec_join(s, rank);
    if (!comm)
        return 1;
    enum { N = 6, E = 5000 };
    static int32_t in[N][E], out[N][E];
    inagg_request_t *req[N];
    for (int k = 0; k < N; k++) {
        for (int i = 0; i < E; i++)
            in[k][i] = k * 1000 + i + (int32_t)rank;
        if (inagg_iallreduce(comm, in[k], out[k], E, INAGG_INT32, INAGG_SUM, &req[k]) != INAGG_OK)
            return 2;
    }
    int done = 0;
    for (int spins = 0; spins < 100000 && !done; spins++) {
        if (inagg_test(req[N - 1], &done) != INAGG_OK)
            return 3;
        if (!done)
            usleep(100);
    }
    for (int k = 0; k < N; k++)
        if (inagg_wait(req[k]) != INAGG_OK)
            return 4;
    int32_t w = (int32_t)s->world;
    for (int k = 0; k < N; k++)
        for (int i = 0; i < E; i++)
            if (out[k][i] != w * (k * 1000 + i) + w * (w - 1) / 2)
                return 5;
    if (inagg_barrier(comm) != INAGG_OK)
        return 6;
    inagg_comm_destroy(comm);
    return 0;
}

TEST(async_requests_overlap_and_complete_in_order, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    job_spec_t s = {.addr = ts.addr, .job = "async", .world = 3, .slots = 8, .packet_elems = 128};
    CHECK_EQ_INT(run_workers(3, async_worker, &s, 50), 0);
    ts_stop(&ts);
}

/* A rank that dies makes the others fail with a clear error, quickly, instead of hanging. */
static int victim_worker(uint32_t rank, void *arg)
{
    job_spec_t *s = arg;
    inagg_comm_t *comm = spec_join(s, rank);
    if (!comm)
        return 10;
    int32_t x[1000] = {0}, y[1000];
    if (inagg_allreduce(comm, x, y, 1000, INAGG_INT32, INAGG_SUM) != INAGG_OK)
        return 11;
    /* Every rank has its first result before the victim goes: a victim that died as soon as
     * its own result arrived would fail the job while the others still wait for theirs. */
    if (inagg_barrier(comm) != INAGG_OK)
        return 13;
    if (rank == s->world - 1) {
        if (s->iters == 1)
            raise(SIGKILL); /* dies: its connection closes */
        raise(SIGSTOP); /* hangs: alive but silent */
        /* resumed after the others gave up and left: it is told that it was the silent one
         * and the job failed, not that another rank left */
        inagg_result_t rc = inagg_allreduce(comm, x, y, 1000, INAGG_INT32, INAGG_SUM);
        const char *why = inagg_last_error(comm);
        int ok = rc == INAGG_ERR_JOB_FAILED && strstr(why, "this rank (2) sent nothing for") &&
                 strstr(why, "ranks 0,1 were waiting on it") && !strstr(why, "left");
        if (!ok)
            fprintf(stderr, "    resumed rank %u: got %s (%s)\n", rank, inagg_strerror(rc), why);
        inagg_comm_destroy(comm);
        return ok ? 0 : 13;
    }
    uint64_t t0 = util_now_ns();
    inagg_result_t rc = inagg_allreduce(comm, x, y, 1000, INAGG_INT32, INAGG_SUM);
    double secs = (double)(util_now_ns() - t0) / 1e9;
    const char *why = inagg_last_error(comm);
    int ok = rc == INAGG_ERR_JOB_FAILED && strstr(why, "rank 2") != NULL &&
             (s->iters == 1 || strstr(why, "while ranks 0,1 were waiting on it") != NULL);
    if (!ok)
        fprintf(stderr, "    rank %u: got %s (%s) after %.2f s\n", rank, inagg_strerror(rc), why,
                secs);
    if (ok && secs > (s->iters == 1 ? 3.0 : s->timeout_ms / 1000.0 + 3.0)) {
        fprintf(stderr, "    rank %u: failure took %.2f s\n", rank, secs);
        ok = 0;
    }
    /* Later calls fail at once with the same reason. */
    if (ok && inagg_allreduce(comm, x, y, 1000, INAGG_INT32, INAGG_SUM) != INAGG_ERR_JOB_FAILED)
        ok = 0;
    inagg_comm_destroy(comm);
    return ok ? 0 : 12;
}

static void victim_test(int stop_instead_of_kill)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    job_spec_t s = {.addr = ts.addr,
                    .job = "victim",
                    .world = 3,
                    .iters = stop_instead_of_kill ? 2 : 1,
                    .timeout_ms = 1500,
                    .slots = 4};
    pid_t p[3];
    spawn_workers(3, victim_worker, &s, p);
    CHECK_EQ_INT(wait_pid(p[0], 30), 0);
    CHECK_EQ_INT(wait_pid(p[1], 30), 0);
    if (stop_instead_of_kill) {
        kill(p[2], SIGCONT);
        CHECK_EQ_INT(wait_pid(p[2], 20), 0);
    } else {
        kill(p[2], SIGKILL);
        wait_pid(p[2], 5);
    }
    /* The switch carries on: a new job on it still works. */
    job_spec_t after = {.addr = ts.addr,
                        .job = "after",
                        .world = 2,
                        .elems = 1000,
                        .dtype = INAGG_INT32,
                        .seed = 1};
    alloc_outputs(&after);
    CHECK_EQ_INT(run_workers(2, spec_worker, &after, 30), 0);
    check_int32_exact(&after);
    ts_stop(&ts);
}

/* A barrier that one rank never reaches fails the job once it waited the job's timeout, and
 * every rank that waits is told which ranks did not arrive. */
static int barrier_worker(uint32_t rank, void *arg)
{
    job_spec_t *s = arg;
    inagg_comm_t *comm = spec_join(s, rank);
    if (!comm)
        return 10;
    if (rank == s->world - 1) { /* never arrives: busy elsewhere past the timeout */
        usleep(4000000);
        inagg_comm_destroy(comm);
        return 0;
    }
    uint64_t t0 = util_now_ns();
    inagg_result_t rc = inagg_barrier(comm);
    double secs = (double)(util_now_ns() - t0) / 1e9;
    const char *why = inagg_last_error(comm);
    int ok = rc == INAGG_ERR_JOB_FAILED && strstr(why, "barrier: rank 2 did not arrive") &&
             strstr(why, "2 of 3 ranks did") && secs < s->timeout_ms / 1000.0 + 1.5;
    if (!ok)
        fprintf(stderr, "    rank %u: got %s (%s) after %.2f s\n", rank, inagg_strerror(rc), why,
                secs);
    inagg_comm_destroy(comm);
    return ok ? 0 : 11;
}

TEST(barrier_timeout_names_the_missing_ranks, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    job_spec_t s = {.addr = ts.addr, .job = "late", .world = 3, .timeout_ms = 1500, .slots = 4};
    CHECK_EQ_INT(run_workers(3, barrier_worker, &s, 20), 0);
    ts_stop(&ts);
}

/* A rank stopped after the job's last collective, resumed after the others left with LEAVE:
 * those ranks are done, not silent, so the switch does not fail the job blaming them ("rank 0
 * sent nothing ...; it had left the job"); the resumed rank's next call, which nobody else
 * makes, ends at its own timeout. */
static int leftover_worker(uint32_t rank, void *arg)
{
    job_spec_t *s = arg;
    inagg_comm_t *comm = spec_join(s, rank);
    if (!comm)
        return 10;
    int32_t x[1000] = {0}, y[1000];
    if (inagg_allreduce(comm, x, y, 1000, INAGG_INT32, INAGG_SUM) != INAGG_OK)
        return 11;
    if (rank == 0) {
        inagg_comm_destroy(comm);
        return 0;
    }
    raise(SIGSTOP);
    inagg_result_t rc = inagg_allreduce(comm, x, y, 1000, INAGG_INT32, INAGG_SUM);
    const char *why = inagg_last_error(comm);
    int ok = rc == INAGG_ERR_TIMEOUT && !strstr(why, "rank 0 sent nothing") && !strstr(why, "left");
    if (!ok)
        fprintf(stderr, "    resumed rank %u: got %s (%s)\n", rank, inagg_strerror(rc), why);
    inagg_comm_destroy(comm);
    return ok ? 0 : 12;
}

TEST(resumed_rank_not_told_a_rank_that_left_was_silent, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    job_spec_t s = {.addr = ts.addr, .job = "leftover", .world = 2, .timeout_ms = 1500, .slots = 4};
    pid_t p[2];
    spawn_workers(2, leftover_worker, &s, p);
    CHECK_EQ_INT(wait_pid(p[0], 20), 0);
    usleep(2500000); /* rank 1 stays stopped past the job's timeout */
    kill(p[1], SIGCONT);
    CHECK_EQ_INT(wait_pid(p[1], 20), 0);
    ts_stop(&ts);
}

TEST(killed_worker_fails_job_with_clear_error, 60) { victim_test(0); }
TEST(stalled_worker_fails_job_after_timeout, 60) { victim_test(1); }

/* Garbage aimed at the switch is counted per reason and dropped; the job still completes. */
static void send_raw(int fd, const struct sockaddr_in *to, const void *buf, size_t len)
{
    ssize_t n = sendto(fd, buf, len, 0, (const struct sockaddr *)to, sizeof(*to));
    (void)n;
}

static int spray_worker(uint32_t rank, void *arg)
{
    (void)rank;
    const test_switch_t *ts = arg;
    struct sockaddr_in to;
    netaddr_parse(ts->addr, 0, &to);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    util_rng_t rng;
    util_rng_seed(&rng, 77);
    uint8_t buf[2048];
    for (int i = 0; i < 3000; i++) {
        wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                           .type = WIRE_CONTRIB,
                           .job = 1,
                           .rank = 0,
                           .token = 12345,
                           .slot = 0,
                           .round = 0,
                           .count = 4};
        size_t len = WIRE_HEADER_SIZE + 16;
        memset(buf, 0, sizeof(buf));
        switch (i % 6) {
            case 0: /* random bytes */
                for (size_t k = 0; k < 100; k++)
                    buf[k] = (uint8_t)util_rng_next(&rng);
                len = 1 + util_rng_next(&rng) % 100;
                send_raw(fd, &to, buf, len);
                continue;
            case 1: h.job = 999; break; /* unknown job */
            case 2: break; /* job 1 exists; wrong token */
            case 3: h.count = 100; break; /* length disagrees with count */
            case 4: h.type = 7; break; /* bad type */
            case 5: h.flags = 0x80; break; /* unknown flag */
        }
        wire_encode_header(&h, buf);
        send_raw(fd, &to, buf, len);
        if (i % 100 == 0)
            usleep(1000);
    }
    close(fd);
    return 0;
}

TEST(foreign_and_malformed_packets_are_counted_and_dropped, 90)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    job_spec_t s = {.addr = ts.addr,
                    .job = "target",
                    .world = 2,
                    .elems = 200000,
                    .dtype = INAGG_INT32,
                    .iters = 5,
                    .seed = 8,
                    .slots = 16};
    alloc_outputs(&s);
    pid_t workers[2], spray;
    spawn_workers(2, spec_worker, &s, workers);
    spawn_workers(1, spray_worker, &ts, &spray);
    CHECK_EQ_INT(wait_pid(spray, 60), 0);
    for (int i = 0; i < 2; i++)
        CHECK_EQ_INT(wait_pid(workers[i], 60), 0);
    check_int32_exact(&s);
    char stats[16384];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    CHECK_MSG(ts_number(stats, "unknown_job") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "bad_token") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "bad_length") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "bad_type") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "bad_flags") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "bad_magic") + ts_number(stats, "short") > 0, "%s", stats);
}

/* Admission: what does not fit is refused with a reason. */
static int join_expect(const char *addr, const char *job, uint32_t rank, uint32_t world,
                       uint32_t slots, inagg_result_t want, const char *want_text)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = slots;
    o.timeout_ms = 3000;
    inagg_comm_t *c;
    char d[256];
    inagg_result_t rc = inagg_comm_create(&c, addr, job, rank, world, &o, d, sizeof(d));
    if (rc == INAGG_OK)
        inagg_comm_destroy(c);
    if (rc != want || (want_text && !strstr(d, want_text))) {
        fprintf(stderr, "    join %s rank %u/%u: got %s '%s', want %s '%s'\n", job, rank, world,
                inagg_strerror(rc), d, inagg_strerror(want), want_text ? want_text : "");
        return 1;
    }
    return 0;
}

static int holder_worker(uint32_t rank, void *arg)
{
    const char *addr = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 100;
    o.timeout_ms = 20000;
    inagg_comm_t *c;
    char d[256];
    (void)rank;
    /* Joins a 2-rank job as rank 0 and waits (rank 1 never comes: JOINING for 20 s). */
    inagg_result_t rc = inagg_comm_create(&c, addr, "holder", 0, 2, &o, d, sizeof(d));
    return rc == INAGG_OK ? 0 : 1;
}

TEST(admission_refusals_have_reasons, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.total_slots = 150;
    cfg.max_job_slots = 150; /* the quotas have their own test (test_control.c) */
    cfg.max_addr_slots = 300;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    pid_t holder;
    spawn_workers(1, holder_worker, ts.addr, &holder);
    /* Wait until the holder's job is registered (visible in the stats). */
    char stats[8192] = "";
    for (int i = 0; i < 500 && !strstr(stats, "holder"); i++) {
        ts_stats_json(&ts, stats, sizeof(stats));
        usleep(10000);
    }
    CHECK(strstr(stats, "holder") != NULL);
    CHECK_EQ_INT(join_expect(ts.addr, "holder", 0, 2, 100, INAGG_ERR_REFUSED, "duplicate rank"), 0);
    CHECK_EQ_INT(join_expect(ts.addr, "holder", 1, 2, 64, INAGG_ERR_REFUSED, "parameter mismatch"),
                 0);
    CHECK_EQ_INT(join_expect(ts.addr, "big", 0, 1, 100, INAGG_ERR_REFUSED, "pool exhausted"), 0);
    CHECK_EQ_INT(join_expect(ts.addr, "ok", 0, 1, 50, INAGG_OK, NULL), 0);
    /* last: another world size fails the joining job for its ranks too (the holder) */
    CHECK_EQ_INT(
        join_expect(ts.addr, "holder", 1, 3, 100, INAGG_ERR_REFUSED, "world-size mismatch"), 0);
    /* A worker of another protocol version. */
    struct sockaddr_in a;
    netaddr_parse(ts.addr, 0, &a);
    int fd = ctl_connect(&a, 2000);
    CHECK(fd >= 0);
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX];
    CHECK(ctl_write_line(fd, "JOIN version=99 job=x rank=0 world=1 slots=1 elems=1", 1000) == 0);
    CHECK(ctl_read_line(fd, &rd, line, sizeof(line), 2000) == 0);
    CHECK_MSG(strncmp(line, "ERR version", 11) == 0, "%s", line);
    close(fd);
    kill(holder, SIGKILL);
    wait_pid(holder, 5);
    ts_stop(&ts);
}

TEST(join_times_out_naming_missing_ranks, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 500;
    inagg_comm_t *c;
    char d[256];
    uint64_t t0 = util_now_ns();
    inagg_result_t rc = inagg_comm_create(&c, ts.addr, "lonely", 1, 3, &o, d, sizeof(d));
    double secs = (double)(util_now_ns() - t0) / 1e9;
    CHECK_EQ_INT(rc, INAGG_ERR_TIMEOUT);
    CHECK_MSG(strstr(d, "missing ranks: 0,2") != NULL, "%s", d);
    CHECK(secs < 3.0);
    ts_stop(&ts);
}

TEST(no_switch_gives_connection_error, 20)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 1000;
    inagg_comm_t *c;
    char d[256];
    /* Port 1 on loopback: nothing listens there. */
    inagg_result_t rc = inagg_comm_create(&c, "127.0.0.1:1", "x", 0, 1, &o, d, sizeof(d));
    CHECK_EQ_INT(rc, INAGG_ERR_CONNECTION);
    CHECK(strstr(d, "cannot connect") != NULL);
}

TEST(api_rejects_bad_arguments, 20)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    inagg_comm_t *c;
    char d[256];
    CHECK_EQ_INT(inagg_comm_create(NULL, "127.0.0.1:1", "x", 0, 1, &o, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_comm_create(&c, "127.0.0.1:1", "x", 2, 2, &o, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_comm_create(&c, "127.0.0.1:1", "has space", 0, 1, &o, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_comm_create(&c, "no-port", "x", 0, 1, &o, d, sizeof(d)), INAGG_ERR_INVALID);
    inagg_options_t bad = o;
    bad.packet_elems = INAGG_MAX_PACKET_ELEMS + 1;
    CHECK_EQ_INT(inagg_comm_create(&c, "127.0.0.1:1", "x", 0, 1, &bad, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK(strstr(d, "packet_elems") != NULL);
    bad = o;
    bad.struct_size = 8;
    CHECK_EQ_INT(inagg_comm_create(&c, "127.0.0.1:1", "x", 0, 1, &bad, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_iallreduce(NULL, NULL, NULL, 1, INAGG_INT32, INAGG_SUM, NULL),
                 INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_wait(NULL), INAGG_ERR_INVALID);
    for (int code = 0; code >= -12; code--)
        CHECK(strcmp(inagg_strerror((inagg_result_t)code), "unknown result code") != 0);
    CHECK(strcmp(inagg_strerror((inagg_result_t)-99), "unknown result code") == 0);
    CHECK_EQ_INT(inagg_version(), INAGG_VERSION_NUMBER);
}

/* A fault spec the engines cannot parse is the caller's mistake, whichever protocol's engine
 * finds it (the engine says -EINVAL; nothing matches on the message). */
TEST(bad_fault_spec_is_invalid_for_both_protocols, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    const inagg_protocol_t protos[] = {INAGG_PROTO_SWITCHML, INAGG_PROTO_P4SGD};
    const char *const jobs[] = {"badfaults-sml", "badfaults-p4"};
    for (int i = 0; i < 2; i++) {
        inagg_options_t o = INAGG_OPTIONS_INIT;
        o.protocol = protos[i];
        o.timeout_ms = 3000;
        o.faults = "drop=2";
        inagg_comm_t *c = NULL;
        char d[256] = "";
        CHECK_EQ_INT(inagg_comm_create(&c, ts.addr, jobs[i], 0, 1, &o, d, sizeof(d)),
                     INAGG_ERR_INVALID);
        CHECK_MSG(strstr(d, "bad fault spec") != NULL, "%s", d);
        CHECK(c == NULL);
    }
    ts_stop(&ts);
}

/* options.transport chooses the transport and outranks $INAGG_TRANSPORT; a caller built
 * before the field existed (smaller struct_size) gets the environment's or udp; the
 * communicator's transport counters are versioned by size. */
TEST(options_transport_and_transport_stats, 40)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 3000;
    o.packet_elems = 64;
    inagg_comm_t *c = NULL;
    char d[256] = "";
    o.transport = "bogus";
    CHECK_EQ_INT(inagg_comm_create(&c, ts.addr, "tp-opt", 0, 1, &o, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "unknown transport 'bogus'") != NULL, "%s", d);
    /* an older caller's struct ends before `transport`: the environment's choice applies */
    setenv("INAGG_TRANSPORT", "bogus2", 1);
    inagg_options_t old = o;
    old.transport = "udp"; /* beyond its struct_size: must not be read */
    old.struct_size = (uint32_t)offsetof(inagg_options_t, transport);
    CHECK_EQ_INT(inagg_comm_create(&c, ts.addr, "tp-old", 0, 1, &old, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "unknown transport 'bogus2'") != NULL, "%s", d);
    /* the option outranks the environment */
    o.transport = "udp";
    o.faults = "drop=0.3,seed=5";
    o.rto_us = o.rto_min_us = 1000;
    CHECK_EQ_INT(inagg_comm_create(&c, ts.addr, "tp-udp", 0, 1, &o, d, sizeof(d)), INAGG_OK);
    unsetenv("INAGG_TRANSPORT");
    if (!c) {
        ts_stop(&ts);
        return;
    }
    int32_t in[4096], out[4096];
    for (int i = 0; i < 4096; i++)
        in[i] = i;
    CHECK_EQ_INT(inagg_allreduce(c, in, out, 4096, INAGG_INT32, INAGG_SUM), INAGG_OK);
    CHECK(memcmp(in, out, sizeof(in)) == 0);
    inagg_transport_stats_t st;
    memset(&st, 0xff, sizeof(st));
    st.struct_size = sizeof(st);
    CHECK_EQ_INT(inagg_get_transport_stats(c, &st), INAGG_OK);
    CHECK_EQ_INT(st.struct_size, sizeof(st));
    CHECK_MSG(strcmp(st.transport, "udp") == 0, "%s", st.transport);
    CHECK_EQ_INT(st.ncounters, 7); /* udp's own: its GSO and GRO (gso_available, ...) */
    CHECK_MSG(st.fault_dropped > 0, "dropped %llu", (unsigned long long)st.fault_dropped);
    CHECK(strcmp(inagg_transport_counter_name(c, 0), "gso_available") == 0);
    CHECK(inagg_transport_counter_name(c, 7) == NULL);
    /* a caller that knows only the first fields gets only those */
    inagg_transport_stats_t head;
    memset(&head, 0xee, sizeof(head));
    head.struct_size = (uint32_t)offsetof(inagg_transport_stats_t, fault_dropped);
    CHECK_EQ_INT(inagg_get_transport_stats(c, &head), INAGG_OK);
    CHECK_EQ_INT(head.struct_size, offsetof(inagg_transport_stats_t, fault_dropped));
    CHECK(head.fault_dropped == 0xeeeeeeeeeeeeeeeeull);
    head.struct_size = 8;
    CHECK_EQ_INT(inagg_get_transport_stats(c, &head), INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_get_transport_stats(NULL, &st), INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_comm_destroy(c), INAGG_OK);
    ts_stop(&ts);
}

/* Real loss outside the process: nftables drops a share of the switch's UDP traffic on
 * loopback, both directions. */
TEST(int32_exact_under_nftables_loss, 150)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    nft_loss_t nft;
    nft_loss_start(&nft, "test", ts.port, 3, &ts);
    job_spec_t s = {.addr = ts.addr,
                    .job = "nft",
                    .world = 3,
                    .elems = 200000,
                    .dtype = INAGG_INT32,
                    .iters = 3,
                    .seed = 44,
                    .slots = 32,
                    .packet_elems = 512};
    alloc_outputs(&s);
    int failed = run_workers(3, spec_worker, &s, 120);
    int dropped = nft_loss_dropped(&nft);
    nft_loss_stop(&nft);
    ts_stop(&ts);
    CHECK_EQ_INT(failed, 0);
    check_int32_exact(&s);
    CHECK_MSG(dropped, "nftables dropped nothing");
    CHECK(total_retransmits(&s) > 0);
}

/* No singleton: one process holds two communicators of two jobs and uses both, interleaved. */
TEST(two_communicators_in_one_process, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = 100;
    inagg_comm_t *a, *b;
    char d[256];
    CHECK_EQ_INT(inagg_comm_create(&a, ts.addr, "first", 0, 1, &o, d, sizeof(d)), INAGG_OK);
    o.float_mode = INAGG_FLOAT_NATIVE;
    CHECK_EQ_INT(inagg_comm_create(&b, ts.addr, "second", 0, 1, &o, d, sizeof(d)), INAGG_OK);
    int32_t x[1000], y[1000];
    float fx[1000], fy[1000];
    for (int i = 0; i < 1000; i++) {
        x[i] = i - 500;
        fx[i] = (float)i * 0.25f;
    }
    for (int round = 0; round < 3; round++) {
        CHECK_EQ_INT(inagg_allreduce(a, x, y, 1000, INAGG_INT32, INAGG_SUM), INAGG_OK);
        CHECK_EQ_INT(inagg_allreduce(b, fx, fy, 1000, INAGG_FLOAT32, INAGG_SUM), INAGG_OK);
        CHECK(memcmp(x, y, sizeof(x)) == 0);
        CHECK(memcmp(fx, fy, sizeof(fx)) == 0);
    }
    CHECK_EQ_INT(inagg_comm_rank(b), 0);
    CHECK_EQ_INT(inagg_comm_world(a), 1);
    CHECK_EQ_INT(inagg_comm_destroy(a), INAGG_OK);
    CHECK_EQ_INT(inagg_comm_destroy(b), INAGG_OK);
    ts_stop(&ts);
}

/* Several switch threads under loss, duplication and reordering on both sides: the result is
 * exact and the faults demonstrably reached the switch (faults injected there, duplicate
 * contributions recognised as such, results resent). */
TEST(int32_exact_under_loss_with_three_switch_threads, 150)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.03, 41, wf, sf, sizeof(wf));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 3;
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    job_spec_t s = {.job = "threads3",
                    .world = 4,
                    .elems = 200000,
                    .dtype = INAGG_INT32,
                    .iters = 3,
                    .seed = 41,
                    .slots = 33,
                    .packet_elems = 256,
                    .threads = 2,
                    .faults = wf};
    alloc_outputs(&s);
    test_switch_t ts;
    ts_start(&ts, &cfg);
    s.addr = ts.addr;
    int failed = run_workers(s.world, spec_worker, &s, 120);
    char stats[32768];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    CHECK_EQ_INT(failed, 0);
    check_int32_exact(&s);
    const char *job = strstr(stats, "\"retired_jobs\"");
    CHECK_MSG(job != NULL, "%s", stats);
    const char *reasons = strstr(job, "\"drops_by_reason\"");
    CHECK_MSG(reasons != NULL, "%s", stats);
    CHECK_MSG(ts_number(stats, "injected_drops") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "injected_duplicates") > 0, "%s", stats);
    CHECK_MSG(ts_number(stats, "injected_reorders") > 0, "%s", stats);
    CHECK_MSG(ts_number(reasons, "dup_open_round") > 0, "no duplicate reached an open round: %s",
              stats);
    CHECK_MSG(ts_number(job, "resends") > 0, "no result was resent: %s", stats);
    CHECK_MSG(total_retransmits(&s) > 0, "nothing was retransmitted");
    /* every rank's every element passed the checks at least once: the bytes-in counter */
    double payload = (double)s.world * s.elems * 4.0 * s.iters;
    CHECK_MSG(ts_number(job, "bytes_in") >= payload, "bytes_in %.0f below the payload %.0f: %s",
              ts_number(job, "bytes_in"), payload, stats);
}

/* Worlds at the 64-rank bitmap limit, under loss, duplication and reordering. */
static void wide_world(uint32_t world, uint64_t seed)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.01, seed, wf, sf, sizeof(wf));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    cfg.transport.faults_in = sf;
    cfg.transport.faults_out = sf;
    job_spec_t s = {.job = "wide",
                    .world = world,
                    .elems = 20000,
                    .dtype = INAGG_INT32,
                    .iters = 2,
                    .seed = seed,
                    .slots = 16,
                    .packet_elems = 256,
                    .timeout_ms = 30000,
                    .faults = wf};
    alloc_outputs(&s);
    run_spec(&s, &cfg, 200);
    check_int32_exact(&s);
    CHECK_MSG(total_retransmits(&s) > 0, "loss injected but nothing was retransmitted");
}

TEST(int32_world_63_exact_under_loss, 240) { wide_world(63, 51); }
TEST(int32_world_64_exact_under_loss, 240) { wide_world(64, 52); }
