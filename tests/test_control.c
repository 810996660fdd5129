/*
 * test_control.c - the switch's control plane against hostile and careless clients, with the
 * switch in this process: stats read while the control thread admits and retires jobs (a
 * data race ThreadSanitizer sees), a client that never reads its replies, a stats printer
 * stuck on a full pipe, idle and slow connections, too many connections from one address,
 * slot quotas, and job secrets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/log.h"
#include "lib/base/netaddr.h"
#include "lib/base/sha256.h"
#include "lib/base/util.h"
#include "lib/client/ctl.h"
#include "lib/wire/auth.h"
#include "switchd/server/control_int.h"
#include "switchd/switchd.h"
#include "testutil.h"

/* An in-process switch on a free loopback port. */
static inagg_switch_t *start_switch(switch_config_t *cfg, char *addr, size_t cap)
{
    cfg->listen = "127.0.0.1:0";
    inagg_switch_t *sw;
    char err[256];
    CHECK_MSG(switch_start(cfg, &sw, err, sizeof(err)) == 0, "switch: %s", err);
    snprintf(addr, cap, "127.0.0.1:%u", switch_port(sw));
    return sw;
}

static int connect_to(const char *addr)
{
    int fd = ctl_connect_to(addr, 2000);
    CHECK_MSG(fd >= 0, "connect %s: %s", addr, strerror(-fd));
    return fd;
}

/* Send one line and read one reply line (2 s at most). 0 or -errno. */
static int request(int fd, ctl_reader_t *rd, const char *line, char *reply, size_t cap)
{
    int rc = ctl_write_line(fd, line, 2000);
    return rc ? rc : ctl_read_line(fd, rd, reply, cap, 2000);
}

/* ---- the race: stats read while the control thread admits and retires jobs ---- */

static atomic_int stats_stop;

static void *stats_reader(void *arg)
{
    inagg_switch_t *sw = arg;
    FILE *null = fopen("/dev/null", "w");
    while (!atomic_load(&stats_stop)) {
        switch_write_stats(sw, null, 0);
        switch_write_stats(sw, null, 1);
    }
    fclose(null);
    return NULL;
}

TEST(switch_stats_race_free_while_jobs_come_and_go, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    pthread_t reader;
    atomic_store(&stats_stop, 0);
    CHECK(pthread_create(&reader, NULL, stats_reader, sw) == 0);
    char line[CTL_LINE_MAX], reply[CTL_LINE_MAX];
    for (int i = 0; i < 40; i++) {
        int fd = connect_to(addr);
        ctl_reader_t rd = {0};
        snprintf(line, sizeof(line),
                 "JOIN version=%u job=race%d rank=0 world=1 slots=4 elems=16 "
                 "float=fixed protocol=switchml timeout=2000",
                 INAGG_PROTOCOL_VERSION, i);
        CHECK_MSG(request(fd, &rd, line, reply, sizeof(reply)) == 0 &&
                      strncmp(reply, "JOINED", 6) == 0,
                  "%s", reply);
        close(fd); /* the job's only member leaves: it fails and retires */
    }
    atomic_store(&stats_stop, 1);
    pthread_join(reader, NULL);
    switch_stop(sw);
}

/* ---- the control plane against careless and hostile clients ---- */

static void join_line(char *line, size_t cap, const char *job, uint32_t rank, uint32_t world,
                      uint32_t slots)
{
    snprintf(line, cap,
             "JOIN version=%u job=%s rank=%u world=%u slots=%u elems=16 float=fixed "
             "protocol=switchml timeout=5000",
             INAGG_PROTOCOL_VERSION, job, rank, world, slots);
}

/* Connect, JOIN, and return the connection (kept open: it holds the rank) with the reply. */
static int join_raw(const char *addr, const char *job, uint32_t rank, uint32_t world,
                    uint32_t slots, char *reply, size_t cap)
{
    int fd = connect_to(addr);
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX];
    join_line(line, sizeof(line), job, rank, world, slots);
    int rc = ctl_write_line(fd, line, 2000);
    /* A JOIN of a world > 1 job is answered only when the job is complete: no reply yet. */
    if (rc == 0 && world == 1)
        rc = ctl_read_line(fd, &rd, reply, cap, 2000);
    else if (rc == 0)
        rc = ctl_read_line(fd, &rd, reply, cap, 300) == -ETIMEDOUT ? 0 : 0;
    CHECK_MSG(rc == 0, "join %s: %s", job, strerror(-rc));
    return fd;
}

