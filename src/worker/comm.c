/*
 * comm.c - the communicator: the public API of include/inagg.h.
 *
 * Creating a communicator joins the job over the switch's TCP control port (control/ctl.h)
 * and starts two kinds of threads: `threads` engine threads (engine.c), each with its own
 * UDP socket and share of the slots, and one monitor thread that reads the control
 * connection (barrier completions, the switch's verdict that the job failed, the connection
 * dropping). Requests go into a ring in call order; every engine thread takes them in that
 * order and runs its share; the last engine to finish a request completes it.
 *
 * A p4sgd communicator has no engine threads: its small-message engine (p4engine.c) makes
 * progress inside the calls, in the caller's thread, and its requests complete in any order.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "control/ctl.h"
#include "inagg.h"
#include "transport/udp.h"
#include "wire/wire.h"
#include "worker/engine.h"
#include "worker/p4engine.h"

#define QUEUE_CAP 256u
#define MAX_ENGINE_THREADS 64u

struct inagg_request {
    inagg_comm_t *comm;
    int small;           /* a p4sgd small allreduce: op below, driven by comm->p4 */
    p4_op_t op;
    engine_request_t er;
    int parts_left;      /* under comm->mu */
    int done;            /* under comm->mu */
    inagg_result_t result;
    char detail[256];
};

struct inagg_comm {
    uint32_t rank, world;
    inagg_options_t opts;
    char job[64];
    uint16_t job_id;
    uint32_t token;
    int ctl_fd;
    ctl_reader_t rd;
    uint32_t nengines;
    engine_t *engines[MAX_ENGINE_THREADS];
    p4engine_t *p4;               /* p4sgd communicators: the small-message engine */
    inagg_optimizer_t optimizer;  /* a copy of options.optimizer, when given */
    pthread_t engine_tids[MAX_ENGINE_THREADS];
    pthread_t monitor_tid;
    int monitor_started;
    uint32_t engines_started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    inagg_request_t *queue[QUEUE_CAP];
    uint64_t issued, completed;   /* requests put in the ring / completed, under mu */
    uint64_t barriers_done;       /* under mu */
    int bye;                      /* under mu */
    int stopping;                 /* under mu */
    _Atomic int abort_flag;       /* job failed or connection lost: engines stop */
    inagg_result_t fail_code;     /* under mu */
    char fail_detail[256];        /* under mu */
    char last_error[512];
};

static const char *const result_texts[] = {
    "success",
    "invalid argument",
    "system call failed",
    "out of memory",
    "timed out",
    "refused by the switch",
    "protocol version mismatch",
    "job failed",
    "connection to the switch lost",
    "protocol error",
    "int32 sum overflowed",
    "non-finite float32 input",
    "unsupported",
};

const char *inagg_strerror(inagg_result_t rc)
{
    int i = -(int)rc;
    if (i < 0 || i >= (int)INAGG_ARRAY_LEN(result_texts))
        return "unknown result code";
    return result_texts[i];
}

uint32_t inagg_version(void) { return INAGG_VERSION_NUMBER; }

static inagg_result_t set_error(inagg_comm_t *c, inagg_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inagg_result_t set_error(inagg_comm_t *c, inagg_result_t rc, const char *fmt, ...)
{
    if (c) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
        va_end(ap);
    }
    return rc;
}

const char *inagg_last_error(const inagg_comm_t *comm) { return comm ? comm->last_error : ""; }
uint32_t inagg_comm_rank(const inagg_comm_t *comm) { return comm ? comm->rank : 0; }
uint32_t inagg_comm_world(const inagg_comm_t *comm) { return comm ? comm->world : 0; }

/* Mark the communicator failed (first reason wins) and wake everyone. Caller holds mu. */
static void fail_locked(inagg_comm_t *c, inagg_result_t code, const char *detail)
{
    if (c->fail_code == INAGG_OK) {
        c->fail_code = code;
        snprintf(c->fail_detail, sizeof(c->fail_detail), "%s", detail);
    }
    atomic_store_explicit(&c->abort_flag, 1, memory_order_release);
    pthread_cond_broadcast(&c->cv);
}

