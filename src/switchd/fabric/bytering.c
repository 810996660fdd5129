/*
 * bytering.c - the SPSC queue of frame records between two pipeline stages (bytering.h):
 * records in a base/ring.h ring, and the consumer's eventfd.
 */
#include "switchd/fabric/bytering.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int bytering_init(bytering_t *r, size_t bytes)
{
    r->efd = -1;
    int rc = ring_init(&r->ring, bytes);
    if (rc != 0)
        return rc;
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
    ring_free(&r->ring);
    if (r->efd >= 0)
        close(r->efd);
    r->efd = -1;
}

int bytering_push(bytering_t *r, uint64_t ports, uint64_t t_ns, uint8_t kind,
                  const struct virtio_net_hdr *vh, const uint8_t *frame, uint32_t len)
{
    bytering_rec_t *rec = ring_reserve(&r->ring, (uint32_t)sizeof(bytering_rec_t) + len);
    if (!rec)
        return -ENOBUFS;
    rec->ports = ports;
    rec->t_ns = t_ns;
    rec->len = len;
    rec->kind = kind;
    rec->has_vh = vh != NULL;
    if (vh)
        rec->vh = *vh;
    memcpy(rec->data, frame, len);
    ring_commit(&r->ring);
    return 0;
}

void bytering_kick(bytering_t *r)
{
    uint64_t one = 1;
    ssize_t w = write(r->efd, &one, sizeof(one));
    (void)w; /* EAGAIN: the counter is already non-zero, the consumer will look */
}

void bytering_kick_if_sleeping(bytering_t *r)
{
    atomic_thread_fence(memory_order_seq_cst); /* the pushes before the look: pairs with the
                                                  consumer's store */
    if (atomic_load_explicit(&r->sleeping, memory_order_relaxed))
        bytering_kick(r);
}

void bytering_sleep(bytering_t *r, int sleeping)
{
    atomic_store(&r->sleeping, sleeping); /* seq_cst: the producer's check after its push
                                             sees it */
}

const bytering_rec_t *bytering_peek(bytering_t *r) { return ring_peek(&r->ring, NULL); }

void bytering_pop(bytering_t *r) { ring_pop(&r->ring); }

size_t bytering_used(bytering_t *r) { return ring_used(&r->ring); }
