/*
 * mcast.c - see mcast.h: a multicast receiver joined toward a peer, a sender's interface, and
 * the route check a switch makes before it offers a group.
 */
#include "lib/netio/mcast.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"

#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif

/* The address this host sends from toward peer (a connected UDP socket's own address). */
static int local_toward(const struct sockaddr_in *peer, struct in_addr *out)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    int rc = connect(fd, (const struct sockaddr *)peer, sizeof(*peer)) == 0 &&
                     getsockname(fd, (struct sockaddr *)&me, &len) == 0
                 ? 0
                 : -errno;
    close(fd);
    if (rc == 0)
        *out = me.sin_addr;
    return rc;
}

int mcast_parse_group(const char *text, uint16_t default_port, uint32_t *group, uint16_t *port)
{
    struct sockaddr_in a;
    if (netaddr_parse(text, default_port, &a) != 0 || !mcast_is_group(ntohl(a.sin_addr.s_addr)) ||
        a.sin_port == 0)
        return -EINVAL;
    *group = ntohl(a.sin_addr.s_addr);
    *port = ntohs(a.sin_port);
    return 0;
}

void mcast_group_format(uint32_t group, uint16_t port, char *buf, size_t len)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(group);
    netaddr_format(&a, buf, len);
}

int mcast_open_receiver(uint32_t group, uint16_t port, const struct sockaddr_in *peer, char *err,
                        size_t errlen)
{
    char gtext[32];
    mcast_group_format(group, port, gtext, sizeof(gtext));
    if (!mcast_is_group(group))
        return set_err(err, errlen, -EINVAL, "%s is not an IPv4 multicast group", gtext);
    struct in_addr ifaddr;
    int rc = local_toward(peer, &ifaddr);
    if (rc != 0)
        return set_err(err, errlen, rc, "no interface toward the switch for group %s: %s", gtext,
                       strerror(-rc));
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return set_err(err, errlen, -errno, "socket: %s", strerror(errno));
    int one = 1, zero = 0;
    struct sockaddr_in at = {.sin_family = AF_INET, .sin_port = htons(port)};
    at.sin_addr.s_addr = htonl(group);
    struct ip_mreqn join = {.imr_address = ifaddr};
    join.imr_multiaddr.s_addr = htonl(group);
    const char *step;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
        step = "SO_REUSEADDR";
    else if (bind(fd, (const struct sockaddr *)&at, sizeof(at)) != 0)
        step = "bind";
    else if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &join, sizeof(join)) != 0)
        step = "IP_ADD_MEMBERSHIP";
    else if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero)) != 0)
        step = "IP_MULTICAST_ALL";
    else
        step = NULL;
    if (step) {
        int e = errno;
        char ia[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &ifaddr, ia, sizeof(ia));
        close(fd);
        return set_err(err, errlen, -e,
                       "cannot take the switch's multicast group %s on %s (%s): %s", gtext, ia,
                       step, strerror(e));
    }
    return fd;
}

int mcast_set_sender(int fd, struct in_addr ifaddr)
{
    unsigned char ttl = 1, loop = 1;
    struct ip_mreqn out = {.imr_address = ifaddr};
    if (ifaddr.s_addr != htonl(INADDR_ANY) &&
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &out, sizeof(out)) != 0)
        return -errno;
    if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl)) != 0 ||
        setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof(loop)) != 0)
        return -errno;
    return 0;
}

int mcast_check_route(struct in_addr ifaddr, uint32_t group, uint16_t port, char *err,
                      size_t errlen)
{
    char gtext[32];
    mcast_group_format(group, port, gtext, sizeof(gtext));
    if (!mcast_is_group(group))
        return set_err(err, errlen, -EINVAL, "%s is not an IPv4 multicast group", gtext);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return set_err(err, errlen, -errno, "socket: %s", strerror(errno));
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
    to.sin_addr.s_addr = htonl(group);
    int rc = mcast_set_sender(fd, ifaddr);
    if (rc == 0 && connect(fd, (const struct sockaddr *)&to, sizeof(to)) != 0)
        rc = -errno;
    close(fd);
    if (rc != 0)
        return set_err(err, errlen, rc, "multicast to %s cannot leave this host: %s%s", gtext,
                       strerror(-rc),
                       rc == -ENETUNREACH ? " (listen on the address of the workers' interface, "
                                            "or route 224.0.0.0/4 to it)"
                                          : "");
    return 0;
}
