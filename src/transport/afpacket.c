/*
 * afpacket.c - the AF_PACKET transport (see afpacket.h): standalone on its own packet socket,
 * or linked to the L2 fabric through SPSC frame queues. One framing (ethframe.h) for both.
 */
#include "transport/afpacket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "base/netaddr.h"
#include "netio/ethframe.h"
#include "netio/pktsock.h"
#include "transport/transport.h"

#define AFP_SPIN_NS 20000ull

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct afp_endpoint {
    transport_t base;
    afp_link_t *link; /* linked mode, else NULL */
    uint32_t queue;
    uint32_t held;    /* linked: rx slots handed out by the last receive */
    uint64_t last_rx_ns; /* linked: when the newest frame of the last receive entered the
                            fabric; the results sent next are its consequence (latency) */
    pktsock_t ps;     /* standalone */
    uint8_t mac[6];
    uint32_t ip;
    uint16_t port;
    uint32_t batch;
    uint8_t *arena;   /* standalone: batch copies of received payloads */
    uint8_t txbuf[ETHF_UDP_HDR_LEN];
} afp_endpoint_t;

static afp_addr_t *aa(transport_addr_t *a) { return (afp_addr_t *)(void *)a->u.bytes; }
static const afp_addr_t *caa(const transport_addr_t *a)
{
    return (const afp_addr_t *)(const void *)a->u.bytes;
}

static void make_addr(transport_addr_t *a, const uint8_t *mac, uint16_t ifport, uint32_t ip,
                      uint16_t port)
{
    memset(a, 0, sizeof(*a));
    a->kind = AFP_ADDR_KIND;
    a->len = sizeof(afp_addr_t);
    afp_addr_t *x = aa(a);
    if (mac)
        memcpy(x->mac, mac, 6);
    x->ifport = ifport;
    x->ip = ip;
    x->port = port;
}

static int afp_send(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms)
{
    afp_endpoint_t *e = (afp_endpoint_t *)t;
    (void)timeout_ms;
    int queued = 0;
    for (int i = 0; i < n; i++) {
        const transport_tx_t *p = &pkts[i];
        const afp_addr_t *to = caa(&p->to);
        uint32_t plen = p->head_len + p->body_len;
        if (e->link) {
            if (ETHF_UDP_HDR_LEN + plen > FRAMEQ_DATA) {
                atomic_fetch_add(&e->link->tx_too_big, 1);
                continue;
            }
            frameq_t *q = &e->link->tx[e->queue];
            frameq_slot_t *s = frameq_reserve(q);
            if (!s) {
                atomic_fetch_add(&e->link->tx_full, 1); /* the protocols retransmit */
                continue;
            }
            ethf_write_udp(s->data, e->mac, to->mac, e->ip, to->ip, e->port, to->port, plen);
            memcpy(s->data + ETHF_UDP_HDR_LEN, p->head, p->head_len);
            if (p->body_len)
                memcpy(s->data + ETHF_UDP_HDR_LEN + p->head_len, p->body, p->body_len);
            s->len = ETHF_UDP_HDR_LEN + plen;
            s->port = to->ifport;
            s->t_ns = e->last_rx_ns ? e->last_rx_ns : util_now_ns();
            frameq_publish(q);
            queued++;
        } else {
            /* head and body in one buffer after the frame header */
            uint8_t hdr[ETHF_UDP_HDR_LEN + 64];
            if (p->head_len > 64)
                return -EINVAL;
            ethf_write_udp(hdr, e->mac, to->mac, e->ip, to->ip, e->port, to->port, plen);
            memcpy(hdr + ETHF_UDP_HDR_LEN, p->head, p->head_len);
            int rc = pktsock_send(&e->ps, NULL, hdr, ETHF_UDP_HDR_LEN + p->head_len, p->body,
                                  p->body_len);
            if (rc == 0)
                queued++;
            else if (rc != -EAGAIN && rc != -EMSGSIZE)
                return queued > 0 ? queued : rc;
        }
    }
    if (e->link && queued > 0)
        afp_link_kick(e->link);
    return queued;
}

