/*
 * sml_ring.c - the switchml protocol's ops table on the worker side: a communicator's engine
 * threads (one engine each, proto_switchml.c) and the ring of requests they take in call
 * order. Requests go into the ring under the communicator's mutex; every engine thread takes
 * them in order and runs its share; the last engine to finish a request completes it and
 * raises the communicator's completion signal (inagg_comm_event_fd).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/worker/proto.h"
#include "lib/worker/sml_engine.h"

#define QUEUE_CAP 256u

typedef struct sml sml_t;

typedef struct sml_request {
    inagg_request_t base;
    sml_t *owner;
    worker_call_t call;
    int parts_left; /* under mu */
    int done; /* under mu */
    int result; /* 0 or -errno (proto.h) */
    char detail[256];
} sml_request_t;

typedef struct sml_thread {
    sml_t *s;
    engine_t *e;
} sml_thread_t;

struct sml {
    worker_params_t p;
    uint32_t nengines, started;
    engine_t *engines[WORKER_MAX_THREADS];
    sml_thread_t th[WORKER_MAX_THREADS]; /* what each engine thread is started with */
    pthread_t tids[WORKER_MAX_THREADS];
    sml_request_t *queue[QUEUE_CAP];
    uint64_t issued, completed; /* requests put in the ring / completed, under mu */
    int stopping; /* under mu */
};

/* Failures outrank the "delivered but" results (overflow, non-finite). */
static int worse_result(int now, int rc)
{
    int delivered_now = now == -EOVERFLOW || now == -EDOM;
    int delivered_rc = rc == -EOVERFLOW || rc == -EDOM;
    return rc != 0 && (now == 0 || (!delivered_rc && delivered_now));
}

static void *engine_main(void *arg)
{
    const sml_thread_t *th = arg;
    engine_t *e = th->e;
    sml_t *s = th->s;
    uint64_t next = 0;
    for (;;) {
        pthread_mutex_lock(s->p.mu);
        while (s->issued <= next && !s->stopping)
            pthread_cond_wait(s->p.cv, s->p.mu);
        if (s->issued <= next) {
            pthread_mutex_unlock(s->p.mu);
            break;
        }
        sml_request_t *req = s->queue[next % QUEUE_CAP];
        pthread_mutex_unlock(s->p.mu);

        char detail[256] = "";
        int rc = sml_engine_run(e, &req->call, detail, sizeof(detail));

        pthread_mutex_lock(s->p.mu);
        if (worse_result(req->result, rc)) {
            req->result = rc;
            snprintf(req->detail, sizeof(req->detail), "%s", detail);
        }
        int completed_request = 0; /* a caller's request (not a blocking call's) */
        if (--req->parts_left == 0) {
            req->done = 1;
            s->completed++;
            completed_request = req->base.comm != NULL;
            pthread_cond_broadcast(s->p.cv);
        }
        pthread_mutex_unlock(s->p.mu);
        if (completed_request) /* after the unlock: the waiter may free req now */
            worker_signal_raise(s->p.signal);
        next++;
    }
    return NULL;
}

static void sml_destroy(void *state)
{
    sml_t *s = state;
    pthread_mutex_lock(s->p.mu);
    s->stopping = 1;
    pthread_cond_broadcast(s->p.cv);
    pthread_mutex_unlock(s->p.mu);
    for (uint32_t i = 0; i < s->started; i++)
        pthread_join(s->tids[i], NULL);
    for (uint32_t i = 0; i < s->nengines; i++)
        sml_engine_destroy(s->engines[i]);
    free(s);
}

static int sml_create(const worker_params_t *p, void **state, char *err, size_t errlen)
{
    sml_t *s = calloc(1, sizeof(*s));
    if (!s)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    s->p = *p;
    int rc = 0;
    char why[160];
    for (uint32_t i = 0; i < p->threads && rc == 0; i++) {
        rc = sml_engine_create(p, i, &s->engines[i], why, sizeof(why));
        if (rc != 0)
            rc = set_err(err, errlen, rc, "engine thread %u: %s", i, why);
        else
            s->nengines++;
    }
    for (uint32_t i = 0; i < s->nengines && rc == 0; i++) {
        s->th[i] = (sml_thread_t){.s = s, .e = s->engines[i]};
        rc = -pthread_create(&s->tids[i], NULL, engine_main, &s->th[i]);
        if (rc != 0)
            rc = set_err(err, errlen, rc, "cannot start engine thread %u", i);
        else
            s->started++;
    }
    if (rc != 0) {
        sml_destroy(s);
        return rc;
    }
    *state = s;
    return 0;
}

/* Put rq in the ring, waiting while QUEUE_CAP requests are outstanding. */
static void enqueue(sml_t *s, inagg_comm_t *comm, sml_request_t *rq, const worker_call_t *call)
{
    rq->base.comm = comm;
    rq->owner = s;
    rq->call = *call;
    rq->parts_left = (int)s->nengines;
    pthread_mutex_lock(s->p.mu);
    while (s->issued - s->completed >= QUEUE_CAP)
        pthread_cond_wait(s->p.cv, s->p.mu);
    s->queue[s->issued % QUEUE_CAP] = rq;
    s->issued++;
    pthread_cond_broadcast(s->p.cv);
    pthread_mutex_unlock(s->p.mu);
}

