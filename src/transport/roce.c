/*
 * roce.c - the RoCE v1 transport (see roce.h): a packet becomes an RDMA Write message of
 * 1024-byte frames on its QP's PSN sequence; received frames are checked (roce_frame.c) and
 * reassembled per flow (roce_flow.c). Worker endpoints own a packet socket; switch endpoints
 * are linked to the L2 fabric's frame queues and also carry its UDP frames.
 */
#include "transport/roce.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "base/netaddr.h"
#include "base/util.h"
#include "transport/afpacket.h"
#include "transport/ethframe.h"
#include "transport/pktsock.h"
#include "transport/roce_flow.h"
#include "transport/roce_frame.h"
#include "transport/transport.h"

#define ROCE_FLOWS 256u       /* flows one switch endpoint tracks (a power of two) */
#define ROCE_DEFAULT_MAX 65536u
#define ROCE_TX_BATCH 64u     /* worker frames per sendmmsg */
#define ROCE_TX_SLOT 1280u    /* room for one frame */
_Static_assert(ROCE_TX_SLOT >= ROCE_MAX_FRAME, "a frame fits a worker tx slot");
#define ROCE_SPIN_NS 50000ull /* wait this long for the next frame of a message */

roce_stats_t roce_worker_stats;

typedef struct flow_ent {
    uint8_t used, tx_set;
    uint8_t mac[6];
    uint16_t port;
    uint32_t qp;
    uint32_t tx_psn; /* the PSN of our next frame to this flow */
    roce_rx_flow_t rx;
} flow_ent_t;

typedef struct roce_endpoint {
    transport_t base;
    afp_link_t *link; /* linked (switch), else NULL (worker) */
    roce_stats_t *st;
    uint32_t queue;
    uint32_t held;
    uint64_t last_rx_ns;
    pktsock_t ps;     /* worker */
    uint8_t mac[6];
    uint32_t ip;      /* linked: the switch's IP; worker: the switch's (the peer's) */
    uint16_t port;    /* linked: UDP port of this queue; worker: the switch's queue 0 port */
    uint8_t peer_mac[6];
    int partial;      /* worker: the last frame taken left a message unfinished */
    uint32_t qp_base; /* worker: QP of switch queue q is qp_base + q */
    uint32_t tx_psn[ROCE_MAX_QUEUES];  /* worker: next PSN per queue */
    roce_rx_flow_t wrx[ROCE_MAX_QUEUES]; /* worker: the switch's flow on each QP */
    flow_ent_t *flows; /* linked: ROCE_FLOWS entries */
    uint32_t cap;      /* largest message */
    uint32_t batch;
    uint8_t *arena;    /* batch completed messages, cap bytes each */
    uint8_t *bufs;     /* reassembly buffers: ROCE_MAX_QUEUES (worker) or ROCE_FLOWS (linked) */
    uint8_t *txq;      /* worker: frames waiting for one sendmmsg */
    uint32_t txlen[ROCE_TX_BATCH];
    uint32_t txn;
} roce_endpoint_t;

static inline void stat(roce_endpoint_t *e, int i)
{
    atomic_fetch_add_explicit(&e->st->c[i], 1, memory_order_relaxed);
}

static roce_addr_t *ra(transport_addr_t *a) { return (roce_addr_t *)(void *)a->u.bytes; }
static const roce_addr_t *cra(const transport_addr_t *a)
{
    return (const roce_addr_t *)(const void *)a->u.bytes;
}

static void make_addr(transport_addr_t *a, const uint8_t *mac, uint16_t ifport, uint32_t ip,
                      uint32_t qp, uint16_t port, uint16_t queue)
{
    memset(a, 0, sizeof(*a));
    a->kind = ROCE_ADDR_KIND;
    a->len = sizeof(roce_addr_t);
    roce_addr_t *x = ra(a);
    if (mac)
        memcpy(x->mac, mac, 6);
    x->ifport = ifport;
    x->ip = ip;
    x->qp = qp;
    x->port = port;
    x->queue = queue;
}