static void *monitor_main(void *arg)
{
    inagg_comm_t *c = arg;
    char line[CTL_LINE_MAX];
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int stopping = c->stopping;
        pthread_mutex_unlock(&c->mu);
        if (stopping)
            break;
        int rc = ctl_read_line(c->ctl_fd, &c->rd, line, sizeof(line), 100);
        if (rc == -ETIMEDOUT)
            continue;
        pthread_mutex_lock(&c->mu);
        if (rc != 0) {
            if (!c->bye) {
                char d[160];
                snprintf(d, sizeof(d), "lost the control connection to the switch (%s)",
                         rc == -ECONNRESET ? "closed" : strerror(-rc));
                fail_locked(c, INAGG_ERR_CONNECTION, d);
            }
            pthread_cond_broadcast(&c->cv);
            pthread_mutex_unlock(&c->mu);
            break;
        }
        if (ctl_is(line, "FAILED")) {
            char d[256];
            snprintf(d, sizeof(d), "job '%s' failed on the switch: %s", c->job, ctl_rest(line));
            fail_locked(c, INAGG_ERR_JOB_FAILED, d);
        } else if (ctl_is(line, "BARRIER_DONE")) {
            c->barriers_done++;
            pthread_cond_broadcast(&c->cv);
        } else if (ctl_is(line, "BYE")) {
            c->bye = 1;
            pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
    }
    return NULL;
}

typedef struct engine_arg {
    inagg_comm_t *comm;
    uint32_t index;
} engine_arg_t;

static void *engine_main(void *arg)
{
    engine_arg_t ea = *(engine_arg_t *)arg;
    free(arg);
    inagg_comm_t *c = ea.comm;
    engine_t *e = c->engines[ea.index];
    uint64_t next = 0;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        while (c->issued <= next && !c->stopping)
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->issued <= next) {
            pthread_mutex_unlock(&c->mu);
            break;
        }
        inagg_request_t *req = c->queue[next % QUEUE_CAP];
        pthread_mutex_unlock(&c->mu);

        char detail[256] = "";
        inagg_result_t rc = engine_run(e, &req->er, detail, sizeof(detail));

        pthread_mutex_lock(&c->mu);
        /* Failures outrank the "delivered but" results (overflow, non-finite). */
        int worse = rc != INAGG_OK &&
                    (req->result == INAGG_OK ||
                     (rc != INAGG_ERR_OVERFLOW && rc != INAGG_ERR_NONFINITE &&
                      (req->result == INAGG_ERR_OVERFLOW || req->result == INAGG_ERR_NONFINITE)));
        if (worse) {
            req->result = rc;
            snprintf(req->detail, sizeof(req->detail), "%s", detail);
        }
        if (--req->parts_left == 0) {
            req->done = 1;
            c->completed++;
            pthread_cond_broadcast(&c->cv);
        }
        pthread_mutex_unlock(&c->mu);
        next++;
    }
    return NULL;
}

static inagg_result_t map_refusal(const char *line)
{
    const char *rest = ctl_rest(line);
    if (strncmp(rest, "version", 7) == 0)
        return INAGG_ERR_VERSION;
    if (strncmp(rest, "timeout", 7) == 0)
        return INAGG_ERR_TIMEOUT;
    if (strncmp(rest, "invalid", 7) == 0)
        return INAGG_ERR_INVALID;
    if (strncmp(rest, "unsupported", 11) == 0)
        return INAGG_ERR_UNSUPPORTED;
    return INAGG_ERR_REFUSED;
}

