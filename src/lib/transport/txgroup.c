/*
 * txgroup.c - queued packets grouped by destination (see txgroup.h): a counting sort over
 * the destinations in the order they first appear.
 */
#include "lib/transport/txgroup.h"

const transport_tx_t *txgroup_by_destination(const transport_tx_t *pkts, int n, transport_tx_t *out,
                                             uint8_t *scratch)
{
    const transport_addr_t *dest[TXGROUP_MAX_DESTINATIONS];
    int start[TXGROUP_MAX_DESTINATIONS + 1] = {0}, ngroups = 0;
    for (int i = 0; i < n; i++) {
        int g = ngroups - 1; /* most often the place of the packet before */
        if (g < 0 || !transport_addr_equal(dest[g], &pkts[i].to))
            for (g = 0; g < ngroups && !transport_addr_equal(dest[g], &pkts[i].to); g++)
                ;
        if (g == ngroups) {
            if (ngroups == TXGROUP_MAX_DESTINATIONS)
                return pkts;
            dest[ngroups++] = &pkts[i].to;
        }
        scratch[i] = (uint8_t)g;
        start[g + 1]++;
    }
    if (ngroups <= 1)
        return pkts;
    for (int g = 0; g < ngroups; g++)
        start[g + 1] += start[g];
    for (int i = 0; i < n; i++)
        out[start[scratch[i]]++] = pkts[i];
    return out;
}
