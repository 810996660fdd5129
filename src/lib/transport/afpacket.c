/*
 * afpacket.c - the AF_PACKET transport (see afpacket.h) on its own packet socket, framed
 * by netio/ethframe.h.
 */
#include "lib/transport/afpacket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/netio/ethframe.h"
#include "lib/netio/pktsock.h"
#include "lib/transport/pkt_wait.h"
#include "lib/transport/transport.h"

typedef struct afp_endpoint {
    transport_t base;
    pktsock_t ps;
    uint8_t mac[6];
    uint32_t ip;
    uint16_t port;
    uint32_t batch;
    uint8_t *arena; /* batch copies of received payloads */
    uint32_t gso_off; /* a GSO frame at the ring's head handed out up to here (0: none) */
    uint8_t txbuf[ETHF_UDP_HDR_LEN];
} afp_endpoint_t;

static afp_addr_t *aa(transport_addr_t *a) { return (afp_addr_t *)(void *)a->u.bytes; }
static const afp_addr_t *caa(const transport_addr_t *a)
{
    return (const afp_addr_t *)(const void *)a->u.bytes;
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
        /* head and body in one buffer after the frame header */
        uint8_t hdr[ETHF_UDP_HDR_LEN + 64];
        if (p->head_len > 64)
            return -EINVAL;
        ethf_write_udp(hdr, e->mac, to->mac, e->ip, to->ip, e->port, to->port, plen);
        memcpy(hdr + ETHF_UDP_HDR_LEN, p->head, p->head_len);
        int rc =
            pktsock_send(&e->ps, NULL, hdr, ETHF_UDP_HDR_LEN + p->head_len, p->body, p->body_len);
        if (rc == 0)
            queued++;
        else if (rc != -EAGAIN && rc != -EMSGSIZE)
            return queued > 0 ? queued : rc;
    }
    return queued;
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
            int rc = transport_pkt_wait(&e->ps, got, &timeout_ms);
            if (rc <= 0)
                return rc < 0 ? rc : got;
            continue;
        }
        ethf_udp_t u;
        if (ethf_parse(f, len, &u) == ETHF_UDP && u.dst_ip == e->ip && u.dst_port == e->port) {
            /* a sender's UDP_SEGMENT send crosses a veth whole: one datagram per gso_size
             * bytes of its payload, as the kernel would have cut it */
            uint32_t seg = vh && vh->gso_type == VIRTIO_NET_HDR_GSO_UDP_L4 ? vh->gso_size
                           : vh && vh->gso_type != VIRTIO_NET_HDR_GSO_NONE ? 0
                           : u.payload_len                                 ? u.payload_len
                                           : 1; /* an empty datagram is one too */
            uint32_t end = seg == 0 || seg > ETHF_MAX_FRAME ? 0 : u.payload_len;
            do {
                if (seg == 0 || seg > ETHF_MAX_FRAME)
                    break; /* another kind of GSO frame, or a datagram too big: dropped */
                uint32_t n = end - e->gso_off < seg ? end - e->gso_off : seg;
                uint8_t *dst = e->arena + (size_t)got * ETHF_MAX_FRAME;
                memcpy(dst, u.payload + e->gso_off, n);
                out[got].data = dst;
                out[got].len = n;
                afp_addr_make(&out[got].from, u.src_mac, 0, u.src_ip, u.src_port);
                got++;
                e->gso_off += n;
            } while (e->gso_off < end && got < want);
            if (e->gso_off < end)
                return got; /* the rest of this frame's datagrams at the next receive */
            e->gso_off = 0;
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
    return afp_recv_standalone(e, out, max, timeout_ms);
}

static int afp_pollfd(const transport_t *t)
{
    const afp_endpoint_t *e = (const afp_endpoint_t *)t;
    return e->ps.fd;
}

static int afp_local_addr(const transport_t *t, transport_addr_t *out)
{
    const afp_endpoint_t *e = (const afp_endpoint_t *)t;
    afp_addr_make(out, e->mac, 0, e->ip, e->port);
    return 0;
}

static int afp_queue_addr(const transport_t *t, const transport_addr_t *q0, uint32_t queue,
                          transport_addr_t *out)
{
    (void)t;
    return afp_addr_queue(q0, queue, out);
}

static void afp_close(transport_t *t)
{
    afp_endpoint_t *e = (afp_endpoint_t *)t;
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
    afp_addr_make(out, NULL, 0, sin.sin_addr.s_addr, ntohs(sin.sin_port));
    return 0;
}

static int afp_open(const transport_config_t *cfg, transport_t **out, char *err, size_t errlen)
{
    transport_addr_t at;
    if (!cfg->bind || afp_parse_addr(cfg->bind, &at) != 0)
        return set_err(err, errlen, -EINVAL, "afpacket: bad address '%s' (expected IP:PORT)",
                       cfg->bind ? cfg->bind : "");
    const char *iface = cfg->afpacket.iface;
    if (!iface || !*iface)
        return set_err(err, errlen, -EINVAL, "afpacket: no interface given");
    afp_endpoint_t *e = calloc(1, sizeof(*e));
    if (!e)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->base.ops = &afp_ops;
    e->batch = cfg->batch ? cfg->batch : 64;
    e->ps.fd = -1;
    int rc = pktsock_open(&e->ps, iface, 0, err, errlen);
    e->arena = rc == 0 ? malloc((size_t)e->batch * ETHF_MAX_FRAME) : NULL;
    if (rc == 0 && !e->arena)
        rc = -ENOMEM;
    if (rc != 0) {
        free(e);
        return rc;
    }
    memcpy(e->mac, e->ps.mac, 6);
    e->ip = caa(&at)->ip;
    e->port = (uint16_t)(caa(&at)->port + cfg->queue);
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
