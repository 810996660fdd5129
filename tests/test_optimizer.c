/*
 * test_optimizer.c - the in-switch optimizer: the switch's parameter store and per-chunk step
 * (src/switchd/server/optjob.c) against the same optimizer run on the whole vector; then real
 * processes pushing gradients through the switch with both slot protocols, lossless and under
 * injected loss, duplication and reordering, where every rank's parameters after every step
 * must be bit-identical to a local reference (gradients are small multiples of 1/8, so their
 * float sums are exact in any order and any difference is a step applied twice or not at all);
 * parameter upload; the step counters; and refusals.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/benchdata.h"
#include "harness.h"
#include "inagg.h"
#include "lib/base/netaddr.h"
#include "lib/client/ctl.h"
#include "lib/kernels/optim.h"
#include "switchd/server/optjob.h"
#include "testutil.h"

/* Rank r's gradient element i at step k: a multiple of 1/8 in [-8, 8). */
static float grad_value(uint32_t r, uint64_t k, uint64_t i)
{
    return (float)(bench_hash(k + 1, r, i) % 128u) / 8.0f - 8.0f;
}

static optim_config_t config_for(optim_kind_t kind)
{
    optim_config_t c = OPTIM_CONFIG_INIT;
    c.kind = kind;
    c.lr = kind == OPTIM_SGD ? 0.01f : 0.001f;
    c.momentum = kind == OPTIM_SGD ? 0.9f : 0.0f;
    c.weight_decay = 0.01f;
    return c;
}

/* The reference: the optimizer on the whole vector with the averaged gradient. */
typedef struct reference {
    optim_config_t c;
    size_t n;
    uint32_t world;
    float *p, *state, *g;
    uint64_t step;
} reference_t;

static void ref_init(reference_t *r, const optim_config_t *c, size_t n, uint32_t world,
                     const float *init, uint32_t elems)
{
    r->c = *c;
    r->n = n;
    r->world = world;
    r->p = malloc(n * sizeof(float));
    r->g = malloc(n * sizeof(float));
    unsigned words = optim_state_words(c);
    r->state = words ? malloc(n * words * sizeof(float)) : NULL;
    memcpy(r->p, init, n * sizeof(float));
    for (size_t off = 0; words && off < n; off += elems) /* a state block per chunk */
        optim_state_init(c, r->state + off * words, n - off < elems ? n - off : elems);
    r->step = 0;
}

/* The switch keeps a state block per chunk (optjob.h); the reference steps the same blocks,
 * so any difference is in what the switch applied, not in layout. */
static void ref_step(reference_t *r, uint32_t elems, uint64_t k)
{
    for (size_t i = 0; i < r->n; i++) {
        float s = 0;
        for (uint32_t w = 0; w < r->world; w++)
            s += grad_value(w, k, i);
        r->g[i] = s / (float)r->world;
    }
    r->step++;
    unsigned words = optim_state_words(&r->c);
    for (size_t off = 0; off < r->n; off += elems) {
        size_t len = r->n - off < elems ? r->n - off : elems;
        optim_step(&r->c, r->p + off, words ? r->state + off * words : NULL, r->g + off, len,
                   r->step);
    }
}

static void ref_free(reference_t *r)
{
    free(r->p);
    free(r->g);
    free(r->state);
}

