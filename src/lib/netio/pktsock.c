/*
 * pktsock.c - AF_PACKET socket with a TPACKET_V2 receive ring and sendmsg (see pktsock.h).
 */
#include "lib/netio/pktsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

#define PKTSOCK_FRAME (17u * 4096u) /* a 64 KiB GSO frame, the headers and the vnet header */
/* what a ring slot holds before its frame: tpacket2_hdr (32), sockaddr_ll (20), alignment and
 * the vnet header (10), with room to spare */
#define PKTSOCK_SLOT_HEADERS 128u

static int fail(pktsock_t *s, int e, char *err, size_t errlen, const char *what, const char *ifname)
{
    pktsock_close(s);
    return set_err(err, errlen, -e, "interface %s: %s: %s", ifname, what, strerror(e));
}

int pktsock_open(pktsock_t *s, const char *ifname, size_t ring_bytes, char *err, size_t errlen)
{
    return pktsock_open_frames(s, ifname, ring_bytes, 0, err, errlen);
}

int pktsock_open_frames(pktsock_t *s, const char *ifname, size_t ring_bytes, uint32_t frame_bytes,
                        char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    s->fd = -1;
    if (!ifname || !*ifname || strlen(ifname) >= IFNAMSIZ) {
        return set_err(err, errlen, -EINVAL, "bad interface name '%s'", ifname ? ifname : "");
    }
    s->fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (s->fd < 0)
        return fail(s, errno, err, errlen, "AF_PACKET socket (needs CAP_NET_RAW)", ifname);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
    if (ioctl(s->fd, SIOCGIFINDEX, &ifr) != 0)
        return fail(s, errno, err, errlen, "no such interface", ifname);
    s->ifindex = ifr.ifr_ifindex;
    if (ioctl(s->fd, SIOCGIFHWADDR, &ifr) != 0)
        return fail(s, errno, err, errlen, "reading its MAC address", ifname);
    memcpy(s->mac, ifr.ifr_hwaddr.sa_data, 6);
    if (ioctl(s->fd, SIOCGIFMTU, &ifr) != 0)
        return fail(s, errno, err, errlen, "reading its MTU", ifname);
    s->mtu = (uint32_t)ifr.ifr_mtu;

    /* Frames sent wait in the device's qdisc (a tbf, on a testbed) charged to this socket:
     * its send buffer must hold a link's queue, or sends fail before the qdisc is full. */
    int sndbuf = 64 << 20;
    if (setsockopt(s->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0)
        (void)setsockopt(s->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    int one = 1, v2 = TPACKET_V2;
    if (setsockopt(s->fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0)
        return fail(s, errno, err, errlen, "PACKET_VNET_HDR", ifname);
    if (setsockopt(s->fd, SOL_PACKET, PACKET_VERSION, &v2, sizeof(v2)) != 0)
        return fail(s, errno, err, errlen, "PACKET_VERSION", ifname);
    (void)setsockopt(s->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    if (ring_bytes == 0)
        ring_bytes = 32u << 20; /* 480 GSO-sized frames: bursts of 1 KiB RoCE frames */
    /* frames of a given size: the smallest power of two from 2 KiB that holds one and the
     * ring's own headers, as many as fit a 64 KiB block (larger frames are truncated and
     * skipped); else one GSO-sized frame per block. A slot too generous for its frames makes
     * a ring of few slots, which a burst of them overruns. */
    uint32_t fs = PKTSOCK_FRAME, per_block = 1;
    if (frame_bytes > s->mtu + 14u)
        frame_bytes = s->mtu + 14u; /* no frame of the interface is larger (GSO aside) */
    if (frame_bytes && frame_bytes <= 65536u - PKTSOCK_SLOT_HEADERS) {
        fs = 2048u;
        while (fs < frame_bytes + PKTSOCK_SLOT_HEADERS)
            fs *= 2;
        per_block = 65536u / fs;
    }
    s->frame_size = fs;
    s->nframes = (uint32_t)(ring_bytes / fs) / per_block * per_block;
    if (s->nframes < 8 * per_block)
        s->nframes = 8 * per_block;
    struct tpacket_req req = {.tp_block_size = fs * per_block,
                              .tp_block_nr = s->nframes / per_block,
                              .tp_frame_size = fs,
                              .tp_frame_nr = s->nframes};
    if (setsockopt(s->fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof(req)) != 0)
        return fail(s, errno, err, errlen, "PACKET_RX_RING", ifname);
    s->ring_len = (size_t)s->nframes * fs;
    void *m = mmap(NULL, s->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
    if (m == MAP_FAILED) {
        s->ring = NULL;
        return fail(s, errno, err, errlen, "mapping the ring", ifname);
    }
    s->ring = m;
    struct sockaddr_ll ll = {
        .sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = s->ifindex};
    if (bind(s->fd, (struct sockaddr *)&ll, sizeof(ll)) != 0)
        return fail(s, errno, err, errlen, "bind", ifname);
    struct packet_mreq mr = {.mr_ifindex = s->ifindex, .mr_type = PACKET_MR_PROMISC};
    if (setsockopt(s->fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof(mr)) != 0)
        return fail(s, errno, err, errlen, "promiscuous mode", ifname);
    return 0;
}

static struct tpacket2_hdr *frame_at(pktsock_t *s, uint32_t i)
{
    return (struct tpacket2_hdr *)(void *)(s->ring + (size_t)i * s->frame_size);
}

int pktsock_peek(pktsock_t *s, const uint8_t **frame, uint32_t *len,
                 const struct virtio_net_hdr **vnet)
{
    /* Bounded: each pass either returns or hands one frame back. */
    for (uint32_t pass = 0; pass < s->nframes; pass++) {
        struct tpacket2_hdr *h = frame_at(s, s->next);
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER))
            return 0;
        const struct sockaddr_ll *ll =
            (const void *)((uint8_t *)h + TPACKET_ALIGN(sizeof(struct tpacket2_hdr)));
        if (ll->sll_pkttype == PACKET_OUTGOING || h->tp_snaplen != h->tp_len ||
            h->tp_mac < sizeof(struct virtio_net_hdr)) {
            if (ll->sll_pkttype != PACKET_OUTGOING)
                s->truncated++;
            pktsock_done(s);
            continue;
        }
        uint8_t *mac = (uint8_t *)h + h->tp_mac;
        *frame = mac;
        *len = h->tp_snaplen;
        *vnet = (const struct virtio_net_hdr *)(const void *)(mac - sizeof(struct virtio_net_hdr));
        return 1;
    }
    return 0;
}

int pktsock_wait_once(pktsock_t *s, int *timeout_ms)
{
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    int pr = poll(&p, 1, *timeout_ms);
    *timeout_ms = 0;
    return pr < 0 && errno != EINTR ? -errno : 0;
}

void pktsock_done(pktsock_t *s)
{
    struct tpacket2_hdr *h = frame_at(s, s->next);
    __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    s->next = s->next + 1 == s->nframes ? 0 : s->next + 1;
}

int pktsock_send(pktsock_t *s, const struct virtio_net_hdr *vnet, const void *a, uint32_t alen,
                 const void *b, uint32_t blen)
{
    return pktsock_send_fd(s->fd, vnet, a, alen, b, blen);
}

int pktsock_send_fd(int fd, const struct virtio_net_hdr *vnet, const void *a, uint32_t alen,
                    const void *b, uint32_t blen)
{
    static const struct virtio_net_hdr none;
    struct iovec iov[3] = {
        {(void *)(uintptr_t)(vnet ? vnet : &none), sizeof(struct virtio_net_hdr)},
        {(void *)(uintptr_t)a, alen},
        {(void *)(uintptr_t)b, blen},
    };
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = blen ? 3 : 2};
    for (int tries = 0; tries < 4; tries++) {
        ssize_t r = sendmsg(fd, &m, MSG_DONTWAIT);
        if (r >= 0)
            return 0;
        if (errno != EINTR)
            return errno == EWOULDBLOCK || errno == ENOBUFS ? -EAGAIN : -errno;
    }
    return -EINTR;
}

int pktsock_open_tx(int ifindex, uint32_t priority)
{
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    int prio = (int)priority, sndbuf = 64 << 20, one = 1;
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_ifindex = ifindex};
    if (setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &prio, sizeof(prio)) != 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&ll, sizeof(ll)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) != 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    return fd;
}

void pktsock_close(pktsock_t *s)
{
    if (s->ring)
        munmap(s->ring, s->ring_len);
    if (s->fd >= 0)
        close(s->fd);
    s->ring = NULL;
    s->fd = -1;
}
