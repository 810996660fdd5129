/*
 * comm.h - the communicator behind include/inagg.h, shared by the files that make it up:
 * comm.c (create, destroy, argument checks, dispatch to the protocol's ops), join.c (the
 * control connection: JOIN, the monitor thread, barrier, LEAVE) and errors.c (result texts,
 * last_error, the failure state). Not a public header; protocols see only proto.h.
 *
 * Locking: mu guards the barrier count, bye, stopping and the failure state (and, for the
 * switchml protocol, its request ring: its engine threads use the same mutex and condition).
 */
#ifndef INAGG_WORKER_COMM_H
#define INAGG_WORKER_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "inagg.h"
#include "lib/client/ctl.h"
#include "lib/codec/codec.h"
#include "lib/transport/transport.h"
#include "lib/wire/ctlmsg.h"
#include "lib/worker/endpoints.h"
#include "lib/worker/proto.h"
#include "lib/worker/recovery.h"

#define COMM_DETAIL_MAX 512
#define COMM_REQ_SPARES 8 /* request records kept for reuse */

struct inagg_comm {
    uint32_t rank, world;
    inagg_options_t opts; /* as given, but optimizer = NULL: see opt */
    wire_optimizer_t opt; /* options.optimizer, as JOIN carries it (present: 0 none) */
    codec_spec_t codec; /* options.compress, parsed (mode CODEC_NONE: none) */
    char job[64];
    uint16_t job_id;
    uint64_t token;
    const worker_proto_ops_t *proto;
    void *ps; /* the protocol's state */
    uint32_t nshards; /* switches joined: one, or the shards of a comma-separated
                                     address (slot s is served by shard s % nshards) */
    int ctl_fd[WORKER_MAX_SHARDS]; /* each shard's control connection (-1: none) */
    ctl_reader_t rd[WORKER_MAX_SHARDS];
    int dp_keyed; /* joined with a secret asking for an authenticated
                                     dataplane: each shard's keys from its JOIN */
    dpauth_keys_t dp_keys[WORKER_MAX_SHARDS];
    uint8_t shard_bye[WORKER_MAX_SHARDS]; /* under mu: that shard answered LEAVE */
    pthread_t monitor_tid;
    int monitor_started;
    int wake_fd; /* eventfd that wakes the monitor to stop (-1: none) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t barriers_done; /* under mu */
    int bye; /* under mu: every shard answered LEAVE */
    int stopping; /* under mu: the monitor thread ends */
    _Atomic int abort_flag; /* job failed or connection lost: engines stop */
    worker_signal_t signal; /* completions (and failure) raise it: inagg_comm_event_fd */
    int event_fd; /* what inagg_comm_event_fd hands out (-1: not asked yet) */
    inagg_result_t fail_code; /* under mu */
    char fail_detail[COMM_DETAIL_MAX]; /* under mu */
    char last_error[1024];
    uint32_t path_mtu; /* the smallest path MTU toward the shards (pathsize.c; 0: not
                                     looked up, RoCE) */
    char path_if[32]; /* the interface that path leaves through ("" if unknown) */
    int path_noted; /* under mu: comm_note_path was asked (once per communicator) */
    char path_note[COMM_DETAIL_MAX]; /* under mu: its answer ("" when nothing) */

