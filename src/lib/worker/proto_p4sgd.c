/*
 * proto_p4sgd.c - the p4sgd protocol on the worker side: its ops table (proto.h) over the
 * small-message engine of P4SGD (Algorithm 3, p4engine.h), latency-centric. Each allreduce of
 * a packet or less is one packet on one slot; a larger one is chunks on the next slots
 * (p4engine_calls.c). A request holds the one or the other.
 *
 * The completion signal (inagg_comm_event_fd) is an epoll descriptor over the endpoints that
 * bring results and confirmations, a timerfd armed at the earliest timer of the busy slots, and the
 * communicator's eventfd (raised on a failure): readable when a call would move a request
 * on. The timer is re-armed at the end of each call only when its deadline moved.
 *
 * There is no thread: progress happens inside the calls (start, progress, wait, allreduce),
 * in the caller's thread (p4engine.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/transport/transport.h"
#include "lib/worker/p4engine.h"
#include "lib/worker/proto.h"

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
    p4engine_rearm_timer(e);
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
