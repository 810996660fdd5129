/*
 * bench_allreduce_defaults.c - what `inagg bench allreduce` chooses for itself: the systems'
 * names, and the testbed's link-aware defaults (packet size from the MTU, window from the
 * link rate, retransmission floor for queueing).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bench/bench_allreduce.h"
#include "lib/netio/roce_frame.h"
#include "lib/wire/wire.h"

/* inagg's packet header and its MAC (a job with a secret, as every bench job has by default) */
#define HEADER_BYTES WIRE_HEADER_MAX
#define IP_UDP_BYTES 28u /* IPv4 + UDP headers in the frame's MTU */
#define WINDOW_TIME_S 0.003 /* the window holds this much of the link's rate */
/* RoCE's window holds less: its 4 KiB frames wait one by one in the link's queue (UDP's GSO
 * sends pass it as 64 KiB), and a frame that waits in a rate limiter costs it a timer; on the
 * testbed 3 ms of queue gave RoCE 0.36-0.38 of a 1 Gbit/s link, 1 ms 0.55 (docs/perf-log/
 * 2026-11-27-roce-window-2host-round.md, "RoCE's window, and the 2-host round's last microseconds"). A go-back-N receiver also
 * replays less after a loss. */
#define WINDOW_TIME_ROCE_S 0.001

const char *const ar_system_name[AR_NSYS] = {"inagg", "mpi", "mpi-ring", "gloo"};
const char *const ar_system_key[AR_NSYS] = {"inagg", "mpi", "mpi_ring", "gloo"};

uint32_t ar_roce_path_mtu(const ar_opts_t *o)
{
    if (o->roce_mtu)
        return (uint32_t)strtoul(o->roce_mtu, NULL, 10); /* checked by the parser */
    return roce_mtu_for_link(o->mtu ? o->mtu : 1500);
}

uint32_t ar_packet_header_bytes(const ar_opts_t *o)
{
    return o->no_dataplane_auth ? WIRE_HEADER_SIZE : WIRE_HEADER_MAX;
}

/* RoCE: the packet rounded down to whole frames of the path MTU. A message is not bound by
 * the link's MTU, but its last frame is a frame: 2048 int32 and a 64-byte header at a path
 * MTU of 4096 are two full frames and one of 64 bytes, which costs the fabric and the hosts
 * a third of their per-frame work for 1% of the data. */
static void fill_roce_frames(ar_opts_t *o)
{
    uint32_t mtu = ar_roce_path_mtu(o), hdr = ar_packet_header_bytes(o);
    uint32_t frames = (hdr + 4 * o->packet_elems) / mtu;
    if (frames >= 1 && frames * mtu > hdr + 4)
        o->packet_elems = (frames * mtu - hdr) / 4;
}

static int is_roce(const ar_opts_t *o) { return o->transport && strcmp(o->transport, "roce") == 0; }

/* What a packet is on the wire, for the note: "8256 B datagrams: one frame each", or for
 * RoCE "8192 B messages: 2 frames of a 4096 B path MTU". */
static void packet_text(const ar_opts_t *o, uint32_t mtu, char *buf, size_t len)
{
    uint32_t bytes = o->packet_elems * 4 + ar_packet_header_bytes(o);
    if (is_roce(o)) {
        uint32_t pmtu = ar_roce_path_mtu(o);
        snprintf(buf, len, "%u B messages: %u frames of a %u B path MTU", bytes,
                 roce_frames_for(bytes, pmtu), pmtu);
    } else {
        snprintf(buf, len, "%u B datagrams%s", bytes,
                 bytes + IP_UDP_BYTES <= mtu ? ": one frame each" : ", fragmented");
    }
}

void ar_link_defaults(ar_opts_t *o, uint32_t mtu, uint64_t link_bps, char *note, size_t len)
{
    if (!o->mtu)
        o->mtu = mtu;
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
        if (is_roce(o))
            fill_roce_frames(o);
    }
    if (!o->given.window) {
        /* about the bandwidth-delay product: more only queues the worker's own packets
         * behind the link, which the retransmission timer then mistakes for loss */
        double pkt = (double)o->packet_elems * 4 + HEADER_BYTES;
        double t = is_roce(o) ? WINDOW_TIME_ROCE_S : WINDOW_TIME_S;
        double w = link_bps ? ceil((double)link_bps / 8 * t / pkt) : 16;
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
    char what[96];
    packet_text(o, mtu, what, sizeof(what));
    snprintf(note, len,
             "packet %u elements (%s), window %u (%s), retransmission floor %.0f ms, switch "
             "threads %u",
             o->packet_elems, what, o->window,
             o->given.window ? "as given"
             : !link_bps     ? "no rate limit"
             : is_roce(o)    ? "about 1 ms of the link: RoCE's frames queue one by one"
                             : "about 3 ms of the link",
             o->rto_min_us / 1000.0, o->switch_threads);
}
