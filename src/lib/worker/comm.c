/*
 * comm.c - the communicator: the public API of include/inagg.h, independent of the slot
 * protocol.
 *
 * Creating a communicator checks the options, joins the job over the switch's TCP control
 * port (join.c), creates the protocol's state through its ops (proto.h: the switchml
 * streaming engine threads, or the p4sgd small-message engine that runs in the caller's
 * thread) and starts the monitor thread that reads the control connection. Every call then
 * checks its arguments here and is dispatched to the protocol's ops; a failure is settled
 * against the communicator's failure state in one place (comm_settle, errors.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "lib/base/env.h"
#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/base/pollmode.h"
#include "lib/base/util.h"
#include "lib/kernels/vec.h"
#include "lib/netio/roce_frame.h"
#include "lib/worker/comm.h"

uint32_t inagg_version(void) { return INAGG_VERSION_NUMBER; }
uint32_t inagg_comm_rank(const inagg_comm_t *comm) { return comm ? comm->rank : 0; }
uint32_t inagg_comm_world(const inagg_comm_t *comm) { return comm ? comm->world : 0; }
uint32_t inagg_comm_packet_elems(const inagg_comm_t *comm)
{
    return comm ? comm->opts.packet_elems : 0;
}

static void comm_free(inagg_comm_t *c)
{
    if (c->ps)
        c->proto->destroy(c->ps); /* closes what its event_fd made */
    int signal_fd = atomic_load(&c->signal.fd);
    if (signal_fd >= 0)
        close(signal_fd);
    comm_close_control(c);
    comm_failover_free(c);
    comm_requests_free(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    explicit_bzero(c->dp_keys, sizeof(c->dp_keys));
    free(c);
}

static int check_options(const inagg_options_t *o, char *detail, size_t len)
{
    /* Options of callers built before the compression and secret fields existed are taken,
     * without them (they read as zero). */
    if (o->struct_size < offsetof(inagg_options_t, compress))
        return set_err(detail, len, -EINVAL,
                       "options.struct_size %u is smaller than this library's %zu: "
                       "initialise options with INAGG_OPTIONS_INIT",
                       o->struct_size, sizeof(inagg_options_t));
    if (o->packet_elems > INAGG_MAX_PACKET_ELEMS)
        return set_err(detail, len, -EINVAL,
                       "packet_elems %u must be 1..%u, or 0 to size packets to the path",
                       o->packet_elems, INAGG_MAX_PACKET_ELEMS);
    if (o->slots == 0 || o->slots > 1u << 20)
        return set_err(detail, len, -EINVAL, "slots %u must be 1..%u", o->slots, 1u << 20);
    if (o->threads == 0 || o->threads > WORKER_MAX_THREADS || o->threads > o->slots)
        return set_err(detail, len, -EINVAL, "threads %u must be 1..%u and at most slots (%u)",
                       o->threads, WORKER_MAX_THREADS, o->slots);
    if (o->float_mode != INAGG_FLOAT_FIXED && o->float_mode != INAGG_FLOAT_NATIVE)
        return set_err(detail, len, -EINVAL, "float_mode %d is not a valid inagg_float_mode_t",
                       o->float_mode);
    if (!worker_proto_find(o->protocol))
        return set_err(detail, len, -EINVAL,
                       "protocol %d is not INAGG_PROTO_SWITCHML or INAGG_PROTO_P4SGD", o->protocol);
    if (o->optimizer) {
        const inagg_optimizer_t *z = o->optimizer;
        if ((unsigned)z->kind > INAGG_OPT_SMORMS3 || z->params == 0 || z->params > (1ull << 32) ||
            (z->init != INAGG_INIT_ZERO && z->init != INAGG_INIT_SEEDED)) {
            return set_err(detail, len, -EINVAL,
                           "optimizer: kind must be an inagg_optimizer_kind_t, params "
                           "1..2^32, init INAGG_INIT_ZERO or INAGG_INIT_SEEDED");
        }
    }
    if (o->compress) {
        codec_spec_t s;
        char why[200];
        if (codec_parse(o->compress, &s, why, sizeof why) != 0)
            return set_err(detail, len, -EINVAL, "compress: %s", why);
        if (s.mode != CODEC_NONE && (o->protocol != INAGG_PROTO_SWITCHML || o->optimizer))
            return set_err(detail, len, -EINVAL,
                           "compress: only switchml jobs without an in-switch optimizer "
                           "can compress");
        if (s.mode != CODEC_NONE && /* fits with the dataplane MAC too */
            WIRE_HEADER_MAX + codec_max_bytes(&s, o->packet_elems) > WIRE_MAX_DATAGRAM) {
            return set_err(detail, len, -EINVAL,
                           "compress: a packet of %u values in %s may take %zu bytes, "
                           "more than a datagram: use fewer packet_elems",
                           o->packet_elems, o->compress, codec_max_bytes(&s, o->packet_elems));
        }
    }
    if (o->rto_min_us == 0 || o->rto_min_us > o->rto_max_us || o->timeout_ms == 0)
        return set_err(detail, len, -EINVAL,
                       "need 0 < rto_min_us <= rto_max_us and timeout_ms > 0");
    return 0;
}

