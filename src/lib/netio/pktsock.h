/*
 * pktsock.h - one AF_PACKET socket on one network interface: a memory-mapped receive ring
 * and sendmsg transmission, with the virtio-net header (PACKET_VNET_HDR) on both sides so
 * that GSO/TSO super-frames and partially checksummed frames pass through unchanged.
 *
 * The ring is TPACKET_V2: every frame has its own status word, so a frame is visible to the
 * reader the moment the kernel wrote it. (TPACKET_V3 hands whole blocks over only when a block
 * is full or its retire timer fires, at millisecond granularity: a switch that must add
 * microseconds cannot wait for that at low packet rates.)
 *
 * Frames we send are not received back (PACKET_IGNORE_OUTGOING, and outgoing frames are
 * skipped if the kernel delivers them anyway). Errors: -errno with a reason in err.
 */
#ifndef INAGG_NETIO_PKTSOCK_H
#define INAGG_NETIO_PKTSOCK_H

#include <linux/virtio_net.h>
#include <stddef.h>
#include <stdint.h>

#ifndef VIRTIO_NET_HDR_GSO_UDP_L4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5 /* UDP GSO (UDP_SEGMENT); older uapi headers lack it */
#endif

typedef struct pktsock {
    int fd;
    int ifindex;
    uint8_t mac[6];
    uint32_t mtu;
    uint8_t *ring;
    size_t ring_len;
    uint32_t frame_size, nframes, next;
    uint64_t truncated; /* frames larger than a ring frame, dropped */
} pktsock_t;

/* Open a socket on interface `ifname` with a receive ring of about ring_bytes (0: 32 MiB) in
 * frames large enough for a 64 KiB GSO frame; promiscuous. */
int pktsock_open(pktsock_t *s, const char *ifname, size_t ring_bytes, char *err, size_t errlen);

/* The next received frame, if any: 1 with frame, len and vnet set (valid until pktsock_done),
 * 0 when the ring is empty. */
int pktsock_peek(pktsock_t *s, const uint8_t **frame, uint32_t *len,
                 const struct virtio_net_hdr **vnet);

/* The same with frames of at most frame_bytes (many to a ring: slots of the smallest power
 * of two from 2 KiB that holds one; 0: as pktsock_open): larger frames are counted in
 * `truncated` and skipped. */
int pktsock_open_frames(pktsock_t *s, const char *ifname, size_t ring_bytes, uint32_t frame_bytes,
                        char *err, size_t errlen);

/* The ring was empty: wait once, up to *timeout_ms, for a frame to arrive, and set *timeout_ms
 * to 0 (the caller looks again, and stops at the next empty ring). 0, or -errno. */
int pktsock_wait_once(pktsock_t *s, int *timeout_ms);

/* Give the frame returned by the last peek back to the kernel. */
void pktsock_done(pktsock_t *s);

/* Send one frame made of a (alen bytes) then b (blen bytes), preceded by the virtio-net
 * header vnet (NULL: none needed, a plain frame). 0, or -EAGAIN when the device queue is
 * full, or another -errno. */
int pktsock_send(pktsock_t *s, const struct virtio_net_hdr *vnet, const void *a, uint32_t alen,
                 const void *b, uint32_t blen);

/* The same on any packet socket with PACKET_VNET_HDR (pktsock_open_tx's). */
int pktsock_send_fd(int fd, const struct virtio_net_hdr *vnet, const void *a, uint32_t alen,
                    const void *b, uint32_t blen);

void pktsock_close(pktsock_t *s);

/* A send-only AF_PACKET socket on interface ifindex (no ring) whose frames carry skb priority
 * `priority` (qdiscs classify by it). Every frame sent on it begins with a virtio-net header:
 * zeroes for a plain frame, a GSO super-frame's (netio/udpgso.h). The descriptor or -errno. */
int pktsock_open_tx(int ifindex, uint32_t priority);

#endif /* INAGG_NETIO_PKTSOCK_H */
