/*
 * bench_allreduce_defaults.c - what `inagg bench allreduce` chooses for itself: the systems'
 * names, and the testbed's link-aware defaults (packet size from the MTU, window from the
 * link rate, retransmission floor for queueing).
 */
#include <math.h>
#include <stdio.h>

#include "bench/bench_allreduce.h"
#include "wire/wire.h"

/* inagg's packet header and its MAC (a job with a secret, as every bench job has by default) */
#define HEADER_BYTES WIRE_HEADER_MAX
#define IP_UDP_BYTES 28u /* IPv4 + UDP headers in the frame's MTU */
#define WINDOW_TIME_S 0.003 /* the window holds this much of the link's rate */

const char *const ar_system_name[AR_NSYS] = {"inagg", "mpi", "mpi-ring", "gloo"};
const char *const ar_system_key[AR_NSYS] = {"inagg", "mpi", "mpi_ring", "gloo"};

void ar_link_defaults(ar_opts_t *o, uint32_t mtu, uint64_t link_bps, char *note, size_t len)
{
    if (!o->given.packet) {
        /* one datagram per frame: no IP fragments, so a lost frame loses one packet */
        uint32_t fit =
            mtu > HEADER_BYTES + IP_UDP_BYTES + 4 ? (mtu - HEADER_BYTES - IP_UDP_BYTES) / 4 : 1;
        if (fit > INAGG_MAX_PACKET_ELEMS)
            fit = INAGG_MAX_PACKET_ELEMS;
        uint32_t p = 1;
        while (p * 2 <= fit)
            p *= 2;
        o->packet_elems = p;
    }
    if (!o->given.window) {
        /* about the bandwidth-delay product: more only queues the worker's own packets
         * behind the link, which the retransmission timer then mistakes for loss */
        double pkt = (double)o->packet_elems * 4 + HEADER_BYTES;
        double w = link_bps ? ceil((double)link_bps / 8 * WINDOW_TIME_S / pkt) : 16;
        o->window = (uint32_t)(w < AR_TESTBED_WINDOW_MIN   ? AR_TESTBED_WINDOW_MIN
                               : w > AR_TESTBED_WINDOW_MAX ? AR_TESTBED_WINDOW_MAX
                                                           : w);
        if (o->window < o->threads)
            o->window = o->threads;
    }
    if (!o->given.rto_min)
        o->rto_min_us = AR_TESTBED_RTO_MIN_US;
    if (!o->given.rto_max)
        o->rto_max_us = AR_TESTBED_RTO_MAX_US;
    if (o->rto_min_us > o->rto_max_us)
        o->rto_min_us = o->rto_max_us;
    if (!o->given.switch_threads)
        o->switch_threads = AR_TESTBED_SWITCH_THREADS;
    snprintf(note, len,
             "packet %u elements (%u B datagrams%s), window %u (%s), retransmission floor "
             "%.0f ms, switch threads %u",
             o->packet_elems, o->packet_elems * 4 + HEADER_BYTES,
             o->packet_elems * 4 + HEADER_BYTES + IP_UDP_BYTES <= mtu ? ": one frame each"
                                                                      : ", fragmented",
             o->window,
             o->given.window ? "as given"
             : link_bps      ? "about 3 ms of the link"
                             : "no rate limit",
             o->rto_min_us / 1000.0, o->switch_threads);
}
