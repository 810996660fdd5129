/*
 * util.h - small helpers every module uses: monotonic clock, a seeded PRNG, min/max,
 * branch hints, cache-line alignment, freeing a pointer and clearing it. Header-only so the
 * hot paths can inline them.
 */
#ifndef INAGG_UTIL_H
#define INAGG_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define INAGG_LIKELY(x) __builtin_expect(!!(x), 1)
#define INAGG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define INAGG_CACHELINE 64
#define INAGG_ALIGNED __attribute__((aligned(INAGG_CACHELINE)))
#define INAGG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* free(p), then p = NULL: an owner's pointer left safe to free or test again. A macro, since
 * C has no other way to clear a pointer of any type in place. */
#define INAGG_FREE_CLEAR(p)                                                                        \
    do {                                                                                           \
        free(p);                                                                                   \
        (p) = NULL;                                                                                \
    } while (0)

/* names[v] of a table of n names, "unknown" for a value past it: an enum's name. */
static inline const char *util_name_of(const char *const *names, size_t n, unsigned v)
{
    return v < n ? names[v] : "unknown";
}

static inline uint64_t util_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t util_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Monotonic time in nanoseconds. */
static inline uint64_t util_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t util_now_us(void) { return util_now_ns() / 1000u; }

/* splitmix64: seeds the generator below and serves where one draw is enough. */
static inline uint64_t util_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* xoshiro256** PRNG: fast, seeded, reproducible across runs and machines. */
typedef struct util_rng {
    uint64_t s[4];
} util_rng_t;

static inline void util_rng_seed(util_rng_t *r, uint64_t seed)
{
    uint64_t sm = seed;
    for (int i = 0; i < 4; i++)
        r->s[i] = util_splitmix64(&sm);
}

static inline uint64_t util_rng_next(util_rng_t *r)
{
    uint64_t *s = r->s;
    uint64_t x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Uniform double in [0, 1). */
static inline double util_rng_double(util_rng_t *r)
{
    return (double)(util_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

#endif /* INAGG_UTIL_H */