/* Does the peer close fd within timeout_ms (reading and discarding what it sends)? */
static int closed_within(int fd, int timeout_ms)
{
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX];
    uint64_t end = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (util_now_ns() < end) {
        int rc = ctl_read_line(fd, &rd, line, sizeof(line), 50);
        if (rc == -ECONNRESET || (rc < 0 && rc != -ETIMEDOUT))
            return 1;
    }
    return 0;
}

/* A client that sends requests and never reads the replies must not hold the control thread:
 * another job's JOIN is answered at once, and the slow reader is closed. */
/* Five JOINs of one-rank jobs named PREFIXi, one after another; their latencies in ms. */
static void time_joins(const char *addr, const char *prefix, double ms[5])
{
    char reply[CTL_LINE_MAX], job[32];
    for (int i = 0; i < 5; i++) {
        snprintf(job, sizeof(job), "%s%d", prefix, i);
        uint64_t t0 = util_now_ns();
        int fd = join_raw(addr, job, 0, 1, 4, reply, sizeof(reply));
        ms[i] = (double)(util_now_ns() - t0) / 1e6;
        CHECK_MSG(strncmp(reply, "JOINED", 6) == 0, "%s", reply);
        close(fd);
    }
}

static double median5(double v[5])
{
    for (int i = 1; i < 5; i++)
        for (int k = i; k > 0 && v[k] < v[k - 1]; k--) {
            double t = v[k];
            v[k] = v[k - 1];
            v[k - 1] = t;
        }
    return v[2];
}

