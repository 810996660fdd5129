/*
 * ethframe.h - Ethernet / IPv4 / UDP framing of aggregation packets: parse a received frame
 * into its addresses and UDP payload, and write the 42-byte header of a frame to send. Used by
 * the AF_PACKET transport and by the L2 fabric's classifier; nothing here does I/O.
 */
#ifndef INAGG_NETIO_ETHFRAME_H
#define INAGG_NETIO_ETHFRAME_H

#include <stdint.h>

#define ETHF_ETH_LEN 14u
#define ETHF_UDP_HDR_LEN 42u /* Ethernet 14 + IPv4 20 + UDP 8 */
#define ETHF_MAX_FRAME 9216u /* an MTU-9000 frame and its Ethernet header */
#define ETHF_TYPE_IPV4 0x0800u
#define ETHF_TYPE_ARP 0x0806u

typedef struct ethf_udp {
    uint8_t dst_mac[6], src_mac[6];
    uint32_t src_ip, dst_ip; /* network order */
    uint16_t src_port, dst_port; /* host order */
    const uint8_t *payload;
    uint32_t payload_len;
} ethf_udp_t;

/* What a frame is, as far as the classifier needs it. */
enum {
    ETHF_UDP = 0, /* an unfragmented IPv4 UDP datagram: *out filled */
    ETHF_OTHER = 1, /* any other well-formed frame (ARP, ICMP, TCP, IPv6, ...) */
    ETHF_FRAGMENT = 2, /* an IPv4 fragment (UDP or not): addresses filled, no payload */
    ETHF_MALFORMED = -1 /* shorter than its headers say, a bad IPv4 header, a runt */
};

/* Classify and parse frame f of len bytes. One of the values above. */
int ethf_parse(const uint8_t *f, uint32_t len, ethf_udp_t *out);

/* Write the Ethernet, IPv4 (checksummed, DF set, TTL 64) and UDP (checksum 0, which IPv4
 * allows) headers of a datagram carrying payload_len bytes into buf[0..41]. IPs in network
 * order, ports in host order. */
void ethf_write_udp(uint8_t *buf, const uint8_t src_mac[6], const uint8_t dst_mac[6],
                    uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                    uint32_t payload_len);

/* Set the lengths of the IPv4 UDP frame f (as ethf_parse accepted it) for a payload of
 * payload_len bytes after its headers: IPv4 total length and checksum, UDP length; the UDP
 * checksum becomes 0 (none, which IPv4 allows). A datagram cut from a GSO frame. */
void ethf_udp_set_payload_len(uint8_t *f, uint32_t payload_len);

/* Put into the UDP checksum of the IPv4 UDP frame f (its lengths set) what a frame sent
 * CHECKSUM_PARTIAL carries there: the pseudo-header's sum (addresses, protocol, UDP length),
 * not complemented; whoever completes it adds the UDP header and payload. */
void ethf_udp_set_partial_csum(uint8_t *f);

static inline int ethf_mac_is_multicast(const uint8_t *mac) { return mac[0] & 1; }

#endif /* INAGG_NETIO_ETHFRAME_H */
