/*
 * port.h - the aggregation port: how the L2 fabric hands aggregation frames to the switch's
 * dataplane and takes its answers back. The fabric receives frames on its Ethernet ports and
 * queues those for aggregation queue q in link->rx[q]; the port endpoint of queue q (a
 * transport_t that the switch's dataplane thread q opens through the fabric's opener, see
 * fabric_port_opener) takes them from there: UDP aggregation datagrams, framed as the
 * afpacket transport frames them (transport/afpacket.h), and RoCE v1 Write messages, checked
 * and reassembled per flow (transport/roce.h), a repeated contribution answered from the
 * port's result buffer (roce_resbuf.h). What the endpoint sends is queued in link->tx[q]
 * with the fabric port to leave by, and the fabric transmits it. So one fabric switch
 * serves UDP and RoCE workers alike. Built into the switch only, never into libinagg.
 */
#ifndef INAGG_FABRIC_PORT_H
#define INAGG_FABRIC_PORT_H

#include <stdint.h>

#include "lib/transport/roce.h"
#include "lib/transport/transport.h"
#include "switchd/fabric/frameq.h"

#define FABRIC_LINK_MAX_QUEUES 16

typedef struct fabric_link {
    uint32_t nqueues;
    frameq_t rx[FABRIC_LINK_MAX_QUEUES]; /* fabric -> endpoint of queue q: frames for it */
    frameq_t tx[FABRIC_LINK_MAX_QUEUES]; /* endpoint of queue q -> fabric: frames to send */
    int tx_efd; /* eventfd the endpoints write after queueing frames */
    _Atomic int tx_no_wake; /* the endpoints run on the fabric's transmitting thread
                                    (inline aggregation): no eventfd write needed */
    uint8_t mac[6]; /* the switch's MAC and IP (network order): the source of */
    uint32_t ip; /* every frame an endpoint sends */
    uint16_t port0; /* queue q is UDP port port0 + q */
    _Atomic uint64_t tx_full; /* frames an endpoint dropped: its tx queue was full */
    _Atomic uint64_t tx_too_big; /* ... larger than a frame slot */
    roce_stats_t roce; /* the RoCE counters of all the link's endpoints */
} fabric_link_t;

/* An endpoint queued frames in tx[]: wake the fabric's transmitting thread through tx_efd
 * (nothing to do when the endpoint runs on that thread itself: tx_no_wake). */
void fabric_link_kick(fabric_link_t *l);

/* What the switch opens its endpoints with (its transport_config_t.opener points at
 * `opener`): the link, and the size of each endpoint's RoCE result buffer in flows x frames
 * (both 0: the default 4 x 128; rows 0 with depth 1: none kept). */
typedef struct fabric_port_config {
    transport_opener_t opener;
    fabric_link_t *link;
    uint32_t resbuf_rows, resbuf_depth;
} fabric_port_config_t;

/* Make pc open port endpoints on link (pc->opener then opens them). */
void fabric_port_config_init(fabric_port_config_t *pc, fabric_link_t *link, uint32_t resbuf_rows,
                             uint32_t resbuf_depth);

/* The endpoint of queue cfg->queue (cfg's batch and max_packet apply; its kind is only a
 * name). 0 with *out set, or -errno with a reason in err. */
int fabric_port_open(const fabric_port_config_t *pc, const transport_config_t *cfg,
                     transport_t **out, char *err, size_t errlen);

#endif /* INAGG_FABRIC_PORT_H */
