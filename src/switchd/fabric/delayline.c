/*
 * delayline.c - a per-port FIFO of delayed frames (see delayline.h).
 */
#include "switchd/fabric/delayline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int delayline_init(delayline_t *d, size_t bytes, uint64_t delay_ns, uint64_t jitter_ns,
                   uint64_t seed)
{
    memset(d, 0, sizeof(*d));
    d->delay_ns = delay_ns;
    d->jitter_ns = jitter_ns;
    util_rng_seed(&d->rng, seed);
    return ring_init(&d->ring, bytes);
}

void delayline_free(delayline_t *d) { ring_free(&d->ring); }

/* When a frame that arrived at now_ns leaves: after the delay and a uniform draw of the
 * jitter, but never before the frame ahead of it (the line stays a FIFO). */
static uint64_t release_time(delayline_t *d, uint64_t now_ns)
{
    uint64_t rel = now_ns + d->delay_ns;
    if (d->jitter_ns)
        rel += util_rng_next(&d->rng) % (d->jitter_ns + 1);
    if (rel < d->last_release_ns)
        rel = d->last_release_ns;
    d->last_release_ns = rel;
    return rel;
}

int delayline_push(delayline_t *d, uint64_t now_ns, uint64_t t_ns, uint16_t port, uint8_t kind,
                   const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len)
{
    delay_rec_t *r = ring_reserve(&d->ring, (uint32_t)sizeof(delay_rec_t) + len);
    if (!r) {
        d->overflow++;
        return -ENOBUFS;
    }
    r->release_ns = release_time(d, now_ns);
    r->t_ns = t_ns;
    r->len = len;
    r->port = port;
    r->kind = kind;
    if (vh)
        r->vh = *vh;
    else
        memset(&r->vh, 0, sizeof(r->vh));
    memcpy(r->data, frame, len);
    ring_commit(&d->ring);
    return 0;
}

const delay_rec_t *delayline_due(delayline_t *d, uint64_t now_ns)
{
    const delay_rec_t *r = ring_peek(&d->ring, NULL);
    return r && r->release_ns <= now_ns ? r : NULL;
}

void delayline_pop(delayline_t *d) { ring_pop(&d->ring); }

uint64_t delayline_next(delayline_t *d)
{
    const delay_rec_t *r = ring_peek(&d->ring, NULL);
    return r ? r->release_ns : UINT64_MAX;
}
