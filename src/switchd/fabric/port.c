/*
 * port.c - the aggregation port's endpoints (see port.h): UDP datagrams and RoCE v1 Write
 * messages between the fabric's frame queues and one dataplane queue of the switch. RoCE
 * flows (fabric port, sender's MAC, QP) each get their own PSN check and reassembly, their
 * own answer PSNs, and a row of the result buffer that answers go-back-N repeats.
 */
#include "switchd/fabric/port.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "lib/netio/roce_flow.h"
#include "lib/netio/roce_frame.h"
#include "lib/netio/roce_msgkey.h"
#include "lib/transport/afpacket.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/roce_resbuf.h"

#define PORT_FLOWS 256u /* RoCE flows one endpoint tracks (a power of two) */
#define PORT_DEFAULT_MAX 65536u
#define PORT_SPIN_NS 50000ull /* wait this long for the next frame of a message */
#define PORT_ANSWERED 256u

typedef struct flow_ent {
    uint8_t used, tx_set;
    uint8_t mac[6];
    uint16_t port;
    uint32_t qp;
    uint32_t tx_psn; /* the PSN of our next frame to this flow */
    uint32_t ordinal; /* flows in the order they were seen: the result buffer's row */
    uint64_t last_rx; /* the endpoint's frame count when this flow last sent one */
    roce_rx_flow_t rx;
    roce_msg_key_t done_key[ROCE_RX_DONE_SLOTS]; /* the key of each message rx remembers */
    roce_msg_key_t answered[PORT_ANSWERED]; /* results sent (by key hash): a repeat whose
                                                    result is not in the buffer was evicted */
} flow_ent_t;

typedef struct port_endpoint {
    transport_t base;
    fabric_link_t *link;
    uint32_t queue;
    uint32_t held; /* rx slots handed out by the last receive */
    uint64_t last_rx_ns; /* when the newest frame of the last receive entered the fabric; the
                            results sent next are its consequence (latency) */
    uint8_t mac[6]; /* the switch's */
    uint32_t ip;
    uint16_t port; /* the UDP port of this queue */
    flow_ent_t *flows; /* PORT_FLOWS entries */
    uint32_t nflows;
    uint64_t rx_frames; /* RoCE frames taken, the clock of the flows' last_rx */
    uint32_t cap; /* largest message */
    uint32_t batch;
    uint8_t *arena; /* batch spare buffers, cap bytes each */
    uint8_t *bufs; /* reassembly buffers, one per flow */
    uint8_t **spare; /* batch buffers: spare[k] holds the k-th message a receive completed;
                        flows and spares trade buffers (roce_take_frame), so that the arena
                        and bufs are one pool of buffers, each with one owner */
    roce_resbuf_t resbuf; /* the results sent, to answer repeats from */
} port_endpoint_t;

static inline void stat(port_endpoint_t *e, int i) { roce_stat(&e->link->roce, i); }

void fabric_link_kick(fabric_link_t *l)
{
    if (atomic_load_explicit(&l->tx_no_wake, memory_order_relaxed))
        return;
    uint64_t one = 1;
    ssize_t r = write(l->tx_efd, &one, sizeof(one));
    (void)r;
}

static uint32_t answered_slot(const roce_msg_key_t *k)
{
    return (uint32_t)(((k->slot_round ^ k->job) * 0x9e3779b97f4a7c15ull) >> 40) % PORT_ANSWERED;
}

/* Entry i made the flow (port, mac, qp), its state new. */
static flow_ent_t *flow_init(port_endpoint_t *e, uint32_t i, uint16_t port, const uint8_t *mac,
                             uint32_t qp)
{
    flow_ent_t *f = &e->flows[i];
    uint8_t *buf = f->rx.buf; /* the entry's buffer stays with it (its owner) */
    memset(f, 0, sizeof(*f));
    f->rx.buf = buf;
    f->used = 1;
    f->port = port;
    memcpy(f->mac, mac, 6);
    f->qp = qp;
    f->ordinal = e->nflows++; /* a new row in the result buffer: nothing of the old flow's */
    f->rx.cap = e->cap;
    return f;
}