/* A link-local GID from a MAC (modified EUI-64), as RoCE v1 NICs make their default GID. */
static void gid_of_mac(uint8_t gid[16], const uint8_t *mac)
{
    memset(gid, 0, 16);
    gid[0] = 0xfe;
    gid[1] = 0x80;
    gid[8] = mac[0] ^ 2;
    gid[9] = mac[1];
    gid[10] = mac[2];
    gid[11] = 0xff;
    gid[12] = 0xfe;
    gid[13] = mac[3];
    gid[14] = mac[4];
    gid[15] = mac[5];
}

/* Bytes [off, off+n) of the message head ++ body into two spans. */
static void span(const transport_tx_t *p, uint32_t off, uint32_t n, const void **a,
                 uint32_t *alen, const void **b, uint32_t *blen)
{
    *a = *b = NULL;
    *alen = *blen = 0;
    if (off < p->head_len) {
        *a = (const uint8_t *)p->head + off;
        *alen = p->head_len - off < n ? p->head_len - off : n;
        n -= *alen;
        off = p->head_len;
    }
    if (n) {
        *b = (const uint8_t *)p->body + (off - p->head_len);
        *blen = n;
    }
}

/* Frame i of a message of len bytes in nf frames into buf; its length. */
static uint32_t build_frame(uint8_t *buf, const transport_tx_t *p, uint32_t len, uint32_t nf,
                            uint32_t i, const uint8_t *src, const uint8_t *dst, uint32_t qp,
                            uint32_t psn, uint32_t queue)
{
    roce_hdr_t h;
    memset(&h, 0, sizeof(h));
    memcpy(h.dst_mac, dst, 6);
    memcpy(h.src_mac, src, 6);
    gid_of_mac(h.sgid, src);
    gid_of_mac(h.dgid, dst);
    h.hop_limit = 1;
    h.pkey = ROCE_DEFAULT_PKEY;
    h.opcode = nf == 1 ? ROCE_WRITE_ONLY
               : i == 0 ? ROCE_WRITE_FIRST
               : i + 1 == nf ? ROCE_WRITE_LAST
                             : ROCE_WRITE_MIDDLE;
    h.qp = qp;
    h.psn = psn;
    h.ack_req = i + 1 == nf; /* as an RC requester asks at the end of a message */
    h.rkey = queue;
    h.dma_len = len;
    uint32_t off = i * ROCE_PMTU, n = len - off < ROCE_PMTU ? len - off : ROCE_PMTU;
    const void *a, *b;
    uint32_t alen, blen;
    span(p, off, n, &a, &alen, &b, &blen);
    return roce_write_frame(buf, &h, a, alen, b, blen);
}

static uint32_t frames_of(uint32_t len) { return len <= ROCE_PMTU ? 1 : (len + ROCE_PMTU - 1) / ROCE_PMTU; }

static flow_ent_t *flow_find(roce_endpoint_t *e, uint16_t port, const uint8_t *mac,
                             uint32_t qp, int create)
{
    uint32_t hsh = (qp * 0x9e3779b1u) ^ ((uint32_t)port * 0x85ebca6bu) ^
                   ((uint32_t)mac[5] << 8 | mac[4]);
    for (uint32_t k = 0; k < ROCE_FLOWS; k++) {
        uint32_t i = (hsh + k) & (ROCE_FLOWS - 1);
        flow_ent_t *f = &e->flows[i];
        if (!f->used) {
            if (!create)
                return NULL;
            memset(f, 0, sizeof(*f));
            f->used = 1;
            f->port = port;
            memcpy(f->mac, mac, 6);
            f->qp = qp;
            f->rx.buf = e->bufs + (size_t)i * e->cap;
            f->rx.cap = e->cap;
            return f;
        }
        if (f->qp == qp && f->port == port && memcmp(f->mac, mac, 6) == 0)
            return f;
    }
    return NULL;
}

