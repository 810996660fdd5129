/*
 * test_xdp.c - the fabric's XDP program (src/switchd/fabric/xdp/steer.bpf.c) judged frame by frame
 * in the kernel (BPF_PROG_TEST_RUN, attached nowhere): which frames it steers to the port's
 * AF_XDP socket (its redirected counter) and which it passes to the AF_PACKET path. Needs
 * root (CAP_BPF); skips, saying why, where the program cannot be loaded.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <linux/bpf.h>
#include <string.h>

#include "harness.h"
#include "lib/netio/ethframe.h"
#include "switchd/fabric/xdpload.h"
#include "switchd/fabric/xskport.h"

static const uint8_t sw_mac[6] = {0x02, 0x69, 0x61, 0, 0, 254};
static const uint8_t host_mac[6] = {0x02, 0, 0, 0, 0, 1};

/* Run the program once on frame; the change of its redirected counter (1 steered, 0
 * passed). Its return is XDP_PASS either way: the XSKMAP is empty, and the program passes
 * what no socket takes. */
static int steered(xdpload_t *x, const uint8_t *frame, uint32_t len)
{
    uint64_t before = xdpload_stat(x, STEER_REDIRECTED);
    uint8_t out[9100];
    LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = frame, .data_size_in = len, .data_out = out,
                .data_size_out = sizeof(out), .repeat = 1);
    int rc = bpf_prog_test_run_opts(x->prog_fd, &o);
    CHECK_MSG(rc == 0, "BPF_PROG_TEST_RUN on %u bytes: %s", len, strerror(errno));
    CHECK_EQ_INT(o.retval, XDP_PASS);
    return (int)(xdpload_stat(x, STEER_REDIRECTED) - before);
}

static void udp_frame(uint8_t *f, const uint8_t *dst_mac, uint32_t dst_ip, uint16_t port,
                      uint32_t payload)
{
    memset(f, 0, ETHF_UDP_HDR_LEN + payload);
    ethf_write_udp(f, host_mac, dst_mac, inet_addr("10.9.0.1"), dst_ip, 40000, port, payload);
}

TEST(xdp_steers_roce_and_aggregation_udp_passes_the_rest, 20)
{
    struct steer_conf c = {.port_lo = 7000,
                           .port_hi = 7002,
                           .ip = inet_addr("10.9.0.254"),
                           .max_frame = XSKPORT_MAX_FRAME,
                           .roce = 1};
    memcpy(c.mac, sw_mac, 6);
    xdpload_t x;
    char err[256];
    if (xdpload_load(&x, "test", &c, err, sizeof(err)) < 0)
        SKIP(err);
    static uint8_t f[9100];
    /* aggregation UDP to the switch: both queues' ports */
    udp_frame(f, sw_mac, c.ip, 7000, 64);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 1);
    udp_frame(f, sw_mac, c.ip, 7001, 64);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 1);
    /* UDP to another port, another IP, another MAC: the AF_PACKET path */
    udp_frame(f, sw_mac, c.ip, 7002, 64);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 0);
    udp_frame(f, sw_mac, inet_addr("10.9.0.2"), 7000, 64);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 0);
    udp_frame(f, host_mac, c.ip, 7000, 64);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 0);
    /* an IPv4 fragment of an aggregation datagram: passed (the fabric counts it) */
    udp_frame(f, sw_mac, c.ip, 7000, 64);
    f[14 + 6] = 0x20; /* more fragments */
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 0);
    /* larger than an XSK chunk holds: passed to AF_PACKET */
    udp_frame(f, sw_mac, c.ip, 7000, XSKPORT_MAX_FRAME);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + XSKPORT_MAX_FRAME), 0);
    CHECK(xdpload_stat(&x, STEER_TOO_BIG) == 1);
    /* RoCE v1 to the switch's MAC: steered; to a host's, or ARP: passed */
    memset(f, 0, 128);
    memcpy(f, sw_mac, 6);
    memcpy(f + 6, host_mac, 6);
    f[12] = 0x89, f[13] = 0x15;
    CHECK_EQ_INT(steered(&x, f, 128), 1);
    memcpy(f, host_mac, 6);
    CHECK_EQ_INT(steered(&x, f, 128), 0);
    memset(f, 0xff, 6);
    f[12] = 0x08, f[13] = 0x06;
    CHECK_EQ_INT(steered(&x, f, 60), 0);
    /* an Ethernet header alone (the least the kernel runs XDP on): passed, nothing read past
     * its end */
    memcpy(f, sw_mac, 6);
    f[12] = 0x08, f[13] = 0x00;
    CHECK_EQ_INT(steered(&x, f, 14), 0);
    CHECK_EQ_INT(xdpload_stat(&x, STEER_PASSED), 7);
    xdpload_detach(&x);
    /* a port whose MTU lets a RoCE frame exceed a chunk: all its RoCE frames are passed, so
     * that a message's big and small frames do not take two paths */
    c.roce = 0;
    if (xdpload_load(&x, "test", &c, err, sizeof(err)) < 0) {
        CHECK_MSG(0, "%s", err);
        return;
    }
    memset(f, 0, 128);
    memcpy(f, sw_mac, 6);
    memcpy(f + 6, host_mac, 6);
    f[12] = 0x89, f[13] = 0x15;
    CHECK_EQ_INT(steered(&x, f, 128), 0);
    udp_frame(f, sw_mac, c.ip, 7000, 64);
    CHECK_EQ_INT(steered(&x, f, ETHF_UDP_HDR_LEN + 64), 1);
    xdpload_detach(&x);
}