TEST(optimizer_switch_store_matches_whole_vector_step, 20)
{
    const uint32_t elems = 1000, world = 3;
    const size_t n = 2500; /* chunks of 1000, 1000, 500 */
    for (int kind = OPTIM_SGD; kind <= OPTIM_SMORMS3; kind++) {
        optim_config_t c = config_for((optim_kind_t)kind);
        char err[160];
        optjob_t *o;
        int rc = optjob_create(&c, n, elems, OPTJOB_INIT_SEEDED, 42, &o, err, sizeof(err));
        CHECK_MSG(rc == 0 && o != NULL, "%s", err);
        CHECK_EQ_INT(o->nchunks, 3);
        CHECK_EQ_INT(optjob_chunk_len(o, 2), 500);
        CHECK_EQ_INT(optjob_chunk_len(o, 3), 0);
        float *init = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++)
            init[i] = optjob_seeded_value(42, i);
        CHECK(memcmp(init, o->params, n * sizeof(float)) == 0);
        reference_t r;
        ref_init(&r, &c, n, world, init, elems);
        uint32_t be[1000];
        float scratch[1000];
        for (uint64_t k = 0; k < 20; k++) {
            ref_step(&r, elems, k);
            for (uint64_t ch = 0; ch < o->nchunks; ch++) {
                uint32_t len = optjob_chunk_len(o, ch);
                for (uint32_t i = 0; i < len; i++) {
                    float s = 0;
                    for (uint32_t w = 0; w < world; w++)
                        s += grad_value(w, k, ch * elems + i);
                    uint32_t bits;
                    memcpy(&bits, &s, 4);
                    be[i] = htonl(bits);
                }
                CHECK_EQ_INT(optjob_complete(o, ch, be, len, world, 0, scratch), 0);
                /* the result is the chunk's new parameters, in network order */
                uint32_t bits;
                memcpy(&bits, &o->params[ch * elems], 4);
                CHECK_EQ_INT(be[0], htonl(bits));
            }
            CHECK_MSG(memcmp(r.p, o->params, n * sizeof(float)) == 0,
                      "%s: step %llu differs from the whole-vector step",
                      optim_kind_name((optim_kind_t)kind), (unsigned long long)k);
        }
        CHECK_EQ_INT(o->steps[0], 20);
        CHECK_EQ_INT(o->steps[2], 20);
        /* A round of the wrong length, or of no chunk, touches nothing. */
        CHECK_EQ_INT(optjob_complete(o, 2, be, 499, world, 0, scratch), -EINVAL);
        CHECK_EQ_INT(optjob_complete(o, 3, be, 500, world, 0, scratch), -EINVAL);
        CHECK_EQ_INT(o->steps[2], 20);
        /* An upload round sets the parameters and takes no step. */
        for (uint32_t i = 0; i < 500; i++) {
            float v = (float)i;
            uint32_t bits;
            memcpy(&bits, &v, 4);
            be[i] = htonl(bits);
        }
        CHECK_EQ_INT(optjob_complete(o, 2, be, 500, world, 1, scratch), 0);
        CHECK(o->params[2000 + 7] == 7.0f);
        CHECK_EQ_INT(o->steps[2], 20);
        ref_free(&r);
        free(init);
        optjob_free(o);
    }
    optim_config_t bad = OPTIM_CONFIG_INIT;
    bad.lr = -1;
    char err[160];
    optjob_t *o;
    CHECK(optjob_create(&bad, 10, 4, OPTJOB_INIT_ZERO, 0, &o, err, sizeof(err)) == -EINVAL);
    CHECK(o == NULL);
    CHECK(strstr(err, "lr") != NULL);
}

/* ---- real processes ------------------------------------------------------------------------ */

typedef struct push_spec {
    const char *addr, *job, *faults;
    inagg_protocol_t protocol;
    inagg_optimizer_kind_t kind;
    uint32_t world, steps;
    size_t n;
    int upload; /* rank 0 uploads seeded values first */
    int32_t *codes;
    uint32_t *mismatches; /* per rank: steps whose parameters differed from the reference */
} push_spec_t;

static int push_worker(uint32_t rank, void *arg)
{
    const push_spec_t *s = arg;
    optim_config_t c = config_for((optim_kind_t)s->kind);
    inagg_optimizer_t z = INAGG_OPTIMIZER_INIT;
    z.kind = s->kind;
    z.params = s->n;
    z.lr = c.lr;
    z.momentum = c.momentum;
    z.weight_decay = c.weight_decay;
    z.init = s->upload ? INAGG_INIT_ZERO : INAGG_INIT_SEEDED;
    z.seed = 9;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.optimizer = &z;
    o.packet_elems = 1000;
    o.slots = 8;
    o.faults = s->faults;
    o.rto_us = 1000;
    o.rto_min_us = 1000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, s->addr, s->job, rank, s->world, &o, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        fprintf(stderr, "    rank %u: join: %s\n", rank, detail);
        s->codes[rank] = rc;
        return 1;
    }
    float *init = malloc(s->n * sizeof(float)), *g = malloc(s->n * sizeof(float)),
          *p = malloc(s->n * sizeof(float));
    for (size_t i = 0; i < s->n; i++)
        init[i] = s->upload ? (float)(i % 17) - 8.0f : optjob_seeded_value(9, i);
    if (s->upload)
        rc = inagg_params_upload(comm, rank == 0 ? init : NULL, s->n);
    reference_t r;
    ref_init(&r, &c, s->n, s->world, init, 1000);
    for (uint32_t k = 0; k < s->steps && rc == INAGG_OK; k++) {
        for (size_t i = 0; i < s->n; i++)
            g[i] = grad_value(rank, k, i);
        rc = inagg_push_pull(comm, g, p, s->n);
        ref_step(&r, 1000, k);
        if (rc == INAGG_OK && memcmp(p, r.p, s->n * sizeof(float)) != 0)
            s->mismatches[rank]++;
    }
    if (rc != INAGG_OK)
        fprintf(stderr, "    rank %u: %s: %s\n", rank, inagg_strerror(rc), inagg_last_error(comm));
    s->codes[rank] = rc;
    inagg_comm_destroy(comm);
    ref_free(&r);
    free(init);
    free(g);
    free(p);
    return rc != INAGG_OK;
}

