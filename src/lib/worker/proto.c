/* proto.c - the table of the worker's slot protocols and what their engines share. */
#include "lib/worker/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/kernels/vec.h"
#include "lib/transport/txgroup.h"
#include "lib/wire/wire.h"
#include "lib/worker/quant.h"

extern const worker_proto_ops_t worker_proto_switchml, worker_proto_p4sgd;

static const worker_proto_ops_t *const protocols[] = {
    &worker_proto_switchml,
    &worker_proto_p4sgd,
};

const worker_proto_ops_t *worker_proto_find(inagg_protocol_t protocol)
{
    for (size_t i = 0; i < INAGG_ARRAY_LEN(protocols); i++)
        if (protocols[i]->protocol == protocol)
            return protocols[i];
    return NULL;
}

void worker_signal_raise(worker_signal_t *s)
{
    int fd = atomic_load_explicit(&s->fd, memory_order_acquire);
    if (fd >= 0 && !atomic_exchange(&s->raised, 1))
        (void)eventfd_write(fd, 1); /* cannot fail: the counter is far from its maximum */
}

void worker_signal_clear(worker_signal_t *s)
{
    int fd = atomic_load_explicit(&s->fd, memory_order_acquire);
    if (fd < 0)
        return;
    /* Read first, then lower `raised`: a completion between the two wrote nothing, but the
     * waiter sees it when it looks at its requests next; one after it writes again. */
    eventfd_t n;
    (void)eventfd_read(fd, &n); /* EAGAIN (non-blocking): nothing was written */
    atomic_store(&s->raised, 0);
}

void worker_counters_init(worker_counters_t *c, rto_estimator_t *rto, const worker_params_t *p)
{
    rto_init(rto, p->rto_us, p->rto_min_us, p->rto_max_us);
    atomic_store(&c->rto_us, p->rto_us);
}

void worker_rtt_sample(worker_counters_t *c, rto_estimator_t *rto, double sample_us)
{
    rto_sample(rto, sample_us);
    atomic_store_explicit(&c->srtt_us, (uint32_t)rto->srtt_us, memory_order_relaxed);
    atomic_store_explicit(&c->rto_us, rto->rto_us, memory_order_relaxed);
}

void worker_counters_add(const worker_counters_t *c, inagg_stats_t *acc)
{
    acc->packets_sent += atomic_load_explicit(&c->sent, memory_order_relaxed);
    acc->packets_received += atomic_load_explicit(&c->received, memory_order_relaxed);
    acc->retransmissions += atomic_load_explicit(&c->retransmissions, memory_order_relaxed);
    acc->duplicates_ignored += atomic_load_explicit(&c->duplicates, memory_order_relaxed);
    acc->invalid_dropped += atomic_load_explicit(&c->invalid, memory_order_relaxed);
    acc->bytes_sent += atomic_load_explicit(&c->bytes_sent, memory_order_relaxed);
    acc->bytes_received += atomic_load_explicit(&c->bytes_received, memory_order_relaxed);
    uint32_t srtt = atomic_load_explicit(&c->srtt_us, memory_order_relaxed);
    uint32_t rto = atomic_load_explicit(&c->rto_us, memory_order_relaxed);
    if (srtt > acc->srtt_us)
        acc->srtt_us = srtt;
    if (rto > acc->rto_us)
        acc->rto_us = rto;
}

void worker_counters_add_codec(const worker_counters_t *c, inagg_codec_stats_t *acc)
{
    acc->chunks_encoded += atomic_load_explicit(&c->chunks_encoded, memory_order_relaxed);
    acc->chunks_decoded += atomic_load_explicit(&c->chunks_decoded, memory_order_relaxed);
    acc->encode_ns += atomic_load_explicit(&c->encode_ns, memory_order_relaxed);
    acc->decode_ns += atomic_load_explicit(&c->decode_ns, memory_order_relaxed);
    acc->overlap_ns += atomic_load_explicit(&c->overlap_ns, memory_order_relaxed);
    uint32_t f = atomic_load_explicit(&c->code_floor_us, memory_order_relaxed);
    if (f > acc->rto_code_floor_us)
        acc->rto_code_floor_us = f;
}

int worker_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns)
{
    uint64_t now = util_now_ns();
    if (now >= deadline_ns)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t left = deadline_ns - now;
    ts.tv_sec += (time_t)(left / 1000000000ull);
    ts.tv_nsec += (long)(left % 1000000000ull);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
    return 0;
}

int worker_txq_init(worker_txq_t *q, transport_t *tp, int cap)
{
    q->tp = tp;
    q->n = 0;
    q->cap = cap;
    q->pkts = calloc((size_t)cap, sizeof(transport_tx_t));
    q->grouped = calloc((size_t)cap, sizeof(transport_tx_t));
    q->group_of = calloc((size_t)cap, 1);
    return q->pkts && q->grouped && q->group_of ? 0 : -ENOMEM;
}

void worker_txq_free(worker_txq_t *q)
{
    INAGG_FREE_CLEAR(q->pkts);
    INAGG_FREE_CLEAR(q->grouped);
    INAGG_FREE_CLEAR(q->group_of);
}

