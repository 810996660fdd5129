/*
 * aggstage.c - the fabric's side of the aggregation stage (aggstage.h): frames into the
 * dataplane's queues, the inline pass, the wake-ups.
 */
#include "switchd/fabric/aggstage.h"

#include <string.h>

#include "lib/netio/ethframe.h"
#include "lib/netio/pktsock.h"
#include "switchd/fabric/stagestat.h"

/* One aggregation frame of len bytes into queue q's next slot: the first head bytes of
 * frame, then body_len bytes of body (with head == len, the whole frame). 0, or -1 when the
 * queue is full (counted). */
static int queue_frame(aggstage_t *a, uint32_t q, uint32_t pin, const uint8_t *frame, uint32_t head,
                       const uint8_t *body, uint32_t body_len, uint64_t t_ns)
{
    frameq_t *fq = &a->link->rx[q];
    frameq_slot_t *s = frameq_reserve(fq);
    if (!s) {
        fstat_add(&a->c[AG_QUEUE_FULL], 1);
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
    a->kick |= 1u << q;
    fstat_add(&a->c[AG_IN], 1);
    return 0;
}

/* A UDP GSO frame (a sender's UDP_SEGMENT, kept whole by veth: the vnet header's UDP_L4 and
 * gso_size): one aggregation frame per gso_size bytes of its payload, as the kernel would
 * have cut them. */
static void enqueue_gso(aggstage_t *a, uint32_t q, uint32_t pin, const struct virtio_net_hdr *vh,
                        const uint8_t *frame, uint32_t len, uint64_t t_ns)
{
    ethf_udp_t u;
    uint32_t seg = vh->gso_size;
    if (ethf_parse(frame, len, &u) != ETHF_UDP || seg == 0 ||
        (uint32_t)(u.payload - frame) + seg > FRAMEQ_DATA) {
        fstat_add(&a->c[AG_TOO_BIG], 1);
        return;
    }
    fstat_add(&a->c[AG_GSO], 1);
    uint32_t head = (uint32_t)(u.payload - frame);
    for (uint32_t off = 0; off < u.payload_len; off += seg) {
        uint32_t n = u.payload_len - off < seg ? u.payload_len - off : seg;
        if (queue_frame(a, q, pin, frame, head, u.payload + off, n, t_ns) != 0)
            return;
    }
}

void aggstage_enqueue(aggstage_t *a, uint32_t q, uint32_t pin, const struct virtio_net_hdr *vh,
                      const uint8_t *frame, uint32_t len, uint64_t t_ns)
{
    if (vh && vh->gso_type == VIRTIO_NET_HDR_GSO_UDP_L4) {
        enqueue_gso(a, q, pin, vh, frame, len, t_ns);
        return;
    }
    if (len > FRAMEQ_DATA || (vh && vh->gso_type != VIRTIO_NET_HDR_GSO_NONE)) {
        fstat_add(&a->c[AG_TOO_BIG], 1);
        return;
    }
    (void)queue_frame(a, q, pin, frame, len, NULL, 0, t_ns);
}

int aggstage_run_inline(aggstage_t *a)
{
    int (*pass)(void *, uint32_t) = atomic_load(&a->pass);
    if (!pass)
        return 0;
    int work = 0;
    void *sw = atomic_load_explicit(&a->arg, memory_order_relaxed);
    for (uint32_t q = 0; q < a->link->nqueues; q++)
        if (pass(sw, q) > 0)
            work++;
    a->kick = 0; /* nobody sleeps on the queues */
    return work;
}

void aggstage_kick(aggstage_t *a)
{
    for (uint32_t q = 0; a->kick && q < a->link->nqueues; q++)
        if (a->kick & (1u << q))
            frameq_kick(&a->link->rx[q]);
    a->kick = 0;
}

void aggstage_attach(aggstage_t *a, int (*pass)(void *sw, uint32_t queue), void *sw,
                     int same_thread_tx)
{
    if (pass) {
        atomic_store_explicit(&a->arg, sw, memory_order_relaxed);
        /* results are queued on the transmitting thread itself when that is the receive one */
        atomic_store(&a->link->tx_no_wake, same_thread_tx);
        atomic_store_explicit(&a->pass, pass, memory_order_release);
        return;
    }
    atomic_store(&a->pass, NULL); /* seq_cst, as the receive loop's loop_seq bump and its load
                                     of pass: the two sides cannot both miss */
    atomic_store(&a->link->tx_no_wake, 0);
}

void aggstage_stats(const aggstage_t *a, aggstage_stats_t *out)
{
    fstat_read(a->c, out->c, AG_COUNT);
    out->endpoint_tx_full = atomic_load(&a->link->tx_full) + atomic_load(&a->link->tx_too_big);
    out->is_inline = atomic_load(&a->pass) != NULL;
}
