/*
 * test_failover.c - a communicator outlives its switch (src/lib/worker/failover.c): the switch
 * list's syntax (malformed lists refused, naming the cause), the recovery's decisions as pure
 * functions (recovery.h: the state verdict, who contributes each chunk), the stale-generation
 * check, and the whole fail-over with switches in this process: a switch that drops results
 * at random is stopped while the ranks are in an allreduce, they move on to the standby of
 * their list, and every result of every op is bit-identical to a fault-free run's (int32 and
 * float32 in fixed point), with chunks both handed on and reduced again. And the switch's side
 * of generations: a stale one refused, a newer one superseding the old job.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/client/ctl.h"
#include "lib/client/join_client.h"
#include "lib/worker/endpoints.h"
#include "lib/worker/proto.h"
#include "lib/worker/recovery.h"
#include "switchd/switchd.h"
#include "testutil.h"

/* ---- the switch list ---- */

TEST(failover_list_parses_one_switch_shards_and_lists, 10)
{
    endpoint_list_t l;
    char err[256];
    CHECK_EQ_INT(endpoints_parse("127.0.0.1:7000", &l, err, sizeof(err)), 0);
    CHECK_EQ_INT((int)l.n, 1);
    CHECK_EQ_INT(endpoints_parse("a:1,b:2", &l, err, sizeof(err)), 0); /* shards: one entry */
    CHECK_EQ_INT((int)l.n, 1);
    CHECK_EQ_INT(endpoints_parse("a:7000;b:7001;c:7002", &l, err, sizeof(err)), 0);
    CHECK_EQ_INT((int)l.n, 3);
    CHECK(strcmp(l.text[1], "b:7001") == 0);
    CHECK(strcmp(endpoint_of_gen(&l, 0), "a:7000") == 0);
    CHECK(strcmp(endpoint_of_gen(&l, 4), "b:7001") == 0); /* generation g on entry g % n */
}

TEST(failover_list_refuses_malformed_lists, 10)
{
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "empty switch address"},
        {";", "an empty entry"},
        {"a:1;", "an empty entry"},
        {";a:1", "an empty entry"},
        {"a:1;;b:2", "an empty entry"},
        {"a:1,b:2;c:3", "names shards"},
        {"a:1;b:1;c:1;d:1;e:1;f:1;g:1;h:1;i:1", "more than 8 switches"},
        {"a:1;averyveryveryveryveryveryveryveryveryveryveryveryveryverylonghost:1",
         "longer than 63 characters"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        endpoint_list_t l;
        char err[256] = "";
        CHECK_MSG(endpoints_parse(bad[i].text, &l, err, sizeof(err)) == -EINVAL, "'%s' taken",
                  bad[i].text);
        CHECK_MSG(strstr(err, bad[i].why), "'%s': '%s'", bad[i].text, err);
    }
    /* through the API: a bad address in a list is named, INAGG_ERR_INVALID */
    inagg_options_t o = INAGG_OPTIONS_INIT;
    inagg_comm_t *c;
    char d[256];
    CHECK_EQ_INT(inagg_comm_create(&c, "127.0.0.1:7000;nonsense", "x", 0, 1, &o, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "nonsense"), "%s", d);
    CHECK_EQ_INT(
        inagg_comm_create(&c, "127.0.0.1:7000;;127.0.0.1:7001", "x", 0, 1, &o, d, sizeof(d)),
        INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "empty entry"), "%s", d);
    o.no_failover = 1; /* a caller that finishes lost calls itself: no list to fail over to */
    CHECK_EQ_INT(
        inagg_comm_create(&c, "127.0.0.1:7000;127.0.0.1:7001", "x", 0, 1, &o, d, sizeof(d)),
        INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "needs fail-over"), "%s", d);
    o.no_failover = 0;
    o.protocol = INAGG_PROTO_P4SGD; /* p4sgd has no fail-over: a list is refused, said so */
    CHECK_EQ_INT(
        inagg_comm_create(&c, "127.0.0.1:7000;127.0.0.1:7001", "x", 0, 1, &o, d, sizeof(d)),
        INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "needs fail-over"), "%s", d);
}

/* ---- the recovery's decisions ---- */

static void state_of(uint32_t *st, uint32_t rank, uint64_t op, int in_call, uint64_t barriers)
{
    recovery_state_fill(st, rank, op, in_call, barriers);
}