    /* Fail-over (failover.c): the switch list, the generation, and what the recovery of an
     * interrupted allreduce needs. */
    endpoint_list_t endpoints;
    int failover_on; /* a switch's loss is a fail-over, not a failure */
    int salvage_on; /* ops are recorded: a failed one can be finished over another channel */
    const inagg_channel_t *channel; /* set while a salvage runs: the recovery's exchanges go
                                       through it instead of a switch */
    uint32_t gen; /* the generation joined (endpoint gen % n) */
    uint32_t switch_timeout_ms; /* INAGG_SWITCH_TIMEOUT_MS: a silent switch is dead */
    uint32_t rejoin_ms; /* INAGG_REJOIN_MS: one generation's join deadline */
    uint32_t failover_max; /* INAGG_FAILOVER_MAX: rounds of the list before giving up */
    int lost; /* under mu: enum comm_lost, the switch was lost (engines aborted) */
    char lost_detail[160]; /* under mu */
    uint64_t lost_ns; /* under mu: when */
    uint64_t last_heard_ns; /* monitor thread: the control connection's last line */
    uint64_t ping_ns; /* monitor thread: the last heartbeat sent */
    uint64_t monitor_tick_ns; /* monitor thread: its last heartbeat check */
    uint64_t ops_done; /* blocking allreduces finished (the op numbers) */
    uint64_t barriers_passed;
    uint32_t async_out; /* under mu: requests of inagg_iallreduce* not waited for yet */
    uint32_t eff_world; /* the ranks a result sums (worker_params_t.world) */
    worker_oprec_t rec[2]; /* op k's record in rec[k % 2]: the one in progress and the last */
    /* Requests (salvage.c; the caller's thread only): numbered as started, the records of the
     * last finished one and of the failed ones not yet salvaged, spares to reuse. */
    uint64_t req_started, req_done;
    worker_oprec_t *req_last, *req_spare[COMM_REQ_SPARES];
    uint32_t req_nspare;
    worker_salv_t *req_failed;
    size_t req_nfailed, req_capfailed;
    _Atomic uint64_t stale; /* packets of an older generation dropped */
    uint64_t prev_token; /* the last generation's token (its late packets are stale) */
    uint64_t barriers_seen; /* the most barriers a rank had passed at the last recovery */
    inagg_stats_t stats_before; /* the engines' counters of the generations before */
    inagg_failover_stats_t fo; /* under mu */
};

enum comm_lost { COMM_LOST_NONE = 0, COMM_LOST_CLOSED, COMM_LOST_SHUTDOWN, COMM_LOST_SILENT };

/* ---- errors.c ---- */

