/*
 * dataplane.c - one dataplane thread of the switch: run to completion over batches.
 *
 * Each thread owns one UDP socket (port base + index) and the slots that map to it. The
 * loop receives a burst with recvmmsg, validates and applies every contribution to its slot
 * (slot.c), queues the resulting result packets, and sends them in one sendmmsg burst. No
 * allocation, lock or log line per packet: bad packets are counted per reason and dropped.
 * Result packets point straight at the slot's copy, which is in network order once complete
 * and is not reused before every rank has received it.
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

typedef struct tx_queue {
    int n;
    struct mmsghdr msgs[DP_TX_CAP];
    struct iovec iov[DP_TX_CAP][2];
    uint8_t hdr[DP_TX_CAP][WIRE_HEADER_SIZE];
    struct sockaddr_in to[DP_TX_CAP];
    struct mmsghdr faulted[2 * DP_TX_CAP + 1];
} tx_queue_t;

typedef struct rx_batch {
    struct mmsghdr msgs[DP_MAX_BATCH];
    struct iovec iov[DP_MAX_BATCH];
    struct sockaddr_in from[DP_MAX_BATCH];
    int order[2 * DP_MAX_BATCH];
    uint8_t *bufs; /* DP_MAX_BATCH * DP_RX_BUF bytes */
} rx_batch_t;

static void tx_flush(dp_thread_t *t, tx_queue_t *q)
{
    if (q->n == 0)
        return;
    struct mmsghdr *msgs = q->msgs;
    int n = q->n;
    if (t->faults_out.enabled) {
        uint64_t before = t->faults_out.dropped;
        n = faults_on_send(&t->faults_out, q->msgs, q->n, q->faulted);
        msgs = q->faulted;
        STAT_ADD(t->fault_drops, t->faults_out.dropped - before);
    }
    int sent = udp_send_batch(t->fd, msgs, n, 100);
    if (sent > 0)
        STAT_ADD(t->packets_out, (uint64_t)sent);
    q->n = 0;
}

/* Queue one packet: header h (rank and type filled by the caller) and n payload words that
 * stay valid until the queue is flushed (a slot's completed copy or result). */
static void tx_packet(dp_thread_t *t, tx_queue_t *q, const wire_header_t *h,
                      const uint32_t *payload, const struct sockaddr_in *to)
{
    if (q->n == DP_TX_CAP)
        tx_flush(t, q);
    int k = q->n++;
    wire_encode_header(h, q->hdr[k]);
    q->to[k] = *to;
    q->iov[k][0] = (struct iovec){q->hdr[k], WIRE_HEADER_SIZE};
    q->iov[k][1] = (struct iovec){(void *)(uintptr_t)payload, (size_t)h->count * 4u};
    memset(&q->msgs[k], 0, sizeof(q->msgs[k]));
    q->msgs[k].msg_hdr.msg_name = &q->to[k];
    q->msgs[k].msg_hdr.msg_namelen = sizeof(q->to[k]);
    q->msgs[k].msg_hdr.msg_iov = q->iov[k];
    q->msgs[k].msg_hdr.msg_iovlen = h->count ? 2 : 1;
}

static void tx_result(dp_thread_t *t, tx_queue_t *q, const job_t *j, uint32_t slot,
                      const slot_copy_t *c, uint32_t rank, const struct sockaddr_in *to)
{
    wire_header_t h = {
        .version = INAGG_PROTOCOL_VERSION,
        .type = WIRE_RESULT,
        .job = j->id,
        .rank = (uint16_t)rank,
        .token = j->token,
        .slot = slot,
        .round = c->round,
        .chunk = c->chunk,
        .count = c->n_elems,
        .flags = (uint8_t)(wire_ver_of_round(c->round) | (c->overflow ? WIRE_FLAG_OVERFLOW : 0)),
        .dtype = c->dtype,
        .exp = c->exp,
        .next_exp = c->next_exp,
    };
    tx_packet(t, q, &h, c->data, to);
}

/* A p4sgd result (type WIRE_RESULT, payload) or confirmation (WIRE_CONFIRM, none). */
/* The next confirmation queued for `rank` on this thread, or 0 (then *out is untouched). */
static int pop_confirm(const dp_thread_t *t, const job_t *j, uint32_t rank, p4_confirm_t *out)
{
    size_t ring = (size_t)t->index * j->world + rank;
    p4_confirm_ring_t *r = &j->confirm_rings[ring];
    if (r->count == 0)
        return 0;
    *out = j->confirm_items[ring * j->nslots + r->head];
    r->head = (r->head + 1) % j->nslots;
    r->count--;
    return 1;
}

