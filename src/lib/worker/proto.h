/*
 * proto.h - the slot protocols of the worker library, as modules behind one ops table.
 *
 * comm.c knows no protocol: it joins the job, finds the protocol's ops in the table
 * (worker_proto_find) and dispatches the API's calls to them. Each protocol is one file:
 * proto_switchml.c (SwitchML's streaming engine threads and the request ring) and
 * proto_p4sgd.c (P4SGD's small-message engine, run in the caller's thread). Adding a protocol
 * is a new file here plus one entry in proto.c's table (and its counterpart in the switch).
 *
 * Also here: what every protocol's engine shares (the parameters a join gives, the call being
 * run, the counters behind inagg_get_stats, and the conversion of payloads that are not block
 * fixed point).
 *
 * Errors: every op returns 0 or -errno, with a reason in its err/detail buffer; comm.c maps
 * them to inagg_result_t at the API (comm_result_of_errno) and settles failures there
 * (comm_settle): the switch's reason wins over what an engine saw, and a failed call fails
 * the communicator. The codes the engines use:
 *   -EINVAL     a bad option (the fault spec)            -ENOMEM     out of memory
 *   -ETIMEDOUT  no packet from the switch in time        -ECANCELED  the job failed (abort)
 *   -EIO        a send or receive failed (text: why)
 *   -EOVERFLOW  an int32 sum wrapped around, and -EDOM a float32 input was not finite: the
 *               result was delivered all the same
 */
#ifndef INAGG_WORKER_PROTO_H
#define INAGG_WORKER_PROTO_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "inagg.h"
#include "lib/codec/codec.h"
#include "lib/transport/transport.h"
#include "lib/wire/dpauth.h"
#include "lib/wire/wire.h"
#include "lib/worker/rto.h"

#define WORKER_MAX_THREADS 64u /* options.threads at most: engine threads per communicator */
#define WORKER_MAX_SHARDS 8u /* switches one job's slots may be spread over */

/* One switch of a sharded job (a comma-separated switch address): it serves the slots
 * s % nshards == its index, as its own job with its own id and token. */
typedef struct worker_shard {
    uint16_t job;
    uint64_t token;
    transport_addr_t queue0; /* its queue 0 (its JOINED port) */
    uint32_t queues, base; /* its queues (dataplane threads) and the job's first */
    dpauth_keys_t keys; /* the worker_params_t's dp_auth: this rank's keys
                                         there (its JOIN, wire/dpauth.h) */
} worker_shard_t;

/* The communicator's completion signal (inagg_comm_event_fd): an eventfd, made when the caller
 * first asks for it, that an engine writes when it completes a request. `raised` says it was
 * written since the caller last cleared it, so a burst of completions costs one write. */
typedef struct worker_signal {
    _Atomic int fd; /* the eventfd, -1 until inagg_comm_event_fd */
    _Atomic int raised; /* written since the last worker_signal_clear */
} worker_signal_t;

/* A request completed (or the job failed): make the fd readable, once per burst. Costs one
 * load when nobody asked for the fd. Any thread. */
void worker_signal_raise(worker_signal_t *s);
/* The waiter, before it looks at its requests: the fd is not readable any more, and the next
 * completion makes it readable again. */
void worker_signal_clear(worker_signal_t *s);

