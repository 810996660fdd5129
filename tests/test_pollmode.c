/*
 * test_pollmode.c - polling modes: parsing `busy|sleep|adaptive[:US]` and CPU lists, the
 * dataplane's choice of receive timeout, and a worker's spinning wait over loopback UDP
 * (asks without sleeping for its spin, then sleeps; wakes on a packet meanwhile), the
 * default (the zero value: adaptive), the spin given up when a yield loses the core to a
 * CPU-bound thread, INAGG_POLL refused with a clear error when it is not a mode, and the
 * round-robin pinning of `bench latency --pin-hosts`.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/pollmode.h"
#include "lib/base/util.h"
#include "lib/transport/transport.h"
#include "switchd/switchd.h"

TEST(pollmode_parse_modes_and_errors, 5)
{
    switch_poll_t m;
    uint32_t us;
    char err[160];
    CHECK(switch_poll_parse("sleep", &m, &us, err, sizeof(err)) == 0 && m == SWITCH_POLL_SLEEP);
    CHECK(switch_poll_parse("busy", &m, &us, err, sizeof(err)) == 0 && m == SWITCH_POLL_BUSY);
    CHECK(switch_poll_parse("adaptive", &m, &us, err, sizeof(err)) == 0 &&
          m == SWITCH_POLL_ADAPTIVE && us == SWITCH_POLL_SPIN_US_DEFAULT);
    CHECK(switch_poll_parse("adaptive:7", &m, &us, err, sizeof(err)) == 0 && us == 7);
    const char *bad[] = {"",
                         "Busy",
                         "adaptive:",
                         "adaptive:0",
                         "adaptive:-1",
                         "adaptive:5x",
                         "adaptive:1000001",
                         "adaptivex",
                         "sleep:3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_MSG(switch_poll_parse(bad[i], &m, &us, err, sizeof(err)) == -EINVAL && err[0],
                  "'%s' accepted", bad[i]);
    }
    CHECK(switch_poll_worker_us(SWITCH_POLL_SLEEP, 0) == INAGG_POLL_SLEEP);
    CHECK(switch_poll_worker_us(SWITCH_POLL_BUSY, 0) == INAGG_POLL_BUSY);
    CHECK(switch_poll_worker_us(SWITCH_POLL_ADAPTIVE, 9) == 9);
    CHECK(switch_poll_worker_us(SWITCH_POLL_ADAPTIVE, 0) == SWITCH_POLL_SPIN_US_DEFAULT);

    uint32_t cpus[SWITCH_MAX_CPUS], n;
    CHECK(switch_cpu_list_parse("0,2-4", cpus, &n, err, sizeof(err)) == 0 && n == 4 &&
          cpus[0] == 0 && cpus[1] == 2 && cpus[3] == 4);
    const char *badc[] = {"", "64", "3-1", "1,1", "0-2,2", "a", "1,", ",1", "-1", "1-"};
    for (size_t i = 0; i < sizeof(badc) / sizeof(badc[0]); i++)
        CHECK_MSG(switch_cpu_list_parse(badc[i], cpus, &n, err, sizeof(err)) == -EINVAL,
                  "CPU list '%s' accepted", badc[i]);
}

TEST(pollmode_dataplane_timeout, 5)
{
    uint64_t ms = 1000000u;
    CHECK_EQ_INT(switch_poll_timeout(SWITCH_POLL_SLEEP, 0, 5 * ms, 5 * ms, 50), 50);
    CHECK_EQ_INT(switch_poll_timeout(SWITCH_POLL_BUSY, 0, 900 * ms, 0, 50), 0);
    /* adaptive:100 spins within 100 us of the last traffic, then sleeps */
    CHECK_EQ_INT(switch_poll_timeout(SWITCH_POLL_ADAPTIVE, 100, 5 * ms + 99000, 5 * ms, 50), 0);
    CHECK_EQ_INT(switch_poll_timeout(SWITCH_POLL_ADAPTIVE, 100, 5 * ms + 101000, 5 * ms, 50), 50);
    /* the zero value is the default: adaptive for SWITCH_POLL_SPIN_US_DEFAULT */
    switch_config_t zero;
    memset(&zero, 0, sizeof(zero));
    CHECK(zero.poll == SWITCH_POLL_ADAPTIVE);
    uint64_t spin = SWITCH_POLL_SPIN_US_DEFAULT * 1000ull;
    CHECK_EQ_INT(
        switch_poll_timeout(zero.poll, zero.poll_spin_us, 5 * ms + spin - 1000, 5 * ms, 50), 0);
    CHECK_EQ_INT(
        switch_poll_timeout(zero.poll, zero.poll_spin_us, 5 * ms + spin + 1000, 5 * ms, 50), 50);
}

