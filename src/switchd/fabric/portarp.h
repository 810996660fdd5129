/*
 * portarp.h - the host's own ARP kept off the fabric's switched ports while the fabric runs.
 *
 * The switch's address belongs to the internal port (tapdev.h), but Linux answers ARP for any
 * address of its namespace on any interface (arp_ignore=0): a host's ARP request arriving on a
 * switched port would also be answered by the kernel straight from that port, with the port's
 * own MAC, ahead of the internal port's answer through the fabric. A host that kept that
 * answer reaches the switch's TCP listener through the port anyway (the kernel takes IPv4
 * frames to the port's MAC), but its RoCE frames, addressed to the port's MAC and not the
 * switch's, are switched as ordinary frames and never aggregated. So the fabric sets IFF_NOARP
 * (`ip link set IF arp off`) on every port it switches, and puts back what it found when it
 * stops.
 */
#ifndef INAGG_FABRIC_PORTARP_H
#define INAGG_FABRIC_PORTARP_H

#include <stddef.h>

/* Turn the kernel's ARP off on interface `ifname`; *was_off says whether it already was.
 * 0, or -errno with a reason in err. */
int portarp_quiet(const char *ifname, int *was_off, char *err, size_t errlen);

/* Undo portarp_quiet: ARP on again unless it was off before (was_off). Best effort: the
 * interface may be gone already. */
void portarp_restore(const char *ifname, int was_off);

#endif /* INAGG_FABRIC_PORTARP_H */
