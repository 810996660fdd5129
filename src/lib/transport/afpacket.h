/*
 * afpacket.h - the AF_PACKET transport (transport kind "afpacket"): aggregation packets as
 * IPv4/UDP datagrams in Ethernet frames that the process itself receives and builds, without
 * the kernel's IP stack.
 *
 * transport_config_t.afpacket.iface names an interface; the endpoint opens its own packet
 * socket there (netio/pktsock.h: memory-mapped receive ring) and takes the frames addressed
 * to `bind`'s IP and port + queue. Replies go to the MAC, IP and port the request came from.
 * Addresses are "IP:PORT" as for UDP, plus the peer's MAC and, where the L2 fabric's
 * aggregation port (fabric/port.h) made them, the fabric port; that port frames its UDP
 * datagrams the same way.
 */
#ifndef INAGG_TRANSPORT_AFPACKET_H
#define INAGG_TRANSPORT_AFPACKET_H

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "lib/transport/transport.h"

#define AFP_ADDR_KIND 2u

/* The contents of an AFP_ADDR_KIND address. */
typedef struct afp_addr {
    uint8_t mac[6];
    uint16_t ifport; /* the fabric port to send by (the fabric's aggregation port) */
    uint32_t ip; /* network order */
    uint16_t port; /* host order */
} afp_addr_t;

/* An AFP_ADDR_KIND address (mac NULL: zeros). Inline: the receive paths of this transport
 * and of the fabric's aggregation port name every datagram's sender with it. */
static inline void afp_addr_make(transport_addr_t *a, const uint8_t *mac, uint16_t ifport,
                                 uint32_t ip, uint16_t port)
{
    memset(a, 0, sizeof(*a));
    a->kind = AFP_ADDR_KIND;
    a->len = sizeof(afp_addr_t);
    afp_addr_t *x = (afp_addr_t *)(void *)a->u.bytes;
    if (mac)
        memcpy(x->mac, mac, 6);
    x->ifport = ifport;
    x->ip = ip;
    x->port = port;
}

/* The address of queue `queue` from queue 0's: the same MAC and IP, the port after it by
 * `queue`. 0, or -EINVAL for an address of another kind. */
static inline int afp_addr_queue(const transport_addr_t *q0, uint32_t queue, transport_addr_t *out)
{
    if (q0->kind != AFP_ADDR_KIND)
        return -EINVAL;
    *out = *q0;
    afp_addr_t *x = (afp_addr_t *)(void *)out->u.bytes;
    x->port = (uint16_t)(x->port + queue);
    return 0;
}

#endif /* INAGG_TRANSPORT_AFPACKET_H */
