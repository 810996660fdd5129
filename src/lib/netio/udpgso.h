/*
 * udpgso.h - consecutive UDP frames of one flow made into one GSO super-frame: the first
 * frame's headers, then every frame's payload, with the virtio-net header (UDP_L4, gso_size)
 * that tells the kernel where to cut it. A packet socket with PACKET_VNET_HDR sends it as one
 * skb; through a veth it stays one up to the receiving host's UDP layer, which hands it whole
 * to a UDP_GRO socket or cuts it back into the datagrams that went in (checksummed by the
 * kernel on the way). One send, one veth crossing and one receive instead of one per frame.
 *
 * Frames that may join: unfragmented IPv4 UDP without IP options, as long as their IP header
 * says, with the Ethernet header, the IP header (but for length, id and checksum) and the UDP
 * ports of the first, and a payload as long as the first's. Nothing here does I/O.
 */
#ifndef INAGG_NETIO_UDPGSO_H
#define INAGG_NETIO_UDPGSO_H

#include <linux/virtio_net.h>
#include <stdint.h>

#define UDPGSO_MAX_SEGS 64u /* the kernel's UDP_MAX_SEGMENTS (Linux 6.1) */

typedef struct udpgso {
    uint8_t *buf; /* the super-frame */
    uint32_t cap; /* bytes buf holds */
    uint32_t len; /* bytes in it */
    uint32_t seg; /* payload bytes of every frame in it */
    uint32_t nseg; /* frames in it; 0: empty */
} udpgso_t;

/* A builder of super-frames of up to cap bytes (at most 14 + 65535). 0 or -ENOMEM. */
int udpgso_init(udpgso_t *g, uint32_t cap);
void udpgso_free(udpgso_t *g);

/* Add frame (len bytes): 1 when it joined (copied in; an empty builder takes any frame that
 * may join), 0 when it cannot join what is there (finish first) or may not join at all. */
int udpgso_add(udpgso_t *g, const uint8_t *frame, uint32_t len);

/* The frame built (g->buf, the length returned) and its virtio-net header: a GSO header for
 * two frames or more; none (zeroes) for one, the frame then being the one added, byte for
 * byte. The builder keeps it until udpgso_reset. */
uint32_t udpgso_finish(udpgso_t *g, struct virtio_net_hdr *vh);

/* Frame k of the nseg the builder held before udpgso_finish, as it was added, into out
 * (room for ETHF_UDP_HDR_LEN + seg bytes, e.g. to send them one by one where a super-frame
 * was refused); its length. */
uint32_t udpgso_segment(const udpgso_t *g, uint32_t k, uint8_t *out);

static inline void udpgso_reset(udpgso_t *g)
{
    g->len = 0;
    g->nseg = 0;
}

#endif /* INAGG_NETIO_UDPGSO_H */