/* What a protocol's engines need from the options and the join. */
typedef struct worker_params {
    uint32_t rank, world;
    uint16_t job;
    uint64_t token;
    uint32_t slots, elems; /* the job's pool size and elements per packet */
    uint32_t threads; /* engine threads asked for (switchml) */
    inagg_float_mode_t float_mode; /* as joined */
    transport_addr_t sw_queue0; /* the switch's queue 0 (the JOINED port) */
    uint32_t sw_queues, sw_base; /* the switch's queues (dataplane threads) and the
                                         job's first: see worker_slot_queue */
    uint32_t nshards; /* switches the slots are spread over (>= 1); the
                                         fields above are shard 0's */
    int dp_auth; /* every packet carries a MAC (JOINED dpauth=1) */
    worker_shard_t shard[WORKER_MAX_SHARDS];
    uint32_t rto_us, rto_min_us, rto_max_us, timeout_ms;
    uint32_t poll_us; /* waiting: poll this long first (options.poll_us) */
    int socket_buffer;
    const char *faults; /* fault spec for both directions, or NULL */
    const char *transport; /* "udp" (NULL) or "roce" (options.transport, else
                                         INAGG_TRANSPORT) */
    uint32_t roce_psn0; /* roce: every QP's first PSN when roce_psn0_set */
    int roce_psn0_set; /* (INAGG_ROCE_PSN), else a random one */
    int roce_no_replay; /* roce: retransmissions take new PSNs (INAGG_ROCE_REPLAY=0) */
    uint32_t roce_mtu; /* roce: the path MTU (INAGG_ROCE_MTU; 0: from the interface) */
    int switch_takes_gso; /* udp: every shard's JOINED said gso=1 */
    uint32_t mcast_group; /* results may come to this multicast group (host
                                         order; JOINED mcast=, PROTOCOL.md 9.6), 0: none */
    uint16_t mcast_port;
    int codec_no_helper; /* code on the engine thread only (INAGG_CODEC_HELPER=0) */
    int chunk_tags; /* `chunk` carries the chunk index (optimizer jobs), so
                                         p4sgd acknowledgements never ride on it */
    codec_spec_t codec; /* the job's compression of float32 (CODEC_NONE: none) */
    int error_feedback; /* keep the codec's residual per element (lossy codec) */
    _Atomic int *abort_flag; /* non-zero: the job failed; engines stop */
    uint64_t stale_token; /* the previous generation's token (fail-over), 0: none */
    _Atomic uint64_t *stale; /* where packets carrying it are counted, or NULL */
    pthread_mutex_t *mu; /* the communicator's mutex and condition: engine */
    pthread_cond_t *cv; /* threads use them to take and complete requests */
    worker_signal_t *signal; /* the communicator's: raised on each completion */
} worker_params_t;

/* What a fail-over needs of one allreduce (failover.c): per chunk, whether this rank holds its
 * result, and that result as the switch sent it (payload words in wire order, the fixed-point
 * exponent), so it can be handed to the other ranks bit for bit. The engine thread that
 * delivers a chunk writes its entries; they are read only after the engines stopped. */
typedef struct worker_oprec {
    uint32_t *words; /* [count] */
    int16_t *exp; /* [nchunks] */
    uint8_t *held; /* [nchunks] */
    size_t count, nchunks; /* of the op recorded */
    size_t cap_words, cap_chunks; /* allocated */
    uint64_t op_tag; /* the op number it was prepared for, plus one (0: none yet) */
} worker_oprec_t;

/* One allreduce as the API got it. */
typedef struct worker_call {
    const void *send;
    void *recv;
    size_t count;
    inagg_dtype_t dtype;
    inagg_op_t op;
    int set; /* a parameter upload (WIRE_FLAG_SET) */
    float *resid; /* the caller's error-feedback residual of this tensor ([count]), or NULL:
                     the engine's own (inagg_iallreduce_ef) */
    worker_oprec_t *rec; /* record each delivered chunk here (fail-over on), or NULL */
} worker_call_t;

/* A request as a salvage needs it (comm.c, salvage.c): its call (call.rec: its record, NULL
 * when not recorded) and its op number among the communicator's requests. */
typedef struct worker_salv {
    worker_call_t call;
    uint64_t seq;
} worker_salv_t;

/* The base of every protocol's request: a protocol allocates its own request type with this
 * as its first member (zeroed) and frees it in wait. */
struct inagg_request {
    inagg_comm_t *comm;
    worker_salv_t salv; /* set by comm.c once started */
};

