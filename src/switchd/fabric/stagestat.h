/*
 * stagestat.h - the counters of the fabric's stages: relaxed atomic adds (a counter may be
 * written by both pipeline threads), so the stats reader sees whole values.
 */
#ifndef INAGG_FABRIC_STAGESTAT_H
#define INAGG_FABRIC_STAGESTAT_H

#include <stdatomic.h>
#include <stdint.h>

static inline void fstat_add(_Atomic uint64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

/* n counters read into out[]. */
static inline void fstat_read(const _Atomic uint64_t *c, uint64_t *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = atomic_load_explicit(&c[i], memory_order_relaxed);
}

#endif /* INAGG_FABRIC_STAGESTAT_H */
