/*
 * test_quant.c - block fixed-point quantization: simulated aggregations of w workers in many
 * magnitude regimes prove that the switch's int32 sum never overflows and that every decoded
 * element is within quant_error_bound() of the exact sum; plus the sentinel exponents (zeros,
 * NaN/Inf), -0.0, values at the limit of the range, and scalar/AVX2 agreement.
 */
#include <arpa/inet.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/kernels/vec.h"
#include "lib/worker/quant.h"

static const uint32_t k_worlds[] = {1, 2, 3, 4, 8, 16, 64};
static const size_t k_sizes[] = {1, 9, 256, 367};

enum regime {
    R_UNIFORM, /* uniform in [-1, 1] */
    R_MIXED, /* magnitudes spanning 2^-30 .. 2^30 within one block */
    R_ALL_MAX, /* every value of every worker is the same largest float below 2^e */
    R_POW2, /* exact powers of two */
    R_DENORMAL, /* denormals only: the exponent is clamped to QUANT_EXP_MIN */
    R_TINY_HUGE, /* denormals and tiny values next to a few large ones */
    R_HUGE, /* around 1e38: sums may pass the float range */
    R_COUNT
};

static const char *const k_regime_names[R_COUNT] = {"uniform",  "mixed",     "all_max", "pow2",
                                                    "denormal", "tiny_huge", "huge"};