/* Queue a confirmation for `rank`; 0 if its ring is full (then send one on its own). */
static int push_confirm(const dp_thread_t *t, const job_t *j, uint32_t rank, uint32_t slot,
                        uint32_t round)
{
    size_t ring = (size_t)t->index * j->world + rank;
    p4_confirm_ring_t *r = &j->confirm_rings[ring];
    if (r->count == j->nslots)
        return 0;
    j->confirm_items[ring * j->nslots + (r->head + r->count) % j->nslots] =
        (p4_confirm_t){slot, round};
    r->count++;
    return 1;
}

/* A p4sgd result (type WIRE_RESULT, payload; carries a queued confirmation when one waits)
 * or confirmation (WIRE_CONFIRM, no payload). */
static void tx_p4(dp_thread_t *t, tx_queue_t *q, const job_t *j, job_counters_t *c,
                  uint32_t slot, const p4slot_t *s, uint8_t type, uint32_t round, uint32_t rank,
                  const struct sockaddr_in *to)
{
    int result = type == WIRE_RESULT;
    wire_header_t h = {
        .version = INAGG_PROTOCOL_VERSION,
        .type = type,
        .job = j->id,
        .rank = (uint16_t)rank,
        .token = j->token,
        .slot = slot,
        .round = round,
        .count = result ? s->n_elems : 0,
        .flags = (uint8_t)(wire_ver_of_round(round) |
                           (result && s->overflow ? WIRE_FLAG_OVERFLOW : 0)),
        .dtype = s->dtype,
    };
    p4_confirm_t cf;
    if (result && pop_confirm(t, j, rank, &cf)) {
        h.chunk = cf.slot + 1u;
        h.exp = (int16_t)(uint16_t)(cf.round >> 16);
        h.next_exp = (int16_t)(uint16_t)cf.round;
        STAT_ADD(c->confirms_sent, 1);
        STAT_ADD(c->confirms_piggybacked, 1);
    }
    tx_packet(t, q, &h, s->result, to);
}

static int dtype_allowed(const job_t *j, uint8_t dtype)
{
    if (dtype == WIRE_INT32)
        return 1;
    if (dtype == WIRE_FIXED32)
        return j->float_mode == INAGG_FLOAT_FIXED;
    return j->float_mode == INAGG_FLOAT_NATIVE;
}

/* In-switch optimizer (optjob.h): the round of `chunk` is complete; its sum (network order)
 * becomes the chunk's new parameters, once. */
static void apply_optimizer(const dp_thread_t *t, const job_t *j, job_counters_t *c,
                            uint32_t chunk, uint32_t *data, uint32_t n, int set)
{
    float *scratch = j->opt_scratch + (size_t)t->index * j->elems;
    if (optjob_complete(j->opt, chunk, data, n, j->world, set, scratch) != 0)
        return; /* cannot happen: every contribution's chunk and length were checked */
    if (set)
        STAT_ADD(c->opt_uploads, 1);
    else
        STAT_ADD(c->opt_steps, 1);
}

/* Act on the verdict for an acknowledgement of `slot` (standalone, or carried by a
 * contribution: `piggybacked`, whose sender is then best reached with the results). */
static void p4_ack(dp_thread_t *t, tx_queue_t *q, const job_t *j, job_counters_t *c,
                   const wire_header_t *h, int piggybacked, const struct sockaddr_in *from)
{
    p4slot_t *s = &j->p4slots[h->slot];
    enum p4slot_verdict v = p4slot_ack(s, j->world, h);
    switch (v) {
    case P4V_ACKED:
        STAT_ADD(c->acks, 1);
        break;
    case P4V_CONFIRMED:
        STAT_ADD(c->acks, 1);
        for (uint32_t r = 0; r < j->world; r++) {
            /* Acknowledgements riding on contributions mean results are flowing: the
             * confirmations ride back on them. Otherwise (or when a ring is full) they go
             * on their own to where each rank's acknowledgements come from. */
            if (piggybacked && push_confirm(t, j, r, h->slot, h->round))
                continue;
            const struct sockaddr_in *to = &j->ack_addrs[(size_t)h->slot * j->world + r];
            if (to->sin_family != AF_INET) /* that rank only ever piggybacked: its results' */
                to = &j->addrs[(size_t)h->slot * j->world + r];
            tx_p4(t, q, j, c, h->slot, s, WIRE_CONFIRM, h->round, r, to);
            STAT_ADD(c->confirms_sent, 1);
            STAT_ADD(c->bytes_out, WIRE_HEADER_SIZE);
        }
        break;
    case P4V_RESEND_CONFIRM:
        tx_p4(t, q, j, c, h->slot, s, WIRE_CONFIRM, h->round, h->rank, from);
        STAT_ADD(c->confirms_sent, 1);
        STAT_ADD(c->confirm_resends, 1);
        STAT_ADD(c->bytes_out, WIRE_HEADER_SIZE);
        break;
    case P4V_DUP_ACK:
        STAT_ADD(c->drops[DROP_DUP_ACK], 1);
        break;
    case P4V_STALE:
        STAT_ADD(c->drops[DROP_STALE], 1);
        break;
    default:
        STAT_ADD(c->drops[DROP_AHEAD], 1);
        break;
    }
}

