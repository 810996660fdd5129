/*
 * test_udp_gso.c - UDP GSO and GRO: with INAGG_UDP_GSO=1, consecutive packets to one
 * destination with one size leave as one UDP_SEGMENT send, a receiver with 64 KB buffers
 * takes them coalesced (UDP_GRO) and splits them back, and they arrive as the same packets,
 * in order, byte for byte, across several receives (a run of another size or destination
 * starts a new send); by default GSO is on where the peer takes it (a switch's JOINED says
 * gso=1), INAGG_UDP_GSO=0|1 overriding; an allreduce under injected loss is exact with GSO
 * on and off, and the counters show which one ran; a worker of a switch that says gso=1
 * sends with GSO without being told.
 */
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/util.h"
#include "lib/transport/transport.h"
#include "testutil.h"

enum {
    C_AVAILABLE,
    C_SENDS,
    C_SEGMENTS,
    C_FALLBACKS,
    C_GRO_AVAILABLE,
    C_GRO_RECEIVES,
    C_GRO_SEGMENTS,
    C_COUNT
};

static int peer_takes_gso; /* what the next open_udp says of its peers */

static transport_t *open_udp(void)
{
    transport_config_t cfg = {.kind = "udp",
                              .bind = "127.0.0.1:0",
                              .buffer_bytes = 4 << 20,
                              .peer_takes_gso = peer_takes_gso};
    transport_t *t = NULL;
    char err[160] = "";
    int rc = transport_open(&cfg, &t, err, sizeof(err));
    CHECK_MSG(rc == 0 && t, "transport_open: %d %s", rc, err);
    return t;
}

static transport_addr_t addr_of(transport_t *t)
{
    transport_addr_t a, to;
    CHECK(transport_local_addr(t, &a) == 0);
    CHECK(transport_parse_addr("udp", "127.0.0.1:1", &to) == 0);
    transport_addr_set_port(&to, transport_addr_port(&a));
    return to;
}

#define NPKT 48
/* Packet i: a 16-byte head and a body of size(i) bytes, every byte a function of i. */
static size_t body_size(int i) { return i < 40 ? 300 : i < 44 ? 120 : 300; }

/* Send the NPKT packets from a (40 of one size to b, 4 smaller to b, 4 to c), receive them
 * at b and c (64 KB buffers: GRO where the kernel has it) in batches of 7, so a coalesced
 * datagram is handed out over several receives, and check each; the counters of a into
 * cnt[C_COUNT], b's into rcnt[C_COUNT]. */
static void send_and_check(uint64_t *cnt, uint64_t *rcnt)
{
    transport_t *a = open_udp(), *b = open_udp(), *c = open_udp();
    static uint8_t heads[NPKT][16], bodies[NPKT][300];
    transport_tx_t tx[NPKT];
    transport_addr_t tb = addr_of(b), tc = addr_of(c);
    for (int i = 0; i < NPKT; i++) {
        memset(heads[i], i, 16);
        for (size_t k = 0; k < body_size(i); k++)
            bodies[i][k] = (uint8_t)(i * 7 + k);
        tx[i] = (transport_tx_t){.head = heads[i],
                                 .head_len = 16,
                                 .body = bodies[i],
                                 .body_len = body_size(i),
                                 .to = i < 44 ? tb : tc};
    }
    CHECK_EQ_INT(transport_send(a, tx, NPKT, 1000), NPKT);
    int got_b = 0, got_c = 0;
    uint64_t end = util_now_ns() + 3000000000ull;
    while ((got_b < 44 || got_c < 4) && util_now_ns() < end) {
        transport_t *eps[2] = {b, c};
        for (int e = 0; e < 2; e++) {
            transport_rx_t rx[7];
            int n = transport_recv(eps[e], rx, 7, 10);
            CHECK(n >= 0);
            for (int j = 0; j < n; j++) {
                int i = e == 0 ? got_b++ : 44 + got_c++;
                CHECK_MSG(i < NPKT && rx[j].len == 16 + body_size(i), "packet %d: %u bytes", i,
                          (unsigned)rx[j].len);
                if (i >= NPKT || rx[j].len != 16 + body_size(i))
                    continue;
                CHECK_MSG(memcmp(rx[j].data, heads[i], 16) == 0 &&
                              memcmp(rx[j].data + 16, bodies[i], body_size(i)) == 0,
                          "packet %d: bytes differ", i);
            }
        }
    }
    CHECK_MSG(got_b == 44 && got_c == 4, "received %d and %d", got_b, got_c);
    memset(cnt, 0, C_COUNT * sizeof(*cnt));
    memset(rcnt, 0, C_COUNT * sizeof(*rcnt));
    CHECK_EQ_INT(transport_counters(a, cnt, C_COUNT), C_COUNT);
    CHECK_EQ_INT(transport_counters(b, rcnt, C_COUNT), C_COUNT);
    CHECK(strcmp(transport_counter_name("udp", C_GRO_SEGMENTS), "gro_segments") == 0);
    CHECK(strcmp(transport_counter_name("udp", C_SEGMENTS), "gso_segments") == 0);
    transport_close(a);
    transport_close(b);
    transport_close(c);
}