/* The flow (port, mac, qp), created if absent when `create`. Entries are never emptied (a
 * job's flows are not told to go when it ends), so a table full of them gives a new flow the
 * entry of the flow heard from least recently, in place (every lookup still probes past it). */
static flow_ent_t *flow_find(port_endpoint_t *e, uint16_t port, const uint8_t *mac, uint32_t qp,
                             int create)
{
    uint32_t hsh =
        (qp * 0x9e3779b1u) ^ ((uint32_t)port * 0x85ebca6bu) ^ ((uint32_t)mac[5] << 8 | mac[4]);
    for (uint32_t k = 0; k < PORT_FLOWS; k++) {
        uint32_t i = (hsh + k) & (PORT_FLOWS - 1);
        flow_ent_t *f = &e->flows[i];
        if (!f->used)
            return create ? flow_init(e, i, port, mac, qp) : NULL;
        if (f->qp == qp && f->port == port && memcmp(f->mac, mac, 6) == 0)
            return f;
    }
    if (!create)
        return NULL;
    uint32_t lru = 0;
    for (uint32_t i = 1; i < PORT_FLOWS; i++)
        if (e->flows[i].last_rx < e->flows[lru].last_rx)
            lru = i;
    stat(e, RS_FLOWS_RECYCLED);
    return flow_init(e, lru, port, mac, qp);
}

/* Send one UDP packet, as the afpacket transport frames it. */
static int send_udp(port_endpoint_t *e, const transport_tx_t *p)
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
        atomic_fetch_add(&e->link->tx_full, 1); /* the protocols retransmit */
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

static int send_roce(port_endpoint_t *e, const transport_tx_t *p)
{
    const roce_addr_t *to = (const roce_addr_t *)(const void *)p->to.u.bytes;
    flow_ent_t *f = flow_find(e, to->ifport, to->mac, to->qp, 0);
    if (!f) {
        stat(e, RS_TX_DROPPED);
        return 0;
    }
    /* results go back in the path MTU the worker's contributions came in */
    uint32_t mtu = f->rx.path_mtu ? f->rx.path_mtu : ROCE_MTU_DEFAULT;
    uint32_t len = p->head_len + p->body_len, nf = roce_frames_for(len, mtu);
    frameq_t *q = &e->link->tx[e->queue];
    if (len > e->cap || q->cap - frameq_ready(q) < nf) {
        stat(e, RS_TX_DROPPED); /* all of a message or none of it: the protocols resend */
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
        /* a kept frame is built once, in the result buffer, and leaves from there */
        roce_resbuf_ent_t *kept = roce_resbuf_claim(&e->resbuf, f->ordinal, &key, seq, i, nf,
                                                    frameq_position(q) + 1, frameq_released(q));
        if (!kept)
            seq = 0; /* the rest of the message is not kept either */
        uint8_t *buf = kept ? kept->frame : s->data;
        s->len = roce_build_frame(buf, p, len, mtu, nf, i, e->mac, to->mac, to->qp, f->tx_psn,
                                  to->queue);
        if (kept) {
            kept->len = (uint16_t)s->len;
            s->ext = buf;
        }
        s->port = to->ifport;
        s->t_ns = t;
        frameq_publish(q);
        f->tx_psn = roce_psn_add(f->tx_psn, 1);
        stat(e, RS_FRAMES_OUT);
    }
    stat(e, RS_MESSAGES_OUT);
    return 1;
}

static int port_send(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms)
{
    port_endpoint_t *e = (port_endpoint_t *)t;
    (void)timeout_ms;
    int queued = 0;
    for (int i = 0; i < n; i++) {
        const transport_tx_t *p = &pkts[i];
        queued += p->to.kind == AFP_ADDR_KIND    ? send_udp(e, p)
                  : p->to.kind == ROCE_ADDR_KIND ? send_roce(e, p)
                                                 : 0;
    }
    if (queued > 0)
        fabric_link_kick(e->link);
    return queued;
}

