/*
 * collnet.c - "ncclCollNetPlugin_v8": NCCL's collective network over an inagg switch. One
 * device when $INAGG_SWITCH names a switch (none otherwise, and NCCL leaves CollNet off);
 * connect() joins one switch job per NCCL communicator (cn_handle.h) through libinagg's public
 * API, and each allreduce NCCL hands over is an inagg_iallreduce on it, completed by test().
 * Offered are the sums the switch computes as NCCL would (reduceSupport, cn_map): int32 and
 * uint32 sums (two's complement, wrapping as NCCL's do), int32 averages, float32 sums and
 * averages; nothing else, and neither allgather nor reduce-scatter (their entries are NULL:
 * not offered). Host memory, and CUDA memory staged through pinned host buffers (stage.h).
 *
 * Settings: $INAGG_SWITCH (HOST:PORT), $INAGG_FLOAT_MODE (native, the default: float adds in
 * the switch; fixed: block fixed point, reproducible), $INAGG_NCCL_TIMEOUT_MS (the job's
 * timeout, which also bounds joining; default 30000).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cn_handle.h"
#include "inagg.h"
#include "nccl_abi.h"
#include "plog.h"
#include "stage.h"

#define CN_MAX_INFLIGHT 64u /* more: iallreduce answers "not now" (request NULL) */
#define CN_TIMEOUT_MS_DEFAULT 30000u

typedef struct {
    cn_handle_t mine;
} cn_listen_t;

typedef struct {
    inagg_comm_t *ic;
    char job[CN_JOB_MAX];
    int rank, world;
    unsigned inflight;
    int warned_nonfinite;
} cn_comm_t;

typedef struct { /* a registration: host memory, or CUDA memory with its pinned host copy */
    char *base;
    size_t size;
    int type;
    char *host;
} cn_mr_t;

typedef struct {
    cn_comm_t *c;
    inagg_request_t *ir;
    size_t bytes;
    inagg_dtype_t dtype;
    void *dev_recv; /* CUDA result: copied up from host_recv when done */
    const void *host_recv;
} cn_req_t;

static char g_switch[CN_SWITCH_MAX];
static inagg_float_mode_t g_float_mode = INAGG_FLOAT_NATIVE;
static unsigned g_timeout_ms = CN_TIMEOUT_MS_DEFAULT;
static int g_ptr_support = NCCL_PTR_HOST;
static char g_no_cuda[160];

static const char *dtype_name(int d)
{
    static const char *const n[] = {"int8",    "uint8",    "int32",   "uint32",
                                    "int64",   "uint64",   "float16", "float32",
                                    "float64", "bfloat16", "fp8e4m3", "fp8e5m2"};
    return d >= 0 && d < (int)(sizeof(n) / sizeof(n[0])) ? n[d] : "an unknown type";
}

static const char *op_name(int op)
{
    static const char *const n[] = {"sum", "prod", "max", "min", "avg"};
    return op >= 0 && op < (int)(sizeof(n) / sizeof(n[0])) ? n[op] : "a user-defined op";
}

/* The inagg type and op of an NCCL reduction the switch computes as NCCL does: 1, else 0. */
static int cn_map(ncclDataType_t dt, ncclRedOp_t op, inagg_dtype_t *idt, inagg_op_t *iop)
{
    if (op != ncclSum && op != ncclAvg)
        return 0;
    *iop = op == ncclSum ? INAGG_SUM : INAGG_AVG;
    switch (dt) {
        case ncclInt32: *idt = INAGG_INT32; return 1;
        case ncclUint32: /* the same bits as an int32 sum, modulo 2^32; not its average */
            *idt = INAGG_INT32;
            return op == ncclSum;
        case ncclFloat32: *idt = INAGG_FLOAT32; return 1;
        default: return 0;
    }
}

static ncclResult_t nccl_of(inagg_result_t rc)
{
    switch (rc) {
        case INAGG_OK: return ncclSuccess;
        case INAGG_ERR_INVALID: return ncclInvalidArgument;
        case INAGG_ERR_UNSUPPORTED: return ncclInvalidUsage;
        case INAGG_ERR_SYSTEM:
        case INAGG_ERR_NOMEM: return ncclSystemError;
        default: return ncclRemoteError; /* the switch, the job or the way to them */
    }
}