/* Send one UDP packet of a linked endpoint, as the afpacket transport frames it. */
static int send_udp_linked(roce_endpoint_t *e, const transport_tx_t *p)
{
    const afp_addr_t *to = (const afp_addr_t *)(const void *)p->to.u.bytes;
    uint32_t plen = p->head_len + p->body_len;
    if (ETHF_UDP_HDR_LEN + plen > FRAMEQ_DATA) {
        atomic_fetch_add(&e->link->tx_too_big, 1);
        return 0;
    }
    frameq_t *q = &e->link->tx[e->queue];
    frameq_slot_t *s = frameq_reserve(q);
    if (!s) {
        atomic_fetch_add(&e->link->tx_full, 1);
        return 0;
    }
    ethf_write_udp(s->data, e->mac, to->mac, e->ip, to->ip, e->port, to->port, plen);
    memcpy(s->data + ETHF_UDP_HDR_LEN, p->head, p->head_len);
    if (p->body_len)
        memcpy(s->data + ETHF_UDP_HDR_LEN + p->head_len, p->body, p->body_len);
    s->len = ETHF_UDP_HDR_LEN + plen;
    s->port = to->ifport;
    s->t_ns = e->last_rx_ns ? e->last_rx_ns : util_now_ns();
    frameq_publish(q);
    return 1;
}

static int send_roce_linked(roce_endpoint_t *e, const transport_tx_t *p)
{
    const roce_addr_t *to = cra(&p->to);
    uint32_t len = p->head_len + p->body_len, nf = frames_of(len);
    frameq_t *q = &e->link->tx[e->queue];
    if (len > e->cap || q->cap - frameq_ready(q) < nf) {
        stat(e, RS_TX_DROPPED); /* all of a message or none of it: the protocols resend */
        return 0;
    }
    flow_ent_t *f = flow_find(e, to->ifport, to->mac, to->qp, 0);
    if (!f) {
        stat(e, RS_TX_DROPPED);
        return 0;
    }
    if (!f->tx_set) {
        f->tx_psn = f->rx.first_psn;
        f->tx_set = 1;
    }
    uint64_t t = e->last_rx_ns ? e->last_rx_ns : util_now_ns();
    for (uint32_t i = 0; i < nf; i++) {
        frameq_slot_t *s = frameq_reserve(q); /* room was checked above */
        s->len = build_frame(s->data, p, len, nf, i, e->mac, to->mac, to->qp, f->tx_psn,
                             to->queue);
        s->port = to->ifport;
        s->t_ns = t;
        frameq_publish(q);
        f->tx_psn = roce_psn_add(f->tx_psn, 1);
        stat(e, RS_FRAMES_OUT);
    }
    stat(e, RS_MESSAGES_OUT);
    return 1;
}

/* The worker's queued frames in one sendmmsg (a system call per batch, not per frame).
 * Frames the device refused are dropped: their PSNs are spent, so the receiver sees a gap
 * and abandons that message; the protocols resend. 0 or -errno. */
static int flush_worker(roce_endpoint_t *e)
{
    static const struct virtio_net_hdr none;
    struct iovec iov[ROCE_TX_BATCH][2];
    struct mmsghdr mm[ROCE_TX_BATCH];
    for (uint32_t i = 0; i < e->txn; i++) {
        iov[i][0] = (struct iovec){(void *)(uintptr_t)&none, sizeof(none)};
        iov[i][1] = (struct iovec){e->txq + (size_t)i * ROCE_TX_SLOT, e->txlen[i]};
        memset(&mm[i], 0, sizeof(mm[i]));
        mm[i].msg_hdr.msg_iov = iov[i];
        mm[i].msg_hdr.msg_iovlen = 2;
    }
    uint32_t done = 0;
    for (int tries = 0; done < e->txn && tries < 4; tries++) {
        int r = sendmmsg(e->ps.fd, mm + done, e->txn - done, MSG_DONTWAIT);
        if (r > 0) {
            done += (uint32_t)r;
            tries = -1; /* progress: keep going */
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno != EAGAIN && errno != ENOBUFS && errno != EMSGSIZE) {
            int rc = -errno;
            e->txn = 0;
            return rc;
        }
        break;
    }
    for (uint32_t i = 0; i < done; i++)
        stat(e, RS_FRAMES_OUT);
    if (done < e->txn)
        stat(e, RS_TX_DROPPED);
    e->txn = 0;
    return 0;
}