TEST(failover_verdict_recovers_only_an_op_every_rank_reached, 10)
{
    uint32_t st[4 * RECOVERY_STATE_WORDS];
    recovery_verdict_t v;
    char err[160];
    /* every rank in op 5: recovered chunk by chunk */
    memset(st, 0, sizeof(st));
    for (uint32_t r = 0; r < 4; r++)
        state_of(st, r, 5, 1, 9);
    CHECK_EQ_INT(recovery_decide(4, st, &v, err, sizeof(err)), 0);
    CHECK(v.recover && v.op_low == 5 && v.op_high == 5 && v.barriers_max == 9);
    /* rank 2 finished op 5 (idle, or in op 6): op 5 is recovered from its record */
    state_of(st, 2, 6, 0, 10);
    CHECK_EQ_INT(recovery_decide(4, st, &v, err, sizeof(err)), 0);
    CHECK(v.recover && v.op_low == 5 && v.op_high == 6 && v.barriers_max == 10);
    /* a rank that has not called op 5: nobody can hold a result of it */
    memset(st, 0, sizeof(st));
    for (uint32_t r = 0; r < 4; r++)
        state_of(st, r, 5, r != 3, 9);
    CHECK_EQ_INT(recovery_decide(4, st, &v, err, sizeof(err)), 0);
    CHECK(!v.recover && v.op_low == 5);
    /* states no run reaches */
    state_of(st, 1, 7, 1, 9);
    CHECK_EQ_INT(recovery_decide(4, st, &v, err, sizeof(err)), -EPROTO);
    CHECK_MSG(strstr(err, "apart"), "%s", err);
    memset(st, 0, sizeof(st));
    for (uint32_t r = 0; r < 4; r++)
        state_of(st, r, 5, 0, 9);
    state_of(st, 0, 6, 0, 9);
    CHECK_EQ_INT(recovery_decide(4, st, &v, err, sizeof(err)), -EPROTO);
    /* the op numbers wrap at 2^31 */
    memset(st, 0, sizeof(st));
    state_of(st, 0, 0x7fffffffu, 1, 0);
    state_of(st, 1, 0x80000000u, 0, 0);
    CHECK_EQ_INT(recovery_decide(2, st, &v, err, sizeof(err)), 0);
    CHECK(v.recover && v.op_low == 0x7fffffffu && v.op_high == 0);
}

TEST(failover_plan_hands_on_from_the_lowest_holder, 10)
{
    for (uint32_t world = 3; world <= 71; world += 17) { /* 31 ranks a word: several words */
        uint32_t w = RECOVERY_WORDS(world);
        uint32_t *h = calloc(4 * w, sizeof(uint32_t));
        for (uint32_t r = 0; r < world; r++)
            recovery_mark(h, world, 0, r); /* chunk 0: everyone */
        recovery_mark(h, world, 1, world - 1); /* chunk 1: the last rank only */
        recovery_mark(h, world, 1, world / 2);
        /* chunk 2: nobody; chunk 3: rank 0 and the last */
        recovery_mark(h, world, 3, world - 1);
        recovery_mark(h, world, 3, 0);
        uint8_t act[4];
        uint32_t from[4];
        recovery_counts_t n;
        recovery_plan(world, 4, h, act, from, &n);
        CHECK_EQ_INT(act[0], RECOVERY_DONE);
        CHECK_EQ_INT(act[1], RECOVERY_DELIVER);
        CHECK_EQ_INT((int)from[1], (int)(world / 2));
        CHECK_EQ_INT(act[2], RECOVERY_REDUCE);
        CHECK_EQ_INT(act[3], RECOVERY_DELIVER);
        CHECK_EQ_INT((int)from[3], 0);
        CHECK(n.done == 1 && n.deliver == 2 && n.reduce == 1);
        free(h);
    }
}

TEST(failover_stale_generation_is_counted_not_taken, 10)
{
    _Atomic uint64_t stale = 0;
    worker_params_t p = {.rank = 0, .world = 2, .slots = 4, .nshards = 1, .stale = &stale};
    p.shard[0] = (worker_shard_t){.job = 3, .token = 0x2222};
    p.stale_token = 0x1111;
    wire_header_t h = {.job = 3, .rank = 0, .slot = 1, .token = 0x1111};
    CHECK(!worker_packet_ours(&p, &h));
    CHECK(worker_packet_stale(&p, &h));
    CHECK_EQ_INT((int)atomic_load(&stale), 1);
    h.token = 0x3333; /* foreign: invalid, not stale */
    CHECK(!worker_packet_stale(&p, &h));
    h.token = 0x2222;
    CHECK(worker_packet_ours(&p, &h));
    CHECK_EQ_INT((int)atomic_load(&stale), 1);
}

