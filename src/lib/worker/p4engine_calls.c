/*
 * p4engine_calls.c - starting and waiting for the p4sgd engine's allreduces (see p4engine.h).
 * A small one (a packet or less) takes the next slot once it is free.
 * An allreduce larger than a packet (inagg_iallreduce, inagg_allreduce) is a p4_big_t: its
 * chunks take the next slots as they come free, in call order; until every chunk has a slot
 * it waits in the engine's backlog, and any later operation starts only after it. Each call
 * into the engine starts what it can of the backlog.
 * Every wait is one step of progress at a time (p4engine.c), in the caller's thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/worker/p4engine.h"

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
        p4engine_start_on_slot(e, &e->ws[e->next_op % e->p.slots], op, now);
        n++;
        if (b->started == b->nchunks) {
            e->backlog = b->next;
            if (!e->backlog)
                e->backlog_tail = NULL;
        }
    }
    return n;
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
    p4engine_send_phase(e, w, now);
    return 1;
}

/* One step of progress (p4engine_progress_once), then the backlog's chunks that found a slot leave,
 * and the signal's timer follows the new deadlines. */
int p4engine_progress(p4engine_t *e, int block, char *detail, size_t dlen)
{
    int rc = p4engine_progress_once(e, block, detail, dlen);
    if (rc == 0 && e->backlog &&
        advance_backlog(e, util_now_ns()) + unblock_backlog(e, util_now_ns()) > 0) {
        int frc = p4engine_flush_sends(e);
        if (frc < 0)
            rc = p4engine_fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    }
    p4engine_rearm_timer(e);
    return rc;
}

/* The next operation needs its slot confirmed: if our acknowledgement for it still waits for
 * a ride, send it now. */
static void hurry_next_slot(p4engine_t *e)
{
    p4wslot_t *w = &e->ws[e->next_op % e->p.slots];
    if (w->ack_pending) {
        w->ack_pending = 0;
        p4engine_send_phase(e, w, util_now_ns());
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
        frc = p4engine_flush_sends(e);
    p4engine_rearm_timer(e);
    if (frc < 0)
        return p4engine_fail_with(e, -EIO, detail, dlen, "send failed: %s", strerror(-frc));
    return 0;
}

int p4engine_start(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen)
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
    p4engine_start_on_slot(e, &e->ws[e->next_op % e->p.slots], op, util_now_ns());
    return flush_started(e, detail, dlen);
}

int p4engine_wait(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen)
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
int p4engine_start_big(p4engine_t *e, p4_big_t *b, const worker_call_t *r, char *detail,
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
int p4engine_wait_big(p4engine_t *e, p4_big_t *b, char *detail, size_t dlen)
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

int p4engine_drain(p4engine_t *e, uint32_t timeout_ms, char *detail, size_t dlen)
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
