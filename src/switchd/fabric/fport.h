/*
 * fport.h - one port of the fabric: its socket (AF_PACKET, and AF_XDP for the fast path), or
 * the internal TAP port, the link it emulates (delay and jitter lines each way, random loss of
 * IPv4 and RoCE frames) and its counters. The fabric owns the ports; the receive stage reads
 * them, the transmit stage writes them, each through its own direction's state.
 */
#ifndef INAGG_FABRIC_FPORT_H
#define INAGG_FABRIC_FPORT_H

#include <net/if.h>
#include <stdatomic.h>
#include <stdint.h>

#include "lib/netio/pktsock.h"
#include "switchd/fabric/delayline.h"

struct xskport;

#define FABRIC_MAX_PORTS 64 /* the internal port included */

enum fport_stat {
    FP_RX,
    FP_RX_BYTES,
    FP_TX,
    FP_TX_BYTES,
    FP_TX_DROPS,
    FP_TX_GSO, /* UDP GSO super-frames of results sent (their frames also count in FP_TX) */
    FP_DELAY_DROPS,
    FP_LOSS_DROPS,
    FP_COUNT
};

typedef struct fport {
    char name[IFNAMSIZ];
    int is_cpu;
    int tap_fd; /* the internal port */
    pktsock_t ps; /* the others */
    int arp_quieted; /* the host's ARP was turned off on it (portarp.h) ... */
    int arp_was_off; /* ... and whether it was off before */
    struct xskport *xsk; /* the AF_XDP socket its fast-path frames arrive on (xdpports.c),
                              or NULL: everything through ps */
    char xdp_why[192]; /* --xdp auto without AF_XDP: the reason */
    int agg_fd[2]; /* send-only sockets on the same interface for results and for
                              resends, whose frames carry FABRIC_PRIO_RESULT / _RESEND as their
                              priority: an arbitrating qdisc on the port (tools/testbed
                              --arbitration) tells them from forwarded frames by it */
    uint64_t delay_ns, jitter_ns;
    uint64_t loss_thresh; /* an IPv4 frame is dropped when a 32-bit draw is below this */
    uint64_t loss_rng[2]; /* splitmix64 states of the port's drops in and out (the two
                              directions may run on different threads) */
    delayline_t in, out; /* used when delay_ns or jitter_ns is set */
    _Atomic uint64_t c[FP_COUNT];
} fport_t;

/* Whether the port's link loses this frame now, on its way in (out = 0) or out (1) (random,
 * IPv4 and RoCE only); counted. */
int fport_loses(fport_t *port, int out, const uint8_t *frame, uint32_t len);

/* Whether the port emulates a link delay (its frames go through its delay lines). */
static inline int fport_delayed(const fport_t *port) { return port->delay_ns || port->jitter_ns; }

typedef struct fport_stats {
    uint64_t c[FP_COUNT];
    uint64_t ring_truncated; /* frames larger than a ring frame, dropped by the packet socket */
} fport_stats_t;

void fport_stats(const fport_t *port, fport_stats_t *out);

#endif /* INAGG_FABRIC_FPORT_H */