/* ---- the whole fail-over, switches in this process ---- */

#define FO_WORLD 3u
#define FO_OPS 6u
#define FO_COUNT 3001u /* a short last chunk */

typedef struct fo_rank {
    const char *addr, *job;
    uint32_t rank;
    int dtype_float;
    void *out[FO_OPS]; /* each op's result */
    inagg_result_t rc;
    char error[512];
    inagg_failover_stats_t fo;
    _Atomic int *ops_done; /* rank 0's progress, for the stopper */
} fo_rank_t;

static void fill_input(const fo_rank_t *r, uint32_t op, void *buf)
{
    for (uint32_t i = 0; i < FO_COUNT; i++) {
        uint32_t x = (r->rank + 1) * 2654435761u ^ (op * 40503u + i * 97u);
        if (r->dtype_float)
            ((float *)buf)[i] = (float)((int32_t)(x % 20001u) - 10000) / 997.0f;
        else
            ((int32_t *)buf)[i] = (int32_t)(x % 2000001u) - 1000000;
    }
}

static void *fo_rank_main(void *arg)
{
    fo_rank_t *r = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = 32;
    o.slots = 8;
    o.threads = 2;
    o.timeout_ms = 5000;
    inagg_comm_t *c = NULL;
    r->rc =
        inagg_comm_create(&c, r->addr, r->job, r->rank, FO_WORLD, &o, r->error, sizeof(r->error));
    void *in = malloc(FO_COUNT * 4);
    for (uint32_t op = 0; op < FO_OPS && r->rc == INAGG_OK; op++) {
        fill_input(r, op, in);
        r->out[op] = malloc(FO_COUNT * 4);
        r->rc = inagg_barrier(c);
        if (r->rc == INAGG_OK)
            r->rc = inagg_allreduce(c, in, r->out[op], FO_COUNT,
                                    r->dtype_float ? INAGG_FLOAT32 : INAGG_INT32, INAGG_SUM);
        if (r->rc != INAGG_OK)
            snprintf(r->error, sizeof(r->error), "op %u: %s", op, inagg_last_error(c));
        if (r->rank == 0 && r->ops_done)
            atomic_store(r->ops_done, (int)op + 1);
    }
    free(in);
    if (c) {
        r->fo.struct_size = sizeof(r->fo);
        inagg_get_failover_stats(c, &r->fo);
        inagg_comm_destroy(c);
    }
    return NULL;
}

static inagg_switch_t *fo_switch(const char *faults_out)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.listen = "127.0.0.1:0";
    cfg.transport.faults_out = faults_out;
    inagg_switch_t *sw;
    char err[256];
    CHECK_MSG(switch_start(&cfg, &sw, err, sizeof(err)) == 0, "switch: %s", err);
    return sw;
}

typedef struct stopper {
    inagg_switch_t *sw;
    _Atomic int *ops_done;
    uint32_t after_ops;
} stopper_t;

static void *stopper_main(void *arg)
{
    stopper_t *s = arg;
    for (int i = 0; i < 20000 && atomic_load(s->ops_done) < (int)s->after_ops; i++)
        usleep(500);
    switch_stop_because(s->sw, "maintenance");
    return NULL;
}

/* Run the job's ranks on addr (stopping `stop` once rank 0 finished after_ops ops, if any). */
static void fo_run(fo_rank_t *rk, const char *addr, const char *job, int dtype_float,
                   inagg_switch_t *stop, uint32_t after_ops)
{
    _Atomic int ops_done = 0;
    pthread_t t[FO_WORLD], ts;
    stopper_t st = {.sw = stop, .ops_done = &ops_done, .after_ops = after_ops};
    for (uint32_t r = 0; r < FO_WORLD; r++) {
        rk[r] = (fo_rank_t){
            .addr = addr, .job = job, .rank = r, .dtype_float = dtype_float, .ops_done = &ops_done};
        CHECK(pthread_create(&t[r], NULL, fo_rank_main, &rk[r]) == 0);
    }
    if (stop)
        CHECK(pthread_create(&ts, NULL, stopper_main, &st) == 0);
    for (uint32_t r = 0; r < FO_WORLD; r++)
        pthread_join(t[r], NULL);
    if (stop)
        pthread_join(ts, NULL);
    for (uint32_t r = 0; r < FO_WORLD; r++)
        CHECK_MSG(rk[r].rc == INAGG_OK, "rank %u: %s", r, rk[r].error);
}

