/*
 * rxstage.h - the pipeline's receive stage and the fabric's first thread, its loop as DPDK's
 * l2fwd runs one: take bursts off every port (and the internal port's TAP, every TAP_LOOK_NS
 * while the loop spins: a read is a system call), apply each input link's loss and delay (the
 * delay stage's ingress lines), ask the classify stage (forward.h) for each frame's verdict
 * and carry it out: aggregation frames to the aggregation stage's queues (aggstage.h), frames
 * to send to the transmit stage (txstage.h: through the ring on its own thread, or its
 * txstage_send and txstage_pass here with --fabric-threads 1). With inline aggregation it
 * runs the aggregation stage's pass too. Sleeps in ppoll when idle (pace.h).
 */
#ifndef INAGG_FABRIC_RXSTAGE_H
#define INAGG_FABRIC_RXSTAGE_H

#include <stdatomic.h>
#include <stdint.h>

#include "switchd/fabric/aggstage.h"
#include "switchd/fabric/bytering.h"
#include "switchd/fabric/delaystage.h"
#include "switchd/fabric/forward.h"
#include "switchd/fabric/fport.h"
#include "switchd/fabric/txstage.h"

#define FABRIC_BURST 64 /* frames taken from one port per pass */
#define FABRIC_TAPBUF (65536 + 64)

enum rxstage_stat {
    RX_FRAMES, /* frames taken off the ports */
    RX_DELAYED, /* of those, queued in an ingress delay line */
    RX_TO_TX, /* frames handed to the transmit stage */
    RX_TX_FULL, /* frames dropped: the transmit ring was full */
    RX_PASSES, /* passes of the loop that did work; sleeps */
    RX_SLEEPS,
    RX_COUNT
};

typedef struct rxstage {
    fport_t *ports; /* the fabric's: the stage receives from them */
    uint32_t nports, cpu;
    /* where frames go (the wiring, set by fabric.c) */
    classify_t *classify;
    aggstage_t *agg;
    bytering_t *ring; /* to the transmit stage on its own thread, or NULL: ... */
    txstage_t *tx; /* ... the transmit stage runs on this thread */
    delaystage_t *delay; /* the ingress delay lines */
    fabric_link_t *link; /* results' eventfd, watched when this thread transmits */
    uint64_t idle_spin_ns; /* spin this long after work (pace.h) */
    _Atomic int *stop;
    /* the stage's own */
    uint8_t *tapbuf;
    int tap_ready; /* the TAP has (or may have) a frame: read it next pass */
    uint64_t tap_looked_ns; /* its last read when it had none */
    int pushed; /* records pushed to the ring this pass (kick the consumer) */
    _Atomic uint64_t loop_seq; /* the loop's heads, so a detach can wait out a pass */
    _Atomic uint64_t c[RX_COUNT];
} rxstage_t;

/* The stage's own memory (the wiring above set first); 0 or -ENOMEM. rxstage_free frees it. */
int rxstage_init(rxstage_t *r);
void rxstage_free(rxstage_t *r);

/* The stage's thread (arg: the rxstage_t), until *stop. */
void *rxstage_main(void *arg);

/* Heads of the loop so far: two more than a value read means a pass that began before the
 * read has ended. */
static inline uint64_t rxstage_loops(rxstage_t *r) { return atomic_load(&r->loop_seq); }

typedef struct rxstage_stats {
    uint64_t c[RX_COUNT];
} rxstage_stats_t;

void rxstage_stats(const rxstage_t *r, rxstage_stats_t *out);

#endif /* INAGG_FABRIC_RXSTAGE_H */
