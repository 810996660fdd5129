/*
 * coll_inagg.c - the collective interface (collective.h) over inagg's switch, and the local
 * backend (world 1) that single-process training uses. The p4sgd communicator serves the
 * model-parallel trainer (many small allreduces in flight, inagg_iallreduce_small), the
 * switchml one the data-parallel trainer (one large gradient per step, inagg_allreduce).
 */
#include "apps/glm/collective.h"
#include "lib/codec/codec.h"
#include "lib/wire/wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inagg.h"
#include "lib/base/errmsg.h"

/* ---- local: world 1 ------------------------------------------------------------------- */

static int local_allreduce(glm_coll_t *c, float *buf, size_t n)
{
    (void)c, (void)buf, (void)n;
    return 0;
}

static int local_start(glm_coll_t *c, float *buf, size_t n, size_t h)
{
    (void)buf, (void)n;
    if (h >= c->max_inflight) {
        return set_err(c->err, sizeof(c->err), -EINVAL, "local collective: handle %zu out of range",
                       h);
    }
    return 0;
}

static int local_wait(glm_coll_t *c, size_t h)
{
    (void)c, (void)h;
    return 0;
}

static void local_destroy(glm_coll_t *c) { free(c); }

static const glm_coll_ops_t local_ops = {local_allreduce, local_start, local_wait, NULL,
                                         local_destroy};

int glm_coll_local_create(glm_coll_t **out, char *err, size_t errlen)
{
    glm_coll_t *c = calloc(1, sizeof(*c));
    if (!c) {
        return set_err(err, errlen, -ENOMEM, "out of memory");
    }
    c->ops = &local_ops;
    c->rank = 0;
    c->world = 1;
    c->max_inflight = SIZE_MAX;
    c->max_small = SIZE_MAX;
    c->backend = "local";
    c->protocol = "none";
    *out = c;
    return 0;
}

/* ---- inagg ------------------------------------------------------------------------------ */

typedef struct inagg_impl {
    inagg_comm_t *comm;
    inagg_comm_t *exact; /* compressed jobs: an uncompressed communicator for the numbers
                               that are reported (job "<job>.exact"), else NULL */
    inagg_request_t **reqs; /* max_inflight handles */
    int p4sgd;
} inagg_impl_t;

/* The negative errno that stands for an inagg_result_t failure. */
static int errno_of(inagg_result_t rc)
{
    switch (rc) {
        case INAGG_OK: return 0;
        case INAGG_ERR_INVALID: return -EINVAL;
        case INAGG_ERR_NOMEM: return -ENOMEM;
        case INAGG_ERR_TIMEOUT: return -ETIMEDOUT;
        case INAGG_ERR_REFUSED: return -ECONNREFUSED;
        case INAGG_ERR_VERSION: return -EPROTONOSUPPORT;
        case INAGG_ERR_CONNECTION: return -ECONNRESET;
        case INAGG_ERR_PROTOCOL: return -EPROTO;
        case INAGG_ERR_OVERFLOW: return -EOVERFLOW;
        case INAGG_ERR_NONFINITE: return -EDOM;
        case INAGG_ERR_UNSUPPORTED: return -EOPNOTSUPP;
        case INAGG_ERR_SYSTEM:
        case INAGG_ERR_JOB_FAILED: break;
    }
    return -EIO;
}

static int fail(glm_coll_t *c, const char *what, inagg_result_t rc)
{
    inagg_impl_t *im = c->impl;
    const char *detail = inagg_last_error(im->comm);
    const char *diverged =
        rc == INAGG_ERR_NONFINITE ? "; the model diverged to NaN/Inf: lower --lr" : "";
    return set_err(c->err, sizeof(c->err), errno_of(rc), "rank %u: %s: %s%s%s%s%s", c->rank, what,
                   inagg_strerror(rc), detail[0] ? " (" : "", detail, detail[0] ? ")" : "",
                   diverged);
}

