/*
 * inagg.h - the worker API of inagg, in-network aggregation for distributed training.
 *
 * A process joins a job on an aggregation switch (`inagg switch`) as one rank of a fixed
 * world size, then calls collective operations on a communicator, in the same order on every
 * rank, like NCCL or MPI. The switch sums the ranks' contributions as packets arrive and sends
 * every rank the result: each rank sends its tensor once and receives the sum once.
 *
 * Conventions
 *   - Every call returns an inagg_result_t: INAGG_OK (0) or a negative code. inagg_strerror()
 *     gives a static text for a code; inagg_last_error() gives the detail of the last failure
 *     on a communicator (which rank vanished, which limit was hit, ...).
 *   - Counts are in elements, not bytes. send == recv means in place.
 *   - The library never exits, aborts or prints in its caller's process: failures are
 *     reported through result codes and inagg_last_error() only.
 *   - Threading: a communicator may be used from one thread at a time. Different communicators
 *     (different jobs) are independent and may be used from different threads concurrently.
 *   - Ownership: buffers passed to an asynchronous call belong to the library until the
 *     request completes (inagg_test() reports done, or inagg_wait() returns).
 */
#ifndef INAGG_H
#define INAGG_H

#include <stddef.h>
#include <stdint.h>

#include "inagg/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Result codes. New codes are only ever appended. */
typedef enum inagg_result {
    INAGG_OK = 0,
    INAGG_ERR_INVALID = -1, /* an argument is invalid (null pointer, bad dtype, ...) */
    INAGG_ERR_SYSTEM = -2, /* a system call failed; the detail names it and errno */
    INAGG_ERR_NOMEM = -3, /* out of memory */
    INAGG_ERR_TIMEOUT = -4, /* no progress within the configured time */
    INAGG_ERR_REFUSED = -5, /* the switch refused the job (pool exhausted, duplicate
                                   rank, world-size or parameter mismatch) */
    INAGG_ERR_VERSION = -6, /* the switch speaks another protocol version */
    INAGG_ERR_JOB_FAILED = -7, /* the job failed: a rank vanished or stopped sending */
    INAGG_ERR_CONNECTION = -8, /* the connection to the switch was lost */
    INAGG_ERR_PROTOCOL = -9, /* the switch sent something this library cannot parse */
    INAGG_ERR_OVERFLOW = -10, /* int32 sum wrapped around in at least one element; the
                                   wrapped result was delivered */
    INAGG_ERR_NONFINITE = -11, /* a float32 input held NaN or Inf; the chunks that held one
                                   are NaN in the result on every rank */
    INAGG_ERR_UNSUPPORTED = -12 /* valid request this build or job cannot serve */
} inagg_result_t;

typedef enum inagg_dtype { INAGG_INT32 = 0, INAGG_FLOAT32 = 1 } inagg_dtype_t;

typedef enum inagg_op {
    INAGG_SUM = 0,
    INAGG_AVG = 1 /* sum divided by the world size; for int32, C integer division */
} inagg_op_t;

/* How float32 tensors are carried and added (switchml protocol).
 * Reproducibility: NATIVE adds in the order the packets arrive, which changes from run to run,
 * so the same inputs can give sums that differ in their last bits between runs (float addition
 * is not associative); every rank of one call still gets the same bytes. FIXED adds integers,
 * whose sum does not depend on the order: the same inputs give bit-identical sums every run.
 * Choose FIXED where runs must be reproducible. */
typedef enum inagg_float_mode {
    INAGG_FLOAT_FIXED = 0, /* block fixed point: per-chunk scale from an agreed exponent, int32
                              add in the switch (SwitchML 4.6). Error per element at most
                              W*(0.5+2^-20)/f plus half an ulp of the result (see
                              docs/PROTOCOL.md). Order-independent: reproducible run to run */
    INAGG_FLOAT_NATIVE = 1 /* float32 add in the switch, in arrival order: the last bits of a
                              sum may differ from run to run */
} inagg_float_mode_t;

