/*
 * roce.c - the RoCE v1 transport (see roce.h): a packet becomes an RDMA Write message of
 * path-MTU-sized frames on its QP's PSN sequence; received frames are checked (roce_frame.c) and
 * reassembled per flow (roce_flow.c). This file holds what both ends share (framing, keys,
 * taking a frame, addresses, counters) and the transport's ops table and opening; the
 * worker's endpoint is roce_worker.c, the switch's end the L2 fabric's aggregation port
 * (fabric/port.c).
 */
#include "lib/transport/roce_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "lib/transport/afpacket.h"
#include "lib/transport/transport.h"
#include "lib/wire/wire.h"

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
static void span(const transport_tx_t *p, uint32_t off, uint32_t n, const void **a, uint32_t *alen,
                 const void **b, uint32_t *blen)
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

/* Frame i of a message of len bytes in nf frames of mtu bytes into buf; its length. */
uint32_t roce_build_frame(uint8_t *buf, const transport_tx_t *p, uint32_t len, uint32_t mtu,
                          uint32_t nf, uint32_t i, const uint8_t *src, const uint8_t *dst,
                          uint32_t qp, uint32_t psn, uint32_t queue)
{
    roce_hdr_t h;
    memset(&h, 0, sizeof(h));
    memcpy(h.dst_mac, dst, 6);
    memcpy(h.src_mac, src, 6);
    gid_of_mac(h.sgid, src);
    gid_of_mac(h.dgid, dst);
    h.hop_limit = 1;
    h.pkey = ROCE_DEFAULT_PKEY;
    h.opcode = nf == 1       ? ROCE_WRITE_ONLY
               : i == 0      ? ROCE_WRITE_FIRST
               : i + 1 == nf ? ROCE_WRITE_LAST
                             : ROCE_WRITE_MIDDLE;
    h.qp = qp;
    h.psn = psn;
    h.ack_req = i + 1 == nf; /* as an RC requester asks at the end of a message */
    h.rkey = queue;
    h.dma_len = len;
    uint32_t off = i * mtu, n = len - off < mtu ? len - off : mtu;
    const void *a, *b;
    uint32_t alen, blen;
    span(p, off, n, &a, &alen, &b, &blen);
    return roce_write_frame(buf, &h, a, alen, b, blen);
}

/* The key of packet p of len bytes (its header may span head and body). 0 or -EINVAL. */
int roce_tx_key(const transport_tx_t *p, uint32_t len, roce_msg_key_t *k)
{
    if (len < WIRE_HEADER_SIZE)
        return -EINVAL;
    uint8_t h[WIRE_HEADER_SIZE];
    const void *a, *b;
    uint32_t alen, blen;
    span(p, 0, WIRE_HEADER_SIZE, &a, &alen, &b, &blen);
    memcpy(h, a, alen);
    if (blen)
        memcpy(h + alen, b, blen);
    return roce_msg_key(h, len, k);
}

static int roce_send(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    (void)timeout_ms;
    int queued = 0;
    for (int i = 0; i < n; i++) {
        const transport_tx_t *p = &pkts[i];
        int rc = p->to.kind == ROCE_ADDR_KIND ? roce_worker_send(e, p) : -EINVAL;
        if (rc < 0)
            return queued > 0 ? queued : rc;
        queued += rc;
    }
    if (e->txn) {
        int rc = roce_worker_flush(e);
        if (rc < 0 && queued == 0)
            return rc;
    }
    return queued;
}

int roce_take_frame(roce_stats_t *st, roce_rx_flow_t *fl, const roce_frame_t *f, uint8_t **spare,
                    uint32_t *len, enum roce_rx_verdict *vout)
{
    uint64_t ab = fl->abandoned;
    enum roce_rx_verdict v = roce_rx_frame(fl, f);
    *vout = v;
    if (fl->abandoned != ab)
        roce_stat(st, RS_ABANDONED);
    static const int of_verdict[ROCE_RX_VERDICT_COUNT] = {
        [ROCE_RX_DUP] = RS_PSN_DUPLICATE, [ROCE_RX_GAP] = RS_PSN_GAP,
        [ROCE_RX_WINDOW] = RS_PSN_WINDOW, [ROCE_RX_NO_FIRST] = RS_NO_FIRST,
        [ROCE_RX_TOO_BIG] = RS_TOO_BIG,   [ROCE_RX_LENGTH] = RS_LENGTH,
        [ROCE_RX_REPEAT] = RS_REPEATS};
    if (v != ROCE_RX_MORE && v != ROCE_RX_DONE) {
        roce_stat(st, of_verdict[v]);
        return 0;
    }
    if (v == ROCE_RX_MORE)
        return 0;
    uint8_t *done = fl->buf;
    fl->buf = *spare;
    *spare = done;
    *len = fl->want;
    roce_stat(st, RS_MESSAGES_IN);
    if (fl->resent)
        roce_stat(st, RS_RESENT_TAKEN);
    return 1;
}

