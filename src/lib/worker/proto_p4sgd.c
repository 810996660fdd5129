/*
 * proto_p4sgd.c - the p4sgd protocol on the worker side: the small-message engine of P4SGD
 * (Algorithm 3), latency-centric.
 *
 * Each allreduce is one packet on one slot. The n-th operation of a communicator uses slot
 * n % slots, as its (n / slots)-th round; it may start only once that slot's previous round
 * was confirmed by the switch. Per slot:
 *
 *   FREE --start--> AGGREGATING --result--> ACKNOWLEDGING --confirmation--> FREE
 *          (send contribution,     (deliver to the caller, the operation is done;
 *           timer: resend it)       send acknowledgement, timer: resend it)
 *
 * The operation completes when the result arrives: the acknowledgement phase is off the
 * critical path. A result that comes again while acknowledging (the acknowledgement was lost)
 * is answered with the acknowledgement at once. Timers use the shared RTO estimator (rto.h),
 * with Karn's rule and backoff.
 *
 * An allreduce larger than a packet (inagg_iallreduce, inagg_allreduce) is a p4_big_t: its
 * chunks take the next slots as they come free, in call order; until every chunk has a slot
 * it waits in the engine's backlog, and any later operation starts only after it. Each call
 * into the engine starts what it can of the backlog.
 *
 * The completion signal (inagg_comm_event_fd) is an epoll descriptor over the endpoints that
 * bring results and confirmations, a timerfd armed at the earliest timer of the busy slots, and the
 * communicator's eventfd (raised on a failure): readable when a call would move a request
 * on. The timer is re-armed at the end of each call only when its deadline moved.
 *
 * There is no thread: progress happens inside the calls (start, progress, wait, allreduce),
 * in the caller's thread, so a result reaches the caller without a thread hand-off. One
 * thread at a time may use an engine (the communicator's rule). A call fails with
 * -ETIMEDOUT when it has spent timeout_ms inside the library without any packet from
 * the switch while work was outstanding (time the caller spends computing does not count).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/transport/transport.h"
#include "lib/wire/wire.h"
#include "lib/worker/proto.h"
#include "lib/worker/rto.h"

typedef struct p4_big p4_big_t;

/* One small allreduce; the caller owns it (it lives in an inagg_request_t). */
typedef struct p4_op {
    const void *send;
    void *recv;
    uint32_t count;
    inagg_dtype_t dtype;
    inagg_op_t op;
    uint32_t chunk; /* chunk index (carried when the engine tags chunks) */
    int set; /* a parameter upload (WIRE_FLAG_SET) */
    int done; /* set by the engine when the result was delivered */
    int result; /* 0 or -EOVERFLOW (delivered), or the failure (-errno) */
    p4_big_t *parent; /* the allreduce this is a chunk of, or NULL */
} p4_op_t;

/* An allreduce of any size: chunk i is the (i % ring)-th op, its slot the i-th from the one
 * the first chunk took (no other operation starts in between: see the backlog). */
struct p4_big {
    worker_call_t call;
    size_t nchunks, started;
    size_t left; /* chunks not yet delivered */
    uint32_t ring; /* ops[]: at most slots chunks are in flight */
    p4_op_t *ops;
    int result; /* 0, -EOVERFLOW (delivered), or the failure */
    p4_big_t *next; /* in the backlog */
};

#define P4_RX_BATCH 64
#define P4_MAX_BLOCK_US 5000 /* longest single wait, so the abort flag is seen */
#define P4_ACK_DELAY_US                                                                            \
    1000 /* an acknowledgement waits this long for a contribution to ride on:
                              * a pipelined mini-batch (PROTOCOL.md 9.3) */

enum p4_phase { P4W_FREE = 0, P4W_AGGREGATING, P4W_ACKNOWLEDGING };

typedef struct p4wslot {
    uint32_t slot;
    uint32_t round; /* round in flight, or the next one when free */
    int phase;
    p4_op_t *op; /* while aggregating */
    int ack_pending; /* acknowledging, and the acknowledgement has not left yet */
    worker_timer_t tm; /* of the contribution or the acknowledgement in flight */
    uint8_t *pkt; /* the contribution, kept for retransmission */
    uint32_t pkt_len;
    uint8_t ack[WIRE_HEADER_MAX]; /* the acknowledgement, sealed when it first leaves alone */
    int ack_sealed; /* ack holds this round's (it rides on a contribution most often) */
    int ack_hurried; /* this round's acknowledgement went again for a waiting backlog */
    transport_addr_t dst; /* the switch queue that serves this slot */
} p4wslot_t;