TEST(udp_gso_groups_same_size_same_destination, 20)
{
    setenv("INAGG_UDP_GSO", "1", 1);
    uint64_t cnt[C_COUNT], rcnt[C_COUNT];
    send_and_check(cnt, rcnt);
    if (!cnt[C_AVAILABLE]) {
        CHECK_EQ_INT((int)cnt[C_SENDS], 0);
        SKIP("the kernel has no UDP_SEGMENT");
    }
    /* 40 of one size to b, then 4 of another to b, then 4 to c: three sends, 48 segments */
    CHECK_MSG(cnt[C_SENDS] == 3 && cnt[C_SEGMENTS] == 48 && cnt[C_FALLBACKS] == 0,
              "sends %llu segments %llu fallbacks %llu", (unsigned long long)cnt[C_SENDS],
              (unsigned long long)cnt[C_SEGMENTS], (unsigned long long)cnt[C_FALLBACKS]);
    /* the receiver took them coalesced (GRO) and split them back: at least the run of 40 */
    CHECK_MSG(rcnt[C_GRO_AVAILABLE] == 1 && rcnt[C_GRO_RECEIVES] >= 1 && rcnt[C_GRO_SEGMENTS] >= 40,
              "gro receives %llu segments %llu", (unsigned long long)rcnt[C_GRO_RECEIVES],
              (unsigned long long)rcnt[C_GRO_SEGMENTS]);
    unsetenv("INAGG_UDP_GSO");
}

/* By default GSO follows what the peers take (transport_config_t.peer_takes_gso: JOINED
 * gso=1), and INAGG_UDP_GSO=0|1 overrides it either way. */
TEST(udp_gso_follows_the_peer_unless_the_environment_says, 20)
{
    static const struct {
        const char *env; /* NULL: unset */
        int peer, want;
    } cases[] = {{NULL, 0, 0}, {"0", 0, 0}, {NULL, 1, 1}, {"auto", 1, 1}, {"0", 1, 0}};
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        if (cases[k].env)
            setenv("INAGG_UDP_GSO", cases[k].env, 1);
        else
            unsetenv("INAGG_UDP_GSO");
        peer_takes_gso = cases[k].peer;
        uint64_t cnt[C_COUNT], rcnt[C_COUNT];
        send_and_check(cnt, rcnt);
        peer_takes_gso = 0;
        if (cases[k].want && !cnt[C_AVAILABLE])
            SKIP("the kernel has no UDP_SEGMENT");
        CHECK_MSG((int)cnt[C_AVAILABLE] == cases[k].want && (cnt[C_SENDS] > 0) == cases[k].want,
                  "INAGG_UDP_GSO=%s, peer takes GSO %d: available %llu, sends %llu",
                  cases[k].env ? cases[k].env : "(unset)", cases[k].peer,
                  (unsigned long long)cnt[C_AVAILABLE], (unsigned long long)cnt[C_SENDS]);
        if (!cases[k].want)
            CHECK(rcnt[C_GRO_RECEIVES] == 0); /* nothing coalesced arrives */
    }
    unsetenv("INAGG_UDP_GSO");
}

/* One rank's int32 allreduce of n values under 10% loss each way: exact; its udp counters
 * into cnt[4]. */
static void lossy_allreduce(const char *job, uint64_t *cnt)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 10000;
    o.packet_elems = 64;
    o.slots = 64;
    o.faults = "drop=0.1,seed=3";
    o.rto_us = o.rto_min_us = 1000;
    inagg_comm_t *c = NULL;
    char d[256] = "";
    CHECK_EQ_INT(inagg_comm_create(&c, ts.addr, job, 0, 1, &o, d, sizeof(d)), INAGG_OK);
    memset(cnt, 0, C_COUNT * sizeof(*cnt));
    if (c) {
        enum { N = 1 << 15 };
        int32_t *in = malloc(N * sizeof(int32_t)), *out = malloc(N * sizeof(int32_t));
        for (int i = 0; i < N; i++)
            in[i] = i * 3 - 7;
        CHECK_EQ_INT(inagg_allreduce(c, in, out, N, INAGG_INT32, INAGG_SUM), INAGG_OK);
        CHECK(memcmp(in, out, N * sizeof(int32_t)) == 0);
        inagg_transport_stats_t st;
        st.struct_size = sizeof(st);
        CHECK_EQ_INT(inagg_get_transport_stats(c, &st), INAGG_OK);
        CHECK(st.fault_dropped > 0);
        CHECK_EQ_INT(st.ncounters, C_COUNT); /* the fault transport passes udp's on */
        for (uint32_t i = 0; i < C_COUNT && i < st.ncounters; i++)
            cnt[i] = st.counters[i];
        free(in);
        free(out);
        inagg_comm_destroy(c);
    }
    ts_stop(&ts);
}

