/*
 * portarp.c - the host's own ARP kept off the fabric's switched ports (see portarp.h).
 */
#include "switchd/fabric/portarp.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

/* Set or clear IFF_NOARP on ifname; *was_off (when not NULL) the flag before. 0 or -errno. */
static int set_noarp(const char *ifname, int off, int *was_off)
{
    if (!ifname || strlen(ifname) >= IFNAMSIZ)
        return -EINVAL;
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -errno;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
    int rc = 0;
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0) {
        rc = -errno;
    } else {
        int before = (ifr.ifr_flags & IFF_NOARP) != 0;
        if (was_off)
            *was_off = before;
        if (before != off) {
            ifr.ifr_flags = (short)(off ? ifr.ifr_flags | IFF_NOARP : ifr.ifr_flags & ~IFF_NOARP);
            if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0)
                rc = -errno;
        }
    }
    close(sock);
    return rc;
}

int portarp_quiet(const char *ifname, int *was_off, char *err, size_t errlen)
{
    int rc = set_noarp(ifname, 1, was_off);
    if (rc == -ENODEV)
        return set_err(err, errlen, rc, "port %s: no such interface", ifname);
    if (rc < 0)
        return set_err(err, errlen, rc,
                       "port %s: turning the host's ARP off on it (else the "
                       "kernel answers for the switch's address with the port's MAC): %s",
                       ifname ? ifname : "", strerror(-rc));
    return 0;
}

void portarp_restore(const char *ifname, int was_off)
{
    if (!was_off)
        (void)set_noarp(ifname, 0, NULL);
}