/* A repeat on flow fe (a contribution's First again at its old PSN): answered from the
 * result buffer on the flow's next PSNs when its result is kept whole; else counted. */
static void answer_repeat(port_endpoint_t *e, flow_ent_t *fe)
{
    roce_msg_key_t rk = fe->done_key[fe->rx.repeat_psn % ROCE_RX_DONE_SLOTS];
    if (rk.type != WIRE_CONTRIB)
        return; /* an acknowledgement (p4sgd) again: nothing to answer */
    if (!fe->tx_set) {
        stat(e, RS_REPEAT_OPEN); /* nothing was sent back on this flow yet */
        return;
    }
    rk.type = WIRE_RESULT;
    const roce_resbuf_ent_t *fr[PORT_DEFAULT_MAX / ROCE_MTU_MIN + 2];
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
        memcpy(s->data, fr[k]->frame, fr[k]->len); /* restamped: a copy of its own */
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
    fabric_link_kick(e->link);
}

/* One RoCE frame from fabric port `ifport`: 1 when it completed a message, in out. */
static int take_roce(port_endpoint_t *e, const frameq_slot_t *s, transport_rx_t *out, uint32_t slot)
{
    stat(e, RS_FRAMES_IN);
    roce_frame_t f;
    enum roce_reason r = roce_parse(s->data, s->len, 1, &f);
    if (r != ROCE_OK) {
        roce_count_reason(&e->link->roce, r);
        return 0;
    }
    flow_ent_t *fl = flow_find(e, s->port, f.h.src_mac, f.h.qp, 1);
    if (!fl) {
        stat(e, RS_FLOW_TABLE_FULL);
        return 0;
    }
    fl->last_rx = ++e->rx_frames;
    uint32_t len;
    enum roce_rx_verdict v;
    if (roce_take_frame(&e->link->roce, &fl->rx, &f, &e->spare[slot], &len, &v)) {
        out->data = e->spare[slot];
        out->len = len;
        roce_msg_key_t *k = &fl->done_key[fl->rx.msg_psn % ROCE_RX_DONE_SLOTS];
        if (roce_msg_key(out->data, len, k) != 0)
            memset(k, 0, sizeof(*k));
        roce_make_addr(&out->from, f.h.src_mac, s->port, 0, f.h.qp,
                       (uint16_t)(e->link->port0 + e->queue), (uint16_t)e->queue);
        return 1;
    }
    if (v == ROCE_RX_REPEAT)
        answer_repeat(e, fl);
    return 0;
}

static int port_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    port_endpoint_t *e = (port_endpoint_t *)t;
    if (max <= 0)
        return 0;
    frameq_t *q = &e->link->rx[e->queue];
    if (e->held) {
        frameq_release(q, e->held);
        e->held = 0;
    }
    uint32_t n = frameq_ready(q);
    if (n == 0 && timeout_ms > 0) {
        /* the frames of one allreduce arrive microseconds apart: look a little longer before
         * sleeping, which costs a wake-up (tens of microseconds on a busy machine) */
        uint64_t until = util_now_ns() + PORT_SPIN_NS;
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
                continue; /* the fabric queues only parsed UDP frames */
            out[got].data = u.payload;
            out[got].len = u.payload_len;
            afp_addr_make(&out[got].from, u.src_mac, s->port, u.src_ip, u.src_port);
            got++;
            continue;
        }
        got += take_roce(e, s, &out[got], (uint32_t)got);
    }
    e->held = i; /* UDP payloads point into the slots until the next receive */
    return got;
}

static int port_pollfd(const transport_t *t)
{
    const port_endpoint_t *e = (const port_endpoint_t *)t;
    return e->link->rx[e->queue].efd;
}

/* The switch's queue, as the afpacket transport names it. */
static int port_local_addr(const transport_t *t, transport_addr_t *out)
{
    const port_endpoint_t *e = (const port_endpoint_t *)t;
    afp_addr_make(out, e->mac, 0, e->ip, e->port);
    return 0;
}

