/*
 * test_shard.c - one job's slots spread over K switch processes (a comma-separated switch
 * address): slot s goes to shard s % K. Proves int32 results exact for K = 2 and 3, with
 * both protocols, under loss, duplication and reordering on the workers and on every shard;
 * that every shard carried traffic; that a dead shard fails the job with a reason; and that
 * bad address lists are refused.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/benchdata.h"
#include "harness.h"
#include "inagg.h"
#include "testutil.h"

#define MAX_SHARDS 3

typedef struct shard_spec {
    char addr[MAX_SHARDS * 32];
    uint32_t world;
    inagg_protocol_t protocol;
    size_t elems;
    uint32_t iters, slots, packet_elems, threads;
    const char *faults;
    uint64_t seed;
    uint32_t *out; /* shared: world * elems */
    int32_t *codes; /* shared */
    char (*errors)[256]; /* shared */
} shard_spec_t;

static int shard_worker(uint32_t rank, void *arg)
{
    const shard_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.slots = s->slots;
    o.packet_elems = s->packet_elems;
    o.threads = s->threads ? s->threads : 1;
    o.faults = s->faults;
    o.rto_us = 1000;
    o.rto_min_us = 1000;
    o.timeout_ms = 5000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, s->addr, "sharded", rank, s->world, &o, detail, sizeof(detail));
    s->codes[rank] = rc;
    if (rc != INAGG_OK) {
        snprintf(s->errors[rank], sizeof(s->errors[rank]), "%s", detail);
        return 1;
    }
    int32_t *send = malloc(s->elems * 4), *recv = malloc(s->elems * 4);
    for (size_t i = 0; i < s->elems; i++)
        send[i] = bench_value_i32(s->seed, rank, i);
    for (uint32_t it = 0; it < s->iters && rc == INAGG_OK; it++) {
        memset(recv, 0xA5, s->elems * 4);
        rc = inagg_allreduce(comm, send, recv, s->elems, INAGG_INT32, INAGG_SUM);
    }
    s->codes[rank] = rc;
    if (rc != INAGG_OK)
        snprintf(s->errors[rank], sizeof(s->errors[rank]), "%s", inagg_last_error(comm));
    memcpy(s->out + (size_t)rank * s->elems, recv, s->elems * 4);
    inagg_comm_destroy(comm);
    free(send);
    free(recv);
    return rc != INAGG_OK;
}

static void alloc_spec(shard_spec_t *s)
{
    s->out = shared_alloc((size_t)s->world * s->elems * 4);
    s->codes = shared_alloc(s->world * sizeof(int32_t));
    s->errors = shared_alloc(s->world * sizeof(*s->errors));
}

static void run_sharded(shard_spec_t *s, uint32_t k, const char *sw_faults, int timeout_s)
{
    test_switch_t ts[MAX_SHARDS];
    s->addr[0] = '\0';
    for (uint32_t i = 0; i < k; i++) {
        switch_config_t c = SWITCH_CONFIG_INIT;
        c.threads = i + 1; /* shards of different shapes */
        c.transport.faults_in = c.transport.faults_out = sw_faults;
        ts_start(&ts[i], &c);
        size_t have = strlen(s->addr);
        snprintf(s->addr + have, sizeof(s->addr) - have, "%s%s", i ? "," : "", ts[i].addr);
    }
    alloc_spec(s);
    int failed = run_workers(s->world, shard_worker, s, timeout_s);
    for (uint32_t r = 0; r < s->world; r++)
        if (s->codes[r] != INAGG_OK)
            fprintf(stderr, "    rank %u: %s: %s\n", r, inagg_strerror(s->codes[r]), s->errors[r]);
    for (uint32_t i = 0; i < k; i++) {
        char stats[16384];
        ts_stats_json(&ts[i], stats, sizeof(stats));
        CHECK_MSG(ts_number(stats, "rounds") > 0, "shard %u completed no round", i);
        ts_stop(&ts[i]);
    }
    CHECK_EQ_INT(failed, 0);
    for (uint32_t r = 0; r < s->world; r++)
        for (size_t i = 0; i < s->elems; i++) {
            int32_t want = bench_expected_i32(s->seed, s->world, i);
            int32_t got = (int32_t)s->out[(size_t)r * s->elems + i];
            CHECK_MSG(got == want, "rank %u element %zu: got %d, want %d", r, i, got, want);
        }
}

TEST(shard_2_switchml_exact, 60)
{
    shard_spec_t s = {.world = 3,
                      .protocol = INAGG_PROTO_SWITCHML,
                      .elems = 200000,
                      .iters = 3,
                      .slots = 32,
                      .packet_elems = 1024,
                      .threads = 2,
                      .seed = 3};
    run_sharded(&s, 2, NULL, 50);
}

