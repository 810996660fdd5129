/*
 * delayline.h - link emulation: a FIFO of frame copies, each released at its arrival time
 * plus the link's one-way delay and an optional uniform jitter (never earlier than the frame
 * before it: a link does not reorder). A base/ring.h record ring (one thread is both its
 * producer and consumer); a frame that does not fit is dropped and counted, as a full link
 * queue would.
 */
#ifndef INAGG_FABRIC_DELAYLINE_H
#define INAGG_FABRIC_DELAYLINE_H

#include <linux/virtio_net.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/ring.h"
#include "lib/base/util.h"

typedef struct delay_rec {
    uint64_t release_ns;
    uint64_t t_ns; /* when the frame entered the fabric (latency accounting) */
    uint32_t len; /* frame bytes */
    uint16_t port; /* where it goes (egress) or came from (ingress) */
    uint8_t kind; /* the caller's classification */
    uint8_t pad_[5];
    struct virtio_net_hdr vh;
    uint8_t data[];
} delay_rec_t;

typedef struct delayline {
    ring_t ring;
    uint64_t delay_ns, jitter_ns, last_release_ns;
    util_rng_t rng; /* the jitter */
    uint64_t overflow; /* frames dropped: the line was full */
} delayline_t;

int delayline_init(delayline_t *d, size_t bytes, uint64_t delay_ns, uint64_t jitter_ns,
                   uint64_t seed);
void delayline_free(delayline_t *d);

/* Queue a copy of the frame that arrived at now_ns. 0, or -ENOBUFS (counted). */
int delayline_push(delayline_t *d, uint64_t now_ns, uint64_t t_ns, uint16_t port, uint8_t kind,
                   const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len);
/* The oldest record if its release time has come by now_ns, else NULL. */
const delay_rec_t *delayline_due(delayline_t *d, uint64_t now_ns);
/* Drop the record delayline_due returned. */
void delayline_pop(delayline_t *d);
/* Release time of the oldest record, or UINT64_MAX when empty. */
uint64_t delayline_next(delayline_t *d);

#endif /* INAGG_FABRIC_DELAYLINE_H */