typedef struct p4engine p4engine_t;
static void p4engine_destroy(p4engine_t *e);
static void p4engine_fail(p4engine_t *e, int rc);

struct p4engine {
    worker_params_t p;
    transport_t *tp; /* contributions out, results in */
    transport_t *ack_tp; /* acknowledgements out, confirmations in (see p4engine_create) */
    transport_t *mc_tp; /* results sent once to the job's multicast group, or NULL */
    p4wslot_t *ws; /* [slots] */
    uint64_t next_op; /* operations started so far: the next uses slot next_op % slots */
    uint32_t busy; /* slots not free */
    uint32_t aggregating; /* slots waiting for a result */
    uint8_t *pkt_arena;
    size_t pkt_cap;
    transport_rx_t rx[2 * P4_RX_BATCH]; /* fault injection may duplicate a batch */
    worker_txq_t tx; /* contributions, sent on tp */
    worker_txq_t acks; /* acknowledgements, sent on ack_tp */
    rto_estimator_t rto;
    uint64_t stall_ns; /* time spent in progress calls since the last accepted packet */
    int failed;
    worker_counters_t c;
    p4_big_t *backlog, *backlog_tail; /* allreduces with chunks not started, in call order */
    int epoll_fd, timer_fd; /* the completion signal's descriptor and its timer (-1: none) */
    uint64_t timer_armed_ns; /* the timer's deadline (UINT64_MAX: disarmed) */
};

/* The engine of a communicator (threads and float_mode in p are ignored). 0, or -errno with a
 * reason in err. */
static int p4engine_create(const worker_params_t *p, p4engine_t **out, char *err, size_t errlen)
{
    p4engine_t *e = calloc(1, sizeof(*e));
    if (!e)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    e->p = *p;
    e->epoll_fd = e->timer_fd = -1;
    e->timer_armed_ns = UINT64_MAX;
    worker_counters_init(&e->c, &e->rto, p);
    e->pkt_cap = worker_hdr_bytes(p) + (size_t)p->elems * 4u;
    e->ws = calloc(p->slots, sizeof(p4wslot_t));
    e->pkt_arena = malloc((size_t)p->slots * e->pkt_cap);
    int rc = 0;
    if (!e->ws || !e->pkt_arena) {
        rc = set_err(err, errlen, -ENOMEM, "out of memory for %u slots of %u elements", p->slots,
                     p->elems);
        goto fail;
    }
    /* streams 17 and 18: decisions of their own, apart from the switchml engines' (0..) */
    rc = worker_open_endpoint(p, p->socket_buffer, 17u, &e->tp, err, errlen);
    if (rc != 0)
        goto fail;
    /* A second endpoint for the acknowledgement phase: the switch answers an acknowledgement
     * to the address it came from, so confirmations land here and never wake a caller that
     * is blocked waiting for a result on `tp`; they are read when the caller next enters the
     * library (or when it waits for a slot to be confirmed). */
    rc = worker_open_endpoint(p, 1 << 20, 18u, &e->ack_tp, err, errlen);
    if (rc != 0)
        goto fail;
    /* A third for results the switch sends once to the job's multicast group (PROTOCOL.md
     * 9.6): bound to the group, so a rank's own results still come to `tp`. */
    if (p->mcast_group) {
        rc = worker_open_mcast_endpoint(p, p->socket_buffer, 19u, &e->mc_tp, err, errlen);
        if (rc != 0)
            goto fail;
    }
    if (worker_txq_init(&e->tx, e->tp, 2 * (int)p->slots + 1) != 0 ||
        worker_txq_init(&e->acks, e->ack_tp, 2 * (int)p->slots + 1) != 0) {
        rc = set_err(err, errlen, -ENOMEM, "out of memory");
    }
    for (uint32_t k = 0; k < p->slots && rc == 0; k++) {
        p4wslot_t *w = &e->ws[k];
        w->slot = k;
        w->pkt = e->pkt_arena + (size_t)k * e->pkt_cap;
        rc = worker_slot_addr(p, e->tp, k, &w->dst);
        if (rc != 0)
            rc = set_err(err, errlen, rc, "no address for the switch queue of slot %u", k);
    }
    if (rc != 0)
        goto fail;
    *out = e;
    return 0;
fail:
    p4engine_destroy(e);
    return rc;
}

static void p4engine_destroy(p4engine_t *e)
{
    if (!e)
        return;
    transport_close(e->tp);
    transport_close(e->ack_tp);
    if (e->mc_tp)
        transport_close(e->mc_tp);
    free(e->ws);
    free(e->pkt_arena);
    worker_txq_free(&e->tx);
    worker_txq_free(&e->acks);
    if (e->epoll_fd >= 0)
        close(e->epoll_fd);
    if (e->timer_fd >= 0)
        close(e->timer_fd);
    free(e);
}

