/*
 * collective.h - the collective operations the GLM trainers need, behind one small interface,
 * so that the same training algorithm (glm/train.c) runs over inagg's switch (coll_inagg.c),
 * over MPI (mpi/mpi_train.c) and alone in one process (the local backend, world 1).
 *
 * Every operation is a SUM of float32 vectors in place, called in the same order on every rank.
 * Two shapes:
 *   - glm_coll_allreduce: blocking, any length (the data-parallel gradient, the evaluation);
 *   - glm_coll_start / glm_coll_wait: a small asynchronous allreduce of at most max_small
 *     elements on handle h in [0, max_inflight) (the partial activations of one micro-batch,
 *     P4SGD Algorithm 1); several may be in flight, each is waited for by its handle.
 * The wrappers time every call: wait_ns accumulates the time the caller was blocked in
 * communication (a start that blocks on a full window counts too), payload_bytes the float
 * payload this rank contributed. Errors: a negative errno with a message in c->err; a failed
 * collective leaves the group unusable (destroy it).
 *
 * This header does not include inagg.h or mpi.h: the MPI program links the trainers without
 * libinagg, and libinagg's users never see MPI.
 */
#ifndef INAGG_GLM_COLLECTIVE_H
#define INAGG_GLM_COLLECTIVE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

typedef struct glm_coll glm_coll_t;

typedef struct glm_coll_ops {
    int (*allreduce)(glm_coll_t *c, float *buf, size_t n);
    int (*start)(glm_coll_t *c, float *buf, size_t n, size_t h);
    int (*wait)(glm_coll_t *c, size_t h);
    /* Bytes this rank has put on the wire so far, headers included (0: not known). */
    uint64_t (*wire_bytes)(glm_coll_t *c);
    void (*destroy)(glm_coll_t *c);
    /* In-switch optimizer: push this rank's gradient, get the parameters after the step
     * (NULL: the backend has no in-switch optimizer). */
    int (*push_pull)(glm_coll_t *c, const float *grad, float *params, size_t n);
    /* An allreduce that must not be compressed (evaluation sums) (NULL: allreduce is). */
    int (*allreduce_exact)(glm_coll_t *c, float *buf, size_t n);
} glm_coll_ops_t;

/* The optimizer the switch runs for the data-parallel trainer (--in-switch). */
typedef struct glm_coll_optimizer {
    int kind; /* optim_kind_t (kernels/optim.h) */
    uint64_t params; /* the model's length */
    float lr, beta1, beta2, eps, momentum, weight_decay;
    int eps_outside; /* 0: sqrt(v + eps), the paper's; 1: sqrt(v) + eps, PyTorch's */
} glm_coll_optimizer_t;

struct glm_coll {
    const glm_coll_ops_t *ops;
    void *impl; /* the backend's state */
    uint32_t rank, world;
    size_t max_inflight; /* handles of glm_coll_start: 0..max_inflight-1 */
    size_t max_small; /* elements of one glm_coll_start */
    const char *backend; /* "inagg", "mpi", "local" */
    const char *protocol; /* "p4sgd", "switchml", "none" */
    uint64_t wait_ns; /* time blocked inside the collective calls */
    uint64_t payload_bytes; /* float payload contributed by this rank */
    char err[512];
};

/* Timed wrappers around c->ops; 0 or a negative errno (message in c->err). */
static inline int glm_coll_allreduce(glm_coll_t *c, float *buf, size_t n)
{
    uint64_t t0 = util_now_ns();
    int rc = c->ops->allreduce(c, buf, n);
    c->wait_ns += util_now_ns() - t0;
    c->payload_bytes += (uint64_t)n * sizeof(float);
    return rc;
}

/* The same, never through a lossy codec: for numbers reported rather than trained on. */
static inline int glm_coll_allreduce_exact(glm_coll_t *c, float *buf, size_t n)
{
    if (!c->ops->allreduce_exact)
        return glm_coll_allreduce(c, buf, n);
    uint64_t t0 = util_now_ns();
    int rc = c->ops->allreduce_exact(c, buf, n);
    c->wait_ns += util_now_ns() - t0;
    c->payload_bytes += (uint64_t)n * sizeof(float);
    return rc;
}

static inline int glm_coll_start(glm_coll_t *c, float *buf, size_t n, size_t h)
{
    uint64_t t0 = util_now_ns();
    int rc = c->ops->start(c, buf, n, h);
    c->wait_ns += util_now_ns() - t0;
    c->payload_bytes += (uint64_t)n * sizeof(float);
    return rc;
}

static inline int glm_coll_wait(glm_coll_t *c, size_t h)
{
    uint64_t t0 = util_now_ns();
    int rc = c->ops->wait(c, h);
    c->wait_ns += util_now_ns() - t0;
    return rc;
}

static inline int glm_coll_push_pull(glm_coll_t *c, const float *grad, float *params, size_t n)
{
    if (!c->ops->push_pull)
        return set_err(c->err, sizeof(c->err), -EOPNOTSUPP,
                       "the %s backend has no in-switch optimizer", c->backend);
    uint64_t t0 = util_now_ns();
    int rc = c->ops->push_pull(c, grad, params, n);
    c->wait_ns += util_now_ns() - t0;
    c->payload_bytes += (uint64_t)n * sizeof(float);
    return rc;
}

static inline uint64_t glm_coll_wire_bytes(glm_coll_t *c)
{
    return c->ops->wire_bytes ? c->ops->wire_bytes(c) : 0;
}

static inline void glm_coll_destroy(glm_coll_t *c)
{
    if (c)
        c->ops->destroy(c);
}

/* The local backend: world 1, every operation returns its input (no copy, no time). */
int glm_coll_local_create(glm_coll_t **out, char *err, size_t errlen);

/*
 * The inagg backend: joins job `job` on the switch at `switch_addr` as rank/world.
 * p4sgd = 1: the latency-centric protocol (model parallelism): slots small allreduces in
 * flight of at most packet_elems elements each; blocking allreduces are pipelined over the
 * slots. p4sgd = 0: switchml (data parallelism), float32 as block fixed point; start/wait
 * are then served by blocking allreduces. timeout_ms bounds every call (inagg_options_t).
 * compress: NULL, or the job's codec (inagg_options_t.compress; switchml only); with
 * packet_elems 0 the packet is then the largest a datagram always holds in that mode.
 * no_feedback: inagg_options_t.no_error_feedback.
 */
int glm_coll_inagg_create(glm_coll_t **out, const char *switch_addr, const char *job, uint32_t rank,
                          uint32_t world, int p4sgd, uint32_t slots, uint32_t packet_elems,
                          uint32_t timeout_ms, const glm_coll_optimizer_t *opt,
                          const char *compress, int no_feedback, char *err, size_t errlen);

#endif /* INAGG_GLM_COLLECTIVE_H */
