/*
 * test_hier.c - two-level aggregation on loopback: a spine switch child, leaf switch children
 * (--upstream), and worker children that join their leaf. Proves that both slot protocols
 * stay exactly-once across levels: int32 results bit-identical to the exact sum with loss,
 * duplication and reordering on the host-leaf path and on the leaf-spine path; that a leaf
 * whose spine is unreachable refuses its job with a clear reason at once; that a leaf turned
 * away by a busy spine asks again with backoff and gets in; and that a leaf
 * refuses what it cannot forward (compression, an in-switch optimizer); and that a leaf drops
 * upstream results that carry another job's token or another member's rank.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "apps/bench/benchdata.h"
#include "harness.h"
#include "inagg.h"
#include "lib/base/util.h"
#include "lib/client/ctl.h"
#include "lib/wire/ctlmsg.h"
#include "lib/wire/wire.h"
#include "testutil.h"

#define MAX_LEAVES 4

typedef struct hier_spec {
    uint32_t leaves, hosts; /* hosts per leaf */
    char leaf_addr[MAX_LEAVES][32];
    const char *job;
    inagg_protocol_t protocol;
    size_t elems;
    uint32_t iters, slots, packet_elems;
    const char *faults; /* the hosts' fault spec */
    uint64_t seed;
    uint32_t *out; /* shared: leaves * hosts * elems words */
    int32_t *codes; /* shared: one per host */
    uint64_t *retransmits; /* shared: one per host */
    char (*errors)[256]; /* shared: one per host */
    double up_resends, up_stale; /* leaf 0's counters after the run */
} hier_spec_t;

/* Global rank g is host g % hosts of leaf g / hosts; its data is bench rank g's. */
static int hier_worker(uint32_t g, void *arg)
{
    const hier_spec_t *s = arg;
    uint32_t leaf = g / s->hosts, rank = g % s->hosts;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.slots = s->slots;
    o.packet_elems = s->packet_elems;
    o.faults = s->faults;
    o.rto_us = 1000;
    o.rto_min_us = 1000;
    o.timeout_ms = 20000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc = inagg_comm_create(&comm, s->leaf_addr[leaf], s->job, rank, s->hosts, &o,
                                          detail, sizeof(detail));
    s->codes[g] = rc;
    if (rc != INAGG_OK) {
        snprintf(s->errors[g], sizeof(s->errors[g]), "%s", detail);
        return 1;
    }
    int32_t *send = malloc(s->elems * 4), *recv = malloc(s->elems * 4);
    for (size_t i = 0; i < s->elems; i++)
        send[i] = bench_value_i32(s->seed, g, i);
    int bad = 0;
    for (uint32_t it = 0; it < s->iters && !bad; it++) {
        memset(recv, 0xA5, s->elems * 4);
        rc = inagg_allreduce(comm, send, recv, s->elems, INAGG_INT32, INAGG_SUM);
        if (rc != INAGG_OK) {
            snprintf(s->errors[g], sizeof(s->errors[g]), "%s", inagg_last_error(comm));
            bad = 1;
        }
    }
    s->codes[g] = rc;
    memcpy(s->out + (size_t)g * s->elems, recv, s->elems * 4);
    inagg_stats_t st;
    inagg_get_stats(comm, &st);
    s->retransmits[g] = st.retransmissions;
    inagg_comm_destroy(comm);
    free(send);
    free(recv);
    return bad;
}

/* A spine with `sw_faults` on its ports (the leaf-spine path), and leaves with `leaf_faults`
 * on theirs (both the host-leaf and the leaf-spine path); the hosts' own faults in s. */