static void detailf(char *detail, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void detailf(char *detail, size_t len, const char *fmt, ...)
{
    if (!detail || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, len, fmt, ap);
    va_end(ap);
}

static void comm_free(inagg_comm_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    for (uint32_t i = 0; i < c->engines_started; i++)
        pthread_join(c->engine_tids[i], NULL);
    if (c->monitor_started)
        pthread_join(c->monitor_tid, NULL);
    for (uint32_t i = 0; i < c->nengines; i++)
        engine_destroy(c->engines[i]);
    p4engine_destroy(c->p4);
    if (c->ctl_fd >= 0)
        close(c->ctl_fd);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static inagg_result_t check_options(const inagg_options_t *o, char *detail, size_t len)
{
    if (o->struct_size < sizeof(inagg_options_t)) {
        detailf(detail, len, "options.struct_size %u is smaller than this library's %zu: "
                "initialise options with INAGG_OPTIONS_INIT", o->struct_size,
                sizeof(inagg_options_t));
        return INAGG_ERR_INVALID;
    }
    if (o->packet_elems == 0 || o->packet_elems > INAGG_MAX_PACKET_ELEMS) {
        detailf(detail, len, "packet_elems %u must be 1..%u", o->packet_elems,
                INAGG_MAX_PACKET_ELEMS);
        return INAGG_ERR_INVALID;
    }
    if (o->slots == 0 || o->slots > 1u << 20) {
        detailf(detail, len, "slots %u must be 1..%u", o->slots, 1u << 20);
        return INAGG_ERR_INVALID;
    }
    if (o->threads == 0 || o->threads > MAX_ENGINE_THREADS || o->threads > o->slots) {
        detailf(detail, len, "threads %u must be 1..%u and at most slots (%u)", o->threads,
                MAX_ENGINE_THREADS, o->slots);
        return INAGG_ERR_INVALID;
    }
    if (o->float_mode != INAGG_FLOAT_FIXED && o->float_mode != INAGG_FLOAT_NATIVE) {
        detailf(detail, len, "float_mode %d is not a valid inagg_float_mode_t", o->float_mode);
        return INAGG_ERR_INVALID;
    }
    if (o->protocol != INAGG_PROTO_SWITCHML && o->protocol != INAGG_PROTO_P4SGD) {
        detailf(detail, len, "protocol %d is not INAGG_PROTO_SWITCHML or INAGG_PROTO_P4SGD",
                o->protocol);
        return INAGG_ERR_INVALID;
    }
    if (o->optimizer) {
        const inagg_optimizer_t *z = o->optimizer;
        if ((unsigned)z->kind > INAGG_OPT_SMORMS3 || z->params == 0 ||
            z->params > (1ull << 32) || (z->init != INAGG_INIT_ZERO && z->init != INAGG_INIT_SEEDED)) {
            detailf(detail, len, "optimizer: kind must be an inagg_optimizer_kind_t, params "
                    "1..2^32, init INAGG_INIT_ZERO or INAGG_INIT_SEEDED");
            return INAGG_ERR_INVALID;
        }
    }
    if (o->rto_min_us == 0 || o->rto_min_us > o->rto_max_us || o->timeout_ms == 0) {
        detailf(detail, len, "need 0 < rto_min_us <= rto_max_us and timeout_ms > 0");
        return INAGG_ERR_INVALID;
    }
    return INAGG_OK;
}

inagg_result_t inagg_comm_create(inagg_comm_t **out, const char *switch_addr, const char *job,
                                 uint32_t rank, uint32_t world, const inagg_options_t *opts,
                                 char *detail, size_t detail_len)
{
    if (out)
        *out = NULL;
    detailf(detail, detail_len, "%s", "");
    if (!out || !switch_addr || !job || !opts) {
        detailf(detail, detail_len, "out, switch_addr, job and opts must not be NULL");
        return INAGG_ERR_INVALID;
    }
    size_t jlen = strlen(job);
    if (jlen == 0 || jlen >= 64 || strpbrk(job, " \t\r\n=")) {
        detailf(detail, detail_len, "job name must be 1..63 characters without spaces or '='");
        return INAGG_ERR_INVALID;
    }
    if (world == 0 || world > INAGG_MAX_WORLD || rank >= world) {
        detailf(detail, detail_len, "rank %u / world %u: world must be 1..%u and rank < world",
                rank, world, INAGG_MAX_WORLD);
        return INAGG_ERR_INVALID;
    }
    inagg_result_t rc = check_options(opts, detail, detail_len);
    if (rc != INAGG_OK)
        return rc;
    struct sockaddr_in sw;
    if (udp_parse_addr(switch_addr, 0, &sw) != 0) {
        detailf(detail, detail_len, "bad switch address '%s' (expected HOST:PORT)", switch_addr);
        return INAGG_ERR_INVALID;
    }
    inagg_comm_t *c = calloc(1, sizeof(*c));
    if (!c) {
        detailf(detail, detail_len, "out of memory");
        return INAGG_ERR_NOMEM;
    }
    c->rank = rank;
    c->world = world;
    c->opts = *opts;
    if (opts->optimizer) {
        c->optimizer = *opts->optimizer;
        c->opts.optimizer = &c->optimizer;
        c->opts.float_mode = INAGG_FLOAT_NATIVE; /* gradients and parameters are float32 */
    }
    c->ctl_fd = -1;
    snprintf(c->job, sizeof(c->job), "%s", job);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (!c->opts.faults)
        c->opts.faults = getenv("INAGG_FAULTS");

    int fd = ctl_connect(&sw, (int)opts->timeout_ms);
    if (fd < 0) {
        detailf(detail, detail_len, "cannot connect to the switch at %s: %s", switch_addr,
                strerror(-fd));
        comm_free(c);
        return fd == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    c->ctl_fd = fd;
    int p4 = opts->protocol == INAGG_PROTO_P4SGD;
    char line[CTL_LINE_MAX];
    snprintf(line, sizeof(line),
             "JOIN version=%d job=%s rank=%u world=%u slots=%u elems=%u float=%s "
             "protocol=%s timeout=%u",
             INAGG_PROTOCOL_VERSION, job, rank, world, opts->slots, opts->packet_elems,
             opts->float_mode == INAGG_FLOAT_NATIVE || p4 || opts->optimizer ? "native" : "fixed",
             p4 ? "p4sgd" : "switchml", opts->timeout_ms);
    if (opts->optimizer) {
        static const char *const kinds[] = {"sgd", "adagrad", "adam", "smorms3"};
        const inagg_optimizer_t *z = opts->optimizer;
        size_t used = strlen(line);
        snprintf(line + used, sizeof(line) - used,
                 " optimizer=%s params=%llu lr=%.9g beta1=%.9g beta2=%.9g eps=%.9g eps_place=%s "
                 "momentum=%.9g wd=%.9g init=%s seed=%llu",
                 kinds[z->kind], (unsigned long long)z->params, (double)z->lr, (double)z->beta1,
                 (double)z->beta2, (double)z->eps, z->eps_outside ? "outside" : "inside",
                 (double)z->momentum, (double)z->weight_decay,
                 z->init == INAGG_INIT_SEEDED ? "seeded" : "zero", (unsigned long long)z->seed);
    }
    int io = ctl_write_line(fd, line, (int)opts->timeout_ms);
    if (io == 0)
        io = ctl_read_line(fd, &c->rd, line, sizeof(line), (int)opts->timeout_ms + 1000);
    if (io != 0) {
        detailf(detail, detail_len, "no answer to JOIN from the switch at %s: %s", switch_addr,
                io == -ETIMEDOUT ? "timed out" : strerror(-io));
        comm_free(c);
        return io == -ETIMEDOUT ? INAGG_ERR_TIMEOUT : INAGG_ERR_CONNECTION;
    }
    if (ctl_is(line, "ERR")) {
        detailf(detail, detail_len, "switch at %s: %s", switch_addr, ctl_rest(line));
        comm_free(c);
        return map_refusal(line);
    }
    uint32_t id = 0, token = 0, threads = 0, port = 0, base = 0;
    if (!ctl_is(line, "JOINED") || ctl_get_u32(line, "id", &id) ||
        ctl_get_u32(line, "token", &token) || ctl_get_u32(line, "threads", &threads) ||
        ctl_get_u32(line, "port", &port) || ctl_get_u32(line, "base", &base) || threads == 0 ||
        id > UINT16_MAX || port > UINT16_MAX) {
        detailf(detail, detail_len, "unexpected answer from the switch: '%.100s'", line);
        comm_free(c);
        return INAGG_ERR_PROTOCOL;
    }
    c->job_id = (uint16_t)id;
    c->token = token;
    sw.sin_port = htons((uint16_t)port);
    /* switchml: `threads` engine threads, each with its share of the slots; p4sgd: one
     * small-message engine with all of them, driven by the caller. */
    c->nengines = p4 ? 0 : opts->threads;
    engine_params_t ep = {
        .nthreads = p4 ? 1 : c->nengines,
        .rank = rank,
        .world = world,
        .job = c->job_id,
        .token = token,
        .slots = opts->slots,
        .elems = opts->packet_elems,
        .float_mode = c->opts.float_mode,
        .sw_addr = sw,
        .sw_threads = threads,
        .sw_base = base,
        .rto_us = opts->rto_us ? opts->rto_us : 2000,
        .rto_min_us = opts->rto_min_us,
        .rto_max_us = opts->rto_max_us,
        .timeout_ms = opts->timeout_ms + 1000, /* let the switch's verdict come first */
        .socket_buffer = opts->socket_buffer ? (int)opts->socket_buffer : 4 << 20,
        .faults = c->opts.faults,
        .abort_flag = &c->abort_flag,
        .chunk_tags = opts->optimizer != NULL,
    };
    char err[160];
    if (p4 && !(c->p4 = p4engine_create(&ep, err, sizeof(err)))) {
        detailf(detail, detail_len, "small-message engine: %s", err);
        comm_free(c);
        return strstr(err, "fault") ? INAGG_ERR_INVALID : INAGG_ERR_SYSTEM;
    }
    for (uint32_t i = 0; i < c->nengines; i++) {
        ep.index = i;
        if (!(c->engines[i] = engine_create(&ep, err, sizeof(err)))) {
            detailf(detail, detail_len, "engine thread %u: %s", i, err);
            comm_free(c);
            return strstr(err, "fault") ? INAGG_ERR_INVALID : INAGG_ERR_SYSTEM;
        }
    }
    for (uint32_t i = 0; i < c->nengines; i++) {
        engine_arg_t *ea = malloc(sizeof(*ea));
        if (ea)
            *ea = (engine_arg_t){c, i};
        if (!ea || pthread_create(&c->engine_tids[i], NULL, engine_main, ea) != 0) {
            free(ea);
            detailf(detail, detail_len, "cannot start engine thread %u", i);
            comm_free(c);
            return INAGG_ERR_SYSTEM;
        }
        c->engines_started++;
    }
    if (pthread_create(&c->monitor_tid, NULL, monitor_main, c) != 0) {
        detailf(detail, detail_len, "cannot start the monitor thread");
        comm_free(c);
        return INAGG_ERR_SYSTEM;
    }
    c->monitor_started = 1;
    *out = c;
    return INAGG_OK;
}

/* The argument checks every allreduce shares. */
static inagg_result_t check_buffers(inagg_comm_t *comm, const void *send, void *recv,
                                    size_t count, inagg_dtype_t dtype, inagg_op_t op)
{
    if (count > 0 && (!send || !recv))
        return set_error(comm, INAGG_ERR_INVALID, "send and recv must not be NULL");
    if (dtype != INAGG_INT32 && dtype != INAGG_FLOAT32)
        return set_error(comm, INAGG_ERR_INVALID, "dtype %d is not INAGG_INT32 or INAGG_FLOAT32",
                         (int)dtype);
    if (op != INAGG_SUM && op != INAGG_AVG)
        return set_error(comm, INAGG_ERR_INVALID, "op %d is not INAGG_SUM or INAGG_AVG", (int)op);
    uint64_t max_chunks = (uint64_t)UINT32_MAX;
    if (count / comm->opts.packet_elems >= max_chunks)
        return set_error(comm, INAGG_ERR_INVALID, "count %zu exceeds %llu chunks", count,
                         (unsigned long long)max_chunks);
    if ((const char *)send != (const char *)recv && count > 0) {
        const char *s = send, *r = recv;
        size_t bytes = count * 4;
        if (s < r + bytes && r < s + bytes)
            return set_error(comm, INAGG_ERR_INVALID,
                             "send and recv overlap without being the same buffer");
    }
    return INAGG_OK;
}

static inagg_result_t start_request(inagg_comm_t *comm, const void *send, void *recv,
                                    size_t count, inagg_dtype_t dtype, inagg_op_t op, int set,
                                    inagg_request_t **req);

inagg_result_t inagg_iallreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                                inagg_dtype_t dtype, inagg_op_t op, inagg_request_t **req)
{
    if (comm && comm->opts.optimizer) {
        if (req)
            *req = NULL;
        return set_error(comm, INAGG_ERR_UNSUPPORTED, "this job runs an in-switch optimizer: "
                         "use inagg_push_pull");
    }
    return start_request(comm, send, recv, count, dtype, op, 0, req);
}

static inagg_result_t start_request(inagg_comm_t *comm, const void *send, void *recv,
                                    size_t count, inagg_dtype_t dtype, inagg_op_t op, int set,
                                    inagg_request_t **req)
{
    if (req)
        *req = NULL;
    if (!comm || !req)
        return set_error(comm, INAGG_ERR_INVALID, "comm and req must not be NULL");
    if (comm->p4)
        return set_error(comm, INAGG_ERR_UNSUPPORTED,
                         "a p4sgd communicator has no asynchronous large allreduce: use "
                         "inagg_iallreduce_small (one packet) or inagg_allreduce");
    inagg_result_t vrc = check_buffers(comm, send, recv, count, dtype, op);
    if (vrc != INAGG_OK)
        return vrc;
    inagg_request_t *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return set_error(comm, INAGG_ERR_NOMEM, "out of memory");
    rq->comm = comm;
    rq->er = (engine_request_t){send, recv, count, dtype, op, set};
    rq->parts_left = (int)comm->nengines;
    pthread_mutex_lock(&comm->mu);
    if (comm->fail_code != INAGG_OK) {
        inagg_result_t code = comm->fail_code;
        set_error(comm, code, "%s", comm->fail_detail);
        pthread_mutex_unlock(&comm->mu);
        free(rq);
        return code;
    }
    while (comm->issued - comm->completed >= QUEUE_CAP)
        pthread_cond_wait(&comm->cv, &comm->mu);
    comm->queue[comm->issued % QUEUE_CAP] = rq;
    comm->issued++;
    pthread_cond_broadcast(&comm->cv);
    pthread_mutex_unlock(&comm->mu);
    *req = rq;
    return INAGG_OK;
}

/* Wait on the condition with a deadline in ns (monotonic); returns non-zero on timeout. */
static int wait_until(inagg_comm_t *c, uint64_t deadline_ns)
{
    uint64_t now = util_now_ns();
    if (now >= deadline_ns)
        return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t left = deadline_ns - now;
    ts.tv_sec += (time_t)(left / 1000000000ull);
    ts.tv_nsec += (long)(left % 1000000000ull);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    return 0;
}

/* A p4sgd engine call failed with rc: take the switch's reason if the job failed, otherwise
 * fail the communicator with this one (its slots are out of step now). Sets last_error. */
static inagg_result_t p4_failure(inagg_comm_t *c, inagg_result_t rc, const char *detail)
{
    char d[256];
    snprintf(d, sizeof(d), "%s", detail);
    pthread_mutex_lock(&c->mu);
    if (c->fail_code != INAGG_OK && (rc == INAGG_ERR_JOB_FAILED || rc == INAGG_ERR_TIMEOUT ||
                                     rc == INAGG_ERR_CONNECTION)) {
        rc = c->fail_code;
        snprintf(d, sizeof(d), "%s", c->fail_detail);
    } else if (rc != INAGG_ERR_OVERFLOW) {
        fail_locked(c, rc, d);
    }
    pthread_mutex_unlock(&c->mu);
    return set_error(c, rc, "%s", d);
}

/* The result of a finished small request; frees it. */
static inagg_result_t finish_small(inagg_request_t *req)
{
    inagg_comm_t *c = req->comm;
    inagg_result_t rc = req->op.result;
    free(req);
    if (rc == INAGG_ERR_OVERFLOW)
        return set_error(c, rc, "int32 sum wrapped around in at least one element");
    if (rc != INAGG_OK)
        return p4_failure(c, rc, "the small allreduce failed");
    return rc;
}

inagg_result_t inagg_iallreduce_small(inagg_comm_t *comm, const void *send, void *recv,
                                      size_t count, inagg_dtype_t dtype, inagg_op_t op,
                                      inagg_request_t **req)
{
    if (req)
        *req = NULL;
    if (!comm || !req)
        return set_error(comm, INAGG_ERR_INVALID, "comm and req must not be NULL");
    if (!comm->p4)
        return set_error(comm, INAGG_ERR_UNSUPPORTED,
                         "inagg_iallreduce_small needs a p4sgd communicator (options.protocol = "
                         "INAGG_PROTO_P4SGD)");
    if (count == 0 || count > comm->opts.packet_elems)
        return set_error(comm, INAGG_ERR_INVALID,
                         "count %zu: a small allreduce carries 1..%u elements (packet_elems)",
                         count, comm->opts.packet_elems);
    inagg_result_t rc = check_buffers(comm, send, recv, count, dtype, op);
    if (rc != INAGG_OK)
        return rc;
    pthread_mutex_lock(&comm->mu);
    rc = comm->fail_code;
    pthread_mutex_unlock(&comm->mu);
    if (rc != INAGG_OK)
        return set_error(comm, rc, "%s", comm->fail_detail);
    inagg_request_t *rq = calloc(1, sizeof(*rq));
    if (!rq)
        return set_error(comm, INAGG_ERR_NOMEM, "out of memory");
    rq->comm = comm;
    rq->small = 1;
    rq->op = (p4_op_t){send, recv, (uint32_t)count, dtype, op, 0, 0, 0, INAGG_OK};
    char detail[256] = "";
    rc = p4engine_start(comm->p4, &rq->op, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        free(rq);
        return p4_failure(comm, rc, detail);
    }
    *req = rq;
    return INAGG_OK;
}

inagg_result_t inagg_waitany(inagg_request_t **reqs, size_t n, size_t *index)
{
    inagg_comm_t *c = NULL;
    int any_small = 0;
    for (size_t i = 0; i < n && reqs; i++)
        if (reqs[i]) {
            c = reqs[i]->comm;
            any_small |= reqs[i]->small;
        }
    if (!c || !index)
        return INAGG_ERR_INVALID;
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            inagg_request_t *r = reqs[i];
            int done = 0;
            if (r && r->small)
                done = r->op.done;
            else if (r)
                inagg_test(r, &done);
            if (done) {
                *index = i;
                reqs[i] = NULL;
                return inagg_wait(r);
            }
        }
        if (any_small) {
            char detail[256] = "";
            inagg_result_t rc = p4engine_progress(c->p4, 1, detail, sizeof(detail));
            if (rc != INAGG_OK)
                return p4_failure(c, rc, detail); /* every request is done now (failed) */
        } else {
            pthread_mutex_lock(&c->mu);
            wait_until(c, util_now_ns() + 5000000ull);
            pthread_mutex_unlock(&c->mu);
        }
    }
}

