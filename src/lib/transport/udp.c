/*
 * udp.c - UDP sockets (see udp.h) and the UDP transport (transport.h) built on them.
 */
#include "lib/transport/udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/env.h"
#include "lib/base/errmsg.h"
#include "lib/base/log.h"
#include "lib/base/netaddr.h"
#include "lib/netio/mcast.h"
#include "lib/transport/transport.h"

static void set_buffer(int fd, int level_force, int level, int bytes)
{
    if (setsockopt(fd, SOL_SOCKET, level_force, &bytes, sizeof(bytes)) != 0)
        setsockopt(fd, SOL_SOCKET, level, &bytes, sizeof(bytes));
}

int udp_open(const struct sockaddr_in *bind_addr, int buffer_bytes)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (buffer_bytes > 0) {
        set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, buffer_bytes);
        set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, buffer_bytes);
    }
    if (bind(fd, (const struct sockaddr *)bind_addr, sizeof(*bind_addr)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int udp_open_any(int buffer_bytes)
{
    struct sockaddr_in any = {.sin_family = AF_INET};
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    return udp_open(&any, buffer_bytes);
}

uint16_t udp_bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return 0;
    return ntohs(a.sin_port);
}

int udp_send_batch(int fd, struct mmsghdr *msgs, int n, int timeout_ms)
{
    int sent = 0;
    while (sent < n) {
        int r = sendmmsg(fd, msgs + sent, (unsigned)(n - sent), MSG_DONTWAIT);
        if (r > 0) {
            sent += r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int pr = poll(&p, 1, timeout_ms);
            if (pr == 0)
                return sent; /* the rest is lost; retransmission recovers it */
            continue;
        }
        if (r < 0 && errno == ECONNREFUSED)
            continue; /* ICMP from an earlier datagram; not this batch's fault */
        return r < 0 ? -errno : sent;
    }
    return sent;
}

int udp_recv_batch(int fd, struct mmsghdr *msgs, int n, int timeout_ms)
{
    for (;;) {
        int r = recvmmsg(fd, msgs, (unsigned)n, MSG_DONTWAIT, NULL);
        if (r > 0)
            return r;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == ECONNREFUSED)
            continue;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        if (timeout_ms == 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, timeout_ms);
        if (pr < 0 && errno != EINTR)
            return -errno;
        if (pr == 0)
            return 0;
        timeout_ms = 0;
    }
}

int udp_set_receive_timeout(int fd, int timeout_ms)
{
    int fl = fcntl(fd, F_GETFL);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
        return -errno;
    return 0;
}

int udp_recv_batch_blocking(int fd, struct mmsghdr *msgs, int n)
{
    int r = recvmmsg(fd, msgs, (unsigned)n, MSG_WAITFORONE, NULL);
    if (r >= 0)
        return r;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED)
        return 0;
    return -errno;
}

/* ---- The UDP transport (transport.h): one socket per endpoint, batches of sendmmsg and
 * recvmmsg, queue q of a switch at port + q. ---- */

#define UDP_ADDR_KIND 1u
#define UDP_TX_BATCH 64
#define UDP_GSO_MAX_SEGS 64u /* segments of one UDP_SEGMENT send (the kernel's oldest cap) */
#define UDP_GSO_MAX_BYTES 65000u /* payload of one UDP_SEGMENT send, under 64 KB */

/* The UDP transport's own counters (transport_counters), named by udp_counter_name. */
enum {
    UDP_C_GSO_AVAILABLE, /* 1 when sends use UDP_SEGMENT (kernel has it, not turned off) */
    UDP_C_GSO_SENDS, /* datagrams handed to the kernel as one UDP_SEGMENT send */
    UDP_C_GSO_SEGMENTS, /* packets that travelled inside those */
    UDP_C_GSO_FALLBACKS, /* UDP_SEGMENT sends refused (e.g. segment above the MTU): GSO off */
    UDP_C_GRO_AVAILABLE, /* 1 when the socket takes coalesced datagrams (UDP_GRO) */
    UDP_C_GRO_RECEIVES, /* datagrams received holding more than one packet */
    UDP_C_GRO_SEGMENTS, /* packets split out of those */
    UDP_C_COUNT
};
static const char *const udp_counter_names[UDP_C_COUNT] = {
    "gso_available", "gso_sends",    "gso_segments", "gso_fallbacks",
    "gro_available", "gro_receives", "gro_segments"};
