/*
 * test_event_fd.c - the completion signal (inagg_comm_event_fd) and the asynchronous calls on
 * both slot protocols, end to end: a switch child and two worker children. Proves that the
 * descriptor is not readable while a request waits for the other rank and becomes readable
 * when the request completes (switchml: never before; p4sgd: when its result is there), that
 * clearing it makes it unreadable again, that a waiter driven only by the descriptor finishes
 * a mix of requests with exact int32 results (inagg_iallreduce of many packets on p4sgd,
 * inagg_iallreduce_small on switchml), and that a failed job makes it readable.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/benchdata.h"
#include "harness.h"
#include "inagg.h"
#include "testutil.h"

#define EV_WORLD 2u
#define EV_LATE_MS 800 /* rank 1 contributes this late to the first request */
#define EV_QUIET_MS 300 /* rank 0's descriptor must stay unreadable this long meanwhile */
#define EV_ROUNDS 12
/* Every wait for a wake-up is shorter than the retransmission timeout (2 s): a wake-up the
 * signal missed is not hidden by a timer that moves the request on anyway. */
#define EV_WAKE_MS 1500

typedef struct ev_spec {
    const char *addr, *job;
    inagg_protocol_t protocol;
    int kill_rank1; /* rank 1 leaves without a word after the mixed rounds */
    char *errors; /* shared: per rank 256 bytes, "" when it passed */
} ev_spec_t;

#define EV_FAIL(s, rank, ...)                                                                      \
    do {                                                                                           \
        snprintf((s)->errors + (rank)*256, 256, __VA_ARGS__);                                      \
        return 1;                                                                                  \
    } while (0)

static int readable(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, timeout_ms) > 0 && (p.revents & POLLIN);
}

static inagg_comm_t *ev_join(const ev_spec_t *s, uint32_t rank)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.slots = 4; /* a 3000-element p4sgd request waits for slots: the backlog */
    o.packet_elems = 256;
    /* no retransmission (and so no p4sgd timer) within the quiet window */
    o.rto_us = o.rto_min_us = o.rto_max_us = 2000000;
    o.timeout_ms = 3000;
    inagg_comm_t *comm = NULL;
    char detail[256];
    if (inagg_comm_create(&comm, s->addr, s->job, rank, EV_WORLD, &o, detail, sizeof(detail)) !=
        INAGG_OK) {
        snprintf(s->errors + rank * 256, 256, "join: %.200s", detail);
        return NULL;
    }
    return comm;
}

static void fill(int32_t *x, size_t n, uint32_t rank, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        x[i] = bench_value_i32(seed, rank, i);
}

static size_t wrong(const int32_t *x, size_t n, uint64_t seed)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += x[i] != bench_expected_i32(seed, EV_WORLD, i);
    return bad;
}

/* Rank 0's first request, on which rank 1 is late: the descriptor stays unreadable, then
 * becomes readable with the request done. `small`: one packet (p4sgd completes it on the
 * packet that wakes us; a larger one may wake us for each chunk's result first). */
static int first_request(const ev_spec_t *s, inagg_comm_t *comm, int fd, int32_t *x, size_t n)
{
    inagg_request_t *req = NULL;
    fill(x, n, 0, 5);
    if (inagg_iallreduce(comm, x, x, n, INAGG_INT32, INAGG_SUM, &req) != INAGG_OK)
        EV_FAIL(s, 0, "iallreduce: %s", inagg_last_error(comm));
    int done = 0;
    inagg_comm_event_clear(comm);
    inagg_test(req, &done);
    if (done || readable(fd, EV_QUIET_MS))
        EV_FAIL(s, 0, "readable (done %d) before rank 1 contributed", done);
    int wakes = 0;
    for (int i = 0; i < 1000 && !done; i++) {
        if (!readable(fd, EV_LATE_MS + 1000))
            EV_FAIL(s, 0, "not readable %d ms after the quiet window", EV_LATE_MS + 1000);
        wakes++;
        inagg_comm_event_clear(comm);
        inagg_test(req, &done);
        if (!done && (s->protocol == INAGG_PROTO_SWITCHML || n <= 256))
            EV_FAIL(s, 0, "readable before the request completed");
    }
    if (!done || inagg_wait(req) != INAGG_OK || wrong(x, n, 5))
        EV_FAIL(s, 0, "first request: done %d, %zu wrong after %d wakes", done, wrong(x, n, 5),
                wakes);
    if (readable(fd, 0))
        EV_FAIL(s, 0, "still readable after inagg_comm_event_clear");
    return 0;
}

