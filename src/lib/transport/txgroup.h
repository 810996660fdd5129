/*
 * txgroup.h - the order a batch of queued packets is handed to the transport in: each
 * destination's packets together, in the order they were queued.
 *
 * A switch's dataplane thread queues a round's result to every rank one after another, and
 * a worker's p4sgd burst puts consecutive slots on alternating switch queues, so a queue
 * alternates between destinations; grouped, each destination's packets of a flush are one
 * run, which the udp transport sends as one UDP_SEGMENT datagram (transport/udp.c) and the
 * kernel carries as one super-frame. No destination sees its own packets reordered.
 */
#ifndef INAGG_TRANSPORT_TXGROUP_H
#define INAGG_TRANSPORT_TXGROUP_H

#include <stdint.h>

#include "lib/transport/transport.h"

#define TXGROUP_MAX_DESTINATIONS 64 /* more: the packets go as queued */

/* pkts[0..n) grouped by destination into out[0..n) (room for n; scratch: n bytes), and out
 * returned; or pkts itself when they go to one destination, or to more than
 * TXGROUP_MAX_DESTINATIONS. */
const transport_tx_t *txgroup_by_destination(const transport_tx_t *pkts, int n, transport_tx_t *out,
                                             uint8_t *scratch);

#endif /* INAGG_TRANSPORT_TXGROUP_H */