#define UDP_GRO_MIN_CAP 65536u /* receive buffers that hold any coalesced datagram */

typedef struct udp_endpoint {
    transport_t base;
    int fd;
    int sleeps; /* the socket blocks in recvmmsg up to its SO_RCVTIMEO */
    uint32_t batch, cap;
    uint8_t *arena; /* batch * cap bytes of receive buffers */
    struct mmsghdr *rx;
    struct iovec *rx_iov;
    struct sockaddr_in *rx_from;
    struct mmsghdr tx[UDP_TX_BATCH];
    struct iovec tx_iov[UDP_TX_BATCH][2];
    int gso; /* group same-destination, same-size packets into UDP_SEGMENT sends */
    struct iovec gso_iov[UDP_TX_BATCH * 2];
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } gso_ctl[UDP_TX_BATCH];
    uint64_t c[UDP_C_COUNT];
    /* UDP_GRO: a received datagram may hold several packets of gso_size bytes (the last
     * shorter); they are handed out one by one, over several receives if need be */
    int gro;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } * rx_ctl;
    uint32_t *rx_seg; /* per received datagram: its packets' size (its length: one) */
    int pend_n, pend_msg; /* datagrams of the last recvmmsg, the next to hand out */
    uint32_t pend_off; /* bytes of pend_msg already handed out */
} udp_endpoint_t;

static struct sockaddr_in *sin_of(transport_addr_t *a)
{
    return (struct sockaddr_in *)(void *)a->u.bytes;
}
static const struct sockaddr_in *csin_of(const transport_addr_t *a)
{
    return (const struct sockaddr_in *)(const void *)a->u.bytes;
}

static void addr_from_sin(transport_addr_t *a, const struct sockaddr_in *s)
{
    memset(a, 0, sizeof(*a));
    a->kind = UDP_ADDR_KIND;
    a->len = sizeof(*s);
    memcpy(a->u.bytes, s, sizeof(*s));
}

static size_t tx_len(const transport_tx_t *p) { return p->head_len + p->body_len; }

static int same_dest(const transport_tx_t *a, const transport_tx_t *b)
{
    const struct sockaddr_in *x = csin_of(&a->to), *y = csin_of(&b->to);
    return x->sin_addr.s_addr == y->sin_addr.s_addr && x->sin_port == y->sin_port;
}

/* pkts[0..n) as UDP_SEGMENT sends: each run of consecutive packets to one destination with
 * one size (at most UDP_GSO_MAX_SEGS, UDP_GSO_MAX_BYTES) is one datagram the kernel cuts
 * into those packets; a run of one is an ordinary datagram. The packets sent (n, or fewer
 * when a send timed out: retransmission recovers them), or -errno; -EINVAL or -EIO when
 * the kernel refused a UDP_SEGMENT send (the caller sends them without). */