typedef enum inagg_protocol {
    INAGG_PROTO_SWITCHML = 0, /* throughput-centric: two copies per slot, self-clocked window
                                 (SwitchML); for large tensors */
    INAGG_PROTO_P4SGD = 1 /* latency-centric: one copy per slot, result sent on the last
                                 contribution, acknowledged off the critical path (P4SGD); for
                                 many small allreduces in flight. float32 travels natively and
                                 the switch adds it in rank order (reproducible), so float_mode
                                 is ignored; engine threads are not used (threads ignored) */
} inagg_protocol_t;

/* In-switch optimizer (see inagg_push_pull): the switch keeps the job's parameters and
 * optimizer state and applies one step per chunk as soon as the chunk's gradients are summed. */
typedef enum inagg_optimizer_kind {
    INAGG_OPT_SGD = 0, /* p -= lr * g (with momentum: torch.optim.SGD's buffer) */
    INAGG_OPT_ADAGRAD = 1, /* acc += g^2; p -= lr * g / D */
    INAGG_OPT_ADAM = 2, /* bias-corrected moments; p -= lr * m_hat / D */
    INAGG_OPT_SMORMS3 = 3 /* Funk's SMORMS3 (the paper's Algorithm 4) */
} inagg_optimizer_kind_t;

typedef enum inagg_param_init {
    INAGG_INIT_ZERO = 0, /* every parameter starts at 0 (inagg_params_upload may follow) */
    INAGG_INIT_SEEDED = 1 /* uniform in [-0.05, 0.05) from `seed` */
} inagg_param_init_t;

typedef struct inagg_optimizer {
    inagg_optimizer_kind_t kind;
    uint64_t params; /* parameters the switch holds; every push is this long */
    float lr, beta1, beta2, eps;
    int eps_outside; /* 0: D = sqrt(v + eps), the paper's; 1: sqrt(v) + eps, PyTorch's */
    float momentum; /* SGD only; 0 = none */
    float weight_decay; /* added to the gradient as wd * p (PyTorch's L2); 0 = none */
    inagg_param_init_t init;
    uint64_t seed;
} inagg_optimizer_t;

#define INAGG_OPTIMIZER_INIT                                                                       \
    {                                                                                              \
        INAGG_OPT_SGD, 0u, 0.01f, 0.9f, 0.999f, 1e-8f, 0, 0.0f, 0.0f, INAGG_INIT_ZERO, 0u          \
    }

/*
 * Options of a communicator. Initialise with INAGG_OPTIONS_INIT, then change fields.
 * The struct only ever grows at the end; `struct_size` lets the library tell versions apart.
 */
