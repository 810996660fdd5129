/*
 * roce.h - the RoCE v1 transport (transport kind "roce"): every packet of the slot protocols
 * (header and payload, roce_frame.h's "message") travels as one RDMA Write message, a
 * sequence of Write frames of the path MTU (First, Middle..., Last; Only for a packet of at
 * most one MTU) on a Reliable Connected QP with its own 24-bit PSN sequence. The worker's MTU
 * is the largest of InfiniBand's five (256..4096 bytes) that its interface carries, or
 * INAGG_ROCE_MTU; the switch answers each flow in the MTU of its contributions. The packet's inagg
 * header (36 bytes, PROTOCOL.md) is the aggregation header at the start of the First frame's
 * payload; RETH carries the message length and, as its key, the switch queue it is for.
 *
 * A connection is named by one QP number that both ends use: a worker endpoint picks a base
 * QP and talks to switch queue q on QP base + q, with one PSN sequence per queue; the switch
 * answers on the same QP number with its own PSN sequence, which starts where the worker's
 * did. The L2 fabric (src/switchd/fabric/roce_agg.c) steers a flow (ingress port, QP) to its queue.
 *
 * The worker's endpoint (roce_worker.c) is opened with transport_config_t.roce: `peer` is
 * the switch's queue 0 (an "IP:PORT" address; the control connection has already put the
 * switch's MAC in the kernel's neighbour table, which gives the MAC and the interface); it
 * opens its own packet socket on that interface. The switch's end is the L2 fabric's
 * aggregation port (fabric/port.h), which uses the helpers below to frame and take messages.
 * Receivers check every frame (ICRC, lengths, PSN order: netio/roce_flow.h) and count and
 * drop a bad one; a message completes only when all of its frames arrived in order.
 */
#ifndef INAGG_TRANSPORT_ROCE_H
#define INAGG_TRANSPORT_ROCE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/netio/roce_flow.h"
#include "lib/netio/roce_frame.h"
#include "lib/netio/roce_msgkey.h"
#include "lib/transport/transport.h"

#define ROCE_ADDR_KIND 3u
#define ROCE_MAX_QUEUES 16u

/* What the transport counts: frames and messages each way, and every reason a frame is
 * dropped (the first block mirrors enum roce_reason, the second enum roce_rx_verdict). */
enum roce_stat {
    RS_FRAMES_IN,
    RS_FRAMES_OUT,
    RS_MESSAGES_IN,
    RS_MESSAGES_OUT,
    RS_TRUNCATED,
    RS_BAD_GRH,
    RS_BAD_LENGTH,
    RS_BAD_BTH,
    RS_NOT_WRITE,
    RS_BAD_PAYLOAD,
    RS_BAD_ICRC,
    RS_PSN_DUPLICATE,
    RS_PSN_GAP,
    RS_PSN_WINDOW,
    RS_NO_FIRST,
    RS_TOO_BIG,
    RS_LENGTH,
    RS_ABANDONED, /* messages started and never completed (a frame of them lost) */
    RS_FLOW_TABLE_FULL, /* frames of a new flow when the endpoint's flow table was full */
    RS_TX_DROPPED, /* messages not (entirely) sent: the device or queue was full */
    /* retransmissions at their old PSNs (go-back-N, roce_resbuf.h) */
    RS_REPEATS, /* first frames of delivered messages seen again at their PSNs */
    RS_RESBUF_ANSWERED, /* of those, answered from the result buffer */
    RS_RESBUF_EVICTED, /* ... whose result had been overwritten in it (dropped) */
    RS_REPEAT_OPEN, /* ... whose result was not sent yet, the round open (dropped) */
    RS_RESENT_TAKEN, /* messages lost on their way, taken when resent at their PSNs */
    RS_REPLAYED, /* worker: retransmissions sent at their first sending's PSNs */
    RS_FLOWS_RECYCLED, /* new flows that took the entry of the flow heard from least recently
                           (the table was full: flows of ended jobs are never told to go) */
    RS_COUNT
};

typedef struct roce_stats {
    _Atomic uint64_t c[RS_COUNT];
} roce_stats_t;

static inline void roce_stat(roce_stats_t *s, int i)
{
    atomic_fetch_add_explicit(&s->c[i], 1, memory_order_relaxed);
}

const char *roce_stat_name(int i);
/* "roce: frames_in=.. ..." (non-zero drop counters only after the first four). */
void roce_stats_write_text(const roce_stats_t *s, const char *prefix, FILE *out);

/* The contents of a ROCE_ADDR_KIND address. */
typedef struct roce_addr {
    uint8_t mac[6];
    uint16_t ifport; /* the fabric port to send by (the fabric's aggregation port) */
    uint32_t ip; /* network order: the peer's IP where known (for printing) */
    uint32_t qp; /* the connection's QP number */
    uint16_t port; /* the UDP port this queue stands for (printing, port get/set) */
    uint16_t queue; /* the switch queue */
} roce_addr_t;

/* The interface and MAC the kernel's neighbour table holds for IPv4 address ip (network
 * order): 0, or -EHOSTUNREACH when there is no complete entry. */
int roce_neighbour(uint32_t ip, char ifname[16], uint8_t mac[6]);

/* ---- what both ends (this transport's worker endpoint, the fabric's port) share -------- */

/* The address of a RoCE peer (roce_addr_t in a transport_addr_t). */
void roce_make_addr(transport_addr_t *a, const uint8_t *mac, uint16_t ifport, uint32_t ip,
                    uint32_t qp, uint16_t port, uint16_t queue);
/* Frame i of packet p (len bytes in nf frames at path MTU mtu: roce_frames_for) into buf,
 * from src to dst on qp at psn, for switch queue `queue` (the RETH's R_Key); its length. */
uint32_t roce_build_frame(uint8_t *buf, const transport_tx_t *p, uint32_t len, uint32_t mtu,
                          uint32_t nf, uint32_t i, const uint8_t *src, const uint8_t *dst,
                          uint32_t qp, uint32_t psn, uint32_t queue);
/* The key of packet p of len bytes (its header may span head and body). 0 or -EINVAL. */
int roce_tx_key(const transport_tx_t *p, uint32_t len, roce_msg_key_t *k);
/* One received RoCE frame on flow fl: counted in st, its verdict in *vout; 1 when it
 * completed a message, which is then in *spare (its length in *len): the flow's buffer and
 * *spare (a buffer of the flow's capacity) trade places, the flow assembling its next
 * message in the one it was given, so that a message is never copied out. */
int roce_take_frame(roce_stats_t *st, roce_rx_flow_t *fl, const roce_frame_t *f, uint8_t **spare,
                    uint32_t *len, enum roce_rx_verdict *vout);
/* Count in st a frame that failed roce_parse for reason r. */
void roce_count_reason(roce_stats_t *st, enum roce_reason r);
/* The IP and port of an "IP:PORT" address of any kind this transport meets. 0 or -EINVAL. */
int roce_ip_port_of(const transport_addr_t *a, uint32_t *ip, uint16_t *port);

#endif /* INAGG_TRANSPORT_ROCE_H */