static int send_roce_worker(roce_endpoint_t *e, const transport_tx_t *p)
{
    const roce_addr_t *to = cra(&p->to);
    uint32_t len = p->head_len + p->body_len, nf = frames_of(len);
    if (to->queue >= ROCE_MAX_QUEUES || len > e->cap)
        return -EINVAL;
    uint32_t *psn = &e->tx_psn[to->queue];
    for (uint32_t i = 0; i < nf; i++) {
        if (e->txn == ROCE_TX_BATCH) {
            int rc = flush_worker(e);
            if (rc < 0)
                return rc;
        }
        e->txlen[e->txn] = build_frame(e->txq + (size_t)e->txn * ROCE_TX_SLOT, p, len, nf, i,
                                       e->mac, to->mac, to->qp, *psn, to->queue);
        e->txn++;
        *psn = roce_psn_add(*psn, 1);
    }
    stat(e, RS_MESSAGES_OUT);
    return 1;
}

static int roce_send(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    (void)timeout_ms;
    int queued = 0;
    for (int i = 0; i < n; i++) {
        const transport_tx_t *p = &pkts[i];
        int rc;
        if (e->link)
            rc = p->to.kind == AFP_ADDR_KIND ? send_udp_linked(e, p)
                 : p->to.kind == ROCE_ADDR_KIND ? send_roce_linked(e, p)
                                                : 0;
        else
            rc = p->to.kind == ROCE_ADDR_KIND ? send_roce_worker(e, p) : -EINVAL;
        if (rc < 0)
            return queued > 0 ? queued : rc;
        queued += rc;
    }
    if (!e->link && e->txn) {
        int rc = flush_worker(e);
        if (rc < 0 && queued == 0)
            return rc;
    }
    if (e->link && queued > 0) {
        uint64_t one = 1;
        ssize_t r = write(e->link->tx_efd, &one, sizeof(one));
        (void)r;
    }
    return queued;
}

/* One received RoCE frame on flow fl: counted; 1 when it completed a message, which is then
 * copied to arena slot `slot`. */
static int take_frame(roce_endpoint_t *e, roce_rx_flow_t *fl, const roce_frame_t *f,
                      uint32_t slot, uint32_t *len)
{
    uint64_t ab = fl->abandoned;
    enum roce_rx_verdict v = roce_rx_frame(fl, f);
    if (fl->abandoned != ab)
        stat(e, RS_ABANDONED);
    static const int of_verdict[ROCE_RX_VERDICT_COUNT] = {
        [ROCE_RX_DUP] = RS_PSN_DUPLICATE, [ROCE_RX_GAP] = RS_PSN_GAP,
        [ROCE_RX_WINDOW] = RS_PSN_WINDOW, [ROCE_RX_NO_FIRST] = RS_NO_FIRST,
        [ROCE_RX_TOO_BIG] = RS_TOO_BIG,   [ROCE_RX_LENGTH] = RS_LENGTH};
    if (v != ROCE_RX_MORE && v != ROCE_RX_DONE) {
        stat(e, of_verdict[v]);
        return 0;
    }
    if (v == ROCE_RX_MORE)
        return 0;
    memcpy(e->arena + (size_t)slot * e->cap, fl->buf, fl->want);
    *len = fl->want;
    stat(e, RS_MESSAGES_IN);
    return 1;
}

static void count_reason(roce_endpoint_t *e, enum roce_reason r)
{
    static const int of_reason[ROCE_REASON_COUNT] = {
        [ROCE_TRUNCATED] = RS_TRUNCATED, [ROCE_BAD_GRH] = RS_BAD_GRH,
        [ROCE_BAD_LENGTH] = RS_BAD_LENGTH, [ROCE_BAD_BTH] = RS_BAD_BTH,
        [ROCE_NOT_WRITE] = RS_NOT_WRITE, [ROCE_BAD_PAYLOAD] = RS_BAD_PAYLOAD,
        [ROCE_BAD_ICRC] = RS_BAD_ICRC};
    if (r > ROCE_NOT_ROCE && r < ROCE_REASON_COUNT)
        stat(e, of_reason[r]);
}