static void run_hier(hier_spec_t *s, const char *spine_faults, const char *leaf_faults,
                     int timeout_s)
{
    test_switch_t spine, leaf[MAX_LEAVES];
    switch_config_t sc = SWITCH_CONFIG_INIT;
    sc.transport.faults_in = sc.transport.faults_out = spine_faults;
    ts_start(&spine, &sc);
    for (uint32_t l = 0; l < s->leaves; l++) {
        switch_config_t lc = SWITCH_CONFIG_INIT;
        lc.threads = l + 1; /* leaves of different shapes: 1 and 2 dataplane threads */
        lc.transport.faults_in = lc.transport.faults_out = leaf_faults;
        lc.upstream = spine.addr;
        lc.upstream_rank = l;
        lc.upstream_world = s->leaves;
        ts_start(&leaf[l], &lc);
        snprintf(s->leaf_addr[l], sizeof(s->leaf_addr[l]), "%s", leaf[l].addr);
    }
    uint32_t n = s->leaves * s->hosts;
    s->out = shared_alloc((size_t)n * s->elems * 4);
    s->codes = shared_alloc(n * sizeof(int32_t));
    s->retransmits = shared_alloc(n * sizeof(uint64_t));
    s->errors = shared_alloc(n * sizeof(*s->errors));
    int failed = run_workers(n, hier_worker, s, timeout_s);
    for (uint32_t g = 0; g < n; g++)
        if (s->codes[g] != INAGG_OK)
            fprintf(stderr, "    host %u: %s: %s\n", g, inagg_strerror(s->codes[g]), s->errors[g]);
    char stats[16384];
    ts_stats_json(&leaf[0], stats, sizeof(stats));
    CHECK_MSG(strstr(stats, "\"upstream_contributions\"") != NULL, "leaf stats: %s", stats);
    CHECK_MSG(ts_number(stats, "upstream_contributions") > 0, "no partial sum went upstream");
    s->up_resends = ts_number(stats, "upstream_resends");
    s->up_stale = ts_number(stats, "upstream_stale");
    for (uint32_t l = 0; l < s->leaves; l++)
        ts_stop(&leaf[l]);
    ts_stop(&spine);
    CHECK_EQ_INT(failed, 0);
    for (uint32_t g = 0; g < n; g++)
        for (size_t i = 0; i < s->elems; i++) {
            int32_t want = bench_expected_i32(s->seed, n, i);
            int32_t got = (int32_t)s->out[(size_t)g * s->elems + i];
            CHECK_MSG(got == want, "host %u element %zu: got %d, want %d", g, i, got, want);
        }
}

static void hier_lossless(inagg_protocol_t proto)
{
    hier_spec_t s = {.leaves = 2,
                     .hosts = 2,
                     .job = "hier",
                     .protocol = proto,
                     .elems = 100000,
                     .iters = 3,
                     .slots = 32,
                     .packet_elems = 512,
                     .seed = 5};
    run_hier(&s, NULL, NULL, 60);
}

TEST(hier_switchml_2x2_exact, 90) { hier_lossless(INAGG_PROTO_SWITCHML); }
TEST(hier_p4sgd_2x2_exact, 90) { hier_lossless(INAGG_PROTO_P4SGD); }

/* Loss, duplication and reordering at every level: the hosts' sockets, the leaves' ports
 * (host-leaf and leaf-spine traffic) and the spine's ports. */
static void hier_lossy(inagg_protocol_t proto, uint64_t seed)
{
    char wf[128], sf[128], lf[128];
    lossy_fault_specs(0.02, seed, wf, sf, sizeof(wf));
    snprintf(lf, sizeof(lf), "drop=0.01,dup=0.01,reorder=0.01,seed=%llu",
             (unsigned long long)seed + 7);
    hier_spec_t s = {.leaves = 2,
                     .hosts = 2,
                     .job = "hier-lossy",
                     .protocol = proto,
                     .elems = 60000,
                     .iters = 3,
                     .slots = 32,
                     .packet_elems = 256,
                     .faults = wf,
                     .seed = seed};
    run_hier(&s, sf, lf, 150);
    uint64_t rt = 0;
    for (uint32_t g = 0; g < 4; g++)
        rt += s.retransmits[g];
    CHECK_MSG(rt > 0, "loss injected but nothing was retransmitted");
    CHECK_MSG(s.up_resends > 0, "no partial sum was sent upstream again: the leaf-spine "
                                "recovery path did not run");
}

TEST(hier_switchml_2x2_exact_under_loss_at_every_level, 180)
{
    hier_lossy(INAGG_PROTO_SWITCHML, 31);
}
TEST(hier_p4sgd_2x2_exact_under_loss_at_every_level, 180) { hier_lossy(INAGG_PROTO_P4SGD, 32); }

/* Three leaves of one host each, the middle one with two: uneven leaves sum correctly. */
TEST(hier_three_leaves_of_one_host, 90)
{
    hier_spec_t s = {.leaves = 3,
                     .hosts = 1,
                     .job = "hier3",
                     .protocol = INAGG_PROTO_SWITCHML,
                     .elems = 50000,
                     .iters = 2,
                     .slots = 16,
                     .packet_elems = 1024,
                     .seed = 8};
    run_hier(&s, NULL, NULL, 60);
}

/* A leaf whose spine does not answer refuses the job with the reason, in well under the
 * job's timeout (no hang). */