typedef struct worker_proto_ops {
    const char *name; /* as JOIN spells it: "switchml", "p4sgd" */
    inagg_protocol_t protocol;
    int native_float; /* 1: float32 always travels natively (the JOIN asks
                                         for float=native whatever options.float_mode says) */

    /* The protocol's state for a communicator that joined with p. */
    int (*create)(const worker_params_t *p, void **state, char *err, size_t errlen);
    void (*destroy)(void *state);

    /* Start an asynchronous allreduce of any size (NULL: the protocol has none). */
    int (*start)(void *state, inagg_comm_t *comm, const worker_call_t *call, inagg_request_t **req,
                 char *detail, size_t dlen);
    /* Start a one-packet allreduce (count 1..elems) (NULL: the protocol has none). */
    int (*start_small)(void *state, inagg_comm_t *comm, const worker_call_t *call,
                       inagg_request_t **req, char *detail, size_t dlen);
    /* A blocking allreduce of any size. */
    int (*allreduce)(void *state, const worker_call_t *call, char *detail, size_t dlen);
    /* Whether req has finished; never blocks and makes no progress. */
    int (*done)(inagg_request_t *req);
    /* Wait for req, free it, and return its result (with a reason in detail). */
    int (*wait)(void *state, inagg_request_t *req, char *detail, size_t dlen);
    /* Move requests on: handle what arrived and due timers; with block, first wait a few ms
     * at most for something to happen (inagg_test, inagg_waitany). */
    int (*progress)(void *state, int block, char *detail, size_t dlen);
    /* Before leaving: wait until no request is outstanding (NULL: nothing to wait for). */
    void (*quiesce)(void *state);
    /* Before leaving a healthy job: let the switch free every slot we used, within
     * timeout_ms (NULL: nothing to do). */
    int (*drain)(void *state, uint32_t timeout_ms, char *detail, size_t dlen);
    /* The communicator failed: end every pending operation (NULL: the engines watch the
     * abort flag themselves). */
    void (*fail)(void *state);
    /* The descriptor inagg_comm_event_fd hands out, given the signal's eventfd (made already):
     * that fd itself when engine threads complete requests, or one that also polls readable
     * when a call must move requests on (p4sgd: a packet came, a timer is due). 0 or -errno;
     * the protocol closes what it made in destroy. */
    int (*event_fd)(void *state, int signal_fd, int *out, char *detail, size_t dlen);
    /* Add the engines' counters to *acc. */
    void (*add_stats)(const void *state, inagg_stats_t *acc);
    /* Add the engines' coding counters to *acc (NULL: the protocol does not code). */
    void (*add_codec_stats)(const void *state, inagg_codec_stats_t *acc);
    /* Add the counters of the engines' transport endpoints to *acc
     * (worker_transport_stats_add). */
    void (*add_transport_stats)(const void *state, inagg_transport_stats_t *acc);
} worker_proto_ops_t;

/* The protocol's ops, or NULL for a protocol this library does not have. */
const worker_proto_ops_t *worker_proto_find(inagg_protocol_t protocol);

/* ---- shared by the engines -------------------------------------------------------------- */

/* One engine's counters: one writer (its engine), read by inagg_get_stats. */
typedef struct worker_counters {
    _Atomic uint64_t sent, received, retransmissions, duplicates, invalid, bytes_sent,
        bytes_received;
    _Atomic uint32_t srtt_us, rto_us;
    /* Coding (compressed jobs): chunks coded and nanoseconds spent, and of those the ones
     * spent while at least one of this engine's packets was on the wire (overlap). */
    _Atomic uint64_t chunks_encoded, chunks_decoded, encode_ns, decode_ns, overlap_ns;
    _Atomic uint32_t code_floor_us; /* the timeout's coding floor (rto_code_floor_us) */
} worker_counters_t;

#define WORKER_CNT_ADD(f, n)                                                                       \
    atomic_store_explicit(&(f), atomic_load_explicit(&(f), memory_order_relaxed) + (n),            \
                          memory_order_relaxed)

/* Counters and estimator of a new engine. */
void worker_counters_init(worker_counters_t *c, rto_estimator_t *rto, const worker_params_t *p);
/* A packet of len bytes left / was accepted. */
static inline void worker_count_sent(worker_counters_t *c, uint32_t len)
{
    WORKER_CNT_ADD(c->sent, 1);
    WORKER_CNT_ADD(c->bytes_sent, len);
}
static inline void worker_count_received(worker_counters_t *c, size_t len)
{
    WORKER_CNT_ADD(c->received, 1);
    WORKER_CNT_ADD(c->bytes_received, len);
}
/* A round-trip sample (from a packet sent once) into the estimator, published in c. */
void worker_rtt_sample(worker_counters_t *c, rto_estimator_t *rto, double sample_us);
/* Add c to *acc: sums, and the largest srtt and rto. */
void worker_counters_add(const worker_counters_t *c, inagg_stats_t *acc);

/* Add c's coding counters to *acc (the largest floor). */
void worker_counters_add_codec(const worker_counters_t *c, inagg_codec_stats_t *acc);

