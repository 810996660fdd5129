/*
 * roce_int.h - what the two halves of the RoCE transport share: roce.c (the switch's linked
 * endpoint, the ops table, opening) and roce_worker.c (the worker's packet-socket endpoint).
 * Only those two files include this.
 */
#ifndef INAGG_TRANSPORT_ROCE_INT_H
#define INAGG_TRANSPORT_ROCE_INT_H

#include <stdatomic.h>
#include <string.h>

#include "transport/afpacket.h"
#include "transport/pktsock.h"
#include "transport/roce.h"
#include "transport/roce_flow.h"
#include "transport/roce_frame.h"
#include "transport/roce_resbuf.h"
#include "transport/transport.h"

#define ROCE_FLOWS 256u       /* flows one switch endpoint tracks (a power of two) */
#define ROCE_DEFAULT_MAX 65536u
#define ROCE_TX_BATCH 64u     /* worker frames per sendmmsg */
#define ROCE_TX_SLOT 1280u    /* room for one frame */
_Static_assert(ROCE_TX_SLOT >= ROCE_MAX_FRAME, "a frame fits a worker tx slot");
#define ROCE_SPIN_NS 50000ull /* wait this long for the next frame of a message */
#define ROCE_ANSWERED 256u

typedef struct flow_ent {
    uint8_t used, tx_set;
    uint8_t mac[6];
    uint16_t port;
    uint32_t qp;
    uint32_t tx_psn; /* the PSN of our next frame to this flow */
    uint32_t ordinal; /* flows in the order they were seen: the result buffer's row */
    uint64_t last_rx; /* the endpoint's frame count when this flow last sent one */
    roce_rx_flow_t rx;
    roce_msg_key_t done_key[ROCE_RX_DONE_SLOTS]; /* the key of each message rx remembers */
    roce_msg_key_t answered[ROCE_ANSWERED];      /* results sent (by key hash): a repeat whose
                                                    result is not in the buffer was evicted */
} flow_ent_t;

typedef struct roce_endpoint {
    transport_t base;
    afp_link_t *link; /* linked (switch), else NULL (worker) */
    roce_stats_t *st;
    uint32_t queue;
    uint32_t held;
    uint64_t last_rx_ns;
    pktsock_t ps;     /* worker */
    uint8_t mac[6];
    uint32_t ip;      /* linked: the switch's IP; worker: the switch's (the peer's) */
    uint16_t port;    /* linked: UDP port of this queue; worker: the switch's queue 0 port */
    uint8_t peer_mac[6];
    int partial;      /* worker: the last frame taken left a message unfinished */
    uint32_t qp_base; /* worker: QP of switch queue q is qp_base + q */
    uint32_t tx_psn[ROCE_MAX_QUEUES];  /* worker: next PSN per queue */
    roce_rx_flow_t wrx[ROCE_MAX_QUEUES]; /* worker: the switch's flow on each QP */
    flow_ent_t *flows; /* linked: ROCE_FLOWS entries */
    uint32_t nflows;
    uint64_t rx_frames; /* linked: RoCE frames taken, the clock of the flows' last_rx */
    uint32_t cap;      /* largest message */
    uint32_t batch;
    uint8_t *arena;    /* batch completed messages, cap bytes each */
    uint8_t *bufs;     /* reassembly buffers: ROCE_MAX_QUEUES (worker) or ROCE_FLOWS (linked) */
    roce_resbuf_t resbuf; /* linked: the results sent, to answer repeats from */
    roce_replay_t *replay; /* worker: per queue, the PSNs contributions went out with */
    int replay_on;     /* worker: first retransmissions reuse their PSNs */
    uint8_t *txq;      /* worker: frames waiting for one sendmmsg */
    uint32_t txlen[ROCE_TX_BATCH];
    uint32_t txn;
} roce_endpoint_t;

static inline void stat(roce_endpoint_t *e, int i)
{
    atomic_fetch_add_explicit(&e->st->c[i], 1, memory_order_relaxed);
}

static inline roce_addr_t *ra(transport_addr_t *a) { return (roce_addr_t *)(void *)a->u.bytes; }
static inline const roce_addr_t *cra(const transport_addr_t *a)
{
    return (const roce_addr_t *)(const void *)a->u.bytes;
}

/* The address of a RoCE peer (roce_addr_t in a transport_addr_t). */
void roce_make_addr(transport_addr_t *a, const uint8_t *mac, uint16_t ifport, uint32_t ip,
                    uint32_t qp, uint16_t port, uint16_t queue);
/* Frame i of packet p (len bytes in nf frames) into buf, from src to dst on qp at psn, for
 * switch queue `queue` (the RETH's R_Key); its length. */
uint32_t roce_build_frame(uint8_t *buf, const transport_tx_t *p, uint32_t len, uint32_t nf,
                          uint32_t i, const uint8_t *src, const uint8_t *dst, uint32_t qp,
                          uint32_t psn, uint32_t queue);
/* The frames of a message of len bytes. */
uint32_t roce_frames_of(uint32_t len);
/* The key of packet p of len bytes (its header may span head and body). 0 or -1. */
int roce_tx_key(const transport_tx_t *p, uint32_t len, roce_msg_key_t *k);
/* One received RoCE frame on flow fl: counted, its verdict in *vout; 1 when it completed a
 * message, which is then copied to arena slot `slot` (its length in *len). */
int roce_take_frame(roce_endpoint_t *e, roce_rx_flow_t *fl, const roce_frame_t *f,
                    uint32_t slot, uint32_t *len, enum roce_rx_verdict *vout);
/* Count a frame that failed roce_parse for reason r. */
void roce_count_reason(roce_endpoint_t *e, enum roce_reason r);
/* The IP and port of an "IP:PORT" address of any kind this transport meets. 0 or -EINVAL. */
int roce_ip_port_of(const transport_addr_t *a, uint32_t *ip, uint16_t *port);

/* roce_worker.c: the worker endpoint's opening (its packet socket, QPs, first PSNs), sending
 * (frames batched for one sendmmsg, flushed by roce_worker_flush) and receiving. */
int roce_worker_open(roce_endpoint_t *e, const transport_config_t *cfg, char *err,
                     size_t errlen);
int roce_worker_send(roce_endpoint_t *e, const transport_tx_t *p);
int roce_worker_flush(roce_endpoint_t *e);
int roce_worker_recv(roce_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms);

#endif /* INAGG_TRANSPORT_ROCE_INT_H */
