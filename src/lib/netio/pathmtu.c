/*
 * pathmtu.c - the path MTU toward an IPv4 peer (pathmtu.h): a UDP socket connected to it (no
 * datagram leaves: connect() only looks the route up), IP_MTU read from it, and the interface
 * whose address is the socket's source.
 */
#include "lib/netio/pathmtu.h"

#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"

/* The interface holding address src (network order) into ifname, or "" when none does. */
static void interface_of(struct in_addr src, char *ifname, size_t len)
{
    if (len)
        ifname[0] = '\0';
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_name)
            continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *)(const void *)i->ifa_addr;
        if (a->sin_addr.s_addr == src.s_addr) {
            snprintf(ifname, len, "%s", i->ifa_name);
            break;
        }
    }
    freeifaddrs(all);
}

int pathmtu_of(const struct sockaddr_in *peer, char *ifname, size_t ifname_len, char *err,
               size_t errlen)
{
    char text[64];
    netaddr_format(peer, text, sizeof(text));
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return set_err(err, errlen, -errno, "cannot open a UDP socket: %s", strerror(errno));
    struct sockaddr_in to = *peer;
    if (to.sin_port == 0)
        to.sin_port = htons(9); /* connect() wants a port; no datagram is sent */
    if (connect(fd, (const struct sockaddr *)&to, sizeof(to)) != 0) {
        int e = errno;
        close(fd);
        return set_err(err, errlen, -e, "no route to %s: %s", text, strerror(e));
    }
    int mtu = 0;
    socklen_t n = sizeof(mtu);
    struct sockaddr_in src;
    socklen_t sn = sizeof(src);
    if (getsockopt(fd, IPPROTO_IP, IP_MTU, &mtu, &n) != 0) {
        int e = errno;
        close(fd);
        return set_err(err, errlen, -e, "cannot read the path MTU to %s: %s", text, strerror(e));
    }
    if (getsockname(fd, (struct sockaddr *)&src, &sn) == 0)
        interface_of(src.sin_addr, ifname, ifname_len);
    else if (ifname_len)
        ifname[0] = '\0';
    close(fd);
    if (mtu < 68) /* IPv4's minimum: a kernel never reports less */
        return set_err(err, errlen, -EPROTO, "path MTU %d to %s is below IPv4's 68", mtu, text);
    return mtu;
}