inagg_result_t inagg_test(inagg_request_t *req, int *done)
{
    if (!req || !done)
        return INAGG_ERR_INVALID;
    if (req->small) {
        if (!req->op.done) {
            char detail[256] = "";
            inagg_result_t rc = p4engine_progress(req->comm->p4, 0, detail, sizeof(detail));
            if (rc != INAGG_OK)
                p4_failure(req->comm, rc, detail); /* completes the request with the failure */
        }
        *done = req->op.done;
        return INAGG_OK;
    }
    pthread_mutex_lock(&req->comm->mu);
    *done = req->done;
    pthread_mutex_unlock(&req->comm->mu);
    return INAGG_OK;
}

inagg_result_t inagg_wait(inagg_request_t *req)
{
    if (!req)
        return INAGG_ERR_INVALID;
    inagg_comm_t *c = req->comm;
    if (req->small) {
        char detail[256] = "";
        inagg_result_t rc = p4engine_wait(c->p4, &req->op, detail, sizeof(detail));
        if (!req->op.done) { /* the engine failed before the result came */
            free(req);
            return p4_failure(c, rc, detail);
        }
        return finish_small(req);
    }
    pthread_mutex_lock(&c->mu);
    while (!req->done)
        pthread_cond_wait(&c->cv, &c->mu);
    inagg_result_t rc = req->result;
    if (rc == INAGG_ERR_JOB_FAILED || rc == INAGG_ERR_CONNECTION ||
        (rc == INAGG_ERR_TIMEOUT && c->fail_code != INAGG_OK)) {
        /* The engines only saw the abort; the reason came on the control connection. */
        if (c->fail_code != INAGG_OK) {
            rc = c->fail_code;
            snprintf(req->detail, sizeof(req->detail), "%s", c->fail_detail);
        }
    } else if (rc == INAGG_ERR_TIMEOUT || rc == INAGG_ERR_SYSTEM) {
        fail_locked(c, rc, req->detail); /* the job's slots are out of step now */
    }
    pthread_mutex_unlock(&c->mu);
    if (rc != INAGG_OK)
        set_error(c, rc, "%s", req->detail);
    free(req);
    return rc;
}

