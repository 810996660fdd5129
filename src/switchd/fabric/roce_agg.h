/*
 * roce_agg.h - RoCE v1 frames in the L2 fabric: the classification of AllReduce-Switch's
 * Table VI for frames addressed to the switch, and the steering of an aggregation flow
 * (ingress port, destination QP) to the switch queue (dataplane thread) that serves it.
 *
 *   not RoCE v1                                   -> ordinary forwarding (forward.h)
 *   RoCE, not an RDMA Write                       -> forwarded (to the switch's own stack)
 *   Write First / Only whose aggregation header   -> aggregation: record (port, QP) as an
 *     matches (inagg magic and version at the        aggregation flow of the queue its RETH
 *     start of the payload, RETH key a queue)        key names
 *   Write First / Only, header not matching       -> forwarded
 *   Write Middle / Last (with Immediate) of a     -> aggregation, to the flow's queue
 *     recorded aggregation flow
 *   Write Middle / Last of no such flow           -> forwarded
 * RoCE frames addressed to other MACs are switched as any other frame. The frames' ICRC, PSN
 * order and lengths are checked by the receiving endpoint (fabric/port.c), which counts and
 * drops bad ones.
 */
#ifndef INAGG_FABRIC_ROCE_AGG_H
#define INAGG_FABRIC_ROCE_AGG_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define ROCE_STEER_FLOWS 4096u

enum roce_steer_stat {
    RG_FIRST, /* First / Only frames that opened or continued an aggregation flow */
    RG_STEERED, /* Middle / Last frames of a recorded flow, to its queue */
    RG_NOT_WRITE, /* RoCE frames to the switch that are not RDMA Writes: forwarded */
    RG_NO_MATCH, /* First / Only frames whose aggregation header does not match */
    RG_NO_FLOW, /* Middle / Last frames of no recorded flow: forwarded */
    RG_MALFORMED, /* too short for a BTH, or a First / Only that does not parse: dropped */
    RG_TABLE_FULL, /* First frames of a new flow with the flow table full: forwarded */
    RG_RECYCLED, /* new flows that took the entry of the least recently used flow in
                        their probe window (flows of ended jobs are never told to go) */
    RG_COUNT
};

typedef struct roce_steer_ent {
    uint32_t qp; /* 0: empty */
    uint16_t port;
    uint16_t queue;
    uint64_t last; /* the steer's clock when the flow last had a frame */
} roce_steer_ent_t;

typedef struct roce_steer {
    roce_steer_ent_t t[ROCE_STEER_FLOWS];
    uint64_t clock; /* frames looked up (thread 0 only) */
    _Atomic uint64_t c[RG_COUNT];
} roce_steer_t;

struct json_writer;

enum roce_steer_verdict {
    ROCE_STEER_FORWARD, /* an ordinary frame: the caller forwards it */
    ROCE_STEER_DROP, /* malformed: dropped (counted) */
    ROCE_STEER_AGGREGATE, /* aggregation, for the queue in *queue */
};

/* The verdict on a RoCE frame addressed to the switch's MAC that came in on port pin, of a
 * switch with nqueues aggregation queues (counted). */
int roce_steer_classify(roce_steer_t *s, uint32_t pin, const uint8_t *frame, uint32_t len,
                        uint32_t nqueues, uint32_t *queue);

typedef struct roce_steer_stats {
    uint64_t c[RG_COUNT];
} roce_steer_stats_t;

void roce_steer_stats(const roce_steer_t *s, roce_steer_stats_t *out);

/* The steer's counters and those of the switch's RoCE endpoints (transport/roce.h), as the
 * "fabric roce" text lines or the "roce" member of the fabric's JSON stats. */
struct roce_stats;
void roce_steer_write_text(const roce_steer_stats_t *s, const struct roce_stats *endpoints,
                           FILE *out);
void roce_steer_write_json(const roce_steer_stats_t *s, const struct roce_stats *endpoints,
                           struct json_writer *w);

#endif /* INAGG_FABRIC_ROCE_AGG_H */