static int udp_send_gso(udp_endpoint_t *e, const transport_tx_t *pkts, int n, int timeout_ms)
{
    int done = 0;
    while (done < n) {
        int msgs = 0, used_iov = 0, first = done;
        int seg_of[UDP_TX_BATCH];
        while (done < n && msgs < UDP_TX_BATCH && used_iov + 2 <= UDP_TX_BATCH * 2) {
            const transport_tx_t *p = &pkts[done];
            size_t len = tx_len(p);
            int k = 1;
            while (done + k < n && (uint32_t)k < UDP_GSO_MAX_SEGS &&
                   used_iov + 2 * (k + 1) <= UDP_TX_BATCH * 2 && len > 0 &&
                   (k + 1) * len <= UDP_GSO_MAX_BYTES && tx_len(&pkts[done + k]) == len &&
                   same_dest(&pkts[done + k], p))
                k++;
            struct msghdr *h = &e->tx[msgs].msg_hdr;
            memset(h, 0, sizeof(*h));
            h->msg_iov = &e->gso_iov[used_iov];
            for (int s = 0; s < k; s++) {
                const transport_tx_t *q = &pkts[done + s];
                if (q->head_len)
                    e->gso_iov[used_iov++] =
                        (struct iovec){(void *)(uintptr_t)q->head, q->head_len};
                if (q->body_len)
                    e->gso_iov[used_iov++] =
                        (struct iovec){(void *)(uintptr_t)q->body, q->body_len};
            }
            h->msg_iovlen = (size_t)(&e->gso_iov[used_iov] - h->msg_iov);
            h->msg_name = (void *)(uintptr_t)p->to.u.bytes;
            h->msg_namelen = sizeof(struct sockaddr_in);
            if (k > 1) {
                h->msg_control = e->gso_ctl[msgs].buf;
                h->msg_controllen = sizeof(e->gso_ctl[msgs].buf);
                struct cmsghdr *cm = CMSG_FIRSTHDR(h);
                cm->cmsg_level = SOL_UDP;
                cm->cmsg_type = UDP_SEGMENT;
                cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                uint16_t gso_size = (uint16_t)len;
                memcpy(CMSG_DATA(cm), &gso_size, sizeof(gso_size));
            }
            seg_of[msgs++] = k;
            done += k;
        }
        int sent = udp_send_batch(e->fd, e->tx, msgs, timeout_ms);
        if (sent < 0)
            return first > 0 ? first : sent;
        for (int m = 0; m < sent; m++) {
            if (seg_of[m] > 1) {
                e->c[UDP_C_GSO_SENDS]++;
                e->c[UDP_C_GSO_SEGMENTS] += (uint64_t)seg_of[m];
            }
        }
    }
    return n;
}

static int udp_tp_send(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms)
{
    udp_endpoint_t *e = (udp_endpoint_t *)t;
    if (e->gso) {
        int r = udp_send_gso(e, pkts, n, timeout_ms);
        if (r != -EINVAL && r != -EIO && r != -EMSGSIZE)
            return r;
        /* the kernel refused a UDP_SEGMENT send: send this batch (duplicates of what already
         * went are harmless: the protocols drop repeats) and the rest without */
        e->gso = 0;
        e->c[UDP_C_GSO_AVAILABLE] = 0;
        e->c[UDP_C_GSO_FALLBACKS]++;
        LOG_W("udp: the kernel refused a UDP_SEGMENT send (%s): sending without GSO", strerror(-r));
    }
    int done = 0;
    while (done < n) {
        int m = n - done < UDP_TX_BATCH ? n - done : UDP_TX_BATCH;
        for (int i = 0; i < m; i++) {
            const transport_tx_t *p = &pkts[done + i];
            struct msghdr *h = &e->tx[i].msg_hdr;
            int v = 0;
            if (p->head_len)
                e->tx_iov[i][v++] = (struct iovec){(void *)(uintptr_t)p->head, p->head_len};
            if (p->body_len)
                e->tx_iov[i][v++] = (struct iovec){(void *)(uintptr_t)p->body, p->body_len};
            memset(h, 0, sizeof(*h));
            h->msg_name = (void *)(uintptr_t)p->to.u.bytes;
            h->msg_namelen = sizeof(struct sockaddr_in);
            h->msg_iov = e->tx_iov[i];
            h->msg_iovlen = (size_t)v;
        }
        int sent = udp_send_batch(e->fd, e->tx, m, timeout_ms);
        if (sent < 0)
            return done > 0 ? done : sent;
        done += m; /* what did not fit was dropped: the protocols retransmit */
    }
    return n;
}

/* The packet size of received datagram i: UDP_GRO's gso_size when it coalesced several,
 * else its length. */
