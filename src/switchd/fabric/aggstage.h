/*
 * aggstage.h - the pipeline's aggregation stage as the fabric sees it: the receive loop hands
 * each frame the classify stage judged aggregation to enqueue (a copy into the queue's frame
 * queue, link->rx[q], which the switch's dataplane thread q takes through the aggregation
 * port, port.h; a UDP GSO frame as one frame per segment), and wakes the queues that got
 * frames once a pass. With inline aggregation (fabric_attach_aggregation) the receive thread
 * runs every queue's slot protocols itself (aggstage_run_inline). The results come back in
 * link->tx[q], which the transmit stage drains. Runs on the receive thread.
 */
#ifndef INAGG_FABRIC_AGGSTAGE_H
#define INAGG_FABRIC_AGGSTAGE_H

#include <stdatomic.h>
#include <stdint.h>

#include "switchd/fabric/port.h"

struct virtio_net_hdr;

enum aggstage_stat {
    AG_IN, /* aggregation frames handed to a dataplane queue */
    AG_QUEUE_FULL, /* aggregation frames dropped: the dataplane queue was full */
    AG_TOO_BIG, /* aggregation frames dropped: larger than a queue slot, or a GSO frame that
                   is not UDP's */
    AG_GSO, /* UDP GSO frames (a sender's UDP_SEGMENT) cut into aggregation frames */
    AG_COUNT
};

typedef struct aggstage {
    fabric_link_t *link; /* the aggregation port's frame queues */
    uint32_t kick; /* queues that got frames this pass */
    int (*_Atomic pass)(void *sw, uint32_t queue); /* inline aggregation, or NULL */
    void *_Atomic arg;
    _Atomic uint64_t c[AG_COUNT];
} aggstage_t;

/* An aggregation frame for queue q that came in on port pin at t_ns: copied into the queue
 * (or counted). */
void aggstage_enqueue(aggstage_t *a, uint32_t q, uint32_t pin, const struct virtio_net_hdr *vh,
                      const uint8_t *frame, uint32_t len, uint64_t t_ns);

/* With inline aggregation: every queue's pass; the queues that did work (more may be queued
 * behind their batch). 0 without. */
int aggstage_run_inline(aggstage_t *a);

/* Wake the dataplane threads of the queues that got frames this pass. */
void aggstage_kick(aggstage_t *a);

/* Inline aggregation on (pass) or off (NULL). When on and the transmit stage runs on the same
 * thread, the endpoints need not wake it. Detaching returns at once: the caller waits out a
 * pass that may still run. */
void aggstage_attach(aggstage_t *a, int (*pass)(void *sw, uint32_t queue), void *sw,
                     int same_thread_tx);

typedef struct aggstage_stats {
    uint64_t c[AG_COUNT];
    uint64_t endpoint_tx_full; /* results the endpoints dropped: a result queue was full or
                                  the frame larger than a slot */
    int is_inline;
} aggstage_stats_t;

void aggstage_stats(const aggstage_t *a, aggstage_stats_t *out);

#endif /* INAGG_FABRIC_AGGSTAGE_H */