static ncclResult_t cn_init(ncclDebugLogger_t logger)
{
    plog_set_logger(logger);
    const char *sw = getenv("INAGG_SWITCH"), *fm = getenv("INAGG_FLOAT_MODE");
    g_timeout_ms = plog_env_uint("INAGG_NCCL_TIMEOUT_MS", CN_TIMEOUT_MS_DEFAULT);
    if (fm && *fm && strcmp(fm, "native") != 0 && strcmp(fm, "fixed") != 0)
        return PFAIL(ncclInvalidArgument,
                     "CollNet: $INAGG_FLOAT_MODE=%s is not native or fixed: CollNet off", fm);
    g_float_mode = fm && strcmp(fm, "fixed") == 0 ? INAGG_FLOAT_FIXED : INAGG_FLOAT_NATIVE;
    g_switch[0] = '\0';
    if (sw && strlen(sw) >= sizeof(g_switch))
        return PFAIL(ncclInvalidArgument,
                     "CollNet: $INAGG_SWITCH is longer than %d characters: CollNet off",
                     CN_SWITCH_MAX - 1);
    if (sw)
        strcpy(g_switch, sw);
    g_ptr_support =
        NCCL_PTR_HOST | (stage_available(g_no_cuda, sizeof(g_no_cuda)) ? NCCL_PTR_CUDA : 0);
    if (!g_switch[0])
        PLOG_INFO("CollNet: $INAGG_SWITCH is not set: no CollNet device");
    else
        PLOG_INFO("CollNet: switch %s, float32 added %s, host memory%s", g_switch,
                  g_float_mode == INAGG_FLOAT_FIXED ? "in block fixed point" : "as floats",
                  g_ptr_support & NCCL_PTR_CUDA ? " and CUDA memory (staged)" : "");
    return ncclSuccess;
}

static ncclResult_t cn_devices(int *ndev)
{
    if (!ndev)
        return PFAIL(ncclInvalidArgument, "CollNet: devices(NULL)");
    *ndev = g_switch[0] ? 1 : 0;
    return ncclSuccess;
}

static ncclResult_t cn_get_properties(int dev, ncclNetProperties_v8_t *props)
{
    if (dev != 0 || !g_switch[0] || !props)
        return PFAIL(ncclInvalidArgument, "CollNet: getProperties of device %d: %s", dev,
                     g_switch[0] ? "there is device 0" : "no device ($INAGG_SWITCH is not set)");
    plog_device_props(props, g_ptr_support);
    return ncclSuccess;
}

static ncclResult_t cn_listen(int dev, void *handle, void **listen_comm)
{
    char err[160];
    if (dev != 0 || !handle || !listen_comm)
        return PFAIL(ncclInvalidArgument, "CollNet: listen on device %d: there is device 0", dev);
    cn_listen_t *l = calloc(1, sizeof(*l));
    if (!l)
        return PFAIL(ncclSystemError, "CollNet: listen: out of memory");
    if (cn_handle_make(&l->mine, g_switch, err, sizeof(err)) < 0) {
        free(l);
        return PFAIL(ncclInvalidArgument, "CollNet: listen: %s", err);
    }
    memcpy(handle, &l->mine, sizeof(l->mine));
    *listen_comm = l;
    return ncclSuccess;
}

static ncclResult_t cn_connect(void *handles[], int nranks, int rank, void *listen_comm,
                               void **coll_comm)
{
    (void)listen_comm; /* its handle went out with the others: nothing to take from it */
    char err[200], detail[256] = "";
    if (!coll_comm || !handles || nranks < 1 || (unsigned)nranks > INAGG_MAX_WORLD || rank < 0 ||
        rank >= nranks)
        return PFAIL(ncclInvalidArgument,
                     "CollNet: connect as rank %d of %d: a job holds 1 to %u ranks", rank, nranks,
                     INAGG_MAX_WORLD);
    *coll_comm = NULL;
    cn_handle_t root, h;
    for (int i = nranks - 1; i >= 0; i--)
        if (cn_handle_read(handles[i], i, i == 0 ? &root : &h, err, sizeof(err)) < 0)
            return PFAIL(ncclInvalidArgument, "CollNet: connect: %s", err);
    if (!root.has_switch)
        return PFAIL(ncclInvalidUsage,
                     "CollNet: connect: rank 0 names no switch ($INAGG_SWITCH is not set there)");
    cn_comm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return PFAIL(ncclSystemError, "CollNet: connect: out of memory");
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.float_mode = g_float_mode;
    o.timeout_ms = g_timeout_ms;
    inagg_result_t rc = inagg_comm_create(&c->ic, root.switch_addr, root.job, (uint32_t)rank,
                                          (uint32_t)nranks, &o, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        free(c);
        return PFAIL(nccl_of(rc),
                     "CollNet: rank %d of %d could not join job %s on switch %s: %s: %s", rank,
                     nranks, root.job, root.switch_addr, inagg_strerror(rc), detail);
    }
    snprintf(c->job, sizeof(c->job), "%s", root.job);
    c->rank = rank;
    c->world = nranks;
    PLOG_INFO("CollNet: rank %d of %d joined job %s on switch %s", rank, nranks, c->job,
              root.switch_addr);
    *coll_comm = c;
    return ncclSuccess;
}