/* The optimizer as JOIN carries it, built once from the public struct (checked already). */
static wire_optimizer_t optimizer_of(const inagg_optimizer_t *z)
{
    wire_optimizer_t o = {0};
    if (!z)
        return o;
    o.present = 1;
    o.step = (optim_config_t)OPTIM_CONFIG_INIT;
    o.step.kind = (optim_kind_t)z->kind;
    o.step.lr = z->lr;
    o.step.beta1 = z->beta1;
    o.step.beta2 = z->beta2;
    o.step.eps = z->eps;
    o.step.eps_placement = z->eps_outside ? OPTIM_EPS_OUTSIDE : OPTIM_EPS_INSIDE;
    o.step.momentum = z->momentum;
    o.step.weight_decay = z->weight_decay;
    o.params = z->params;
    o.seeded = z->init == INAGG_INIT_SEEDED;
    o.seed = z->seed;
    return o;
}

_Static_assert(INAGG_POLL_SLEEP == SWITCH_POLL_WORKER_SLEEP, "one encoding of sleep");
_Static_assert(INAGG_POLL_BUSY == UINT32_MAX, "one encoding of busy");

/* options.poll_us as the engine's wait uses it: 0 sleeps, UINT32_MAX never sleeps, N spins N
 * microseconds of each wait. The options' 0 is the default (adaptive). */
static uint32_t worker_poll_us(uint32_t poll_us)
{
    if (poll_us == INAGG_POLL_SLEEP)
        return 0;
    return poll_us ? poll_us : SWITCH_POLL_SPIN_US_DEFAULT;
}

/* Create the protocol's state for the job the switches admitted us to: sw[k] is shard k's
 * queue 0, j[k] its JOINED. */
int comm_start_protocol(inagg_comm_t *c, const transport_addr_t *sw, const wire_joined_t *j,
                        char *detail, size_t dlen)
{
    const inagg_options_t *o = &c->opts;
    for (uint32_t k = 1; k < c->nshards; k++)
        if (j[k].protocol != j[0].protocol || j[k].slots != j[0].slots ||
            j[k].elems != j[0].elems || j[k].float_mode != j[0].float_mode) {
            return set_err(detail, dlen, -EPROTO,
                           "shard %u admitted the job with other parameters than "
                           "shard 0",
                           k);
        }
    worker_params_t p = {
        .rank = c->rank,
        /* the ranks a result sums: more than ours when our switch is a leaf (fixed-point
         * scaling and averages divide by it) */
        .world = j[0].contributors ? j[0].contributors : c->world,
        .job = c->job_id,
        .token = c->token,
        .slots = o->slots,
        .elems = o->packet_elems,
        .threads = o->threads,
        .float_mode = c->proto->native_float ? INAGG_FLOAT_NATIVE : o->float_mode,
        .sw_queue0 = *sw,
        .sw_queues = j->threads,
        .sw_base = j->base,
        .nshards = c->nshards,
        .rto_us = o->rto_us ? o->rto_us : 2000,
        .rto_min_us = o->rto_min_us,
        .rto_max_us = o->rto_max_us,
        .timeout_ms = o->timeout_ms + 1000, /* let the switch's verdict come first */
        .poll_us = worker_poll_us(o->poll_us),
        .socket_buffer = o->socket_buffer ? (int)o->socket_buffer : 4 << 20,
        .faults = o->faults,
        .transport = o->transport,
        .chunk_tags = c->opt.present,
        .codec = c->codec,
        .error_feedback = codec_is_lossy(&c->codec) && !o->no_error_feedback,
        .abort_flag = &c->abort_flag,
        .stale_token = c->prev_token,
        .stale = &c->stale,
        .mu = &c->mu,
        .cv = &c->cv,
        .signal = &c->signal,
    };
    /* Every shard's job was registered by the same ranks with the same secret and options:
     * one says for all whether packets carry MACs. */
    p.dp_auth = (int)j[0].dpauth;
    p.switch_takes_gso = 1;
    for (uint32_t k = 0; k < c->nshards; k++)
        p.switch_takes_gso &= j[k].gso == 1;
    if (c->nshards == 1) { /* a group is offered only to a JOIN that said mcast=1 */
        p.mcast_group = j[0].mcast_addr;
        p.mcast_port = (uint16_t)j[0].mcast_port;
    }
    for (uint32_t k = 0; k < c->nshards; k++) {
        if (j[k].dpauth != j[0].dpauth)
            return set_err(detail, dlen, -EPROTO,
                           "the shards disagree on dataplane authentication (shard %u)", k);
        p.shard[k] = (worker_shard_t){.job = (uint16_t)j[k].id,
                                      .token = j[k].token,
                                      .queue0 = sw[k],
                                      .queues = j[k].threads,
                                      .base = j[k].base,
                                      .keys = c->dp_keys[k]};
    }
    int set = env_u32(ENV_ROCE_PSN, 0xffffff, &p.roce_psn0, detail, dlen);
    if (set < 0)
        return -EINVAL; /* env_u32 wrote the reason */
    p.roce_psn0_set = set;
    p.roce_no_replay = !env_flag(ENV_ROCE_REPLAY);
    if (env_u32(ENV_ROCE_MTU, UINT32_MAX, &p.roce_mtu, detail, dlen) < 0)
        return -EINVAL;
    if (p.roce_mtu && !roce_mtu_valid(p.roce_mtu))
        return set_err(detail, dlen, -EINVAL,
                       "INAGG_ROCE_MTU=%u is not one of InfiniBand's path MTUs (256, 512, 1024, "
                       "2048 or 4096)",
                       p.roce_mtu);
    p.codec_no_helper = !env_flag(ENV_CODEC_HELPER);
    c->eff_world = p.world;
    int rc = c->proto->create(&p, &c->ps, detail, dlen);
    if (rc != 0) {
        c->ps = NULL;
        return rc;
    }
    return 0;
}

