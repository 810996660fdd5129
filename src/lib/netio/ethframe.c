/*
 * ethframe.c - Ethernet / IPv4 / UDP parsing and header writing (see ethframe.h).
 */
#include "lib/netio/ethframe.h"

#include <string.h>

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

int ethf_parse(const uint8_t *f, uint32_t len, ethf_udp_t *out)
{
    if (len < ETHF_ETH_LEN)
        return ETHF_MALFORMED;
    memcpy(out->dst_mac, f, 6);
    memcpy(out->src_mac, f + 6, 6);
    out->payload = NULL;
    out->payload_len = 0;
    if (get16(f + 12) != ETHF_TYPE_IPV4)
        return ETHF_OTHER;
    const uint8_t *ip = f + ETHF_ETH_LEN;
    uint32_t room = len - ETHF_ETH_LEN;
    if (room < 20 || (ip[0] >> 4) != 4)
        return ETHF_MALFORMED;
    uint32_t ihl = (ip[0] & 15u) * 4u, total = get16(ip + 2);
    if (ihl < 20 || total < ihl || total > room)
        return ETHF_MALFORMED;
    memcpy(&out->src_ip, ip + 12, 4);
    memcpy(&out->dst_ip, ip + 16, 4);
    if (ip[9] != 17)
        return ETHF_OTHER;
    if ((get16(ip + 6) & 0x3fff) != 0)
        return ETHF_FRAGMENT; /* more fragments, or an offset */
    if (total - ihl < 8)
        return ETHF_MALFORMED;
    const uint8_t *udp = ip + ihl;
    uint32_t ulen = get16(udp + 4);
    if (ulen < 8 || ulen > total - ihl)
        return ETHF_MALFORMED;
    out->src_port = get16(udp);
    out->dst_port = get16(udp + 2);
    out->payload = udp + 8;
    out->payload_len = ulen - 8;
    return ETHF_UDP;
}

/* s plus the 16-bit words of h[0..len) (len even), folded to 16 bits. */
static uint32_t sum16(const uint8_t *h, uint32_t len, uint32_t s)
{
    for (uint32_t i = 0; i + 1 < len; i += 2)
        s += get16(h + i);
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return s;
}

static uint16_t ip_checksum(const uint8_t *h, uint32_t len) { return (uint16_t)~sum16(h, len, 0); }

void ethf_write_udp(uint8_t *b, const uint8_t src_mac[6], const uint8_t dst_mac[6], uint32_t src_ip,
                    uint32_t dst_ip, uint16_t src_port, uint16_t dst_port, uint32_t payload_len)
{
    memcpy(b, dst_mac, 6);
    memcpy(b + 6, src_mac, 6);
    put16(b + 12, ETHF_TYPE_IPV4);
    uint8_t *ip = b + ETHF_ETH_LEN;
    ip[0] = 0x45;
    ip[1] = 0;
    put16(ip + 2, (uint16_t)(20 + 8 + payload_len));
    put16(ip + 4, 0);
    put16(ip + 6, 0x4000); /* DF */
    ip[8] = 64;
    ip[9] = 17;
    put16(ip + 10, 0);
    memcpy(ip + 12, &src_ip, 4);
    memcpy(ip + 16, &dst_ip, 4);
    put16(ip + 10, ip_checksum(ip, 20));
    uint8_t *udp = ip + 20;
    put16(udp, src_port);
    put16(udp + 2, dst_port);
    put16(udp + 4, (uint16_t)(8 + payload_len));
    put16(udp + 6, 0);
}

void ethf_udp_set_payload_len(uint8_t *f, uint32_t payload_len)
{
    uint8_t *ip = f + ETHF_ETH_LEN;
    uint32_t ihl = (ip[0] & 15u) * 4u;
    put16(ip + 2, (uint16_t)(ihl + 8 + payload_len));
    put16(ip + 10, 0);
    put16(ip + 10, ip_checksum(ip, ihl));
    uint8_t *udp = ip + ihl;
    put16(udp + 4, (uint16_t)(8 + payload_len));
    put16(udp + 6, 0);
}

void ethf_udp_set_partial_csum(uint8_t *f)
{
    const uint8_t *ip = f + ETHF_ETH_LEN;
    uint8_t *udp = f + ETHF_ETH_LEN + (ip[0] & 15u) * 4u;
    put16(udp + 6, (uint16_t)sum16(ip + 12, 8, 17u + get16(udp + 4)));
}
