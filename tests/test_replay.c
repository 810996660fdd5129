/*
 * test_replay.c - a replay of a running job's own packets moves nothing (PROTOCOL.md
 * "Threat model"). A third process captures the job's contributions and acknowledgements on
 * loopback (an AF_PACKET socket on lo, so root) while two ranks run int32 allreduces of known
 * values, and sends the most recent ones again, verbatim, from a socket of its own, two for
 * each it captures. The switch must answer none of them toward the replayer (results,
 * resends and confirmations go only to where a rank's accepted packets came from), every
 * rank's results must be exact, and the job must take about as long as without the replay.
 * Both protocols; run once without the replayer first for the time to compare with.
 * And a rank that stops while its old packets are replayed is still found silent: the job
 * fails naming it within the timeout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/util.h"
#include "lib/wire/wire.h"
#include "testutil.h"

#define R_WORLD 2u
#define R_ELEMS 65536u /* elements of one allreduce */
#define R_ITERS 96u /* allreduces per run */
#define R_RING 256u /* captured packets kept for replay (the most recent) */
#define R_PKT_MAX 2048u /* bytes of a captured datagram kept (the job's packets are smaller) */

typedef struct replay_shared {
    _Atomic int stop; /* the ranks are done: the replayer ends */
    _Atomic int ready; /* the replayer's sockets are open */
    _Atomic uint64_t captured; /* the job's packets seen on lo */
    _Atomic uint64_t replayed; /* ... and sent again from the replayer's socket */
    _Atomic uint64_t answered; /* datagrams that reached the replayer's socket */
    _Atomic uint64_t answered_bytes;
    int bad[R_WORLD]; /* elements of wrong results per rank */
    double seconds[R_WORLD]; /* each rank's time for its allreduces */
} replay_shared_t;

typedef struct replay_spec {
    const char *addr;
    inagg_protocol_t protocol;
    const char *job;
    replay_shared_t *sh;
} replay_spec_t;

static int32_t value_of(uint32_t rank, uint32_t iter, uint32_t i)
{
    return (int32_t)(i * 13u + iter * 7919u + rank * 1000003u) % 100000 - 50000;
}

static int replay_rank(uint32_t rank, void *arg)
{
    const replay_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.slots = 16;
    o.packet_elems = 256;
    o.timeout_ms = 20000;
    inagg_comm_t *c;
    char d[256];
    if (inagg_comm_create(&c, s->addr, s->job, rank, R_WORLD, &o, d, sizeof(d)) != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        return 1;
    }
    int32_t *in = malloc(R_ELEMS * sizeof(int32_t)), *out = malloc(R_ELEMS * sizeof(int32_t));
    int rc = in && out ? 0 : 2;
    uint64_t t0 = util_now_ns();
    for (uint32_t it = 0; rc == 0 && it < R_ITERS; it++) {
        for (uint32_t i = 0; i < R_ELEMS; i++)
            in[i] = value_of(rank, it, i);
        inagg_result_t r = inagg_allreduce(c, in, out, R_ELEMS, INAGG_INT32, INAGG_SUM);
        if (r != INAGG_OK) {
            fprintf(stderr, "    rank %u: allreduce %u: %s: %s\n", rank, it, inagg_strerror(r),
                    inagg_last_error(c));
            rc = 3;
            break;
        }
        for (uint32_t i = 0; i < R_ELEMS; i++) {
            int32_t want = 0;
            for (uint32_t k = 0; k < R_WORLD; k++)
                want += value_of(k, it, i);
            s->sh->bad[rank] += out[i] != want;
        }
    }
    s->sh->seconds[rank] = (double)(util_now_ns() - t0) / 1e9;
    free(in);
    free(out);
    inagg_comm_destroy(c);
    return rc;
}

/* The UDP payload of a captured IPv4 frame to 127.0.0.1:[port0, port0 + nports) that looks
 * like a worker's packet to the switch (contribution or acknowledgement); NULL otherwise. */