/* $INAGG_POLL as options.poll_us: *poll_us set when it is given; 0, or -EINVAL with the
 * reason in detail. */
static int poll_from_env(uint32_t *poll_us, char *detail, size_t detail_len)
{
    const char *poll_env = env_get(ENV_POLL);
    if (!poll_env || !*poll_env)
        return 0;
    switch_poll_t mode;
    uint32_t spin;
    char why[160];
    if (switch_poll_parse(poll_env, &mode, &spin, why, sizeof(why)) != 0)
        return set_err(detail, detail_len, -EINVAL, "INAGG_POLL: %s", why);
    *poll_us = switch_poll_worker_us(mode, spin);
    return 0;
}

/* The arguments of inagg_comm_create other than the options: 0 or -EINVAL with the reason. */
static int check_identity(inagg_comm_t **out, const char *switch_addr, const char *job,
                          uint32_t rank, uint32_t world, const inagg_options_t *opts, char *detail,
                          size_t detail_len)
{
    if (!out || !switch_addr || !job || !opts)
        return set_err(detail, detail_len, -EINVAL,
                       "out, switch_addr, job and opts must not be NULL");
    size_t jlen = strlen(job);
    if (jlen == 0 || jlen >= 64 || strpbrk(job, " \t\r\n="))
        return set_err(detail, detail_len, -EINVAL,
                       "job name must be 1..63 characters without spaces or '='");
    if (world == 0 || world > INAGG_MAX_WORLD || rank >= world)
        return set_err(detail, detail_len, -EINVAL,
                       "rank %u / world %u: world must be 1..%u and rank < world", rank, world,
                       INAGG_MAX_WORLD);
    return 0;
}

/* "HOST:PORT", or the shards' "HOST:PORT,HOST:PORT,...": the number of shards, with each
 * one's address and text, or -EINVAL with the reason. */
