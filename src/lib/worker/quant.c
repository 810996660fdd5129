/*
 * quant.c - block fixed-point quantization of float32 (see quant.h): the block exponent, the
 * scale, encode and decode through the vector kernels, and the documented error bound.
 */
#include "lib/worker/quant.h"

#include <math.h>
#include <string.h>

#include "lib/kernels/vec.h"

#define QUANT_INT_MAX 2147483647u

int16_t quant_block_exponent(const float *x, size_t n)
{
    if (n == 0)
        return QUANT_EXP_ZERO;
    int nonfinite = 0;
    float mx = vec_f32_absmax(x, n, &nonfinite);
    if (nonfinite)
        return QUANT_EXP_NONFINITE;
    if (mx == 0.0f)
        return QUANT_EXP_ZERO;
    int e = 0;
    frexp((double)mx, &e); /* mx in [2^(e-1), 2^e) */
    if (e < QUANT_EXP_MIN)
        e = QUANT_EXP_MIN;
    if (e > QUANT_EXP_MAX)
        e = QUANT_EXP_MAX;
    return (int16_t)e;
}

/* ZERO is INT16_MIN and NONFINITE is INT16_MAX, so the plain max has both rules. */
int16_t quant_exp_max(int16_t a, int16_t b) { return a > b ? a : b; }

double quant_scale(int16_t m, uint32_t w)
{
    if (w == 0)
        w = 1;
    return ldexp((double)(QUANT_INT_MAX / w), -m);
}

void quant_encode(const float *x, uint32_t *out_be, size_t n, int16_t m, uint32_t w)
{
    if (quant_is_sentinel(m)) {
        if (n)
            memset(out_be, 0, n * sizeof(*out_be));
        return;
    }
    vec_f32_to_fixed_be(x, out_be, n, quant_scale(m, w));
}

void quant_decode(const uint32_t *in_be, float *out, size_t n, int16_t m, uint32_t w)
{
    if (m == QUANT_EXP_NONFINITE) {
        for (size_t i = 0; i < n; i++)
            out[i] = NAN;
        return;
    }
    if (m == QUANT_EXP_ZERO) {
        for (size_t i = 0; i < n; i++)
            out[i] = 0.0f;
        return;
    }
    vec_fixed_be_to_f32(in_be, out, n, 1.0 / quant_scale(m, w));
}

double quant_block_error(int16_t m, uint32_t w)
{
    if (w == 0)
        w = 1;
    return (double)w * (0.5 + 0x1p-20) / quant_scale(m, w);
}

double quant_error_bound_of_block(double block_error, double exact_abs)
{
    double mag = (fabs(exact_abs) + block_error) * (1.0 + 0x1p-48);
    if (!(mag < QUANT_FLOAT_OVERFLOW))
        return INFINITY;
    /* mag in [2^(e-1), 2^e): a float there has its ulp at 2^(e-24). e is frexp's exponent,
     * read from the bits of a normal double (frexp itself for zero and subnormals). */
    uint64_t bits;
    memcpy(&bits, &mag, sizeof(bits));
    int biased = (int)(bits >> 52) & 0x7ff, e = 0;
    if (biased == 0)
        frexp(mag, &e);
    else
        e = biased - 1022;
    int ue = e - 24 < -149 ? -149 : e - 24;
    uint64_t ub = (uint64_t)(ue + 1023) << 52;
    double ulp;
    memcpy(&ulp, &ub, sizeof(ulp));
    return block_error + 0.5 * ulp + mag * 0x1p-48;
}

double quant_error_bound(int16_t m, uint32_t w, double exact_abs)
{
    if (m == QUANT_EXP_ZERO)
        return 0.0;
    if (m == QUANT_EXP_NONFINITE)
        return INFINITY;
    return quant_error_bound_of_block(quant_block_error(m, w), exact_abs);
}
