/*
 * pkt_wait.h - what a transport's receive loop over a packet socket (afpacket.c,
 * roce_worker.c) does when the ring is empty: return the frames it has, or wait once for one.
 */
#ifndef INAGG_TRANSPORT_PKT_WAIT_H
#define INAGG_TRANSPORT_PKT_WAIT_H

#include "lib/netio/pktsock.h"

/* The ring of s is empty after `got` frames of one receive. 0: stop (frames are taken, or no
 * time is left); 1: look again, after one wait of up to *timeout_ms for a frame (which sets
 * *timeout_ms to 0: pktsock_wait_once); or the wait's negative errno. */
static inline int transport_pkt_wait(pktsock_t *s, int got, int *timeout_ms)
{
    if (got > 0 || *timeout_ms <= 0)
        return 0;
    int rc = pktsock_wait_once(s, timeout_ms);
    return rc < 0 ? rc : 1;
}

#endif /* INAGG_TRANSPORT_PKT_WAIT_H */