static int parse_shards(const char *switch_addr, transport_addr_t sw[WORKER_MAX_SHARDS],
                        char shard_text[WORKER_MAX_SHARDS][64], char *detail, size_t detail_len)
{
    uint32_t nshards = 0;
    for (const char *a = switch_addr; *a;) {
        size_t n = strcspn(a, ",");
        if (nshards == WORKER_MAX_SHARDS || n == 0 || n >= sizeof(shard_text[0]))
            return set_err(detail, detail_len, -EINVAL,
                           "bad switch address '%s' (expected HOST:PORT, or up to %u of them "
                           "separated by commas for a sharded job)",
                           switch_addr, WORKER_MAX_SHARDS);
        memcpy(shard_text[nshards], a, n);
        shard_text[nshards][n] = '\0';
        int prc = transport_parse_addr("udp", shard_text[nshards], &sw[nshards]);
        if (prc != 0) {
            char why[160];
            netaddr_explain(shard_text[nshards], prc, why, sizeof(why));
            return set_err(detail, detail_len, -EINVAL, "bad switch address '%s': %s",
                           shard_text[nshards], why);
        }
        nshards++;
        a += n;
        if (*a == ',' && *++a == '\0')
            return set_err(detail, detail_len, -EINVAL,
                           "bad switch address '%s' (a trailing comma)", switch_addr);
    }
    if (nshards == 0)
        return set_err(detail, detail_len, -EINVAL, "empty switch address");
    return (int)nshards;
}

inagg_result_t inagg_comm_create(inagg_comm_t **out, const char *switch_addr, const char *job,
                                 uint32_t rank, uint32_t world, const inagg_options_t *opts,
                                 char *detail, size_t detail_len)
{
    if (out)
        *out = NULL;
    if (detail && detail_len)
        detail[0] = '\0';
    transport_addr_t sw[WORKER_MAX_SHARDS];
    char shard_text[WORKER_MAX_SHARDS][64];
    int checked = check_identity(out, switch_addr, job, rank, world, opts, detail, detail_len);
    if (checked == 0)
        checked = check_options(opts, detail, detail_len);
    endpoint_list_t eps = {.n = 1};
    int listed = checked == 0 && strchr(switch_addr, ';') != NULL; /* a fail-over list */
    if (listed)
        checked = endpoints_parse(switch_addr, &eps, detail, detail_len);
    for (uint32_t e = 1; checked == 0 && e < eps.n; e++) /* each entry a valid address */
        checked = parse_shards(eps.text[e], sw, shard_text, detail, detail_len) < 0 ? -EINVAL : 0;
    if (checked == 0) /* generation 0 runs on the first entry */
        checked =
            parse_shards(listed ? eps.text[0] : switch_addr, sw, shard_text, detail, detail_len);
    if (checked > 0 && !listed) /* one switch (or shards, which do not fail over) */
        snprintf(eps.text[0], sizeof(eps.text[0]), "%s", shard_text[0]);
    if (checked < 0)
        return INAGG_ERR_INVALID;
    uint32_t nshards = (uint32_t)checked;
    if (dpauth_init() != 0)
        return comm_result_of_errno(
            set_err(detail, detail_len, -EIO, "libsodium failed to initialise"));
    inagg_comm_t *c = calloc(1, sizeof(*c));
    if (!c)
        return comm_result_of_errno(set_err(detail, detail_len, -ENOMEM, "out of memory"));
    c->rank = rank;
    c->world = world;
    memcpy(&c->opts, opts,
           opts->struct_size < sizeof(c->opts) ? opts->struct_size : sizeof(c->opts));
    c->proto = worker_proto_find(opts->protocol);
    c->opt = optimizer_of(opts->optimizer);
    c->opts.optimizer = NULL; /* the caller's; c->opt is the copy */
    if (c->opt.present)
        c->opts.float_mode = INAGG_FLOAT_NATIVE; /* gradients and parameters are float32 */
    if (opts->compress)
        (void)codec_parse(opts->compress, &c->codec, NULL, 0); /* checked above */
    c->opts.compress = NULL; /* the caller's; c->codec is the copy */
    if (c->codec.mode != CODEC_NONE)
        c->opts.float_mode = INAGG_FLOAT_NATIVE; /* float32 travels coded, summed in float */
    c->nshards = nshards;
    for (uint32_t k = 0; k < WORKER_MAX_SHARDS; k++)
        c->ctl_fd[k] = -1;
    c->wake_fd = -1;
    atomic_init(&c->signal.fd, -1);
    c->event_fd = -1;
    snprintf(c->job, sizeof(c->job), "%s", job);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (!c->opts.faults)
        c->opts.faults = env_get(ENV_FAULTS);
    if (!c->opts.transport)
        c->opts.transport = env_get(ENV_TRANSPORT);
    if (!c->opts.poll_us && poll_from_env(&c->opts.poll_us, detail, detail_len) < 0) {
        comm_free(c);
        return INAGG_ERR_INVALID;
    }
    c->endpoints = eps;
    if (comm_failover_setup(c, detail, detail_len) < 0) {
        comm_free(c);
        return INAGG_ERR_INVALID;
    }
    int sized = comm_size_packets(c, sw, (const char(*)[64])shard_text, detail, detail_len);
    if (sized < 0) { /* a packet size refused, or no route to the switch */
        comm_free(c);
        return sized == -EINVAL ? INAGG_ERR_INVALID : INAGG_ERR_CONNECTION;
    }

    /* Every rank joins the shards in the same order, so each shard's join completes. */
    wire_joined_t j[WORKER_MAX_SHARDS];
    inagg_result_t rc = INAGG_OK;
    for (uint32_t k = 0; k < nshards && rc == INAGG_OK; k++) {
        rc = comm_join(c, k, shard_text[k], &j[k], detail, detail_len);
        if (rc == INAGG_OK)
            transport_addr_set_port(&sw[k], (uint16_t)j[k].port); /* its queue 0 */
    }
    if (rc == INAGG_OK) {
        c->job_id = (uint16_t)j[0].id;
        c->token = j[0].token;
        rc = comm_result_of_errno(comm_start_protocol(c, sw, j, detail, detail_len));
    }
    int mrc = rc == INAGG_OK ? comm_start_monitor(c) : 0;
    if (mrc < 0)
        rc = comm_result_of_errno(set_err(detail, detail_len, mrc,
                                          "cannot start the monitor thread: %s", strerror(-mrc)));
    if (rc != INAGG_OK) {
        comm_free(c);
        return rc;
    }
    *out = c;
    return INAGG_OK;
}

