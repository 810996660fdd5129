/*
 * roce_int.h - the worker's RoCE endpoint, shared by roce.c (the ops table, opening) and
 * roce_worker.c (its packet socket, sending and receiving). Only those two files include
 * this.
 */
#ifndef INAGG_TRANSPORT_ROCE_INT_H
#define INAGG_TRANSPORT_ROCE_INT_H

#include <stdatomic.h>
#include <string.h>

#include "lib/netio/pktsock.h"
#include "lib/netio/roce_flow.h"
#include "lib/netio/roce_frame.h"
#include "lib/transport/roce.h"
#include "lib/transport/roce_replay.h"
#include "lib/transport/transport.h"

#define ROCE_DEFAULT_MAX 65536u
#define ROCE_TX_BATCH 64u /* worker frames per sendmmsg */
#define ROCE_TX_SLOT 4224u /* room for one frame (ROCE_MAX_FRAME, to 64 bytes) */
_Static_assert(ROCE_TX_SLOT >= ROCE_MAX_FRAME, "a frame fits a worker tx slot");
#define ROCE_SPIN_NS 50000ull /* wait this long for the next frame of a message */

typedef struct roce_endpoint {
    transport_t base;
    roce_stats_t stats; /* this endpoint's counters (transport_counters) */
    roce_stats_t *st; /* &stats */
    pktsock_t ps;
    uint8_t mac[6];
    uint32_t ip; /* the switch's (the peer's) */
    uint16_t port; /* the switch's queue 0 port */
    uint8_t peer_mac[6];
    int partial; /* the last frame taken left a message unfinished */
    uint32_t mtu; /* the path MTU its messages go out in (roce_frame.h) */
    uint32_t qp_base; /* QP of switch queue q is qp_base + q */
    uint32_t tx_psn[ROCE_MAX_QUEUES]; /* next PSN per queue */
    roce_rx_flow_t wrx[ROCE_MAX_QUEUES]; /* the switch's flow on each QP */
    uint32_t cap; /* largest message */
    uint32_t batch;
    uint8_t *arena; /* batch spare buffers, cap bytes each */
    uint8_t *bufs; /* reassembly buffers: ROCE_MAX_QUEUES */
    uint8_t **spare; /* batch buffers: spare[k] holds the k-th message a receive completed
                        (flows and spares trade buffers: roce_take_frame) */
    roce_replay_t *replay; /* per queue, the PSNs contributions went out with */
    int replay_on; /* first retransmissions reuse their PSNs */
    uint8_t *txq; /* frames waiting for one sendmmsg */
    uint32_t txlen[ROCE_TX_BATCH];
    uint32_t txn;
} roce_endpoint_t;

static inline void stat(roce_endpoint_t *e, int i) { roce_stat(e->st, i); }

static inline roce_addr_t *ra(transport_addr_t *a) { return (roce_addr_t *)(void *)a->u.bytes; }
static inline const roce_addr_t *cra(const transport_addr_t *a)
{
    return (const roce_addr_t *)(const void *)a->u.bytes;
}

/* roce_worker.c: the worker endpoint's opening (its packet socket, QPs, first PSNs), sending
 * (frames batched for one sendmmsg, flushed by roce_worker_flush) and receiving. */
int roce_worker_open(roce_endpoint_t *e, const transport_config_t *cfg, char *err, size_t errlen);
int roce_worker_send(roce_endpoint_t *e, const transport_tx_t *p);
int roce_worker_flush(roce_endpoint_t *e);
int roce_worker_recv(roce_endpoint_t *e, transport_rx_t *out, int max, int timeout_ms);

#endif /* INAGG_TRANSPORT_ROCE_INT_H */