static void fo_free(fo_rank_t *rk)
{
    for (uint32_t r = 0; r < FO_WORLD; r++)
        for (uint32_t op = 0; op < FO_OPS; op++)
            free(rk[r].out[op]);
}

/* The switch that serves generation 0 drops a fifth of its results (so ranks hold different
 * chunks at any moment) and is stopped once rank 0 finished its second allreduce: the ranks
 * move to the standby, recover, and every result of every op equals a fault-free run's, bit
 * for bit. Seeds are tried (at least 3, at most 16) until chunks were both handed on and
 * reduced again: where the stop falls decides which. */
static void failover_bit_identical(int dtype_float)
{
    inagg_switch_t *standby = fo_switch(NULL);
    char clean[64];
    snprintf(clean, sizeof(clean), "127.0.0.1:%u", switch_port(standby));
    fo_rank_t ref[FO_WORLD], got[FO_WORLD];
    fo_run(ref, clean, "reference", dtype_float, NULL, 0);
    uint64_t delivered = 0, reduced = 0;
    for (int seed = 1; seed <= 16 && (seed <= 3 || !delivered || !reduced); seed++) {
        char spec[64], list[160], job[32];
        snprintf(spec, sizeof(spec), "drop=0.2,seed=%d", seed);
        inagg_switch_t *first = fo_switch(spec);
        snprintf(list, sizeof(list), "127.0.0.1:%u;%s", switch_port(first), clean);
        snprintf(job, sizeof(job), "fo-%d", seed);
        fo_run(got, list, job, dtype_float, first, 2);
        for (uint32_t r = 0; r < FO_WORLD; r++) {
            CHECK_MSG(got[r].fo.failovers == 1 && got[r].fo.generation == 1,
                      "rank %u: %llu fail-overs, generation %u", r,
                      (unsigned long long)got[r].fo.failovers, got[r].fo.generation);
            for (uint32_t op = 0; op < FO_OPS; op++)
                CHECK_MSG(memcmp(got[r].out[op], ref[0].out[op], FO_COUNT * 4) == 0,
                          "seed %d rank %u op %u differs from the fault-free run", seed, r, op);
            delivered += got[r].fo.chunks_delivered;
            reduced += got[r].fo.chunks_reduced;
        }
        printf("    seed %d: stall %u ms; chunks handed on %llu, reduced again %llu (rank 0)\n",
               seed, got[0].fo.stall_ms_max, (unsigned long long)got[0].fo.chunks_delivered,
               (unsigned long long)got[0].fo.chunks_reduced);
        fo_free(got);
    }
    CHECK_MSG(delivered > 0 && reduced > 0, "handed on %llu, reduced %llu: a path untried",
              (unsigned long long)delivered, (unsigned long long)reduced);
    fo_free(ref);
    switch_stop(standby);
}

TEST(failover_int32_bit_identical_to_a_fault_free_run, 120) { failover_bit_identical(0); }

TEST(failover_float32_fixed_bit_identical_to_a_fault_free_run, 120) { failover_bit_identical(1); }

/* ---- salvage: the failed op finished over another channel (no switch answers) ---- */

/* A channel between the rank threads: each rank's send copied aside, everyone sums the copies
 * in rank order, as an MPI allreduce of the threads would. */
typedef struct tchan {
    pthread_barrier_t bar;
    void *slot[FO_WORLD];
    _Atomic int failed;
} tchan_t;

typedef struct tchan_end {
    tchan_t *t;
    uint32_t rank;
} tchan_end_t;

static int tchan_allreduce(void *ctx, const void *send, void *recv, size_t count,
                           inagg_dtype_t dtype, inagg_op_t op)
{
    tchan_end_t *e = ctx;
    tchan_t *t = e->t;
    void *mine = malloc(count * 4 + 4), *sum = calloc(count + 1, 4);
    if (!mine || !sum || op != INAGG_SUM)
        atomic_store(&t->failed, 1);
    if (mine)
        memcpy(mine, send, count * 4);
    t->slot[e->rank] = mine;
    pthread_barrier_wait(&t->bar);
    for (uint32_t r = 0; r < FO_WORLD && sum && !atomic_load(&t->failed); r++)
        for (size_t i = 0; i < count; i++) {
            if (dtype == INAGG_FLOAT32)
                ((float *)sum)[i] += ((const float *)t->slot[r])[i];
            else /* wraps as an MPI sum does */
                ((uint32_t *)sum)[i] += ((const uint32_t *)t->slot[r])[i];
        }
    pthread_barrier_wait(&t->bar);
    int failed = atomic_load(&t->failed);
    if (!failed)
        memcpy(recv, sum, count * 4);
    free(mine);
    free(sum);
    return failed;
}