/* The argument checks every allreduce shares. */
inagg_result_t comm_check_buffers(inagg_comm_t *comm, const void *send, const void *recv,
                                  size_t count, inagg_dtype_t dtype, inagg_op_t op)
{
    if (count > 0 && (!send || !recv))
        return comm_set_error(comm, INAGG_ERR_INVALID, "send and recv must not be NULL");
    if (dtype != INAGG_INT32 && dtype != INAGG_FLOAT32)
        return comm_set_error(comm, INAGG_ERR_INVALID,
                              "dtype %d is not INAGG_INT32 or INAGG_FLOAT32", (int)dtype);
    if (op != INAGG_SUM && op != INAGG_AVG)
        return comm_set_error(comm, INAGG_ERR_INVALID, "op %d is not INAGG_SUM or INAGG_AVG",
                              (int)op);
    if (dtype == INAGG_INT32 && codec_is_lossy(&comm->codec)) {
        char mode[CODEC_SPEC_MAX];
        codec_format(&comm->codec, mode, sizeof mode);
        return comm_set_error(comm, INAGG_ERR_INVALID,
                              "int32 allreduce refused: this communicator compresses with %s, "
                              "which may change values (use zfp:reversible or none)",
                              mode);
    }
    uint64_t max_chunks = (uint64_t)UINT32_MAX;
    if (count / comm->opts.packet_elems >= max_chunks)
        return comm_set_error(comm, INAGG_ERR_INVALID, "count %zu exceeds %llu chunks", count,
                              (unsigned long long)max_chunks);
    if ((const char *)send != (const char *)recv && count > 0) {
        const char *s = send, *r = recv;
        size_t bytes = count * 4;
        if (s < r + bytes && r < s + bytes)
            return comm_set_error(comm, INAGG_ERR_INVALID,
                                  "send and recv overlap without being the same buffer");
    }
    return INAGG_OK;
}

/* Checks, then the protocol's start (small or not); failures are settled. */
static inagg_result_t start_call(inagg_comm_t *comm, const worker_call_t *call, int small,
                                 inagg_request_t **req)
{
    inagg_result_t rc =
        comm_check_buffers(comm, call->send, call->recv, call->count, call->dtype, call->op);
    if (rc == INAGG_OK)
        rc = comm_failure(comm);
    if (rc != INAGG_OK)
        return rc;
    char detail[COMM_DETAIL_MAX] = "";
    if (comm_failover_pending(comm, detail, sizeof(detail)) < 0) /* lost between calls */
        return comm_settle(comm, -ECANCELED, detail);
    worker_call_t rec_call = *call; /* with its record where a salvage can finish it */
    uint64_t seq = 0;
    if (comm->salvage_on && !small && comm_request_record(comm, &rec_call, &seq) != 0)
        return comm_set_error(comm, INAGG_ERR_NOMEM, "out of memory for the request's record");
    int err = (small ? comm->proto->start_small : comm->proto->start)(comm->ps, comm, &rec_call,
                                                                      req, detail, sizeof(detail));
    if (err == 0 || err == -EOVERFLOW || err == -EDOM) {
        pthread_mutex_lock(&comm->mu);
        comm->async_out++; /* a fail-over recovers no request in flight */
        pthread_mutex_unlock(&comm->mu);
        (*req)->salv = (worker_salv_t){.call = rec_call, .seq = seq};
    } else if (rec_call.rec) { /* not started: its number and record are the next one's */
        comm->req_started--;
        comm_request_ended(comm, &rec_call, seq, -1);
    }
    if (err == -ENOMEM) /* no request: nothing started, the communicator is intact */
        return comm_set_error(comm, INAGG_ERR_NOMEM, "%s", detail);
    return comm_settle(comm, err, detail);
}