/* ---- sending --------------------------------------------------------------------------- */

/* Send everything queued: contributions first (they are on the critical path). */
static int flush_sends(p4engine_t *e)
{
    int rc = worker_txq_flush(&e->tx);
    int rc2 = worker_txq_flush(&e->acks);
    return rc < 0 ? rc : rc2;
}

/* (Re)send what the slot's phase calls for and arm its timer with timeout rto_us. Packets are
 * queued and leave together at the end of the call (one send per endpoint): contributions
 * on the result endpoint, acknowledgements on the acknowledgement endpoint. */
static void send_phase(p4engine_t *e, p4wslot_t *w, uint64_t now)
{
    if (w->phase == P4W_AGGREGATING) {
        worker_txq_push(&e->tx, w->pkt, w->pkt_len, &w->dst, &e->c);
    } else {
        if (!w->ack_sealed) { /* its first time on its own: a MAC only now */
            wire_header_t h = worker_header(&e->p, WIRE_ACK, w->slot, w->round);
            (void)worker_seal(&e->p, &h, w->ack);
            w->ack_sealed = 1;
        }
        worker_txq_push(&e->acks, w->ack, worker_hdr_bytes(&e->p), &w->dst, &e->c);
    }
    worker_timer_arm(&w->tm, now);
}

static int p4engine_can_start(const p4engine_t *e)
{
    return !e->failed && e->ws[e->next_op % e->p.slots].phase == P4W_FREE;
}

/* A slot whose acknowledgement waits to leave and that the same switch thread serves as
 * slot `with`, or NULL. */
static p4wslot_t *pending_ack_for(p4engine_t *e, uint32_t with)
{
    if (e->busy == e->aggregating)
        return NULL; /* nothing is acknowledging */
    for (uint32_t k = 0; k < e->p.slots; k++)
        if (e->ws[k].ack_pending && worker_slot_queue(&e->p, k) == worker_slot_queue(&e->p, with))
            return &e->ws[k];
    return NULL;
}

static void start_on_slot(p4engine_t *e, p4wslot_t *w, p4_op_t *op, uint64_t now)
{
    w->ack_sealed = 0; /* this round's acknowledgement is made when it first leaves alone */
    w->ack_hurried = 0;
    wire_header_t h = worker_header(&e->p, WIRE_CONTRIB, w->slot, w->round);
    h.count = (uint16_t)op->count;
    h.dtype = op->dtype == INAGG_INT32 ? WIRE_INT32 : WIRE_FLOAT32;
    if (op->set)
        h.flags |= WIRE_FLAG_SET;
    p4wslot_t *a = e->p.chunk_tags ? NULL : pending_ack_for(e, w->slot);
    if (e->p.chunk_tags)
        h.chunk = op->chunk;
    if (a) {
        /* The acknowledgement rides on this contribution (wire.h): one packet fewer for the
         * switch and for us. Its timer now guards the ride: if the contribution is lost, the
         * acknowledgement goes again on its own. */
        wire_put_piggyback(&h, a->slot, a->round);
        a->ack_pending = 0;
        worker_timer_arm(&a->tm, now);
    }
    worker_encode_plain(op->dtype, op->send, (uint32_t *)(void *)(w->pkt + worker_hdr_bytes(&e->p)),
                        op->count);
    w->pkt_len = worker_seal(&e->p, &h, w->pkt);
    w->op = op;
    op->done = 0;
    op->result = 0;
    w->phase = P4W_AGGREGATING;
    worker_timer_fresh(&w->tm, &e->rto);
    e->busy++;
    e->aggregating++;
    e->next_op++;
    send_phase(e, w, now);
}

/* Send every waiting acknowledgement on its own (nothing is about to carry them). */
static void send_pending_acks(p4engine_t *e, uint64_t now)
{
    if (e->busy == e->aggregating)
        return;
    for (uint32_t k = 0; k < e->p.slots; k++) {
        p4wslot_t *w = &e->ws[k];
        if (w->ack_pending) {
            w->ack_pending = 0;
            send_phase(e, w, now);
        }
    }
}

/* ---- receiving ------------------------------------------------------------------------- */

static void deliver(p4engine_t *e, p4wslot_t *w, const wire_header_t *h, const uint32_t *payload)
{
    p4_op_t *op = w->op;
    worker_decode_plain(op->dtype, op->op, e->p.world, payload, op->recv, op->count);
    if (op->dtype == INAGG_INT32 && (h->flags & WIRE_FLAG_OVERFLOW))
        op->result = -EOVERFLOW;
    op->done = 1;
    w->op = NULL;
    if (op->parent) {
        if (op->result != 0)
            op->parent->result = op->result;
        op->parent->left--;
    }
}

