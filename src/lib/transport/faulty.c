/*
 * faulty.c - fault injection as a transport: it wraps another endpoint and drops, duplicates
 * and reorders what passes through it in both directions, with the seeded decisions of
 * faults.c. Protocol code cannot tell it from a lossy network.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/base/errmsg.h"
#include "lib/transport/faults.h"
#include "lib/transport/transport.h"

#define FAULTY_BATCH 512 /* packets per call that the decisions are taken over */

typedef struct faulty {
    transport_t base;
    transport_t *inner;
    faults_t in, out;
    transport_tx_t tx[2 * FAULTY_BATCH + 1];
    transport_rx_t rx[FAULTY_BATCH];
    int order[2 * FAULTY_BATCH];
} faulty_t;

static int faulty_send(transport_t *t, const transport_tx_t *pkts, int n, int timeout_ms)
{
    faulty_t *f = (faulty_t *)t;
    int done = 0;
    while (done < n) {
        int m = n - done < FAULTY_BATCH ? n - done : FAULTY_BATCH;
        int k = faults_on_send(&f->out, pkts + done, m, f->tx);
        if (k > 0) {
            int rc = transport_send(f->inner, f->tx, k, timeout_ms);
            if (rc < 0)
                return done > 0 ? done : rc;
        }
        done += m; /* dropped packets count as sent: the network lost them */
    }
    return n;
}

static int faulty_recv(transport_t *t, transport_rx_t *out, int max, int timeout_ms)
{
    faulty_t *f = (faulty_t *)t;
    /* Duplication can double a batch: take at most half of what the caller can hold. */
    int want = max / 2 > 0 ? max / 2 : 1;
    if (want > FAULTY_BATCH)
        want = FAULTY_BATCH;
    int n = transport_recv(f->inner, f->rx, want, timeout_ms);
    if (n <= 0)
        return n;
    int k = faults_on_recv(&f->in, n, f->order);
    if (k > max)
        k = max; /* only when max == 1 and the one packet was duplicated */
    for (int i = 0; i < k; i++)
        out[i] = f->rx[f->order[i]];
    return k;
}

static int faulty_pollfd(const transport_t *t)
{
    return ((const faulty_t *)t)->inner->ops->pollfd(((const faulty_t *)t)->inner);
}

static int faulty_local_addr(const transport_t *t, transport_addr_t *a)
{
    return transport_local_addr(((const faulty_t *)t)->inner, a);
}

static int faulty_queue_addr(const transport_t *t, const transport_addr_t *q0, uint32_t q,
                             transport_addr_t *out)
{
    return transport_queue_addr(((const faulty_t *)t)->inner, q0, q, out);
}

static void faulty_counts(const transport_t *t, uint64_t *dropped, uint64_t *duplicated,
                          uint64_t *reordered)
{
    const faulty_t *f = (const faulty_t *)t;
    *dropped = f->in.dropped + f->out.dropped;
    *duplicated = f->in.duplicated + f->out.duplicated;
    *reordered = f->in.reordered + f->out.reordered;
}

static uint32_t faulty_counters(const transport_t *t, uint64_t *acc, uint32_t max)
{
    return transport_counters(((const faulty_t *)t)->inner, acc, max);
}

static void faulty_close(transport_t *t)
{
    faulty_t *f = (faulty_t *)t;
    transport_close(f->inner);
    faults_free(&f->in);
    faults_free(&f->out);
    free(f);
}

static const transport_ops_t faulty_ops = {
    .name = "faulty",
    .send = faulty_send,
    .recv = faulty_recv,
    .pollfd = faulty_pollfd,
    .local_addr = faulty_local_addr,
    .queue_addr = faulty_queue_addr,
    .fault_counts = faulty_counts,
    .counters = faulty_counters,
    .close = faulty_close,
};

int transport_faulty_wrap(transport_t *inner, const char *spec_in, const char *spec_out,
                          uint64_t stream, transport_t **out, char *err, size_t errlen)
{
    faulty_t *f = calloc(1, sizeof(*f));
    if (!f)
        return set_err(err, errlen, -ENOMEM, "out of memory");
    char why[128] = "";
    if (faults_parse(&f->in, spec_in, why, sizeof(why)) != 0 ||
        faults_parse(&f->out, spec_out, why, sizeof(why)) != 0) {
        faults_free(&f->in);
        free(f);
        return set_err(err, errlen, -EINVAL, "bad fault spec: %s", why);
    }
    /* Each endpoint and direction draws its own decisions from the spec's seed. */
    util_rng_seed(&f->in.rng, f->in.seed * 1000003u + stream * 131u);
    util_rng_seed(&f->out.rng, f->out.seed * 7919u + stream * 137u + 0x5bd1e995u);
    f->base.ops = &faulty_ops;
    f->inner = inner;
    *out = &f->base;
    return 0;
}
