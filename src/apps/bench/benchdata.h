/*
 * benchdata.h - the deterministic tensor contents of the allreduce benchmarks, shared by
 * `inagg bench allreduce` and the MPI baseline (inagg-mpi-bench) so both reduce the same
 * numbers. Every element is a stateless hash of (seed, rank, index): any element on any rank
 * can be computed independently, which is also how results are verified.
 */
#ifndef INAGG_BENCHDATA_H
#define INAGG_BENCHDATA_H

#include <stdint.h>
#include <string.h>

#include "lib/base/util.h"

#define BENCH_I32_BOUND (1 << 24) /* int32 values lie in [-BENCH_I32_BOUND, BENCH_I32_BOUND) */
#define BENCH_F32_BLOCK 1024u /* float32 elements that share one magnitude range */
#define BENCH_F32_EXP_MIN (-20) /* block exponents lie in [EXP_MIN, EXP_MAX] */
#define BENCH_F32_EXP_MAX 20
#define BENCH_F32_EXP_SPREAD 8 /* elements of a block lie up to this many binades below it */

/* The 64-bit hash every value is drawn from. */
static inline uint64_t bench_hash(uint64_t seed, uint32_t rank, uint64_t i)
{
    uint64_t s = seed ^ ((uint64_t)rank * 0x9e3779b97f4a7c15ull) ^ (i * 0xd1b54a32d192ed03ull);
    return util_splitmix64(&s);
}

/* int32 value of element i on rank r: small so that sums of up to 64 ranks never overflow:
 * in [-2^24, 2^24), so 64 * 2^24 = 2^30 fits with room to spare. */
static inline int32_t bench_value_i32(uint64_t seed, uint32_t rank, uint64_t i)
{
    return (int32_t)(bench_hash(seed, rank, i) >> 39) - BENCH_I32_BOUND;
}

/*
 * float32 value: magnitudes vary per 1024-element block (over roughly 2^-20..2^20) so block
 * scaling is exercised; sign varies. The block exponent depends on (seed, block) only, as a
 * layer's gradients have similar magnitudes on every worker; each element then lies 0..7
 * binades below it with a random mantissa and sign. Always a normal, finite float.
 */
static inline float bench_value_f32(uint64_t seed, uint32_t rank, uint64_t i)
{
    uint64_t blk = bench_hash(seed ^ 0x5bd1e9955bd1e995ull, 0xffffffffu, i / BENCH_F32_BLOCK);
    int span = BENCH_F32_EXP_MAX - BENCH_F32_EXP_MIN + 1;
    int block_exp = BENCH_F32_EXP_MIN + (int)(blk % (uint64_t)span);
    uint64_t h = bench_hash(seed, rank, i);
    int exp = block_exp - (int)(h & (BENCH_F32_EXP_SPREAD - 1));
    uint32_t bits = (uint32_t)((h >> 63) << 31) | ((uint32_t)(exp + 127) << 23) |
                    (uint32_t)((h >> 8) & 0x7fffffu);
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* The exact sum over ranks 0..world-1 of element i (int32: cannot overflow, see above). */
static inline int32_t bench_expected_i32(uint64_t seed, uint32_t world, uint64_t i)
{
    int64_t sum = 0;
    for (uint32_t r = 0; r < world; r++)
        sum += bench_value_i32(seed, r, i);
    return (int32_t)sum;
}

/* The sum over ranks of element i in double (exact to ~1e-16), and the sum of magnitudes in
 * *abs_sum: a float32 sum in any order is within (world-1) * 2^-24 * abs_sum of it. */
static inline double bench_expected_f32(uint64_t seed, uint32_t world, uint64_t i, double *abs_sum)
{
    double sum = 0, mag = 0;
    for (uint32_t r = 0; r < world; r++) {
        double v = (double)bench_value_f32(seed, r, i);
        sum += v;
        mag += v < 0 ? -v : v;
    }
    if (abs_sum)
        *abs_sum = mag;
    return sum;
}

/* A checksum of a result of n 32-bit words: the sum of word[i] * (splitmix64(i) | 1) mod 2^64.
 * Every weight is odd, so a change of any one word changes it; two results with the same
 * checksum are, for any practical purpose, bit-identical. tools/gloo_allreduce.py computes the
 * same, so an int32 result of inagg, Open MPI and Gloo can be compared across systems. */
static inline uint64_t bench_checksum(const void *buf, uint64_t n)
{
    const unsigned char *p = buf;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, p + 4 * i, 4);
        uint64_t s = i;
        sum += (uint64_t)w * (util_splitmix64(&s) | 1u);
    }
    return sum;
}

#endif /* INAGG_BENCHDATA_H */