static int recv_linked(roce_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms)
{
    frameq_t *q = &e->link->rx[e->queue];
    if (e->held) {
        frameq_release(q, e->held);
        e->held = 0;
    }
    uint32_t n = frameq_ready(q);
    if (n == 0 && timeout_ms > 0) {
        uint64_t until = util_now_ns() + ROCE_SPIN_NS;
        while ((n = frameq_ready(q)) == 0 && util_now_ns() < until)
            ;
        if (n == 0 && frameq_wait(q, timeout_ms))
            n = frameq_ready(q);
    }
    uint32_t lim = (uint32_t)max < e->batch ? (uint32_t)max : e->batch;
    int got = 0;
    uint32_t i = 0;
    for (; i < n && (uint32_t)got < lim; i++) {
        frameq_slot_t *s = frameq_at(q, i);
        if (s->t_ns > e->last_rx_ns)
            e->last_rx_ns = s->t_ns;
        if (s->len >= ETHF_ETH_LEN && s->data[12] == 0x08 && s->data[13] == 0x00) {
            ethf_udp_t u;
            if (ethf_parse(s->data, s->len, &u) != ETHF_UDP)
                continue;
            out[got].data = u.payload;
            out[got].len = u.payload_len;
            transport_addr_t *a = &out[got].from;
            memset(a, 0, sizeof(*a));
            a->kind = AFP_ADDR_KIND;
            a->len = sizeof(afp_addr_t);
            afp_addr_t *x = (afp_addr_t *)(void *)a->u.bytes;
            memcpy(x->mac, u.src_mac, 6);
            x->ifport = s->port;
            x->ip = u.src_ip;
            x->port = u.src_port;
            got++;
            continue;
        }
        stat(e, RS_FRAMES_IN);
        roce_frame_t f;
        enum roce_reason r = roce_parse(s->data, s->len, 1, &f);
        if (r != ROCE_OK) {
            count_reason(e, r);
            continue;
        }
        flow_ent_t *fl = flow_find(e, s->port, f.h.src_mac, f.h.qp, 1);
        if (!fl) {
            stat(e, RS_FLOW_TABLE_FULL);
            continue;
        }
        uint32_t len;
        if (take_frame(e, &fl->rx, &f, (uint32_t)got, &len)) {
            out[got].data = e->arena + (size_t)got * e->cap;
            out[got].len = len;
            make_addr(&out[got].from, f.h.src_mac, s->port, 0, f.h.qp,
                      (uint16_t)(e->link->port0 + e->queue), (uint16_t)e->queue);
            got++;
        }
    }
    e->held = i; /* UDP payloads point into the slots until the next receive */
    return got;
}

static int recv_worker(roce_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms)
{
    int want = max < (int)e->batch ? max : (int)e->batch, got = 0;
    uint64_t spin_until = 0;
    /* bounded: a pass consumes a frame, or spins until spin_until, or sleeps once */
    for (uint32_t pass = 0; got < want && pass < 4 * e->ps.nframes + 100000; pass++) {
        const uint8_t *fr;
        uint32_t len;
        const struct virtio_net_hdr *vh;
        if (!pktsock_peek(&e->ps, &fr, &len, &vh)) {
            if (got == 0 && e->partial && spin_until == 0)
                spin_until = util_now_ns() + ROCE_SPIN_NS;
            if (got == 0 && util_now_ns() < spin_until) {
                /* the rest of a message follows within microseconds: look again rather than
                 * sleep, which costs a wake-up per frame */
                __builtin_ia32_pause();
                continue;
            }
            if (got > 0 || timeout_ms <= 0)
                break;
            struct pollfd p = {.fd = e->ps.fd, .events = POLLIN};
            int pr = poll(&p, 1, timeout_ms);
            timeout_ms = 0;
            if (pr < 0 && errno != EINTR)
                return -errno;
            continue;
        }
        /* only RoCE frames to this MAC and one of this endpoint's QPs are ours (the socket
         * also sees the other ranks' frames on this host) */
        if (len >= ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN && fr[12] == 0x89 &&
            fr[13] == 0x15 && memcmp(fr, e->mac, 6) == 0) {
            uint32_t qp = (uint32_t)fr[59] << 16 | (uint32_t)fr[60] << 8 | fr[61];
            if (qp - e->qp_base < ROCE_MAX_QUEUES) {
                stat(e, RS_FRAMES_IN);
                roce_frame_t f;
                enum roce_reason r = roce_parse(fr, len, 1, &f);
                uint32_t mlen;
                e->partial = r == ROCE_OK && !roce_op_is_last(f.h.opcode);
                if (r != ROCE_OK) {
                    count_reason(e, r);
                } else if (take_frame(e, &e->wrx[qp - e->qp_base], &f, (uint32_t)got, &mlen)) {
                    e->partial = 0;
                    out[got].data = e->arena + (size_t)got * e->cap;
                    out[got].len = mlen;
                    uint16_t qn = (uint16_t)(qp - e->qp_base);
                    make_addr(&out[got].from, f.h.src_mac, 0, e->ip, qp,
                              (uint16_t)(e->port + qn), qn);
                    got++;
                }
            }
        }
        pktsock_done(&e->ps);
    }
    return got;
}