typedef struct inagg_options {
    uint32_t struct_size; /* sizeof(inagg_options_t), set by the initializer */
    uint32_t slots; /* slots (window) the job reserves on the switch */
    uint32_t packet_elems; /* elements per packet: 64 and 256 as in hardware, up to
                                 INAGG_MAX_PACKET_ELEMS for software. 0 (the default): the
                                 most whose datagram fits one frame of the path MTU toward
                                 the switch, learned at create (1500-byte Ethernet: 352;
                                 9000: 2227; loopback: INAGG_MAX_PACKET_ELEMS). A value set
                                 here whose datagram the path would fragment is refused
                                 (INAGG_ERR_INVALID, naming the MTU); RoCE frames its
                                 messages itself (INAGG_ROCE_MTU) */
    uint32_t threads; /* engine threads per worker, each with its own socket */
    inagg_float_mode_t float_mode;
    inagg_protocol_t protocol;
    uint32_t rto_us; /* initial retransmission timeout; adapted to measured RTT */
    uint32_t rto_min_us; /* lower bound of the adaptive timeout */
    uint32_t rto_max_us; /* upper bound, also the cap of exponential backoff */
    uint32_t timeout_ms; /* a rank silent this long while others wait fails the job (the
                                 switch caps it at its --worker-timeout); a call with no
                                 progress fails at the latest 1 s later; also bounds join
                                 and barrier */
    uint32_t socket_buffer; /* SO_RCVBUF/SO_SNDBUF bytes per engine socket (0: library
                                 default) */
    const char *faults; /* fault injection spec, e.g. "drop=0.01,dup=0.01,reorder=0.01,
                                 seed=7" (NULL: taken from $INAGG_FAULTS, if set) */
    const inagg_optimizer_t *optimizer; /* non-NULL: the switch holds the parameters and runs
                                 this optimizer (float32 native; gradients averaged) */
    const char *compress; /* NULL or "none": float32 travels uncompressed. Else the job's
                                 codec: "zfp:rate=R", "zfp:precision=P", "zfp:accuracy=A",
                                 "zfp:reversible" or "fp16". Workers encode each packet, the
                                 switch decodes, sums in float and re-encodes the result.
                                 switchml only; int32 calls on a lossy job are refused
                                 (INAGG_ERR_INVALID), on a reversible one travel as int32 */
    uint32_t no_error_feedback; /* 0 (default): with a lossy `compress`, each rank keeps what
                                 its codec dropped from element i of its float32 allreduces and
                                 adds it to element i of the next one (error feedback: meant
                                 for a communicator that reduces the same tensor each step);
                                 1: no residual */
    const char *secret; /* the job secret its ranks share (NULL: $INAGG_JOB_SECRET, else
                                 the file secret_file names); a job registered with one admits
                                 only ranks that prove it. It never crosses the wire */
    const char *secret_file; /* a file holding the secret (trailing newline ignored; NULL:
                                 $INAGG_JOB_SECRET_FILE) */
    const char *transport; /* how packets travel: "udp", or "roce" (RoCE v1 RDMA Writes on
                                 the Ethernet segment of an `inagg switch --l2`). NULL:
                                 $INAGG_TRANSPORT, else udp. A caller built against an older
                                 inagg.h (smaller struct_size) gets that default */
    uint32_t no_dataplane_auth; /* 0 (default): a job with a secret authenticates every
                                 dataplane packet both ways with a MAC under keys derived at
                                 JOIN (forged or changed packets are dropped and counted);
                                 1 (or $INAGG_NO_DATAPLANE_AUTH=1): only JOIN is
                                 authenticated. The rank that registers the job decides */
    uint32_t poll_us; /* how a rank waits for the switch's answer (p4sgd): 0 is the
                                 default ($INAGG_POLL when set, else adaptive: asks the
                                 kernel without waiting, yielding the CPU between looks,
                                 for the first 200 us of each wait, then sleeps); N spins
                                 N microseconds of each wait before sleeping;
                                 INAGG_POLL_SLEEP sleeps in the kernel until a packet
                                 comes; INAGG_POLL_BUSY never sleeps (owns a core) */
    uint32_t no_failover; /* 0 (default): a switchml communicator fails over to its switch
                                 list when the switch is lost (unless $INAGG_FAILOVER=0);
                                 1: a lost switch fails its calls at once, for a caller
                                 that finishes them over a channel of its own on every rank
                                 alike (inagg_salvage_requests: the torch backend) */
} inagg_options_t;

#define INAGG_POLL_BUSY 0xffffffffu
#define INAGG_POLL_SLEEP 0xfffffffeu

#define INAGG_MAX_PACKET_ELEMS                                                                     \
    16360u /* (65507 - 36 - 28) / 4: one UDP datagram, with the
                                         dataplane MAC (28 bytes) of a job with a secret */
#define INAGG_MAX_WORLD 64u

#define INAGG_OPTIONS_INIT                                                                         \
    {                                                                                              \
        sizeof(inagg_options_t), 16u, 0u, 1u, INAGG_FLOAT_FIXED, INAGG_PROTO_SWITCHML, 2000u,      \
            1000u, 50000u, 30000u, 0u, NULL, NULL, NULL, 0u, NULL, NULL, NULL, 0u, 0u, 0u          \
    }

