/*
 * txstage.h - the pipeline's transmit stage: sends the frames the classify stage decided to
 * send (through the SPSC ring `ring` when the stage runs on its own thread, --fabric-threads
 * 2; else handed to txstage_send by the receive loop) and the results the aggregation stage
 * queued (the dataplane threads' frame queues, link->tx[q]), applying each output link's loss
 * and delay (the delay stage's egress lines), and measures the fabric's latency per frame
 * kind. It calls no other stage: frames reach it through the ring, the queues, or
 * txstage_send.
 */
#ifndef INAGG_FABRIC_TXSTAGE_H
#define INAGG_FABRIC_TXSTAGE_H

#include <stdatomic.h>
#include <stdint.h>

#include "switchd/fabric/bytering.h"
#include "switchd/fabric/delaystage.h"
#include "switchd/fabric/fport.h"
#include "switchd/fabric/lathist.h"
#include "switchd/fabric/port.h"
#include "switchd/fabric/resultclass.h"
#include "switchd/fabric/resultgso.h"

struct virtio_net_hdr;

enum txstage_stat {
    TX_FRAMES, /* frames taken from the classify stage */
    TX_RESULTS, /* result frames taken from the aggregation stage */
    TX_BAD_PORT, /* result frames naming a port that does not exist, dropped */
    TX_QUEUE_MAX, /* deepest the ring was (bytes) */
    TX_PASSES, /* passes of its own thread's loop that did work; sleeps */
    TX_SLEEPS,
    TX_COUNT
};

typedef struct txstage {
    fport_t *ports; /* the fabric's: the stage sends out of them */
    uint32_t nports, cpu;
    fabric_link_t *link; /* results: link->tx[q], with link->tx_efd to sleep on */
    bytering_t *ring; /* frames from the classify stage: on its own thread, else NULL */
    delaystage_t *delay; /* the egress delay lines */
    uint64_t idle_spin_ns; /* its own thread: spin this long after work (pace.h) */
    _Atomic int *stop; /* its own thread: ends when set */
    resend_ent_t *resend; /* (job, slot, rank) -> last result round sent */
    result_gso_t gso;
    lathist_t lat[LAT_DELAY_LATE]; /* LAT_FORWARD .. LAT_RESEND */
    _Atomic uint64_t c[TX_COUNT];
} txstage_t;

/* The stage's own memory (the fields above set first); 0 or -ENOMEM. txstage_free frees it. */
int txstage_init(txstage_t *t);
void txstage_free(txstage_t *t);

/* A frame for the ports in the mask, from the classify stage on the same thread (when the
 * stage has no ring); lat: its latency class or LAT_NONE. */
void txstage_send(txstage_t *t, uint64_t ports, const struct virtio_net_hdr *vh,
                  const uint8_t *frame, uint32_t len, uint64_t t_ns, uint8_t lat);

/* Whether results are waiting in the aggregation stage's queues. */
int txstage_results_waiting(txstage_t *t);

/* One pass (ring, results, egress delay lines): adds what it did to *work, returns the
 * earliest pending egress release (UINT64_MAX: none). */
uint64_t txstage_pass(txstage_t *t, int *work);

/* The stage's own thread (arg: the txstage_t), until *stop. */
void *txstage_main(void *arg);

typedef struct txstage_stats {
    uint64_t c[TX_COUNT];
    uint64_t lat_n[LAT_DELAY_LATE], lat_p50_ns[LAT_DELAY_LATE], lat_p99_ns[LAT_DELAY_LATE];
} txstage_stats_t;

void txstage_stats(const txstage_t *t, txstage_stats_t *out);

#endif /* INAGG_FABRIC_TXSTAGE_H */
