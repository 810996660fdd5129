/*
 * test_udpgso.c - UDP frames of one flow into one GSO super-frame (netio/udpgso.h): three
 * result frames become one frame with the first's headers, a valid IPv4 header of the whole
 * length, the UDP length and pseudo-header sum a CHECKSUM_PARTIAL frame needs, and the
 * virtio-net header the kernel cuts it by; cut back (udpgso_segment) each is the frame that
 * went in. A frame of another flow, length or kind, a fragment, the 65th frame or one past
 * 64 KB does not join; a lone frame leaves as itself, with no GSO header.
 */
#include <arpa/inet.h>
#include <string.h>

#include "harness.h"
#include "lib/netio/ethframe.h"
#include "lib/netio/pktsock.h"
#include "lib/netio/udpgso.h"

static const uint8_t mac_a[6] = {2, 0, 0, 0, 0, 1}, mac_b[6] = {2, 0, 0, 0, 0, 2};

/* A UDP frame from 10.0.0.1:7000 to 10.0.0.2:dport with payload bytes (i + k) & 0xff. */
static uint32_t make_frame(uint8_t *f, uint16_t dport, uint32_t payload, int k)
{
    ethf_write_udp(f, mac_a, mac_b, htonl(0x0a000001), htonl(0x0a000002), 7000, dport, payload);
    for (uint32_t i = 0; i < payload; i++)
        f[ETHF_UDP_HDR_LEN + i] = (uint8_t)(i + (uint32_t)k);
    return ETHF_UDP_HDR_LEN + payload;
}

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* The ones' complement sum of n bytes, folded (0xffff or 0 for a valid checksummed header). */
static uint32_t fold(const uint8_t *p, uint32_t n, uint32_t s)
{
    for (uint32_t i = 0; i + 1 < n; i += 2)
        s += be16(p + i);
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return s;
}

TEST(udpgso_three_results_one_super_frame_cut_back_alike, 5)
{
    udpgso_t g;
    CHECK_EQ_INT(udpgso_init(&g, ETHF_ETH_LEN + 65535u), 0);
    enum { PAYLOAD = 96, N = 3 };
    uint8_t in[N][ETHF_UDP_HDR_LEN + PAYLOAD];
    for (int k = 0; k < N; k++) {
        uint32_t len = make_frame(in[k], 9000, PAYLOAD, k);
        CHECK_EQ_INT(udpgso_add(&g, in[k], len), 1);
    }
    struct virtio_net_hdr vh;
    uint32_t len = udpgso_finish(&g, &vh);
    CHECK_EQ_INT(len, ETHF_UDP_HDR_LEN + N * PAYLOAD);
    CHECK(vh.gso_type == VIRTIO_NET_HDR_GSO_UDP_L4 && vh.gso_size == PAYLOAD);
    CHECK(vh.flags == VIRTIO_NET_HDR_F_NEEDS_CSUM && vh.hdr_len == ETHF_UDP_HDR_LEN);
    CHECK(vh.csum_start == ETHF_ETH_LEN + 20 && vh.csum_offset == 6);
    const uint8_t *ip = g.buf + ETHF_ETH_LEN, *udp = ip + 20;
    CHECK_EQ_INT(be16(ip + 2), 20 + 8 + N * PAYLOAD);
    CHECK_EQ_INT(fold(ip, 20, 0), 0xffff); /* the IP header checksums */
    CHECK_EQ_INT(be16(udp + 4), 8 + N * PAYLOAD);
    /* the pseudo-header's sum (addresses, protocol, UDP length), as CHECKSUM_PARTIAL wants */
    CHECK_EQ_INT(be16(udp + 6), fold(ip + 12, 8, 17 + 8 + N * PAYLOAD));
    CHECK(memcmp(g.buf, in[0], ETHF_ETH_LEN) == 0 && be16(udp + 2) == 9000);
    for (int k = 0; k < N; k++) {
        uint8_t out[ETHF_UDP_HDR_LEN + PAYLOAD];
        CHECK_EQ_INT(udpgso_segment(&g, (uint32_t)k, out), ETHF_UDP_HDR_LEN + PAYLOAD);
        CHECK_MSG(memcmp(out, in[k], sizeof(out)) == 0, "frame %d cut back differs", k);
    }
    udpgso_reset(&g);
    /* one frame: itself, no GSO header */
    CHECK_EQ_INT(udpgso_add(&g, in[1], sizeof(in[1])), 1);
    len = udpgso_finish(&g, &vh);
    CHECK(len == sizeof(in[1]) && memcmp(g.buf, in[1], len) == 0);
    CHECK(vh.gso_type == VIRTIO_NET_HDR_GSO_NONE && vh.flags == 0);
    udpgso_free(&g);
}

TEST(udpgso_other_flows_lengths_kinds_and_limits_do_not_join, 5)
{
    udpgso_t g;
    CHECK_EQ_INT(udpgso_init(&g, ETHF_ETH_LEN + 65535u), 0);
    uint8_t a[ETHF_UDP_HDR_LEN + 1200], b[ETHF_UDP_HDR_LEN + 1200];
    uint32_t la = make_frame(a, 9000, 1000, 0);
    CHECK_EQ_INT(udpgso_add(&g, a, la), 1);
    uint32_t lb = make_frame(b, 9001, 1000, 1); /* another port */
    CHECK_EQ_INT(udpgso_add(&g, b, lb), 0);
    lb = make_frame(b, 9000, 999, 1); /* another length */
    CHECK_EQ_INT(udpgso_add(&g, b, lb), 0);
    lb = make_frame(b, 9000, 1000, 1);
    b[ETHF_ETH_LEN + 6] |= 0x20; /* more fragments */
    CHECK_EQ_INT(udpgso_add(&g, b, lb), 0);
    lb = make_frame(b, 9000, 1000, 1);
    b[ETHF_ETH_LEN + 9] = 6; /* TCP */
    CHECK_EQ_INT(udpgso_add(&g, b, lb), 0);
    lb = make_frame(b, 9000, 1000, 1);
    b[13] = 0xdd; /* not IPv4 */
    CHECK_EQ_INT(udpgso_add(&g, b, lb), 0);
    lb = make_frame(b, 9000, 1000, 1);
    CHECK_EQ_INT(udpgso_add(&g, b, lb + 4), 0); /* padded past its IP length */
    CHECK_EQ_INT(g.nseg, 1);
    for (int k = 1; k < 64; k++)
        CHECK_EQ_INT(udpgso_add(&g, a, la), 1);
    CHECK_EQ_INT(g.nseg, 64);
    CHECK_EQ_INT(udpgso_add(&g, a, la), 0); /* the 65th: UDPGSO_MAX_SEGS */
    udpgso_reset(&g);
    uint8_t big[ETHF_UDP_HDR_LEN + 9000];
    uint32_t lbig = make_frame(big, 9000, 9000, 0);
    for (int k = 0; k < 7; k++)
        CHECK_EQ_INT(udpgso_add(&g, big, lbig), 1);
    CHECK_EQ_INT(udpgso_add(&g, big, lbig), 0); /* 8 x 9000 > 65507 */
    udpgso_free(&g);
}