static uint32_t gro_segment_size(udp_endpoint_t *e, int i)
{
    struct msghdr *h = &e->rx[i].msg_hdr;
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(h); cm; cm = CMSG_NXTHDR(h, cm)) {
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO &&
            cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int gso_size;
            memcpy(&gso_size, CMSG_DATA(cm), sizeof(gso_size));
            if (gso_size > 0 && (uint32_t)gso_size < e->rx[i].msg_len)
                return (uint32_t)gso_size;
        }
    }
    return e->rx[i].msg_len;
}

/* Hand out up to max packets of the datagrams received last (GRO: split by gso_size). */
static int gro_hand_out(udp_endpoint_t *e, transport_rx_t *out, int max)
{
    int k = 0;
    while (k < max && e->pend_msg < e->pend_n) {
        int i = e->pend_msg;
        uint32_t len = e->rx[i].msg_len, seg = e->rx_seg[i];
        uint32_t take = len - e->pend_off < seg ? len - e->pend_off : seg;
        out[k].data = (const uint8_t *)e->rx_iov[i].iov_base + e->pend_off;
        out[k].len = take;
        addr_from_sin(&out[k].from, &e->rx_from[i]);
        k++;
        e->pend_off += take;
        if (e->pend_off >= len) {
            e->pend_msg++;
            e->pend_off = 0;
        }
    }
    return k;
}

static int udp_tp_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    udp_endpoint_t *e = (udp_endpoint_t *)t;
    if (e->gro && max > 0 && e->pend_msg < e->pend_n)
        return gro_hand_out(e, out, max); /* packets of datagrams already received */
    int want = max < (int)e->batch ? max : (int)e->batch;
    if (want <= 0)
        return 0;
    for (int i = 0; i < want; i++) {
        e->rx[i].msg_hdr.msg_name = &e->rx_from[i];
        e->rx[i].msg_hdr.msg_namelen = sizeof(e->rx_from[i]);
        if (e->gro) {
            e->rx[i].msg_hdr.msg_control = e->rx_ctl[i].buf;
            e->rx[i].msg_hdr.msg_controllen = sizeof(e->rx_ctl[i].buf);
        }
    }
    int n = e->sleeps && timeout_ms > 0 ? udp_recv_batch_blocking(e->fd, e->rx, want)
                                        : udp_recv_batch(e->fd, e->rx, want, timeout_ms);
    if (e->gro && n > 0) {
        for (int i = 0; i < n; i++) {
            e->rx_seg[i] = gro_segment_size(e, i);
            if (e->rx_seg[i] < e->rx[i].msg_len) {
                e->c[UDP_C_GRO_RECEIVES]++;
                e->c[UDP_C_GRO_SEGMENTS] += (e->rx[i].msg_len + e->rx_seg[i] - 1) / e->rx_seg[i];
            }
        }
        e->pend_n = n;
        e->pend_msg = 0;
        e->pend_off = 0;
        return gro_hand_out(e, out, max);
    }
    for (int i = 0; i < n; i++) {
        out[i].data = (const uint8_t *)e->rx_iov[i].iov_base;
        out[i].len = e->rx[i].msg_len;
        addr_from_sin(&out[i].from, &e->rx_from[i]);
    }
    return n;
}

static uint32_t udp_tp_counters(const transport_t *t, uint64_t *acc, uint32_t max)
{
    const udp_endpoint_t *e = (const udp_endpoint_t *)t;
    uint32_t n = max < UDP_C_COUNT ? max : UDP_C_COUNT;
    for (uint32_t i = 0; i < n; i++)
        acc[i] += e->c[i];
    return n;
}

static const char *udp_counter_name(uint32_t i)
{
    return i < UDP_C_COUNT ? udp_counter_names[i] : NULL;
}

static int udp_tp_pollfd(const transport_t *t) { return ((const udp_endpoint_t *)t)->fd; }

static int udp_tp_local_addr(const transport_t *t, transport_addr_t *out)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    if (getsockname(((const udp_endpoint_t *)t)->fd, (struct sockaddr *)&a, &len) != 0)
        return -errno;
    addr_from_sin(out, &a);
    return 0;
}