/* Wait on cv (the caller holds mu) until deadline_ns on the monotonic clock: non-zero when
 * the deadline had passed already. */
int worker_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline_ns);

/* The retransmission timer of one packet in flight. */
typedef struct worker_timer {
    uint64_t sent_ns, deadline_ns;
    uint32_t rto_us; /* this packet's timeout, doubled on each retransmission */
    int retransmitted; /* Karn: no RTT sample from a retransmitted packet */
} worker_timer_t;

/* A new packet: the engine's current timeout, and an RTT sample when it is answered. */
static inline void worker_timer_fresh(worker_timer_t *t, const rto_estimator_t *rto)
{
    t->rto_us = rto->rto_us;
    t->retransmitted = 0;
}
/* The packet left at now: due again after its timeout. */
static inline void worker_timer_arm(worker_timer_t *t, uint64_t now)
{
    t->sent_ns = now;
    t->deadline_ns = now + (uint64_t)t->rto_us * 1000u;
}
/* Its timer expired: it goes again with twice the timeout, counted as a retransmission. */
static inline void worker_timer_expired(worker_timer_t *t, uint32_t max_us, worker_counters_t *c)
{
    t->rto_us = rto_doubled(t->rto_us, max_us);
    t->retransmitted = 1;
    WORKER_CNT_ADD(c->retransmissions, 1);
}
/* Its answer came at now: a round-trip sample, unless it was sent more than once. */
static inline void worker_timer_answered(const worker_timer_t *t, uint64_t now,
                                         worker_counters_t *c, rto_estimator_t *rto)
{
    if (!t->retransmitted)
        worker_rtt_sample(c, rto, (double)(now - t->sent_ns) / 1000.0);
}

/* Packets queued on one endpoint, to leave together in one send. */
typedef struct worker_txq {
    transport_t *tp;
    transport_tx_t *pkts; /* [cap] */
    transport_tx_t *grouped; /* [cap]: pkts by destination, for one flush (txgroup.h) */
    uint8_t *group_of; /* [cap]: its scratch */
    int n, cap;
} worker_txq_t;

/* Room for cap packets on tp: 0 or -ENOMEM. */
int worker_txq_init(worker_txq_t *q, transport_t *tp, int cap);
void worker_txq_free(worker_txq_t *q);
/* Send what is queued: 0 or -errno. */
int worker_txq_flush(worker_txq_t *q);
/* Queue len bytes at buf (they must stay put until the flush) to `to`, counted as sent. A
 * full queue is flushed first; a send error then shows up at the next flush. */
static inline void worker_txq_push(worker_txq_t *q, const uint8_t *buf, uint32_t len,
                                   const transport_addr_t *to, worker_counters_t *c)
{
    if (q->n >= q->cap)
        (void)worker_txq_flush(q);
    q->pkts[q->n++] = (transport_tx_t){.head = buf, .head_len = len, .to = *to};
    worker_count_sent(c, len);
}

/* The header fields every packet of this rank for (slot, round) carries. */
/* The switch (shard) that serves pool slot `slot`. */
static inline const worker_shard_t *worker_shard_of(const worker_params_t *p, uint32_t slot)
{
    return &p->shard[slot % p->nshards];
}

/* Is a packet from the switch for this job: its slot in the pool, and the job id and token
 * those of the shard serving that slot? */
static inline int worker_packet_ours(const worker_params_t *p, const wire_header_t *h)
{
    if (h->slot >= p->slots ||
        (h->rank != p->rank && !(p->mcast_group && h->rank == WIRE_RANK_ALL)))
        return 0;
    const worker_shard_t *sh = worker_shard_of(p, h->slot);
    return h->job == sh->job && h->token == sh->token;
}

static inline wire_header_t worker_header(const worker_params_t *p, uint8_t type, uint32_t slot,
                                          uint32_t round)
{
    const worker_shard_t *sh = worker_shard_of(p, slot);
    wire_header_t h = {
        .version = INAGG_PROTOCOL_VERSION,
        .type = type,
        .job = sh->job,
        .rank = (uint16_t)p->rank,
        .token = sh->token,
        .slot = slot,
        .round = round,
        .flags = wire_ver_of_round(round),
    };
    return h;
}