static uint32_t f2u(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float u2f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static int coin(util_rng_t *r) { return (int)(util_rng_next(r) >> 63); }

/* Random sign, mantissa and an exponent in [emin, emax]. */
static float rand_float(util_rng_t *r, int emin, int emax)
{
    int e = emin + (int)(util_rng_next(r) % (uint64_t)(emax - emin + 1));
    float f = (float)ldexp(1.0 + util_rng_double(r), e);
    return coin(r) ? -f : f;
}

static float rand_denormal(util_rng_t *r)
{
    float f = u2f(1u + (uint32_t)(util_rng_next(r) % 0x7fffffu));
    return coin(r) ? -f : f;
}

static void fill_block(enum regime g, float *x, size_t n, util_rng_t *r, float common)
{
    for (size_t i = 0; i < n; i++) {
        switch (g) {
            case R_UNIFORM: x[i] = (float)(util_rng_double(r) * 2.0 - 1.0); break;
            case R_MIXED: x[i] = rand_float(r, -30, 29); break;
            case R_ALL_MAX: x[i] = common; break;
            case R_POW2:
                x[i] = (float)ldexp(1.0, (int)(util_rng_next(r) % 41) - 20) * (coin(r) ? -1 : 1);
                break;
            case R_DENORMAL: x[i] = rand_denormal(r); break;
            case R_TINY_HUGE:
                x[i] = util_rng_next(r) % 16 == 0 ? rand_float(r, 0, 20)
                       : coin(r)                  ? rand_denormal(r)
                                                  : rand_float(r, -126, -100);
                break;
            case R_HUGE:
                x[i] = (float)((1.0 + util_rng_double(r) * 2.4) * 1e38) * (coin(r) ? -1.0f : 1.0f);
                break;
            case R_COUNT: break;
        }
    }
}

/* The quantization part of the bound, without the float rounding of the result. */
static double quant_part(int16_t m, uint32_t w)
{
    return (double)w * (0.5 + 0x1p-20) / quant_scale(m, w);
}

static void check_element(float got, double exact, int16_t m, uint32_t w, const char *what,
                          size_t i)
{
    double bound = quant_error_bound(m, w, fabs(exact));
    if (isfinite(bound)) {
        CHECK_MSG(isfinite(got) && fabs((double)got - exact) <= bound,
                  "%s w=%u m=%d [%zu]: got %.9g exact %.17g err %.3g > bound %.3g", what, w, m, i,
                  (double)got, exact, fabs((double)got - exact), bound);
        return;
    }
    /* The sum may round past the float range: +-Inf is then the right answer. */
    double q = quant_part(m, w);
    CHECK_MSG(!isnan(got), "%s [%zu]: NaN", what, i);
    if (isinf(got)) {
        CHECK(!signbit(got) == !signbit(exact));
        CHECK_MSG(fabs(exact) + q >= 0x1p128 - 0x1p103, "%s [%zu]: Inf for %.17g", what, i, exact);
    } else {
        CHECK_MSG(fabs((double)got - exact) <= q + 0x1p103, "%s [%zu]: %.9g vs %.17g", what, i,
                  (double)got, exact);
    }
}

/* One aggregation: w workers, one block each; returns the agreed exponent. */
static int16_t simulate(enum regime g, uint32_t w, size_t n, util_rng_t *r)
{
    float *x = malloc(sizeof(float) * n * w);
    uint32_t *enc = malloc(sizeof(uint32_t) * n * w);
    uint32_t *sum_be = malloc(sizeof(uint32_t) * n);
    float *dec = malloc(sizeof(float) * n);
    CHECK(x && enc && sum_be && dec);

    int e = (int)(util_rng_next(r) % 239) - 110; /* [-110, 128]: below the clamp too */
    float common = nextafterf((float)ldexp(1.0, e), 0.0f) * (coin(r) ? -1.0f : 1.0f);
    int16_t m = QUANT_EXP_ZERO;
    for (uint32_t k = 0; k < w; k++) {
        fill_block(g, x + (size_t)k * n, n, r, common);
        m = quant_exp_max(m, quant_block_exponent(x + (size_t)k * n, n));
    }
    CHECK(m != QUANT_EXP_NONFINITE && m != QUANT_EXP_ZERO);
    CHECK(m >= QUANT_EXP_MIN && m <= QUANT_EXP_MAX);
    if (g == R_ALL_MAX)
        CHECK_EQ_INT(m, e < QUANT_EXP_MIN ? QUANT_EXP_MIN : e);
    if (g == R_DENORMAL)
        CHECK_EQ_INT(m, QUANT_EXP_MIN);

    for (uint32_t k = 0; k < w; k++)
        quant_encode(x + (size_t)k * n, enc + (size_t)k * n, n, m, w);

    /* The switch: the int32 sum must never leave the int32 range. */
    int64_t limit = INT32_MAX / (int64_t)w;
    for (size_t i = 0; i < n; i++) {
        int64_t s = 0;
        for (uint32_t k = 0; k < w; k++) {
            int32_t v = (int32_t)ntohl(enc[(size_t)k * n + i]);
            CHECK_MSG(v <= limit && v >= -limit, "%s w=%u: word %d past %lld", k_regime_names[g], w,
                      v, (long long)limit);
            s += v;
        }
        CHECK_MSG(s <= INT32_MAX && s >= -(int64_t)INT32_MAX, "%s w=%u m=%d: sum %lld overflows",
                  k_regime_names[g], w, m, (long long)s);
        sum_be[i] = htonl((uint32_t)(int32_t)s);
    }

    quant_decode(sum_be, dec, n, m, w);
    for (size_t i = 0; i < n; i++) {
        double exact = 0.0;
        for (uint32_t k = 0; k < w; k++)
            exact += (double)x[(size_t)k * n + i];
        check_element(dec[i], exact, m, w, k_regime_names[g], i);
    }
    free(x);
    free(enc);
    free(sum_be);
    free(dec);
    return m;
}

static void simulate_all(enum regime g, int rounds)
{
    util_rng_t r;
    util_rng_seed(&r, 1000 + (uint64_t)g);
    for (int path = 0; path < 2; path++) {
        vec_force_scalar(path == 0);
        for (size_t wi = 0; wi < INAGG_ARRAY_LEN(k_worlds); wi++)
            for (size_t si = 0; si < INAGG_ARRAY_LEN(k_sizes); si++)
                for (int round = 0; round < rounds; round++)
                    simulate(g, k_worlds[wi], k_sizes[si], &r);
    }
    vec_force_scalar(0);
}

TEST(quant_bound_uniform, 30) { simulate_all(R_UNIFORM, 4); }
TEST(quant_bound_mixed_magnitudes, 30) { simulate_all(R_MIXED, 4); }
TEST(quant_bound_all_values_at_max, 30) { simulate_all(R_ALL_MAX, 8); }
TEST(quant_bound_powers_of_two, 30) { simulate_all(R_POW2, 4); }
TEST(quant_bound_denormals, 30) { simulate_all(R_DENORMAL, 4); }
TEST(quant_bound_tiny_next_to_huge, 30) { simulate_all(R_TINY_HUGE, 4); }
TEST(quant_bound_near_float_max, 30) { simulate_all(R_HUGE, 4); }

TEST(quant_block_exponent_values, 5)
{
    const float one = 1.0f, below_one = nextafterf(1.0f, 0.0f), half = 0.5f, three = -3.0f;
    const float fmax = FLT_MAX, tiny = 0x1p-100f, den = 0x1p-149f, at_min = 0x1p-97f;
    CHECK_EQ_INT(quant_block_exponent(&one, 1), 1);
    CHECK_EQ_INT(quant_block_exponent(&below_one, 1), 0);
    CHECK_EQ_INT(quant_block_exponent(&half, 1), 0);
    CHECK_EQ_INT(quant_block_exponent(&three, 1), 2);
    CHECK_EQ_INT(quant_block_exponent(&fmax, 1), 128);
    CHECK_EQ_INT(quant_block_exponent(&tiny, 1), QUANT_EXP_MIN);
    CHECK_EQ_INT(quant_block_exponent(&den, 1), QUANT_EXP_MIN);
    CHECK_EQ_INT(quant_block_exponent(&at_min, 1), QUANT_EXP_MIN);
    CHECK_EQ_INT(quant_block_exponent(NULL, 0), QUANT_EXP_ZERO);
    const float mixed[10] = {0.25f, -0.0f, 1e-40f, -6.5f, 3.0f, 0, 0, 0, 0, 7.99f};
    CHECK_EQ_INT(quant_block_exponent(mixed, 10), 3);
    CHECK_EQ_INT(quant_block_exponent(mixed, 4), 3);
    CHECK_EQ_INT(quant_block_exponent(mixed, 3), -1);

    CHECK_EQ_INT(quant_exp_max(QUANT_EXP_ZERO, 5), 5);
    CHECK_EQ_INT(quant_exp_max(-96, QUANT_EXP_ZERO), -96);
    CHECK_EQ_INT(quant_exp_max(QUANT_EXP_ZERO, QUANT_EXP_ZERO), QUANT_EXP_ZERO);
    CHECK_EQ_INT(quant_exp_max(QUANT_EXP_NONFINITE, 128), QUANT_EXP_NONFINITE);
    CHECK_EQ_INT(quant_exp_max(QUANT_EXP_ZERO, QUANT_EXP_NONFINITE), QUANT_EXP_NONFINITE);
    CHECK_EQ_INT(quant_exp_max(3, -7), 3);

    CHECK(quant_scale(0, 1) == 2147483647.0);
    CHECK(quant_scale(0, 3) == 715827882.0);
    CHECK(quant_scale(10, 2) == 1073741823.0 / 1024.0);
    CHECK(quant_scale(-96, 64) == 33554431.0 * 0x1p96);
    CHECK(quant_error_bound(QUANT_EXP_ZERO, 4, 0.0) == 0.0);
    CHECK(isinf(quant_error_bound(QUANT_EXP_NONFINITE, 4, 0.0)));
    /* The bound is tight: for values below 1 and 4 workers, half a float ulp of the result plus
       4 * 0.5 / floor((2^31-1)/4), about 3.7e-9. */
    double b = quant_error_bound(0, 4, 0.5);
    CHECK(b > 0.5 * 0x1p-24 + 3.7e-9 && b < 0.5 * 0x1p-24 + 3.8e-9);
}

TEST(quant_all_zero_blocks, 5)
{
    for (int path = 0; path < 2; path++) {
        vec_force_scalar(path == 0);
        float x[3][17];
        memset(x, 0, sizeof(x));
        int16_t m = QUANT_EXP_ZERO;
        for (int k = 0; k < 3; k++)
            m = quant_exp_max(m, quant_block_exponent(x[k], 17));
        CHECK_EQ_INT(m, QUANT_EXP_ZERO);
        uint32_t enc[17], sum[17];
        memset(sum, 0, sizeof(sum));
        for (int k = 0; k < 3; k++) {
            memset(enc, 0xab, sizeof(enc));
            quant_encode(x[k], enc, 17, m, 3);
            for (int i = 0; i < 17; i++) {
                CHECK(enc[i] == 0);
                sum[i] += enc[i];
            }
        }
        float out[17];
        memset(out, 0xff, sizeof(out));
        quant_decode(sum, out, 17, m, 3);
        for (int i = 0; i < 17; i++)
            CHECK(f2u(out[i]) == 0);
        CHECK(quant_error_bound(m, 3, 0.0) == 0.0);
    }
}

TEST(quant_nonfinite_poisons_block, 10)
{
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    const size_t n = 37;
    util_rng_t r;
    util_rng_seed(&r, 7);
    for (int path = 0; path < 2; path++) {
        vec_force_scalar(path == 0);
        for (int bi = 0; bi < 3; bi++) {
            for (size_t pos = 0; pos < n; pos += 9) {
                float x[4][37];
                for (int k = 0; k < 4; k++)
                    fill_block(R_UNIFORM, x[k], n, &r, 0.0f);
                x[2][pos] = bad[bi];
                CHECK_EQ_INT(quant_block_exponent(x[2], n), QUANT_EXP_NONFINITE);
                int16_t m = QUANT_EXP_ZERO;
                for (int k = 0; k < 4; k++)
                    m = quant_exp_max(m, quant_block_exponent(x[k], n));
                CHECK_EQ_INT(m, QUANT_EXP_NONFINITE);
                uint32_t enc[37], sum[37] = {0};
                for (int k = 0; k < 4; k++) {
                    quant_encode(x[k], enc, n, m, 4);
                    for (size_t i = 0; i < n; i++) {
                        CHECK(enc[i] == 0);
                        sum[i] += enc[i];
                    }
                }
                float out[37];
                quant_decode(sum, out, n, m, 4);
                for (size_t i = 0; i < n; i++)
                    CHECK(isnan(out[i]));
            }
        }
    }
    /* The tail position too (after the last full vector). */
    float y[9] = {1, 2, 3, 4, 5, 6, 7, 8, 1};
    y[8] = NAN;
    CHECK_EQ_INT(quant_block_exponent(y, 9), QUANT_EXP_NONFINITE);
    y[8] = -INFINITY;
    CHECK_EQ_INT(quant_block_exponent(y, 9), QUANT_EXP_NONFINITE);
}

TEST(quant_negative_zero, 5)
{
    for (int path = 0; path < 2; path++) {
        vec_force_scalar(path == 0);
        float nz[10];
        for (int i = 0; i < 10; i++)
            nz[i] = -0.0f;
        CHECK_EQ_INT(quant_block_exponent(nz, 10), QUANT_EXP_ZERO);
        float mixed[10] = {-0.0f, 1.0f, -0.0f, -1.0f, 0.5f, -0.0f, 0, 0, 0, -0.0f};
        int16_t m = quant_exp_max(quant_block_exponent(nz, 10), quant_block_exponent(mixed, 10));
        CHECK_EQ_INT(m, 1);
        uint32_t a[10], b[10], sum[10];
        quant_encode(nz, a, 10, m, 2);
        quant_encode(mixed, b, 10, m, 2);
        for (int i = 0; i < 10; i++) {
            CHECK(a[i] == 0);
            if (f2u(mixed[i]) == f2u(-0.0f))
                CHECK(b[i] == 0);
            sum[i] = htonl(ntohl(a[i]) + ntohl(b[i]));
        }
        float out[10];
        quant_decode(sum, out, 10, m, 2);
        /* -0.0 + -0.0 decodes to +0.0: the integer sum has no sign for zero. */
        CHECK(f2u(out[0]) == 0 && f2u(out[9]) == 0);
        CHECK(out[1] == 1.0f && out[3] == -1.0f && out[4] == 0.5f);
    }
}

/* A block where every value is the largest float below 2^m, for every w from 1 to 4096: with
   the floored scale no sum of w such values overflows; with SwitchML's unfloored
   (2^31-1) / (w * 2^m) some do (w = 1000 is one). */
TEST(quant_values_at_limit_do_not_overflow, 30)
{
    static const int ms[] = {QUANT_EXP_MIN, -20, -1, 0, 1, 24, 31, 100, 127, QUANT_EXP_MAX};
    long naive_overflows = 0;
    for (int path = 0; path < 2; path++) {
        vec_force_scalar(path == 0);
        for (size_t mi = 0; mi < INAGG_ARRAY_LEN(ms); mi++) {
            int16_t m = (int16_t)ms[mi];
            float v = m == 128 ? FLT_MAX : nextafterf((float)ldexp(1.0, m), 0.0f);
            CHECK_EQ_INT(quant_block_exponent(&v, 1), m);
            for (uint32_t w = 1; w <= 4096; w++) {
                for (int sign = -1; sign <= 1; sign += 2) {
                    float x[9];
                    for (int i = 0; i < 9; i++)
                        x[i] = v * (float)sign;
                    uint32_t enc[9];
                    quant_encode(x, enc, 9, m, w);
                    for (int i = 0; i < 9; i++) {
                        int64_t q = (int32_t)ntohl(enc[i]);
                        CHECK(q == (int32_t)ntohl(enc[0]));
                        CHECK_MSG(llabs(q) * (int64_t)w <= INT32_MAX,
                                  "m=%d w=%u: %u * %lld overflows", m, w, w, (long long)q);
                    }
                    double naive = 2147483647.0 / ((double)w * ldexp(1.0, m));
                    int64_t qn = (int64_t)nearbyint((double)x[0] * naive);
                    if (llabs(qn) * (int64_t)w > INT32_MAX)
                        naive_overflows++;
                    if (w == 1000 && m == 0)
                        CHECK_MSG(llabs(qn) * 1000 > INT32_MAX, "naive w=1000: %lld",
                                  (long long)qn);
                }
            }
        }
    }
    CHECK(naive_overflows > 0);
    vec_force_scalar(0);
}

TEST(quant_scalar_and_avx2_agree, 20)
{
    static const int ms[] = {QUANT_EXP_MIN, -10, 0, 1, 7, 30, 127, QUANT_EXP_MAX};
    util_rng_t r;
    util_rng_seed(&r, 99);
    for (size_t si = 0; si < INAGG_ARRAY_LEN(k_sizes); si++) {
        size_t n = k_sizes[si] + 3;
        float *x = malloc(n * 4), *out[2] = {malloc(n * 4), malloc(n * 4)};
        uint32_t *words = malloc(n * 4), *enc[2] = {malloc(n * 4), malloc(n * 4)};
        CHECK(x && out[0] && out[1] && words && enc[0] && enc[1]);
        for (size_t wi = 0; wi < INAGG_ARRAY_LEN(k_worlds); wi++) {
            uint32_t w = k_worlds[wi];
            for (size_t mi = 0; mi < INAGG_ARRAY_LEN(ms); mi++) {
                int16_t m = (int16_t)ms[mi];
                /* Values below 2^m, of random exponents, so every one is encodable. */
                for (size_t i = 0; i < n; i++) {
                    int lo = m - 40 < -149 ? -149 : m - 40;
                    x[i] = rand_float(&r, lo, m - 1);
                    if (fabsf(x[i]) >= (float)ldexp(1.0, m) || isinf(x[i]))
                        x[i] = 0.0f;
                    words[i] = (uint32_t)util_rng_next(&r);
                }
                CHECK(quant_block_exponent(x, n) <= m);
                for (int path = 0; path < 2; path++) {
                    vec_force_scalar(path == 0);
                    quant_encode(x, enc[path], n, m, w);
                    quant_decode(words, out[path], n, m, w);
                }
                CHECK(memcmp(enc[0], enc[1], n * 4) == 0);
                CHECK(memcmp(out[0], out[1], n * 4) == 0);
            }
        }
        free(x);
        free(out[0]);
        free(out[1]);
        free(words);
        free(enc[0]);
        free(enc[1]);
    }
    vec_force_scalar(0);
}

/* The bound as its formula states it, with frexp and ldexp (quant.h). */
static double bound_by_formula(int16_t m, uint32_t w, double exact_abs)
{
    double quant = (double)(w ? w : 1) * (0.5 + 0x1p-20) / quant_scale(m, w);
    double mag = (fabs(exact_abs) + quant) * (1.0 + 0x1p-48);
    if (!(mag < QUANT_FLOAT_OVERFLOW))
        return INFINITY;
    int e = 0;
    frexp(mag, &e);
    double ulp = ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
    return quant + 0.5 * ulp + mag * 0x1p-48;
}

/* The two-step bound (a block's term once, then per element) is the formula bit for bit,
 * over every exponent, world sizes, and magnitudes from zero and denormals to past the float
 * range (where a wrong exponent read from the bits would double or halve the ulp term). */
TEST(quant_bound_of_block_is_the_formula_bit_for_bit, 20)
{
    static const double mags[] = {0.0,  0x1p-149, 0x1p-140, 1e-30, 0x1p-24,      0.3,  0.5,
                                  0.75, 1.0,      1.5,      3.0,   1000.0,       1e20, 0x1p100,
                                  3e38, FLT_MAX,  1e39,     -2.5,  0x1.fffffep-1};
    uint64_t checked = 0;
    for (int m = QUANT_EXP_MIN; m <= QUANT_EXP_MAX; m++)
        for (size_t wi = 0; wi < sizeof(k_worlds) / sizeof(k_worlds[0]); wi++) {
            uint32_t w = k_worlds[wi];
            double q = quant_block_error((int16_t)m, w);
            for (size_t k = 0; k < sizeof(mags) / sizeof(mags[0]); k++) {
                double want = bound_by_formula((int16_t)m, w, mags[k]);
                double got = quant_error_bound_of_block(q, mags[k]);
                double whole = quant_error_bound((int16_t)m, w, mags[k]);
                CHECK(memcmp(&want, &got, sizeof(want)) == 0 &&
                      memcmp(&want, &whole, sizeof(want)) == 0);
                checked++;
            }
        }
    CHECK(checked > 20000);
    CHECK(quant_error_bound(QUANT_EXP_ZERO, 4, 1.0) == 0.0);
    CHECK(isinf(quant_error_bound(QUANT_EXP_NONFINITE, 4, 1.0)));
}
