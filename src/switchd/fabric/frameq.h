/*
 * frameq.h - a single-producer single-consumer queue of whole Ethernet frames in fixed slots,
 * with an eventfd the producer writes so a consumer can sleep. Between the L2 fabric's
 * forwarding thread and the switch's dataplane threads (the aggregation port, port.h). Lock-free: the producer owns `head`, the consumer `tail`.
 */
#ifndef INAGG_FABRIC_FRAMEQ_H
#define INAGG_FABRIC_FRAMEQ_H

#include <stdatomic.h>
#include <stdint.h>

#include "lib/base/ring.h"
#include "lib/base/util.h"
#include "lib/netio/ethframe.h"

#define FRAMEQ_DATA ETHF_MAX_FRAME

typedef struct frameq_slot {
    uint32_t len;
    uint16_t port; /* the fabric port it came from / goes to */
    uint16_t pad_;
    uint64_t t_ns; /* when it entered the fabric (for per-kind latency) */
    const uint8_t *ext; /* NULL: the frame is in data; else the frame is there (a RoCE result
                           built in the switch's result buffer, port.c), and stays until the
                           consumer releases this slot */
    uint8_t data[FRAMEQ_DATA];
} frameq_slot_t;

/* The slot's frame (len bytes). */
static inline const uint8_t *frameq_slot_frame(const frameq_slot_t *s)
{
    return s->ext ? s->ext : s->data;
}

typedef struct frameq {
    ring_pos_t pos; /* in slots; pos.cap is a power of two */
    uint32_t cap; /* pos.cap */
    int efd; /* eventfd: the producer published something */
    frameq_slot_t *slots;
} frameq_t;

/* cap is rounded up to a power of two. 0 or -errno. */
int frameq_init(frameq_t *q, uint32_t cap);
void frameq_free(frameq_t *q);

/* Producer: the slot to fill next (its frame in data: ext NULL), or NULL when the queue is
 * full. */
static inline frameq_slot_t *frameq_reserve(frameq_t *q)
{
    if (ring_pos_room(&q->pos) == 0)
        return NULL;
    frameq_slot_t *s = &q->slots[ring_pos_head(&q->pos) & (q->cap - 1)];
    s->ext = NULL;
    return s;
}
static inline void frameq_publish(frameq_t *q) { ring_pos_publish(&q->pos, 1); }
/* Producer: the position of the slot frameq_reserve gives (slots ever published), and the
 * slots the consumer has released: a slot at position p is released once this exceeds p. */
static inline uint64_t frameq_position(frameq_t *q) { return ring_pos_head(&q->pos); }
static inline uint64_t frameq_released(frameq_t *q)
{
    return atomic_load_explicit(&q->pos.tail, memory_order_acquire);
}

/* Consumer: how many slots are ready, the i-th of them, and giving n back. */
static inline uint32_t frameq_ready(frameq_t *q) { return (uint32_t)ring_pos_ready(&q->pos); }
static inline frameq_slot_t *frameq_at(frameq_t *q, uint32_t i)
{
    return &q->slots[(ring_pos_tail(&q->pos) + i) & (q->cap - 1)];
}
static inline void frameq_release(frameq_t *q, uint32_t n) { ring_pos_release(&q->pos, n); }

/* Producer: wake a sleeping consumer. */
void frameq_kick(frameq_t *q);
/* Consumer: wait up to timeout_ms until something is ready. 1 ready, 0 timed out. */
int frameq_wait(frameq_t *q, int timeout_ms);

#endif /* INAGG_FABRIC_FRAMEQ_H */