/* The switch confirmed `round` of slot w: every rank has its result; the slot is free. A
 * confirmation for anything else (stale, duplicate) is ignored. */
static void confirm(p4engine_t *e, p4wslot_t *w, uint32_t round)
{
    if (w->phase != P4W_ACKNOWLEDGING || w->round != round || w->ack_pending)
        return;
    w->phase = P4W_FREE;
    w->round++;
    e->busy--;
    e->stall_ns = 0;
}

static void handle_packet(p4engine_t *e, const uint8_t *buf, size_t len, uint64_t now)
{
    wire_header_t h;
    if (worker_open_packet(&e->p, buf, len, &h) != 0 ||
        (h.type != WIRE_RESULT && h.type != WIRE_CONFIRM) || !worker_packet_ours(&e->p, &h)) {
        WORKER_CNT_ADD(e->c.invalid, 1);
        return;
    }
    uint32_t cslot, cround;
    if (h.type == WIRE_RESULT && wire_get_piggyback(&h, &cslot, &cround)) {
        /* A confirmation riding on this result. */
        if (cslot < e->p.slots)
            confirm(e, &e->ws[cslot], cround);
        else
            WORKER_CNT_ADD(e->c.invalid, 1);
    }
    p4wslot_t *w = &e->ws[h.slot];
    if (w->phase == P4W_FREE || h.round != w->round) {
        WORKER_CNT_ADD(e->c.duplicates, 1);
        return;
    }
    if (h.type == WIRE_CONFIRM) {
        if (w->phase != P4W_ACKNOWLEDGING)
            WORKER_CNT_ADD(e->c.invalid, 1); /* a confirmation before we have the result */
        else
            confirm(e, w, h.round);
        return;
    }
    if (w->phase == P4W_ACKNOWLEDGING) {
        /* The result again: our acknowledgement was lost or is late. Answer at once. */
        WORKER_CNT_ADD(e->c.duplicates, 1);
        w->ack_pending = 0;
        send_phase(e, w, now);
        return;
    }
    uint8_t want_dtype = w->op->dtype == INAGG_INT32 ? WIRE_INT32 : WIRE_FLOAT32;
    if (h.count != w->op->count || h.dtype != want_dtype) {
        WORKER_CNT_ADD(e->c.invalid, 1);
        return;
    }
    worker_count_received(&e->c, len);
    worker_timer_answered(&w->tm, now, &e->c, &e->rto);
    e->stall_ns = 0;
    deliver(e, w, &h, (const uint32_t *)(const void *)(buf + worker_hdr_bytes(&e->p)));
    e->aggregating--;
    w->phase = P4W_ACKNOWLEDGING;
    worker_timer_fresh(&w->tm, &e->rto);
    /* Delayed acknowledgement: the next contribution to this switch thread carries it; if
     * none leaves within P4_ACK_DELAY_US it goes on its own (fire_timers). */
    w->ack_pending = 1;
    w->tm.deadline_ns = now + (uint64_t)util_min_u64(P4_ACK_DELAY_US, w->tm.rto_us) * 1000u;
}

static uint64_t fire_timers(p4engine_t *e, uint64_t now)
{
    uint64_t next = UINT64_MAX;
    int expired = 0;
    if (e->busy == 0)
        return next;
    for (uint32_t k = 0; k < e->p.slots; k++) {
        p4wslot_t *w = &e->ws[k];
        if (w->phase == P4W_FREE)
            continue;
        if (now >= w->tm.deadline_ns && w->ack_pending) {
            w->ack_pending = 0; /* nothing carried it in time: it goes on its own */
            send_phase(e, w, now);
        } else if (now >= w->tm.deadline_ns) {
            worker_timer_expired(&w->tm, e->p.rto_max_us, &e->c);
            send_phase(e, w, now);
            expired = 1;
        }
        if (w->tm.deadline_ns < next)
            next = w->tm.deadline_ns;
    }
    if (expired)
        rto_backoff(&e->rto);
    return next;
}

/* The earliest timer deadline of the busy slots (UINT64_MAX: none). */
static uint64_t next_deadline(const p4engine_t *e)
{
    uint64_t next = UINT64_MAX;
    for (uint32_t k = 0; e->busy > 0 && k < e->p.slots; k++)
        if (e->ws[k].phase != P4W_FREE && e->ws[k].tm.deadline_ns < next)
            next = e->ws[k].tm.deadline_ns;
    return next;
}

