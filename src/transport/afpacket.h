/*
 * afpacket.h - the AF_PACKET transport (transport kind "afpacket"): aggregation packets as
 * IPv4/UDP datagrams in Ethernet frames that the process itself receives and builds, without
 * the kernel's IP stack.
 *
 * Two ways to open it (transport_config_t):
 *  - standalone: `iface` names an interface; the endpoint opens its own packet socket there
 *    (pktsock.h: memory-mapped receive ring) and takes the frames addressed to `bind`'s IP and
 *    port + queue. Replies go to the MAC, IP and port the request came from.
 *  - linked: `link` points at an afp_link_t whose owner (the L2 fabric) receives frames on its
 *    ports, and queues the ones for queue q in rx[q]; the endpoint's sends are queued in tx[q]
 *    with the fabric port to leave by, and the owner transmits them.
 * Addresses are "IP:PORT" as for UDP, plus the peer's MAC and fabric port.
 */
#ifndef INAGG_TRANSPORT_AFPACKET_H
#define INAGG_TRANSPORT_AFPACKET_H

#include <stdint.h>

#include "fabric/frameq.h"
#include "transport/roce.h"

#define AFP_MAX_QUEUES 16
#define AFP_ADDR_KIND 2u

typedef struct afp_link {
    uint32_t nqueues;
    frameq_t rx[AFP_MAX_QUEUES]; /* owner -> endpoint of queue q: frames addressed to it */
    frameq_t tx[AFP_MAX_QUEUES]; /* endpoint of queue q -> owner: frames to transmit */
    int tx_efd;                  /* eventfd the endpoints write after queueing frames */
    _Atomic int tx_no_wake;      /* the endpoints run on the owner's transmitting thread
                                    (inline aggregation): no eventfd write needed */
    uint8_t mac[6];              /* the owner's MAC and IP (network order): the source of */
    uint32_t ip;                 /* every frame an endpoint sends */
    uint16_t port0;              /* queue q is UDP port port0 + q */
    _Atomic uint64_t tx_full;    /* frames an endpoint dropped: its tx queue was full */
    _Atomic uint64_t tx_too_big; /* ... larger than a frame slot */
    roce_stats_t roce;           /* the roce transport's linked endpoints (roce.h) */
} afp_link_t;

/* An endpoint queued frames in tx[]: wake the owner's transmitting thread through tx_efd
 * (nothing to do when the endpoint runs on that thread itself: tx_no_wake). */
void afp_link_kick(afp_link_t *l);

/* The contents of an AFP_ADDR_KIND address. */
typedef struct afp_addr {
    uint8_t mac[6];
    uint16_t ifport; /* linked mode: the fabric port to send by */
    uint32_t ip;     /* network order */
    uint16_t port;   /* host order */
} afp_addr_t;

#endif /* INAGG_TRANSPORT_AFPACKET_H */
