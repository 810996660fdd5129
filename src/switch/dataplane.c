/*
 * dataplane.c - one dataplane thread of the switch: run to completion over batches.
 *
 * Each thread serves one queue of the transport (UDP: port base + index) and the slots that
 * map to it. The loop receives a burst, checks every packet, hands it to its job's protocol
 * (proto.h), acts on the outcome, and sends what that queued in one burst. No allocation,
 * lock or log line per packet: bad packets are counted per reason and dropped. Result packets
 * point straight at the slot's result, which is in network order once complete and is not
 * reused before every rank has received it.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "switch/server.h"
#include "transport/udp.h"

#define DP_MAX_BATCH 256
#define DP_TX_CAP 2048
#define DP_RX_BUF 65536

struct dp_txq {
    int n;
    transport_tx_t pkts[DP_TX_CAP];
    uint8_t hdr[DP_TX_CAP][WIRE_HEADER_SIZE];
    /* UDP until the transport interface is implemented: sendmmsg's view of pkts */
    struct mmsghdr msgs[DP_TX_CAP];
    struct iovec iov[DP_TX_CAP][2];
    struct mmsghdr faulted[2 * DP_TX_CAP + 1];
};

typedef struct rx_batch {
    struct mmsghdr msgs[DP_MAX_BATCH];
    struct iovec iov[DP_MAX_BATCH];
    struct sockaddr_in from[DP_MAX_BATCH];
    int order[2 * DP_MAX_BATCH];
    uint8_t *bufs; /* DP_MAX_BATCH * DP_RX_BUF bytes */
} rx_batch_t;

/* UDP until the transport interface is implemented: a sockaddr_in as a transport address. */
static void udp_addr(const struct sockaddr_in *sa, transport_addr_t *a)
{
    a->kind = 1;
    a->len = sizeof(*sa);
    memcpy(a->u.bytes, sa, sizeof(*sa));
}

static void tx_flush(dp_thread_t *t)
{
    struct dp_txq *q = t->txq;
    if (q->n == 0)
        return;
    for (int k = 0; k < q->n; k++) {
        transport_tx_t *p = &q->pkts[k];
        q->iov[k][0] = (struct iovec){(void *)(uintptr_t)p->head, p->head_len};
        q->iov[k][1] = (struct iovec){(void *)(uintptr_t)p->body, p->body_len};
        memset(&q->msgs[k], 0, sizeof(q->msgs[k]));
        q->msgs[k].msg_hdr.msg_name = p->to.u.bytes;
        q->msgs[k].msg_hdr.msg_namelen = p->to.len;
        q->msgs[k].msg_hdr.msg_iov = q->iov[k];
        q->msgs[k].msg_hdr.msg_iovlen = p->body_len ? 2 : 1;
    }
    struct mmsghdr *msgs = q->msgs;
    int n = q->n;
    if (t->faults_out.enabled) {
        uint64_t before = t->faults_out.dropped;
        n = faults_on_send(&t->faults_out, q->msgs, q->n, q->faulted);
        msgs = q->faulted;
        STAT_ADD(t->c.v[STAT_INJECTED_DROPS], t->faults_out.dropped - before);
    }
    int sent = udp_send_batch(t->fd, msgs, n, 100);
    if (sent > 0)
        STAT_ADD(t->c.v[STAT_PACKETS_OUT], (uint64_t)sent);
    q->n = 0;
}

void dp_send(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
             const transport_addr_t *to)
{
    struct dp_txq *q = x->dp->txq;
    if (q->n == DP_TX_CAP)
        tx_flush(x->dp);
    int k = q->n++;
    wire_encode_header(h, q->hdr[k]);
    q->pkts[k] = (transport_tx_t){
        .head = q->hdr[k],
        .head_len = WIRE_HEADER_SIZE,
        .body = payload,
        .body_len = (uint32_t)h->count * 4u,
        .to = *to,
    };
}

/* One result packet of outcome o to `rank`. */
static void send_result(proto_ctx_t *x, const proto_outcome_t *o, uint32_t slot, uint32_t rank,
                        const transport_addr_t *to)
{
    const job_t *j = x->job;
    wire_header_t h = o->result;
    h.version = INAGG_PROTOCOL_VERSION;
    h.type = WIRE_RESULT;
    h.job = j->id;
    h.token = j->token;
    h.slot = slot;
    h.rank = (uint16_t)rank;
    if (j->proto->result_header)
        j->proto->result_header(x, &h);
    dp_send(x, &h, o->data, to);
}