/* The p4sgd protocol's packets (p4slot.h): contributions (maybe carrying an
 * acknowledgement) and acknowledgements. */
static void handle_p4(dp_thread_t *t, tx_queue_t *q, const job_t *j, job_counters_t *c,
                      const wire_header_t *h, const uint32_t *payload,
                      const struct sockaddr_in *from)
{
    if (h->type == WIRE_ACK) {
        p4_ack(t, q, j, c, h, 0, from);
        return;
    }
    if (h->chunk != 0 && !j->opt) {
        /* An acknowledgement riding on this contribution (wire.h). Applied first, so its
         * confirmations can ride on this very round's results. Optimizer jobs use `chunk`
         * for the chunk index and send acknowledgements on their own. */
        wire_header_t ack = *h;
        ack.type = WIRE_ACK;
        ack.slot = h->chunk - 1u;
        ack.round = ((uint32_t)(uint16_t)h->exp << 16) | (uint16_t)h->next_exp;
        ack.count = 0;
        if (ack.slot < j->nslots && job_slot_owner(j, ack.slot) == t->index)
            p4_ack(t, q, j, c, &ack, 1, &j->addrs[(size_t)ack.slot * j->world + h->rank]);
        else
            STAT_ADD(c->drops[DROP_BAD_SLOT], 1);
    }
    p4slot_t *s = &j->p4slots[h->slot];
    enum p4slot_verdict v = p4slot_contribute(s, j->world, j->elems, h, payload);
    const struct sockaddr_in *addrs = &j->addrs[(size_t)h->slot * j->world];
    size_t result_bytes = WIRE_HEADER_SIZE + (size_t)s->n_elems * 4u;
    switch (v) {
    case P4V_PARTIAL:
        STAT_ADD(c->contributions, 1);
        break;
    case P4V_COMPLETE:
        STAT_ADD(c->contributions, 1);
        STAT_ADD(c->rounds, 1);
        if (j->opt)
            apply_optimizer(t, j, c, s->chunk, s->result, s->n_elems, s->set);
        for (uint32_t r = 0; r < j->world; r++)
            tx_p4(t, q, j, c, h->slot, s, WIRE_RESULT, s->round, r, &addrs[r]);
        STAT_ADD(c->results_sent, j->world);
        STAT_ADD(c->bytes_out, result_bytes * j->world);
        break;
    case P4V_RESEND_RESULT:
        tx_p4(t, q, j, c, h->slot, s, WIRE_RESULT, s->round, h->rank, from);
        STAT_ADD(c->resends, 1);
        STAT_ADD(c->results_sent, 1);
        STAT_ADD(c->bytes_out, result_bytes);
        break;
    case P4V_DUP_OPEN:
        STAT_ADD(c->drops[DROP_DUP_OPEN], 1);
        break;
    case P4V_STALE:
        STAT_ADD(c->drops[DROP_STALE], 1);
        break;
    case P4V_AHEAD:
        STAT_ADD(c->drops[DROP_AHEAD], 1);
        break;
    case P4V_MISMATCH:
    default:
        STAT_ADD(c->drops[DROP_MISMATCH], 1);
        break;
    }
}

