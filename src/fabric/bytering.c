/*
 * bytering.c - the SPSC ring of frame records between two pipeline stages (bytering.h).
 * Positions are byte counts that only grow; a record never wraps: when the space left before
 * the ring's end is too small, the producer writes a skip marker (size 0) or, when even the
 * marker does not fit, the consumer knows to skip those bytes.
 */
#include "fabric/bytering.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define REC_ALIGN 16u

static size_t rec_size(uint32_t len)
{
    return (sizeof(ring_rec_t) + len + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
}

int bytering_init(bytering_t *r, size_t bytes)
{
    memset(r, 0, sizeof(*r));
    r->efd = -1;
    r->cap = (bytes + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
    r->buf = aligned_alloc(REC_ALIGN, r->cap);
    if (!r->buf)
        return -ENOMEM;
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (r->efd < 0) {
        int e = -errno;
        bytering_free(r);
        return e;
    }
    return 0;
}

void bytering_free(bytering_t *r)
{
    free(r->buf);
    r->buf = NULL;
    if (r->efd >= 0)
        close(r->efd);
    r->efd = -1;
}

int bytering_push(bytering_t *r, uint64_t ports, uint64_t t_ns, uint8_t kind,
                  const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len)
{
    size_t need = rec_size(len);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    size_t off = (size_t)(h % r->cap), to_end = r->cap - off;
    size_t skip = to_end < need ? to_end : 0;
    if (need > r->cap || (h - t) + skip + need > r->cap)
        return -ENOBUFS;
    if (skip) {
        if (skip >= sizeof(ring_rec_t))
            ((ring_rec_t *)(void *)(r->buf + off))->size = 0;
        h += skip;
        off = 0;
    }
    ring_rec_t *rec = (ring_rec_t *)(void *)(r->buf + off);
    rec->ports = ports;
    rec->t_ns = t_ns;
    rec->len = len;
    rec->size = (uint32_t)need;
    rec->kind = kind;
    rec->has_vh = vh != NULL;
    if (vh)
        rec->vh = *vh;
    memcpy(rec->data, frame, len);
    atomic_store_explicit(&r->head, h + need, memory_order_release);
    return 0;
}

void bytering_kick(bytering_t *r)
{
    uint64_t one = 1;
    ssize_t w = write(r->efd, &one, sizeof(one));
    (void)w; /* EAGAIN: the counter is already non-zero, the consumer will look */
}

/* The record at tail after stepping over the end-of-ring gap, or NULL when empty. */
const ring_rec_t *bytering_peek(bytering_t *r)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    if (t == h)
        return NULL;
    size_t off = (size_t)(t % r->cap), to_end = r->cap - off;
    if (to_end < sizeof(ring_rec_t) || ((ring_rec_t *)(void *)(r->buf + off))->size == 0) {
        t += to_end;
        atomic_store_explicit(&r->tail, t, memory_order_release);
        if (t == h)
            return NULL;
        off = 0;
    }
    return (const ring_rec_t *)(const void *)(r->buf + off);
}

void bytering_pop(bytering_t *r)
{
    const ring_rec_t *rec = bytering_peek(r);
    if (rec)
        atomic_fetch_add_explicit(&r->tail, rec->size, memory_order_release);
}

size_t bytering_used(bytering_t *r)
{
    return (size_t)(atomic_load_explicit(&r->head, memory_order_acquire) -
                    atomic_load_explicit(&r->tail, memory_order_relaxed));
}