static int roce_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    if (max <= 0)
        return 0;
    return e->link ? recv_linked(e, out, max, timeout_ms) : recv_worker(e, out, max, timeout_ms);
}

static int roce_pollfd(const transport_t *t)
{
    const roce_endpoint_t *e = (const roce_endpoint_t *)t;
    return e->link ? e->link->rx[e->queue].efd : e->ps.fd;
}

static int roce_local_addr(const transport_t *t, transport_addr_t *out)
{
    const roce_endpoint_t *e = (const roce_endpoint_t *)t;
    if (e->link) { /* the switch's queue, as the afpacket transport names it */
        memset(out, 0, sizeof(*out));
        out->kind = AFP_ADDR_KIND;
        out->len = sizeof(afp_addr_t);
        afp_addr_t *x = (afp_addr_t *)(void *)out->u.bytes;
        memcpy(x->mac, e->mac, 6);
        x->ip = e->ip;
        x->port = e->port;
        return 0;
    }
    make_addr(out, e->mac, 0, 0, e->qp_base, 0, 0);
    return 0;
}

/* The IP and port of an "IP:PORT" address of any kind this transport meets. */
static int ip_port_of(const transport_addr_t *a, uint32_t *ip, uint16_t *port)
{
    if (a->kind == ROCE_ADDR_KIND) {
        *ip = cra(a)->ip;
        *port = cra(a)->port;
        return 0;
    }
    if (a->kind == AFP_ADDR_KIND) {
        const afp_addr_t *x = (const afp_addr_t *)(const void *)a->u.bytes;
        *ip = x->ip;
        *port = x->port;
        return 0;
    }
    if (a->len >= sizeof(struct sockaddr_in)) { /* udp: a struct sockaddr_in */
        struct sockaddr_in sin;
        memcpy(&sin, a->u.bytes, sizeof(sin));
        if (sin.sin_family == AF_INET) {
            *ip = sin.sin_addr.s_addr;
            *port = ntohs(sin.sin_port);
            return 0;
        }
    }
    return -EINVAL;
}

static int roce_queue_addr(const transport_t *t, const transport_addr_t *q0, uint32_t queue,
                           transport_addr_t *out)
{
    const roce_endpoint_t *e = (const roce_endpoint_t *)t;
    uint32_t ip;
    uint16_t port;
    if (queue >= ROCE_MAX_QUEUES || ip_port_of(q0, &ip, &port) != 0)
        return -EINVAL;
    make_addr(out, e->peer_mac, 0, ip, e->qp_base + queue, (uint16_t)(port + queue),
              (uint16_t)queue);
    return 0;
}

static void roce_close(transport_t *t)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    if (e->link && e->held)
        frameq_release(&e->link->rx[e->queue], e->held);
    if (!e->link)
        pktsock_close(&e->ps);
    free(e->flows);
    free(e->txq);
    free(e->bufs);
    free(e->arena);
    free(e);
}

