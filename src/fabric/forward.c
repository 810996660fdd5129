/*
 * forward.c - what the fabric does with one frame: aggregation frames to their dataplane
 * queue, frames for the switch's MAC to its internal port, the rest forwarded by MAC table
 * or flooded; and sending (now, or through the port's delay line). Bad frames are counted and
 * dropped, never logged.
 */
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/util.h"
#include "fabric/fabric_int.h"
#include "transport/ethframe.h"
#include "transport/roce_frame.h"
#include "wire/wire.h"

static int is_zero_mac(const uint8_t *m)
{
    return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0;
}

void fabric_transmit(struct fabric *f, uint32_t pout, const struct virtio_net_hdr *vh,
                     const uint8_t *frame, uint32_t len, uint8_t lat)
{
    fport_t *p = &f->ports[pout];
    int ok, agg = lat == LAT_RESEND ? 1 : (lat == LAT_AGG_INT || lat == LAT_AGG_FLOAT) ? 0 : -1;
    if (agg >= 0 && p->agg_fd[agg] >= 0) {
        ok = send(p->agg_fd[agg], frame, len, MSG_DONTWAIT) == (ssize_t)len;
    } else if (p->is_cpu) {
        static const struct virtio_net_hdr none;
        struct iovec iov[2] = {{(void *)(uintptr_t)(vh ? vh : &none), sizeof(none)},
                               {(void *)(uintptr_t)frame, len}};
        ok = writev(p->tap_fd, iov, 2) == (ssize_t)(sizeof(none) + len);
    } else {
        ok = pktsock_send(&p->ps, vh, frame, len, NULL, 0) == 0;
    }
    if (ok) {
        fstat_add(&p->c[FP_TX], 1);
        fstat_add(&p->c[FP_TX_BYTES], len);
    } else {
        fstat_add(&p->c[FP_TX_DROPS], 1);
    }
}

int fabric_link_loses(struct fabric *f, uint32_t p, const uint8_t *frame, uint32_t len)
{
    fport_t *port = &f->ports[p];
    if (!port->loss_thresh || port->is_cpu || len < ETHF_ETH_LEN ||
        !((frame[12] == 0x08 && frame[13] == 0x00) || (frame[12] == 0x89 && frame[13] == 0x15)))
        return 0; /* IPv4 and RoCE frames are lost, ARP and the rest never */
    if ((util_splitmix64(&port->loss_rng) >> 32) >= port->loss_thresh)
        return 0;
    fstat_add(&port->c[FP_LOSS_DROPS], 1);
    return 1;
}

void fabric_egress(struct fabric *f, uint32_t pout, const struct virtio_net_hdr *vh,
                   const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat)
{
    fport_t *p = &f->ports[pout];
    if (fabric_link_loses(f, pout, frame, len))
        return;
    if (p->delay_ns || p->jitter_ns) {
        uint64_t now = util_now_ns();
        if (delayline_push(&p->out, now, t_ns, (uint16_t)pout, lat, vh, frame, len) != 0)
            fstat_add(&p->c[FP_DELAY_DROPS], 1);
        if (lat != LAT_NONE)
            lathist_add(&f->lat[lat], now - t_ns);
        return;
    }
    /* measured up to the hand-over: a veth's sendmsg also runs the peer's receive path */
    if (lat != LAT_NONE)
        lathist_add(&f->lat[lat], util_now_ns() - t_ns);
    fabric_transmit(f, pout, vh, frame, len, lat);
}

static void flood(struct fabric *f, uint32_t pin, const struct virtio_net_hdr *vh,
                  const uint8_t *frame, uint32_t len, uint64_t t_ns)
{
    for (uint32_t p = 0; p < f->nports; p++)
        if (p != pin)
            fabric_egress(f, p, vh, frame, len, t_ns, LAT_NONE);
}

/* An aggregation frame for queue q: a copy into the queue's next slot. */
void fabric_to_dataplane(struct fabric *f, uint32_t q, uint32_t pin,
                         const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len,
                         uint64_t t_ns)
{
    if (len > FRAMEQ_DATA || (vh && vh->gso_type != VIRTIO_NET_HDR_GSO_NONE)) {
        fstat_add(&f->g[FG_AGG_TOO_BIG], 1);
        return;
    }
    frameq_t *fq = &f->link.rx[q];
    frameq_slot_t *s = frameq_reserve(fq);
    if (!s) {
        fstat_add(&f->g[FG_AGG_QUEUE_FULL], 1);
        return;
    }
    memcpy(s->data, frame, len);
    s->len = len;
    s->port = (uint16_t)pin;
    s->t_ns = t_ns;
    frameq_publish(fq);
    f->kick |= 1u << q;
    fstat_add(&f->g[FG_AGG_IN], 1);
}