static void run_push(push_spec_t *s, const char *switch_faults, int timeout_s)
{
    s->codes = shared_alloc(s->world * sizeof(int32_t));
    s->mismatches = shared_alloc(s->world * sizeof(uint32_t));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.transport.faults_in = switch_faults;
    cfg.transport.faults_out = switch_faults;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    s->addr = ts.addr;
    int failed = run_workers(s->world, push_worker, s, timeout_s);
    char stats[32768];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    CHECK_EQ_INT(failed, 0);
    for (uint32_t r = 0; r < s->world; r++)
        CHECK_MSG(s->mismatches[r] == 0, "rank %u: %u steps differ from the reference", r,
                  s->mismatches[r]);
    /* exactly one step per chunk per iteration */
    uint64_t chunks = (s->n + 999) / 1000;
    CHECK_EQ_INT(ts_number(stats, "optimizer_steps"), (double)(s->steps * chunks));
}

TEST(optimizer_adam_in_switch_switchml, 60)
{
    push_spec_t s = {.job = "opt-adam",
                     .protocol = INAGG_PROTO_SWITCHML,
                     .kind = INAGG_OPT_ADAM,
                     .world = 3,
                     .steps = 30,
                     .n = 5003};
    run_push(&s, NULL, 50);
}

TEST(optimizer_smorms3_in_switch_p4sgd_with_upload, 60)
{
    push_spec_t s = {.job = "opt-smorms3",
                     .protocol = INAGG_PROTO_P4SGD,
                     .kind = INAGG_OPT_SMORMS3,
                     .world = 3,
                     .steps = 30,
                     .n = 5003,
                     .upload = 1};
    run_push(&s, NULL, 50);
}

TEST(optimizer_exactly_once_under_5pct_loss_switchml, 120)
{
    push_spec_t s = {.job = "opt-lossy",
                     .protocol = INAGG_PROTO_SWITCHML,
                     .kind = INAGG_OPT_SGD,
                     .world = 3,
                     .steps = 40,
                     .n = 8000,
                     .faults = "drop=0.05,dup=0.05,reorder=0.05,seed=5"};
    run_push(&s, "drop=0.02,dup=0.02,reorder=0.02,seed=6", 100);
}

TEST(optimizer_exactly_once_under_5pct_loss_p4sgd, 120)
{
    push_spec_t s = {.job = "opt-lossy-p4",
                     .protocol = INAGG_PROTO_P4SGD,
                     .kind = INAGG_OPT_ADAGRAD,
                     .world = 3,
                     .steps = 40,
                     .n = 8000,
                     .faults = "drop=0.05,dup=0.05,reorder=0.05,seed=7"};
    run_push(&s, "drop=0.02,dup=0.02,reorder=0.02,seed=8", 100);
}

/* Ranks must agree on the optimizer; plain allreduce is refused on an optimizer job. */
static int lr_joiner(uint32_t rank, void *arg)
{
    (void)rank;
    inagg_optimizer_t z = INAGG_OPTIMIZER_INIT;
    z.params = 100;
    z.lr = 0.5f; /* rank 0 uses the default 0.01 */
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.optimizer = &z;
    o.timeout_ms = 3000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc = inagg_comm_create(&comm, arg, "optmix", 1, 2, &o, detail, sizeof(detail));
    return rc == INAGG_ERR_REFUSED && strstr(detail, "optimizer") ? 0 : 1;
}

