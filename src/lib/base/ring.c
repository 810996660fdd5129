/*
 * ring.c - the record ring over ring_pos_t (see ring.h). Each record is a 16-byte header
 * (its size in the ring, header and padding included, and its length) and its bytes. A gap
 * at the buffer's end is marked by a header of size 0 where one fits; where even a header
 * does not fit, the consumer knows the gap from the space left.
 */
#include "lib/base/ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct ring_hdr {
    uint32_t size; /* bytes of the record in the ring; 0: a gap to the buffer's end */
    uint32_t len; /* the caller's bytes */
    uint64_t pad_;
} ring_hdr_t;
_Static_assert(sizeof(ring_hdr_t) == RING_ALIGN, "the header keeps records aligned");

static size_t rec_size(uint32_t len)
{
    return (sizeof(ring_hdr_t) + (size_t)len + RING_ALIGN - 1) & ~(size_t)(RING_ALIGN - 1);
}

int ring_init(ring_t *r, size_t bytes)
{
    memset(r, 0, sizeof(*r));
    r->pos.cap = (bytes + RING_ALIGN - 1) & ~(size_t)(RING_ALIGN - 1);
    r->buf = aligned_alloc(RING_ALIGN, r->pos.cap);
    return r->buf ? 0 : -ENOMEM;
}

void ring_free(ring_t *r) { INAGG_FREE_CLEAR(r->buf); }

void *ring_reserve(ring_t *r, uint32_t len)
{
    size_t need = rec_size(len);
    uint64_t h = ring_pos_head(&r->pos), cap = r->pos.cap;
    size_t off = (size_t)(h % cap), to_end = (size_t)(cap - off);
    size_t skip = to_end < need ? to_end : 0;
    if (need > cap || skip + need > ring_pos_room(&r->pos))
        return NULL;
    if (skip) {
        if (skip >= sizeof(ring_hdr_t))
            ((ring_hdr_t *)(void *)(r->buf + off))->size = 0;
        off = 0;
    }
    ring_hdr_t *hd = (ring_hdr_t *)(void *)(r->buf + off);
    hd->size = (uint32_t)need;
    hd->len = len;
    r->pending = skip + need;
    return hd + 1;
}

void ring_commit(ring_t *r)
{
    ring_pos_publish(&r->pos, r->pending);
    r->pending = 0;
}

/* The header at tail after stepping over a gap, or NULL when empty. */
static ring_hdr_t *oldest(ring_t *r)
{
    if (ring_pos_ready(&r->pos) == 0)
        return NULL;
    uint64_t t = ring_pos_tail(&r->pos), cap = r->pos.cap;
    size_t off = (size_t)(t % cap), to_end = (size_t)(cap - off);
    if (to_end < sizeof(ring_hdr_t) || ((ring_hdr_t *)(void *)(r->buf + off))->size == 0) {
        ring_pos_release(&r->pos, to_end);
        if (ring_pos_ready(&r->pos) == 0)
            return NULL;
        off = 0;
    }
    return (ring_hdr_t *)(void *)(r->buf + off);
}

void *ring_peek(ring_t *r, uint32_t *len)
{
    ring_hdr_t *hd = oldest(r);
    if (!hd)
        return NULL;
    if (len)
        *len = hd->len;
    return hd + 1;
}

void ring_pop(ring_t *r)
{
    ring_hdr_t *hd = oldest(r);
    if (hd)
        ring_pos_release(&r->pos, hd->size);
}