typedef struct sv_rank {
    fo_rank_t fo;
    tchan_t *chan;
    int salvaged; /* the op the salvage finished (-1: none) */
    inagg_salvage_t sv;
    pthread_barrier_t *pause; /* when set: met twice after op 1 (the switch stops between) */
} sv_rank_t;

/* A rank whose switch is lost with fail-over off: the failed op is salvaged over the thread
 * channel, and every later op runs there, as the MPI interposer does. */
static void *sv_rank_main(void *arg)
{
    sv_rank_t *s = arg;
    fo_rank_t *r = &s->fo;
    tchan_end_t end = {.t = s->chan, .rank = r->rank};
    inagg_channel_t ch = {.struct_size = sizeof(ch), .allreduce = tchan_allreduce, .ctx = &end};
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = 32;
    o.slots = 8;
    o.threads = 2;
    o.timeout_ms = 5000;
    inagg_comm_t *c = NULL;
    r->rc =
        inagg_comm_create(&c, r->addr, r->job, r->rank, FO_WORLD, &o, r->error, sizeof(r->error));
    void *in = malloc(FO_COUNT * 4);
    int on_switch = 1;
    s->salvaged = -1;
    for (uint32_t op = 0; op < FO_OPS && r->rc == INAGG_OK; op++) {
        fill_input(r, op, in);
        r->out[op] = malloc(FO_COUNT * 4);
        inagg_result_t rc =
            on_switch ? inagg_allreduce(c, in, r->out[op], FO_COUNT, INAGG_INT32, INAGG_SUM)
                      : INAGG_ERR_CONNECTION;
        if (rc != INAGG_OK && on_switch) {
            on_switch = 0;
            s->sv.struct_size = sizeof(s->sv);
            rc = inagg_allreduce_salvage(c, in, r->out[op], FO_COUNT, INAGG_INT32, INAGG_SUM, &ch,
                                         &s->sv);
            if (rc != INAGG_OK) {
                snprintf(r->error, sizeof(r->error), "op %u: salvage: %s", op, inagg_last_error(c));
                r->rc = rc;
                break;
            }
            s->salvaged = (int)op;
            if (s->sv.completed)
                continue;
        }
        if (!on_switch && tchan_allreduce(&end, in, r->out[op], FO_COUNT, INAGG_INT32, INAGG_SUM))
            r->rc = INAGG_ERR_CONNECTION;
        if (r->rank == 0 && r->ops_done)
            atomic_store(r->ops_done, (int)op + 1);
        if (s->pause && op == 1) {
            pthread_barrier_wait(s->pause);
            pthread_barrier_wait(s->pause);
        }
    }
    free(in);
    if (c)
        inagg_comm_destroy(c);
    return NULL;
}

/* With INAGG_FAILOVER=0, the switch (dropping a fifth of its results, so the ranks hold
 * different chunks) is stopped once rank 0 finished its second allreduce; the ranks salvage
 * the interrupted op over the thread channel and go on there: every result of every op is
 * bit-identical to a fault-free run's, with chunks both handed on and reduced again over the
 * seeds tried. */
