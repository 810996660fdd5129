/*
 * test_pathmtu.c - packets sized to the path: the path MTU read from the kernel (an
 * interface's, a route's), a communicator's default packet size fitting one frame of it and
 * a larger packet_elems refused naming the MTU, allreduces correct at MTU 1500 (in a network
 * namespace of the test's own, whose loopback gets that MTU), loopback's 65536 keeping the
 * datagram maximum, and what a timed-out call says when the switch's fabric dropped IP
 * fragments or the packets outgrew the path.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/netaddr.h"
#include "lib/client/ctl.h"
#include "lib/netio/pathmtu.h"
#include "lib/wire/wire.h"
#include "lib/worker/comm.h"
#include "testutil.h"

/* A network namespace of this test's own (the test runs in a forked child, which the
 * namespace goes with), its loopback up with the given MTU; skips where it cannot be made. */
static void private_loopback(int mtu)
{
    if (unshare(CLONE_NEWNET) != 0)
        SKIP("cannot make a network namespace (needs root)");
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "ip link set lo mtu %d up 2>/dev/null", mtu);
    if (system(cmd) != 0)
        SKIP("cannot configure the namespace's loopback (ip, CAP_NET_ADMIN)");
}

static struct sockaddr_in addr_of(const char *text)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    (void)netaddr_parse(text, 9, &a);
    return a;
}

TEST(pathmtu_is_the_interfaces_or_the_routes, 20)
{
    private_loopback(1500);
    if (system("ip link add pm0 type veth peer name pm1 2>/dev/null && "
               "ip link set pm0 mtu 9000 up && ip link set pm1 up && "
               "ip addr add 10.201.0.1/24 dev pm0 && "
               "ip route add 10.202.0.0/24 dev pm0 mtu 1400 2>/dev/null") != 0)
        SKIP("cannot make a veth interface with a route (ip, CAP_NET_ADMIN)");
    char ifname[32], err[200];
    struct sockaddr_in lo = addr_of("127.0.0.1:7000");
    CHECK_EQ_INT(pathmtu_of(&lo, ifname, sizeof(ifname), err, sizeof(err)), 1500);
    CHECK_MSG(strcmp(ifname, "lo") == 0, "interface '%s'", ifname);
    struct sockaddr_in dev = addr_of("10.201.0.7");
    CHECK_EQ_INT(pathmtu_of(&dev, ifname, sizeof(ifname), err, sizeof(err)), 9000);
    CHECK_MSG(strcmp(ifname, "pm0") == 0, "interface '%s'", ifname);
    struct sockaddr_in route = addr_of("10.202.0.7"); /* the route's MTU is below the device's */
    CHECK_EQ_INT(pathmtu_of(&route, ifname, sizeof(ifname), err, sizeof(err)), 1400);
    struct sockaddr_in nowhere = addr_of("10.203.0.7");
    int rc = pathmtu_of(&nowhere, ifname, sizeof(ifname), err, sizeof(err));
    CHECK_MSG(rc == -ENETUNREACH && strstr(err, "no route to 10.203.0.7"), "rc %d: %s", rc, err);
    CHECK_EQ_INT(pathmtu_udp_payload(1500), 1472);
}

typedef struct {
    const char *addr;
    int32_t *codes; /* shared: each rank's first failure (0: none) */
    uint32_t *elems; /* shared: each rank's packet size as sized */
} mtu_job_t;

/* A rank of a 2-rank job with the default packet size: every size of int32 allreduce from 1
 * element to 6 packets' worth and more, each result checked whole. */
static int mtu_rank(uint32_t rank, void *arg)
{
    mtu_job_t *j = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 10000;
    inagg_comm_t *c = NULL;
    char d[COMM_DETAIL_MAX];
    inagg_result_t rc = inagg_comm_create(&c, j->addr, "mtu", rank, 2, &o, d, sizeof(d));
    if (rc != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        j->codes[rank] = rc;
        return 1;
    }
    j->elems[rank] = inagg_comm_packet_elems(c);
    enum { MAX = 5000 };
    static int32_t send[MAX], recv[MAX];
    for (size_t n = 1; n <= MAX && rc == INAGG_OK; n = n * 2 + 1) {
        for (size_t i = 0; i < n; i++)
            send[i] = (int32_t)(i * 3 + rank);
        rc = inagg_allreduce(c, send, recv, n, INAGG_INT32, INAGG_SUM);
        for (size_t i = 0; i < n && rc == INAGG_OK; i++)
            if (recv[i] != (int32_t)(6 * i + 1)) {
                fprintf(stderr, "    rank %u: %zu elements: [%zu] = %d\n", rank, n, i, recv[i]);
                rc = INAGG_ERR_PROTOCOL;
            }
    }
    if (rc != INAGG_OK)
        j->codes[rank] = rc;
    inagg_comm_destroy(c);
    return rc != INAGG_OK;
}