TEST(control_slow_reader_does_not_stall_joins, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    double quiet[5], attacked[5];
    time_joins(addr, "quiet", quiet);
    int slow = connect_to(addr);
    int small = 4096;
    setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    /* 20000 STATS requests (a few hundred KB); each reply is a few KB that nobody reads. */
    static const char req[] = "STATS json\n";
    size_t sent = 0, want = 20000 * (sizeof(req) - 1);
    uint64_t end = util_now_ns() + 5000000000ull;
    while (sent < want && util_now_ns() < end) {
        ssize_t n = send(slow, req, sizeof(req) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            sent += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            break; /* closed by the switch already */
        else
            usleep(1000);
    }
    usleep(200000);
    time_joins(addr, "other", attacked);
    double worst = attacked[0];
    for (int i = 1; i < 5; i++)
        worst = attacked[i] > worst ? attacked[i] : worst;
    fprintf(stderr,
            "    JOIN latency, median of 5: %.3f ms quiet, %.3f ms with a client not "
            "reading (worst %.3f ms)\n",
            median5(quiet), median5(attacked), worst);
    CHECK_MSG(worst < 500, "a JOIN took %.0f ms while a client did not read", worst);
    CHECK(closed_within(slow, 15000));
    CHECK(ts_switch_stat(sw, "output_full") + ts_switch_stat(sw, "request_timeout") >= 1);
    close(slow);
    switch_stop(sw);
}

/* A connection that sends nothing is closed after the idle timeout; one that starts a line
 * and never ends it, after the request deadline. Both are counted. */
TEST(control_idle_and_unfinished_requests_are_closed, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.idle_ms = 300;
    cfg.request_ms = 300;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    int idle = connect_to(addr);
    int partial = connect_to(addr);
    CHECK(send(partial, "STA", 3, MSG_NOSIGNAL) == 3);
    CHECK(closed_within(idle, 3000));
    CHECK(closed_within(partial, 3000));
    CHECK_EQ_INT(ts_switch_stat(sw, "idle_closed"), 1);
    CHECK_EQ_INT(ts_switch_stat(sw, "request_timeout"), 1);
    /* A member of a job is not idle: it waits for barriers and results. */
    char reply[CTL_LINE_MAX];
    int member = join_raw(addr, "member", 0, 1, 4, reply, sizeof(reply));
    CHECK_MSG(strncmp(reply, "JOINED", 6) == 0, "%s", reply);
    CHECK(!closed_within(member, 1000));
    close(member);
    close(idle);
    close(partial);
    switch_stop(sw);
}

/* Connections are limited per client address, and idle ones without a job make room: a
 * flood of idle connections from one address keeps only its share open (each new connection
 * closes the longest-idle one, which is told why), and a member's JOIN from the same address
 * still gets in; only when every connection of the address holds a job is one refused. */
TEST(control_connections_limited_per_address, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.max_conns_per_addr = 8;
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    enum { FLOOD = 300 };
    static int fds[FLOOD];
    int evicted = 0;
    for (int i = 0; i < FLOOD; i++)
        fds[i] = connect_to(addr);
    char line[CTL_LINE_MAX];
    for (int i = 0; i < FLOOD; i++) {
        ctl_reader_t rd = {0};
        int rc = ctl_read_line(fds[i], &rd, line, sizeof(line), i < FLOOD - 8 ? 2000 : 20);
        if (rc == 0 && strstr(line, "ERR busy closed: the longest-idle connection"))
            evicted++;
    }
    CHECK_EQ_INT(evicted, FLOOD - 8);
    CHECK_EQ_INT(ts_switch_stat(sw, "conn_evicted"), FLOOD - 8);
    CHECK_EQ_INT(ts_switch_stat(sw, "connections"), 8);
    CHECK_EQ_INT(ts_switch_stat(sw, "conn_per_addr"), 0);
    /* the flood's last 8 are open and idle: members of 8 jobs join from the same address */
    char reply[CTL_LINE_MAX], job[32];
    int members[8];
    for (int m = 0; m < 8; m++) {
        snprintf(job, sizeof(job), "member%d", m);
        members[m] = join_raw(addr, job, 0, 1, 4, reply, sizeof(reply));
        CHECK_MSG(members[m] >= 0 && strncmp(reply, "JOINED", 6) == 0, "%s", reply);
    }
    CHECK_EQ_INT(ts_switch_stat(sw, "connections"), 8);
    /* every connection of the address holds a job now: a ninth is refused */
    int extra = connect_to(addr);
    ctl_reader_t rd = {0};
    CHECK(ctl_read_line(extra, &rd, line, sizeof(line), 2000) == 0);
    CHECK_MSG(strstr(line, "ERR busy too many control connections from this address"), "%s", line);
    CHECK_EQ_INT(ts_switch_stat(sw, "conn_per_addr"), 1);
    close(extra);
    for (int m = 0; m < 8; m++)
        close(members[m]);
    for (int i = 0; i < FLOOD; i++)
        close(fds[i]);
    switch_stop(sw);
}

/* Slot quotas: one JOIN cannot take more than a job's share of the pool, the jobs of one
 * address not more than the address's, repeating does not help, and slots come back when
 * a job ends. */
TEST(control_slot_quotas_per_job_and_address, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.total_slots = 100; /* defaults: a job 50, an address 75 */
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    char reply[CTL_LINE_MAX];
    for (int i = 0; i < 20; i++) {
        int fd = join_raw(addr, "greedy", 0, 2, 5000, reply, sizeof(reply));
        CHECK_MSG(strstr(reply, "ERR refused slot quota: job 'greedy' asks 5000 slots, one job "
                                "may hold at most 50"),
                  "%s", reply);
        close(fd);
    }
    CHECK_EQ_INT(ts_switch_stat(sw, "job_slot_quota"), 20);
    CHECK_EQ_INT(ts_switch_stat(sw, "slots_used"), 0);
    int a = join_raw(addr, "a", 0, 2, 50, reply, sizeof(reply)); /* joining: holds 50 */
    int b = join_raw(addr, "b", 0, 2, 30, reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "per-address quota of 75"), "%s", reply);
    CHECK_EQ_INT(ts_switch_stat(sw, "addr_slot_quota"), 1);
    CHECK_EQ_INT(ts_switch_stat(sw, "slots_used"), 50);
    close(b);
    close(a); /* job a's only member leaves: its slots return */
    int c = -1;
    for (int tries = 0; tries < 50; tries++) {
        usleep(20000);
        if (ts_switch_stat(sw, "slots_used") == 0)
            break;
    }
    c = join_raw(addr, "c", 0, 1, 50, reply, sizeof(reply));
    CHECK_MSG(strncmp(reply, "JOINED", 6) == 0, "%s", reply);
    close(c);
    switch_stop(sw);
}

/* ---- job secrets ---- */

typedef struct lib_join {
    const char *addr, *job, *secret;
    uint32_t rank, world;
    inagg_result_t rc;
    char detail[256];
} lib_join_t;