TEST(udp_gso_allreduce_exact_under_loss_on_and_off, 60)
{
    uint64_t on[C_COUNT], off[C_COUNT];
    setenv("INAGG_UDP_GSO", "1", 1);
    lossy_allreduce("gso-on", on);
    setenv("INAGG_UDP_GSO", "0", 1);
    lossy_allreduce("gso-off", off);
    unsetenv("INAGG_UDP_GSO");
    CHECK(off[C_AVAILABLE] == 0 && off[C_SENDS] == 0);
    if (!on[C_AVAILABLE])
        SKIP("the kernel has no UDP_SEGMENT");
    CHECK_MSG(on[C_SENDS] > 0 && on[C_SEGMENTS] > on[C_SENDS], "sends %llu segments %llu",
              (unsigned long long)on[C_SENDS], (unsigned long long)on[C_SEGMENTS]);
}

/* A worker of a switch that says gso=1 in JOINED (every switch of this build) sends with GSO
 * without being told to. */
TEST(udp_gso_on_by_default_with_a_switch_that_takes_it, 60)
{
    uint64_t cnt[C_COUNT];
    unsetenv("INAGG_UDP_GSO");
    lossy_allreduce("gso-default", cnt);
    if (!cnt[C_AVAILABLE]) {
        int seg = 0;
        socklen_t len = sizeof(seg);
        int fd = socket(AF_INET, SOCK_DGRAM, 0);
        int kernel_has = fd >= 0 && getsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, &len) == 0;
        if (fd >= 0)
            close(fd);
        CHECK_MSG(!kernel_has, "the kernel has UDP_SEGMENT, but the worker did not use it");
        SKIP("the kernel has no UDP_SEGMENT");
    }
    CHECK_MSG(cnt[C_SENDS] > 0, "sends %llu", (unsigned long long)cnt[C_SENDS]);
}

/* A burst of p4sgd operations on a switch with two queues: consecutive slots alternate
 * between the queues, so the packets a flush sends are grouped by queue first
 * (transport/txgroup.h) and leave as one UDP_SEGMENT run per queue, not one send each. */
TEST(udp_gso_p4sgd_burst_leaves_in_one_run_per_switch_queue, 60)
{
    unsetenv("INAGG_UDP_GSO");
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = INAGG_PROTO_P4SGD;
    o.timeout_ms = 10000;
    o.slots = 16;
    inagg_comm_t *c = NULL;
    char d[256] = "";
    CHECK_EQ_INT(inagg_comm_create(&c, ts.addr, "gso-p4", 0, 1, &o, d, sizeof(d)), INAGG_OK);
    enum { OPS = 8, N = 8, BURSTS = 20 };
    uint64_t cnt[C_COUNT] = {0};
    for (int b = 0; c && b < BURSTS; b++) {
        int32_t in[OPS][N], out[OPS][N];
        inagg_request_t *req[OPS];
        for (int k = 0; k < OPS; k++) {
            for (int i = 0; i < N; i++)
                in[k][i] = b * 1000 + k * 10 + i;
            CHECK_EQ_INT(
                inagg_iallreduce_small(c, in[k], out[k], N, INAGG_INT32, INAGG_SUM, &req[k]),
                INAGG_OK);
        }
        for (int k = 0; k < OPS; k++) {
            CHECK_EQ_INT(inagg_wait(req[k]), INAGG_OK);
            CHECK(memcmp(in[k], out[k], sizeof(in[k])) == 0);
        }
    }
    if (c) {
        inagg_transport_stats_t st;
        st.struct_size = sizeof(st);
        CHECK_EQ_INT(inagg_get_transport_stats(c, &st), INAGG_OK);
        for (uint32_t i = 0; i < C_COUNT && i < st.ncounters; i++)
            cnt[i] += st.counters[i];
        inagg_comm_destroy(c);
    }
    ts_stop(&ts);
    if (!cnt[C_AVAILABLE])
        SKIP("the kernel has no UDP_SEGMENT");
    /* per burst: the first operation leaves at once, the other seven at the first wait: three
     * to one queue and four to the other, two runs */
    CHECK_MSG(cnt[C_SENDS] >= BURSTS && cnt[C_SEGMENTS] >= 5u * BURSTS,
              "sends %llu segments %llu over %d bursts", (unsigned long long)cnt[C_SENDS],
              (unsigned long long)cnt[C_SEGMENTS], BURSTS);
    /* the switch groups its results to the rank the same way: the rank's sockets (results,
     * confirmations) take them whole */
    CHECK_MSG(cnt[C_GRO_AVAILABLE] >= 1 && cnt[C_GRO_RECEIVES] > 0 &&
                  cnt[C_GRO_SEGMENTS] > cnt[C_GRO_RECEIVES],
              "gro available %llu receives %llu segments %llu",
              (unsigned long long)cnt[C_GRO_AVAILABLE], (unsigned long long)cnt[C_GRO_RECEIVES],
              (unsigned long long)cnt[C_GRO_SEGMENTS]);
}
