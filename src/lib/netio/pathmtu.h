/*
 * pathmtu.h - how large an IPv4 datagram toward a peer may be without IP fragments: the MTU
 * the kernel knows for the path (the route's, or a smaller one learned from the network), read
 * as IP_MTU from a UDP socket connected to the peer, and the interface the route leaves
 * through. Loopback's is 65536; a veth or Ethernet link's is its configured MTU (1500, 9000).
 *
 * Errors: -errno, with a reason written into the caller's buffer.
 */
#ifndef INAGG_NETIO_PATHMTU_H
#define INAGG_NETIO_PATHMTU_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#define PATHMTU_IP_UDP_BYTES 28u /* an IPv4 header without options and a UDP header */

/* The path MTU toward peer (its port matters not), and the name of the interface the route
 * leaves through into ifname (ifname_len bytes; "" when no interface holds the route's source
 * address). The MTU (>= 68), or -errno with the reason. */
int pathmtu_of(const struct sockaddr_in *peer, char *ifname, size_t ifname_len, char *err,
               size_t errlen);

/* The largest UDP payload one IPv4 frame of that MTU carries: mtu less the IPv4 and UDP
 * headers (0 for an MTU too small to carry any). */
static inline uint32_t pathmtu_udp_payload(uint32_t mtu)
{
    return mtu > PATHMTU_IP_UDP_BYTES ? mtu - PATHMTU_IP_UDP_BYTES : 0;
}

#endif /* INAGG_NETIO_PATHMTU_H */
