/*
 * tapdev.c - creating and configuring the fabric's internal TAP port (see tapdev.h).
 */
#include "switchd/fabric/tapdev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

static int fail(int fd, int sock, int e, char *err, size_t errlen, const char *name,
                const char *what)
{
    if (fd >= 0)
        close(fd);
    if (sock >= 0)
        close(sock);
    return set_err(err, errlen, -e, "internal port %s: %s: %s", name, what, strerror(e));
}

int tapdev_open(const char *name, const uint8_t mac[6], uint32_t ip, int prefix, uint32_t mtu,
                char *err, size_t errlen)
{
    if (!name || !*name || strlen(name) >= IFNAMSIZ)
        return set_err(err, errlen, -EINVAL, "bad internal port name '%s'", name ? name : "");
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return fail(-1, -1, errno, err, errlen, name, "opening /dev/net/tun");
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR;
    if (ioctl(fd, TUNSETIFF, &ifr) != 0)
        return fail(fd, -1, errno, err, errlen, name, "TUNSETIFF (exists already?)");
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return fail(fd, -1, errno, err, errlen, name, "socket");
    memset(&ifr.ifr_hwaddr, 0, sizeof(ifr.ifr_hwaddr));
    ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
    memcpy(ifr.ifr_hwaddr.sa_data, mac, 6);
    if (ioctl(sock, SIOCSIFHWADDR, &ifr) != 0)
        return fail(fd, sock, errno, err, errlen, name, "setting its MAC");
    ifr.ifr_mtu = (int)mtu;
    if (ioctl(sock, SIOCSIFMTU, &ifr) != 0)
        return fail(fd, sock, errno, err, errlen, name, "setting its MTU");
    struct sockaddr_in *sin = (struct sockaddr_in *)(void *)&ifr.ifr_addr;
    memset(&ifr.ifr_addr, 0, sizeof(ifr.ifr_addr));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = ip;
    if (ioctl(sock, SIOCSIFADDR, &ifr) != 0)
        return fail(fd, sock, errno, err, errlen, name, "setting its address");
    memset(&ifr.ifr_netmask, 0, sizeof(ifr.ifr_netmask));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = prefix == 0 ? 0 : htonl(~0u << (32 - prefix));
    if (ioctl(sock, SIOCSIFNETMASK, &ifr) != 0)
        return fail(fd, sock, errno, err, errlen, name, "setting its netmask");
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) != 0)
        return fail(fd, sock, errno, err, errlen, name, "reading its flags");
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    if (ioctl(sock, SIOCSIFFLAGS, &ifr) != 0)
        return fail(fd, sock, errno, err, errlen, name, "bringing it up");
    close(sock);
    return fd;
}
