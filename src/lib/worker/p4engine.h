/*
 * p4engine.h - the p4sgd protocol's engine on the worker side (P4SGD's small-message engine,
 * Algorithm 3), shared by its three files: p4engine.c (the slots' state machine: packets out
 * and in, timers, one step of progress, failure), p4engine_calls.c (starting and waiting for
 * allreduces: the backlog of those larger than a packet) and proto_p4sgd.c (the protocol's
 * ops table and requests). Internal to src/lib/worker/.
 */
#ifndef INAGG_WORKER_P4ENGINE_H
#define INAGG_WORKER_P4ENGINE_H

#include <stddef.h>
#include <stdint.h>

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

/* ---- the slots' state machine (p4engine.c) -------------------------------------------------- */

/* The engine of a communicator (threads and float_mode in p are ignored). 0, or -errno with a
 * reason in err. */
int p4engine_create(const worker_params_t *p, p4engine_t **out, char *err, size_t errlen);
void p4engine_destroy(p4engine_t *e);

/* Whether the next operation's slot is free. */
int p4engine_can_start(const p4engine_t *e);
/* Start op on slot w (free) as its next round; queued, sent at the next flush. */
void p4engine_start_on_slot(p4engine_t *e, p4wslot_t *w, p4_op_t *op, uint64_t now);
/* (Re)send what slot w's phase calls for and arm its timer. */
void p4engine_send_phase(p4engine_t *e, p4wslot_t *w, uint64_t now);
/* Send everything queued: 0 or -errno. */
int p4engine_flush_sends(p4engine_t *e);
/* One step of progress: receive, fire timers, send; with block, wait for a packet or the next
 * deadline. 0, or -errno (the engine failed) with the reason in detail. */
int p4engine_progress_once(p4engine_t *e, int block, char *detail, size_t dlen);
/* The completion signal's timer to the earliest deadline of the busy slots. */
void p4engine_rearm_timer(p4engine_t *e);
/* Fail every operation in flight or waiting with rc; the engine takes no more. */
void p4engine_fail(p4engine_t *e, int rc);
/* p4engine_fail(e, rc), with the reason in detail: rc. */
int p4engine_fail_with(p4engine_t *e, int rc, char *detail, size_t dlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- starting and waiting (p4engine_calls.c) ------------------------------------------------ */

/* One step of progress, then the backlog's chunks that found a slot leave. */
int p4engine_progress(p4engine_t *e, int block, char *detail, size_t dlen);
/* Start a small allreduce (one packet) after the backlog, waiting for its slot: 0 or -errno. */
int p4engine_start(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen);
/* Wait for op's result: its result (0, -EOVERFLOW) or the failure. */
int p4engine_wait(p4engine_t *e, p4_op_t *op, char *detail, size_t dlen);
/* Start allreduce r as b (its chunks as slots come free, after the backlog's): 0 or -errno.
 * b->ops is the caller's to free, after the allreduce ended. */
int p4engine_start_big(p4engine_t *e, p4_big_t *b, const worker_call_t *r, char *detail,
                       size_t dlen);
/* Wait until every chunk of b was delivered: its result. */
int p4engine_wait_big(p4engine_t *e, p4_big_t *b, char *detail, size_t dlen);
/* Wait until every slot is confirmed, at most timeout_ms: 0 or -errno. */
int p4engine_drain(p4engine_t *e, uint32_t timeout_ms, char *detail, size_t dlen);

#endif /* INAGG_WORKER_P4ENGINE_H */
