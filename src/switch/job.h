/*
 * job.h - a job on the switch: its parameters, its slot pool, and its counters.
 *
 * Ownership: the control thread creates, fails and frees jobs; a job's immutable fields
 * (parameters, token, arrays) are set before it is published in the job table. Slot i is
 * touched only by dataplane thread job_slot_owner(i), and each dataplane thread writes only
 * its own (cache-aligned) job_thread_t: no data is shared between threads on the packet
 * path. Neighbouring slots of different threads may still share a cache line (false
 * sharing, not a race); padding slot_t to a line is a possible refinement.
 * Counters are relaxed atomics: one writer, read by the stats printer.
 */
#ifndef INAGG_SWITCH_JOB_H
#define INAGG_SWITCH_JOB_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stdint.h>

#include "base/util.h"
#include "inagg.h"
#include "switch/optjob.h"
#include "switch/p4slot.h"
#include "switch/slot.h"
#include "wire/wire.h"

#define SWITCH_MAX_JOBS 1024u
#define SWITCH_MAX_THREADS 64u

/* Why the switch dropped a packet. The first WIRE_STATUS_COUNT reasons are wire_decode()'s. */
enum drop_reason {
    DROP_UNKNOWN_JOB = WIRE_STATUS_COUNT, /* no such job id */
    DROP_BAD_TOKEN,                       /* job id exists but the token is another job's */
    DROP_NOT_RESULT_PATH,                 /* a result or confirmation sent to the switch */
    DROP_JOB_NOT_ACTIVE,                  /* job still joining, or failed */
    DROP_BAD_RANK,                        /* rank >= world size */
    DROP_BAD_SLOT,                        /* slot outside the job's pool */
    DROP_WRONG_THREAD,                    /* slot belongs to another switch thread's port */
    DROP_BAD_COUNT,                       /* more elements than the job's packet size */
    DROP_DTYPE_NOT_ALLOWED,               /* element type the job's numeric mode excludes */
    DROP_DUP_OPEN,                        /* duplicate contribution to an open round */
    DROP_STALE,                           /* contribution for a round already reused */
    DROP_AHEAD,                           /* contribution for a round that cannot come yet */
    DROP_MISMATCH,                        /* count, dtype or exponent differs within a round */
    DROP_WRONG_PROTOCOL,                  /* an acknowledgement sent to a switchml job */
    DROP_DUP_ACK,                         /* duplicate acknowledgement (p4sgd) */
    DROP_BAD_CHUNK,                       /* optimizer job: no such chunk, or wrong length */
    DROP_REASON_COUNT
};

const char *drop_reason_name(int reason);

typedef struct job_counters {
    _Atomic uint64_t contributions; /* contributions added to a slot */
    _Atomic uint64_t rounds;        /* rounds completed (results multicast) */
    _Atomic uint64_t results_sent;  /* result packets sent, multicast and resends */
    _Atomic uint64_t resends;       /* results re-sent by unicast for a duplicate */
    _Atomic uint64_t acks;          /* acknowledgements accepted (p4sgd) */
    _Atomic uint64_t confirms_sent; /* confirmations sent, multicast and resends (p4sgd) */
    _Atomic uint64_t confirm_resends; /* confirmations re-sent for a repeated ack (p4sgd) */
    _Atomic uint64_t confirms_piggybacked; /* of confirms_sent, those that rode on a result */
    _Atomic uint64_t opt_steps;     /* in-switch optimizer: chunk steps applied */
    _Atomic uint64_t opt_uploads;   /* in-switch optimizer: chunks of parameters uploaded */
    _Atomic uint64_t bytes_in, bytes_out;
    _Atomic uint64_t drops[DROP_REASON_COUNT];
} job_counters_t;

/* What one dataplane thread writes for one job. */
typedef struct job_thread {
    job_counters_t c;
    _Atomic uint64_t last_seen_ms[INAGG_MAX_WORLD]; /* last packet from each rank */
} INAGG_ALIGNED job_thread_t;

#define STAT_ADD(field, n)                                                                      \
    atomic_store_explicit(&(field), atomic_load_explicit(&(field), memory_order_relaxed) + (n), \
                          memory_order_relaxed)
#define STAT_GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

enum job_state { JOB_JOINING = 0, JOB_ACTIVE, JOB_FAILED };

/* p4sgd: a confirmation waiting to ride on the next result to a rank (wire.h, piggyback). */
typedef struct p4_confirm {
    uint32_t slot, round;
} p4_confirm_t;

/* A ring of p4_confirm_t per (dataplane thread, rank); one thread writes it. */
typedef struct p4_confirm_ring {
    uint32_t head, count;
} p4_confirm_ring_t;

typedef struct job {
    /* immutable once published */
    uint16_t id;
    uint32_t token;
    char name[64];
    uint32_t world, nslots, elems;
    uint32_t float_mode; /* inagg_float_mode_t */
    uint32_t protocol;   /* inagg_protocol_t */
    uint32_t base;       /* slot i is served by thread (base + i) % nthreads */
    uint32_t nthreads;
    uint32_t timeout_ms; /* a rank silent this long while others wait fails the job */
    slot_t *slots;              /* switchml: [nslots] */
    p4slot_t *p4slots;          /* p4sgd: [nslots] */
    uint32_t *arena;            /* switchml: nslots * 2 * elems words; p4sgd: nslots *
                                   (world + 1) * elems (a row per rank and the result) */
    struct sockaddr_in *addrs;  /* [slot * world + rank]: where results go (the source of
                                   the rank's last contribution on that slot) */
    struct sockaddr_in *ack_addrs; /* p4sgd: where confirmations go (source of the last
                                      acknowledgement), so they need not wake a worker that
                                      waits for a result on its other socket */
    job_thread_t *threads;      /* [nthreads] */
    p4_confirm_ring_t *confirm_rings; /* p4sgd: [thread * world + rank] */
    p4_confirm_t *confirm_items;      /* p4sgd: [(thread * world + rank) * nslots + i] */
    optjob_t *opt;              /* in-switch optimizer, or NULL (set before publication) */
    float *opt_scratch;         /* [nthreads * elems]: each thread's decoded gradient */
    char opt_desc[256];         /* the optimizer as joined, for the parameter-mismatch check */
    _Atomic int state;          /* enum job_state */
    /* control thread only */
    uint64_t created_ms, activated_ms;
    int member_fd[INAGG_MAX_WORLD]; /* -1: not connected */
    uint8_t left[INAGG_MAX_WORLD];  /* left cleanly with LEAVE */
    uint8_t in_barrier[INAGG_MAX_WORLD];
    uint32_t joined, barrier_count, barrier_epoch;
    char fail_reason[256];
} job_t;

/* Allocate a job with its pool for `protocol` (inagg_protocol_t). NULL when out of memory. */
job_t *job_create(uint16_t id, const char *name, uint32_t protocol, uint32_t world,
                  uint32_t nslots, uint32_t elems, uint32_t nthreads, uint32_t base);
/* Bytes job_create would allocate for the pool (the switch refuses jobs that ask too much). */
uint64_t job_pool_bytes(uint32_t protocol, uint32_t world, uint32_t nslots, uint32_t elems,
                        uint32_t nthreads);
void job_free(job_t *j);

static inline uint32_t job_slot_owner(const job_t *j, uint32_t slot)
{
    return (j->base + slot) % j->nthreads;
}

/* Sum of one counter field across threads: job_sum(j, offsetof(job_counters_t, rounds)). */
uint64_t job_sum(const job_t *j, size_t field_offset);
uint64_t job_sum_drop(const job_t *j, int reason);

#endif /* INAGG_SWITCH_JOB_H */