static int udp_tp_queue_addr(const transport_t *t, const transport_addr_t *q0, uint32_t queue,
                             transport_addr_t *out)
{
    (void)t;
    if (q0->kind != UDP_ADDR_KIND || queue > 65535u - ntohs(csin_of(q0)->sin_port))
        return -EINVAL;
    *out = *q0;
    sin_of(out)->sin_port = htons((uint16_t)(ntohs(csin_of(q0)->sin_port) + queue));
    return 0;
}

static void udp_tp_close(transport_t *t)
{
    udp_endpoint_t *e = (udp_endpoint_t *)t;
    if (e->fd >= 0)
        close(e->fd);
    free(e->arena);
    free(e->rx);
    free(e->rx_iov);
    free(e->rx_from);
    free(e->rx_ctl);
    free(e->rx_seg);
    free(e);
}

static const transport_ops_t udp_ops = {
    .name = "udp",
    .send = udp_tp_send,
    .recv = udp_tp_recv,
    .pollfd = udp_tp_pollfd,
    .local_addr = udp_tp_local_addr,
    .queue_addr = udp_tp_queue_addr,
    .fault_counts = NULL,
    .counters = udp_tp_counters,
    .close = udp_tp_close,
};

/* Whether an endpoint sends with GSO (where the kernel has it) and takes coalesced datagrams:
 * when its peers take GSO (a switch's JOINED gso=1; a switch's own peers), or as
 * INAGG_UDP_GSO=0|1 says. */
static int udp_want_gso(const transport_config_t *cfg)
{
    const char *gso_env = env_get(ENV_UDP_GSO);
    return gso_env && strcmp(gso_env, "1") == 0   ? 1
           : gso_env && strcmp(gso_env, "0") == 0 ? 0
                                                  : cfg->peer_takes_gso;
}