inagg_result_t inagg_iallreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                                inagg_dtype_t dtype, inagg_op_t op, inagg_request_t **req)
{
    return inagg_iallreduce_ef(comm, send, recv, count, dtype, op, NULL, req);
}

inagg_result_t inagg_iallreduce_ef(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                                   inagg_dtype_t dtype, inagg_op_t op, float *residual,
                                   inagg_request_t **req)
{
    if (req)
        *req = NULL;
    if (comm && comm->opt.present)
        return comm_set_error(comm, INAGG_ERR_UNSUPPORTED,
                              "this job runs an in-switch "
                              "optimizer: use inagg_push_pull");
    if (!comm || !req)
        return comm_set_error(comm, INAGG_ERR_INVALID, "comm and req must not be NULL");
    if (!comm->proto->start)
        return comm_set_error(comm, INAGG_ERR_UNSUPPORTED,
                              "a %s communicator has no asynchronous large allreduce: use %s"
                              "inagg_allreduce",
                              comm->proto->name,
                              comm->proto->start_small ? "inagg_iallreduce_small (one packet) or "
                                                       : "");
    if (residual && dtype != INAGG_FLOAT32)
        return comm_set_error(comm, INAGG_ERR_INVALID,
                              "a residual is for float32 allreduces (error feedback)");
    worker_call_t call = {
        .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op, .resid = residual};
    return start_call(comm, &call, 0, req);
}

inagg_result_t inagg_iallreduce_small(inagg_comm_t *comm, const void *send, void *recv,
                                      size_t count, inagg_dtype_t dtype, inagg_op_t op,
                                      inagg_request_t **req)
{
    if (req)
        *req = NULL;
    if (!comm || !req)
        return comm_set_error(comm, INAGG_ERR_INVALID, "comm and req must not be NULL");
    if (!comm->proto->start_small)
        return comm_set_error(comm, INAGG_ERR_UNSUPPORTED,
                              "inagg_iallreduce_small needs a p4sgd communicator "
                              "(options.protocol = INAGG_PROTO_P4SGD)");
    if (count == 0 || count > comm->opts.packet_elems)
        return comm_set_error(comm, INAGG_ERR_INVALID,
                              "count %zu: a small allreduce carries 1..%u elements "
                              "(packet_elems)",
                              count, comm->opts.packet_elems);
    worker_call_t call = {.send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
    return start_call(comm, &call, 1, req);
}

inagg_result_t inagg_test(inagg_request_t *req, int *done)
{
    if (!req || !done)
        return INAGG_ERR_INVALID;
    inagg_comm_t *c = req->comm;
    if (!c->proto->done(req)) {
        char detail[COMM_DETAIL_MAX] = "";
        int err = c->proto->progress(c->ps, 0, detail, sizeof(detail));
        comm_settle(c, err, detail); /* a failure completes the request with it */
    }
    *done = c->proto->done(req);
    return INAGG_OK;
}

inagg_result_t inagg_wait(inagg_request_t *req)
{
    if (!req)
        return INAGG_ERR_INVALID;
    inagg_comm_t *c = req->comm;
    char detail[COMM_DETAIL_MAX] = "";
    worker_salv_t salv = req->salv; /* the request is freed by the wait */
    int err = c->proto->wait(c->ps, req, detail, sizeof(detail));
    if (salv.call.rec)
        comm_request_ended(c, &salv.call, salv.seq, err == 0 || err == -EOVERFLOW || err == -EDOM);
    pthread_mutex_lock(&c->mu);
    if (c->async_out)
        c->async_out--;
    if (err != 0 && c->lost != COMM_LOST_NONE) { /* a request is not recovered */
        char d[COMM_DETAIL_MAX];
        snprintf(d, sizeof(d),
                 "%s, with a request in flight (fail-over recovers blocking calls only)",
                 c->lost_detail);
        comm_fail_locked(c, INAGG_ERR_CONNECTION, d);
    }
    pthread_mutex_unlock(&c->mu);
    return comm_settle(c, err, detail);
}

inagg_result_t inagg_comm_event_fd(inagg_comm_t *comm, int *fd)
{
    if (fd)
        *fd = -1;
    if (!comm || !fd)
        return comm_set_error(comm, INAGG_ERR_INVALID, "comm and fd must not be NULL");
    if (comm->event_fd >= 0) {
        *fd = comm->event_fd;
        return INAGG_OK;
    }
    int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (efd < 0)
        return comm_set_error(comm, INAGG_ERR_SYSTEM, "eventfd: %s", strerror(errno));
    char detail[COMM_DETAIL_MAX] = "";
    int out = -1;
    int rc = comm->proto->event_fd(comm->ps, efd, &out, detail, sizeof(detail));
    if (rc != 0) {
        close(efd);
        return comm_set_error(comm,
                              rc == -EOPNOTSUPP ? INAGG_ERR_UNSUPPORTED : comm_result_of_errno(rc),
                              "%s", detail);
    }
    atomic_store(&comm->signal.fd, efd); /* engines raise it from now on */
    comm->event_fd = out;
    /* A failure that came before the fd existed raised nothing: raise it now. */
    pthread_mutex_lock(&comm->mu);
    if (comm->fail_code != INAGG_OK)
        worker_signal_raise(&comm->signal);
    pthread_mutex_unlock(&comm->mu);
    *fd = out;
    return INAGG_OK;
}

inagg_result_t inagg_comm_event_clear(inagg_comm_t *comm)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    worker_signal_clear(&comm->signal);
    return INAGG_OK;
}