static const transport_ops_t roce_ops = {
    .name = "roce",
    .send = roce_send,
    .recv = roce_recv,
    .pollfd = roce_pollfd,
    .local_addr = roce_local_addr,
    .queue_addr = roce_queue_addr,
    .fault_counts = NULL,
    .close = roce_close,
};

int roce_neighbour(uint32_t ip, char ifname[16], uint8_t mac[6])
{
    FILE *fp = fopen("/proc/net/arp", "r");
    if (!fp)
        return -EHOSTUNREACH;
    char line[256];
    int rc = -EHOSTUNREACH;
    /* "IP address  HW type  Flags  HW address  Mask  Device"; bounded by the file's lines */
    for (int k = 0; k < 65536 && fgets(line, sizeof(line), fp); k++) {
        char ipt[64], hw[64], dev[64], mask[64];
        unsigned type, flags, m[6];
        if (sscanf(line, "%63s 0x%x 0x%x %63s %63s %63s", ipt, &type, &flags, hw, mask, dev) !=
            6)
            continue;
        struct in_addr a;
        if (inet_pton(AF_INET, ipt, &a) != 1 || a.s_addr != ip || !(flags & 0x2) ||
            strlen(dev) >= 16 ||
            sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) != 6)
            continue;
        for (int i = 0; i < 6; i++)
            mac[i] = (uint8_t)m[i];
        memcpy(ifname, dev, strlen(dev) + 1); /* shorter than 16: checked above */
        rc = 0;
        break;
    }
    fclose(fp);
    return rc;
}

static uint32_t random24(void)
{
    uint32_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) {
        uint64_t s = util_now_ns() ^ (uint64_t)getpid() << 32;
        v = (uint32_t)util_splitmix64(&s);
    }
    return v & ROCE_PSN_MASK;
}

static int open_worker(roce_endpoint_t *e, const transport_config_t *cfg, char *err,
                       size_t errlen)
{
    uint32_t ip;
    uint16_t port;
    if (!cfg->peer || ip_port_of(cfg->peer, &ip, &port) != 0) {
        set_err(err, errlen, "roce: a worker endpoint needs the switch's address");
        return -EINVAL;
    }
    char ifname[16];
    char ipt[INET_ADDRSTRLEN];
    struct in_addr in = {.s_addr = ip};
    inet_ntop(AF_INET, &in, ipt, sizeof(ipt));
    if (roce_neighbour(ip, ifname, e->peer_mac) != 0) {
        set_err(err, errlen,
                "roce: the kernel's neighbour table has no MAC for the switch %s (RoCE v1 "
                "needs the switch on this host's Ethernet segment)", ipt);
        return -EHOSTUNREACH;
    }
    if (cfg->iface && *cfg->iface)
        snprintf(ifname, sizeof(ifname), "%s", cfg->iface);
    int rc = pktsock_open_frames(&e->ps, ifname, 8u << 20, ROCE_MAX_FRAME, err, errlen);
    if (rc != 0)
        return rc;
    memcpy(e->mac, e->ps.mac, 6);
    e->ip = ip;
    e->port = port;
    /* QPs 0 and 1 are the InfiniBand management QPs: start at 16 */
    e->qp_base = (random24() & ~(ROCE_MAX_QUEUES - 1)) | ROCE_MAX_QUEUES;
    if (e->qp_base + ROCE_MAX_QUEUES > ROCE_QP_MASK)
        e->qp_base -= ROCE_MAX_QUEUES;
    for (uint32_t q = 0; q < ROCE_MAX_QUEUES; q++) {
        e->tx_psn[q] = cfg->psn0_set ? cfg->psn0 & ROCE_PSN_MASK : random24();
        e->wrx[q].buf = e->bufs + (size_t)q * e->cap;
        e->wrx[q].cap = e->cap;
    }
    e->st = &roce_worker_stats;
    return 0;
}

