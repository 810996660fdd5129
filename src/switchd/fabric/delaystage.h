/*
 * delaystage.h - the pipeline's delay stage: the link emulation's delay lines (one each way
 * per delayed port, fport.h) and how late they release frames against their due time. The
 * receive stage drains the ingress lines into the classify stage, the transmit stage the
 * egress lines out of their ports, each on its own thread, through an iterator: the stage
 * that asks takes each due record and does its own work with it, so this stage calls none.
 */
#ifndef INAGG_FABRIC_DELAYSTAGE_H
#define INAGG_FABRIC_DELAYSTAGE_H

#include <stdint.h>

#include "switchd/fabric/fport.h"
#include "switchd/fabric/lathist.h"

typedef struct delaystage {
    fport_t *ports; /* the fabric's ports (those with a delay have lines) */
    uint32_t nports;
    lathist_t late; /* release time minus due time of every record released */
} delaystage_t;

/* A walk over one direction's lines of every delayed port: at most DELAY_BURST records a
 * port a pass, those due by `now`. */
#define DELAY_BURST 256
typedef struct delay_iter {
    delaystage_t *d;
    int egress;
    uint64_t now, next;
    uint32_t p;
    int k;
    const delay_rec_t *cur; /* given out by the last delaystage_next: popped by the next */
} delay_iter_t;

void delaystage_begin(delaystage_t *d, int egress, uint64_t now, delay_iter_t *it);
/* The next record due (the one before it is dropped from its line), its port in *port and
 * the time it was taken in *t; NULL at the end of the walk. */
const delay_rec_t *delaystage_next(delay_iter_t *it, uint32_t *port, uint64_t *t);
/* After the walk: the earliest release still pending (UINT64_MAX: none). */
static inline uint64_t delaystage_end(const delay_iter_t *it) { return it->next; }

typedef struct delaystage_stats {
    uint64_t late_n, late_p50_ns, late_p99_ns;
} delaystage_stats_t;

void delaystage_stats(const delaystage_t *d, delaystage_stats_t *out);

#endif /* INAGG_FABRIC_DELAYSTAGE_H */