void afp_link_kick(afp_link_t *l)
{
    if (atomic_load_explicit(&l->tx_no_wake, memory_order_relaxed))
        return;
    uint64_t one = 1;
    ssize_t r = write(l->tx_efd, &one, sizeof(one));
    (void)r;
}

static int afp_recv_linked(afp_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms)
{
    frameq_t *q = &e->link->rx[e->queue];
    if (e->held) {
        frameq_release(q, e->held);
        e->held = 0;
    }
    uint32_t n = frameq_ready(q);
    if (n == 0 && timeout_ms > 0) {
        /* The frames of one allreduce arrive microseconds apart: look a little longer before
         * sleeping, which costs a wake-up (tens of microseconds on a busy machine). */
        uint64_t until = util_now_ns() + AFP_SPIN_NS;
        while ((n = frameq_ready(q)) == 0 && util_now_ns() < until)
            cpu_relax();
        if (n == 0 && frameq_wait(q, timeout_ms))
            n = frameq_ready(q);
    }
    if (n > (uint32_t)max)
        n = (uint32_t)max;
    int got = 0;
    for (uint32_t i = 0; i < n; i++) {
        frameq_slot_t *s = frameq_at(q, i);
        ethf_udp_t u;
        if (ethf_parse(s->data, s->len, &u) != ETHF_UDP)
            continue; /* the fabric queues only parsed UDP frames; never reached */
        out[got].data = u.payload;
        out[got].len = u.payload_len;
        make_addr(&out[got].from, u.src_mac, s->port, u.src_ip, u.src_port);
        if (s->t_ns > e->last_rx_ns)
            e->last_rx_ns = s->t_ns;
        got++;
    }
    e->held = n;
    return got;
}

static int afp_recv_standalone(afp_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms)
{
    int want = max < (int)e->batch ? max : (int)e->batch, got = 0;
    /* Bounded: every pass consumes one frame of the ring, at most the ring's size. */
    for (uint32_t pass = 0; got < want && pass < e->ps.nframes; pass++) {
        const uint8_t *f;
        uint32_t len;
        const struct virtio_net_hdr *vh;
        if (!pktsock_peek(&e->ps, &f, &len, &vh)) {
            if (got > 0 || timeout_ms <= 0)
                break;
            int rc = pktsock_wait_once(&e->ps, &timeout_ms);
            if (rc < 0)
                return rc;
            continue;
        }
        ethf_udp_t u;
        if (ethf_parse(f, len, &u) == ETHF_UDP && u.dst_ip == e->ip && u.dst_port == e->port &&
            u.payload_len <= FRAMEQ_DATA) {
            uint8_t *dst = e->arena + (size_t)got * FRAMEQ_DATA;
            memcpy(dst, u.payload, u.payload_len);
            out[got].data = dst;
            out[got].len = u.payload_len;
            make_addr(&out[got].from, u.src_mac, 0, u.src_ip, u.src_port);
            got++;
        }
        pktsock_done(&e->ps);
    }
    return got;
}

static int afp_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    afp_endpoint_t *e = (afp_endpoint_t *)t;
    if (max <= 0)
        return 0;
    return e->link ? afp_recv_linked(e, out, max, timeout_ms)
                   : afp_recv_standalone(e, out, max, timeout_ms);
}

static int afp_pollfd(const transport_t *t)
{
    const afp_endpoint_t *e = (const afp_endpoint_t *)t;
    return e->link ? e->link->rx[e->queue].efd : e->ps.fd;
}

static int afp_local_addr(const transport_t *t, transport_addr_t *out)
{
    const afp_endpoint_t *e = (const afp_endpoint_t *)t;
    make_addr(out, e->mac, 0, e->ip, e->port);
    return 0;
}