static int fail_with(p4engine_t *e, int rc, char *detail, size_t dlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int fail_with(p4engine_t *e, int rc, char *detail, size_t dlen, const char *fmt, ...)
{
    if (detail && dlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, dlen, fmt, ap);
        va_end(ap);
    }
    p4engine_fail(e, rc);
    return rc;
}

/* Receive what is waiting on tp (no waiting) and handle it. Returns packets or -errno. */
static int receive(p4engine_t *e, transport_t *tp)
{
    int n = transport_recv(tp, e->rx, 2 * P4_RX_BATCH, 0);
    if (n <= 0)
        return n;
    uint64_t now = util_now_ns();
    for (int i = 0; i < n; i++)
        handle_packet(e, e->rx[i].data, e->rx[i].len, now);
    return n;
}

static int progress_once(p4engine_t *e, int block, char *detail, size_t dlen)
{
    if (e->failed)
        return set_err(detail, dlen, -ECANCELED, "the communicator failed earlier");
    if (atomic_load_explicit(e->p.abort_flag, memory_order_acquire))
        return fail_with(e, -ECANCELED, detail, dlen, "aborted: the job failed");
    uint64_t start = util_now_ns();
    uint64_t stall_before = e->stall_ns;
    /* Confirmations first: they may cancel acknowledgement timers that are due. A caller
     * about to sleep learns from the wait whether any came, so it reads them here only when a
     * timer is due (a receive that finds nothing costs a system call per operation). */
    int n = 0;
    if (!block || next_deadline(e) <= start)
        n = receive(e, e->ack_tp);
    if (block && e->aggregating == 0)
        send_pending_acks(e, start); /* we wait for confirmations: they need these */
    uint64_t next = fire_timers(e, start);
    int wait_ms = 0;
    if (block && n == 0) {
        uint64_t wait_us = P4_MAX_BLOCK_US;
        if (next != UINT64_MAX)
            wait_us = next <= start ? 0 : util_min_u64((next - start) / 1000u + 1, wait_us);
        wait_ms = (int)((wait_us + 999) / 1000);
    }
    int frc = flush_sends(e);
    if (frc < 0)
        return fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    if (n >= 0) {
        /* Sleep on both endpoints (confirmations of standalone acknowledgements free the
         * slots the next operations need); after a wait, read only the endpoints it found
         * ready (ready < 0: no wait, look at both). */
        int ready = -1;
        if (wait_ms > 0) {
            transport_t *const ts[3] = {e->ack_tp, e->tp, e->mc_tp};
            ready = transport_wait_ready_spin(ts, 3, wait_ms, e->p.poll_us, NULL);
            if (ready < 0)
                return fail_with(e, -EIO, detail, dlen, "waiting failed: %s", strerror(-ready));
        }
        n = e->mc_tp && (ready < 0 || (ready & 4)) ? receive(e, e->mc_tp) : 0;
        if (n >= 0 && (ready < 0 || (ready & 2))) {
            int u = receive(e, e->tp);
            n = u < 0 ? u : n + u;
        }
        if (n >= 0 && (ready < 0 ? n == 0 || e->aggregating == 0 : (ready & 1) != 0))
            n = receive(e, e->ack_tp);
    }
    if (n < 0)
        return fail_with(e, -EIO, detail, dlen, "receive failed: %s", strerror(-n));
    uint64_t now = util_now_ns();
    fire_timers(e, now);
    frc = flush_sends(e);
    if (frc < 0)
        return fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    if (e->busy > 0 && e->stall_ns == stall_before) {
        e->stall_ns += now - start;
        if (e->stall_ns > (uint64_t)e->p.timeout_ms * 1000000ull) {
            return fail_with(e, -ETIMEDOUT, detail, dlen,
                             "no packet from the switch while waiting (%u slots busy)", e->busy);
        }
    }
    return 0;
}

/* Start what the backlog's chunks can, in call order: how many started. */
static int advance_backlog(p4engine_t *e, uint64_t now)
{
    int n = 0;
    while (e->backlog && p4engine_can_start(e)) {
        p4_big_t *b = e->backlog;
        size_t i = b->started++, elems = e->p.elems, off = i * elems;
        size_t len = b->call.count - off < elems ? b->call.count - off : elems;
        p4_op_t *op = &b->ops[i % b->ring]; /* chunk i - ring's: delivered, its slot is free */
        *op = (p4_op_t){.send = (const char *)b->call.send + off * 4u,
                        .recv = (char *)b->call.recv + off * 4u,
                        .count = (uint32_t)len,
                        .dtype = b->call.dtype,
                        .op = b->call.op,
                        .chunk = (uint32_t)i,
                        .set = b->call.set,
                        .parent = b};
        start_on_slot(e, &e->ws[e->next_op % e->p.slots], op, now);
        n++;
        if (b->started == b->nchunks) {
            e->backlog = b->next;
            if (!e->backlog)
                e->backlog_tail = NULL;
        }
    }
    return n;
}