static ncclResult_t cn_reduce_support(ncclDataType_t dt, ncclRedOp_t op, int *supported)
{
    inagg_dtype_t idt;
    inagg_op_t iop;
    if (!supported)
        return PFAIL(ncclInvalidArgument, "CollNet: reduceSupport(NULL)");
    *supported = cn_map(dt, op, &idt, &iop);
    return ncclSuccess;
}

static ncclResult_t cn_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle)
{
    char err[200];
    if (!coll_comm || !mhandle || (size > 0 && !data))
        return PFAIL(ncclInvalidArgument, "CollNet: regMr without a comm or memory");
    if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA)
        return PFAIL(ncclInvalidArgument, "CollNet: regMr of memory type %d: host or CUDA only",
                     type);
    if (type == NCCL_PTR_CUDA && !(g_ptr_support & NCCL_PTR_CUDA))
        return PFAIL(ncclInvalidArgument, "CollNet: regMr of CUDA memory: %s", g_no_cuda);
    cn_mr_t *m = calloc(1, sizeof(*m));
    if (!m)
        return PFAIL(ncclSystemError, "CollNet: regMr: out of memory");
    *m = (cn_mr_t){.base = data, .size = size, .type = type};
    if (type == NCCL_PTR_CUDA && !(m->host = stage_alloc(size, err, sizeof(err)))) {
        free(m);
        return PFAIL(ncclUnhandledCudaError, "CollNet: regMr of %zu bytes of CUDA memory: %s", size,
                     err);
    }
    *mhandle = m;
    return ncclSuccess;
}

static ncclResult_t cn_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type,
                                     uint64_t offset, int fd, void **mhandle)
{
    (void)coll_comm, (void)data, (void)size, (void)type, (void)offset, (void)fd, (void)mhandle;
    return PFAIL(ncclInvalidUsage, "CollNet: DMA-BUF registration is not offered (ptrSupport "
                                   "has no NCCL_PTR_DMABUF)");
}

static ncclResult_t cn_dereg_mr(void *coll_comm, void *mhandle)
{
    (void)coll_comm;
    cn_mr_t *m = mhandle;
    if (m) {
        stage_free(m->host);
        free(m);
    }
    return ncclSuccess;
}

/* Where the switch's transport reads or writes `p` (bytes of it): p itself for host memory,
 * its place in the pinned copy for CUDA memory; NULL when p is outside the registration. */
static char *host_side(const cn_mr_t *m, const void *p, size_t bytes)
{
    if (!m || m->type == NCCL_PTR_HOST)
        return (char *)p;
    const char *q = p;
    if (q < m->base || bytes > m->size || (size_t)(q - m->base) > m->size - bytes)
        return NULL;
    return m->host + (q - m->base);
}

static ncclResult_t cn_iallreduce(void *coll_comm, void *send, void *recv, int count,
                                  ncclDataType_t dt, ncclRedOp_t op, void *send_mh, void *recv_mh,
                                  void **request)
{
    cn_comm_t *c = coll_comm;
    inagg_dtype_t idt;
    inagg_op_t iop;
    char err[200];
    if (!c || !request || count < 0)
        return PFAIL(ncclInvalidArgument, "CollNet: iallreduce of %d elements: bad arguments",
                     count);
    *request = NULL;
    if (!cn_map(dt, op, &idt, &iop))
        return PFAIL(ncclInvalidArgument,
                     "CollNet: allreduce of %s with %s is not offered (reduceSupport says 0): "
                     "the switch adds int32, uint32 and float32",
                     dtype_name(dt), op_name(op));
    if (c->inflight >= CN_MAX_INFLIGHT)
        return ncclSuccess; /* not now: NCCL calls again once a request is done */
    size_t bytes = (size_t)count * 4;
    const cn_mr_t *sm = send_mh, *rm = recv_mh;
    const char *s = host_side(sm, send, bytes);
    char *r = host_side(rm, recv, bytes);
    if (!s || !r)
        return PFAIL(ncclInvalidArgument,
                     "CollNet: iallreduce: a buffer of %zu bytes outside "
                     "its registration",
                     bytes);
    if (s != send && stage_down((void *)s, send, bytes, err, sizeof(err)) < 0)
        return PFAIL(ncclUnhandledCudaError, "CollNet: iallreduce: %s", err);
    cn_req_t *q = calloc(1, sizeof(*q));
    if (!q)
        return PFAIL(ncclSystemError, "CollNet: iallreduce: out of memory");
    *q = (cn_req_t){.c = c, .bytes = bytes, .dtype = idt};
    if (r != recv) {
        q->dev_recv = recv;
        q->host_recv = r;
    }
    inagg_result_t rc = inagg_iallreduce(c->ic, s, r, (size_t)count, idt, iop, &q->ir);
    if (rc != INAGG_OK) {
        free(q);
        return PFAIL(nccl_of(rc), "CollNet: allreduce of %d %s (%s) on job %s: %s: %s", count,
                     dtype_name(dt), op_name(op), c->job, inagg_strerror(rc),
                     inagg_last_error(c->ic));
    }
    c->inflight++;
    *request = q;
    return ncclSuccess;
}

