/*
 * roce.c - the RoCE v1 transport (see roce.h): a packet becomes an RDMA Write message of
 * 1024-byte frames on its QP's PSN sequence; received frames are checked (roce_frame.c) and
 * reassembled per flow (roce_flow.c). This file holds what both ends share (framing, keys,
 * taking a frame, addresses, the ops table, opening) and the switch's endpoint, linked to
 * the L2 fabric's frame queues (it also carries the fabric's UDP frames and answers repeats
 * from its result buffer, roce_resbuf.h); the worker's endpoint is roce_worker.c.
 */
#include "transport/roce_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#include "transport/roce_resbuf.h"
#include "transport/transport.h"
#include "wire/wire.h"

roce_stats_t roce_worker_stats;

void roce_make_addr(transport_addr_t *a, const uint8_t *mac, uint16_t ifport, uint32_t ip,
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
uint32_t roce_build_frame(uint8_t *buf, const transport_tx_t *p, uint32_t len, uint32_t nf,
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

uint32_t roce_frames_of(uint32_t len)
{
    return len <= ROCE_PMTU ? 1 : (len + ROCE_PMTU - 1) / ROCE_PMTU;
}

/* The key of packet p of len bytes (its header may span head and body). 0 or -1. */
int roce_tx_key(const transport_tx_t *p, uint32_t len, roce_msg_key_t *k)
{
    if (len < WIRE_HEADER_SIZE)
        return -1;
    uint8_t h[WIRE_HEADER_SIZE];
    const void *a, *b;
    uint32_t alen, blen;
    span(p, 0, WIRE_HEADER_SIZE, &a, &alen, &b, &blen);
    memcpy(h, a, alen);
    if (blen)
        memcpy(h + alen, b, blen);
    return roce_msg_key(h, len, k);
}

static uint32_t answered_slot(const roce_msg_key_t *k)
{
    return (uint32_t)(((k->slot_round ^ k->job) * 0x9e3779b97f4a7c15ull) >> 40) % ROCE_ANSWERED;
}

/* Entry i made the flow (port, mac, qp), its state new. */
static flow_ent_t *flow_init(roce_endpoint_t *e, uint32_t i, uint16_t port, const uint8_t *mac,
                             uint32_t qp)
{
    flow_ent_t *f = &e->flows[i];
    memset(f, 0, sizeof(*f));
    f->used = 1;
    f->port = port;
    memcpy(f->mac, mac, 6);
    f->qp = qp;
    f->ordinal = e->nflows++; /* a new row in the result buffer: nothing of the old flow's */
    f->rx.buf = e->bufs + (size_t)i * e->cap;
    f->rx.cap = e->cap;
    return f;
}

/* The flow (port, mac, qp), created if absent when `create`. Entries are never emptied (a
 * job's flows are not told to go when it ends), so a table full of them gives a new flow the
 * entry of the flow heard from least recently, in place (every lookup still probes past it). */
static flow_ent_t *flow_find(roce_endpoint_t *e, uint16_t port, const uint8_t *mac,
                             uint32_t qp, int create)
{
    uint32_t hsh = (qp * 0x9e3779b1u) ^ ((uint32_t)port * 0x85ebca6bu) ^
                   ((uint32_t)mac[5] << 8 | mac[4]);
    for (uint32_t k = 0; k < ROCE_FLOWS; k++) {
        uint32_t i = (hsh + k) & (ROCE_FLOWS - 1);
        flow_ent_t *f = &e->flows[i];
        if (!f->used)
            return create ? flow_init(e, i, port, mac, qp) : NULL;
        if (f->qp == qp && f->port == port && memcmp(f->mac, mac, 6) == 0)
            return f;
    }
    if (!create)
        return NULL;
    uint32_t lru = 0;
    for (uint32_t i = 1; i < ROCE_FLOWS; i++)
        if (e->flows[i].last_rx < e->flows[lru].last_rx)
            lru = i;
    stat(e, RS_FLOWS_RECYCLED);
    return flow_init(e, lru, port, mac, qp);
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
    uint32_t len = p->head_len + p->body_len, nf = roce_frames_of(len);
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
    roce_msg_key_t key;
    uint32_t seq = 0;
    if (e->resbuf.rows && roce_tx_key(p, len, &key) == 0 && key.type == WIRE_RESULT) {
        seq = roce_resbuf_begin(&e->resbuf, nf); /* kept, to answer repeats from */
        f->answered[answered_slot(&key)] = key;
    }
    uint64_t t = e->last_rx_ns ? e->last_rx_ns : util_now_ns();
    for (uint32_t i = 0; i < nf; i++) {
        frameq_slot_t *s = frameq_reserve(q); /* room was checked above */
        s->len = roce_build_frame(s->data, p, len, nf, i, e->mac, to->mac, to->qp, f->tx_psn,
                             to->queue);
        if (seq)
            roce_resbuf_put(&e->resbuf, f->ordinal, &key, seq, i, nf, s->data, s->len);
        s->port = to->ifport;
        s->t_ns = t;
        frameq_publish(q);
        f->tx_psn = roce_psn_add(f->tx_psn, 1);
        stat(e, RS_FRAMES_OUT);
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
            rc = p->to.kind == ROCE_ADDR_KIND ? roce_worker_send(e, p) : -EINVAL;
        if (rc < 0)
            return queued > 0 ? queued : rc;
        queued += rc;
    }
    if (!e->link && e->txn) {
        int rc = roce_worker_flush(e);
        if (rc < 0 && queued == 0)
            return rc;
    }
    if (e->link && queued > 0)
        afp_link_kick(e->link);
    return queued;
}

/* One received RoCE frame on flow fl: counted, its verdict in *vout; 1 when it completed a
 * message, which is then copied to arena slot `slot`. */
int roce_take_frame(roce_endpoint_t *e, roce_rx_flow_t *fl, const roce_frame_t *f,
                    uint32_t slot, uint32_t *len, enum roce_rx_verdict *vout)
{
    uint64_t ab = fl->abandoned;
    enum roce_rx_verdict v = roce_rx_frame(fl, f);
    *vout = v;
    if (fl->abandoned != ab)
        stat(e, RS_ABANDONED);
    static const int of_verdict[ROCE_RX_VERDICT_COUNT] = {
        [ROCE_RX_DUP] = RS_PSN_DUPLICATE, [ROCE_RX_GAP] = RS_PSN_GAP,
        [ROCE_RX_WINDOW] = RS_PSN_WINDOW, [ROCE_RX_NO_FIRST] = RS_NO_FIRST,
        [ROCE_RX_TOO_BIG] = RS_TOO_BIG,   [ROCE_RX_LENGTH] = RS_LENGTH,
        [ROCE_RX_REPEAT] = RS_REPEATS};
    if (v != ROCE_RX_MORE && v != ROCE_RX_DONE) {
        stat(e, of_verdict[v]);
        return 0;
    }
    if (v == ROCE_RX_MORE)
        return 0;
    memcpy(e->arena + (size_t)slot * e->cap, fl->buf, fl->want);
    *len = fl->want;
    stat(e, RS_MESSAGES_IN);
    if (fl->resent)
        stat(e, RS_RESENT_TAKEN);
    return 1;
}

/* A repeat on flow fe (a contribution's First again at its old PSN): answered from the
 * result buffer on the flow's next PSNs when its result is kept whole; else counted. */
static void answer_repeat(roce_endpoint_t *e, flow_ent_t *fe)
{
    roce_msg_key_t rk = fe->done_key[fe->rx.repeat_psn % ROCE_RX_DONE_SLOTS];
    if (rk.type != WIRE_CONTRIB)
        return; /* an acknowledgement (p4sgd) again: nothing to answer */
    if (!fe->tx_set) {
        stat(e, RS_REPEAT_OPEN); /* nothing was sent back on this flow yet */
        return;
    }
    rk.type = WIRE_RESULT;
    const roce_resbuf_ent_t *fr[ROCE_DEFAULT_MAX / ROCE_PMTU + 2];
    uint32_t n = roce_resbuf_find(&e->resbuf, fe->ordinal, &rk, fr, sizeof(fr) / sizeof(fr[0]));
    if (n == 0) {
        stat(e, roce_key_eq(&fe->answered[answered_slot(&rk)], &rk) ? RS_RESBUF_EVICTED
                                                                     : RS_REPEAT_OPEN);
        return;
    }
    frameq_t *q = &e->link->tx[e->queue];
    if (q->cap - frameq_ready(q) < n) {
        stat(e, RS_TX_DROPPED);
        return;
    }
    uint64_t t = e->last_rx_ns ? e->last_rx_ns : util_now_ns();
    for (uint32_t k = 0; k < n; k++) {
        frameq_slot_t *s = frameq_reserve(q); /* room was checked above */
        memcpy(s->data, fr[k]->frame, fr[k]->len);
        s->len = fr[k]->len;
        roce_restamp_psn(s->data, s->len, fe->tx_psn);
        fe->tx_psn = roce_psn_add(fe->tx_psn, 1);
        s->port = fe->port;
        s->t_ns = t;
        frameq_publish(q);
        stat(e, RS_FRAMES_OUT);
    }
    stat(e, RS_MESSAGES_OUT);
    stat(e, RS_RESBUF_ANSWERED);
    afp_link_kick(e->link);
}

void roce_count_reason(roce_endpoint_t *e, enum roce_reason r)
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
            roce_count_reason(e, r);
            continue;
        }
        flow_ent_t *fl = flow_find(e, s->port, f.h.src_mac, f.h.qp, 1);
        if (!fl) {
            stat(e, RS_FLOW_TABLE_FULL);
            continue;
        }
        fl->last_rx = ++e->rx_frames;
        uint32_t len;
        enum roce_rx_verdict v;
        if (roce_take_frame(e, &fl->rx, &f, (uint32_t)got, &len, &v)) {
            out[got].data = e->arena + (size_t)got * e->cap;
            out[got].len = len;
            roce_msg_key_t *k = &fl->done_key[fl->rx.msg_psn % ROCE_RX_DONE_SLOTS];
            if (roce_msg_key(out[got].data, len, k) != 0)
                memset(k, 0, sizeof(*k));
            roce_make_addr(&out[got].from, f.h.src_mac, s->port, 0, f.h.qp,
                      (uint16_t)(e->link->port0 + e->queue), (uint16_t)e->queue);
            got++;
        } else if (v == ROCE_RX_REPEAT) {
            answer_repeat(e, fl);
        }
    }
    e->held = i; /* UDP payloads point into the slots until the next receive */
    return got;
}

