/*
 * delayline.c - a per-port FIFO of delayed frames (see delayline.h).
 */
#include "fabric/delayline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define REC_ALIGN 16u

static size_t rec_size(uint32_t len)
{
    return (sizeof(delay_rec_t) + len + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
}

int delayline_init(delayline_t *d, size_t bytes, uint64_t delay_ns, uint64_t jitter_ns,
                   uint64_t seed)
{
    memset(d, 0, sizeof(*d));
    d->cap = (bytes + REC_ALIGN - 1) & ~(size_t)(REC_ALIGN - 1);
    d->buf = aligned_alloc(REC_ALIGN, d->cap);
    d->delay_ns = delay_ns;
    d->jitter_ns = jitter_ns;
    d->rng = seed | 1;
    return d->buf ? 0 : -ENOMEM;
}

void delayline_free(delayline_t *d)
{
    free(d->buf);
    d->buf = NULL;
}

static uint64_t next_rand(delayline_t *d)
{
    d->rng ^= d->rng << 13;
    d->rng ^= d->rng >> 7;
    d->rng ^= d->rng << 17;
    return d->rng;
}

int delayline_push(delayline_t *d, uint64_t now_ns, uint64_t t_ns, uint16_t port, uint8_t kind,
                   const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len)
{
    size_t need = rec_size(len);
    if (d->used == 0)
        d->head = d->tail = 0;
    int fits;
    size_t skip = 0;
    if (d->used > 0 && d->head == d->tail) {
        fits = 0; /* full */
    } else if (d->head >= d->tail) {
        /* free: [head, cap) then [0, tail) */
        if (d->cap - d->head >= need) {
            fits = 1;
        } else {
            fits = d->tail >= need;
            skip = d->cap - d->head;
        }
    } else {
        fits = d->tail - d->head >= need;
    }
    if (!fits) {
        d->overflow++;
        return -ENOBUFS;
    }
    if (skip) {
        if (skip >= sizeof(delay_rec_t))
            ((delay_rec_t *)(void *)(d->buf + d->head))->size = 0;
        d->used += skip;
        d->head = 0;
    }
    delay_rec_t *r = (delay_rec_t *)(void *)(d->buf + d->head);
    uint64_t rel = now_ns + d->delay_ns;
    if (d->jitter_ns)
        rel += next_rand(d) % (d->jitter_ns + 1);
    if (rel < d->last_release_ns)
        rel = d->last_release_ns;
    d->last_release_ns = rel;
    r->release_ns = rel;
    r->t_ns = t_ns;
    r->len = len;
    r->size = (uint32_t)need;
    r->port = port;
    r->kind = kind;
    if (vh)
        r->vh = *vh;
    else
        memset(&r->vh, 0, sizeof(r->vh));
    memcpy(r->data, frame, len);
    d->head += need;
    if (d->head == d->cap)
        d->head = 0;
    d->used += need;
    return 0;
}

/* The record at tail, stepping over a wrap marker. */
static delay_rec_t *oldest(delayline_t *d)
{
    if (d->used == 0)
        return NULL;
    if (d->cap - d->tail < sizeof(delay_rec_t) ||
        ((delay_rec_t *)(void *)(d->buf + d->tail))->size == 0) {
        d->used -= d->cap - d->tail;
        d->tail = 0;
        if (d->used == 0)
            return NULL;
    }
    return (delay_rec_t *)(void *)(d->buf + d->tail);
}

const delay_rec_t *delayline_due(delayline_t *d, uint64_t now_ns)
{
    delay_rec_t *r = oldest(d);
    return r && r->release_ns <= now_ns ? r : NULL;
}

void delayline_pop(delayline_t *d)
{
    delay_rec_t *r = oldest(d);
    if (!r)
        return;
    d->tail += r->size;
    d->used -= r->size;
    if (d->tail == d->cap)
        d->tail = 0;
    if (d->used == 0)
        d->head = d->tail = 0;
}

uint64_t delayline_next(delayline_t *d)
{
    const delay_rec_t *r = oldest(d);
    return r ? r->release_ns : UINT64_MAX;
}
