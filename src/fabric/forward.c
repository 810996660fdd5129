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
#include "wire/fabricmsg.h"
#include "wire/wire.h"

/* Header fields the fabric reads (wire.h has the layout) */
#define WIRE_OFF_TYPE 3
#define WIRE_OFF_JOB 4
#define WIRE_OFF_RANK 6
#define WIRE_OFF_SLOT 16
#define WIRE_OFF_ROUND 20
#define WIRE_OFF_DTYPE 31

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

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
    if (!port->loss_thresh || port->is_cpu || len < ETHF_ETH_LEN || frame[12] != 0x08 ||
        frame[13] != 0x00)
        return 0;
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
static void to_dataplane(struct fabric *f, uint32_t q, uint32_t pin,
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

/* Whether the add mode lets this aggregation payload through: only contributions carry
 * numbers to add (acknowledgements and short payloads pass, the dataplane judges those). */
static int adder_on(const struct fabric *f, const uint8_t *h, uint32_t len)
{
    uint32_t mode = atomic_load_explicit(&f->add_mode, memory_order_relaxed);
    if (mode == WIRE_ADD_ANY || len < WIRE_HEADER_SIZE || h[WIRE_OFF_TYPE] != WIRE_CONTRIB)
        return 1;
    int is_float = h[WIRE_OFF_DTYPE] == WIRE_FLOAT32 || h[WIRE_OFF_DTYPE] == WIRE_CODED;
    return mode == WIRE_ADD_FLOAT ? is_float : !is_float;
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
            ethf_udp_t u;
            int k = ethf_parse(frame, len, &u);
            if (k == ETHF_MALFORMED) {
                fstat_add(&f->g[FG_MALFORMED], 1);
                return;
            }
            if (k == ETHF_UDP && u.dst_ip == f->ip && u.dst_port >= f->link.port0 &&
                u.dst_port < f->link.port0 + f->link.nqueues) {
                /* aggregation: never learned from, never flooded */
                if (!(atomic_load_explicit(&f->agg_ports, memory_order_relaxed) &
                      (1ull << pin))) {
                    fstat_add(&f->g[FG_AGG_PORT_OFF], 1);
                    return;
                }
                if (!adder_on(f, u.payload, u.payload_len)) {
                    fstat_add(&f->g[FG_AGG_ADD_OFF], 1);
                    return;
                }
                to_dataplane(f, u.dst_port - f->link.port0, pin, vh, frame, len, t_ns);
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

uint8_t fabric_result_class(resend_ent_t *resend, const uint8_t *h)
{
    uint32_t job = be16(h + WIRE_OFF_JOB), rank = be16(h + WIRE_OFF_RANK);
    uint32_t slot = be32(h + WIRE_OFF_SLOT), round = be32(h + WIRE_OFF_ROUND);
    uint32_t tag = (job * 0x9e3779b1u) ^ (slot * 0x85ebca6bu) ^ (rank * 0xc2b2ae35u);
    resend_ent_t *e = &resend[tag & (RESEND_SLOTS - 1)];
    if (h[WIRE_OFF_TYPE] == WIRE_RESULT && e->tag == tag && e->round == round)
        return LAT_RESEND;
    e->tag = tag;
    e->round = round;
    return h[WIRE_OFF_DTYPE] == WIRE_FLOAT32 || h[WIRE_OFF_DTYPE] == WIRE_CODED ? LAT_AGG_FLOAT
                                                                                 : LAT_AGG_INT;
}

/* The latency class of a result frame: its dtype, or a resend when this (job, slot, rank)
 * was already sent this round. */
static uint8_t result_class(struct fabric *f, const uint8_t *frame, uint32_t len)
{
    if (len < ETHF_UDP_HDR_LEN + WIRE_HEADER_SIZE)
        return LAT_NONE;
    return fabric_result_class(f->resend, frame + ETHF_UDP_HDR_LEN);
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
