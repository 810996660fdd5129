/*
 * proto.h - the switch's slot protocols as modules behind one ops table. Each protocol is one
 * file (proto_switchml.c, proto_p4sgd.c) holding its jobs' slot state and its packet handling;
 * proto.c lists them. The rest of the switch looks a job's protocol up here and never asks
 * which one it is.
 *
 * The dataplane checks a packet (job, token, state, rank, slot and its thread, count, dtype,
 * the packet type against `accepts`) and calls the protocol's `handle`, which applies the
 * packet to the slot and says what follows in the terms every protocol shares
 * (proto_outcome_t). Only when that verdict accepted the packet (`seen`) does the dataplane
 * record the rank as alive and, for its first contribution on a slot, its source as where
 * that rank's results on that slot go: a replayed packet moves nothing. The dataplane acts on the outcome in one
 * place:
 * counts it, runs the in-switch optimizer on a completed round, and sends the results.
 * Whatever is the protocol's own (p4sgd's acknowledgements and confirmations) the protocol
 * does itself with dp_send() and its own counters.
 *
 * Adding a protocol: a proto_NAME.c defining a switch_proto_ops_t, a line in proto.c's table
 * (and the worker's engine for it).
 */
#ifndef INAGG_SWITCH_PROTO_H
#define INAGG_SWITCH_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "lib/transport/transport.h"
#include "lib/wire/wire.h"
#include "switchd/server/stats.h"

struct job;
struct dp_thread;

/* What follows from one packet, for the dataplane to act on (dp_outcome in dataplane.c). */
enum proto_action {
    PROTO_DONE = 0, /* nothing more (the protocol did and counted what there was) */
    PROTO_PARTIAL, /* contribution accepted, the round is still open */
    PROTO_COMPLETE, /* contribution accepted, the round is complete: optimizer step (if the
                       job has one), then the result to every rank */
    PROTO_RESEND, /* the completed round's result again, to the sender */
    PROTO_DROP, /* dropped, counted under `drop` */
    /* A leaf switch (a job with an upstream switch, PROTOCOL.md "Hierarchy"): */
    PROTO_UP_SEND, /* contribution accepted, the round is complete here: its partial sum
                       (result, data) goes upstream as this switch's contribution */
    PROTO_UP_AGAIN, /* a rank repeated its contribution to a round waiting upstream: the
                       partial sum goes upstream again */
    PROTO_UP_DONE, /* the upstream result of a held round arrived and is now the round's
                       result: to every rank */
};

/* What a packet tells about its sender. Only a packet the slot accepted (a contribution
 * or an acknowledgement that changed its state) says where the rank's results go: a
 * repeated, stale or refused one may be anybody's replay. That one and a repeat of what the
 * rank already gave to a round still open (or held upstream: it waits on the others) say
 * that the rank is alive; a silent rank has nothing in the open round to repeat. */
enum proto_seen {
    PROTO_SEEN_NONE = 0, /* nothing (stale, ahead, mismatch, a completed round's repeat) */
    PROTO_SEEN_WAITING, /* the rank's repeat for a round still open: alive, waiting */
    PROTO_SEEN_ACCEPTED, /* accepted: alive, and the source is where its results go */
};

/* A protocol's verdict in the shared terms: a table indexed by its own verdicts. */
typedef struct proto_verdict {
    uint8_t action; /* enum proto_action */
    uint8_t drop; /* PROTO_DROP: enum stat_id */
    uint8_t seen; /* enum proto_seen */
} proto_verdict_t;

typedef struct proto_outcome {
    uint8_t action; /* enum proto_action */
    uint8_t drop; /* PROTO_DROP: enum stat_id */
    uint8_t seen; /* enum proto_seen: what the dataplane learns about the sender */
    uint8_t set; /* PROTO_COMPLETE: an upload round (in-switch optimizer) */
    uint32_t chunk; /* PROTO_COMPLETE: the round's chunk (in-switch optimizer) */
    wire_header_t result; /* COMPLETE, RESEND: the result's header; rank is set per packet */
    uint32_t *data; /* ... and its payload, result.count words in network order, which
                             stay put until the next packet on the slot */
} proto_outcome_t;

static inline void proto_verdict(proto_outcome_t *o, const proto_verdict_t *v)
{
    o->action = v->action;
    o->drop = v->drop;
    o->seen = v->seen;
}

/* One packet as the protocol sees it: the job, the dataplane thread handling it (its
 * index, its counters for this job) and where the packet came from. */
typedef struct proto_ctx {
    struct dp_thread *dp;
    struct job *job;
    void *state; /* the job's protocol state (create's) */
    uint32_t thread; /* the dataplane thread's index */
    stat_counters_t *c; /* that thread's counters of this job */
    const transport_addr_t *from;
} proto_ctx_t;

typedef struct switch_proto_ops {
    const char *name; /* as JOIN and JOINED spell it */
    uint32_t id; /* inagg_protocol_t */
    uint32_t accepts; /* packet types its jobs take: bits (1u << enum wire_type); any other
                          type to switch is dropped as wrong_protocol */
    int float_native; /* 1: its jobs add float32 natively whatever JOIN asked */
    uint64_t stats; /* its own counters (bits 1ull << enum stat_id, flagged STAT_PROTOCOL)
                          in its jobs' retiring log line */
    /* Bytes a job's state takes (the switch refuses jobs that ask too much). */
    uint64_t (*pool_bytes)(uint32_t world, uint32_t nslots, uint32_t elems, uint32_t nthreads);
    /* A job's state, its shape read from j (world, nslots, elems, nthreads). NULL: out of
     * memory. */
    void *(*create)(const struct job *j);
    void (*destroy)(void *state);
    /* Apply one packet that passed the dataplane's checks. No allocation, lock or log. */
    void (*handle)(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                   proto_outcome_t *out);
    /* May be NULL: edit each result header just before it is queued (rank is set). */
    void (*result_header)(proto_ctx_t *x, wire_header_t *h);
    /* May be NULL (then every rank's result is alike): one result header for every rank at
     * once (multicast, PROTOCOL.md 9.6). 1 with h edited as result_header would edit each
     * rank's (what that took, taken for all), or 0 with nothing changed when the ranks'
     * copies would differ (they then go one by one). */
    int (*result_header_shared)(proto_ctx_t *x, wire_header_t *h);
    /* A leaf switch: a result or confirmation from the upstream switch for slot h->slot,
     * already checked against the job's upstream membership (job, token, rank), the slot and
     * its thread. */
    void (*upstream)(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
                     proto_outcome_t *out);
} switch_proto_ops_t;

/* The protocols, one file each; proto.c's table lists them. */
extern const switch_proto_ops_t proto_switchml;
extern const switch_proto_ops_t proto_p4sgd;

/* The protocol with id `id`, or NULL. */
const switch_proto_ops_t *proto_find(uint32_t id);
/* Every packet type some protocol accepts (bits 1u << enum wire_type). */
uint32_t proto_accepts_any(void);
/* "switchml and p4sgd": the protocols this switch serves, for messages. */
void proto_list(char *buf, size_t cap);

/* What the dataplane offers protocols. Queue one packet: header h and h->count payload
 * words that stay valid until the end of the receive batch (a slot's result). */
void dp_send(proto_ctx_t *x, const wire_header_t *h, const uint32_t *payload,
             const transport_addr_t *to);

/* A leaf switch: queue a packet to the upstream switch's queue of slot h->slot, as the job's
 * member there (job, rank and token are filled in here). */
void dp_send_upstream(proto_ctx_t *x, wire_header_t *h, const uint32_t *payload);

#endif /* INAGG_SWITCH_PROTO_H */