static int roce_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen)
{
    afp_link_t *link = cfg->link;
    if (link && cfg->queue >= link->nqueues) {
        set_err(err, errlen, "roce: queue %u beyond the fabric's %u", cfg->queue,
                link->nqueues);
        return -EINVAL;
    }
    roce_endpoint_t *e = calloc(1, sizeof(*e));
    if (!e) {
        set_err(err, errlen, "out of memory");
        return -ENOMEM;
    }
    e->base.ops = &roce_ops;
    e->queue = cfg->queue;
    e->batch = cfg->batch ? cfg->batch : 64;
    e->cap = cfg->max_packet ? cfg->max_packet : ROCE_DEFAULT_MAX;
    e->ps.fd = -1;
    uint32_t nbufs = link ? ROCE_FLOWS : ROCE_MAX_QUEUES;
    e->arena = malloc((size_t)e->batch * e->cap);
    e->bufs = malloc((size_t)nbufs * e->cap);
    e->flows = link ? calloc(ROCE_FLOWS, sizeof(flow_ent_t)) : NULL;
    e->txq = link ? NULL : malloc((size_t)ROCE_TX_BATCH * ROCE_TX_SLOT);
    int rc = (!e->arena || !e->bufs || (link && !e->flows) || (!link && !e->txq)) ? -ENOMEM : 0;
    if (rc == 0 && link) {
        e->link = link;
        e->st = &link->roce;
        memcpy(e->mac, link->mac, 6);
        e->ip = link->ip;
        e->port = (uint16_t)(link->port0 + cfg->queue);
    } else if (rc == 0) {
        rc = open_worker(e, cfg, err, errlen);
    } else {
        set_err(err, errlen, "out of memory");
    }
    if (rc != 0) {
        e->link = NULL;
        roce_close(&e->base);
        return rc;
    }
    *out = &e->base;
    return 0;
}

static int roce_parse_addr(const char *text, transport_addr_t *out)
{
    struct sockaddr_in sin;
    int rc = netaddr_parse(text, 0, &sin);
    if (rc != 0)
        return rc;
    make_addr(out, NULL, 0, sin.sin_addr.s_addr, 0, ntohs(sin.sin_port), 0);
    return 0;
}

static void roce_addr_format(const transport_addr_t *a, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    struct in_addr in = {.s_addr = cra(a)->ip};
    inet_ntop(AF_INET, &in, ip, sizeof(ip));
    const uint8_t *m = cra(a)->mac;
    snprintf(buf, len, "%s:%u (qp 0x%06x, %02x:%02x:%02x:%02x:%02x:%02x)", ip, cra(a)->port,
             cra(a)->qp, m[0], m[1], m[2], m[3], m[4], m[5]);
}

static uint16_t roce_addr_port(const transport_addr_t *a) { return cra(a)->port; }
static void roce_addr_set_port(transport_addr_t *a, uint16_t port) { ra(a)->port = port; }

const transport_kind_t transport_kind_roce = {
    .name = "roce",
    .addr_kind = ROCE_ADDR_KIND,
    .open = roce_open,
    .parse_addr = roce_parse_addr,
    .addr_format = roce_addr_format,
    .addr_port = roce_addr_port,
    .addr_set_port = roce_addr_set_port,
};

const char *roce_stat_name(int i)
{
    static const char *const names[RS_COUNT] = {
        "frames_in", "frames_out", "messages_in", "messages_out", "truncated", "bad_grh",
        "bad_length", "bad_bth", "not_write", "bad_payload", "bad_icrc", "psn_duplicate",
        "psn_gap", "psn_window", "no_first", "too_big", "length", "abandoned",
        "flow_table_full", "tx_dropped"};
    return i >= 0 && i < RS_COUNT ? names[i] : "unknown";
}

void roce_stats_write_text(const roce_stats_t *s, const char *prefix, FILE *out)
{
    fprintf(out, "%s", prefix);
    for (int i = 0; i < RS_COUNT; i++) {
        uint64_t v = atomic_load_explicit(&s->c[i], memory_order_relaxed);
        if (i < RS_TRUNCATED || v)
            fprintf(out, " %s=%llu", roce_stat_name(i), (unsigned long long)v);
    }
    fprintf(out, "\n");
}