typedef struct inagg_comm inagg_comm_t;
typedef struct inagg_request inagg_request_t;

/* Per-communicator counters since creation. */
typedef struct inagg_stats {
    uint64_t packets_sent; /* contributions sent, first transmissions and retransmits */
    uint64_t packets_received; /* results accepted */
    uint64_t retransmissions; /* contributions sent again after a timeout */
    uint64_t duplicates_ignored; /* results for a round already completed, dropped */
    uint64_t invalid_dropped; /* malformed or foreign packets dropped */
    uint64_t bytes_sent; /* UDP payload bytes sent */
    uint64_t bytes_received; /* UDP payload bytes received */
    uint32_t srtt_us; /* smoothed round-trip time */
    uint32_t rto_us; /* current retransmission timeout */
} inagg_stats_t;

/*
 * Join job `job` on the switch at `switch_addr` ("HOST:PORT") as rank `rank` of `world`.
 * Blocks until every rank has joined (the switch acts as the barrier) or opts->timeout_ms
 * passes. The first rank to arrive registers the job with its options; the others must
 * bring the same world size and options or they are refused. On failure *out is NULL and,
 * if `detail` is non-NULL, a reason is written there (at most detail_len bytes).
 *
 * Sharding: `switch_addr` may list up to 8 switches, "HOST:PORT,HOST:PORT,...": the job's
 * slots are spread over them (slot s on switch s % K), so one switch process's CPU does not
 * bound the job. Every rank must give the same list in the same order; it joins each switch
 * in turn. A failure of any of them fails the communicator.
 *
 * Fail-over: "HOST:PORT;HOST:PORT;..." (up to 8, one switch each) lists the switches a
 * switchml communicator moves to when its switch is lost (inagg_failover_stats_t); one
 * address is tried again after a loss too. A malformed list is INAGG_ERR_INVALID.
 */
inagg_result_t inagg_comm_create(inagg_comm_t **out, const char *switch_addr, const char *job,
                                 uint32_t rank, uint32_t world, const inagg_options_t *opts,
                                 char *detail, size_t detail_len);

/* Leave the job and free the communicator. Waits for outstanding requests to end. */
inagg_result_t inagg_comm_destroy(inagg_comm_t *comm);

uint32_t inagg_comm_rank(const inagg_comm_t *comm);
uint32_t inagg_comm_world(const inagg_comm_t *comm);
/* Elements per packet as the communicator sends them: options.packet_elems, or with 0 what
 * the path to the switch carries in one frame (0 for a NULL comm). */
uint32_t inagg_comm_packet_elems(const inagg_comm_t *comm);

/* Blocking allreduce of `count` elements. */
inagg_result_t inagg_allreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                               inagg_dtype_t dtype, inagg_op_t op);

/*
 * Non-blocking allreduce of any size, on either protocol. Requests run in the order they were
 * started (collective order, which must be the same on every rank) while the caller computes.
 * Each request must be finished with inagg_wait(), which also frees it. On a switchml
 * communicator the engine threads move it on by themselves. On a p4sgd one it is
 * inagg_iallreduce_small when it fits one packet; a larger one takes the next slots chunk by
 * chunk as they come free, and progress (sending its later chunks too) happens inside the
 * library's calls, as for inagg_iallreduce_small; a request started after it starts once all
 * its chunks have.
 */
inagg_result_t inagg_iallreduce(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                                inagg_dtype_t dtype, inagg_op_t op, inagg_request_t **req);