void roce_count_reason(roce_stats_t *st, enum roce_reason r)
{
    static const int of_reason[ROCE_REASON_COUNT] = {
        [ROCE_TRUNCATED] = RS_TRUNCATED,   [ROCE_BAD_GRH] = RS_BAD_GRH,
        [ROCE_BAD_LENGTH] = RS_BAD_LENGTH, [ROCE_BAD_BTH] = RS_BAD_BTH,
        [ROCE_NOT_WRITE] = RS_NOT_WRITE,   [ROCE_BAD_PAYLOAD] = RS_BAD_PAYLOAD,
        [ROCE_BAD_ICRC] = RS_BAD_ICRC};
    if (r > ROCE_NOT_ROCE && r < ROCE_REASON_COUNT)
        roce_stat(st, of_reason[r]);
}

static int roce_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    if (max <= 0)
        return 0;
    return roce_worker_recv(e, out, max, timeout_ms);
}

static int roce_pollfd(const transport_t *t)
{
    const roce_endpoint_t *e = (const roce_endpoint_t *)t;
    return e->ps.fd;
}

static int roce_local_addr(const transport_t *t, transport_addr_t *out)
{
    const roce_endpoint_t *e = (const roce_endpoint_t *)t;
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

static uint32_t roce_counters(const transport_t *t, uint64_t *acc, uint32_t max)
{
    const roce_endpoint_t *e = (const roce_endpoint_t *)t;
    uint32_t n = RS_COUNT < max ? RS_COUNT : max;
    for (uint32_t i = 0; i < n; i++)
        acc[i] += atomic_load_explicit(&e->stats.c[i], memory_order_relaxed);
    return n;
}

static const char *roce_counter_name(uint32_t i)
{
    return i < RS_COUNT ? roce_stat_name((int)i) : NULL;
}

static void roce_close(transport_t *t)
{
    roce_endpoint_t *e = (roce_endpoint_t *)t;
    pktsock_close(&e->ps);
    free(e->replay);
    free(e->txq);
    free(e->bufs);
    free(e->spare);
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
    .counters = roce_counters,
    .close = roce_close,
};

static int roce_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen)
{
    roce_endpoint_t *e = calloc(1, sizeof(*e));
    if (!e)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->base.ops = &roce_ops;
    e->batch = cfg->batch ? cfg->batch : 64;
    e->cap = cfg->max_packet ? cfg->max_packet : ROCE_DEFAULT_MAX;
    e->ps.fd = -1;
    e->arena = malloc((size_t)e->batch * e->cap);
    e->bufs = malloc((size_t)ROCE_MAX_QUEUES * e->cap);
    e->spare = calloc(e->batch, sizeof(*e->spare));
    e->txq = malloc((size_t)ROCE_TX_BATCH * ROCE_TX_SLOT);
    int rc = (!e->arena || !e->bufs || !e->spare || !e->txq) ? -ENOMEM : 0;
    for (uint32_t k = 0; rc == 0 && k < e->batch; k++)
        e->spare[k] = e->arena + (size_t)k * e->cap;
    if (rc == 0)
        rc = roce_worker_open(e, cfg, err, errlen);
    else
        rc = set_err(err, errlen, rc, "out of memory");
    if (rc != 0) {
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
    .counter_name = roce_counter_name,
};

const char *roce_stat_name(int i)
{
    static const char *const names[RS_COUNT] = {
        "frames_in", "frames_out",      "messages_in",    "messages_out",      "truncated",
        "bad_grh",   "bad_length",      "bad_bth",        "not_write",         "bad_payload",
        "bad_icrc",  "psn_duplicate",   "psn_gap",        "psn_window",        "no_first",
        "too_big",   "length",          "abandoned",      "flow_table_full",   "tx_dropped",
        "repeats",   "resbuf_answered", "resbuf_evicted", "repeat_round_open", "resent_taken",
        "replayed",  "flows_recycled"};
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