static int sml_start(void *state, inagg_comm_t *comm, const worker_call_t *call,
                     inagg_request_t **req, char *detail, size_t dlen)
{
    sml_request_t *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return set_err(detail, dlen, -ENOMEM, "out of memory");
    enqueue(state, comm, rq, call);
    *req = &rq->base;
    return 0;
}

/* Wait until the engines completed rq; its result, with the reason in detail. */
static int await(sml_t *s, sml_request_t *rq, char *detail, size_t dlen)
{
    pthread_mutex_lock(s->p.mu);
    while (!rq->done)
        pthread_cond_wait(s->p.cv, s->p.mu);
    pthread_mutex_unlock(s->p.mu);
    return set_err(detail, dlen, rq->result, "%s", rq->detail);
}

static int sml_wait(void *state, inagg_request_t *req, char *detail, size_t dlen)
{
    sml_request_t *rq = (sml_request_t *)req;
    int rc = await(state, rq, detail, dlen);
    free(rq);
    return rc;
}

static int sml_allreduce(void *state, const worker_call_t *call, char *detail, size_t dlen)
{
    sml_request_t rq = {0}; /* lives until await returns: the engines are done with it */
    enqueue(state, NULL, &rq, call);
    return await(state, &rq, detail, dlen);
}

/* inagg_iallreduce_small: one packet's worth (comm.c checked the count) is an ordinary
 * request here; it completes in call order, which "any order" includes. */
static int sml_start_small(void *state, inagg_comm_t *comm, const worker_call_t *call,
                           inagg_request_t **req, char *detail, size_t dlen)
{
    return sml_start(state, comm, call, req, detail, dlen);
}

/* The engine threads complete requests and raise the signal themselves: its eventfd is the
 * descriptor to poll. */
static int sml_event_fd(void *state, int signal_fd, int *out, char *detail, size_t dlen)
{
    (void)state;
    (void)detail;
    (void)dlen;
    *out = signal_fd;
    return 0;
}

static int sml_done(inagg_request_t *req)
{
    sml_request_t *rq = (sml_request_t *)req;
    pthread_mutex_lock(rq->owner->p.mu);
    int done = rq->done;
    pthread_mutex_unlock(rq->owner->p.mu);
    return done;
}

/* The engine threads move requests on by themselves: a blocking call only waits (at most
 * 5 ms) for one to complete. */
static int sml_progress(void *state, int block, char *detail, size_t dlen)
{
    sml_t *s = state;
    (void)detail;
    (void)dlen;
    if (block) {
        pthread_mutex_lock(s->p.mu);
        worker_cond_wait_until(s->p.cv, s->p.mu, util_now_ns() + 5000000ull);
        pthread_mutex_unlock(s->p.mu);
    }
    return 0;
}

static void sml_quiesce(void *state)
{
    sml_t *s = state;
    pthread_mutex_lock(s->p.mu);
    while (s->completed < s->issued)
        pthread_cond_wait(s->p.cv, s->p.mu);
    pthread_mutex_unlock(s->p.mu);
}

static void sml_add_stats(const void *state, inagg_stats_t *acc)
{
    const sml_t *s = state;
    for (uint32_t i = 0; i < s->nengines; i++)
        sml_engine_add_stats(s->engines[i], acc);
}

static void sml_add_codec_stats(const void *state, inagg_codec_stats_t *acc)
{
    const sml_t *s = state;
    int coded = 0;
    for (uint32_t i = 0; i < s->nengines; i++)
        coded = sml_engine_add_codec_stats(s->engines[i], acc);
    acc->codec_threads = coded ? 2 * s->nengines : 0; /* an engine and its encoder helper */
}

static void sml_add_transport_stats(const void *state, inagg_transport_stats_t *acc)
{
    const sml_t *s = state;
    for (uint32_t i = 0; i < s->nengines; i++)
        sml_engine_add_transport_stats(s->engines[i], acc);
}

const worker_proto_ops_t worker_proto_switchml = {
    .name = "switchml",
    .protocol = INAGG_PROTO_SWITCHML,
    .native_float = 0,
    .create = sml_create,
    .destroy = sml_destroy,
    .start = sml_start,
    .start_small = sml_start_small,
    .allreduce = sml_allreduce,
    .done = sml_done,
    .wait = sml_wait,
    .progress = sml_progress,
    .quiesce = sml_quiesce,
    .drain = NULL,
    .fail = NULL,
    .event_fd = sml_event_fd,
    .add_stats = sml_add_stats,
    .add_codec_stats = sml_add_codec_stats,
    .add_transport_stats = sml_add_transport_stats,
};
