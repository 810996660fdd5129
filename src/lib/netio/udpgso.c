/* udpgso.c - UDP frames of one flow into one GSO super-frame (see udpgso.h). */
#include "lib/netio/udpgso.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/netio/ethframe.h"
#include "lib/netio/pktsock.h"

#define IP_AT ETHF_ETH_LEN
#define UDP_AT (ETHF_ETH_LEN + 20u)
#define UDP_CSUM_OFFSET 6u
#define SUPER_PAYLOAD_MAX (65535u - 20u - 8u) /* what one IPv4 datagram's length holds */

int udpgso_init(udpgso_t *g, uint32_t cap)
{
    memset(g, 0, sizeof(*g));
    g->buf = malloc(cap);
    if (!g->buf)
        return -ENOMEM;
    g->cap = cap;
    return 0;
}

void udpgso_free(udpgso_t *g)
{
    free(g->buf);
    memset(g, 0, sizeof(*g));
}

/* The UDP payload bytes of frame f if it may join a super-frame, else 0: a UDP datagram
 * (ethf_parse) without IP options, exactly as long as its headers say, with a payload. */
static uint32_t joinable_payload(const uint8_t *f, uint32_t len)
{
    ethf_udp_t u;
    if (ethf_parse(f, len, &u) != ETHF_UDP || f[IP_AT] != 0x45 || u.payload_len == 0 ||
        ETHF_UDP_HDR_LEN + u.payload_len != len)
        return 0;
    return u.payload_len;
}

/* Whether frame f has the super-frame a's flow: the Ethernet header, the IP header but for
 * its length (bytes 2-3), id (4-5) and checksum (10-11), the UDP ports. */
static int same_flow(const uint8_t *a, const uint8_t *f)
{
    return memcmp(a, f, IP_AT + 2) == 0 && memcmp(a + IP_AT + 6, f + IP_AT + 6, 4) == 0 &&
           memcmp(a + IP_AT + 12, f + IP_AT + 12, 8 + 4) == 0;
}

int udpgso_add(udpgso_t *g, const uint8_t *frame, uint32_t len)
{
    uint32_t payload = joinable_payload(frame, len);
    if (payload == 0 || len > g->cap)
        return 0;
    if (g->nseg == 0) {
        memcpy(g->buf, frame, len);
        g->len = len;
        g->seg = payload;
        g->nseg = 1;
        return 1;
    }
    if (payload != g->seg || g->nseg >= UDPGSO_MAX_SEGS || g->len + payload > g->cap ||
        (g->nseg + 1) * payload > SUPER_PAYLOAD_MAX || !same_flow(g->buf, frame))
        return 0;
    memcpy(g->buf + g->len, frame + ETHF_UDP_HDR_LEN, payload);
    g->len += payload;
    g->nseg++;
    return 1;
}

uint32_t udpgso_finish(udpgso_t *g, struct virtio_net_hdr *vh)
{
    memset(vh, 0, sizeof(*vh));
    if (g->nseg < 2)
        return g->len;
    ethf_udp_set_payload_len(g->buf, g->nseg * g->seg);
    ethf_udp_set_partial_csum(g->buf); /* the kernel adds each segment's bytes as it cuts */
    vh->flags = VIRTIO_NET_HDR_F_NEEDS_CSUM;
    vh->gso_type = VIRTIO_NET_HDR_GSO_UDP_L4;
    vh->hdr_len = ETHF_UDP_HDR_LEN;
    vh->gso_size = (uint16_t)g->seg;
    vh->csum_start = UDP_AT;
    vh->csum_offset = UDP_CSUM_OFFSET;
    return g->len;
}

uint32_t udpgso_segment(const udpgso_t *g, uint32_t k, uint8_t *out)
{
    memcpy(out, g->buf, ETHF_UDP_HDR_LEN);
    memcpy(out + ETHF_UDP_HDR_LEN, g->buf + ETHF_UDP_HDR_LEN + (size_t)k * g->seg, g->seg);
    ethf_udp_set_payload_len(out, g->seg);
    return ETHF_UDP_HDR_LEN + g->seg;
}
