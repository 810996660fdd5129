/*
 * vec.h - the vector kernels of the data path: byte order conversion between host and the
 * big-endian wire, block fixed-point conversion of float32, and the switch's element-wise
 * sums. Each kernel has a scalar and an AVX2 implementation, picked at run time from the CPU
 * on first use; both give bit-identical results.
 *
 * Wire words are 32-bit big-endian (network order). Pointers need no alignment beyond what
 * their type implies in practice: the kernels accept any address, even one that is not a
 * multiple of 4 (the scalar path reads and writes through memcpy, the AVX2 path with
 * unaligned loads and stores). Every length n may be 0 or any count. In-place use is allowed
 * only where a kernel says so; otherwise inputs and outputs must not overlap.
 *
 * The fixed-point conversions round to nearest, ties to even, and assume the default
 * floating-point environment (round-to-nearest, no flush-to-zero or denormals-are-zero).
 */
#ifndef INAGG_VEC_H
#define INAGG_VEC_H

#include <stddef.h>
#include <stdint.h>

/* Force the scalar implementation (on != 0) or go back to the best one the CPU supports. */
void vec_force_scalar(int on);
/* "avx2" or "scalar": the implementation the kernels now use. */
const char *vec_impl_name(void);

/* float32 -> block fixed point on the wire: out_be[i] = htonl((int32_t)nearbyint(in[i] * scale)),
   the product taken in double. The caller guarantees every |in[i] * scale| <= 2^31 - 1 and
   every in[i] finite. */
void vec_f32_to_fixed_be(const float *in, uint32_t *out_be, size_t n, double scale);
/* Wire fixed point -> float32: out[i] = (float)((double)(int32_t)ntohl(in_be[i]) * inv_scale),
   the product taken in double, then one rounding to float (overflow gives +-Inf). */
void vec_fixed_be_to_f32(const uint32_t *in_be, float *out, size_t n, double inv_scale);
/* Largest |in[i]| (0 for n == 0; -0.0 counts as 0). *nonfinite is set to 1 if any element is
   NaN or +-Inf, else 0; the value returned then is +Inf or a NaN, the same on every path. */
float vec_f32_absmax(const float *in, size_t n, int *nonfinite);

/* Host int32 <-> wire. */
void vec_i32_to_be(const int32_t *in, uint32_t *out_be, size_t n);
void vec_be_to_i32(const uint32_t *in_be, int32_t *out, size_t n);

/* Switch side, the first contribution to a slot: acc[i] = (int32_t)ntohl(in_be[i]). */
void vec_be_load_i32(int32_t *acc, const uint32_t *in_be, size_t n);
/* Switch side: acc[i] += (int32_t)ntohl(in_be[i]), wrapping around in two's complement.
   Returns 1 if the signed add overflowed in any element, else 0. */
int vec_be_add_i32(int32_t *acc, const uint32_t *in_be, size_t n);
/* Switch side, native float mode: acc[i] += the float whose bits are ntohl(in_be[i]). */
void vec_be_add_f32(float *acc, const uint32_t *in_be, size_t n);

/* Host float32 bits <-> wire, for the native float mode (bits are kept, NaN payloads too). */
void vec_f32_to_be(const float *in, uint32_t *out_be, size_t n);
void vec_be_to_f32(const uint32_t *in_be, float *out, size_t n);

/* In-place byte swap of 32-bit words (host <-> wire). */
void vec_bswap32_inplace(uint32_t *buf, size_t n);

/* In place: buf[i] = buf[i] / w with C integer division (truncation toward zero). w == -1
   negates with wrap-around (INT32_MIN stays INT32_MIN); w == 0 leaves buf unchanged. */
void vec_i32_div(int32_t *buf, size_t n, int32_t w);
/* In place: buf[i] = buf[i] * factor, in float. */
void vec_f32_scale(float *buf, size_t n, float factor);

#endif /* INAGG_VEC_H */