/*
 * inagg_iallreduce with the caller's own error-feedback residual for this tensor: `residual`
 * holds `count` float32 values, zero before the first call, that belong to this tensor alone
 * and stay valid until the request is waited for. On a job with a lossy codec the library
 * codes send[i] + residual[i] and leaves in residual[i] what the codec dropped of it, to be
 * sent with the next call on the same tensor. A caller that reduces several tensors in turn
 * (DDP's gradient buckets) keeps one residual per tensor, where the communicator's own error
 * feedback (options.no_error_feedback = 0) is one per element index and fits one tensor
 * reduced every step. On a job without a lossy codec the residual is left as it is. NULL:
 * exactly inagg_iallreduce. INAGG_ERR_INVALID for a residual with a dtype other than float32.
 */
inagg_result_t inagg_iallreduce_ef(inagg_comm_t *comm, const void *send, void *recv, size_t count,
                                   inagg_dtype_t dtype, inagg_op_t op, float *residual,
                                   inagg_request_t **req);

/*
 * Small allreduce, asynchronous: `count` <= opts.packet_elems elements, carried in one packet
 * on one slot. What follows is the p4sgd protocol's; on a switchml communicator it is an
 * inagg_iallreduce of that size (completing in call order, which "any order" includes). Up to opts.slots may be in flight; they complete
 * in any order (the partial activations of a micro-batch pipeline, P4SGD Algorithm 1). Calls
 * must be made in the same order on every rank (the n-th call on every rank is one allreduce).
 * When every slot is busy, the call first makes progress until the oldest slot is released
 * (bounded by opts.timeout_ms). Progress happens inside the library's calls (this one,
 * inagg_test, inagg_wait, inagg_waitany, inagg_allreduce): there is no background thread, so
 * latency is one switch round trip plus the caller's wake-up.
 */
inagg_result_t inagg_iallreduce_small(inagg_comm_t *comm, const void *send, void *recv,
                                      size_t count, inagg_dtype_t dtype, inagg_op_t op,
                                      inagg_request_t **req);

/*
 * Wait until any of reqs[0..n) finishes (NULL entries are skipped): its index goes to *index,
 * the request is freed, reqs[*index] becomes NULL, and its result is returned. Returns
 * INAGG_ERR_INVALID when every entry is NULL.
 */
inagg_result_t inagg_waitany(inagg_request_t **reqs, size_t n, size_t *index);

/*
 * In-switch optimizer (a communicator created with options.optimizer): push this rank's
 * gradient of all `count` (= optimizer.params) parameters and receive the parameters after
 * the step. The switch averages the ranks' gradients (sum / world) chunk by chunk, applies one
 * optimizer step to the chunk as soon as its last gradient arrives, and returns the chunk's
 * new parameters to every rank; a retransmission gets the same parameters back, so each step
 * is applied exactly once whatever is lost. `params` may equal `grad`.
 */
inagg_result_t inagg_push_pull(inagg_comm_t *comm, const float *grad, float *params, size_t count);

/*
 * Set the switch's parameters (collective): rank 0's `values` (count = optimizer.params)
 * become the parameters; the other ranks' `values` are ignored and may be NULL. No step.
 */
inagg_result_t inagg_params_upload(inagg_comm_t *comm, const float *values, size_t count);

/* *done = 1 when the request has finished (then inagg_wait() returns at once). */
inagg_result_t inagg_test(inagg_request_t *req, int *done);

/* Wait for the request, return its result, free it. */
inagg_result_t inagg_wait(inagg_request_t *req);