TEST(shard_3_switchml_exact, 60)
{
    shard_spec_t s = {.world = 4,
                      .protocol = INAGG_PROTO_SWITCHML,
                      .elems = 150000,
                      .iters = 2,
                      .slots = 30,
                      .packet_elems = 700,
                      .seed = 4};
    run_sharded(&s, 3, NULL, 50);
}

TEST(shard_2_p4sgd_exact, 60)
{
    shard_spec_t s = {.world = 3,
                      .protocol = INAGG_PROTO_P4SGD,
                      .elems = 50000,
                      .iters = 2,
                      .slots = 16,
                      .packet_elems = 512,
                      .seed = 5};
    run_sharded(&s, 2, NULL, 50);
}

static void shard_lossy(uint32_t k, inagg_protocol_t proto, uint64_t seed)
{
    char wf[128], sf[128];
    lossy_fault_specs(0.02, seed, wf, sf, sizeof(wf));
    shard_spec_t s = {.world = 3,
                      .protocol = proto,
                      .elems = 60000,
                      .iters = 3,
                      .slots = 24,
                      .packet_elems = 256,
                      .faults = wf,
                      .seed = seed};
    run_sharded(&s, k, sf, 120);
}

TEST(shard_2_switchml_exact_under_loss, 150) { shard_lossy(2, INAGG_PROTO_SWITCHML, 41); }
TEST(shard_3_switchml_exact_under_loss, 150) { shard_lossy(3, INAGG_PROTO_SWITCHML, 42); }
TEST(shard_3_p4sgd_exact_under_loss, 150) { shard_lossy(3, INAGG_PROTO_P4SGD, 43); }

/* A shard that dies mid-job: the job fails with a reason, within the timeout. */
static int dead_shard_worker(uint32_t rank, void *arg)
{
    shard_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 8;
    o.packet_elems = 256;
    o.timeout_ms = 1500;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, s->addr, "dies", rank, s->world, &o, detail, sizeof(detail));
    if (rc != INAGG_OK)
        return 1;
    int32_t *buf = calloc(s->elems, 4);
    rc = inagg_allreduce(comm, buf, buf, s->elems, INAGG_INT32, INAGG_SUM); /* both alive */
    if (rc == INAGG_OK) {
        s->codes[rank] = 1; /* ready for the kill */
        for (int i = 0; i < 200 && s->codes[s->world] == 0; i++)
            usleep(10000);
        rc = inagg_allreduce(comm, buf, buf, s->elems, INAGG_INT32, INAGG_SUM);
    }
    s->codes[rank] = rc;
    snprintf(s->errors[rank], sizeof(s->errors[rank]), "%s", inagg_last_error(comm));
    inagg_comm_destroy(comm);
    free(buf);
    return 0;
}

TEST(shard_dead_shard_fails_job_with_reason, 40)
{
    test_switch_t a, b;
    switch_config_t c = SWITCH_CONFIG_INIT;
    ts_start(&a, &c);
    ts_start(&b, &c);
    shard_spec_t s = {.world = 2, .elems = 20000};
    snprintf(s.addr, sizeof(s.addr), "%s,%s", a.addr, b.addr);
    s.codes = shared_alloc((s.world + 1) * sizeof(int32_t));
    s.errors = shared_alloc(s.world * sizeof(*s.errors));
    pid_t pids[2];
    spawn_workers(s.world, dead_shard_worker, &s, pids);
    for (int i = 0; i < 500 && !(s.codes[0] == 1 && s.codes[1] == 1); i++)
        usleep(10000);
    kill(b.pid, SIGKILL);
    (void)wait_pid(b.pid, 5);
    s.codes[s.world] = 1;
    for (uint32_t r = 0; r < s.world; r++)
        CHECK_EQ_INT(wait_pid(pids[r], 20), 0);
    ts_stop(&a);
    for (uint32_t r = 0; r < s.world; r++) {
        CHECK_MSG(s.codes[r] != INAGG_OK && s.codes[r] != 1, "rank %u: code %d", r, s.codes[r]);
        CHECK_MSG(s.errors[r][0] != '\0', "rank %u gave no reason", r);
    }
}

TEST(shard_bad_address_lists_refused, 10)
{
    const char *bad[] = {"127.0.0.1:1,", ",127.0.0.1:1", "127.0.0.1:1,,127.0.0.1:2",
                         "127.0.0.1:1,nothost",
                         "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3,127.0.0.1:4,127.0.0.1:5,"
                         "127.0.0.1:6,127.0.0.1:7,127.0.0.1:8,127.0.0.1:9"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        inagg_options_t o = INAGG_OPTIONS_INIT;
        inagg_comm_t *comm = NULL;
        char detail[256] = "";
        inagg_result_t rc = inagg_comm_create(&comm, bad[i], "j", 0, 1, &o, detail, sizeof(detail));
        CHECK_MSG(rc == INAGG_ERR_INVALID, "'%s': %s", bad[i], inagg_strerror(rc));
        CHECK_MSG(strstr(detail, "address") != NULL, "'%s': reason %s", bad[i], detail);
    }
}