static void salvage_bit_identical(int between)
{
    inagg_switch_t *clean_sw = fo_switch(NULL);
    char clean[64];
    snprintf(clean, sizeof(clean), "127.0.0.1:%u", switch_port(clean_sw));
    fo_rank_t ref[FO_WORLD];
    fo_run(ref, clean, "sv-reference", 0, NULL, 0);
    switch_stop(clean_sw);
    setenv("INAGG_FAILOVER", "0", 1);
    uint64_t delivered = 0, reduced = 0;
    for (int seed = 1; seed <= 16 && (seed <= 3 || (!between && (!delivered || !reduced)));
         seed++) {
        char spec[64], addr[64], job[32];
        snprintf(spec, sizeof(spec), "drop=0.2,seed=%d", seed);
        inagg_switch_t *sw = fo_switch(spec);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", switch_port(sw));
        snprintf(job, sizeof(job), "sv-%d", seed);
        _Atomic int ops_done = 0;
        tchan_t chan = {0};
        pthread_barrier_init(&chan.bar, NULL, FO_WORLD);
        pthread_barrier_t pause;
        pthread_barrier_init(&pause, NULL, FO_WORLD + 1);
        sv_rank_t rk[FO_WORLD];
        pthread_t t[FO_WORLD], ts;
        for (uint32_t r = 0; r < FO_WORLD; r++) {
            rk[r] = (sv_rank_t){.fo = {.addr = addr, .job = job, .rank = r, .ops_done = &ops_done},
                                .chan = &chan,
                                .pause = between ? &pause : NULL};
            CHECK(pthread_create(&t[r], NULL, sv_rank_main, &rk[r]) == 0);
        }
        stopper_t st = {.sw = sw, .ops_done = &ops_done, .after_ops = 2};
        if (between) { /* every rank finished op 1 and knows the switch is gone before op 2 */
            pthread_barrier_wait(&pause);
            switch_stop_because(sw, "maintenance");
            usleep(300 * 1000);
            pthread_barrier_wait(&pause);
        } else {
            CHECK(pthread_create(&ts, NULL, stopper_main, &st) == 0);
        }
        for (uint32_t r = 0; r < FO_WORLD; r++)
            pthread_join(t[r], NULL);
        if (!between)
            pthread_join(ts, NULL);
        pthread_barrier_destroy(&chan.bar);
        pthread_barrier_destroy(&pause);
        for (uint32_t r = 0; r < FO_WORLD; r++) {
            CHECK_MSG(rk[r].fo.rc == INAGG_OK, "seed %d rank %u: %s", seed, r, rk[r].fo.error);
            CHECK_MSG(rk[r].salvaged >= 0, "seed %d rank %u: no salvage", seed, r);
            CHECK_EQ_INT((int)rk[r].sv.nchunks, (int)((FO_COUNT + 31) / 32));
            for (uint32_t op = 0; op < FO_OPS; op++)
                CHECK_MSG(memcmp(rk[r].fo.out[op], ref[0].out[op], FO_COUNT * 4) == 0,
                          "seed %d rank %u op %u differs from the fault-free run", seed, r, op);
            delivered += rk[r].sv.chunks_delivered;
            reduced += rk[r].sv.chunks_reduced;
        }
        printf("    seed %d: op %d salvaged: rank 0 held %llu of %llu chunks; handed on %llu, "
               "reduced again %llu\n",
               seed, rk[0].salvaged, (unsigned long long)rk[0].sv.chunks_held,
               (unsigned long long)rk[0].sv.nchunks, (unsigned long long)rk[0].sv.chunks_delivered,
               (unsigned long long)rk[0].sv.chunks_reduced);
        for (uint32_t r = 0; r < FO_WORLD; r++)
            for (uint32_t op = 0; op < FO_OPS; op++)
                free(rk[r].fo.out[op]);
    }
    unsetenv("INAGG_FAILOVER");
    if (between) /* nobody held a chunk of op 2: all of it reduced again */
        CHECK_MSG(delivered == 0 && reduced == 3 * FO_WORLD * ((FO_COUNT + 31) / 32),
                  "handed on %llu, reduced %llu", (unsigned long long)delivered,
                  (unsigned long long)reduced);
    else
        CHECK_MSG(delivered > 0 && reduced > 0, "handed on %llu, reduced %llu: a path untried",
                  (unsigned long long)delivered, (unsigned long long)reduced);
    fo_free(ref);
}

TEST(failover_salvage_int32_over_a_channel_bit_identical, 120) { salvage_bit_identical(0); }

/* The switch is lost between two ops: the next call fails before it began, and its salvage
 * must not take the record of an older op for its own. */
TEST(failover_salvage_of_a_call_that_never_began, 120) { salvage_bit_identical(1); }

/* ---- salvage of requests in flight (inagg_salvage_requests) ---- */

#define SR_WINDOW 3u /* requests a rank keeps in flight */

/* A rank with up to SR_WINDOW in-place requests in flight (as the torch backend keeps DDP's
 * buckets): when the switch is lost (fail-over off) it waits for every request, salvages the
 * failed ones over the thread channel, and runs the rest, and every later op, there. */