static const uint8_t *job_packet(const uint8_t *f, size_t n, uint16_t port0, uint32_t nports,
                                 uint16_t own_port, uint16_t *dport, size_t *len)
{
    if (n < sizeof(struct iphdr))
        return NULL;
    const struct iphdr *ip = (const void *)f;
    size_t ihl = (size_t)ip->ihl * 4u;
    if (ip->version != 4 || ip->protocol != IPPROTO_UDP || n < ihl + sizeof(struct udphdr))
        return NULL;
    const struct udphdr *u = (const void *)(f + ihl);
    uint16_t port = ntohs(u->dest);
    size_t ulen = ntohs(u->len);
    if (port < port0 || port >= port0 + nports || ntohs(u->source) == own_port ||
        ulen < sizeof(*u) + WIRE_HEADER_SIZE || ihl + ulen > n)
        return NULL;
    const uint8_t *p = f + ihl + sizeof(*u);
    if (p[0] != (WIRE_MAGIC >> 8) || p[1] != (WIRE_MAGIC & 0xff) ||
        (p[3] != WIRE_CONTRIB && p[3] != WIRE_ACK))
        return NULL;
    *dport = port;
    *len = ulen - sizeof(*u);
    return p;
}

/* The replayer: capture the job's packets on lo and, for each one captured, send two of the
 * recent ones again (twice the job's own packet rate); count what comes back to its
 * socket. */