void fabric_frame_in(struct fabric *f, uint32_t pin, const struct virtio_net_hdr *vh,
                     const uint8_t *frame, uint32_t len, uint64_t t_ns)
{
    if (len < ETHF_ETH_LEN) {
        fstat_add(&f->g[FG_RUNT], 1);
        return;
    }
    const uint8_t *dst = frame, *src = frame + 6;
    uint64_t now = t_ns;
    if (pin == f->cpu) {
        fstat_add(&f->g[FG_FROM_CPU], 1);
    } else {
        if (ethf_mac_is_multicast(src) || is_zero_mac(src)) {
            fstat_add(&f->g[FG_BAD_SOURCE], 1);
            return;
        }
        if (memcmp(dst, f->mac, 6) == 0) {
            if (frame[12] == 0x89 && frame[13] == 0x15 &&
                fabric_roce_in(f, pin, vh, frame, len, t_ns))
                return; /* RoCE aggregation (roce_agg.c) */
            ethf_udp_t u;
            int k = ethf_parse(frame, len, &u);
            if (k == ETHF_MALFORMED) {
                fstat_add(&f->g[FG_MALFORMED], 1);
                return;
            }
            if (k == ETHF_UDP && u.dst_ip == f->ip && u.dst_port >= f->link.port0 &&
                u.dst_port < f->link.port0 + f->link.nqueues) {
                /* aggregation: never learned from, never flooded */
                fabric_to_dataplane(f, u.dst_port - f->link.port0, pin, vh, frame, len, t_ns);
                return;
            }
            if (k == ETHF_FRAGMENT && u.dst_ip == f->ip) {
                fstat_add(&f->g[FG_AGG_FRAGMENT], 1);
                return;
            }
            mactable_learn(&f->mt, src, (uint16_t)pin, now);
            fstat_add(&f->g[FG_TO_CPU], 1);
            fabric_egress(f, f->cpu, vh, frame, len, t_ns, LAT_NONE);
            return;
        }
        mactable_learn(&f->mt, src, (uint16_t)pin, now);
    }
    if (ethf_mac_is_multicast(dst)) {
        fstat_add(&f->g[FG_FLOODED], 1);
        flood(f, pin, vh, frame, len, t_ns);
        return;
    }
    int out = mactable_lookup(&f->mt, dst, now);
    if (out < 0) {
        fstat_add(&f->g[FG_UNKNOWN_FLOODED], 1);
        flood(f, pin, vh, frame, len, t_ns);
    } else if ((uint32_t)out == pin) {
        fstat_add(&f->g[FG_FILTERED], 1);
    } else {
        fstat_add(&f->g[FG_FORWARDED], 1);
        fabric_egress(f, (uint32_t)out, vh, frame, len, t_ns, LAT_FORWARD);
    }
}

/* The latency class of a result frame: its dtype, or a resend when this (job, slot, rank)
 * was already sent this round. */
static uint8_t result_class(struct fabric *f, const uint8_t *frame, uint32_t len)
{
    const uint8_t *h = frame + ETHF_UDP_HDR_LEN;
    if (len >= 14 && frame[12] == 0x89 && frame[13] == 0x15) {
        /* RoCE: the header rides in a message's first frame (roce_frame.h) */
        uint32_t off = roce_header_len(ROCE_WRITE_FIRST);
        if (len < off + WIRE_HEADER_SIZE || !roce_op_is_first(frame[54]))
            return LAT_AGG_INT;
        h = frame + off;
    } else if (len < ETHF_UDP_HDR_LEN + WIRE_HEADER_SIZE) {
        return LAT_NONE;
    }
    uint32_t job = (uint32_t)h[4] << 8 | h[5], rank = (uint32_t)h[6] << 8 | h[7];
    uint32_t slot = (uint32_t)h[12] << 24 | (uint32_t)h[13] << 16 | (uint32_t)h[14] << 8 | h[15];
    uint32_t round = (uint32_t)h[16] << 24 | (uint32_t)h[17] << 16 | (uint32_t)h[18] << 8 | h[19];
    uint32_t tag = (job * 0x9e3779b1u) ^ (slot * 0x85ebca6bu) ^ (rank * 0xc2b2ae35u);
    resend_ent_t *e = &f->resend[tag & (RESEND_SLOTS - 1)];
    if (h[3] == WIRE_RESULT && e->tag == tag && e->round == round)
        return LAT_RESEND;
    e->tag = tag;
    e->round = round;
    return h[27] == WIRE_FLOAT32 ? LAT_AGG_FLOAT : LAT_AGG_INT;
}

int fabric_drain_results(struct fabric *f, uint64_t now)
{
    (void)now;
    int work = 0;
    for (uint32_t q = 0; q < f->link.nqueues; q++) {
        frameq_t *fq = &f->link.tx[q];
        uint32_t n = frameq_ready(fq);
        if (n > 256)
            n = 256;
        for (uint32_t i = 0; i < n; i++) {
            frameq_slot_t *s = frameq_at(fq, i);
            if (s->port >= f->nports || s->port == f->cpu) {
                fstat_add(&f->g[FG_AGG_BAD_PORT], 1);
                continue;
            }
            fstat_add(&f->g[FG_AGG_OUT], 1);
            fabric_egress(f, s->port, NULL, s->data, s->len, s->t_ns,
                          result_class(f, s->data, s->len));
        }
        if (n) {
            frameq_release(fq, n);
            work += (int)n;
        }
    }
    return work;
}