TEST(hier_unreachable_spine_refuses_with_reason, 30)
{
    /* a port nobody listens on: bind, learn it, close */
    test_switch_t dead;
    switch_config_t dc = SWITCH_CONFIG_INIT;
    ts_start(&dead, &dc);
    char dead_addr[32];
    snprintf(dead_addr, sizeof(dead_addr), "%s", dead.addr);
    ts_stop(&dead);

    test_switch_t leaf;
    switch_config_t lc = SWITCH_CONFIG_INIT;
    lc.upstream = dead_addr;
    lc.upstream_rank = 0;
    lc.upstream_world = 2;
    ts_start(&leaf, &lc);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 10000;
    inagg_comm_t *comm = NULL;
    char detail[256] = "";
    uint64_t t0 = util_now_ns();
    inagg_result_t rc =
        inagg_comm_create(&comm, leaf.addr, "orphan", 0, 1, &o, detail, sizeof(detail));
    double secs = (double)(util_now_ns() - t0) / 1e9;
    ts_stop(&leaf);
    CHECK_MSG(rc == INAGG_ERR_REFUSED, "got %s: %s", inagg_strerror(rc), detail);
    CHECK_MSG(strstr(detail, "upstream") && strstr(detail, dead_addr),
              "the reason names the upstream switch: %s", detail);
    CHECK_MSG(secs < 5.0, "refused after %.1f s", secs);
    if (comm)
        inagg_comm_destroy(comm);
}

/* A spine that never completes its job (the other leaf never comes): the leaf's hosts are
 * refused with the spine's join timeout, not left waiting. */
TEST(hier_spine_join_timeout_reaches_hosts, 30)
{
    test_switch_t spine, leaf;
    switch_config_t sc = SWITCH_CONFIG_INIT;
    ts_start(&spine, &sc);
    switch_config_t lc = SWITCH_CONFIG_INIT;
    lc.upstream = spine.addr;
    lc.upstream_rank = 0;
    lc.upstream_world = 2;
    ts_start(&leaf, &lc);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 1500;
    inagg_comm_t *comm = NULL;
    char detail[256] = "";
    uint64_t t0 = util_now_ns();
    inagg_result_t rc =
        inagg_comm_create(&comm, leaf.addr, "alone", 0, 1, &o, detail, sizeof(detail));
    double secs = (double)(util_now_ns() - t0) / 1e9;
    ts_stop(&leaf);
    ts_stop(&spine);
    CHECK_MSG(rc != INAGG_OK, "joined a job whose spine never completed");
    CHECK_MSG(strstr(detail, "upstream") != NULL, "reason: %s", detail);
    CHECK_MSG(secs < 6.0, "refused after %.1f s", secs);
    if (comm)
        inagg_comm_destroy(comm);
}

/* A spine that turns the leaf away for a limit that frees up ("busy": here the address's slot
 * quota, held by another job) is asked again with backoff, as a worker asks its switch
 * (PROTOCOL.md 5.10): the leaf's host joins once the other job leaves, and its data goes
 * through both levels. */
TEST(hier_leaf_retries_a_busy_spine, 40)
{
    test_switch_t spine, leaf;
    switch_config_t sc = SWITCH_CONFIG_INIT;
    sc.total_slots = 8; /* a job 4, an address 6: the hog's 4 and the leaf's 4 do not fit */
    ts_start(&spine, &sc);
    switch_config_t lc = SWITCH_CONFIG_INIT;
    lc.upstream = spine.addr;
    lc.upstream_rank = 0;
    lc.upstream_world = 1;
    ts_start(&leaf, &lc);
    pthread_t hog;
    CHECK(pthread_create(&hog, NULL, hog_job_main, spine.addr) == 0);
    char stats[8192];
    for (int i = 0; i < 200; i++) { /* until the hog holds its slots */
        ts_stats_json(&spine, stats, sizeof(stats));
        if (ts_number(stats, "slots_used") >= 4)
            break;
        usleep(10000);
    }
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 4;
    o.packet_elems = 16;
    o.timeout_ms = 10000;
    inagg_comm_t *comm = NULL;
    char detail[256] = "";
    uint64_t t0 = util_now_ns();
    inagg_result_t rc =
        inagg_comm_create(&comm, leaf.addr, "late", 0, 1, &o, detail, sizeof(detail));
    double secs = (double)(util_now_ns() - t0) / 1e9;
    pthread_join(hog, NULL);
    int32_t in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = i * 7 - 100;
    inagg_result_t arc =
        rc == INAGG_OK ? inagg_allreduce(comm, in, out, 64, INAGG_INT32, INAGG_SUM) : rc;
    ts_stats_json(&spine, stats, sizeof(stats));
    if (comm)
        inagg_comm_destroy(comm);
    ts_stop(&leaf);
    ts_stop(&spine);
    CHECK_MSG(rc == INAGG_OK, "the leaf's host was refused: %s", detail);
    CHECK_MSG(secs > 0.5, "joined after %.2f s: the spine's quota was not held", secs);
    CHECK_MSG(ts_number(stats, "addr_slot_quota") >= 1, "the spine never said busy: %s", stats);
    CHECK_MSG(arc == INAGG_OK && memcmp(in, out, sizeof(in)) == 0, "allreduce: %s",
              inagg_strerror(arc));
}