static int replayer(uint16_t port0, uint32_t nports, replay_shared_t *sh)
{
    int cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
    int out = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (cap < 0 || out < 0)
        return 10;
    struct sockaddr_ll ll = {.sll_family = AF_PACKET,
                             .sll_protocol = htons(ETH_P_IP),
                             .sll_ifindex = (int)if_nametoindex("lo")};
    if (ll.sll_ifindex == 0 || bind(cap, (struct sockaddr *)&ll, sizeof(ll)) != 0)
        return 11;
    struct sockaddr_in self = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(self);
    if (bind(out, (struct sockaddr *)&self, sizeof(self)) != 0 ||
        getsockname(out, (struct sockaddr *)&self, &sl) != 0)
        return 12;
    const uint16_t own_port = ntohs(self.sin_port); /* its own replays are not captured */
    static uint8_t ring[R_RING][R_PKT_MAX];
    static size_t ring_len[R_RING];
    static uint16_t ring_port[R_RING];
    uint32_t head = 0, filled = 0, next = 0;
    atomic_store(&sh->ready, 1);
    uint8_t frame[65536];
    uint64_t deadline = util_now_ns() + 120ull * 1000000000ull;
    while (!atomic_load(&sh->stop) && util_now_ns() < deadline) {
        struct pollfd pf = {.fd = cap, .events = POLLIN};
        (void)poll(&pf, 1, 2);
        uint32_t fresh = 0;
        for (int k = 0; k < 64; k++) { /* what was captured since */
            struct sockaddr_ll from;
            socklen_t fl = sizeof(from);
            ssize_t n = recvfrom(cap, frame, sizeof(frame), 0, (struct sockaddr *)&from, &fl);
            if (n <= 0)
                break;
            if (from.sll_pkttype == PACKET_OUTGOING)
                continue; /* loopback shows each packet leaving and arriving: keep one */
            uint16_t dport;
            size_t len;
            const uint8_t *p = job_packet(frame, (size_t)n, port0, nports, own_port, &dport, &len);
            if (!p || len > R_PKT_MAX)
                continue;
            memcpy(ring[head], p, len);
            ring_len[head] = len;
            ring_port[head] = dport;
            head = (head + 1) % R_RING;
            filled += filled < R_RING;
            atomic_fetch_add(&sh->captured, 1);
            fresh++;
        }
        for (uint32_t k = 0; k < 2 * fresh && filled > 0; k++) { /* replay recent ones */
            uint32_t i = (head + R_RING - 1 - next % filled) % R_RING;
            next++;
            struct sockaddr_in to = {.sin_family = AF_INET,
                                     .sin_port = htons(ring_port[i]),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            if (sendto(out, ring[i], ring_len[i], 0, (struct sockaddr *)&to, sizeof(to)) > 0)
                atomic_fetch_add(&sh->replayed, 1);
        }
        for (int k = 0; k < 256; k++) { /* what the switch sent to the replayer */
            ssize_t n = recv(out, frame, sizeof(frame), 0);
            if (n <= 0)
                break;
            atomic_fetch_add(&sh->answered, 1);
            atomic_fetch_add(&sh->answered_bytes, (uint64_t)n);
        }
    }
    close(cap);
    close(out);
    return 0;
}

/* One run of the two ranks (with the replayer when `replay`): the slower rank's seconds. */
static double replay_run(const test_switch_t *ts, inagg_protocol_t protocol, int replay,
                         replay_shared_t *sh)
{
    memset(sh, 0, sizeof(*sh));
    replay_spec_t spec = {
        .addr = ts->addr, .protocol = protocol, .job = replay ? "replayed" : "quiet", .sh = sh};
    pid_t rp = -1;
    if (replay) {
        rp = fork();
        CHECK(rp >= 0);
        if (rp == 0)
            _exit(replayer(ts->port, 2, sh));
        for (int k = 0; k < 2000 && !atomic_load(&sh->ready); k++)
            usleep(1000);
        CHECK_MSG(atomic_load(&sh->ready), "the replayer did not start");
    }
    int rc = run_workers(R_WORLD, replay_rank, &spec, 90);
    atomic_store(&sh->stop, 1);
    if (replay)
        CHECK_EQ_INT(wait_pid(rp, 10), 0);
    CHECK_EQ_INT(rc, 0);
    double slowest = 0;
    for (uint32_t r = 0; r < R_WORLD; r++) {
        CHECK_MSG(sh->bad[r] == 0, "rank %u: %d wrong elements", r, sh->bad[r]);
        if (sh->seconds[r] > slowest)
            slowest = sh->seconds[r];
    }
    return slowest;
}

static void replay_test(inagg_protocol_t protocol)
{
    if (geteuid() != 0)
        SKIP("capturing on lo needs root (AF_PACKET)");
    setenv("INAGG_UDP_GSO", "0", 1); /* the capture reads one datagram per frame */
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    replay_shared_t *sh = shared_alloc(sizeof(*sh));
    double quiet = replay_run(&ts, protocol, 0, sh);
    double replayed = replay_run(&ts, protocol, 1, sh);
    char stats[32768];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    unsetenv("INAGG_UDP_GSO");
    printf("    %s: %.2f s quiet, %.2f s under replay; captured %llu, replayed %llu, "
           "answered %llu datagrams (%llu bytes)\n",
           protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml", quiet, replayed,
           (unsigned long long)sh->captured, (unsigned long long)sh->replayed,
           (unsigned long long)sh->answered, (unsigned long long)sh->answered_bytes);
    CHECK_MSG(sh->replayed > 1000, "the replayer sent only %llu packets",
              (unsigned long long)sh->replayed);
    CHECK_MSG(sh->answered == 0, "%llu datagrams (%llu bytes) of the job reached the replayer",
              (unsigned long long)sh->answered, (unsigned long long)sh->answered_bytes);
    /* Generous for a shared machine (the replayer doubles the packets to handle on the same
     * cores): a redirected rank would wait out its timeouts on every slot it lost. */
    CHECK_MSG(replayed < 3.0 * quiet + 2.0, "%.2f s under replay against %.2f s quiet", replayed,
              quiet);
}

TEST(replayed_packets_redirect_nothing_switchml, 120) { replay_test(INAGG_PROTO_SWITCHML); }
TEST(replayed_packets_redirect_nothing_p4sgd, 120) { replay_test(INAGG_PROTO_P4SGD); }

/* ---- a replay does not hide a silent rank ----------------------------------------------- */

typedef struct silent_shared {
    _Atomic int stop, ready;
    _Atomic uint64_t replayed;
    int failed_right; /* rank 0 got JOB_FAILED naming rank 1 */
    double seconds; /* ... after this long */
} silent_shared_t;

typedef struct silent_spec {
    const char *addr;
    silent_shared_t *sh;
} silent_spec_t;

static int silent_rank(uint32_t rank, void *arg)
{
    const silent_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 8;
    o.packet_elems = 256;
    o.timeout_ms = 1500;
    inagg_comm_t *c;
    char d[256];
    if (inagg_comm_create(&c, s->addr, "silent", rank, 2, &o, d, sizeof(d)) != INAGG_OK)
        return 1;
    static int32_t x[2048], y[2048];
    if (inagg_allreduce(c, x, y, 2048, INAGG_INT32, INAGG_SUM) != INAGG_OK)
        return 2;
    if (rank == 1) {
        usleep(300 * 1000); /* its packets are captured and replayed from now on */
        raise(SIGSTOP); /* alive but silent */
    }
    uint64_t t0 = util_now_ns();
    inagg_result_t rc = inagg_allreduce(c, x, y, 2048, INAGG_INT32, INAGG_SUM);
    s->sh->seconds = (double)(util_now_ns() - t0) / 1e9;
    s->sh->failed_right = rc == INAGG_ERR_JOB_FAILED && strstr(inagg_last_error(c), "rank 1");
    if (!s->sh->failed_right)
        fprintf(stderr, "    rank 0: %s: %s after %.2f s\n", inagg_strerror(rc),
                inagg_last_error(c), s->sh->seconds);
    inagg_comm_destroy(c);
    return 0;
}

/* Capture rank 1's packets to the switch and replay them, one every millisecond. */
static int silent_replayer(uint16_t port0, uint32_t nports, silent_shared_t *sh)
{
    int cap = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
    int out = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_ll ll = {.sll_family = AF_PACKET,
                             .sll_protocol = htons(ETH_P_IP),
                             .sll_ifindex = (int)if_nametoindex("lo")};
    struct sockaddr_in self = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(self);
    if (cap < 0 || out < 0 || bind(cap, (struct sockaddr *)&ll, sizeof(ll)) != 0 ||
        bind(out, (struct sockaddr *)&self, sizeof(self)) != 0 ||
        getsockname(out, (struct sockaddr *)&self, &sl) != 0)
        return 10;
    static uint8_t ring[R_RING][R_PKT_MAX], frame[65536];
    static size_t ring_len[R_RING];
    static uint16_t ring_port[R_RING];
    uint32_t head = 0, filled = 0, next = 0;
    atomic_store(&sh->ready, 1);
    uint64_t deadline = util_now_ns() + 60ull * 1000000000ull;
    while (!atomic_load(&sh->stop) && util_now_ns() < deadline) {
        struct pollfd pf = {.fd = cap, .events = POLLIN};
        (void)poll(&pf, 1, 1);
        for (int k = 0; k < 64; k++) {
            struct sockaddr_ll from;
            socklen_t fl = sizeof(from);
            ssize_t n = recvfrom(cap, frame, sizeof(frame), 0, (struct sockaddr *)&from, &fl);
            if (n <= 0)
                break;
            uint16_t dport;
            size_t len;
            const uint8_t *p = from.sll_pkttype == PACKET_OUTGOING
                                   ? NULL
                                   : job_packet(frame, (size_t)n, port0, nports,
                                                ntohs(self.sin_port), &dport, &len);
            if (!p || len > R_PKT_MAX || p[6] != 0 || p[7] != 1)
                continue; /* rank 1's only */
            memcpy(ring[head], p, len);
            ring_len[head] = len;
            ring_port[head] = dport;
            head = (head + 1) % R_RING;
            filled += filled < R_RING;
        }
        if (filled == 0)
            continue;
        uint32_t i = next++ % filled;
        struct sockaddr_in to = {.sin_family = AF_INET,
                                 .sin_port = htons(ring_port[i]),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (sendto(out, ring[i], ring_len[i], 0, (struct sockaddr *)&to, sizeof(to)) > 0)
            atomic_fetch_add(&sh->replayed, 1);
    }
    close(cap);
    close(out);
    return 0;
}

TEST(replayed_packets_do_not_hide_a_silent_rank, 60)
{
    if (geteuid() != 0)
        SKIP("capturing on lo needs root (AF_PACKET)");
    setenv("INAGG_UDP_GSO", "0", 1); /* the capture reads one datagram per frame */
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    silent_shared_t *sh = shared_alloc(sizeof(*sh));
    pid_t rp = fork();
    CHECK(rp >= 0);
    if (rp == 0)
        _exit(silent_replayer(ts.port, 1, sh));
    for (int k = 0; k < 2000 && !atomic_load(&sh->ready); k++)
        usleep(1000);
    silent_spec_t spec = {.addr = ts.addr, .sh = sh};
    pid_t p[2];
    spawn_workers(2, silent_rank, &spec, p);
    int rc0 = wait_pid(p[0], 30);
    atomic_store(&sh->stop, 1);
    kill(p[1], SIGKILL);
    wait_pid(p[1], 5);
    CHECK_EQ_INT(wait_pid(rp, 10), 0);
    ts_stop(&ts);
    unsetenv("INAGG_UDP_GSO");
    CHECK_EQ_INT(rc0, 0);
    printf("    rank 1's packets replayed %llu times; rank 0 failed after %.2f s\n",
           (unsigned long long)sh->replayed, sh->seconds);
    CHECK_MSG(sh->replayed > 100, "only %llu replays", (unsigned long long)sh->replayed);
    CHECK_MSG(sh->failed_right, "the silent rank was not found");
    CHECK_MSG(sh->seconds < 1.5 + 1.5, "found after %.2f s", sh->seconds);
}