static int roce_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    if (max <= 0)
        return 0;
    return e->link ? recv_linked(e, out, max, timeout_ms)
                   : roce_worker_recv(e, out, max, timeout_ms);
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
    roce_make_addr(out, e->mac, 0, 0, e->qp_base, 0, 0);
    return 0;
}

/* The IP and port of an "IP:PORT" address of any kind this transport meets. */
int roce_ip_port_of(const transport_addr_t *a, uint32_t *ip, uint16_t *port)
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
    if (queue >= ROCE_MAX_QUEUES || roce_ip_port_of(q0, &ip, &port) != 0)
        return -EINVAL;
    roce_make_addr(out, e->peer_mac, 0, ip, e->qp_base + queue, (uint16_t)(port + queue),
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
    free(e->replay);
    roce_resbuf_free(&e->resbuf);
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
        uint32_t rows = cfg->roce_resbuf_rows, depth = cfg->roce_resbuf_depth;
        if (rows == 0 && depth == 0)
            rows = ROCE_RESBUF_ROWS, depth = ROCE_RESBUF_DEPTH;
        rc = roce_resbuf_init(&e->resbuf, rows, depth);
        if (rc != 0)
            set_err(err, errlen, "roce: a result buffer of %u x %u frames: %s", rows, depth,
                    rc == -EINVAL ? "too large" : "out of memory");
    } else if (rc == 0) {
        rc = roce_worker_open(e, cfg, err, errlen);
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
    roce_make_addr(out, NULL, 0, sin.sin_addr.s_addr, 0, ntohs(sin.sin_port), 0);
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
        "flow_table_full", "tx_dropped", "repeats", "resbuf_answered", "resbuf_evicted",
        "repeat_round_open", "resent_taken", "replayed", "flows_recycled"};
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