static void *lib_join_main(void *arg)
{
    lib_join_t *a = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 4;
    o.packet_elems = 16;
    o.timeout_ms = 10000;
    o.secret = a->secret;
    inagg_comm_t *c = NULL;
    a->rc =
        inagg_comm_create(&c, a->addr, a->job, a->rank, a->world, &o, a->detail, sizeof(a->detail));
    if (a->rc == INAGG_OK) {
        int32_t x = 1, y = 0;
        a->rc = inagg_allreduce(c, &x, &y, 1, INAGG_INT32, INAGG_SUM);
        if (a->rc == INAGG_OK && y != (int32_t)a->world)
            a->rc = INAGG_ERR_PROTOCOL;
        inagg_comm_destroy(c);
    }
    return NULL;
}

/* Wait (up to 2 s) until job `name` is registered and joining. */
static void wait_joining(inagg_switch_t *sw, const char *name)
{
    char want[96];
    snprintf(want, sizeof(want), "name=%s state=joining", name);
    for (int i = 0; i < 200; i++) {
        char *text = ts_switch_stats_text(sw, 0);
        int found = strstr(text, want) != NULL;
        free(text);
        if (found)
            return;
        usleep(10000);
    }
    CHECK_MSG(0, "job %s never registered", name);
}

/* A raw JOIN of rank 1 of job `job` (world 2) on a fresh connection, proving `secret` the
 * way `mode` says: "none", "verifier" or "proof"; the first reply line. */
static void raw_secret_join(const char *addr, const char *job, const char *secret, const char *mode,
                            char *reply, size_t cap)
{
    int fd = connect_to(addr);
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX], extra[160] = "", hex[65];
    uint8_t v[32], mac[32], nonce[16];
    wire_auth_verifier(secret, strlen(secret), job, v);
    if (strcmp(mode, "proof") == 0) {
        snprintf(line, sizeof(line), "HELLO job=%s", job);
        CHECK(request(fd, &rd, line, reply, cap) == 0);
        CHECK_MSG(strstr(reply, "CHALLENGE nonce=") && strstr(reply, "job=exists"), "%s", reply);
        char nh[40];
        CHECK(ctlline_get(reply, "nonce", nh, sizeof(nh)) == 0 && hex_decode(nh, nonce, 16) == 0);
        wire_auth_proof(v, nonce, job, 1, mac);
        hex_encode(mac, 32, hex);
        snprintf(extra, sizeof(extra), " proof=%s", hex);
    } else if (strcmp(mode, "verifier") == 0) {
        hex_encode(v, 32, hex);
        snprintf(extra, sizeof(extra), " verifier=%s", hex);
    }
    join_line(line, sizeof(line), job, 1, 2, 4);
    strncat(line, extra, sizeof(line) - strlen(line) - 1);
    CHECK(request(fd, &rd, line, reply, cap) == 0);
    close(fd);
}

/* A job registered with a secret admits only ranks that prove it: no secret, a wrong one, a
 * replayed proof or verifier of another job are refused and counted; the real ranks run. */
TEST(control_job_secret_admits_only_ranks_that_prove_it, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    lib_join_t r0 = {
        .addr = addr, .job = "guarded", .secret = "correct horse", .rank = 0, .world = 2};
    pthread_t t0;
    CHECK(pthread_create(&t0, NULL, lib_join_main, &r0) == 0);
    wait_joining(sw, "guarded");
    raw_secret_join(addr, "guarded", "", "none", reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "ERR refused authentication failed for job 'guarded' rank 1: the "
                            "job has a secret and this rank gave none"),
              "%s", reply);
    raw_secret_join(addr, "guarded", "battery staple", "proof", reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "wrong job secret"), "%s", reply);
    raw_secret_join(addr, "guarded", "battery staple", "verifier", reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "wrong job secret"), "%s", reply);
    CHECK_EQ_INT(ts_switch_stat(sw, "auth_failed"), 3);
    /* The right secret through the library (HELLO, CHALLENGE, proof). */
    lib_join_t r1 = {
        .addr = addr, .job = "guarded", .secret = "correct horse", .rank = 1, .world = 2};
    lib_join_main(&r1);
    pthread_join(t0, NULL);
    CHECK_MSG(r0.rc == INAGG_OK, "rank 0: %s", r0.detail);
    CHECK_MSG(r1.rc == INAGG_OK, "rank 1: %s", r1.detail);
    /* An open job (no secret) refuses a rank that brings one, and vice versa is allowed. */
    lib_join_t o0 = {.addr = addr, .job = "open", .rank = 0, .world = 2};
    CHECK(pthread_create(&t0, NULL, lib_join_main, &o0) == 0);
    wait_joining(sw, "open");
    raw_secret_join(addr, "open", "some secret", "proof", reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "registered without a secret"), "%s", reply);
    lib_join_t o1 = {.addr = addr, .job = "open", .rank = 1, .world = 2};
    lib_join_main(&o1);
    pthread_join(t0, NULL);
    CHECK_MSG(o0.rc == INAGG_OK && o1.rc == INAGG_OK, "%s / %s", o0.detail, o1.detail);
    switch_stop(sw);
}

