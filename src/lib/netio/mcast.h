/*
 * mcast.h - IPv4 multicast on a UDP socket: the group of a job, a receiver bound to a group and
 * joined on the interface that leads to a given peer, and a sender's way out. The switch sends
 * a round's result once to the job's group instead of once per rank (PROTOCOL.md 9.6); each
 * worker takes it on a socket of its own bound to the group.
 *
 * Errors: -errno, with a reason written into the caller's buffer.
 */
#ifndef INAGG_NETIO_MCAST_H
#define INAGG_NETIO_MCAST_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

/* Whether addr (host order) is an IPv4 multicast address (224.0.0.0/4). */
static inline int mcast_is_group(uint32_t addr) { return (addr >> 28) == 0xEu; }

/* The group of job `job_id` of a switch whose groups start at `base` (host order): base plus
 * the id in the low 16 bits, so a /16 holds every job of one switch. */
static inline uint32_t mcast_job_group(uint32_t base, uint16_t job_id)
{
    return (base & 0xffff0000u) | (uint32_t)job_id;
}

/* "GROUP[:PORT]" (PORT: default_port when absent) into *group (host order) and *port. 0, or
 * -EINVAL when it is not an IPv4 multicast address with a port 1..65535. */
int mcast_parse_group(const char *text, uint16_t default_port, uint32_t *group, uint16_t *port);

/* "a.b.c.d:port" of group (host order) and port into buf, always NUL-terminated. */
void mcast_group_format(uint32_t group, uint16_t port, char *buf, size_t len);

/* A non-blocking UDP socket that receives what is sent to group:port (host order): bound to
 * that address with SO_REUSEADDR (every rank on a host binds it), joined on the interface
 * whose address the kernel would send from toward `peer`, and taking no other group's
 * datagrams (IP_MULTICAST_ALL off). The descriptor, or -errno with the reason. */
int mcast_open_receiver(uint32_t group, uint16_t port, const struct sockaddr_in *peer, char *err,
                        size_t errlen);

/* Multicast sends on fd leave from `ifaddr` (network order; INADDR_ANY: as the routing table
 * says), to one hop (TTL 1), and reach receivers on this host too. 0 or -errno. */
int mcast_set_sender(int fd, struct in_addr ifaddr);

/* Whether a datagram from `ifaddr` (network order) to group:port can leave: 0, or -errno
 * (ENETUNREACH: no route for the group) with the reason. */
int mcast_check_route(struct in_addr ifaddr, uint32_t group, uint16_t port, char *err,
                      size_t errlen);

#endif /* INAGG_NETIO_MCAST_H */