int worker_txq_flush(worker_txq_t *q)
{
    if (q->n == 0)
        return 0;
    /* each switch queue's packets together: one UDP_SEGMENT run per queue, not one packet
     * per slot (consecutive slots alternate between a switch's queues) */
    int rc = transport_send(q->tp, txgroup_by_destination(q->pkts, q->n, q->grouped, q->group_of),
                            q->n, 50);
    q->n = 0;
    return rc < 0 ? rc : 0;
}

void worker_encode_plain(inagg_dtype_t dtype, const void *src, uint32_t *payload, size_t len)
{
    if (dtype == INAGG_INT32)
        vec_i32_to_be((const int32_t *)src, payload, len);
    else
        vec_f32_to_be((const float *)src, payload, len);
}

void worker_decode_plain(inagg_dtype_t dtype, inagg_op_t op, uint32_t world,
                         const uint32_t *payload, void *dst, size_t len)
{
    if (dtype == INAGG_INT32) {
        vec_be_to_i32(payload, (int32_t *)dst, len);
        if (op == INAGG_AVG)
            vec_i32_div((int32_t *)dst, len, (int32_t)world);
    } else {
        vec_be_to_f32(payload, (float *)dst, len);
        if (op == INAGG_AVG)
            vec_f32_scale((float *)dst, len, 1.0f / (float)world);
    }
}

void worker_decode_result(inagg_dtype_t dtype, int fixed, inagg_op_t op, uint32_t world,
                          const uint32_t *payload, int16_t exp, void *dst, size_t len)
{
    if (!fixed) {
        worker_decode_plain(dtype, op, world, payload, dst, len);
        return;
    }
    quant_decode(payload, (float *)dst, len, exp, world);
    if (op == INAGG_AVG)
        vec_f32_scale((float *)dst, len, 1.0f / (float)world);
}

int worker_slot_addr(const worker_params_t *p, const transport_t *t, uint32_t slot,
                     transport_addr_t *out)
{
    const worker_shard_t *sh = worker_shard_of(p, slot);
    return transport_queue_addr(t, &sh->queue0, transport_slot_queue(sh->base, sh->queues, slot),
                                out);
}

void worker_transport_stats_add(const transport_t *t, inagg_transport_stats_t *acc)
{
    uint32_t n = transport_counters(t, acc->counters, INAGG_TRANSPORT_COUNTERS_MAX);
    if (n > acc->ncounters)
        acc->ncounters = n;
    uint64_t d, u, r;
    transport_fault_counts(t, &d, &u, &r);
    acc->fault_dropped += d;
    acc->fault_duplicated += u;
    acc->fault_reordered += r;
}

int worker_open_endpoint(const worker_params_t *p, int buffer, uint32_t stream, transport_t **out,
                         char *err, size_t errlen)
{
    transport_config_t cfg = {
        .kind = p->transport ? p->transport : "udp",
        .roce = {.peer = &p->sw_queue0,
                 .psn0 = p->roce_psn0,
                 .psn0_set = p->roce_psn0_set,
                 .no_replay = p->roce_no_replay,
                 .mtu = p->roce_mtu},
        .peer_takes_gso = p->switch_takes_gso,
        .buffer_bytes = buffer,
        .max_packet = worker_hdr_bytes(p) + (uint32_t)worker_payload_cap(p),
        .faults = p->faults,
        .fault_stream = ((uint64_t)p->rank << 16) | stream,
    };
    return transport_open(&cfg, out, err, errlen);
}

int worker_open_mcast_endpoint(const worker_params_t *p, int buffer, uint32_t stream,
                               transport_t **out, char *err, size_t errlen)
{
    transport_config_t cfg = {
        .kind = "udp",
        .udp = {.mcast_group = p->mcast_group,
                .mcast_port = p->mcast_port,
                .mcast_peer = &p->sw_queue0},
        .peer_takes_gso = p->switch_takes_gso,
        .buffer_bytes = buffer,
        .max_packet = worker_hdr_bytes(p) + (uint32_t)worker_payload_cap(p),
        .faults = p->faults,
        .fault_stream = ((uint64_t)p->rank << 16) | stream,
    };
    return transport_open(&cfg, out, err, errlen);
}

uint32_t worker_seal(const worker_params_t *p, wire_header_t *h, uint8_t *pkt)
{
    if (p->dp_auth)
        h->flags |= WIRE_FLAG_MAC;
    wire_encode_header(h, pkt);
    if (p->dp_auth)
        dpauth_seal_packet(worker_shard_of(p, h->slot)->keys.up, pkt, (size_t)h->count * 4u);
    return worker_hdr_bytes(p) + (uint32_t)h->count * 4u;
}

int worker_open_packet(const worker_params_t *p, const uint8_t *buf, size_t len, wire_header_t *h)
{
    if (wire_decode(buf, len, h) != WIRE_OK)
        return -EBADMSG;
    int has = (h->flags & WIRE_FLAG_MAC) != 0;
    if (has != (p->dp_auth != 0))
        return -EBADMSG;
    if (has &&
        !dpauth_check_down(worker_shard_of(p, h->slot)->keys.down, buf, (size_t)h->count * 4u))
        return -EBADMSG;
    h->flags &= (uint8_t)~WIRE_FLAG_MAC;
    return 0;
}