/* A JOIN of rank 1 of `job` (world 2) with proof= over `nonce` on a fresh connection that
 * asked for no CHALLENGE; the first reply line. */
static void raw_unasked_proof(const char *addr, const char *job, const char *secret,
                              const uint8_t nonce[16], char *reply, size_t cap)
{
    int fd = connect_to(addr);
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX], hex[65];
    uint8_t v[32], mac[32];
    wire_auth_verifier(secret, strlen(secret), job, v);
    wire_auth_proof(v, nonce, job, 1, mac);
    hex_encode(mac, 32, hex);
    join_line(line, sizeof(line), job, 1, 2, 4);
    strncat(line, " proof=", sizeof(line) - strlen(line) - 1);
    strncat(line, hex, sizeof(line) - strlen(line) - 1);
    CHECK(request(fd, &rd, line, reply, cap) == 0);
    close(fd);
}

/* A proof answers a challenge the switch gave this connection: one made with the right secret
 * over a nonce the switch never issued to it (the all-zero nonce a connection holds before any
 * HELLO, or another connection's nonce) is refused. Were it taken, a proof seen once would be
 * a password that works on every later connection: the challenge would bind nothing. */
TEST(control_proof_without_this_connections_challenge_refused, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    lib_join_t r0 = {.addr = addr, .job = "bound", .secret = "open sesame", .rank = 0, .world = 2};
    pthread_t t0;
    CHECK(pthread_create(&t0, NULL, lib_join_main, &r0) == 0);
    wait_joining(sw, "bound");
    const uint8_t zero[16] = {0};
    raw_unasked_proof(addr, "bound", "open sesame", zero, reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "ERR refused authentication failed for job 'bound' rank 1: proof= "
                            "without a CHALLENGE on this connection"),
              "%s", reply);
    /* Another connection's challenge, answered rightly, from this one. */
    int other = connect_to(addr);
    ctl_reader_t rd = {0};
    char nh[40];
    uint8_t nonce[16];
    CHECK(request(other, &rd, "HELLO job=bound", reply, sizeof(reply)) == 0);
    CHECK(ctlline_get(reply, "nonce", nh, sizeof(nh)) == 0 && hex_decode(nh, nonce, 16) == 0);
    raw_unasked_proof(addr, "bound", "open sesame", nonce, reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "proof= without a CHALLENGE on this connection"), "%s", reply);
    close(other);
    CHECK_EQ_INT(ts_switch_stat(sw, "auth_failed"), 2);
    /* The rank that answers its own challenge is admitted. */
    lib_join_t r1 = {.addr = addr, .job = "bound", .secret = "open sesame", .rank = 1, .world = 2};
    lib_join_main(&r1);
    pthread_join(t0, NULL);
    CHECK_MSG(r0.rc == INAGG_OK && r1.rc == INAGG_OK, "%s / %s", r0.detail, r1.detail);
    switch_stop(sw);
}

/* Past AUTH_FAIL_LIMIT failures in the window, JOINs of that job from that address are
 * refused at once (even with the right secret) and counted; another job from the same address
 * (a co-located user) is admitted meanwhile; a switch may require secrets for every job. */