static inagg_result_t run_allreduce(inagg_comm_t *comm, const void *send, void *recv,
                                    size_t count, inagg_dtype_t dtype, inagg_op_t op, int set);

inagg_result_t inagg_allreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                               inagg_dtype_t dtype, inagg_op_t op)
{
    if (comm && comm->opts.optimizer)
        return set_error(comm, INAGG_ERR_UNSUPPORTED, "this job runs an in-switch optimizer: "
                         "use inagg_push_pull (gradients in, parameters out)");
    return run_allreduce(comm, send, recv, count, dtype, op, 0);
}

inagg_result_t inagg_push_pull(inagg_comm_t *comm, const float *grad, float *params,
                               size_t count)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    if (!comm->opts.optimizer)
        return set_error(comm, INAGG_ERR_UNSUPPORTED, "inagg_push_pull needs a communicator "
                         "created with options.optimizer");
    if (count != comm->optimizer.params)
        return set_error(comm, INAGG_ERR_INVALID, "count %zu: the job holds %llu parameters",
                         count, (unsigned long long)comm->optimizer.params);
    return run_allreduce(comm, grad, params, count, INAGG_FLOAT32, INAGG_SUM, 0);
}

inagg_result_t inagg_params_upload(inagg_comm_t *comm, const float *values, size_t count)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    if (!comm->opts.optimizer)
        return set_error(comm, INAGG_ERR_UNSUPPORTED, "inagg_params_upload needs a "
                         "communicator created with options.optimizer");
    if (count != comm->optimizer.params || (comm->rank == 0 && !values))
        return set_error(comm, INAGG_ERR_INVALID, "count %zu: the job holds %llu parameters "
                         "(and rank 0 must pass values)", count,
                         (unsigned long long)comm->optimizer.params);
    /* Rank 0 sends the values, the others zeros: the sum is rank 0's values, exactly. */
    float *zeros = comm->rank == 0 ? NULL : calloc(count, sizeof(float));
    float *out = malloc(count * sizeof(float));
    if ((comm->rank != 0 && !zeros) || !out) {
        free(zeros);
        free(out);
        return set_error(comm, INAGG_ERR_NOMEM, "out of memory");
    }
    inagg_result_t rc = run_allreduce(comm, comm->rank == 0 ? values : zeros, out, count,
                                      INAGG_FLOAT32, INAGG_SUM, 1);
    free(zeros);
    free(out);
    return rc;
}