TEST(hier_leaf_refuses_compression, 20)
{
    test_switch_t leaf;
    switch_config_t lc = SWITCH_CONFIG_INIT;
    lc.upstream = "127.0.0.1:9";
    lc.upstream_world = 1;
    ts_start(&leaf, &lc);
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.compress = "fp16";
    inagg_comm_t *comm = NULL;
    char detail[256] = "";
    inagg_result_t rc =
        inagg_comm_create(&comm, leaf.addr, "coded", 0, 1, &o, detail, sizeof(detail));
    ts_stop(&leaf);
    CHECK_MSG(rc == INAGG_ERR_UNSUPPORTED, "got %s: %s", inagg_strerror(rc), detail);
    CHECK_MSG(strstr(detail, "leaf switch") != NULL, "reason: %s", detail);
    if (comm)
        inagg_comm_destroy(comm);
}

/* The hosts learn how many ranks a result sums (contributors=, from the spine through the
 * leaf): block fixed point scales for all of them (with the leaf's world alone, sums of every
 * host's values would overflow) and INAGG_AVG divides by all of them. */
typedef struct avg_spec {
    char leaf_addr[2][32];
    float *fout; /* shared: 4 * elems */
    int32_t *iout; /* shared: 4 * elems */
    int32_t *codes; /* shared: 4 */
    size_t elems;
} avg_spec_t;

static int avg_worker(uint32_t g, void *arg)
{
    avg_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 8;
    o.packet_elems = 512;
    o.timeout_ms = 10000;
    inagg_comm_t *comm;
    char detail[256];
    inagg_result_t rc =
        inagg_comm_create(&comm, s->leaf_addr[g / 2], "avg", g % 2, 2, &o, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        s->codes[g] = rc;
        return 1;
    }
    float *f = malloc(s->elems * 4);
    int32_t *v = malloc(s->elems * 4);
    for (size_t i = 0; i < s->elems; i++) {
        f[i] = bench_value_f32(9, g, i);
        v[i] = bench_value_i32(9, g, i);
    }
    rc = inagg_allreduce(comm, f, s->fout + g * s->elems, s->elems, INAGG_FLOAT32, INAGG_SUM);
    if (rc == INAGG_OK)
        rc = inagg_allreduce(comm, v, s->iout + g * s->elems, s->elems, INAGG_INT32, INAGG_AVG);
    s->codes[g] = rc;
    inagg_comm_destroy(comm);
    free(f);
    free(v);
    return rc != INAGG_OK;
}

TEST(hier_fixed_point_and_average_count_every_host, 60)
{
    test_switch_t spine, leaf[2];
    switch_config_t sc = SWITCH_CONFIG_INIT;
    ts_start(&spine, &sc);
    avg_spec_t s = {.elems = 20000};
    for (uint32_t l = 0; l < 2; l++) {
        switch_config_t lc = SWITCH_CONFIG_INIT;
        lc.upstream = spine.addr;
        lc.upstream_rank = l;
        lc.upstream_world = 2;
        ts_start(&leaf[l], &lc);
        snprintf(s.leaf_addr[l], sizeof(s.leaf_addr[l]), "%s", leaf[l].addr);
    }
    s.fout = shared_alloc(4 * s.elems * 4);
    s.iout = shared_alloc(4 * s.elems * 4);
    s.codes = shared_alloc(4 * sizeof(int32_t));
    int failed = run_workers(4, avg_worker, &s, 50);
    for (uint32_t l = 0; l < 2; l++)
        ts_stop(&leaf[l]);
    ts_stop(&spine);
    CHECK_MSG(failed == 0, "codes %d %d %d %d", s.codes[0], s.codes[1], s.codes[2], s.codes[3]);
    double worst = 0;
    for (uint32_t g = 0; g < 4; g++)
        for (size_t i = 0; i < s.elems; i++) {
            double want = 0, mag = 0;
            for (uint32_t r = 0; r < 4; r++) {
                want += bench_value_f32(9, r, i);
                mag += fabs(bench_value_f32(9, r, i));
            }
            double err = fabs(s.fout[g * s.elems + i] - want) / (mag > 0 ? mag : 1);
            if (err > worst)
                worst = err;
            int32_t iw = bench_expected_i32(9, 4, i) / 4;
            CHECK_MSG(s.iout[g * s.elems + i] == iw, "host %u element %zu: average %d, want %d", g,
                      i, s.iout[g * s.elems + i], iw);
        }
    CHECK_MSG(worst < 1e-6,
              "float32 sum relative error %g (fixed point scaled for too few "
              "ranks?)",
              worst);
}