/* The completion signal's timer follows the earliest deadline of the busy slots; a system
 * call only when that moved. Re-arming also makes an expired timer unreadable. */
static void rearm_timer(p4engine_t *e)
{
    if (e->timer_fd < 0)
        return;
    uint64_t next = next_deadline(e);
    if (next == e->timer_armed_ns)
        return;
    struct itimerspec its = {0}; /* zero: disarmed */
    if (next != UINT64_MAX) {
        its.it_value.tv_sec = (time_t)(next / 1000000000ull);
        its.it_value.tv_nsec = (long)(next % 1000000000ull);
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
            its.it_value.tv_nsec = 1;
    }
    (void)timerfd_settime(e->timer_fd, TFD_TIMER_ABSTIME, &its, NULL);
    e->timer_armed_ns = next;
}

/* The backlog waits for a slot whose acknowledgement rode on a contribution: the switch keeps
 * its confirmation to ride on our next result, and with nothing aggregating no result comes.
 * Send the acknowledgement alone once, as its timer would later, and the switch confirms it
 * on its own. How many packets that queued. */
static int unblock_backlog(p4engine_t *e, uint64_t now)
{
    p4wslot_t *w = &e->ws[e->next_op % e->p.slots];
    if (!e->backlog || e->aggregating > 0 || w->phase != P4W_ACKNOWLEDGING || w->ack_hurried)
        return 0;
    w->ack_hurried = 1;
    w->ack_pending = 0;
    send_phase(e, w, now);
    return 1;
}

/* One step of progress (progress_once), then the backlog's chunks that found a slot leave,
 * and the signal's timer follows the new deadlines. */
static int p4engine_progress(p4engine_t *e, int block, char *detail, size_t dlen)
{
    int rc = progress_once(e, block, detail, dlen);
    if (rc == 0 && e->backlog &&
        advance_backlog(e, util_now_ns()) + unblock_backlog(e, util_now_ns()) > 0) {
        int frc = flush_sends(e);
        if (frc < 0)
            rc = fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    }
    rearm_timer(e);
    return rc;
}

/* The next operation needs its slot confirmed: if our acknowledgement for it still waits for
 * a ride, send it now. */
static void hurry_next_slot(p4engine_t *e)
{
    p4wslot_t *w = &e->ws[e->next_op % e->p.slots];
    if (w->ack_pending) {
        w->ack_pending = 0;
        send_phase(e, w, util_now_ns());
    }
}

/* Send what start queued. The first operation of a burst leaves at once; operations started
 * while others await their results ride together in one send at the next call into the
 * library, unless a caller may sleep on the completion signal: its next call may come only
 * when a result wakes it, a round trip later. */
static int flush_started(p4engine_t *e, char *detail, size_t dlen)
{
    int frc = 0;
    if (e->aggregating <= 1 || e->epoll_fd >= 0)
        frc = flush_sends(e);
    rearm_timer(e);
    if (frc < 0)
        return fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    return 0;
}

static int p4engine_start(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen)
{
    for (;;) { /* after the backlog (call order), on a free slot */
        advance_backlog(e, util_now_ns());
        if (!e->backlog && p4engine_can_start(e))
            break;
        hurry_next_slot(e);
        int rc = p4engine_progress(e, 1, detail, dlen);
        if (rc != 0)
            return rc;
    }
    start_on_slot(e, &e->ws[e->next_op % e->p.slots], op, util_now_ns());
    return flush_started(e, detail, dlen);
}

static int p4engine_wait(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen)
{
    while (!op->done) {
        int rc = p4engine_progress(e, 1, detail, dlen);
        if (rc != 0)
            return rc;
    }
    return op->result;
}

/* Start allreduce r as b (its chunks as slots come free, after the backlog's): 0 or -errno.
 * b->ops is the caller's to free, after the allreduce ended. */