static int udp_tp_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen)
{
    udp_endpoint_t *e = calloc(1, sizeof(*e));
    if (!e)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->base.ops = &udp_ops;
    e->fd = -1;
    e->batch = cfg->batch ? cfg->batch : 64;
    e->cap = cfg->max_packet ? cfg->max_packet : 65536;
    int want_gso = udp_want_gso(cfg);
    if (want_gso && e->cap < UDP_GRO_MIN_CAP)
        e->cap = UDP_GRO_MIN_CAP; /* a peer that takes GSO also sends it: take it whole (GRO) */
    e->arena = malloc((size_t)e->batch * e->cap);
    e->rx = calloc(e->batch, sizeof(*e->rx));
    e->rx_iov = calloc(e->batch, sizeof(*e->rx_iov));
    e->rx_from = calloc(e->batch, sizeof(*e->rx_from));
    if (!e->arena || !e->rx || !e->rx_iov || !e->rx_from) {
        udp_tp_close(&e->base);
        return set_err(err, errlen, -ENOMEM, "out of memory for %u receive buffers of %u bytes",
                       e->batch, e->cap);
    }
    for (uint32_t i = 0; i < e->batch; i++) {
        e->rx_iov[i] = (struct iovec){e->arena + (size_t)i * e->cap, e->cap};
        e->rx[i].msg_hdr.msg_iov = &e->rx_iov[i];
        e->rx[i].msg_hdr.msg_iovlen = 1;
    }
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    if (cfg->bind) {
        int rc = netaddr_parse(cfg->bind, 0, &a);
        if (rc != 0 || (cfg->queue > 0 && ntohs(a.sin_port) == 0) ||
            cfg->queue > 65535u - ntohs(a.sin_port)) {
            udp_tp_close(&e->base);
            return set_err(err, errlen, -EINVAL,
                           "bad address '%s' for queue %u (expected HOST:PORT)", cfg->bind,
                           cfg->queue);
        }
        a.sin_port = htons((uint16_t)(ntohs(a.sin_port) + cfg->queue));
    }
    if (cfg->udp.mcast_group) {
        if (!cfg->udp.mcast_peer || cfg->udp.mcast_peer->kind != UDP_ADDR_KIND) {
            udp_tp_close(&e->base);
            return set_err(err, errlen, -EINVAL,
                           "a multicast endpoint needs the switch's UDP address");
        }
        e->fd = mcast_open_receiver(cfg->udp.mcast_group, cfg->udp.mcast_port,
                                    csin_of(cfg->udp.mcast_peer), err, errlen);
        if (e->fd < 0) {
            int rc = e->fd;
            udp_tp_close(&e->base);
            return rc;
        }
        if (cfg->buffer_bytes > 0)
            set_buffer(e->fd, SO_RCVBUFFORCE, SO_RCVBUF, cfg->buffer_bytes);
    } else {
        e->fd = udp_open(&a, cfg->buffer_bytes);
    }
    if (e->fd >= 0 && cfg->udp.mcast_send) {
        int rc = mcast_set_sender(e->fd, a.sin_addr);
        if (rc != 0) {
            close(e->fd);
            e->fd = rc;
        }
    }
    if (e->fd < 0) {
        int rc = e->fd;
        char text[64];
        netaddr_format(&a, text, sizeof(text));
        udp_tp_close(&e->base);
        return set_err(err, errlen, rc, "cannot bind UDP %s: %s", text, strerror(-rc));
    }
    if (cfg->sleep_ms > 0)
        e->sleeps = udp_set_receive_timeout(e->fd, cfg->sleep_ms) == 0;
    /* GSO where the peers take it (a switch that says gso=1 in JOINED; a switch's own
     * peers) and the kernel has UDP_SEGMENT (Linux 4.18), or as INAGG_UDP_GSO=0|1 says:
     * detected once per endpoint, said in the counters (gso_available) */
    int seg = 0;
    socklen_t seg_len = sizeof(seg);
    e->gso = want_gso && getsockopt(e->fd, SOL_UDP, UDP_SEGMENT, &seg, &seg_len) == 0;
    e->c[UDP_C_GSO_AVAILABLE] = (uint64_t)e->gso;
    /* GRO where every receive buffer holds a coalesced datagram (64 KB: a switch's, and a
     * worker's whose switch takes GSO, because such a switch sends it too: a rank's results
     * of a pass as one UDP_SEGMENT run, or through the L2 fabric as one super-frame). Taken
     * whole, a run is one receive and one wake-up instead of one per packet; it only changes
     * anything when senders use GSO */
    int one = 1;
    if (e->cap >= UDP_GRO_MIN_CAP) {
        e->rx_ctl = calloc(e->batch, sizeof(*e->rx_ctl));
        e->rx_seg = calloc(e->batch, sizeof(*e->rx_seg));
        e->gro =
            e->rx_ctl && e->rx_seg && setsockopt(e->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    }
    e->c[UDP_C_GRO_AVAILABLE] = (uint64_t)e->gro;
    *out = &e->base;
    return 0;
}

static int udp_tp_parse_addr(const char *text, transport_addr_t *out)
{
    struct sockaddr_in a;
    int rc = netaddr_parse(text, 0, &a);
    if (rc != 0)
        return rc;
    addr_from_sin(out, &a);
    return 0;
}

static void udp_tp_addr_format(const transport_addr_t *a, char *buf, size_t len)
{
    netaddr_format(csin_of(a), buf, len);
}

static uint16_t udp_tp_addr_port(const transport_addr_t *a) { return ntohs(csin_of(a)->sin_port); }

static void udp_tp_addr_set_port(transport_addr_t *a, uint16_t port)
{
    sin_of(a)->sin_port = htons(port);
}

const transport_kind_t transport_kind_udp = {
    .name = "udp",
    .addr_kind = UDP_ADDR_KIND,
    .open = udp_tp_open,
    .parse_addr = udp_tp_parse_addr,
    .addr_format = udp_tp_addr_format,
    .addr_port = udp_tp_addr_port,
    .addr_set_port = udp_tp_addr_set_port,
    .counter_name = udp_counter_name,
};