static void *sr_rank_main(void *arg)
{
    sv_rank_t *s = arg;
    fo_rank_t *r = &s->fo;
    tchan_end_t end = {.t = s->chan, .rank = r->rank};
    inagg_channel_t ch = {.struct_size = sizeof(ch), .allreduce = tchan_allreduce, .ctx = &end};
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.packet_elems = 32;
    o.slots = 8;
    o.threads = 2;
    o.timeout_ms = 5000;
    inagg_comm_t *c = NULL;
    r->rc =
        inagg_comm_create(&c, r->addr, r->job, r->rank, FO_WORLD, &o, r->error, sizeof(r->error));
    inagg_request_t *req[FO_OPS] = {0};
    uint32_t started = 0, waited = 0, failed_from = FO_OPS;
    s->salvaged = -1;
    for (uint32_t op = 0; op < FO_OPS; op++) {
        r->out[op] = malloc(FO_COUNT * 4);
        fill_input(r, op, r->out[op]);
    }
    while (r->rc == INAGG_OK && waited < FO_OPS && failed_from == FO_OPS) {
        for (; started < FO_OPS && started - waited < SR_WINDOW; started++)
            if (inagg_iallreduce(c, r->out[started], r->out[started], FO_COUNT, INAGG_INT32,
                                 INAGG_SUM, &req[started]) != INAGG_OK)
                break; /* the switch is gone: this op and the later ones never started */
        if (waited == started) {
            failed_from = waited;
            break;
        }
        if (inagg_wait(req[waited]) != INAGG_OK)
            failed_from = waited;
        waited++;
        if (r->rank == 0 && r->ops_done)
            atomic_store(r->ops_done, (int)waited);
    }
    for (; waited < started; waited++) /* every request ends before the salvage */
        inagg_wait(req[waited]);
    uint32_t next = failed_from;
    if (r->rc == INAGG_OK && failed_from < FO_OPS) {
        inagg_result_t why = inagg_comm_failure(c); /* what a caller sees before it salvages */
        if (why != INAGG_ERR_CONNECTION && why != INAGG_ERR_TIMEOUT)
            r->rc = why == INAGG_OK ? INAGG_ERR_INVALID : why;
        if (r->rc != INAGG_OK)
            snprintf(r->error, sizeof(r->error), "inagg_comm_failure: %s", inagg_strerror(why));
        s->sv.struct_size = sizeof(s->sv);
        if (r->rc == INAGG_OK)
            r->rc = inagg_salvage_requests(c, &ch, &s->sv);
        if (r->rc != INAGG_OK && !r->error[0])
            snprintf(r->error, sizeof(r->error), "salvage: %s", inagg_last_error(c));
        s->salvaged = (int)failed_from;
        next = failed_from + s->sv.completed;
    }
    for (; next < FO_OPS && r->rc == INAGG_OK; next++) /* their buffers hold their inputs */
        if (tchan_allreduce(&end, r->out[next], r->out[next], FO_COUNT, INAGG_INT32, INAGG_SUM))
            r->rc = INAGG_ERR_CONNECTION;
    if (c)
        inagg_comm_destroy(c);
    return NULL;
}

/* With INAGG_FAILOVER=0 and requests in flight, the switch (dropping a fifth of its results)
 * is stopped once rank 0 finished two ops: every result of every op is bit-identical to a
 * fault-free run's, with chunks both handed on and reduced again over the seeds tried, and
 * some rank holding results of more than one request when it failed. */
