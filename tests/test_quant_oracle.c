/*
 * test_quant_oracle.c - block fixed point against an oracle written from SwitchML's definition
 * (section 4.6 / appendix E) alone, taking nothing from worker/quant.c: the exponent is the
 * smallest m with every |x| < 2^m (found by counting), the factor f = floor((2^31-1)/w) / 2^m,
 * each worker sends round(x f) computed in long double, the switch adds int64, the result is
 * sum / f rounded once to float. The library's encode -> int32 sum -> decode must match the
 * oracle to one float ulp plus its documented double-rounding slack, and must be within the
 * error the definition allows against the exact sum: w / (2 f) plus half an ulp of the result.
 * Halving the precision (an exponent one too large, a scale halved) breaks both checks.
 */
#include <arpa/inet.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/worker/quant.h"

#define BLOCK 256

/* Smallest m in [-96, 128] with every |x| < 2^m, counted up from -96; 0 for all zeros. */
static int oracle_exponent(const float *x, size_t n, int *all_zero)
{
    long double mx = 0;
    for (size_t i = 0; i < n; i++)
        if (fabsl((long double)x[i]) > mx)
            mx = fabsl((long double)x[i]);
    *all_zero = mx == 0;
    int m = -96;
    while (m < 128 && mx >= ldexpl(1.0L, m))
        m++;
    return m;
}

static float ulp_of(float v)
{
    float a = fabsf(v);
    return nextafterf(a, INFINITY) - a;
}

static void one_round(util_rng_t *r, uint32_t w)
{
    float x[64][BLOCK];
    int scale_exp = (int)(util_rng_next(r) % 80) - 40;
    for (uint32_t k = 0; k < w; k++)
        for (size_t i = 0; i < BLOCK; i++) {
            double u = util_rng_double(r) * 2 - 1;
            /* mixed magnitudes within a block: some far below its largest value */
            int shift = (int)(util_rng_next(r) % 4 == 0 ? util_rng_next(r) % 30 : 0);
            x[k][i] = (float)ldexp(u, scale_exp - shift);
        }
    /* oracle */
    int m = -1000, zero = 1;
    for (uint32_t k = 0; k < w; k++) {
        int z, mk = oracle_exponent(x[k], BLOCK, &z);
        if (!z && mk > m)
            m = mk;
        zero &= z;
    }
    CHECK(!zero);
    const long double f = ldexpl((long double)(2147483647u / w), -m);
    /* library */
    int16_t lm = QUANT_EXP_ZERO;
    for (uint32_t k = 0; k < w; k++)
        lm = quant_exp_max(lm, quant_block_exponent(x[k], BLOCK));
    CHECK_MSG(lm == m, "exponent %d, the definition gives %d", lm, m);
    uint32_t enc[BLOCK], sum_be[BLOCK];
    int64_t lib_sum[BLOCK] = {0};
    for (uint32_t k = 0; k < w; k++) {
        quant_encode(x[k], enc, BLOCK, lm, w);
        for (size_t i = 0; i < BLOCK; i++)
            lib_sum[i] += (int32_t)ntohl(enc[i]);
    }
    for (size_t i = 0; i < BLOCK; i++)
        sum_be[i] = htonl((uint32_t)(int32_t)lib_sum[i]);
    float dec[BLOCK];
    quant_decode(sum_be, dec, BLOCK, lm, w);
    for (size_t i = 0; i < BLOCK; i++) {
        int64_t osum = 0;
        long double exact = 0;
        for (uint32_t k = 0; k < w; k++) {
            osum += (int64_t)llroundl((long double)x[k][i] * f);
            exact += (long double)x[k][i];
        }
        CHECK(osum <= INT32_MAX && osum >= -(int64_t)INT32_MAX);
        float want = (float)((long double)osum / f);
        /* the library may round x*f in double first: a word off by one at most per worker */
        long double slack = (long double)w / f;
        CHECK_MSG(
            fabsl((long double)dec[i] - (long double)want) <= (long double)ulp_of(want) + slack,
            "w=%u m=%d [%zu]: library %.9g, oracle %.9g", w, m, i, (double)dec[i], (double)want);
        long double allowed = (long double)w * 0.5L / f * (1 + 0x1p-19L) +
                              0.5L * (long double)ulp_of(dec[i]) + 0x1p-149L;
        CHECK_MSG(fabsl((long double)dec[i] - exact) <= allowed,
                  "w=%u m=%d [%zu]: %.9g vs exact %.12Lg: error %.3Lg > %.3Lg", w, m, i,
                  (double)dec[i], exact, fabsl((long double)dec[i] - exact), allowed);
    }
}

TEST(quant_independent_float32_oracle, 30)
{
    static const uint32_t worlds[] = {1, 2, 3, 4, 7, 16, 63, 64};
    util_rng_t r;
    util_rng_seed(&r, 4242);
    for (size_t wi = 0; wi < sizeof(worlds) / sizeof(worlds[0]); wi++)
        for (int round = 0; round < 40; round++)
            one_round(&r, worlds[wi]);
}