static int afp_queue_addr(const transport_t *t, const transport_addr_t *q0, uint32_t queue,
                          transport_addr_t *out)
{
    (void)t;
    *out = *q0;
    aa(out)->port = (uint16_t)(caa(q0)->port + queue);
    return 0;
}

static void afp_close(transport_t *t)
{
    afp_endpoint_t *e = (afp_endpoint_t *)t;
    if (e->link && e->held)
        frameq_release(&e->link->rx[e->queue], e->held);
    if (!e->link)
        pktsock_close(&e->ps);
    free(e->arena);
    free(e);
}

static const transport_ops_t afp_ops = {
    .name = "afpacket",
    .send = afp_send,
    .recv = afp_recv,
    .pollfd = afp_pollfd,
    .local_addr = afp_local_addr,
    .queue_addr = afp_queue_addr,
    .fault_counts = NULL,
    .close = afp_close,
};

static int afp_parse_addr(const char *text, transport_addr_t *out)
{
    struct sockaddr_in sin;
    int rc = netaddr_parse(text, 0, &sin);
    if (rc != 0)
        return rc;
    make_addr(out, NULL, 0, sin.sin_addr.s_addr, ntohs(sin.sin_port));
    return 0;
}

static int afp_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen)
{
    afp_link_t *link = cfg->link;
    transport_addr_t at;
    if (!link && (!cfg->bind || afp_parse_addr(cfg->bind, &at) != 0)) {
        set_err(err, errlen, "afpacket: bad address '%s' (expected IP:PORT)",
                cfg->bind ? cfg->bind : "");
        return -EINVAL;
    }
    if (link && cfg->queue >= link->nqueues) {
        set_err(err, errlen, "afpacket: queue %u beyond the fabric's %u", cfg->queue,
                link->nqueues);
        return -EINVAL;
    }
    if (!link && (!cfg->iface || !*cfg->iface)) {
        set_err(err, errlen, "afpacket: no interface given");
        return -EINVAL;
    }
    afp_endpoint_t *e = calloc(1, sizeof(*e));
    if (!e) {
        set_err(err, errlen, "out of memory");
        return -ENOMEM;
    }
    e->base.ops = &afp_ops;
    e->queue = cfg->queue;
    e->batch = cfg->batch ? cfg->batch : 64;
    e->ps.fd = -1;
    if (link) {
        e->link = link;
        memcpy(e->mac, link->mac, 6);
        e->ip = link->ip;
        e->port = (uint16_t)(link->port0 + cfg->queue);
    } else {
        int rc = pktsock_open(&e->ps, cfg->iface, 0, err, errlen);
        e->arena = rc == 0 ? malloc((size_t)e->batch * FRAMEQ_DATA) : NULL;
        if (rc == 0 && !e->arena)
            rc = -ENOMEM;
        if (rc != 0) {
            free(e);
            return rc;
        }
        memcpy(e->mac, e->ps.mac, 6);
        e->ip = caa(&at)->ip;
        e->port = (uint16_t)(caa(&at)->port + cfg->queue);
    }
    *out = &e->base;
    return 0;
}

static void afp_addr_format(const transport_addr_t *a, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    struct in_addr in = {.s_addr = caa(a)->ip};
    inet_ntop(AF_INET, &in, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, caa(a)->port);
}

static uint16_t afp_addr_port(const transport_addr_t *a) { return caa(a)->port; }
static void afp_addr_set_port(transport_addr_t *a, uint16_t port) { aa(a)->port = port; }

const transport_kind_t transport_kind_afpacket = {
    .name = "afpacket",
    .addr_kind = AFP_ADDR_KIND,
    .open = afp_open,
    .parse_addr = afp_parse_addr,
    .addr_format = afp_addr_format,
    .addr_port = afp_addr_port,
    .addr_set_port = afp_addr_set_port,
};