static int p4engine_start_big(p4engine_t *e, p4_big_t *b, const worker_call_t *r, char *detail,
                              size_t dlen)
{
    size_t elems = e->p.elems;
    *b = (p4_big_t){.call = *r, .nchunks = (r->count + elems - 1) / elems};
    b->left = b->nchunks;
    b->ring = b->nchunks < e->p.slots ? (uint32_t)b->nchunks : e->p.slots;
    b->ops = calloc(b->ring ? b->ring : 1, sizeof(p4_op_t));
    if (!b->ops)
        return set_err(detail, dlen, -ENOMEM, "out of memory");
    if (e->failed)
        return set_err(detail, dlen, -ECANCELED, "the communicator failed earlier");
    if (b->nchunks == 0)
        return 0;
    if (e->backlog_tail)
        e->backlog_tail->next = b;
    else
        e->backlog = b;
    e->backlog_tail = b;
    advance_backlog(e, util_now_ns());
    return flush_started(e, detail, dlen);
}

/* Wait until every chunk of b was delivered: its result. */
static int p4engine_wait_big(p4engine_t *e, p4_big_t *b, char *detail, size_t dlen)
{
    while (b->left > 0) {
        if (e->backlog && !p4engine_can_start(e))
            hurry_next_slot(e);
        int rc = p4engine_progress(e, 1, detail, dlen);
        if (rc != 0)
            return rc;
    }
    if (b->result == -EOVERFLOW)
        return set_err(detail, dlen, b->result, "int32 sum wrapped around in at least one element");
    if (b->result != 0)
        return set_err(detail, dlen, b->result, "the allreduce failed");
    return 0;
}

