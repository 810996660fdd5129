/*
 * test_lifecycle.c - a communicator's life around its work, with the switch in this process:
 * closing one is immediate (no wait for a poll slice of the monitor thread), and a switch
 * that stops drains its jobs with a SHUTDOWN line that the ranks report as the switch
 * shutting down, never as a rank that vanished.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "switchd/switchd.h"

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
        CHECK_MSG(inagg_comm_create(&c, addr, job, 0, 1, &o, d, sizeof(d)) == INAGG_OK, "join: %s",
                  d);
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

/* ---- a switch that stops drains its jobs ---- */

typedef struct drain_rank {
    const char *addr;
    uint32_t rank;
    int blocked_call; /* rank 0: its second allreduce is in flight at the stop */
    inagg_result_t first, second;
    char error[512];
    uint64_t failed_ns; /* when the second call returned */
} drain_rank_t;

static void *drain_rank_main(void *arg)
{
    drain_rank_t *d = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 4;
    o.threads = 1;
    inagg_comm_t *c;
    char why[256];
    if (inagg_comm_create(&c, d->addr, "drained", d->rank, 2, &o, why, sizeof(why)) != INAGG_OK) {
        d->first = INAGG_ERR_SYSTEM;
        snprintf(d->error, sizeof(d->error), "join: %s", why);
        return NULL;
    }
    int32_t v = 1;
    d->first = inagg_allreduce(c, &v, &v, 1, INAGG_INT32, INAGG_SUM);
    if (d->blocked_call) {
        d->second = inagg_allreduce(c, &v, &v, 1, INAGG_INT32, INAGG_SUM); /* rank 1 never comes */
    } else {
        usleep(300000); /* the switch stops meanwhile: the next call must fail */
        d->second = inagg_allreduce(c, &v, &v, 1, INAGG_INT32, INAGG_SUM);
    }
    d->failed_ns = util_now_ns();
    snprintf(d->error, sizeof(d->error), "%s", inagg_last_error(c));
    inagg_comm_destroy(c);
    return NULL;
}

/* A switch stopped while a job runs: every rank's call in flight and next call fail with
 * "switch shutting down" and the stop's reason (INAGG_ERR_CONNECTION) within the drain bound,
 * no rank is blamed, and the switch's log says it drained rather than that a rank vanished. */
TEST(lifecycle_switch_stop_drains_members_with_shutdown, 60)
{
    char logpath[] = "/tmp/inagg-drain-log-XXXXXX";
    int logfd = mkstemp(logpath);
    CHECK(logfd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(logfd, STDERR_FILENO); /* this test's child: the switch logs here */
    setenv("INAGG_LOG", "info", 1); /* tests/run asks for warn; this test reads info lines */
    log_init(LOG_INFO, "inagg switch");

    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    drain_rank_t d[2] = {{.addr = addr, .rank = 0, .blocked_call = 1}, {.addr = addr, .rank = 1}};
    pthread_t t[2];
    for (int r = 0; r < 2; r++)
        CHECK(pthread_create(&t[r], NULL, drain_rank_main, &d[r]) == 0);
    usleep(150000); /* both joined, the first allreduce done, rank 0's second in flight */
    uint64_t stop_ns = util_now_ns();
    switch_stop_because(sw, "maintenance window");
    uint64_t stopped_ns = util_now_ns();
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);

    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    char log[8192] = "";
    ssize_t n = pread(logfd, log, sizeof(log) - 1, 0);
    log[n > 0 ? n : 0] = '\0';
    close(logfd);
    unlink(logpath);

    for (int r = 0; r < 2; r++) {
        printf("    rank %d: %s (%.0f ms after the stop)\n", r, d[r].error,
               (d[r].failed_ns - stop_ns) / 1e6);
        CHECK_MSG(d[r].first == INAGG_OK, "rank %d's first call: %d (%s)", r, d[r].first,
                  d[r].error);
        CHECK_EQ_INT(d[r].second, INAGG_ERR_CONNECTION);
        CHECK_MSG(strstr(d[r].error, "switch shutting down: maintenance window"), "rank %d: '%s'",
                  r, d[r].error);
        CHECK_MSG(!strstr(d[r].error, "disconnected"), "rank %d: '%s'", r, d[r].error);
    }
    CHECK_MSG(d[0].failed_ns - stop_ns < 1000000000ull,
              "the call in flight failed %.0f ms "
              "after the stop",
              (d[0].failed_ns - stop_ns) / 1e6);
    CHECK_MSG(stopped_ns - stop_ns < (SWITCH_DRAIN_MS + 1000) * 1000000ull,
              "switch_stop took %.0f ms", (stopped_ns - stop_ns) / 1e6);
    CHECK_MSG(strstr(log, "draining") && strstr(log, "maintenance window"), "log: %s", log);
    CHECK_MSG(!strstr(log, "disconnected"), "log: %s", log);
}

/* ---- addresses ---- */

/* A host name that does not resolve is reported as such, with the resolver's reason; a
 * malformed address says what was expected. Neither reads like the other. */
TEST(lifecycle_unresolvable_host_is_not_a_malformed_address, 30)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    inagg_comm_t *c = NULL;
    char d[256];
    /* RFC 6761: .invalid never resolves */
    CHECK_EQ_INT(inagg_comm_create(&c, "no-such-host.invalid:7000", "x", 0, 1, &o, d, sizeof(d)),
                 INAGG_ERR_INVALID);
    printf("    %s\n", d);
    CHECK_MSG(strstr(d, "host 'no-such-host.invalid' could not be resolved: ") &&
                  !strstr(d, "expected HOST:PORT"),
              "'%s'", d);
    const char *malformed[] = {"127.0.0.1:abc", "127.0.0.1:70000", ":7000", "127.0.0.1:"};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        CHECK_EQ_INT(inagg_comm_create(&c, malformed[i], "x", 0, 1, &o, d, sizeof(d)),
                     INAGG_ERR_INVALID);
        CHECK_MSG(strstr(d, "expected HOST:PORT") && !strstr(d, "resolved"), "%s: '%s'",
                  malformed[i], d);
    }
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.listen = "no-such-host.invalid:0";
    inagg_switch_t *sw = NULL;
    char err[256];
    CHECK(switch_start(&cfg, &sw, err, sizeof(err)) != 0);
    CHECK_MSG(strstr(err, "could not be resolved"), "'%s'", err);
}