/* ---- the spin ban: a yield that lost the core to a CPU-bound thread stops the spinning ---- */

typedef struct ban_run {
    _Atomic int stop;
    int banned; /* switch_poll_idle said so */
    int may_spin_after; /* switch_poll_may_spin right after */
    int busy_timeout_after; /* switch_poll_timeout(BUSY) right after */
    int pinned;
} ban_run_t;

static void *hog_main(void *arg)
{
    ban_run_t *r = arg;
    if (switch_pin_self(0) != 0)
        return NULL;
    uint64_t end = util_now_ns() + 3000000000ull; /* bounded: 3 s */
    while (!atomic_load(&r->stop) && util_now_ns() < end) {
    }
    return NULL;
}

static void *yielder_main(void *arg)
{
    ban_run_t *r = arg;
    r->pinned = switch_poll_may_spin(util_now_ns()) && switch_pin_self(0) == 0;
    uint64_t end = util_now_ns() + 2000000000ull;
    while (r->pinned && !r->banned && util_now_ns() < end)
        r->banned = switch_poll_idle();
    uint64_t now = util_now_ns();
    r->may_spin_after = switch_poll_may_spin(now);
    r->busy_timeout_after = switch_poll_timeout(SWITCH_POLL_BUSY, 0, now, now, 50);
    return NULL;
}

TEST(pollmode_spin_stops_when_a_yield_loses_the_core, 20)
{
    ban_run_t r = {0};
    pthread_t hog, yielder;
    CHECK(pthread_create(&hog, NULL, hog_main, &r) == 0);
    CHECK(pthread_create(&yielder, NULL, yielder_main, &r) == 0);
    pthread_join(yielder, NULL);
    atomic_store(&r.stop, 1);
    pthread_join(hog, NULL);
    CHECK_MSG(r.pinned, "could not pin to CPU 0");
    /* the hog holds CPU 0 whenever the yielder gives it up: a yield lasts a time slice */
    CHECK_MSG(r.banned, "no yield lasted over %u us beside a CPU-bound thread",
              SWITCH_POLL_YIELD_LONG_US);
    CHECK(!r.may_spin_after);
    CHECK_EQ_INT(r.busy_timeout_after, 50); /* even busy sleeps while banned */
    /* the ban is the yielding thread's own: this one may still spin */
    CHECK(switch_poll_may_spin(util_now_ns()));
}

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static transport_t *open_udp(void)
{
    transport_config_t cfg = {.kind = "udp", .bind = "127.0.0.1:0", .buffer_bytes = 1 << 20};
    transport_t *t = NULL;
    char err[160] = "";
    int rc = transport_open(&cfg, &t, err, sizeof(err));
    CHECK_MSG(rc == 0 && t, "transport_open: %d %s", rc, err);
    return t;
}