/*
 * Completion signal: *fd becomes a descriptor that polls readable (POLLIN; poll, select or
 * epoll) when a request of this communicator completes, so a thread that drives requests can
 * sleep in the kernel instead of calling inagg_test() in a loop.
 *
 *   - Level-triggered: once readable it stays readable until inagg_comm_event_clear(). Never
 *     read() it yourself (it may be an epoll descriptor).
 *   - The waiter's loop, free of lost wake-ups: inagg_comm_event_clear(); then inagg_test()
 *     the requests it waits for; if none is done, poll the fd (with a timeout, as every wait
 *     should have); repeat. A completion after the clear makes the fd readable again.
 *   - "Completes" means inagg_test() would report the request done: on a switchml
 *     communicator the engine threads complete it and write the signal then, not before (one
 *     write for a burst of completions between two clears). On a p4sgd one requests move only
 *     inside the library's calls, so the fd is readable when a call would move one on: a
 *     result arrived, or a retransmission or acknowledgement is due; inagg_test() then
 *     completes it (or sends what was due and reports not done: clear and wait again).
 *   - A failure of the job (a rank vanished, the connection dropped) makes it readable too:
 *     inagg_test() then reports the failed requests done, and inagg_wait() their error.
 *   - Threading: poll the fd from any thread; call inagg_comm_event_fd and
 *     inagg_comm_event_clear from the thread that uses the communicator (the one-thread rule).
 *   - Lifetime: made on the first call (later calls return the same fd), owned and closed by
 *     inagg_comm_destroy(); do not close it. Until the first call nothing is written, so a
 *     communicator that never asks pays nothing.
 * INAGG_ERR_UNSUPPORTED on a p4sgd communicator whose transport has no descriptor to poll.
 */
inagg_result_t inagg_comm_event_fd(inagg_comm_t *comm, int *fd);

/* The waiter is about to look at its requests: the fd of inagg_comm_event_fd() is not readable
 * until the next completion (p4sgd: the next packet or due timer). No-op before the fd exists. */
inagg_result_t inagg_comm_event_clear(inagg_comm_t *comm);

/* Block until every rank of the job has called inagg_barrier(). */
inagg_result_t inagg_barrier(inagg_comm_t *comm);

/* Copy the communicator's counters. */
inagg_result_t inagg_get_stats(const inagg_comm_t *comm, inagg_stats_t *out);

/*
 * Coding counters of a compressed communicator (options.compress), since creation. Versioned
 * by size: set `size` to sizeof(inagg_codec_stats_t) before the call; the library fills the
 * fields it knows that fit in `size` and sets `size` to what it filled, so fields added later
 * go at the end. A communicator without a codec (or a p4sgd one) reports zeros.
 * overlap_ns / (encode_ns + decode_ns) is the share of coding that ran while at least one of
 * the engine's packets was on the wire: coding overlapped with communication.
 */
typedef struct inagg_codec_stats {
    uint32_t size; /* in: sizeof(inagg_codec_stats_t); out: bytes filled */
    uint32_t rto_code_floor_us; /* the retransmission timeout's floor for coding time */
    uint64_t chunks_encoded; /* chunks encoded (first transmissions; error feedback's
                                   check decode is counted in decode) */
    uint64_t chunks_decoded; /* result chunks decoded (and feedback checks) */
    uint64_t encode_ns; /* time spent encoding, summed over engine threads */
    uint64_t decode_ns; /* time spent decoding, summed over engine threads */
    uint64_t overlap_ns; /* of encode_ns + decode_ns: while a packet was in flight */
    uint64_t chunks_ahead; /* of chunks_encoded: by an encoder helper thread, before the
                                   engine needed them (encode overlapped with the engine's
                                   sending, receiving and decoding) */
    uint32_t codec_threads; /* threads that code: each engine thread and its encoder
                                   helper (2 x options.threads) */
    uint32_t reserved; /* zero */
} inagg_codec_stats_t;

/* Copy the coding counters (see inagg_codec_stats_t). INAGG_ERR_INVALID when out is NULL
 * or out->size is smaller than the first two fields. */
inagg_result_t inagg_get_codec_stats(const inagg_comm_t *comm, inagg_codec_stats_t *out);

/*
 * Counters of the communicator's transport endpoints (all its engine threads), since
 * creation. Versioned by size as inagg_codec_stats_t: set `struct_size` to
 * sizeof(inagg_transport_stats_t); the library fills what fits and sets it to what it filled.
 * `counters` are the transport's own (RoCE: frames and messages each way and every reason a
 * frame was dropped; UDP and AF_PACKET: none), named by inagg_transport_counter_name.
 */
