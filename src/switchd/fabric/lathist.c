/*
 * lathist.c - the fabric's latency histograms (lathist.h).
 */
#include "switchd/fabric/lathist.h"

/* 16 buckets per power of two: at most 1/16 relative error. */
static uint32_t bucket_of(uint64_t ns)
{
    if (ns < 16)
        return (uint32_t)ns;
    uint32_t e = 63u - (uint32_t)__builtin_clzll(ns);
    uint32_t b = (e - 3) * 16u + (uint32_t)((ns >> (e - 4)) & 15u);
    return b < LAT_BUCKETS ? b : LAT_BUCKETS - 1;
}

static uint64_t bucket_low(uint32_t b)
{
    if (b < 16)
        return b;
    uint32_t e = b / 16 + 3, m = b % 16;
    return (1ull << e) + ((uint64_t)m << (e - 4));
}

void lathist_add(lathist_t *h, uint64_t ns)
{
    atomic_fetch_add_explicit(&h->b[bucket_of(ns)], 1, memory_order_relaxed);
}

uint64_t lathist_summary(const lathist_t *h, uint64_t *p50, uint64_t *p99)
{
    uint64_t n = 0, seen = 0;
    for (uint32_t b = 0; b < LAT_BUCKETS; b++)
        n += atomic_load_explicit(&h->b[b], memory_order_relaxed);
    *p50 = *p99 = 0;
    int have50 = 0;
    for (uint32_t b = 0; b < LAT_BUCKETS && n; b++) {
        seen += atomic_load_explicit(&h->b[b], memory_order_relaxed);
        if (!have50 && seen * 2 >= n) {
            *p50 = bucket_low(b);
            have50 = 1;
        }
        if (seen * 100 >= n * 99) {
            *p99 = bucket_low(b);
            break;
        }
    }
    return n;
}