/* In-switch optimizer (optjob.h): the round of `chunk` is complete; its sum (network order)
 * becomes the chunk's new parameters, once. */
static void apply_optimizer(proto_ctx_t *x, const proto_outcome_t *o)
{
    const job_t *j = x->job;
    float *scratch = j->opt_scratch + (size_t)x->thread * j->elems;
    if (optjob_complete(j->opt, o->chunk, o->data, o->result.count, j->world, o->set,
                        scratch) != 0)
        return; /* cannot happen: every contribution's chunk and length were checked */
    STAT_ADD(x->c->v[o->set ? STAT_OPT_UPLOADS : STAT_OPT_STEPS], 1);
}

/* What follows from a packet the protocol handled: the one place its outcome is counted. */
static void act(proto_ctx_t *x, const wire_header_t *h, const proto_outcome_t *o)
{
    const job_t *j = x->job;
    stat_counters_t *c = x->c;
    uint64_t result_bytes = 0;
    switch (o->action) {
    case PROTO_PARTIAL:
        STAT_ADD(c->v[STAT_CONTRIBUTIONS], 1);
        break;
    case PROTO_COMPLETE:
        STAT_ADD(c->v[STAT_CONTRIBUTIONS], 1);
        STAT_ADD(c->v[STAT_ROUNDS], 1);
        if (j->opt)
            apply_optimizer(x, o);
        result_bytes = WIRE_HEADER_SIZE + (uint64_t)o->result.count * 4u;
        for (uint32_t r = 0; r < j->world; r++)
            send_result(x, o, h->slot, r, &j->addrs[(size_t)h->slot * j->world + r]);
        STAT_ADD(c->v[STAT_RESULTS_SENT], j->world);
        STAT_ADD(c->v[STAT_BYTES_OUT], result_bytes * j->world);
        break;
    case PROTO_RESEND:
        send_result(x, o, h->slot, h->rank, x->from);
        result_bytes = WIRE_HEADER_SIZE + (uint64_t)o->result.count * 4u;
        STAT_ADD(c->v[STAT_RESENDS], 1);
        STAT_ADD(c->v[STAT_RESULTS_SENT], 1);
        STAT_ADD(c->v[STAT_BYTES_OUT], result_bytes);
        break;
    case PROTO_DROP:
        STAT_ADD(c->v[o->drop], 1);
        break;
    default:
        break;
    }
}

static int dtype_allowed(const job_t *j, uint8_t dtype)
{
    if (dtype == WIRE_INT32)
        return 1;
    if (dtype == WIRE_FIXED32)
        return j->float_mode == INAGG_FLOAT_FIXED;
    return j->float_mode == INAGG_FLOAT_NATIVE;
}

/* The context checks of PROTOCOL.md 1.3 for a packet of job j: a drop reason, or -1. */
static int check(const dp_thread_t *t, const job_t *j, const wire_header_t *h)
{
    if (atomic_load_explicit(&j->state, memory_order_acquire) != JOB_ACTIVE)
        return DROP_JOB_NOT_ACTIVE;
    if (h->rank >= j->world)
        return DROP_BAD_RANK;
    if (h->slot >= j->nslots)
        return DROP_BAD_SLOT;
    if (job_slot_owner(j, h->slot) != t->index)
        return DROP_WRONG_THREAD;
    if (h->count > j->elems)
        return DROP_BAD_COUNT;
    if (!(j->proto->accepts & (1u << h->type)))
        return DROP_WRONG_PROTOCOL;
    if (h->type != WIRE_CONTRIB)
        return -1;
    if (!dtype_allowed(j, h->dtype))
        return DROP_DTYPE_NOT_ALLOWED;
    if (j->opt && h->dtype != WIRE_FLOAT32)
        return DROP_DTYPE_NOT_ALLOWED; /* gradients are float32 */
    if (j->opt && optjob_chunk_len(j->opt, h->chunk) != h->count)
        return DROP_BAD_CHUNK;
    return -1;
}

