/*
 * tapdev.h - the fabric's internal port: a TAP device in the switch's namespace that holds the
 * switch's IP address and MAC. The kernel's stack behind it answers ARP and ICMP for the
 * switch's address and carries the control connections (JOIN over TCP) to the switch's
 * ordinary TCP listener; the fabric forwards frames to and from it like any port. Frames are
 * read and written with a virtio-net header, so partially checksummed frames pass intact.
 */
#ifndef INAGG_FABRIC_TAPDEV_H
#define INAGG_FABRIC_TAPDEV_H

#include <stddef.h>
#include <stdint.h>

/* Create TAP `name` with MAC mac, address ip (network order) / prefix, the given MTU, and
 * bring it up. The descriptor (non-blocking) or -errno with a reason in err. */
int tapdev_open(const char *name, const uint8_t mac[6], uint32_t ip, int prefix, uint32_t mtu,
                char *err, size_t errlen);

#endif /* INAGG_FABRIC_TAPDEV_H */
