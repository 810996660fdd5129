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

#include <stdint.h>

#define AFP_ADDR_KIND 2u

/* The contents of an AFP_ADDR_KIND address. */
typedef struct afp_addr {
    uint8_t mac[6];
    uint16_t ifport; /* the fabric port to send by (the fabric's aggregation port) */
    uint32_t ip;     /* network order */
    uint16_t port;   /* host order */
} afp_addr_t;

#endif /* INAGG_TRANSPORT_AFPACKET_H */
