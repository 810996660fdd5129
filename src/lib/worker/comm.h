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
#include "lib/worker/proto.h"

#define COMM_DETAIL_MAX 512

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
};

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