TEST(pollmode_worker_wait_spins_then_sleeps, 20)
{
    transport_t *a = open_udp(), *b = open_udp();
    transport_t *const only_b[1] = {b};
    /* sleeping: a 60 ms wait costs next to no CPU and asks once */
    uint64_t empty = 0;
    double c0 = thread_cpu_ms();
    CHECK_EQ_INT(transport_wait_ready_spin(only_b, 1, 60, 0, &empty), 0);
    double slept_cpu = thread_cpu_ms() - c0;
    CHECK_MSG(empty == 0 && slept_cpu < 20.0, "sleeping wait: %llu empty asks, %.1f ms CPU",
              (unsigned long long)empty, slept_cpu);
    /* adaptive 40 ms within a 60 ms wait: asks many times (spinning), then sleeps the rest */
    uint64_t t0 = util_now_ns();
    CHECK_EQ_INT(transport_wait_ready_spin(only_b, 1, 60, 40000, &empty), 0);
    uint64_t waited = util_now_ns() - t0;
    /* (a yield that lost the core for long ends the spin early: switch_poll_may_spin) */
    CHECK_MSG((empty > 10 || !switch_poll_may_spin(util_now_ns())) && waited >= 55000000ull,
              "spinning wait: %llu empty asks in %llu ns", (unsigned long long)empty,
              (unsigned long long)waited);
    /* busy: the whole wait is asks; a packet already there returns at once */
    empty = 0;
    CHECK_EQ_INT(transport_wait_ready_spin(only_b, 1, 20, INAGG_POLL_BUSY, &empty), 0);
    CHECK(empty > 10 || !switch_poll_may_spin(util_now_ns()));
    transport_addr_t ab, to;
    CHECK(transport_local_addr(b, &ab) == 0);
    CHECK(transport_parse_addr("udp", "127.0.0.1:1", &to) == 0);
    transport_addr_set_port(&to, transport_addr_port(&ab));
    transport_tx_t p = {.head = "x", .head_len = 1, .to = to};
    CHECK_EQ_INT(transport_send(a, &p, 1, 100), 1);
    t0 = util_now_ns();
    CHECK_EQ_INT(transport_wait_ready_spin(only_b, 1, 1000, INAGG_POLL_BUSY, NULL), 1);
    CHECK(util_now_ns() - t0 < 500000000ull);
    transport_close(a);
    transport_close(b);
}

TEST(pollmode_bad_inagg_poll_is_refused, 10)
{
    char *old = getenv("INAGG_POLL") ? strdup(getenv("INAGG_POLL")) : NULL;
    setenv("INAGG_POLL", "spin-forever", 1);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = INAGG_PROTO_P4SGD;
    o.timeout_ms = 500;
    inagg_comm_t *c = NULL;
    char detail[256] = "";
    /* no switch listens on port 1: the option is refused before any connection */
    inagg_result_t rc =
        inagg_comm_create(&c, "127.0.0.1:1", "pollenv", 0, 1, &o, detail, sizeof(detail));
    CHECK_MSG(rc == INAGG_ERR_INVALID && strstr(detail, "INAGG_POLL"), "rc %d: %s", rc, detail);
    if (old)
        setenv("INAGG_POLL", old, 1);
    else
        unsetenv("INAGG_POLL");
    free(old);
}

/* switch_pin_self_spread (bench latency --pin-hosts): index k pins to the k-th CPU the thread
 * may use, round-robin over them; the pin holds for the thread alone. */
static void *spread_probe(void *arg)
{
    int *io = arg; /* in: the index; out: the CPU it pinned to, or -1 if the set is not that */
    int cpu = switch_pin_self_spread((uint32_t)io[0]);
    cpu_set_t now;
    io[1] = cpu >= 0 && sched_getaffinity(0, sizeof(now), &now) == 0 && CPU_COUNT(&now) == 1 &&
                    CPU_ISSET(cpu, &now)
                ? cpu
                : -1;
    return NULL;
}

TEST(pollmode_pin_spread_round_robin, 10)
{
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof(allowed), &allowed) == 0);
    int n = CPU_COUNT(&allowed), nth[3] = {-1, -1, -1};
    for (int cpu = 0, k = 0; cpu < CPU_SETSIZE && k < 3; cpu++)
        if (CPU_ISSET(cpu, &allowed))
            nth[k++] = cpu;
    int idx[] = {0, 1, n, n + 1},
        want[] = {nth[0], n > 1 ? nth[1] : nth[0], nth[0], n > 1 ? nth[1] : nth[0]};
    for (int i = 0; i < 4; i++) {
        int io[2] = {idx[i], -2};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, spread_probe, io) == 0);
        pthread_join(t, NULL);
        CHECK_MSG(io[1] == want[i], "index %d of %d CPUs pinned to %d, want %d", idx[i], n, io[1],
                  want[i]);
    }
    cpu_set_t after; /* the caller's own set is untouched */
    CHECK(sched_getaffinity(0, sizeof(after), &after) == 0 && CPU_EQUAL(&after, &allowed));
}
