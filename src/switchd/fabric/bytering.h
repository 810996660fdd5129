/*
 * bytering.h - a single-producer single-consumer ring of variable-length frame records, the
 * queue between two stages of the fabric's pipeline that run on different threads (the
 * receive/classify stage hands the transmit stage the frames to send: a 64 KiB GSO frame
 * takes 64 KiB, a 60-byte ARP 128 bytes). A base/ring.h record ring of these records and an
 * eventfd that lets the consumer sleep. A record that does not fit is refused (the caller
 * counts it), never blocks.
 */
#ifndef INAGG_FABRIC_BYTERING_H
#define INAGG_FABRIC_BYTERING_H

#include <linux/virtio_net.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/ring.h"

typedef struct bytering_rec {
    uint64_t ports; /* the output ports: bit p for port p */
    uint64_t t_ns; /* when the frame entered the fabric (latency accounting) */
    uint32_t len; /* frame bytes */
    uint8_t kind; /* latency class (lathist.h LAT_*) or LAT_NONE */
    uint8_t has_vh;
    uint8_t pad_[2];
    struct virtio_net_hdr vh;
    uint8_t data[];
} bytering_rec_t;

typedef struct bytering {
    ring_t ring;
    int efd; /* eventfd: the producer published records */
    _Atomic int sleeping; /* the consumer is (about to be) asleep on efd */
} bytering_t;

/* bytes is rounded up to the ring's alignment. 0 or -errno. */
int bytering_init(bytering_t *r, size_t bytes);
void bytering_free(bytering_t *r);

/* Producer: copy a record in. 0, or -ENOBUFS when it does not fit now (or ever). */
int bytering_push(bytering_t *r, uint64_t ports, uint64_t t_ns, uint8_t kind,
                  const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len);
/* Producer: wake the consumer (after a batch of pushes); _if_sleeping: only when it said it
 * sleeps (the pushes are ordered before the look, pairing with bytering_sleep's store). */
void bytering_kick(bytering_t *r);
void bytering_kick_if_sleeping(bytering_t *r);

/* Consumer: the oldest record or NULL, and giving it back. */
const bytering_rec_t *bytering_peek(bytering_t *r);
void bytering_pop(bytering_t *r);
/* Consumer: about to sleep on efd (1, after clearing it; look at the ring once more before
 * sleeping) or awake (0). */
void bytering_sleep(bytering_t *r, int sleeping);
/* Consumer: bytes waiting (for the queue-depth counter). */
size_t bytering_used(bytering_t *r);

#endif /* INAGG_FABRIC_BYTERING_H */