static int opt_holder(uint32_t rank, void *arg)
{
    (void)rank;
    inagg_optimizer_t z = INAGG_OPTIMIZER_INIT;
    z.params = 100;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.optimizer = &z;
    o.timeout_ms = 10000;
    inagg_comm_t *comm;
    char detail[256];
    return inagg_comm_create(&comm, arg, "optmix", 0, 2, &o, detail, sizeof(detail)) == INAGG_OK;
}

TEST(optimizer_mismatch_and_wrong_calls_refused, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_optimizer_t z = INAGG_OPTIMIZER_INIT;
    z.params = 10;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.optimizer = &z;
    inagg_comm_t *solo;
    char detail[256];
    CHECK_EQ_INT(inagg_comm_create(&solo, ts.addr, "optsolo", 0, 1, &o, detail, sizeof(detail)),
                 INAGG_OK);
    float v[10] = {0};
    CHECK_EQ_INT(inagg_allreduce(solo, v, v, 10, INAGG_FLOAT32, INAGG_SUM), INAGG_ERR_UNSUPPORTED);
    CHECK_EQ_INT(inagg_push_pull(solo, v, v, 9), INAGG_ERR_INVALID);
    CHECK_EQ_INT(inagg_push_pull(solo, v, v, 10), INAGG_OK);
    inagg_comm_destroy(solo);
    inagg_options_t plain = INAGG_OPTIONS_INIT;
    CHECK_EQ_INT(inagg_comm_create(&solo, ts.addr, "plain", 0, 1, &plain, detail, sizeof(detail)),
                 INAGG_OK);
    CHECK_EQ_INT(inagg_push_pull(solo, v, v, 10), INAGG_ERR_UNSUPPORTED);
    inagg_comm_destroy(solo);

    pid_t holder;
    spawn_workers(1, opt_holder, ts.addr, &holder);
    char stats[32768] = "";
    for (int i = 0; i < 500 && !strstr(stats, "optmix"); i++) {
        ts_stats_json(&ts, stats, sizeof(stats));
        usleep(10000);
    }
    CHECK(strstr(stats, "optmix") != NULL);
    CHECK_EQ_INT(lr_joiner(1, ts.addr), 0);
    kill(holder, SIGKILL);
    wait_pid(holder, 5);
    ts_stop(&ts);
}

/* A JOIN whose optimizer is malformed is refused with the reason, and nothing is registered. */
TEST(optimizer_bad_join_lines_refused_with_reason, 20)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    struct sockaddr_in a;
    CHECK(netaddr_parse(ts.addr, 0, &a) == 0);
    static const struct {
        const char *extra, *reason;
    } cases[] = {
        {"optimizer=rmsprop params=10", "unknown optimizer"},
        {"optimizer=adam", "params="},
        {"optimizer=adam params=0", "params="},
        {"optimizer=adam params=10 lr=-1", "lr"},
        {"optimizer=adam params=10 beta1=1.5", "beta"},
        {"optimizer=sgd params=10 lr=abc", "not a number"},
        {"optimizer=adam params=10 eps_place=middle", "eps_place"},
        {"optimizer=adam params=10 init=random", "init"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        int fd = ctl_connect(&a, 2000);
        CHECK(fd >= 0);
        ctl_reader_t rd = {0};
        char line[CTL_LINE_MAX];
        snprintf(line, sizeof(line),
                 "JOIN version=%d job=bad%zu rank=0 world=1 slots=4 elems=16 %s",
                 INAGG_PROTOCOL_VERSION, k, cases[k].extra);
        CHECK(ctl_write_line(fd, line, 1000) == 0);
        CHECK(ctl_read_line(fd, &rd, line, sizeof(line), 2000) == 0);
        CHECK_MSG(strncmp(line, "ERR invalid optimizer", 21) == 0 &&
                      strstr(line, cases[k].reason) != NULL,
                  "'%s' got '%s'", cases[k].extra, line);
        close(fd);
    }
    char stats[32768];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    CHECK(strstr(stats, "\"bad0\"") == NULL); /* refused jobs are not registered */
}