/* A leaf whose upstream is this test (a spine of one member that echoes each partial sum
 * back as the result): before the first real result the leaf is sent one with a wrong token
 * and one for another rank, both carrying garbage. The leaf must drop both (counted as
 * bad_token and bad_rank) and its hosts' int32 sums stay exact; a leaf that took either
 * would hand its hosts the garbage. */
typedef struct fake_spine {
    int lfd, udp, cfd;
    uint16_t tcp_port, udp_port;
    uint64_t token;
    _Atomic int stop;
    int forged, echoed;
    char why[200];
} fake_spine_t;

#define FAKE_UP_JOB 5u

static void fake_spine_join(fake_spine_t *f)
{
    struct pollfd p = {.fd = f->lfd, .events = POLLIN};
    while (!atomic_load(&f->stop) && poll(&p, 1, 100) == 0)
        ;
    if (atomic_load(&f->stop))
        return;
    f->cfd = accept(f->lfd, NULL, NULL);
    ctl_reader_t rd = {.len = 0};
    char line[CTL_LINE_MAX], why[160];
    wire_join_t jn;
    enum wire_refusal refusal;
    int io = f->cfd < 0 ? -1 : ctl_read_line(f->cfd, &rd, line, sizeof(line), 10000);
    if (io == 0 && wire_verb_of(line) == WIRE_VERB_HELLO) { /* a job with a secret */
        snprintf(line, sizeof(line), "%s nonce=%032x job=new", wire_verb_name(WIRE_VERB_CHALLENGE),
                 0);
        io = ctl_write_line(f->cfd, line, 2000);
        if (io == 0)
            io = ctl_read_line(f->cfd, &rd, line, sizeof(line), 10000);
    }
    if (io != 0 || wire_join_parse(line, &jn, &refusal, why, sizeof(why)) != 0) {
        snprintf(f->why, sizeof(f->why), "no JOIN from the leaf: %.150s", f->cfd < 0 ? "" : line);
        return;
    }
    wire_joined_t jd = {.token = f->token,
                        .id = FAKE_UP_JOB,
                        .threads = 1,
                        .port = f->udp_port,
                        .base = 0,
                        .slots = jn.slots,
                        .elems = jn.elems,
                        .float_mode = jn.float_mode,
                        .protocol = jn.protocol};
    if (wire_joined_format(&jd, line, sizeof(line)) != 0 || ctl_write_line(f->cfd, line, 2000) != 0)
        snprintf(f->why, sizeof(f->why), "cannot answer JOINED");
}

static void fake_spine_send(fake_spine_t *f, const wire_header_t *h, const uint8_t *payload,
                            const struct sockaddr_in *to)
{
    uint8_t buf[WIRE_HEADER_SIZE + 4 * 1024];
    size_t len = WIRE_HEADER_SIZE + 4u * h->count;
    if (len > sizeof(buf))
        return;
    wire_encode_header(h, buf);
    memcpy(buf + WIRE_HEADER_SIZE, payload, len - WIRE_HEADER_SIZE);
    (void)sendto(f->udp, buf, len, 0, (const struct sockaddr *)to, sizeof(*to));
}

