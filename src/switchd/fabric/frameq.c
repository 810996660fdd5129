/*
 * frameq.c - allocation and sleeping of the SPSC frame queue (see frameq.h).
 */
#include "switchd/fabric/frameq.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

int frameq_init(frameq_t *q, uint32_t cap)
{
    memset(q, 0, sizeof(*q));
    uint32_t c = 1;
    while (c < cap && c < (1u << 20))
        c <<= 1;
    q->cap = c;
    q->pos.cap = c;
    q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (q->efd < 0)
        return -errno;
    q->slots = calloc(c, sizeof(*q->slots));
    if (!q->slots) {
        close(q->efd);
        q->efd = -1;
        return -ENOMEM;
    }
    return 0;
}

void frameq_free(frameq_t *q)
{
    INAGG_FREE_CLEAR(q->slots);
    if (q->efd >= 0)
        close(q->efd);
    q->efd = -1;
}

void frameq_kick(frameq_t *q)
{
    uint64_t one = 1;
    ssize_t r = write(q->efd, &one, sizeof(one));
    (void)r; /* EAGAIN: the counter is already non-zero, the consumer wakes anyway */
}

int frameq_wait(frameq_t *q, int timeout_ms)
{
    uint64_t v;
    ssize_t r = read(q->efd, &v, sizeof(v)); /* clear, then look: no wake-up is lost */
    (void)r;
    if (frameq_ready(q))
        return 1;
    if (timeout_ms <= 0)
        return 0;
    struct pollfd p = {.fd = q->efd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return 0;
    return frameq_ready(q) ? 1 : 0;
}