TEST(control_failed_authentications_are_rate_limited, 60)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.require_secret = 1;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    int fd = join_raw(addr, "nosecret", 0, 1, 4, reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "admits only jobs with a secret"), "%s", reply);
    close(fd);
    lib_join_t r0 = {.addr = addr, .job = "target", .secret = "s", .rank = 0, .world = 2};
    pthread_t t0;
    CHECK(pthread_create(&t0, NULL, lib_join_main, &r0) == 0);
    wait_joining(sw, "target");
    for (int i = 0; i < 5; i++) {
        raw_secret_join(addr, "target", "guess", "verifier", reply, sizeof(reply));
        CHECK_MSG(strstr(reply, "wrong job secret") || strstr(reply, "too many failed"), "%s",
                  reply);
    }
    raw_secret_join(addr, "target", "s", "proof", reply, sizeof(reply));
    CHECK_MSG(strstr(reply, "too many failed authentications from this address for job "
                            "'target'"),
              "%s", reply);
    CHECK_EQ_INT(ts_switch_stat(sw, "auth_failed"), 6); /* 5 guesses + the open job */
    CHECK(ts_switch_stat(sw, "auth_rate_limited") >= 1);
    /* the same address's other job, with its own secret: not locked out */
    lib_join_t n0 = {.addr = addr, .job = "neighbour", .secret = "n", .rank = 0, .world = 2};
    pthread_t tn;
    CHECK(pthread_create(&tn, NULL, lib_join_main, &n0) == 0);
    wait_joining(sw, "neighbour");
    lib_join_t n1 = {.addr = addr, .job = "neighbour", .secret = "n", .rank = 1, .world = 2};
    lib_join_main(&n1);
    pthread_join(tn, NULL);
    CHECK_MSG(n0.rc == INAGG_OK && n1.rc == INAGG_OK, "%s / %s", n0.detail, n1.detail);
    switch_stop(sw); /* rank 0's join fails with the switch gone */
    pthread_join(t0, NULL);
}

/* Neither the secret, nor its verifier, nor a job's token appear in the stats or the log. */
TEST(control_secret_and_token_stay_out_of_stats_and_logs, 30)
{
    char logpath[] = "/tmp/inagg-test-log-XXXXXX";
    int logfd = mkstemp(logpath);
    CHECK(logfd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(logfd, 2);
    setenv("INAGG_LOG", "debug", 1);
    log_init(LOG_DEBUG, "test");
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    const char *secret = "Tr0ub4dor-and-3";
    uint8_t v[32];
    char vhex[65];
    wire_auth_verifier(secret, strlen(secret), "leaky", v);
    hex_encode(v, 32, vhex);
    int fd = connect_to(addr);
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX];
    join_line(line, sizeof(line), "leaky", 0, 1, 4);
    snprintf(line + strlen(line), sizeof(line) - strlen(line), " verifier=%s", vhex);
    CHECK(request(fd, &rd, line, reply, sizeof(reply)) == 0);
    char token[32];
    CHECK_MSG(ctlline_get(reply, "token", token, sizeof(token)) == 0, "%s", reply);
    raw_secret_join(addr, "leaky", "wrong", "verifier", reply, sizeof(reply)); /* logged */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    switch_write_stats(sw, f, 0);
    switch_write_stats(sw, f, 1);
    fclose(f);
    close(fd);
    switch_stop(sw);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char logtext[65536] = "";
    ssize_t n = pread(logfd, logtext, sizeof(logtext) - 1, 0);
    close(logfd);
    unlink(logpath);
    CHECK(n > 0);
    logtext[n] = '\0';
    CHECK_MSG(strstr(logtext, "authentication failed"), "%s", logtext); /* the log works */
    CHECK(strstr(text, "leaky") != NULL); /* and the stats */
    const char *secrets[] = {secret, vhex, token};
    for (size_t k = 0; k < 3; k++) {
        CHECK_MSG(!strstr(text, secrets[k]), "'%s' in the stats", secrets[k]);
        CHECK_MSG(!strstr(logtext, secrets[k]), "'%s' in the log", secrets[k]);
    }
    free(text);
}

/* A stats printer stuck on a full pipe (SIGUSR1's printing into a pipe nobody reads) holds
 * no lock the control thread needs: jobs still join and retire. */
static void *blocked_printer(void *arg)
{
    void **a = arg;
    switch_write_stats(a[0], a[1], 1);
    return NULL;
}

TEST(control_blocked_stats_printer_does_not_stall_control, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    int p[2];
    CHECK(pipe(p) == 0);
    fcntl(p[1], F_SETPIPE_SZ, 4096);
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    char junk[4096];
    memset(junk, 'x', sizeof(junk));
    while (write(p[1], junk, sizeof(junk)) > 0) /* fill it */
        ;
    fcntl(p[1], F_SETFL, 0);
    FILE *out = fdopen(p[1], "w");
    CHECK(out);
    void *args[2] = {sw, out};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, blocked_printer, args) == 0);
    usleep(200000); /* the printer is now blocked writing */
    char job[32];
    for (int i = 0; i < 5; i++) {
        snprintf(job, sizeof(job), "during%d", i);
        uint64_t t0 = util_now_ns();
        int fd = join_raw(addr, job, 0, 1, 4, reply, sizeof(reply));
        CHECK_MSG(strncmp(reply, "JOINED", 6) == 0, "%s", reply);
        close(fd); /* retires the job: takes the stats lock */
        CHECK((util_now_ns() - t0) < 1000000000ull);
    }
    int quiet = 0;
    for (int i = 0; i < 100 && !quiet; i++, usleep(10000))
        quiet = ts_switch_stat(sw, "slots_used") == 0; /* every retirement finished */
    CHECK(quiet);
    /* Let the printer finish. */
    char buf[65536];
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    for (int i = 0; i < 500; i++) {
        if (read(p[0], buf, sizeof(buf)) <= 0)
            usleep(2000);
        if (pthread_tryjoin_np(t, NULL) == 0) {
            t = 0;
            break;
        }
    }
    CHECK(t == 0);
    fclose(out);
    close(p[0]);
    switch_stop(sw);
}