/* One rank alone with packet_elems: the result of creating it, its reason in d. */
static inagg_result_t create_alone(const char *addr, uint32_t packet_elems, const char *compress,
                                   uint32_t *sized, char *d, size_t dlen)
{
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.timeout_ms = 5000;
    o.packet_elems = packet_elems;
    o.compress = compress;
    o.float_mode = compress ? INAGG_FLOAT_NATIVE : INAGG_FLOAT_FIXED;
    inagg_comm_t *c = NULL;
    inagg_result_t rc = inagg_comm_create(&c, addr, "alone", 0, 1, &o, d, dlen);
    if (rc == INAGG_OK) {
        *sized = inagg_comm_packet_elems(c);
        inagg_comm_destroy(c);
    }
    return rc;
}

TEST(packets_sized_to_a_1500_byte_path, 60)
{
    private_loopback(1500);
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    mtu_job_t j = {.addr = ts.addr,
                   .codes = shared_alloc(2 * sizeof(int32_t)),
                   .elems = shared_alloc(2 * sizeof(uint32_t))};
    CHECK_EQ_INT(run_workers(2, mtu_rank, &j, 50), 0);
    /* 1500 - 20 (IPv4) - 8 (UDP) - 36 (header) - 28 (MAC) = 1408 bytes: 352 elements */
    CHECK_EQ_INT(j.elems[0], 352);
    CHECK_EQ_INT(j.elems[1], 352);
    char d[COMM_DETAIL_MAX] = "";
    uint32_t sized = 0;
    CHECK_EQ_INT(create_alone(ts.addr, 352, NULL, &sized, d, sizeof(d)), INAGG_OK);
    CHECK_EQ_INT(sized, 352);
    CHECK_EQ_INT(create_alone(ts.addr, 353, NULL, &sized, d, sizeof(d)), INAGG_ERR_INVALID);
    CHECK_MSG(strstr(d, "packet_elems 353") && strstr(d, "path MTU 1500") &&
                  strstr(d, "through lo") && strstr(d, "at most 352"),
              "%s", d);
    /* no route to the switch: said before any JOIN is tried */
    CHECK_EQ_INT(create_alone("10.203.0.7:7000", 0, NULL, &sized, d, sizeof(d)),
                 INAGG_ERR_CONNECTION);
    CHECK_MSG(strstr(d, "cannot size packets to the switch at 10.203.0.7:7000: no route"), "%s", d);
    /* a codec's chunks are sized by their worst case: fp16 takes 2 bytes a value */
    CHECK_EQ_INT(create_alone(ts.addr, 0, "fp16", &sized, d, sizeof(d)), INAGG_OK);
    CHECK_MSG(sized > 352, "fp16: %u", sized);
    codec_spec_t fp16;
    CHECK_EQ_INT(codec_parse("fp16", &fp16, NULL, 0), 0);
    CHECK_MSG(WIRE_HEADER_MAX + codec_max_bytes(&fp16, sized) <= 1472 &&
                  WIRE_HEADER_MAX + codec_max_bytes(&fp16, sized + 4) > 1472,
              "fp16: %u values, %zu bytes", sized, codec_max_bytes(&fp16, sized));
    ts_stop(&ts);
}

TEST(loopback_keeps_the_datagram_maximum, 30)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    char d[COMM_DETAIL_MAX] = "";
    uint32_t sized = 0;
    CHECK_MSG(create_alone(ts.addr, 0, NULL, &sized, d, sizeof(d)) == INAGG_OK, "%s", d);
    CHECK_EQ_INT(sized, INAGG_MAX_PACKET_ELEMS);
    CHECK_EQ_INT(create_alone(ts.addr, INAGG_MAX_PACKET_ELEMS, NULL, &sized, d, sizeof(d)),
                 INAGG_OK);
    ts_stop(&ts);
}

/* A stand-in for a switch's control port: the first connection is kept (the rank's control
 * connection); each later one gets `reply` to its STATS and is closed. */
typedef struct {
    int listen_fd;
    const char *reply;
    int stats_asked;
} fake_switch_t;

