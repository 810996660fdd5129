/*
 * test_overflow.c - int32 overflow end to end, for both slot protocols: when the sum of one
 * element wraps, every rank gets INAGG_ERR_OVERFLOW with the wrapped result delivered and
 * every other element exact, and the communicator carries on (the next allreduce is exact).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "inagg.h"
#include "testutil.h"

#define N 3000u
#define WORLD 3u
#define HOT 1234u /* the element whose sum wraps */

typedef struct ov_spec {
    const char *addr;
    inagg_protocol_t protocol;
    int32_t *out; /* [WORLD][2][N], shared */
    int *rcs; /* [WORLD][2] */
} ov_spec_t;

static int32_t value(uint32_t rank, uint32_t i, int second)
{
    if (i == HOT && !second)
        return INT32_MAX / 2 + 7; /* three of these wrap */
    return (int32_t)((i * 2654435761u + rank * 40503u) % 2000001u) - 1000000;
}

static int ov_worker(uint32_t rank, void *arg)
{
    ov_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.timeout_ms = 10000;
    inagg_comm_t *c;
    char d[256];
    if (inagg_comm_create(&c, s->addr, "overflow", rank, WORLD, &o, d, sizeof(d)) != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        return 1;
    }
    int32_t *in = malloc(N * sizeof(int32_t));
    if (!in) {
        inagg_comm_destroy(c);
        return 2;
    }
    for (int k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < N; i++)
            in[i] = value(rank, i, k);
        s->rcs[rank * 2 + k] =
            inagg_allreduce(c, in, s->out + ((size_t)rank * 2 + k) * N, N, INAGG_INT32, INAGG_SUM);
    }
    free(in);
    inagg_comm_destroy(c);
    return 0;
}

static void overflow_test(inagg_protocol_t protocol)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    ov_spec_t s = {.addr = ts.addr,
                   .protocol = protocol,
                   .out = shared_alloc(WORLD * 2 * N * sizeof(int32_t)),
                   .rcs = shared_alloc(WORLD * 2 * sizeof(int))};
    int rc = run_workers(WORLD, ov_worker, &s, 60);
    ts_stop(&ts);
    CHECK_EQ_INT(rc, 0);
    for (uint32_t r = 0; r < WORLD; r++) {
        CHECK_MSG(s.rcs[r * 2] == INAGG_ERR_OVERFLOW, "rank %u: %s, want overflow", r,
                  inagg_strerror((inagg_result_t)s.rcs[r * 2]));
        CHECK_MSG(s.rcs[r * 2 + 1] == INAGG_OK, "rank %u after the overflow: %s", r,
                  inagg_strerror((inagg_result_t)s.rcs[r * 2 + 1]));
        for (int k = 0; k < 2; k++)
            for (uint32_t i = 0; i < N; i++) {
                uint32_t want = 0; /* two's complement wrap, computed without UB */
                for (uint32_t q = 0; q < WORLD; q++)
                    want += (uint32_t)value(q, i, k);
                int32_t got = s.out[((size_t)r * 2 + k) * N + i];
                CHECK_MSG((uint32_t)got == want, "rank %u call %d elem %u: %d != %d", r, k, i, got,
                          (int32_t)want);
            }
    }
}

TEST(int32_overflow_end_to_end_switchml, 60) { overflow_test(INAGG_PROTO_SWITCHML); }
TEST(int32_overflow_end_to_end_p4sgd, 60) { overflow_test(INAGG_PROTO_P4SGD); }