/* Set last_error (when c is not NULL) and return rc. */
inagg_result_t comm_set_error(inagg_comm_t *c, inagg_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Mark the communicator failed (first reason wins) and wake everyone. Caller holds mu. */
void comm_fail_locked(inagg_comm_t *c, inagg_result_t code, const char *detail);
/* INAGG_OK, or the communicator's failure with last_error set to its reason. */
inagg_result_t comm_failure(inagg_comm_t *c);
/* The result code of a -errno from inside the library (proto.h lists the engines' codes). */
inagg_result_t comm_result_of_errno(int neg_errno);
/* A protocol call ended with 0 or -errno and detail: the result the caller gets, with
 * last_error set. An engine that only saw the abort (or stalled) gets the switch's reason;
 * any other failure (not a delivered-but result: overflow, non-finite) fails the
 * communicator, whose slots are out of step now. */
inagg_result_t comm_settle(inagg_comm_t *c, int neg_errno, const char *detail);

/* ---- pathsize.c ---- */

/* Settle options.packet_elems against the path MTU toward each shard (sw[k], named
 * shard_text[k]) before JOIN: 0 becomes the most that fit one frame, a larger one set by the
 * caller is refused naming the MTU; c->path_mtu and c->path_if say what was found. 0, or
 * -errno with the reason. */
int comm_size_packets(inagg_comm_t *c, const transport_addr_t *sw, const char (*shard_text)[64],
                      char *detail, size_t dlen);
/* A call got no results (it timed out, or the switch failed the job for silent ranks):
 * what the path says of it, as a phrase in note ("" when nothing): the switch's L2 fabric
 * dropped IP fragments sent to it (asked with STATS, 1.5 s at most in all), or the
 * kernel's path MTU fell below the packets. */
void comm_note_path(inagg_comm_t *c, char *note, size_t len);

/* The argument checks every allreduce shares (comm.c): INAGG_OK, or the error set. */
inagg_result_t comm_check_buffers(inagg_comm_t *comm, const void *send, const void *recv,
                                  size_t count, inagg_dtype_t dtype, inagg_op_t op);

/* ---- failover.c ---- */

/* The fail-over settings from the environment and the switch list: 0 or -EINVAL. */
int comm_failover_setup(inagg_comm_t *c, char *detail, size_t dlen);
/* The switch was lost (cause, a phrase in detail): with fail-over on, the engines are stopped
 * and the next call recovers (returns 1); off, 0 (the caller fails the communicator). Caller
 * holds mu. */
int comm_lost_locked(inagg_comm_t *c, enum comm_lost cause, const char *detail);
/* A blocking allreduce with fail-over: call runs, and when the switch is lost it is
 * recovered on the next switch. 0 or -errno with detail. */
int comm_failover_allreduce(inagg_comm_t *c, worker_call_t *call, char *detail, size_t dlen);
/* Fail over now if the switch was lost (a barrier's, or the destroy's, wait ended by it):
 * 1 when it did (the caller retries), 0 when nothing was lost, or -errno with detail. */
int comm_failover_pending(inagg_comm_t *c, char *detail, size_t dlen);
/* Free the records. */
void comm_failover_free(inagg_comm_t *c);
/* Room in r for an op of count elements in nchunks chunks, nothing held yet: 0 or -ENOMEM. */
int comm_oprec_prepare(worker_oprec_t *r, size_t count, size_t nchunks);
void comm_oprec_free(worker_oprec_t *r);
/* The engines and the control connection of the lost switch go (their counters are kept). */
void comm_teardown(inagg_comm_t *c);
/* Recover one op chunk by chunk (the holders' exchange, hand-on and reduction again, through
 * c->channel when set): call is this rank's call of it with its record rec, or NULL with
 * `ahead` when this rank finished it (rec then its kept result). 0 or -errno. */
int comm_recover_op(inagg_comm_t *c, worker_call_t *call, worker_oprec_t *rec, int ahead,
                    recovery_counts_t *counts, char *detail, size_t dlen);

/* Whether c may be salvaged now over ch into out (its struct_size at least up to its
 * geometry; op: the ops' reduction, INAGG_SUM only): 0, or -EINVAL with the reason in
 * detail. */
int comm_salvage_check(inagg_comm_t *c, const inagg_channel_t *ch, const inagg_salvage_t *out,
                       inagg_op_t op, char *detail, size_t dlen);

/* ---- salvage.c: requests in flight finished over another channel ---- */

/* A request of inagg_iallreduce* starts (salvage_on): its record (call->rec set), the
 * request's op number in *seq. 0 or -ENOMEM. */
int comm_request_record(inagg_comm_t *c, worker_call_t *call, uint64_t *seq);
/* The request of op seq (call as started) ended: its record is kept, as the last finished
 * op's (ok) or as one a salvage finishes. */
void comm_request_ended(inagg_comm_t *c, const worker_call_t *call, uint64_t seq, int ok);
/* Free the requests' records. */
void comm_requests_free(inagg_comm_t *c);
/* Create the protocol's state for the job joined (comm.c: start_protocol). */
int comm_start_protocol(inagg_comm_t *c, const transport_addr_t *sw, const wire_joined_t *j,
                        char *detail, size_t dlen);

/* ---- join.c ---- */

/* Join through shard k's switch at addr_text (its control port) with control/join_client.h:
 * JOINED into *out, the connection in c->ctl_fd[k], the dataplane keys in c->dp_keys[k]. A
 * refusal (ERR) maps to its result code here, after the client's retries of busy/system. */
inagg_result_t comm_join(inagg_comm_t *c, uint32_t k, const char *addr_text, wire_joined_t *out,
                         char *detail, size_t dlen);
/* Start the thread that reads the control connection. 0 or -errno. */
int comm_start_monitor(inagg_comm_t *c);
/* Stop it and close the control connection. */
void comm_close_control(inagg_comm_t *c);
/* Send LEAVE and wait (at most 2 s) for BYE. */
void comm_leave(inagg_comm_t *c);
/* Wait on cv (caller holds mu) until deadline_ns (monotonic); non-zero once it passed. */
int comm_wait_until(inagg_comm_t *c, uint64_t deadline_ns);

#endif /* INAGG_WORKER_COMM_H */