/* Requests of three kinds in flight, finished by a waiter that sleeps on the descriptor
 * alone, every result exact. */
static int mixed_rounds(const ev_spec_t *s, uint32_t rank, inagg_comm_t *comm, int fd)
{
    static const size_t sizes[3] = {5000, 200, 700};
    static int32_t buf[3][5000];
    for (int round = 0; round < EV_ROUNDS; round++) {
        inagg_request_t *req[3] = {NULL, NULL, NULL};
        for (int k = 0; k < 3; k++) {
            fill(buf[k], sizes[k], rank, (uint64_t)(round * 3 + k));
            inagg_result_t rc = k == 1 ? inagg_iallreduce_small(comm, buf[k], buf[k], sizes[k],
                                                                INAGG_INT32, INAGG_SUM, &req[k])
                                       : inagg_iallreduce(comm, buf[k], buf[k], sizes[k],
                                                          INAGG_INT32, INAGG_SUM, &req[k]);
            if (rc != INAGG_OK)
                EV_FAIL(s, rank, "round %d call %d: %s", round, k, inagg_last_error(comm));
        }
        /* Sleep at once, before any other call: everything started must be on its way. */
        if (!readable(fd, EV_WAKE_MS))
            EV_FAIL(s, rank, "round %d: not readable in %d ms after the calls", round, EV_WAKE_MS);
        int left = 3;
        for (int spin = 0; left > 0; spin++) {
            if (spin > 10000)
                EV_FAIL(s, rank, "round %d: %d requests never completed", round, left);
            inagg_comm_event_clear(comm);
            for (int k = 0; k < 3; k++) {
                int done = 0;
                if (req[k] && inagg_test(req[k], &done) == INAGG_OK && done) {
                    if (inagg_wait(req[k]) != INAGG_OK)
                        EV_FAIL(s, rank, "round %d call %d: %s", round, k, inagg_last_error(comm));
                    req[k] = NULL;
                    left--;
                }
            }
            if (left > 0 && !readable(fd, EV_WAKE_MS))
                EV_FAIL(s, rank, "round %d: not readable in %d ms with %d pending (%s%s%s)", round,
                        EV_WAKE_MS, left, req[0] ? "large " : "", req[1] ? "small " : "",
                        req[2] ? "medium" : "");
        }
        for (int k = 0; k < 3; k++)
            if (wrong(buf[k], sizes[k], (uint64_t)(round * 3 + k)))
                EV_FAIL(s, rank, "round %d call %d: %zu elements wrong", round, k,
                        wrong(buf[k], sizes[k], (uint64_t)(round * 3 + k)));
    }
    return 0;
}

/* Rank 1 vanished: the failure alone makes the descriptor readable. */
static int failure_wakes(const ev_spec_t *s, inagg_comm_t *comm, int fd)
{
    int32_t x[300];
    inagg_request_t *req = NULL;
    fill(x, 300, 0, 9);
    if (inagg_iallreduce(comm, x, x, 300, INAGG_INT32, INAGG_SUM, &req) != INAGG_OK)
        EV_FAIL(s, 0, "the job failed before rank 1 left: %s", inagg_last_error(comm));
    /* Rank 1's connection closes: the switch fails the job at once. */
    int done = 0;
    for (int i = 0; i < 100 && !done; i++) {
        inagg_comm_event_clear(comm);
        inagg_test(req, &done);
        if (!done && !readable(fd, EV_WAKE_MS))
            EV_FAIL(s, 0, "a failed job left the descriptor unreadable for %d ms", EV_WAKE_MS);
    }
    inagg_result_t rc = inagg_wait(req);
    if (!done || rc == INAGG_OK)
        EV_FAIL(s, 0, "request on a failed job: done %d, %s", done, inagg_strerror(rc));
    return 0;
}