static int inagg_coll_allreduce(glm_coll_t *c, float *buf, size_t n)
{
    inagg_impl_t *im = c->impl;
    if (n == 0)
        return 0;
    inagg_result_t rc = inagg_allreduce(im->comm, buf, buf, n, INAGG_FLOAT32, INAGG_SUM);
    return rc == INAGG_OK ? 0 : fail(c, "allreduce", rc);
}

static int inagg_coll_allreduce_exact(glm_coll_t *c, float *buf, size_t n)
{
    inagg_impl_t *im = c->impl;
    if (!im->exact)
        return inagg_coll_allreduce(c, buf, n);
    if (n == 0)
        return 0;
    inagg_result_t rc = inagg_allreduce(im->exact, buf, buf, n, INAGG_FLOAT32, INAGG_SUM);
    if (rc != INAGG_OK)
        return set_err(c->err, sizeof(c->err), errno_of(rc),
                       "rank %u: uncompressed allreduce: %s (%s)", c->rank, inagg_strerror(rc),
                       inagg_last_error(im->exact));
    return 0;
}

static int inagg_coll_start(glm_coll_t *c, float *buf, size_t n, size_t h)
{
    inagg_impl_t *im = c->impl;
    if (h >= c->max_inflight || im->reqs[h] || n > c->max_small || n == 0) {
        return set_err(c->err, sizeof(c->err), -EINVAL,
                       "rank %u: small allreduce of %zu elements on handle %zu: invalid (handles "
                       "0..%zu, at most %zu elements, handle %s)",
                       c->rank, n, h, c->max_inflight - 1, c->max_small,
                       h < c->max_inflight && im->reqs[h] ? "busy" : "free");
    }
    inagg_result_t rc =
        im->p4sgd
            ? inagg_iallreduce_small(im->comm, buf, buf, n, INAGG_FLOAT32, INAGG_SUM, &im->reqs[h])
            : inagg_iallreduce(im->comm, buf, buf, n, INAGG_FLOAT32, INAGG_SUM, &im->reqs[h]);
    if (rc != INAGG_OK) {
        im->reqs[h] = NULL;
        return fail(c, "starting a small allreduce", rc);
    }
    return 0;
}

static int inagg_coll_wait(glm_coll_t *c, size_t h)
{
    inagg_impl_t *im = c->impl;
    if (h >= c->max_inflight || !im->reqs[h]) {
        return set_err(c->err, sizeof(c->err), -EINVAL,
                       "rank %u: wait on handle %zu that was not started", c->rank, h);
    }
    inagg_result_t rc = inagg_wait(im->reqs[h]);
    im->reqs[h] = NULL;
    return rc == INAGG_OK ? 0 : fail(c, "waiting for a small allreduce", rc);
}

static int inagg_coll_push_pull(glm_coll_t *c, const float *grad, float *params, size_t n)
{
    inagg_impl_t *im = c->impl;
    inagg_result_t rc = inagg_push_pull(im->comm, grad, params, n);
    return rc == INAGG_OK ? 0 : fail(c, "pushing gradients to the in-switch optimizer", rc);
}

static uint64_t inagg_coll_wire_bytes(glm_coll_t *c)
{
    inagg_impl_t *im = c->impl;
    inagg_stats_t st;
    if (inagg_get_stats(im->comm, &st) != INAGG_OK)
        return 0;
    return st.bytes_sent;
}

static void inagg_coll_destroy(glm_coll_t *c)
{
    inagg_impl_t *im = c->impl;
    if (im) {
        for (size_t h = 0; im->reqs && h < c->max_inflight; h++)
            if (im->reqs[h])
                inagg_wait(im->reqs[h]); /* bounded by the communicator's timeout */
        if (im->comm)
            inagg_comm_destroy(im->comm);
        if (im->exact)
            inagg_comm_destroy(im->exact);
        free(im->reqs);
        free(im);
    }
    free(c);
}

static const glm_coll_ops_t inagg_ops = {
    inagg_coll_allreduce, inagg_coll_start,     inagg_coll_wait,           inagg_coll_wire_bytes,
    inagg_coll_destroy,   inagg_coll_push_pull, inagg_coll_allreduce_exact};

