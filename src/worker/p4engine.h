/*
 * p4engine.h - the worker's small-message engine for the p4sgd protocol (P4SGD Algorithm 3).
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
 * INAGG_ERR_TIMEOUT when it has spent timeout_ms inside the library without any packet from
 * the switch while work was outstanding (time the caller spends computing does not count).
 */
#ifndef INAGG_WORKER_P4ENGINE_H
#define INAGG_WORKER_P4ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "inagg.h"
#include "worker/engine.h"

/* One small allreduce; the caller owns it (it lives in an inagg_request_t). */
typedef struct p4_op {
    const void *send;
    void *recv;
    uint32_t count;
    inagg_dtype_t dtype;
    inagg_op_t op;
    uint32_t chunk;         /* chunk index (carried when the engine tags chunks) */
    int set;                /* a parameter upload (WIRE_FLAG_SET) */
    int done;               /* set by the engine when the result was delivered */
    inagg_result_t result;  /* INAGG_OK or INAGG_ERR_OVERFLOW (delivered), or the failure */
} p4_op_t;

typedef struct p4engine p4engine_t;

/* Open the socket (threads and float_mode in p are ignored). NULL with a reason on failure. */
p4engine_t *p4engine_create(const engine_params_t *p, char *err, size_t errlen);
void p4engine_destroy(p4engine_t *e);

/* Non-zero when the next operation's slot is free (start would not need to wait). */
int p4engine_can_start(const p4engine_t *e);

/* Start `op` (count 1..elems) on the next slot; waits (making progress) while that slot is
 * still in use. op must stay valid until op->done. The contribution is sent at once when no
 * other operation awaits its result; otherwise it is queued and leaves, with every other
 * packet queued meanwhile, in one sendmmsg at the next call (progress, wait, start of an
 * operation that must wait for a slot). */
inagg_result_t p4engine_start(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen);

/* Handle what has arrived and fire due timers. With block != 0, first wait for a packet up
 * to the next timer (at most a few ms, so the abort flag is seen). */
inagg_result_t p4engine_progress(p4engine_t *e, int block, char *detail, size_t dlen);

/* Make progress until op->done. */
inagg_result_t p4engine_wait(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen);

/* Blocking allreduce of any size: chunks of `elems` pipelined over all slots. */
inagg_result_t p4engine_allreduce(p4engine_t *e, const engine_request_t *r, char *detail,
                                  size_t dlen);

/* Make progress until every slot is free (every result acknowledged and confirmed), or
 * timeout_ms passes. Call before leaving the job so no peer waits for our acknowledgement. */
inagg_result_t p4engine_drain(p4engine_t *e, uint32_t timeout_ms, char *detail, size_t dlen);

/* After a failure: complete every pending operation with rc; the engine stays unusable. */
void p4engine_fail(p4engine_t *e, inagg_result_t rc);

void p4engine_add_stats(const p4engine_t *e, inagg_stats_t *acc);

#endif /* INAGG_WORKER_P4ENGINE_H */
