/*
 * quant.h - block fixed-point quantization of float32 for integer aggregation (SwitchML,
 * section 4.6 and appendix E). For each packet-sized block the workers agree on an exponent m
 * (the switch takes the max of the workers' exponents), every worker scales its floats by
 * f = floor((2^31-1)/w) / 2^m and rounds them to int32, the switch sums the int32 words, and
 * the workers divide the sum by f. The floor makes the sum of w rounded values never exceed
 * 2^31-1 in magnitude, so the switch's int32 sum cannot overflow.
 *
 * Behaviour at the edges:
 *   - Every finite |x| < 2^m encodes to at most floor((2^31-1)/w) in magnitude.
 *   - -0.0 encodes to 0 and decodes to +0.0; an all -0.0 block is QUANT_EXP_ZERO.
 *   - Values below 0.5 / f in magnitude round to 0 (the error bound is absolute, relative to
 *     the block's largest value). Exponents are clamped to [QUANT_EXP_MIN, QUANT_EXP_MAX], so
 *     a block whose largest value is below 2^-96 (denormals included) gets m = -96 and its
 *     values below about w * 2^-128 round to 0.
 *   - A decoded sum beyond the float range is +-Inf (the exact sum of w floats can exceed it).
 */
#ifndef INAGG_QUANT_H
#define INAGG_QUANT_H

#include <stddef.h>
#include <stdint.h>

#define QUANT_EXP_ZERO INT16_MIN /* block is all zeros (or empty) */
#define QUANT_EXP_NONFINITE INT16_MAX /* block holds NaN or Inf */
#define QUANT_EXP_MIN (-96) /* exponents are clamped to [QUANT_EXP_MIN, QUANT_EXP_MAX] */
#define QUANT_EXP_MAX 128
/* An exponent that stands for a whole block (zeros, or NaN/Inf) rather than a scale. */
static inline int quant_is_sentinel(int16_t m)
{
    return m == QUANT_EXP_ZERO || m == QUANT_EXP_NONFINITE;
}
/* Rounding to float overflows to Inf from FLT_MAX + half an ulp of it on. */
#define QUANT_FLOAT_OVERFLOW (0x1p128 - 0x1p103)

/* Smallest m in [QUANT_EXP_MIN, QUANT_EXP_MAX] with every |x[i]| < 2^m; QUANT_EXP_ZERO for an
   all-zero or empty block; QUANT_EXP_NONFINITE if any element is NaN or +-Inf. */
int16_t quant_block_exponent(const float *x, size_t n);
/* Combine two exponents as the switch does: NONFINITE dominates, ZERO is the identity. */
int16_t quant_exp_max(int16_t a, int16_t b);
/* Scale for world size w (w >= 1; 0 is taken as 1) and agreed exponent m (not a sentinel):
   f = floor((2^31-1)/w) / 2^m. */
double quant_scale(int16_t m, uint32_t w);
/* Encode a block with the agreed exponent m: for a sentinel m writes n zero words, else
   vec_f32_to_fixed_be() with quant_scale(m, w). A non-sentinel m must lie in
   [QUANT_EXP_MIN, QUANT_EXP_MAX] and be >= this block's own quant_block_exponent(). */
void quant_encode(const float *x, uint32_t *out_be, size_t n, int16_t m, uint32_t w);
/* Decode a summed block: NaN everywhere for QUANT_EXP_NONFINITE, +0.0 everywhere for
   QUANT_EXP_ZERO, else vec_fixed_be_to_f32() with 1 / quant_scale(m, w). */
void quant_decode(const uint32_t *in_be, float *out, size_t n, int16_t m, uint32_t w);
/* Per-element error bound of the decoded sum of w blocks encoded with exponent m, against the
   exact sum whose magnitude is exact_abs:
       w * (0.5 + 2^-20) / f  +  0.5 * ulp_float(|exact| + that)  +  a relative 2^-48 slack
   (the 2^-20 covers the double rounding of the product before the integer rounding, the
   slack the double arithmetic of the decode). 0 for QUANT_EXP_ZERO; +Inf for
   QUANT_EXP_NONFINITE and where the decoded sum may round past the float range. */
double quant_error_bound(int16_t m, uint32_t w, double exact_abs);
/* The same bound in two steps, for a caller that checks many elements of one block (a
   benchmark's verifier): the block's quantization term w * (0.5 + 2^-20) / f once
   (m not a sentinel), then per element quant_error_bound_of_block(that, exact_abs), equal bit
   for bit to quant_error_bound(m, w, exact_abs) without its per-element scalbn and frexp. */
double quant_block_error(int16_t m, uint32_t w);
double quant_error_bound_of_block(double block_error, double exact_abs);

#endif /* INAGG_QUANT_H */
