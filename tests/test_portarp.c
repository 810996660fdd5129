/*
 * test_portarp.c - the fabric's switched ports keep the kernel's ARP off (fabric/portarp.h):
 * in a network namespace of the test's own (a veth pair there), portarp_quiet sets
 * IFF_NOARP and says what it found, portarp_restore puts back exactly that, and a port that
 * does not exist is named. Skips where a namespace or an interface cannot be made (not root).
 */
#include <errno.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "switchd/fabric/portarp.h"

/* The interface's flags, or -1. */
static int if_flags(const char *name)
{
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    int rc = ioctl(sock, SIOCGIFFLAGS, &ifr) == 0 ? (unsigned short)ifr.ifr_flags : -1;
    close(sock);
    return rc;
}

TEST(portarp_quiet_restores_what_it_found, 10)
{
    /* the test runs in its own forked child: the namespace goes with it */
    if (unshare(CLONE_NEWNET) != 0)
        SKIP("cannot make a network namespace (needs root)");
    if (system("ip link add pa0 type veth peer name pa1 2>/dev/null && "
               "ip link set pa0 up 2>/dev/null") != 0)
        SKIP("cannot make a veth interface (ip, CAP_NET_ADMIN)");
    CHECK(if_flags("pa0") >= 0);
    CHECK(!(if_flags("pa0") & IFF_NOARP));

    /* ARP on: turned off while the fabric runs, on again after */
    char err[256] = "";
    int was_off = -1;
    CHECK_EQ_INT(portarp_quiet("pa0", &was_off, err, sizeof(err)), 0);
    CHECK_EQ_INT(was_off, 0);
    CHECK(if_flags("pa0") & IFF_NOARP);
    CHECK(if_flags("pa0") & IFF_UP); /* nothing else changed */
    portarp_restore("pa0", was_off);
    CHECK(!(if_flags("pa0") & IFF_NOARP));

    /* ARP already off (as tools/testbed makes its ports): stays off after */
    CHECK_EQ_INT(system("ip link set pa0 arp off"), 0);
    CHECK_EQ_INT(portarp_quiet("pa0", &was_off, err, sizeof(err)), 0);
    CHECK_EQ_INT(was_off, 1);
    portarp_restore("pa0", was_off);
    CHECK(if_flags("pa0") & IFF_NOARP);

    /* a port that does not exist is named, with its errno */
    CHECK_EQ_INT(portarp_quiet("nosuch0", &was_off, err, sizeof(err)), -ENODEV);
    CHECK(strstr(err, "nosuch0") && strstr(err, "no such interface"));
}