static void *fake_switch_main(void *arg)
{
    fake_switch_t *f = arg;
    int keep = accept(f->listen_fd, NULL, NULL);
    for (;;) {
        int fd = accept(f->listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        ctl_reader_t rd = {0};
        char line[CTL_LINE_MAX];
        if (ctl_read_line(fd, &rd, line, sizeof(line), 2000) == 0 && strcmp(line, "STATS") == 0) {
            f->stats_asked++;
            if (write(fd, f->reply, strlen(f->reply)) < 0) {
                /* the test sees the missing note */
            }
        }
        close(fd);
    }
    if (keep >= 0)
        close(keep);
    return NULL;
}

/* What comm_note_path appends for a rank whose control connection goes to a fake switch
 * answering STATS with reply, its packets packet_elems long, sized for path_mtu. */
static void note_with(const char *reply, uint32_t packet_elems, uint32_t path_mtu, char *d,
                      size_t dlen, int *asked)
{
    fake_switch_t f = {.listen_fd = ctl_listen("127.0.0.1:0"), .reply = reply};
    fcntl(f.listen_fd, F_SETFL, 0); /* its accept waits */
    struct sockaddr_in a;
    socklen_t n = sizeof(a);
    getsockname(f.listen_fd, (struct sockaddr *)&a, &n);
    pthread_t t;
    pthread_create(&t, NULL, fake_switch_main, &f);
    inagg_comm_t *c = calloc(1, sizeof(*c));
    c->nshards = 1;
    c->ctl_fd[0] = ctl_connect(&a, 2000);
    c->opts.packet_elems = packet_elems;
    c->path_mtu = path_mtu;
    comm_note_path(c, d, dlen);
    shutdown(f.listen_fd, SHUT_RDWR);
    pthread_join(t, NULL);
    close(f.listen_fd);
    close(c->ctl_fd[0]);
    free(c);
    *asked = f.stats_asked;
}

TEST(timeout_names_the_fabrics_dropped_fragments, 30)
{
    char d[COMM_DETAIL_MAX];
    int asked = 0;
    const char *frags = "switch 10.0.0.1:7000 threads=1\n"
                        "fabric frames: forwarded=3 agg_in=10 agg_fragment=45 malformed=0\n"
                        "END\n";
    note_with(frags, 2227, 9000, d, sizeof(d), &asked);
    CHECK_EQ_INT(asked, 1);
    CHECK_MSG(strstr(d, "the switch's L2 fabric has dropped 45 IP fragments") == d &&
                  strstr(d, "(agg_fragment)") &&
                  strstr(d, "this rank's, up to 8972 bytes, fit its path MTU 9000: another "
                            "rank's, or a narrower link further on, may not"),
              "%s", d);
    /* none dropped, packets within the path: nothing to add */
    note_with("fabric frames: agg_fragment=0\nEND\n", 352, 1500, d, sizeof(d), &asked);
    CHECK_MSG(d[0] == '\0', "%s", d);
    /* a switch without a fabric */
    note_with("switch 10.0.0.1:7000 threads=1\nEND\n", 352, 1500, d, sizeof(d), &asked);
    CHECK_MSG(d[0] == '\0', "%s", d);
}

TEST(timeout_names_a_path_mtu_below_the_packets, 30)
{
    private_loopback(1500);
    char d[COMM_DETAIL_MAX];
    int asked = 0;
    /* sized for loopback's 65536; the path's MTU is 1500 now */
    note_with("END\n", INAGG_MAX_PACKET_ELEMS, 65536, d, sizeof(d), &asked);
    CHECK_MSG(strstr(d, "datagrams leave as IP fragments, which are lost whole: this rank's, up "
                        "to 65504 bytes, now exceed its path MTU 1500 (65536 when they were "
                        "sized)") == d,
              "%s", d);
    /* and with the fabric's count */
    note_with("fabric frames: agg_fragment=3\nEND\n", INAGG_MAX_PACKET_ELEMS, 65536, d, sizeof(d),
              &asked);
    CHECK_MSG(strstr(d, "has dropped 3 IP fragments") &&
                  strstr(d, "exceed its path MTU 1500 (65536 when"),
              "%s", d);
}

/* Several shards: packets fit the narrowest path among them, and a refusal names that shard. */
TEST(shards_sized_to_the_narrowest_path, 20)
{
    private_loopback(9000);
    if (system("ip link add pm0 type veth peer name pm1 2>/dev/null && "
               "ip link set pm0 mtu 1500 up && ip link set pm1 up && "
               "ip addr add 10.201.0.1/24 dev pm0 2>/dev/null") != 0)
        SKIP("cannot make a veth interface (ip, CAP_NET_ADMIN)");
    const char shard_text[2][64] = {"127.0.0.1:7000", "10.201.0.7:7000"};
    transport_addr_t sw[2];
    CHECK_EQ_INT(transport_parse_addr("udp", shard_text[0], &sw[0]), 0);
    CHECK_EQ_INT(transport_parse_addr("udp", shard_text[1], &sw[1]), 0);
    inagg_comm_t *c = calloc(1, sizeof(*c));
    c->nshards = 2;
    char d[COMM_DETAIL_MAX] = "";
    CHECK_MSG(comm_size_packets(c, sw, shard_text, d, sizeof(d)) == 0, "%s", d);
    CHECK_EQ_INT(c->path_mtu, 1500);
    CHECK_EQ_INT(c->opts.packet_elems, 352);
    CHECK_MSG(strcmp(c->path_if, "pm0") == 0, "interface '%s'", c->path_if);
    c->opts.packet_elems = 400;
    CHECK_EQ_INT(comm_size_packets(c, sw, shard_text, d, sizeof(d)), -EINVAL);
    CHECK_MSG(strstr(d, "path MTU 1500 to the switch at 10.201.0.7:7000 through pm0"), "%s", d);
    c->opts.packet_elems = 0; /* with only the wide one: loopback at 9000 */
    c->nshards = 1;
    CHECK_EQ_INT(comm_size_packets(c, sw, shard_text, d, sizeof(d)), 0);
    CHECK_EQ_INT(c->opts.packet_elems, 2227);
    free(c);
}