static int ev_worker(uint32_t rank, void *arg)
{
    ev_spec_t *s = arg;
    inagg_comm_t *comm = ev_join(s, rank);
    if (!comm)
        return 1;
    int fd = -1, fd2 = -1;
    if (inagg_comm_event_fd(comm, &fd) != INAGG_OK || fd < 0 ||
        inagg_comm_event_fd(comm, &fd2) != INAGG_OK || fd2 != fd)
        EV_FAIL(s, rank, "event_fd: %d %d: %s", fd, fd2, inagg_last_error(comm));
    if (readable(fd, 0))
        EV_FAIL(s, rank, "readable before any request");
    static int32_t x[3000];
    const size_t firsts[2] = {100, 3000}; /* one packet, then chunks over every slot */
    for (int f = 0; f < 2; f++) {
        if (rank == 0 && first_request(s, comm, fd, x, firsts[f]) != 0)
            return 1;
        if (rank == 1) {
            usleep(EV_LATE_MS * 1000);
            fill(x, firsts[f], 1, 5);
            if (inagg_allreduce(comm, x, x, firsts[f], INAGG_INT32, INAGG_SUM) != INAGG_OK ||
                wrong(x, firsts[f], 5))
                EV_FAIL(s, 1, "late allreduce: %s", inagg_last_error(comm));
        }
    }
    if (mixed_rounds(s, rank, comm, fd) != 0)
        return 1;
    if (s->kill_rank1 && rank == 1) {
        usleep(300 * 1000); /* rank 0 starts a request that waits for us, then we vanish */
        _exit(0); /* no LEAVE: the switch fails the job */
    }
    if (s->kill_rank1 && failure_wakes(s, comm, fd) != 0)
        return 1;
    inagg_comm_destroy(comm);
    return 0;
}

static void run_ev(inagg_protocol_t protocol, const char *job, int kill_rank1)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.worker_timeout_ms = kill_rank1 ? 2000 : 30000; /* > EV_LATE_MS */
    test_switch_t ts;
    ts_start(&ts, &cfg);
    ev_spec_t s = {.addr = ts.addr, .job = job, .protocol = protocol, .kill_rank1 = kill_rank1};
    s.errors = shared_alloc(EV_WORLD * 256);
    int failed = run_workers(EV_WORLD, ev_worker, &s, 50);
    ts_stop(&ts);
    CHECK_MSG(failed == 0, "rank 0: %s; rank 1: %s", s.errors, s.errors + 256);
}

TEST(event_fd_switchml_signals_completion, 60) { run_ev(INAGG_PROTO_SWITCHML, "evsml", 0); }
TEST(event_fd_p4sgd_signals_completion, 60) { run_ev(INAGG_PROTO_P4SGD, "evp4", 0); }
TEST(event_fd_switchml_wakes_on_failure, 60) { run_ev(INAGG_PROTO_SWITCHML, "evsmlf", 1); }
TEST(event_fd_p4sgd_wakes_on_failure, 60) { run_ev(INAGG_PROTO_P4SGD, "evp4f", 1); }

/* Before any communicator exists: the calls check their arguments. */
TEST(event_fd_arguments_checked, 5)
{
    int fd = 7;
    CHECK_EQ_INT(inagg_comm_event_fd(NULL, &fd), INAGG_ERR_INVALID);
    CHECK_EQ_INT(fd, -1);
    CHECK_EQ_INT(inagg_comm_event_clear(NULL), INAGG_ERR_INVALID);
}