inagg_result_t inagg_waitany(inagg_request_t **reqs, size_t n, size_t *index)
{
    inagg_comm_t *c = NULL;
    for (size_t i = 0; i < n && reqs; i++)
        if (reqs[i])
            c = reqs[i]->comm;
    if (!c || !index)
        return INAGG_ERR_INVALID;
    for (;;) {
        for (size_t i = 0; i < n; i++) {
            inagg_request_t *r = reqs[i];
            if (r && r->comm->proto->done(r)) {
                *index = i;
                reqs[i] = NULL;
                return inagg_wait(r);
            }
        }
        char detail[COMM_DETAIL_MAX] = "";
        int err = c->proto->progress(c->ps, 1, detail, sizeof(detail));
        if (err != 0)
            return comm_settle(c, err, detail); /* every request is done now (failed) */
    }
}

static inagg_result_t run_allreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                                    inagg_dtype_t dtype, inagg_op_t op, int set)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    inagg_result_t rc = comm_check_buffers(comm, send, recv, count, dtype, op);
    if (rc == INAGG_OK)
        rc = comm_failure(comm);
    if (rc != INAGG_OK)
        return rc;
    worker_call_t call = {
        .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op, .set = set};
    char detail[COMM_DETAIL_MAX] = "";
    int err = comm_failover_allreduce(comm, &call, detail, sizeof(detail));
    return comm_settle(comm, err, detail);
}

inagg_result_t inagg_allreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                               inagg_dtype_t dtype, inagg_op_t op)
{
    if (comm && comm->opt.present)
        return comm_set_error(comm, INAGG_ERR_UNSUPPORTED,
                              "this job runs an in-switch "
                              "optimizer: use inagg_push_pull (gradients in, parameters out)");
    return run_allreduce(comm, send, recv, count, dtype, op, 0);
}

inagg_result_t inagg_push_pull(inagg_comm_t *comm, const float *grad, float *params, size_t count)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    if (!comm->opt.present)
        return comm_set_error(comm, INAGG_ERR_UNSUPPORTED,
                              "inagg_push_pull needs a "
                              "communicator created with options.optimizer");
    if (count != comm->opt.params)
        return comm_set_error(comm, INAGG_ERR_INVALID, "count %zu: the job holds %llu parameters",
                              count, (unsigned long long)comm->opt.params);
    return run_allreduce(comm, grad, params, count, INAGG_FLOAT32, INAGG_SUM, 0);
}