/* Out of descriptors, the switch refuses and counts the connections it cannot take and does
 * not spin on its listener; once they go, it serves again. */
TEST(control_out_of_descriptors_neither_spins_nor_stalls, 30)
{
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    struct rlimit low = {64, rl.rlim_max};
    CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.max_conns_per_addr = 1000;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    struct sockaddr_in to;
    CHECK(netaddr_parse(addr, 0, &to) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) { /* its own descriptor table: 200 connections, held for 2 s */
        setrlimit(RLIMIT_NOFILE, &rl);
        for (int i = 0; i < 200; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0)
                break;
        }
        usleep(2000000);
        _exit(0);
    }
    usleep(700000);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    usleep(1000000);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    fprintf(stderr, "    out of descriptors: %.3f s of CPU in 1 s, %.0f refused\n", cpu,
            ts_switch_stat(sw, "conn_limit"));
    CHECK_MSG(cpu < 0.5, "the switch used %.2f s of CPU in 1 s while out of descriptors", cpu);
    CHECK(ts_switch_stat(sw, "conn_limit") >= 1);
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        usleep(20000);
        if (ts_switch_stat(sw, "connections") == 0)
            fd = join_raw(addr, "after", 0, 1, 4, reply, sizeof(reply));
    }
    CHECK(fd >= 0);
    CHECK_MSG(strncmp(reply, "JOINED", 6) == 0, "%s", reply);
    close(fd);
    switch_stop(sw);
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* The global table of control connections is bounded: 1,030 idle connections from one
 * address (whose own limit is raised past that) leave at most CTL_MAX_CLIENTS open (the
 * longest-idle ones closed to make room, or refused: conn_evicted, conn_limit), and the
 * switch serves a JOIN meanwhile and once they close. */
TEST(control_global_connection_cap, 60)
{
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_max < 4096) {
        SKIP("the RLIMIT_NOFILE hard limit is below the 4,096 descriptors this needs");
        return;
    }
    struct rlimit high = {4096, rl.rlim_max};
    CHECK(setrlimit(RLIMIT_NOFILE, &high) == 0);
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.max_conns_per_addr = 2000;
    char addr[64], reply[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    struct sockaddr_in to;
    CHECK(netaddr_parse(addr, 0, &to) == 0);
    const int want = CTL_MAX_CLIENTS + 6;
    int p[2];
    CHECK(pipe(p) == 0);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) { /* its own descriptor table: the connections, held until told */
        close(p[1]);
        for (int i = 0; i < want; i++) {
            int fd = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0 || connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0)
                break;
        }
        char c;
        ssize_t n = read(p[0], &c, 1);
        (void)n;
        _exit(0);
    }
    close(p[0]);
    double open = 0, refused = 0;
    for (int tries = 0; tries < 500 && open + refused < want; tries++) {
        usleep(20000);
        open = ts_switch_stat(sw, "connections");
        refused = ts_switch_stat(sw, "conn_limit") + ts_switch_stat(sw, "conn_evicted");
    }
    fprintf(stderr, "    %d connections: %.0f open, %.0f refused or closed to make room\n", want,
            open, refused);
    CHECK_MSG(open <= CTL_MAX_CLIENTS, "%.0f connections open, the table holds %d", open,
              CTL_MAX_CLIENTS);
    CHECK_MSG(refused >= want - CTL_MAX_CLIENTS, "%.0f refused or evicted of %d", refused, want);
    int during = join_raw(addr, "during-cap", 0, 1, 4, reply, sizeof(reply));
    CHECK_MSG(during >= 0 && strncmp(reply, "JOINED", 6) == 0, "a member's JOIN: %s", reply);
    if (during >= 0)
        close(during);
    close(p[1]);
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    int fd = -1;
    for (int tries = 0; tries < 250 && fd < 0; tries++) {
        usleep(20000);
        if (ts_switch_stat(sw, "connections") == 0)
            fd = join_raw(addr, "after-cap", 0, 1, 4, reply, sizeof(reply));
    }
    CHECK(fd >= 0);
    CHECK_MSG(strncmp(reply, "JOINED", 6) == 0, "%s", reply);
    close(fd);
    switch_stop(sw);
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* Jobs that never become complete cannot hold the switch's job ids: one address registers
 * 100 jobs of world 2 whose second rank never comes (each holding its connection open); past
 * CTL_MAX_JOINING_PER_ADDR waiting jobs, each new one removes the oldest, whose member is told
 * why. A two-rank job from the same address joins and runs meanwhile. */