static void *fake_spine_main(void *arg)
{
    fake_spine_t *f = arg;
    fake_spine_join(f);
    uint8_t buf[WIRE_HEADER_SIZE + 4 * 1024], junk[4 * 1024];
    memset(junk, 0x5a, sizeof(junk));
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = f->udp, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(f->udp, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl);
        wire_header_t h;
        if (n <= 0 || wire_decode(buf, (size_t)n, &h) != WIRE_OK || h.type != WIRE_CONTRIB)
            continue;
        h.type = WIRE_RESULT;
        if (f->forged == 0) {
            wire_header_t bad = h;
            bad.token ^= 1; /* another job's token */
            fake_spine_send(f, &bad, junk, &from);
            bad = h;
            bad.rank = (uint16_t)(h.rank + 1); /* the right token, another member's rank */
            fake_spine_send(f, &bad, junk, &from);
            f->forged = 1;
        }
        fake_spine_send(f, &h, buf + WIRE_HEADER_SIZE, &from);
        f->echoed++;
    }
    if (f->cfd >= 0)
        close(f->cfd);
    return NULL;
}

typedef struct forged_spec {
    const char *addr;
    int32_t *out; /* [2][FORGED_ELEMS], shared */
} forged_spec_t;

#define FORGED_ELEMS 4096u

static int forged_worker(uint32_t rank, void *arg)
{
    forged_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.slots = 8;
    o.packet_elems = 256;
    o.timeout_ms = 10000;
    inagg_comm_t *c;
    char d[256];
    if (inagg_comm_create(&c, s->addr, "forged-up", rank, 2, &o, d, sizeof(d)) != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        return 1;
    }
    int32_t in[FORGED_ELEMS];
    for (uint32_t i = 0; i < FORGED_ELEMS; i++)
        in[i] = (int32_t)(i * 13u + rank * 100003u) - 7000;
    inagg_result_t r = inagg_allreduce(c, in, s->out + (size_t)rank * FORGED_ELEMS, FORGED_ELEMS,
                                       INAGG_INT32, INAGG_SUM);
    if (r != INAGG_OK)
        fprintf(stderr, "    rank %u: %s: %s\n", rank, inagg_strerror(r), inagg_last_error(c));
    inagg_comm_destroy(c);
    return r != INAGG_OK;
}

TEST(hier_leaf_drops_upstream_results_with_wrong_token_or_rank, 60)
{
    static fake_spine_t f;
    memset(&f, 0, sizeof(f));
    f.cfd = -1;
    f.token = 0x0123456789abcdefull;
    f.lfd = ctl_listen("127.0.0.1:0");
    f.udp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    CHECK(f.lfd >= 0 && f.udp >= 0);
    CHECK(bind(f.udp, (struct sockaddr *)&a, sizeof(a)) == 0);
    CHECK(getsockname(f.udp, (struct sockaddr *)&a, &al) == 0);
    f.udp_port = ntohs(a.sin_port);
    al = sizeof(a);
    CHECK(getsockname(f.lfd, (struct sockaddr *)&a, &al) == 0);
    f.tcp_port = ntohs(a.sin_port);
    char up[32];
    snprintf(up, sizeof(up), "127.0.0.1:%u", f.tcp_port);
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, fake_spine_main, &f) == 0);

    test_switch_t leaf;
    switch_config_t lc = SWITCH_CONFIG_INIT;
    lc.upstream = up;
    lc.upstream_rank = 0;
    lc.upstream_world = 2;
    ts_start(&leaf, &lc);
    forged_spec_t s = {.addr = leaf.addr, .out = shared_alloc(2 * FORGED_ELEMS * 4)};
    int failed = run_workers(2, forged_worker, &s, 40);
    char stats[32768];
    ts_stats_json(&leaf, stats, sizeof(stats));
    ts_stop(&leaf);
    atomic_store(&f.stop, 1);
    pthread_join(tid, NULL);
    close(f.lfd);
    close(f.udp);
    CHECK_MSG(f.why[0] == 0, "%s", f.why);
    CHECK_MSG(f.forged && f.echoed > 0, "the leaf sent nothing upstream");
    CHECK_EQ_INT(failed, 0);
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t i = 0; i < FORGED_ELEMS; i++) {
            int32_t want = (int32_t)(i * 13u) - 7000 + (int32_t)(i * 13u + 100003u) - 7000;
            CHECK_MSG(s.out[r * FORGED_ELEMS + i] == want, "rank %u elem %u: %d != %d", r, i,
                      s.out[r * FORGED_ELEMS + i], want);
            if (s.out[r * FORGED_ELEMS + i] != want)
                break;
        }
    CHECK_MSG(ts_number(stats, "bad_token") == 1, "%s", stats);
    const char *by = strstr(stats, "\"drops_by_reason\"");
    CHECK_MSG(by != NULL && ts_number(by, "bad_rank") == 1, "%s", stats);
}