static int p4engine_drain(p4engine_t *e, uint32_t timeout_ms, char *detail, size_t dlen)
{
    uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (e->busy > 0 && !e->failed) {
        if (util_now_ns() > deadline)
            return set_err(detail, dlen, -ETIMEDOUT, "%u slots still unconfirmed after %u ms",
                           e->busy, timeout_ms);
        int rc = p4engine_progress(e, 1, detail, dlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void p4engine_fail(p4engine_t *e, int rc)
{
    e->failed = 1;
    for (uint32_t k = 0; k < e->p.slots; k++) {
        p4wslot_t *w = &e->ws[k];
        if (w->op) {
            w->op->result = rc;
            w->op->done = 1;
            if (w->op->parent) {
                w->op->parent->result = rc;
                w->op->parent->left--;
            }
            w->op = NULL;
        }
        w->phase = P4W_FREE;
        w->ack_pending = 0;
    }
    e->busy = 0;
    e->aggregating = 0;
    for (p4_big_t *b = e->backlog; b; b = b->next) { /* chunks that never started */
        b->result = rc;
        b->left = 0;
    }
    e->backlog = e->backlog_tail = NULL;
    rearm_timer(e);
}

/* ---- the protocol's ops ---------------------------------------------------------------- */

typedef struct p4_request {
    inagg_request_t base;
    int is_big; /* an inagg_iallreduce of more than one packet: big, else op */
    p4_op_t op;
    p4_big_t big;
} p4_request_t;

static int p4_create(const worker_params_t *p, void **state, char *err, size_t errlen)
{
    char why[160];
    p4engine_t *e = NULL;
    int rc = p4engine_create(p, &e, why, sizeof(why));
    if (rc != 0)
        return set_err(err, errlen, rc, "small-message engine: %s", why);
    *state = e;
    return 0;
}

static void p4_destroy(void *state) { p4engine_destroy(state); }

static int p4_start_small(void *state, inagg_comm_t *comm, const worker_call_t *call,
                          inagg_request_t **req, char *detail, size_t dlen)
{
    p4_request_t *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return set_err(detail, dlen, -ENOMEM, "out of memory");
    rq->base.comm = comm;
    rq->op = (p4_op_t){.send = call->send,
                       .recv = call->recv,
                       .count = (uint32_t)call->count,
                       .dtype = call->dtype,
                       .op = call->op};
    int rc = p4engine_start(state, &rq->op, detail, dlen);
    if (rc != 0) {
        free(rq);
        return rc;
    }
    *req = &rq->base;
    return 0;
}

/* inagg_iallreduce: one packet's worth is a small allreduce; more, chunks on the next slots. */
static int p4_start(void *state, inagg_comm_t *comm, const worker_call_t *call,
                    inagg_request_t **req, char *detail, size_t dlen)
{
    p4engine_t *e = state;
    if (call->count > 0 && call->count <= e->p.elems)
        return p4_start_small(state, comm, call, req, detail, dlen);
    p4_request_t *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return set_err(detail, dlen, -ENOMEM, "out of memory");
    rq->base.comm = comm;
    rq->is_big = 1;
    int rc = p4engine_start_big(e, &rq->big, call, detail, dlen);
    if (rc != 0) {
        free(rq->big.ops);
        free(rq);
        return rc;
    }
    *req = &rq->base;
    return 0;
}

static int p4_done(inagg_request_t *req)
{
    const p4_request_t *rq = (const p4_request_t *)req;
    return rq->is_big ? rq->big.left == 0 : rq->op.done;
}

static int p4_wait(void *state, inagg_request_t *req, char *detail, size_t dlen)
{
    p4_request_t *rq = (p4_request_t *)req;
    if (rq->is_big) {
        int rc = p4engine_wait_big(state, &rq->big, detail, dlen);
        free(rq->big.ops);
        free(rq);
        return rc;
    }
    int rc = p4engine_wait(state, &rq->op, detail, dlen);
    if (rq->op.done) { /* else the engine failed before the result came */
        rc = rq->op.result;
        if (rc == -EOVERFLOW)
            rc = set_err(detail, dlen, rc, "int32 sum wrapped around in at least one element");
        else if (rc != 0)
            rc = set_err(detail, dlen, rc, "the small allreduce failed");
    }
    free(rq);
    return rc;
}

static int p4_allreduce(void *state, const worker_call_t *call, char *detail, size_t dlen)
{
    p4_big_t b;
    int rc = p4engine_start_big(state, &b, call, detail, dlen);
    if (rc == 0) /* a start that failed after queueing failed the engine: b ended with it */
        rc = p4engine_wait_big(state, &b, detail, dlen);
    free(b.ops);
    return rc;
}

/* The completion signal: epoll over the result endpoints, the timer and the eventfd. */
static int p4_event_fd(void *state, int signal_fd, int *out, char *detail, size_t dlen)
{
    p4engine_t *e = state;
    /* confirmations too: they free the slots that a backlog's chunks wait for */
    int fds[5] = {-1, -1, -1, signal_fd, -1};
    fds[0] = e->tp->ops->pollfd(e->tp);
    fds[1] = e->mc_tp ? e->mc_tp->ops->pollfd(e->mc_tp) : -2;
    fds[4] = e->ack_tp->ops->pollfd(e->ack_tp);
    if (fds[0] < 0 || fds[1] == -1 || fds[4] == -1) /* -2: no such endpoint */
        return set_err(detail, dlen, -EOPNOTSUPP,
                       "the %s transport has no descriptor to wait on: no completion signal",
                       e->p.transport ? e->p.transport : "udp");
    e->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    fds[2] = e->timer_fd;
    int rc = e->timer_fd < 0 || e->epoll_fd < 0 ? -errno : 0;
    for (int i = 0; i < 5 && rc == 0; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (fds[i] >= 0 && epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev) != 0)
            rc = -errno;
    }
    if (rc != 0) {
        if (e->epoll_fd >= 0)
            close(e->epoll_fd);
        if (e->timer_fd >= 0)
            close(e->timer_fd);
        e->epoll_fd = e->timer_fd = -1;
        return set_err(detail, dlen, rc, "completion signal: %s", strerror(-rc));
    }
    e->timer_armed_ns = UINT64_MAX;
    rearm_timer(e);
    *out = e->epoll_fd;
    return 0;
}

static int p4_progress(void *state, int block, char *detail, size_t dlen)
{
    return p4engine_progress(state, block, detail, dlen);
}

static int p4_drain(void *state, uint32_t timeout_ms, char *detail, size_t dlen)
{
    return p4engine_drain(state, timeout_ms, detail, dlen);
}

static void p4_fail(void *state) { p4engine_fail(state, -ECANCELED); }

static void p4_add_stats(const void *state, inagg_stats_t *acc)
{
    worker_counters_add(&((const p4engine_t *)state)->c, acc);
}

static void p4_add_transport_stats(const void *state, inagg_transport_stats_t *acc)
{
    const p4engine_t *e = state;
    worker_transport_stats_add(e->tp, acc);
    worker_transport_stats_add(e->ack_tp, acc);
    if (e->mc_tp)
        worker_transport_stats_add(e->mc_tp, acc);
}

const worker_proto_ops_t worker_proto_p4sgd = {
    .name = "p4sgd",
    .protocol = INAGG_PROTO_P4SGD,
    .native_float = 1,
    .create = p4_create,
    .destroy = p4_destroy,
    .start = p4_start,
    .start_small = p4_start_small,
    .allreduce = p4_allreduce,
    .done = p4_done,
    .wait = p4_wait,
    .progress = p4_progress,
    .quiesce = NULL,
    .drain = p4_drain,
    .fail = p4_fail,
    .event_fd = p4_event_fd,
    .add_stats = p4_add_stats,
    .add_transport_stats = p4_add_transport_stats,
};