TEST(control_jobs_never_complete_capped_per_address, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    char addr[64], job[32], line[CTL_LINE_MAX];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    enum { STALE = 100 };
    static int fds[STALE];
    for (int i = 0; i < STALE; i++) {
        snprintf(job, sizeof(job), "stale%d", i);
        fds[i] = connect_to(addr);
        join_line(line, sizeof(line), job, 0, 2, 1);
        CHECK(ctl_write_line(fds[i], line, 2000) == 0);
    }
    int removed = 0;
    for (int i = 0; i < STALE; i++) {
        ctl_reader_t rd = {0};
        if (ctl_read_line(fds[i], &rd, line, sizeof(line),
                          i < STALE - CTL_MAX_JOINING_PER_ADDR ? 2000 : 20) == 0 &&
            strstr(line, "ERR refused job 'stale") && strstr(line, "still waiting for their ranks"))
            removed++;
    }
    CHECK_EQ_INT(removed, STALE - CTL_MAX_JOINING_PER_ADDR);
    CHECK_EQ_INT(ts_switch_stat(sw, "joining_evicted"), STALE - CTL_MAX_JOINING_PER_ADDR);
    lib_join_t r0 = {.addr = addr, .job = "legit", .rank = 0, .world = 2};
    pthread_t t0;
    CHECK(pthread_create(&t0, NULL, lib_join_main, &r0) == 0);
    wait_joining(sw, "legit");
    lib_join_t r1 = {.addr = addr, .job = "legit", .rank = 1, .world = 2};
    lib_join_main(&r1);
    pthread_join(t0, NULL);
    CHECK_MSG(r0.rc == INAGG_OK && r1.rc == INAGG_OK, "%s / %s", r0.detail, r1.detail);
    for (int i = 0; i < STALE; i++)
        close(fds[i]);
    switch_stop(sw);
}

/* A JOIN refused for a limit that frees up ("busy": here the address's slot quota, held by
 * another job) is retried with backoff within the join timeout, and gets in once the other
 * job leaves; a refusal that retrying cannot change is final at once. */
TEST(control_busy_join_retried_within_the_timeout, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.total_slots = 8; /* a job 4, an address 6 */
    char addr[64];
    inagg_switch_t *sw = start_switch(&cfg, addr, sizeof(addr));
    pthread_t hog;
    CHECK(pthread_create(&hog, NULL, hog_job_main, addr) == 0);
    for (int i = 0; i < 200 && ts_switch_stat(sw, "slots_used") < 4; i++)
        usleep(10000);
    uint64_t t0 = util_now_ns();
    lib_join_t late = {.addr = addr, .job = "late", .rank = 0, .world = 1};
    lib_join_main(&late);
    double secs = (double)(util_now_ns() - t0) / 1e9;
    pthread_join(hog, NULL);
    CHECK_MSG(late.rc == INAGG_OK, "%s", late.detail);
    CHECK_MSG(secs > 0.5, "joined after %.2f s: the quota was not held", secs);
    CHECK(ts_switch_stat(sw, "addr_slot_quota") >= 1);
    /* the same job asked for more slots than a job may hold: final, no retries */
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 5;
    o.packet_elems = 16;
    inagg_comm_t *c = NULL;
    char d[256];
    t0 = util_now_ns();
    CHECK(inagg_comm_create(&c, addr, "big", 0, 1, &o, d, sizeof(d)) == INAGG_ERR_REFUSED);
    secs = (double)(util_now_ns() - t0) / 1e9;
    CHECK_MSG(secs < 0.5 && strstr(d, "slot quota"), "%.2f s: %s", secs, d);
    switch_stop(sw);
}
