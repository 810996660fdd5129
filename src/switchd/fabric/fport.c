/*
 * fport.c - a fabric port's link loss and its counters (fport.h).
 */
#include "switchd/fabric/fport.h"

#include "lib/base/util.h"
#include "lib/netio/ethframe.h"
#include "switchd/fabric/stagestat.h"

int fport_loses(fport_t *port, int out, const uint8_t *frame, uint32_t len)
{
    if (!port->loss_thresh || port->is_cpu || len < ETHF_ETH_LEN ||
        !((frame[12] == 0x08 && frame[13] == 0x00) || (frame[12] == 0x89 && frame[13] == 0x15)))
        return 0; /* IPv4 and RoCE frames are lost, ARP and the rest never */
    if ((util_splitmix64(&port->loss_rng[out]) >> 32) >= port->loss_thresh)
        return 0;
    fstat_add(&port->c[FP_LOSS_DROPS], 1);
    return 1;
}

void fport_stats(const fport_t *port, fport_stats_t *out)
{
    fstat_read(port->c, out->c, FP_COUNT);
    out->ring_truncated = port->is_cpu ? 0 : port->ps.truncated;
}