static void handle_packet(dp_thread_t *t, uint32_t to_switch, const uint8_t *buf, size_t len,
                          const transport_addr_t *from, uint64_t now_ms)
{
    struct inagg_switch *sw = t->sw;
    wire_header_t h;
    enum wire_status ws = wire_decode(buf, len, &h);
    if (ws != WIRE_OK) {
        STAT_ADD(t->c.v[ws], 1);
        return;
    }
    if (!(to_switch & (1u << h.type))) {
        STAT_ADD(t->c.v[DROP_NOT_RESULT_PATH], 1);
        return;
    }
    job_t *j = h.job < SWITCH_MAX_JOBS
                   ? atomic_load_explicit(&sw->jobs[h.job], memory_order_acquire)
                   : NULL;
    if (!j) {
        STAT_ADD(t->c.v[DROP_UNKNOWN_JOB], 1);
        return;
    }
    if (h.token != j->token) {
        STAT_ADD(t->c.v[DROP_BAD_TOKEN], 1);
        return;
    }
    proto_ctx_t x = {.dp = t, .job = j, .state = j->proto_state, .thread = t->index,
                     .c = &j->threads[t->index].c, .from = from};
    int reason = check(t, j, &h);
    if (reason >= 0) {
        STAT_ADD(x.c->v[reason], 1);
        return;
    }
    STAT_ADD(x.c->v[STAT_BYTES_IN], len);
    atomic_store_explicit(&j->threads[t->index].last_seen_ms[h.rank], now_ms,
                          memory_order_relaxed);
    if (h.type == WIRE_CONTRIB)
        j->addrs[(size_t)h.slot * j->world + h.rank] = *from;
    proto_outcome_t o;
    j->proto->handle(&x, &h, (const uint32_t *)(const void *)(buf + WIRE_HEADER_SIZE), &o);
    act(&x, &h, &o);
}

void *dataplane_main(void *arg)
{
    dp_thread_t *t = arg;
    struct inagg_switch *sw = t->sw;
    uint32_t batch = sw->cfg.batch < DP_MAX_BATCH ? sw->cfg.batch : DP_MAX_BATCH;
    if (batch == 0)
        batch = 1;
    uint32_t to_switch = proto_accepts_any();
    rx_batch_t *rx = calloc(1, sizeof(*rx));
    t->txq = calloc(1, sizeof(*t->txq));
    uint8_t *bufs = rx ? malloc((size_t)batch * DP_RX_BUF) : NULL;
    if (!rx || !t->txq || !bufs) {
        LOG_E("dataplane thread %u: out of memory", t->index);
        free(rx);
        free(t->txq);
        free(bufs);
        atomic_store(&t->running, 0);
        return NULL;
    }
    rx->bufs = bufs;
    /* One system call per wake-up: recvmmsg sleeps until a packet comes (at most 50 ms, so
     * the stop flag is seen). */
    int blocking = udp_set_receive_timeout(t->fd, 50) == 0;
    for (uint32_t i = 0; i < batch; i++) {
        rx->iov[i] = (struct iovec){rx->bufs + (size_t)i * DP_RX_BUF, DP_RX_BUF};
        rx->msgs[i].msg_hdr.msg_iov = &rx->iov[i];
        rx->msgs[i].msg_hdr.msg_iovlen = 1;
    }
    while (!atomic_load_explicit(&sw->stop, memory_order_acquire)) {
        atomic_fetch_add_explicit(&t->epoch, 1, memory_order_acq_rel);
        for (uint32_t i = 0; i < batch; i++) {
            rx->msgs[i].msg_hdr.msg_name = &rx->from[i];
            rx->msgs[i].msg_hdr.msg_namelen = sizeof(rx->from[i]);
        }
        int n = blocking ? udp_recv_batch_blocking(t->fd, rx->msgs, (int)batch)
                         : udp_recv_batch(t->fd, rx->msgs, (int)batch, 50);
        if (n <= 0)
            continue;
        STAT_ADD(t->c.v[STAT_PACKETS_IN], (uint64_t)n);
        uint64_t now_ms = server_now_ms();
        uint64_t dropped_before = t->faults_in.dropped;
        int k = faults_on_recv(&t->faults_in, n, rx->order);
        STAT_ADD(t->c.v[STAT_INJECTED_DROPS], t->faults_in.dropped - dropped_before);
        for (int i = 0; i < k; i++) {
            int m = rx->order[i];
            transport_addr_t from;
            udp_addr(&rx->from[m], &from);
            handle_packet(t, to_switch, rx->bufs + (size_t)m * DP_RX_BUF, rx->msgs[m].msg_len,
                          &from, now_ms);
        }
        tx_flush(t);
    }
    free(rx->bufs);
    free(rx);
    free(t->txq);
    atomic_store(&t->running, 0);
    return NULL;
}