#define INAGG_TRANSPORT_COUNTERS_MAX 32u
typedef struct inagg_transport_stats {
    uint32_t struct_size; /* in: sizeof(inagg_transport_stats_t); out: bytes filled */
    uint32_t ncounters; /* entries of counters[] the transport has */
    char transport[16]; /* its name: "udp", "afpacket" or "roce" */
    uint64_t fault_dropped; /* fault injection's decisions (options.faults) */
    uint64_t fault_duplicated;
    uint64_t fault_reordered;
    uint64_t counters[INAGG_TRANSPORT_COUNTERS_MAX];
} inagg_transport_stats_t;

/* Copy the transport counters (see inagg_transport_stats_t). INAGG_ERR_INVALID when out is
 * NULL or out->struct_size is smaller than its first three fields. */
inagg_result_t inagg_get_transport_stats(const inagg_comm_t *comm, inagg_transport_stats_t *out);

/*
 * Fail-over (docs/OPERATIONS.md, "Upgrades and failures"): a switchml communicator whose
 * switch is lost (its control connection closed, it said SHUTDOWN, or it was silent for
 * $INAGG_SWITCH_TIMEOUT_MS) joins the job again under the next generation, on the next switch
 * of its list ("HOST:PORT;HOST:PORT": generation g on entry g % n; one entry: the same
 * address again), recovers the interrupted blocking allreduce chunk by chunk (int32 and
 * fixed-point float32 bit-identical to a run without the fault) and goes on. Versioned by
 * size as inagg_transport_stats_t.
 */
typedef struct inagg_failover_stats {
    uint32_t struct_size; /* in: sizeof(inagg_failover_stats_t); out: bytes filled */
    uint32_t enabled; /* 1: this communicator fails over (0: a lost switch fails it) */
    uint32_t generation; /* the generation it runs under now (0: the first join) */
    uint32_t stall_ms_max; /* the longest stall of one fail-over */
    uint64_t failovers; /* fail-overs completed */
    uint64_t chunks_delivered; /* chunks whose result a rank that held it handed on */
    uint64_t chunks_reduced; /* chunks reduced again from every rank's input */
    uint64_t stall_ms_total; /* from each loss seen to its recovery done, summed */
    uint64_t stale_dropped; /* result packets of an older generation, dropped */
    char endpoint[64]; /* the switch of the current generation */
} inagg_failover_stats_t;

/* Copy the fail-over counters (see inagg_failover_stats_t). INAGG_ERR_INVALID when out is
 * NULL or out->struct_size is smaller than its first two fields. */
inagg_result_t inagg_get_failover_stats(const inagg_comm_t *comm, inagg_failover_stats_t *out);

/*
 * Salvage: finishing, over another channel the ranks share (MPI, a Gloo group), the blocking
 * allreduce that failed because no switch answered (INAGG_ERR_CONNECTION, with fail-over off or
 * its list exhausted). Every rank of the communicator calls inagg_allreduce_salvage with the
 * arguments of its failed call; they agree over the channel, as a fail-over does on a new
 * switch, on which allreduce was interrupted and, chunk by chunk (inagg_salvage_t's geometry),
 * who holds its result: the lowest rank that holds a chunk hands it on (the others add zeros),
 * a chunk nobody holds is reduced again from every rank's input. int32 results are
 * bit-identical to a run without the fault; a float32 chunk reduced again is the channel's sum.
 * The channel is the caller's: an allreduce over every rank of the communicator, called with
 * the same arguments on every rank in the same order. Versioned by size as
 * inagg_failover_stats_t (the channel by its own struct_size).
 */
typedef struct inagg_channel {
    uint32_t struct_size; /* sizeof(inagg_channel_t) */
    /* count elements of dtype combined with op on every rank (send may equal recv): 0, or
     * nonzero when the channel failed (then salvage fails) */
    int (*allreduce)(void *ctx, const void *send, void *recv, size_t count, inagg_dtype_t dtype,
                     inagg_op_t op);
    void *ctx;
} inagg_channel_t;