inagg_result_t inagg_params_upload(inagg_comm_t *comm, const float *values, size_t count)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    if (!comm->opt.present)
        return comm_set_error(comm, INAGG_ERR_UNSUPPORTED,
                              "inagg_params_upload needs a "
                              "communicator created with options.optimizer");
    if (count != comm->opt.params || (comm->rank == 0 && !values))
        return comm_set_error(comm, INAGG_ERR_INVALID,
                              "count %zu: the job holds %llu "
                              "parameters (and rank 0 must pass values)",
                              count, (unsigned long long)comm->opt.params);
    /* Rank 0 sends the values, the others zeros: the sum is rank 0's values, exactly. */
    float *zeros = comm->rank == 0 ? NULL : calloc(count, sizeof(float));
    float *out = malloc(count * sizeof(float));
    if ((comm->rank != 0 && !zeros) || !out) {
        free(zeros);
        free(out);
        return comm_set_error(comm, INAGG_ERR_NOMEM, "out of memory");
    }
    inagg_result_t rc = run_allreduce(comm, comm->rank == 0 ? values : zeros, out, count,
                                      INAGG_FLOAT32, INAGG_SUM, 1);
    free(zeros);
    free(out);
    return rc;
}

inagg_result_t inagg_get_stats(const inagg_comm_t *comm, inagg_stats_t *out)
{
    if (!comm || !out)
        return INAGG_ERR_INVALID;
    *out = comm->stats_before; /* the generations before a fail-over */
    if (comm->ps)
        comm->proto->add_stats(comm->ps, out);
    return INAGG_OK;
}

/* A size-versioned struct whose first field is its size: of `all` (full bytes, filled by the
 * library), the bytes the caller's `asked` covers go to out, their count in that first field.
 * INAGG_ERR_INVALID when asked does not reach `head`. */
static inagg_result_t copy_versioned(void *out, void *all, size_t full, size_t head)
{
    uint32_t asked;
    memcpy(&asked, out, sizeof(asked));
    if (asked < head)
        return INAGG_ERR_INVALID;
    uint32_t fill = asked < full ? asked : (uint32_t)full;
    memcpy(all, &fill, sizeof(fill));
    memcpy(out, all, fill);
    return INAGG_OK;
}

inagg_result_t inagg_get_codec_stats(const inagg_comm_t *comm, inagg_codec_stats_t *out)
{
    if (!comm || !out)
        return INAGG_ERR_INVALID;
    inagg_codec_stats_t all;
    memset(&all, 0, sizeof(all));
    if (comm->proto->add_codec_stats && comm->ps)
        comm->proto->add_codec_stats(comm->ps, &all);
    return copy_versioned(out, &all, sizeof(all), offsetof(inagg_codec_stats_t, chunks_encoded));
}

inagg_result_t inagg_get_transport_stats(const inagg_comm_t *comm, inagg_transport_stats_t *out)
{
    if (!comm || !out)
        return INAGG_ERR_INVALID;
    inagg_transport_stats_t all;
    memset(&all, 0, sizeof(all));
    snprintf(all.transport, sizeof(all.transport), "%s",
             comm->opts.transport ? comm->opts.transport : "udp");
    if (comm->proto->add_transport_stats && comm->ps)
        comm->proto->add_transport_stats(comm->ps, &all);
    return copy_versioned(out, &all, sizeof(all), offsetof(inagg_transport_stats_t, fault_dropped));
}

const char *inagg_transport_counter_name(const inagg_comm_t *comm, uint32_t i)
{
    return comm ? transport_counter_name(comm->opts.transport, i) : NULL;
}

inagg_result_t inagg_comm_destroy(inagg_comm_t *comm)
{
    if (!comm)
        return INAGG_ERR_INVALID;
    if (comm->proto->quiesce && comm->ps)
        comm->proto->quiesce(comm->ps);
    pthread_mutex_lock(&comm->mu);
    int healthy = comm->fail_code == INAGG_OK;
    pthread_mutex_unlock(&comm->mu);
    /* A switch lost before this rank leaves: the others may be recovering the last allreduce
     * and need this rank's record of it, so it fails over with them first. */
    if (healthy && comm->failover_on) {
        char detail[COMM_DETAIL_MAX];
        if (comm_failover_pending(comm, detail, sizeof(detail)) < 0)
            healthy = 0;
    }
    if (healthy && comm->proto->drain) {
        /* e.g. p4sgd: acknowledge every result we received before leaving, as a peer still
         * waiting for a slot's confirmation needs our acknowledgement. */
        char detail[COMM_DETAIL_MAX];
        if (comm->proto->drain(comm->ps, comm->opts.timeout_ms, detail, sizeof(detail)) != 0)
            healthy = 0;
    }
    if (healthy)
        comm_leave(comm);
    comm_free(comm);
    return INAGG_OK;
}
