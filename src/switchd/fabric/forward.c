/*
 * forward.c - the pipeline's classify stage: what the fabric does with one frame. Aggregation
 * frames go to their dataplane queue (the aggregation stage), frames for the switch's MAC to
 * its internal port, the rest are forwarded by MAC table or flooded (handed to the transmit
 * stage, txstage.c, with their output ports). Also the latency class of result frames and
 * each link's random loss. Bad frames are counted and dropped, never logged.
 */
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "lib/netio/roce_frame.h"
#include "lib/wire/fabricmsg.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/fabric_int.h"

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

static int is_zero_mac(const uint8_t *m) { return (m[0] | m[1] | m[2] | m[3] | m[4] | m[5]) == 0; }

int fabric_link_loses(struct fabric *f, uint32_t p, int out, const uint8_t *frame, uint32_t len)
{
    fport_t *port = &f->ports[p];
    if (!port->loss_thresh || port->is_cpu || len < ETHF_ETH_LEN ||
        !((frame[12] == 0x08 && frame[13] == 0x00) || (frame[12] == 0x89 && frame[13] == 0x15)))
        return 0; /* IPv4 and RoCE frames are lost, ARP and the rest never */
    if ((util_splitmix64(&port->loss_rng[out]) >> 32) >= port->loss_thresh)
        return 0;
    fstat_add(&port->c[FP_LOSS_DROPS], 1);
    return 1;
}

static void flood(struct fabric *f, uint32_t pin, const struct virtio_net_hdr *vh,
                  const uint8_t *frame, uint32_t len, uint64_t t_ns)
{
    uint64_t all = f->nports >= 64 ? ~0ull : (1ull << f->nports) - 1;
    fabric_send_ports(f, all & ~(1ull << pin), vh, frame, len, t_ns, LAT_NONE);
}

/* One aggregation frame of len bytes into queue q's next slot: the first head bytes of
 * frame, then body_len bytes of body (with head == len, the whole frame). 0, or -1 when the
 * queue is full (counted). */
static int queue_agg_frame(struct fabric *f, uint32_t q, uint32_t pin, const uint8_t *frame,
                           uint32_t head, const uint8_t *body, uint32_t body_len, uint64_t t_ns)
{
    frameq_t *fq = &f->link.rx[q];
    frameq_slot_t *s = frameq_reserve(fq);
    if (!s) {
        fstat_add(&f->g[FG_AGG_QUEUE_FULL], 1);
        return -1;
    }
    memcpy(s->data, frame, head);
    if (body_len) {
        memcpy(s->data + head, body, body_len);
        ethf_udp_set_payload_len(s->data, body_len);
    }
    s->len = head + body_len;
    s->port = (uint16_t)pin;
    s->t_ns = t_ns;
    frameq_publish(fq);
    f->kick |= 1u << q;
    fstat_add(&f->g[FG_AGG_IN], 1);
    return 0;
}

/* A UDP GSO frame (a sender's UDP_SEGMENT, kept whole by veth: the vnet header's UDP_L4 and
 * gso_size): one aggregation frame per gso_size bytes of its payload, as the kernel would
 * have cut them. */
static void gso_to_dataplane(struct fabric *f, uint32_t q, uint32_t pin,
                             const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len,
                             uint64_t t_ns)
{
    ethf_udp_t u;
    uint32_t seg = vh->gso_size;
    if (ethf_parse(frame, len, &u) != ETHF_UDP || seg == 0 ||
        (uint32_t)(u.payload - frame) + seg > FRAMEQ_DATA) {
        fstat_add(&f->g[FG_AGG_TOO_BIG], 1);
        return;
    }
    fstat_add(&f->g[FG_AGG_GSO], 1);
    uint32_t head = (uint32_t)(u.payload - frame);
    for (uint32_t off = 0; off < u.payload_len; off += seg) {
        uint32_t n = u.payload_len - off < seg ? u.payload_len - off : seg;
        if (queue_agg_frame(f, q, pin, frame, head, u.payload + off, n, t_ns) != 0)
            return;
    }
}

/* An aggregation frame for queue q: a copy into the queue's next slot (a UDP GSO frame: one
 * per segment). */
void fabric_to_dataplane(struct fabric *f, uint32_t q, uint32_t pin,
                         const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len,
                         uint64_t t_ns)
{
    if (vh && vh->gso_type == VIRTIO_NET_HDR_GSO_UDP_L4) {
        gso_to_dataplane(f, q, pin, vh, frame, len, t_ns);
        return;
    }
    if (len > FRAMEQ_DATA || (vh && vh->gso_type != VIRTIO_NET_HDR_GSO_NONE)) {
        fstat_add(&f->g[FG_AGG_TOO_BIG], 1);
        return;
    }
    (void)queue_agg_frame(f, q, pin, frame, len, NULL, 0, t_ns);
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
    fstat_add(&f->st[ST_CL_FRAMES], 1);
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
                if (!(atomic_load_explicit(&f->agg_ports, memory_order_relaxed) & (1ull << pin))) {
                    fstat_add(&f->g[FG_AGG_PORT_OFF], 1);
                    return;
                }
                if (!adder_on(f, u.payload, u.payload_len)) {
                    fstat_add(&f->g[FG_AGG_ADD_OFF], 1);
                    return;
                }
                fabric_to_dataplane(f, u.dst_port - f->link.port0, pin, vh, frame, len, t_ns);
                return;
            }
            if (k == ETHF_FRAGMENT && u.dst_ip == f->ip) {
                fstat_add(&f->g[FG_AGG_FRAGMENT], 1);
                return;
            }
            mactable_learn(&f->mt, src, (uint16_t)pin, now);
            fstat_add(&f->g[FG_TO_CPU], 1);
            fabric_send_ports(f, 1ull << f->cpu, vh, frame, len, t_ns, LAT_NONE);
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
        fabric_send_ports(f, 1ull << out, vh, frame, len, t_ns, LAT_FORWARD);
    }
}

const uint8_t *fabric_result_header(const uint8_t *frame, uint32_t len, uint8_t *lat)
{
    if (len >= ETHF_ETH_LEN && frame[12] == 0x89 && frame[13] == 0x15) {
        /* RoCE: the header rides in a message's first frame (roce_frame.h) */
        uint32_t off = roce_header_len(ROCE_WRITE_FIRST);
        if (len < off + WIRE_HEADER_SIZE || !roce_op_is_first(frame[ROCE_ETH_LEN + ROCE_GRH_LEN])) {
            *lat = LAT_AGG_INT;
            return NULL;
        }
        return frame + off;
    }
    if (len < ETHF_UDP_HDR_LEN + WIRE_HEADER_SIZE) {
        *lat = LAT_NONE;
        return NULL;
    }
    return frame + ETHF_UDP_HDR_LEN;
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