static inagg_result_t run_allreduce(inagg_comm_t *comm, const void *send, void *recv,
                                    size_t count, inagg_dtype_t dtype, inagg_op_t op, int set)
{
    if (comm && comm->p4) {
        inagg_result_t rc = check_buffers(comm, send, recv, count, dtype, op);
        if (rc != INAGG_OK)
            return rc;
        pthread_mutex_lock(&comm->mu);
        rc = comm->fail_code;
        pthread_mutex_unlock(&comm->mu);
        if (rc != INAGG_OK)
            return set_error(comm, rc, "%s", comm->fail_detail);
        engine_request_t er = {send, recv, count, dtype, op, set};
        char detail[256] = "";
        rc = p4engine_allreduce(comm->p4, &er, detail, sizeof(detail));
        if (rc == INAGG_ERR_OVERFLOW)
            return set_error(comm, rc, "%s", detail);
        return rc == INAGG_OK ? rc : p4_failure(comm, rc, detail);
    }
    inagg_request_t *req;
    inagg_result_t rc = start_request(comm, send, recv, count, dtype, op, set, &req);
    return rc != INAGG_OK ? rc : inagg_wait(req);
}

inagg_result_t inagg_barrier(inagg_comm_t *comm)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    pthread_mutex_lock(&comm->mu);
    uint64_t target = comm->barriers_done + 1;
    inagg_result_t rc = comm->fail_code;
    pthread_mutex_unlock(&comm->mu);
    if (rc != INAGG_OK)
        return set_error(comm, rc, "%s", comm->fail_detail);
    if (ctl_write_line(comm->ctl_fd, "BARRIER", (int)comm->opts.timeout_ms) != 0)
        return set_error(comm, INAGG_ERR_CONNECTION, "cannot send BARRIER to the switch");
    uint64_t deadline = util_now_ns() + (uint64_t)comm->opts.timeout_ms * 1000000ull;
    pthread_mutex_lock(&comm->mu);
    while (comm->barriers_done < target && comm->fail_code == INAGG_OK)
        if (wait_until(comm, deadline))
            break;
    if (comm->barriers_done >= target)
        rc = INAGG_OK;
    else if (comm->fail_code != INAGG_OK)
        rc = set_error(comm, comm->fail_code, "%s", comm->fail_detail);
    else
        rc = set_error(comm, INAGG_ERR_TIMEOUT, "barrier: not every rank arrived within %u ms",
                       comm->opts.timeout_ms);
    pthread_mutex_unlock(&comm->mu);
    return rc;
}