int glm_coll_inagg_create(glm_coll_t **out, const char *switch_addr, const char *job, uint32_t rank,
                          uint32_t world, int p4sgd, uint32_t slots, uint32_t packet_elems,
                          uint32_t timeout_ms, const glm_coll_optimizer_t *opt,
                          const char *compress, int no_feedback, char *err, size_t errlen)
{
    *out = NULL;
    glm_coll_t *c = calloc(1, sizeof(*c));
    inagg_impl_t *im = calloc(1, sizeof(*im));
    if (slots == 0)
        slots = 16;
    if (!c || !im || !(im->reqs = calloc(slots, sizeof(*im->reqs)))) {
        free(im);
        free(c);
        return set_err(err, errlen, -ENOMEM, "rank %u: out of memory", rank);
    }
    inagg_options_t opts = INAGG_OPTIONS_INIT;
    opts.slots = slots;
    if (packet_elems)
        opts.packet_elems = packet_elems;
    opts.protocol = p4sgd ? INAGG_PROTO_P4SGD : INAGG_PROTO_SWITCHML;
    if (timeout_ms)
        opts.timeout_ms = timeout_ms;
    codec_spec_t cs;
    if (compress && codec_parse(compress, &cs, NULL, 0) == 0 && cs.mode != CODEC_NONE) {
        opts.compress = compress;
        opts.no_error_feedback = no_feedback != 0;
        size_t fit = codec_max_elems(&cs, WIRE_MAX_DATAGRAM - WIRE_HEADER_MAX); /* with a MAC */
        if (!packet_elems && opts.packet_elems > fit)
            opts.packet_elems = (uint32_t)fit;
    }
    inagg_optimizer_t z = INAGG_OPTIMIZER_INIT;
    if (opt) {
        z.kind = (inagg_optimizer_kind_t)opt->kind;
        z.params = opt->params;
        z.lr = opt->lr;
        z.beta1 = opt->beta1;
        z.beta2 = opt->beta2;
        z.eps = opt->eps;
        z.eps_outside = opt->eps_outside;
        z.momentum = opt->momentum;
        z.weight_decay = opt->weight_decay;
        opts.optimizer = &z;
    }
    char detail[256] = "";
    inagg_result_t rc =
        inagg_comm_create(&im->comm, switch_addr, job, rank, world, &opts, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        free(im->reqs);
        free(im);
        free(c);
        return set_err(err, errlen, errno_of(rc),
                       "rank %u: joining job %s on the switch at %s (%s): %s%s%s", rank, job,
                       switch_addr, p4sgd ? "p4sgd" : "switchml", inagg_strerror(rc),
                       detail[0] ? ": " : "", detail);
    }
    if (opts.compress) {
        char xjob[64];
        snprintf(xjob, sizeof(xjob), "%.56s.exact", job);
        inagg_options_t xo = opts;
        xo.compress = NULL;
        xo.packet_elems = 64;
        xo.slots = 1;
        rc = inagg_comm_create(&im->exact, switch_addr, xjob, rank, world, &xo, detail,
                               sizeof(detail));
        if (rc != INAGG_OK) {
            inagg_comm_destroy(im->comm);
            free(im->reqs);
            free(im);
            free(c);
            return set_err(err, errlen, errno_of(rc),
                           "rank %u: joining job %s on the switch at %s: %s%s%s", rank, xjob,
                           switch_addr, inagg_strerror(rc), detail[0] ? ": " : "", detail);
        }
    }
    im->p4sgd = p4sgd;
    c->ops = &inagg_ops;
    c->impl = im;
    c->rank = rank;
    c->world = world;
    c->max_inflight = slots;
    c->max_small = inagg_comm_packet_elems(im->comm); /* 0 asked: sized to the path */
    c->backend = "inagg";
    c->protocol = p4sgd ? "p4sgd" : "switchml";
    *out = c;
    return 0;
}