static ncclResult_t cn_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request)
{
    (void)coll_comm, (void)data, (void)size, (void)mhandle;
    /* host memory holds the result when test() says done; CUDA memory too: the copy up is
     * synchronous and made before test() says done */
    *request = NULL;
    return ncclSuccess;
}

/* A finished allreduce's result: NCCL's code for it (overflow wraps, as NCCL's sums do). */
static ncclResult_t finish(cn_req_t *q, inagg_result_t rc)
{
    cn_comm_t *c = q->c;
    char err[200];
    if (rc == INAGG_ERR_OVERFLOW && q->dtype == INAGG_INT32)
        rc = INAGG_OK; /* the wrapped sum was delivered, as NCCL's integer sums wrap */
    if (rc == INAGG_ERR_NONFINITE) { /* fixed point: the chunks with one are NaN */
        if (!c->warned_nonfinite++)
            PLOG_WARN("CollNet: job %s: a float32 input held NaN or Inf; in fixed point the "
                      "chunks that held one are NaN in the result",
                      c->job);
        rc = INAGG_OK;
    }
    if (rc != INAGG_OK)
        return PFAIL(nccl_of(rc), "CollNet: allreduce of %zu bytes on job %s failed: %s: %s",
                     q->bytes, c->job, inagg_strerror(rc), inagg_last_error(c->ic));
    if (q->dev_recv && stage_up(q->dev_recv, q->host_recv, q->bytes, err, sizeof(err)) < 0)
        return PFAIL(ncclUnhandledCudaError, "CollNet: allreduce on job %s: %s", c->job, err);
    return ncclSuccess;
}

static ncclResult_t cn_test(void *request, int *done, int *size)
{
    cn_req_t *q = request;
    if (!q || !done)
        return PFAIL(ncclInvalidArgument, "CollNet: test of no request");
    int d = 0;
    inagg_result_t rc = inagg_test(q->ir, &d);
    *done = 0;
    if (rc != INAGG_OK)
        return PFAIL(nccl_of(rc), "CollNet: test on job %s: %s", q->c->job, inagg_strerror(rc));
    if (!d)
        return ncclSuccess;
    ncclResult_t res = finish(q, inagg_wait(q->ir));
    q->c->inflight--;
    *done = 1;
    if (size)
        *size = (int)q->bytes;
    free(q);
    return res;
}

static ncclResult_t cn_close_coll(void *coll_comm)
{
    cn_comm_t *c = coll_comm;
    if (!c)
        return ncclSuccess;
    inagg_stats_t st = {0};
    inagg_transport_stats_t ts = {.struct_size = sizeof(ts)};
    inagg_get_stats(c->ic, &st);
    inagg_get_transport_stats(c->ic, &ts);
    PLOG_INFO("CollNet: rank %d leaves job %s: %llu packets sent, %llu retransmitted, %llu "
              "dropped by fault injection",
              c->rank, c->job, (unsigned long long)st.packets_sent,
              (unsigned long long)st.retransmissions, (unsigned long long)ts.fault_dropped);
    inagg_result_t rc = inagg_comm_destroy(c->ic);
    if (c->inflight)
        PLOG_WARN("CollNet: job %s closed with %u allreduces not tested done", c->job, c->inflight);
    free(c);
    return rc == INAGG_OK ? ncclSuccess
                          : PFAIL(nccl_of(rc), "CollNet: leaving the job: %s", inagg_strerror(rc));
}

static ncclResult_t cn_close_listen(void *listen_comm)
{
    free(listen_comm);
    return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
    .name = "inagg",
    .init = cn_init,
    .devices = cn_devices,
    .getProperties = cn_get_properties,
    .listen = cn_listen,
    .connect = cn_connect,
    .reduceSupport = cn_reduce_support,
    .regMr = cn_reg_mr,
    .regMrDmaBuf = cn_reg_mr_dmabuf,
    .deregMr = cn_dereg_mr,
    .iallreduce = cn_iallreduce,
    .iallgather = NULL, /* the switch sums; it does not gather: not offered */
    .ireducescatter = NULL, /* not offered: NCCL reduces and scatters another way */
    .iflush = cn_iflush,
    .test = cn_test,
    .closeColl = cn_close_coll,
    .closeListen = cn_close_listen,
};
