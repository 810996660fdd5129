/*
 * p4engine.c - the p4sgd protocol's engine on the worker side (see p4engine.h): the small-
 * message engine of P4SGD (Algorithm 3), latency-centric; here its slots' state machine.
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
#include <sys/timerfd.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/transport/transport.h"
#include "lib/wire/wire.h"
#include "lib/worker/p4engine.h"
#include "lib/worker/proto.h"
#include "lib/worker/rto.h"

/* The engine of a communicator (threads and float_mode in p are ignored). 0, or -errno with a
 * reason in err. */
int p4engine_create(const worker_params_t *p, p4engine_t **out, char *err, size_t errlen)
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

void p4engine_destroy(p4engine_t *e)
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
int p4engine_flush_sends(p4engine_t *e)
{
    int rc = worker_txq_flush(&e->tx);
    int rc2 = worker_txq_flush(&e->acks);
    return rc < 0 ? rc : rc2;
}

/* (Re)send what the slot's phase calls for and arm its timer with timeout rto_us. Packets are
 * queued and leave together at the end of the call (one send per endpoint): contributions
 * on the result endpoint, acknowledgements on the acknowledgement endpoint. */
void p4engine_send_phase(p4engine_t *e, p4wslot_t *w, uint64_t now)
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

int p4engine_can_start(const p4engine_t *e)
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

void p4engine_start_on_slot(p4engine_t *e, p4wslot_t *w, p4_op_t *op, uint64_t now)
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
    p4engine_send_phase(e, w, now);
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
            p4engine_send_phase(e, w, now);
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
        p4engine_send_phase(e, w, now);
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
            p4engine_send_phase(e, w, now);
        } else if (now >= w->tm.deadline_ns) {
            worker_timer_expired(&w->tm, e->p.rto_max_us, &e->c);
            p4engine_send_phase(e, w, now);
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

int p4engine_fail_with(p4engine_t *e, int rc, char *detail, size_t dlen, const char *fmt, ...)
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

int p4engine_progress_once(p4engine_t *e, int block, char *detail, size_t dlen)
{
    if (e->failed)
        return set_err(detail, dlen, -ECANCELED, "the communicator failed earlier");
    if (atomic_load_explicit(e->p.abort_flag, memory_order_acquire))
        return p4engine_fail_with(e, -ECANCELED, detail, dlen, "aborted: the job failed");
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
    int frc = p4engine_flush_sends(e);
    if (frc < 0)
        return p4engine_fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    if (n >= 0) {
        /* Sleep on both endpoints (confirmations of standalone acknowledgements free the
         * slots the next operations need); after a wait, read only the endpoints it found
         * ready (ready < 0: no wait, look at both). */
        int ready = -1;
        if (wait_ms > 0) {
            transport_t *const ts[3] = {e->ack_tp, e->tp, e->mc_tp};
            ready = transport_wait_ready_spin(ts, 3, wait_ms, e->p.poll_us, NULL);
            if (ready < 0)
                return p4engine_fail_with(e, -EIO, detail, dlen, "waiting failed: %s",
                                          strerror(-ready));
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
        return p4engine_fail_with(e, -EIO, detail, dlen, "receive failed: %s", strerror(-n));
    uint64_t now = util_now_ns();
    fire_timers(e, now);
    frc = p4engine_flush_sends(e);
    if (frc < 0)
        return p4engine_fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    if (e->busy > 0 && e->stall_ns == stall_before) {
        e->stall_ns += now - start;
        if (e->stall_ns > (uint64_t)e->p.timeout_ms * 1000000ull) {
            return p4engine_fail_with(e, -ETIMEDOUT, detail, dlen,
                                      "no packet from the switch while waiting (%u slots busy)",
                                      e->busy);
        }
    }
    return 0;
}

/* The completion signal's timer follows the earliest deadline of the busy slots; a system
 * call only when that moved. Re-arming also makes an expired timer unreadable. */
void p4engine_rearm_timer(p4engine_t *e)
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

void p4engine_fail(p4engine_t *e, int rc)
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
    p4engine_rearm_timer(e);
}