typedef struct inagg_salvage {
    uint32_t struct_size; /* in: sizeof(inagg_salvage_t); out: bytes filled */
    uint32_t completed; /* 1: recv holds the call's result; 0: this rank was one allreduce
                           ahead (it had finished the interrupted one), whose result it handed
                           on: its own call must now run over the channel in full */
    uint64_t chunk_elems; /* the geometry: chunk k is elements [k * chunk_elems, ...) */
    uint64_t nchunks; /* chunks of the call */
    uint64_t chunks_held; /* chunks of this call whose result this rank had when it failed */
    uint64_t chunks_delivered; /* chunks handed on from a rank that held them */
    uint64_t chunks_reduced; /* chunks reduced again over the channel */
} inagg_salvage_t;

/* Finish the failed allreduce over ch (see above): INAGG_OK, INAGG_ERR_INVALID (bad
 * arguments, or a communicator whose last failure is not a lost switch or that cannot
 * salvage: only switchml over udp, without compression or an in-switch optimizer),
 * INAGG_ERR_CONNECTION (the channel failed, or the ranks' states disagree), with
 * inagg_last_error. The communicator stays failed: destroy it. */
inagg_result_t inagg_allreduce_salvage(inagg_comm_t *comm, const void *send, void *recv,
                                       size_t count, inagg_dtype_t dtype, inagg_op_t op,
                                       const inagg_channel_t *ch, inagg_salvage_t *out);

/*
 * Salvage of requests: the same for the requests of inagg_iallreduce / inagg_iallreduce_ef
 * (SUM or AVG) that failed because no switch answered. Every rank waits for all its requests
 * (inagg_wait: each finished, or failed with the lost switch; keep the failed ones' buffers),
 * then calls inagg_salvage_requests once, at the same point of the channel's call order. The
 * ranks agree on the requests some rank may hold a result of (they finished at most one
 * request apart) and recover each chunk by chunk as above; a rank that had finished one of
 * them hands its kept result on. out->completed: how many of this rank's failed requests, the
 * first ones in start order, now hold their results (int32 bit-identical to a run without the
 * fault); the rest still hold their inputs untouched, and the caller runs them over the
 * channel in order. out->nchunks and chunks_held count this rank's failed requests' chunks.
 * A communicator that can salvage keeps, for this, each request's result as the switch sent
 * it (a copy of the size of its buffer while it is in flight, and of the last finished one).
 * Errors as inagg_allreduce_salvage's; the communicator stays failed: destroy it.
 */
inagg_result_t inagg_salvage_requests(inagg_comm_t *comm, const inagg_channel_t *ch,
                                      inagg_salvage_t *out);

/* The name of counter i of the communicator's transport ("frames_in", ...), or NULL past
 * its last one. */
const char *inagg_transport_counter_name(const inagg_comm_t *comm, uint32_t i);

/* Static text for a result code. */
const char *inagg_strerror(inagg_result_t rc);

/* INAGG_OK while the communicator can serve calls, else the result its calls now fail with
 * (a lost switch: INAGG_ERR_CONNECTION or INAGG_ERR_TIMEOUT), its reason in inagg_last_error.
 * A caller that sleeps on inagg_comm_event_fd with no request in flight asks this when the fd
 * turns readable. A switch lost while fail-over may still take the job elsewhere is not a
 * failure yet: the next call fails over. */
inagg_result_t inagg_comm_failure(inagg_comm_t *comm);

/* Detail of the last failure on `comm` ("" if none). Valid until the next call on comm. */
const char *inagg_last_error(const inagg_comm_t *comm);

/* Library version as INAGG_VERSION_NUMBER encodes it: major * 10000 + minor * 100 + patch
 * (0.1.0 is 100); print it as v / 10000, v / 100 % 100, v % 100. */
uint32_t inagg_version(void);

#ifdef __cplusplus
}
#endif

#endif /* INAGG_H */