TEST(failover_salvage_requests_in_flight_bit_identical, 120)
{
    inagg_switch_t *clean_sw = fo_switch(NULL);
    char clean[64];
    snprintf(clean, sizeof(clean), "127.0.0.1:%u", switch_port(clean_sw));
    fo_rank_t ref[FO_WORLD];
    fo_run(ref, clean, "sr-reference", 0, NULL, 0);
    switch_stop(clean_sw);
    setenv("INAGG_FAILOVER", "0", 1);
    uint64_t delivered = 0, reduced = 0, completed = 0;
    for (int seed = 1; seed <= 16 && (seed <= 3 || !delivered || !reduced || !completed); seed++) {
        char spec[64], addr[64], job[32];
        snprintf(spec, sizeof(spec), "drop=0.2,seed=%d", seed);
        inagg_switch_t *sw = fo_switch(spec);
        snprintf(addr, sizeof(addr), "127.0.0.1:%u", switch_port(sw));
        snprintf(job, sizeof(job), "sr-%d", seed);
        _Atomic int ops_done = 0;
        tchan_t chan = {0};
        pthread_barrier_init(&chan.bar, NULL, FO_WORLD);
        sv_rank_t rk[FO_WORLD];
        pthread_t t[FO_WORLD], ts;
        for (uint32_t r = 0; r < FO_WORLD; r++) {
            rk[r] = (sv_rank_t){.fo = {.addr = addr, .job = job, .rank = r, .ops_done = &ops_done},
                                .chan = &chan};
            CHECK(pthread_create(&t[r], NULL, sr_rank_main, &rk[r]) == 0);
        }
        stopper_t st = {.sw = sw, .ops_done = &ops_done, .after_ops = 2};
        CHECK(pthread_create(&ts, NULL, stopper_main, &st) == 0);
        for (uint32_t r = 0; r < FO_WORLD; r++)
            pthread_join(t[r], NULL);
        pthread_join(ts, NULL);
        pthread_barrier_destroy(&chan.bar);
        for (uint32_t r = 0; r < FO_WORLD; r++) {
            CHECK_MSG(rk[r].fo.rc == INAGG_OK, "seed %d rank %u: %s", seed, r, rk[r].fo.error);
            CHECK_MSG(rk[r].salvaged >= 0, "seed %d rank %u: no salvage", seed, r);
            for (uint32_t op = 0; op < FO_OPS; op++)
                CHECK_MSG(memcmp(rk[r].fo.out[op], ref[0].out[op], FO_COUNT * 4) == 0,
                          "seed %d rank %u op %u differs from the fault-free run", seed, r, op);
            delivered += rk[r].sv.chunks_delivered;
            reduced += rk[r].sv.chunks_reduced;
            completed += rk[r].sv.completed > 1;
        }
        printf("    seed %d: rank 0 failed from op %d: held %llu of %llu chunks, %u requests "
               "completed; handed on %llu, reduced again %llu\n",
               seed, rk[0].salvaged, (unsigned long long)rk[0].sv.chunks_held,
               (unsigned long long)rk[0].sv.nchunks, rk[0].sv.completed,
               (unsigned long long)rk[0].sv.chunks_delivered,
               (unsigned long long)rk[0].sv.chunks_reduced);
        for (uint32_t r = 0; r < FO_WORLD; r++)
            for (uint32_t op = 0; op < FO_OPS; op++)
                free(rk[r].fo.out[op]);
    }
    unsetenv("INAGG_FAILOVER");
    CHECK_MSG(delivered > 0 && reduced > 0, "handed on %llu, reduced %llu: a path untried",
              (unsigned long long)delivered, (unsigned long long)reduced);
    fo_free(ref);
}

/* ---- the switch's side: generations of one job ---- */

/* One JOIN of job "gen" (world 1) under generation gen: join_client_run's result, the
 * connection in *fd (-1 when refused), the reason in err. */
static int join_gen(const char *addr, uint32_t gen, int *fd, char *err, size_t errlen)
{
    join_request_t rq = {
        .addr = addr,
        .join = {.version = INAGG_PROTOCOL_VERSION,
                 .rank = 0,
                 .world = 1,
                 .slots = 4,
                 .elems = 64,
                 .timeout_ms = 2000,
                 .gen = gen},
        .block_ms = 2000,
        .answer_ms = 2000,
        .retry_ms = 3000,
    };
    snprintf(rq.join.job, sizeof(rq.join.job), "gen");
    ctl_reader_t rd;
    join_answer_t a;
    int rc = join_client_run(&rq, &rd, &a, err, errlen);
    *fd = rc == 0 ? a.fd : -1;
    return rc;
}

/* A switch that holds generation 1 of a job (it was frozen while the ranks moved on and came
 * back): a JOIN of generation 0 is refused as stale; one of generation 2 supersedes it (the
 * old job fails with the reason, its connection closes) and registers once it retired; both
 * count as rejoined. */
TEST(failover_switch_refuses_stale_and_supersedes_old_generations, 30)
{
    inagg_switch_t *sw = fo_switch(NULL);
    char addr[64], err[256] = "";
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", switch_port(sw));
    int fd1, fd0, fd2;
    CHECK_MSG(join_gen(addr, 1, &fd1, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT((int)ts_switch_stat(sw, "generation"), 1);
    CHECK_EQ_INT(join_gen(addr, 0, &fd0, err, sizeof(err)), -ECONNREFUSED);
    CHECK_MSG(strstr(err, "stale generation: job 'gen' runs generation 1"), "%s", err);
    CHECK_MSG(join_gen(addr, 2, &fd2, err, sizeof(err)) == 0, "%s", err);
    char line[CTL_LINE_MAX];
    ctl_reader_t rd = {0};
    CHECK_EQ_INT(ctl_read_line(fd1, &rd, line, sizeof(line), 2000), 0);
    CHECK_MSG(strstr(line, "FAILED superseded: its ranks joined generation 2"), "%s", line);
    CHECK_EQ_INT((int)ts_switch_stat(sw, "generation"), 2);
    CHECK_EQ_INT((int)ts_switch_stat(sw, "jobs_rejoined"), 2);
    close(fd1);
    close(fd2);
    switch_stop(sw);
}