/* Bytes before a packet's payload: the header, and its MAC in an authenticated job. */
static inline uint32_t worker_hdr_bytes(const worker_params_t *p)
{
    return WIRE_HEADER_SIZE + (p->dp_auth ? WIRE_MAC_BYTES : 0u);
}

/* Encode h into pkt, whose payload (h->count words) is at pkt + worker_hdr_bytes(p) already,
 * and in an authenticated job seal it with this rank's key for the slot's switch. The
 * packet's length. */
uint32_t worker_seal(const worker_params_t *p, wire_header_t *h, uint8_t *pkt);

/* Decode a datagram from the switch and, in an authenticated job, check its MAC under this
 * rank's key for the slot's switch (the MAC flag then cleared from *h). 0, or -EBADMSG: not a
 * packet of ours (malformed, or a MAC missing, unexpected or wrong: forged or changed),
 * which the caller counts as invalid and drops. Its payload is at buf + worker_hdr_bytes. */
int worker_open_packet(const worker_params_t *p, const uint8_t *buf, size_t len, wire_header_t *h);

/* The switch queue (dataplane thread) that serves pool slot `slot`, numbered across the
 * shards (two slots have the same number exactly when one thread of one switch serves both). */
static inline uint32_t worker_slot_queue(const worker_params_t *p, uint32_t slot)
{
    const worker_shard_t *sh = worker_shard_of(p, slot);
    return (slot % p->nshards) * 64u + transport_slot_queue(sh->base, sh->queues, slot);
}
/* The address of that queue, as endpoint t reaches it. 0 or -errno. */
int worker_slot_addr(const worker_params_t *p, const transport_t *t, uint32_t slot,
                     transport_addr_t *out);
/* Add endpoint t's transport counters and fault decisions to *acc. */
void worker_transport_stats_add(const transport_t *t, inagg_transport_stats_t *acc);

/* An engine's endpoint: `buffer` bytes of socket buffers, receive buffers for the job's
 * largest packet, and the fault injection of p->faults drawing its own decisions (the rank
 * and `stream` mixed). 0, or -errno with a reason in err (-EINVAL: a bad fault spec). */
int worker_open_endpoint(const worker_params_t *p, int buffer, uint32_t stream, transport_t **out,
                         char *err, size_t errlen);
/* A worker's endpoint that takes the results its switch sends to the job's multicast group
 * (p->mcast_group, PROTOCOL.md 9.6), with faults as worker_open_endpoint's, and coalesced
 * datagrams taken whole where the switch sends GSO runs. */
int worker_open_mcast_endpoint(const worker_params_t *p, int buffer, uint32_t stream,
                               transport_t **out, char *err, size_t errlen);

/* Bytes a packet's payload may take: elems words, or a coded chunk of elems values. */
static inline size_t worker_payload_cap(const worker_params_t *p)
{
    size_t plain = (size_t)p->elems * 4u;
    size_t coded = p->codec.mode != CODEC_NONE ? codec_max_bytes(&p->codec, p->elems) : 0;
    return coded > plain ? coded : plain;
}

/* A result's payload words (wire order) into len elements at dst as the engines deliver
 * them: int32 or native float32 (worker_decode_plain), or block fixed point with exponent exp
 * (fixed); AVG divides by world. Fail-over recovery decodes a handed-on result with it too,
 * so the delivered bits are the same either way. */
void worker_decode_result(inagg_dtype_t dtype, int fixed, inagg_op_t op, uint32_t world,
                          const uint32_t *payload, int16_t exp, void *dst, size_t len);

/* A packet that is not ours (worker_packet_ours) but carries the previous generation's
 * token: counted as stale (1) instead of invalid (0). */
static inline int worker_packet_stale(const worker_params_t *p, const wire_header_t *h)
{
    if (!p->stale_token || h->token != p->stale_token)
        return 0;
    if (p->stale)
        atomic_fetch_add_explicit(p->stale, 1, memory_order_relaxed);
    return 1;
}

/* int32 or native float32 elements into big-endian payload words, and back (delivery: AVG
 * divides by the world size). */
void worker_encode_plain(inagg_dtype_t dtype, const void *src, uint32_t *payload, size_t len);
void worker_decode_plain(inagg_dtype_t dtype, inagg_op_t op, uint32_t world,
                         const uint32_t *payload, void *dst, size_t len);

#endif /* INAGG_WORKER_PROTO_H */
