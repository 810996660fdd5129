/*
 * ring.h - the one single-producer single-consumer ring: two position counters that only grow
 * (the producer owns head, the consumer tail; acquire/release order makes what was written
 * before a publish visible to the consumer that sees it), and over them a ring of
 * variable-length records in one buffer.
 *
 *  - ring_pos_t alone counts in units of the caller's choosing: the fabric's frame queues
 *    (fabric/frameq.h) count fixed slots of a power-of-two array.
 *  - ring_t counts bytes and holds records: a record is contiguous (never wraps; when the
 *    space before the buffer's end is too small, the producer leaves it as a gap that the
 *    consumer steps over), starts 16-byte aligned, and is reserved, filled and committed by
 *    the producer, then peeked and popped in order by the consumer. The fabric's stage-to-
 *    stage queue (fabric/bytering.h) and its delay lines (fabric/delayline.h) are rings.
 * A record that does not fit is refused, never waited for: callers count it.
 */
#ifndef INAGG_BASE_RING_H
#define INAGG_BASE_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/base/util.h"

typedef struct ring_pos {
    _Atomic uint64_t head INAGG_ALIGNED; /* units ever published (producer) */
    _Atomic uint64_t tail INAGG_ALIGNED; /* units ever released (consumer) */
    uint64_t cap INAGG_ALIGNED; /* units the ring holds */
} ring_pos_t;

/* Producer: the units free now, and making n more visible. */
static inline uint64_t ring_pos_room(ring_pos_t *p)
{
    return p->cap - (atomic_load_explicit(&p->head, memory_order_relaxed) -
                     atomic_load_explicit(&p->tail, memory_order_acquire));
}
static inline uint64_t ring_pos_head(ring_pos_t *p)
{
    return atomic_load_explicit(&p->head, memory_order_relaxed);
}
static inline void ring_pos_publish(ring_pos_t *p, uint64_t n)
{
    atomic_store_explicit(&p->head, atomic_load_explicit(&p->head, memory_order_relaxed) + n,
                          memory_order_release);
}

/* Consumer: the units ready now, where they start, and giving n back. */
static inline uint64_t ring_pos_ready(ring_pos_t *p)
{
    return atomic_load_explicit(&p->head, memory_order_acquire) -
           atomic_load_explicit(&p->tail, memory_order_relaxed);
}
static inline uint64_t ring_pos_tail(ring_pos_t *p)
{
    return atomic_load_explicit(&p->tail, memory_order_relaxed);
}
static inline void ring_pos_release(ring_pos_t *p, uint64_t n)
{
    atomic_store_explicit(&p->tail, atomic_load_explicit(&p->tail, memory_order_relaxed) + n,
                          memory_order_release);
}

#define RING_ALIGN 16u

typedef struct ring {
    ring_pos_t pos; /* in bytes */
    uint8_t *buf;
    uint64_t pending; /* producer: bytes of the reserved record, committed next (gap included) */
} ring_t;

/* bytes is rounded up to RING_ALIGN. 0 or -ENOMEM. */
int ring_init(ring_t *r, size_t bytes);
void ring_free(ring_t *r);

/* Producer: room for a record of len bytes, RING_ALIGN-aligned, or NULL when it does not fit
 * now (or ever); ring_commit makes it visible. */
void *ring_reserve(ring_t *r, uint32_t len);
void ring_commit(ring_t *r);

/* Consumer: the oldest record (its length in *len when len is not NULL) or NULL, and
 * dropping it. */
void *ring_peek(ring_t *r, uint32_t *len);
void ring_pop(ring_t *r);

/* Bytes in use, records and gaps (for queue-depth counters). */
static inline size_t ring_used(ring_t *r) { return (size_t)ring_pos_ready(&r->pos); }

#endif /* INAGG_BASE_RING_H */
