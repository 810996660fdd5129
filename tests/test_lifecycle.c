/*
 * test_lifecycle.c - a communicator's life around its work, with the switch in this process:
 * closing one is immediate (no wait for a poll slice of the monitor thread), and a switch
 * that stops drains its jobs with a SHUTDOWN line that the ranks report as the switch
 * shutting down, never as a rank that vanished.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/util.h"
#include "harness.h"
#include "inagg.h"
#include "switch/switch.h"

static inagg_switch_t *start_switch(switch_config_t *cfg, char *addr, size_t cap)
{
    cfg->listen = "127.0.0.1:0";
    inagg_switch_t *sw;
    char err[256];
    CHECK_MSG(switch_start(cfg, &sw, err, sizeof(err)) == 0, "switch: %s", err);
    snprintf(addr, cap, "127.0.0.1:%u", switch_port(sw));
    return sw;
}

/* 50 create/destroy pairs of a one-rank job: each destroy well under the monitor's old
 * 100 ms read slice (which made 200 MPI_Comm_dup/free pairs take 20 s). */
TEST(lifecycle_comm_destroy_is_immediate, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    uint64_t worst_ns = 0, total_ns = 0;
    for (int i = 0; i < 50; i++) {
        inagg_options_t o = INAGG_OPTIONS_INIT;
        o.slots = 4;
        o.threads = 1;
        inagg_comm_t *c;
        char d[256], job[32];
        snprintf(job, sizeof(job), "life%d", i);
        CHECK_MSG(inagg_comm_create(&c, addr, job, 0, 1, &o, d, sizeof(d)) == INAGG_OK,
                  "join: %s", d);
        int32_t v = 7;
        CHECK_EQ_INT(inagg_allreduce(c, &v, &v, 1, INAGG_INT32, INAGG_SUM), INAGG_OK);
        CHECK_EQ_INT(v, 7);
        uint64_t t0 = util_now_ns();
        inagg_comm_destroy(c);
        uint64_t dt = util_now_ns() - t0;
        total_ns += dt;
        if (dt > worst_ns)
            worst_ns = dt;
    }
    switch_stop(sw);
    printf("    destroy: worst %.2f ms, mean %.2f ms\n", worst_ns / 1e6, total_ns / 50 / 1e6);
    CHECK_MSG(worst_ns < 20000000ull, "a destroy took %.1f ms (bound 20 ms)", worst_ns / 1e6);
}