inagg_result_t inagg_get_stats(const inagg_comm_t *comm, inagg_stats_t *out)
{
    if (!comm || !out)
        return INAGG_ERR_INVALID;
    memset(out, 0, sizeof(*out));
    for (uint32_t i = 0; i < comm->nengines; i++)
        engine_add_stats(comm->engines[i], out);
    if (comm->p4)
        p4engine_add_stats(comm->p4, out);
    return INAGG_OK;
}

inagg_result_t inagg_comm_destroy(inagg_comm_t *comm)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    pthread_mutex_lock(&comm->mu);
    while (comm->completed < comm->issued)
        pthread_cond_wait(&comm->cv, &comm->mu);
    int healthy = comm->fail_code == INAGG_OK;
    pthread_mutex_unlock(&comm->mu);
    if (healthy && comm->p4) {
        /* Acknowledge every result we received before leaving: a peer still waiting for a
         * slot's confirmation needs our acknowledgement. */
        char detail[256];
        if (p4engine_drain(comm->p4, comm->opts.timeout_ms, detail, sizeof(detail)) != INAGG_OK)
            healthy = 0;
    }
    if (healthy && ctl_write_line(comm->ctl_fd, "LEAVE", 1000) == 0) {
        uint64_t deadline = util_now_ns() + 2000000000ull;
        pthread_mutex_lock(&comm->mu);
        while (!comm->bye && comm->fail_code == INAGG_OK)
            if (wait_until(comm, deadline))
                break;
        pthread_mutex_unlock(&comm->mu);
    }
    comm_free(comm);
    return INAGG_OK;
}
