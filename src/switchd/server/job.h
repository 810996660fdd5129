/*
 * job.h - a job on the switch: its parameters, its protocol's state, where results go, and
 * its counters.
 *
 * Ownership: the control thread creates, fails and frees jobs; a job's immutable fields
 * (parameters, token, protocol, arrays) are set before it is published in the job table.
 * Slot i (its protocol state and its row of result addresses) is touched only by dataplane
 * thread job_slot_owner(i), and each dataplane thread writes only its own (cache-aligned)
 * job_thread_t: no data is shared between threads on the packet path. Neighbouring slots of
 * different threads may still share a cache line (false sharing, not a race).
 */
#ifndef INAGG_SWITCH_JOB_H
#define INAGG_SWITCH_JOB_H

#include <stdatomic.h>
#include <stdint.h>

#include "inagg.h"
#include "lib/base/util.h"
#include "lib/codec/codec.h"
#include "lib/transport/transport.h"
#include "lib/wire/ctlmsg.h"
#include "lib/wire/dpauth.h"
#include "switchd/server/optjob.h"
#include "switchd/server/proto.h"
#include "switchd/server/stats.h"
#include "switchd/switchd.h" /* SWITCH_MAX_THREADS */

#define SWITCH_MAX_JOBS 1024u

/* What one dataplane thread writes for one job. */
typedef struct job_thread {
    stat_counters_t c;
    /* Each rank's last packet that the slot accepted or that repeated what a round still
     * open already has from it (it waits on the others): dataplane.c learn(). A silent
     * rank has nothing in the open round, so no replay of its packets refreshes this. */
    _Atomic uint64_t last_seen_ms[INAGG_MAX_WORLD];
} INAGG_ALIGNED job_thread_t;

/* A leaf switch's job: its membership in the upstream switch's job of the same name, where
 * this switch is one rank whose contribution is the sum of its own ranks (upstream.h). Set
 * by the control thread before the job is activated; read-only afterwards. */
typedef struct job_up {
    int on;
    uint16_t job; /* the upstream job's id and token */
    uint64_t token;
    uint32_t rank; /* this switch's rank there */
    uint32_t contributors; /* the hosts under the spine (its JOINED), 0: not said */
    uint32_t queues, base; /* the upstream switch's dataplane queues and the job's first */
    transport_addr_t queue0; /* its queue 0 */
    int auth; /* the upstream job authenticates its dataplane: this switch's
                                 keys there (from its JOIN upstream, wire/dpauth.h) */
    dpauth_keys_t keys;
} job_up_t;

typedef struct job {
    /* immutable once published */
    uint16_t id;
    uint64_t token;
    char name[64];
    uint32_t world, nslots, elems;
    uint32_t float_mode; /* inagg_float_mode_t */
    const switch_proto_ops_t *proto;
    void *proto_state; /* the protocol's (proto.h) */
    uint32_t base; /* slot i is served by thread job_slot_owner(i) */
    uint32_t nthreads;
    uint32_t timeout_ms; /* a rank silent this long while others wait fails the job */
    transport_addr_t *addrs; /* [slot * world + rank]: where results go (the source of the
                                rank's last accepted contribution on that slot) */
    job_thread_t *threads; /* [nthreads] */
    optjob_t *opt; /* in-switch optimizer, or NULL (set before publication) */
    float *opt_scratch; /* [nthreads * elems]: each thread's decoded gradient */
    wire_optimizer_t opt_cfg; /* the optimizer as joined, for the parameter-mismatch check */
    codec_spec_t codec; /* the job's compression (CODEC_NONE: none) */
    int codec_feedback; /* error feedback on the switch's re-encoding (codecjob.h) */
    struct codecjob *codec_state; /* its state (codecjob.h), or NULL (set before publication) */
    _Atomic int state; /* enum life_state (lifecycle.h) */
    job_up_t up; /* a leaf switch's upstream membership (up.on), before activation */
    /* Multicast of results (PROTOCOL.md 9.6), set before activation: a round's result that
     * is the same for every rank goes once to mcast_to, the job's group */
    int mcast_on;
    transport_addr_t mcast_to;
    /* control thread only */
    struct upjob *upj; /* a leaf switch: the thread holding the upstream membership */
    struct peer *owner; /* the address that registered it: holds its slots (peers.h) */
    int dp_auth; /* every dataplane packet carries a MAC (wire/dpauth.h) under
                                keys[rank]: a job with a secret, unless its registering rank
                                said dpauth=0 (set before activation) */
    dpauth_keys_t keys[INAGG_MAX_WORLD]; /* each rank's, from its JOIN */
    int has_verifier; /* registered with a job secret: every rank must prove it */
    uint8_t verifier[32]; /* HMAC-SHA256(secret, job name) (PROTOCOL.md "Authentication") */
    uint64_t created_ms, activated_ms;
    uint32_t gen; /* the generation its ranks joined (JOIN gen=): > 0 after a fail-over */
    int member_fd[INAGG_MAX_WORLD]; /* -1: not connected */
    uint8_t left[INAGG_MAX_WORLD]; /* left cleanly with LEAVE */
    uint8_t in_barrier[INAGG_MAX_WORLD];
    uint32_t contrib[INAGG_MAX_WORLD]; /* the ranks whose data each member sums (JOIN's
                                          contributors=, 1 for a worker) */
    uint8_t mcast_asked[INAGG_MAX_WORLD]; /* the member said mcast=1 in its JOIN */
    uint32_t joined, barrier_count, barrier_epoch;
    uint64_t barrier_since_ms; /* when the open barrier's first rank arrived */
    char fail_reason[256];
    /* a job failed for silence: how long each silent rank was silent (0: it was not) and the
       rest of what it is told (it may have been stopped, and learn only when it runs again) */
    uint64_t silent_ms[INAGG_MAX_WORLD];
    char silent_reason[256];
} job_t;

/* Allocate a job with its protocol's state. NULL when out of memory. */
job_t *job_create(uint16_t id, const char *name, const switch_proto_ops_t *proto, uint32_t world,
                  uint32_t nslots, uint32_t elems, uint32_t nthreads, uint32_t base);
/* Bytes job_create would allocate for the pool (the switch refuses jobs that ask too much). */
uint64_t job_pool_bytes(const switch_proto_ops_t *proto, uint32_t world, uint32_t nslots,
                        uint32_t elems, uint32_t nthreads);
void job_free(job_t *j);

static inline uint32_t job_slot_owner(const job_t *j, uint32_t slot)
{
    return transport_slot_queue(j->base, j->nthreads, slot);
}

/* Bytes before a packet's payload in job j: the header, and the MAC when it has one. */
static inline uint32_t job_header_bytes(const job_t *j)
{
    return WIRE_HEADER_SIZE + (j->dp_auth ? WIRE_MAC_BYTES : 0u);
}

/* The ranks whose data the members' contributions sum (each member's JOIN contributors=, 1
 * for a worker), at most WIRE_MAX_CONTRIBUTORS. */
uint32_t job_contributors(const job_t *j);

/* A job counter summed over the dataplane threads. */
uint64_t job_sum(const job_t *j, int stat);

#endif /* INAGG_SWITCH_JOB_H */