static int port_queue_addr(const transport_t *t, const transport_addr_t *q0, uint32_t queue,
                           transport_addr_t *out)
{
    (void)t;
    return afp_addr_queue(q0, queue, out);
}

static void port_close(transport_t *t)
{
    port_endpoint_t *e = (port_endpoint_t *)t;
    if (e->held)
        frameq_release(&e->link->rx[e->queue], e->held);
    free(e->flows);
    roce_resbuf_free(&e->resbuf);
    free(e->bufs);
    free(e->spare);
    free(e->arena);
    free(e);
}

static const transport_ops_t port_ops = {
    .name = "fabric-port",
    .send = port_send,
    .recv = port_recv,
    .pollfd = port_pollfd,
    .local_addr = port_local_addr,
    .queue_addr = port_queue_addr,
    .fault_counts = NULL,
    .close = port_close,
};

int fabric_port_open(const fabric_port_config_t *pc, const transport_config_t *cfg,
                     transport_t **out, char *err, size_t errlen)
{
    fabric_link_t *link = pc->link;
    if (!link || cfg->queue >= link->nqueues)
        return set_err(err, errlen, -EINVAL, "fabric port: queue %u beyond the fabric's %u",
                       cfg->queue, link ? link->nqueues : 0);
    port_endpoint_t *e = calloc(1, sizeof(*e));
    if (!e)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->base.ops = &port_ops;
    e->link = link;
    e->queue = cfg->queue;
    e->batch = cfg->batch ? cfg->batch : 64;
    e->cap = cfg->max_packet ? cfg->max_packet : PORT_DEFAULT_MAX;
    memcpy(e->mac, link->mac, 6);
    e->ip = link->ip;
    e->port = (uint16_t)(link->port0 + cfg->queue);
    e->arena = malloc((size_t)e->batch * e->cap);
    e->bufs = malloc((size_t)PORT_FLOWS * e->cap);
    e->flows = calloc(PORT_FLOWS, sizeof(flow_ent_t));
    e->spare = calloc(e->batch, sizeof(*e->spare));
    int rc = 0;
    if (!e->arena || !e->bufs || !e->flows || !e->spare) {
        rc = set_err(err, errlen, -ENOMEM, "out of memory");
    } else {
        for (uint32_t k = 0; k < e->batch; k++)
            e->spare[k] = e->arena + (size_t)k * e->cap;
        for (uint32_t i = 0; i < PORT_FLOWS; i++)
            e->flows[i].rx.buf = e->bufs + (size_t)i * e->cap;
        uint32_t rows = pc->resbuf_rows, depth = pc->resbuf_depth;
        if (rows == 0 && depth == 0)
            rows = ROCE_RESBUF_ROWS, depth = ROCE_RESBUF_DEPTH;
        rc = roce_resbuf_init(&e->resbuf, rows, depth);
        if (rc != 0)
            rc = set_err(err, errlen, rc, "roce: a result buffer of %u x %u frames: %s", rows,
                         depth, rc == -EINVAL ? "too large" : "out of memory");
    }
    if (rc != 0) {
        port_close(&e->base);
        return rc;
    }
    *out = &e->base;
    return 0;
}

static int opener_open(const transport_opener_t *self, const transport_config_t *cfg,
                       transport_t **out, char *err, size_t errlen)
{
    const fabric_port_config_t *pc =
        (const fabric_port_config_t *)(const void *)((const char *)self -
                                                     offsetof(fabric_port_config_t, opener));
    return fabric_port_open(pc, cfg, out, err, errlen);
}

void fabric_port_config_init(fabric_port_config_t *pc, fabric_link_t *link, uint32_t resbuf_rows,
                             uint32_t resbuf_depth)
{
    *pc = (fabric_port_config_t){
        .opener = {.name = "fabric-port", .open = opener_open},
        .link = link,
        .resbuf_rows = resbuf_rows,
        .resbuf_depth = resbuf_depth,
    };
}