static void handle_packet(dp_thread_t *t, tx_queue_t *q, const uint8_t *buf, size_t len,
                          const struct sockaddr_in *from, uint64_t now_ms)
{
    struct inagg_switch *sw = t->sw;
    wire_header_t h;
    enum wire_status ws = wire_decode(buf, len, &h);
    if (ws != WIRE_OK) {
        STAT_ADD(t->drops[ws], 1);
        return;
    }
    if (h.type != WIRE_CONTRIB && h.type != WIRE_ACK) {
        STAT_ADD(t->drops[DROP_NOT_RESULT_PATH], 1);
        return;
    }
    job_t *j = h.job < SWITCH_MAX_JOBS
                   ? atomic_load_explicit(&sw->jobs[h.job], memory_order_acquire)
                   : NULL;
    if (!j) {
        STAT_ADD(t->drops[DROP_UNKNOWN_JOB], 1);
        return;
    }
    if (h.token != j->token) {
        STAT_ADD(t->drops[DROP_BAD_TOKEN], 1);
        return;
    }
    job_counters_t *c = &j->threads[t->index].c;
    int reason = -1;
    if (atomic_load_explicit(&j->state, memory_order_acquire) != JOB_ACTIVE)
        reason = DROP_JOB_NOT_ACTIVE;
    else if (h.rank >= j->world)
        reason = DROP_BAD_RANK;
    else if (h.slot >= j->nslots)
        reason = DROP_BAD_SLOT;
    else if (job_slot_owner(j, h.slot) != t->index)
        reason = DROP_WRONG_THREAD;
    else if (h.count > j->elems)
        reason = DROP_BAD_COUNT;
    else if (h.type == WIRE_ACK && j->protocol != INAGG_PROTO_P4SGD)
        reason = DROP_WRONG_PROTOCOL;
    else if (h.type == WIRE_CONTRIB && !dtype_allowed(j, h.dtype))
        reason = DROP_DTYPE_NOT_ALLOWED;
    else if (j->opt && h.type == WIRE_CONTRIB && h.dtype != WIRE_FLOAT32)
        reason = DROP_DTYPE_NOT_ALLOWED; /* gradients are float32 */
    else if (j->opt && h.type == WIRE_CONTRIB && optjob_chunk_len(j->opt, h.chunk) != h.count)
        reason = DROP_BAD_CHUNK;
    if (reason >= 0) {
        STAT_ADD(c->drops[reason], 1);
        return;
    }
    STAT_ADD(c->bytes_in, len);
    atomic_store_explicit(&j->threads[t->index].last_seen_ms[h.rank], now_ms,
                          memory_order_relaxed);
    if (h.type == WIRE_ACK)
        j->ack_addrs[(size_t)h.slot * j->world + h.rank] = *from;
    else
        j->addrs[(size_t)h.slot * j->world + h.rank] = *from;
    const uint32_t *payload = (const uint32_t *)(const void *)(buf + WIRE_HEADER_SIZE);
    if (j->protocol == INAGG_PROTO_P4SGD) {
        handle_p4(t, q, j, c, &h, payload, from);
        return;
    }

    slot_t *s = &j->slots[h.slot];
    enum slot_verdict v = slot_contribute(s, j->world, &h, payload);
    const slot_copy_t *copy = slot_copy_of(s, h.round);
    size_t result_bytes = WIRE_HEADER_SIZE + (size_t)copy->n_elems * 4u;
    switch (v) {
    case SLOT_PARTIAL:
        STAT_ADD(c->contributions, 1);
        break;
    case SLOT_COMPLETE:
        STAT_ADD(c->contributions, 1);
        STAT_ADD(c->rounds, 1);
        if (j->opt)
            apply_optimizer(t, j, c, copy->chunk, copy->data, copy->n_elems, copy->set);
        for (uint32_t r = 0; r < j->world; r++)
            tx_result(t, q, j, h.slot, copy, r, &j->addrs[(size_t)h.slot * j->world + r]);
        STAT_ADD(c->results_sent, j->world);
        STAT_ADD(c->bytes_out, result_bytes * j->world);
        break;
    case SLOT_RESEND:
        tx_result(t, q, j, h.slot, copy, h.rank, from);
        STAT_ADD(c->resends, 1);
        STAT_ADD(c->results_sent, 1);
        STAT_ADD(c->bytes_out, result_bytes);
        break;
    case SLOT_DUP_OPEN:
        STAT_ADD(c->drops[DROP_DUP_OPEN], 1);
        break;
    case SLOT_STALE:
        STAT_ADD(c->drops[DROP_STALE], 1);
        break;
    case SLOT_AHEAD:
        STAT_ADD(c->drops[DROP_AHEAD], 1);
        break;
    case SLOT_MISMATCH:
    default:
        STAT_ADD(c->drops[DROP_MISMATCH], 1);
        break;
    }
}

void *dataplane_main(void *arg)
{
    dp_thread_t *t = arg;
    struct inagg_switch *sw = t->sw;
    uint32_t batch = sw->cfg.batch < DP_MAX_BATCH ? sw->cfg.batch : DP_MAX_BATCH;
    if (batch == 0)
        batch = 1;
    rx_batch_t *rx = calloc(1, sizeof(*rx));
    tx_queue_t *q = calloc(1, sizeof(*q));
    uint8_t *bufs = rx ? malloc((size_t)batch * DP_RX_BUF) : NULL;
    if (!rx || !q || !bufs) {
        LOG_E("dataplane thread %u: out of memory", t->index);
        free(rx);
        free(q);
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
        STAT_ADD(t->packets_in, (uint64_t)n);
        uint64_t now_ms = server_now_ms();
        uint64_t dropped_before = t->faults_in.dropped;
        int k = faults_on_recv(&t->faults_in, n, rx->order);
        STAT_ADD(t->fault_drops, t->faults_in.dropped - dropped_before);
        for (int i = 0; i < k; i++) {
            int m = rx->order[i];
            handle_packet(t, q, rx->bufs + (size_t)m * DP_RX_BUF, rx->msgs[m].msg_len,
                          &rx->from[m], now_ms);
        }
        tx_flush(t, q);
    }
    free(rx->bufs);
    free(rx);
    free(q);
    atomic_store(&t->running, 0);
    return NULL;
}
