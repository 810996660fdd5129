/*
 * vec.c - the vector kernels of vec.h: a portable scalar implementation of each, an AVX2 one
 * (compiled per function with the target attribute, so the rest of the build needs no -mavx2),
 * and the dispatch table that picks between them on first use.
 */
#include "lib/kernels/vec.h"

#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "lib/base/util.h"

#if defined(__x86_64__) || defined(__i386__)
#define VEC_HAVE_AVX2 1
#include <immintrin.h>
#else
#define VEC_HAVE_AVX2 0
#endif

struct vec_ops {
    const char *name;
    void (*f32_to_fixed_be)(const float *, uint32_t *, size_t, double);
    void (*fixed_be_to_f32)(const uint32_t *, float *, size_t, double);
    float (*f32_absmax)(const float *, size_t, int *);
    void (*bswap32)(const void *, void *, size_t);
    int (*be_add_i32)(int32_t *, const uint32_t *, size_t);
    void (*be_add_f32)(float *, const uint32_t *, size_t);
    void (*i32_div)(int32_t *, size_t, int32_t);
    void (*f32_scale)(float *, size_t, float);
};

/* ---- element access that tolerates any alignment ---- */

static inline uint32_t ld_u32(const void *p, size_t i)
{
    uint32_t v;
    memcpy(&v, (const unsigned char *)p + 4 * i, sizeof(v));
    return v;
}

static inline void st_u32(void *p, size_t i, uint32_t v)
{
    memcpy((unsigned char *)p + 4 * i, &v, sizeof(v));
}

static inline float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/* A float element: the same bytes as a word (memcpy's both ways compile to one move). */
static inline float ld_f32(const void *p, size_t i) { return bits_to_f32(ld_u32(p, i)); }

static inline void st_f32(void *p, size_t i, float v) { st_u32(p, i, f32_to_bits(v)); }

/* ---- scalar implementations ---- */

static void scalar_f32_to_fixed_be(const float *in, uint32_t *out_be, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) {
        int32_t q = (int32_t)nearbyint((double)ld_f32(in, i) * scale);
        st_u32(out_be, i, htonl((uint32_t)q));
    }
}

static void scalar_fixed_be_to_f32(const uint32_t *in_be, float *out, size_t n, double inv_scale)
{
    for (size_t i = 0; i < n; i++) {
        int32_t q = (int32_t)ntohl(ld_u32(in_be, i));
        st_f32(out, i, (float)((double)q * inv_scale));
    }
}

/* The absolute value's bits order like the value for every non-NaN float, and every NaN
   sorts above +Inf (0x7f800000), so one unsigned max gives both the result and the flag. */
static uint32_t scalar_absmax_bits(const float *in, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = ld_u32(in, i) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    return m;
}

static float scalar_f32_absmax(const float *in, size_t n, int *nonfinite)
{
    uint32_t m = scalar_absmax_bits(in, n);
    *nonfinite = m >= 0x7f800000u;
    return bits_to_f32(m);
}

static void scalar_bswap32(const void *in, void *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        st_u32(out, i, ntohl(ld_u32(in, i)));
}

static int scalar_be_add_i32(int32_t *acc, const uint32_t *in_be, size_t n)
{
    uint32_t ov = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = ld_u32(acc, i), b = ntohl(ld_u32(in_be, i));
        uint32_t s = a + b;
        ov |= (a ^ s) & (b ^ s);
        st_u32(acc, i, s);
    }
    return (int)(ov >> 31);
}

static void scalar_be_add_f32(float *acc, const uint32_t *in_be, size_t n)
{
    for (size_t i = 0; i < n; i++)
        st_f32(acc, i, ld_f32(acc, i) + bits_to_f32(ntohl(ld_u32(in_be, i))));
}

static void scalar_i32_div(int32_t *buf, size_t n, int32_t w)
{
    if (w == 0 || w == 1)
        return;
    if (w == -1) {
        for (size_t i = 0; i < n; i++)
            st_u32(buf, i, 0u - ld_u32(buf, i));
        return;
    }
    for (size_t i = 0; i < n; i++)
        st_u32(buf, i, (uint32_t)((int32_t)ld_u32(buf, i) / w));
}

static void scalar_f32_scale(float *buf, size_t n, float factor)
{
    for (size_t i = 0; i < n; i++)
        st_f32(buf, i, ld_f32(buf, i) * factor);
}

static const struct vec_ops g_scalar_ops = {
    .name = "scalar",
    .f32_to_fixed_be = scalar_f32_to_fixed_be,
    .fixed_be_to_f32 = scalar_fixed_be_to_f32,
    .f32_absmax = scalar_f32_absmax,
    .bswap32 = scalar_bswap32,
    .be_add_i32 = scalar_be_add_i32,
    .be_add_f32 = scalar_be_add_f32,
    .i32_div = scalar_i32_div,
    .f32_scale = scalar_f32_scale,
};

/* ---- AVX2 implementations: 8 lanes per step, the tail (< 8) through the scalar code ---- */

#if VEC_HAVE_AVX2
#define AVX2_FN __attribute__((target("avx2")))

AVX2_FN static inline __m256i avx2_bswap_mask(void)
{
    return _mm256_setr_epi8(3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8, 15, 14, 13, 12, 3, 2, 1, 0, 7, 6,
                            5, 4, 11, 10, 9, 8, 15, 14, 13, 12);
}

AVX2_FN static inline __m256i avx2_load(const void *p, size_t i)
{
    return _mm256_loadu_si256((const __m256i *)(const void *)((const unsigned char *)p + 4 * i));
}

AVX2_FN static inline void avx2_store(void *p, size_t i, __m256i v)
{
    _mm256_storeu_si256((__m256i *)(void *)((unsigned char *)p + 4 * i), v);
}

AVX2_FN static void avx2_f32_to_fixed_be(const float *in, uint32_t *out_be, size_t n, double scale)
{
    const __m256d vs = _mm256_set1_pd(scale);
    const __m256i bswap = avx2_bswap_mask();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_castsi256_ps(avx2_load(in, i));
        __m256d lo = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vs);
        __m256d hi = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vs);
        __m256i q = _mm256_set_m128i(_mm256_cvtpd_epi32(hi), _mm256_cvtpd_epi32(lo));
        avx2_store(out_be, i, _mm256_shuffle_epi8(q, bswap));
    }
    if (i < n)
        scalar_f32_to_fixed_be(in + i, out_be + i, n - i, scale);
}

AVX2_FN static void avx2_fixed_be_to_f32(const uint32_t *in_be, float *out, size_t n,
                                         double inv_scale)
{
    const __m256d vs = _mm256_set1_pd(inv_scale);
    const __m256i bswap = avx2_bswap_mask();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i q = _mm256_shuffle_epi8(avx2_load(in_be, i), bswap);
        __m256d lo = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(q)), vs);
        __m256d hi = _mm256_mul_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(q, 1)), vs);
        __m256 f = _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
        avx2_store(out, i, _mm256_castps_si256(f));
    }
    if (i < n)
        scalar_fixed_be_to_f32(in_be + i, out + i, n - i, inv_scale);
}

AVX2_FN static float avx2_f32_absmax(const float *in, size_t n, int *nonfinite)
{
    const __m256i absmask = _mm256_set1_epi32(0x7fffffff);
    __m256i m0 = _mm256_setzero_si256(), m1 = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(avx2_load(in, i), absmask));
        m1 = _mm256_max_epu32(m1, _mm256_and_si256(avx2_load(in, i + 8), absmask));
    }
    if (i + 8 <= n) {
        m0 = _mm256_max_epu32(m0, _mm256_and_si256(avx2_load(in, i), absmask));
        i += 8;
    }
    m0 = _mm256_max_epu32(m0, m1);
    __m128i h = _mm_max_epu32(_mm256_castsi256_si128(m0), _mm256_extracti128_si256(m0, 1));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
    h = _mm_max_epu32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
    uint32_t m = (uint32_t)_mm_cvtsi128_si32(h);
    uint32_t t = i < n ? scalar_absmax_bits(in + i, n - i) : 0;
    m = t > m ? t : m;
    *nonfinite = m >= 0x7f800000u;
    return bits_to_f32(m);
}

AVX2_FN static void avx2_bswap32(const void *in, void *out, size_t n)
{
    const __m256i bswap = avx2_bswap_mask();
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        avx2_store(out, i, _mm256_shuffle_epi8(avx2_load(in, i), bswap));
    if (i < n)
        scalar_bswap32((const unsigned char *)in + 4 * i, (unsigned char *)out + 4 * i, n - i);
}

AVX2_FN static int avx2_be_add_i32(int32_t *acc, const uint32_t *in_be, size_t n)
{
    const __m256i bswap = avx2_bswap_mask();
    __m256i ov = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i a = avx2_load(acc, i);
        __m256i b = _mm256_shuffle_epi8(avx2_load(in_be, i), bswap);
        __m256i s = _mm256_add_epi32(a, b);
        ov = _mm256_or_si256(ov, _mm256_and_si256(_mm256_xor_si256(a, s), _mm256_xor_si256(b, s)));
        avx2_store(acc, i, s);
    }
    int flag = _mm256_movemask_ps(_mm256_castsi256_ps(ov)) != 0;
    if (i < n)
        flag |= scalar_be_add_i32(acc + i, in_be + i, n - i);
    return flag;
}

AVX2_FN static void avx2_be_add_f32(float *acc, const uint32_t *in_be, size_t n)
{
    const __m256i bswap = avx2_bswap_mask();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_castsi256_ps(avx2_load(acc, i));
        __m256 b = _mm256_castsi256_ps(_mm256_shuffle_epi8(avx2_load(in_be, i), bswap));
        avx2_store(acc, i, _mm256_castps_si256(_mm256_add_ps(a, b)));
    }
    if (i < n)
        scalar_be_add_f32(acc + i, in_be + i, n - i);
}

/* Integer division through double is exact for int32: the quotient of two int32 rounded to
   double stays within 1/|w| of the true one, closer than any integer it could cross. */
AVX2_FN static void avx2_i32_div(int32_t *buf, size_t n, int32_t w)
{
    if (w == 0 || w == 1 || w == -1) {
        scalar_i32_div(buf, n, w);
        return;
    }
    const __m256d vw = _mm256_set1_pd((double)w);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i a = avx2_load(buf, i);
        __m256d lo = _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_castsi256_si128(a)), vw);
        __m256d hi = _mm256_div_pd(_mm256_cvtepi32_pd(_mm256_extracti128_si256(a, 1)), vw);
        avx2_store(buf, i, _mm256_set_m128i(_mm256_cvttpd_epi32(hi), _mm256_cvttpd_epi32(lo)));
    }
    if (i < n)
        scalar_i32_div(buf + i, n - i, w);
}

AVX2_FN static void avx2_f32_scale(float *buf, size_t n, float factor)
{
    const __m256 vf = _mm256_set1_ps(factor);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_castsi256_ps(avx2_load(buf, i));
        avx2_store(buf, i, _mm256_castps_si256(_mm256_mul_ps(a, vf)));
    }
    if (i < n)
        scalar_f32_scale(buf + i, n - i, factor);
}

static const struct vec_ops g_avx2_ops = {
    .name = "avx2",
    .f32_to_fixed_be = avx2_f32_to_fixed_be,
    .fixed_be_to_f32 = avx2_fixed_be_to_f32,
    .f32_absmax = avx2_f32_absmax,
    .bswap32 = avx2_bswap32,
    .be_add_i32 = avx2_be_add_i32,
    .be_add_f32 = avx2_be_add_f32,
    .i32_div = avx2_i32_div,
    .f32_scale = avx2_f32_scale,
};
#endif /* VEC_HAVE_AVX2 */

/* ---- dispatch ---- */

static pthread_once_t g_detect_once = PTHREAD_ONCE_INIT;
static const struct vec_ops *g_best_ops = &g_scalar_ops; /* written once, under g_detect_once */
static _Atomic(const struct vec_ops *) g_ops; /* NULL until first use */

static void vec_detect(void)
{
#if VEC_HAVE_AVX2
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        g_best_ops = &g_avx2_ops;
#endif
}

static const struct vec_ops *vec_best(void)
{
    pthread_once(&g_detect_once, vec_detect);
    return g_best_ops;
}

static const struct vec_ops *vec_init(void)
{
    const struct vec_ops *expected = NULL;
    const struct vec_ops *best = vec_best();
    /* A concurrent vec_force_scalar() that got there first wins. */
    if (atomic_compare_exchange_strong(&g_ops, &expected, best))
        return best;
    return expected;
}

static inline const struct vec_ops *vec_current(void)
{
    const struct vec_ops *o = atomic_load_explicit(&g_ops, memory_order_acquire);
    if (INAGG_UNLIKELY(o == NULL))
        o = vec_init();
    return o;
}

void vec_force_scalar(int on) { atomic_store(&g_ops, on ? &g_scalar_ops : vec_best()); }

const char *vec_impl_name(void) { return vec_current()->name; }

/* ---- the public kernels ---- */

void vec_f32_to_fixed_be(const float *in, uint32_t *out_be, size_t n, double scale)
{
    vec_current()->f32_to_fixed_be(in, out_be, n, scale);
}

void vec_fixed_be_to_f32(const uint32_t *in_be, float *out, size_t n, double inv_scale)
{
    vec_current()->fixed_be_to_f32(in_be, out, n, inv_scale);
}

float vec_f32_absmax(const float *in, size_t n, int *nonfinite)
{
    return vec_current()->f32_absmax(in, n, nonfinite);
}

void vec_i32_to_be(const int32_t *in, uint32_t *out_be, size_t n)
{
    vec_current()->bswap32(in, out_be, n);
}

void vec_be_to_i32(const uint32_t *in_be, int32_t *out, size_t n)
{
    vec_current()->bswap32(in_be, out, n);
}

void vec_be_load_i32(int32_t *acc, const uint32_t *in_be, size_t n)
{
    vec_current()->bswap32(in_be, acc, n);
}

int vec_be_add_i32(int32_t *acc, const uint32_t *in_be, size_t n)
{
    return vec_current()->be_add_i32(acc, in_be, n);
}

void vec_be_add_f32(float *acc, const uint32_t *in_be, size_t n)
{
    vec_current()->be_add_f32(acc, in_be, n);
}

void vec_f32_to_be(const float *in, uint32_t *out_be, size_t n)
{
    vec_current()->bswap32(in, out_be, n);
}

void vec_be_to_f32(const uint32_t *in_be, float *out, size_t n)
{
    vec_current()->bswap32(in_be, out, n);
}

void vec_bswap32_inplace(uint32_t *buf, size_t n) { vec_current()->bswap32(buf, buf, n); }

void vec_i32_div(int32_t *buf, size_t n, int32_t w) { vec_current()->i32_div(buf, n, w); }

void vec_f32_scale(float *buf, size_t n, float factor) { vec_current()->f32_scale(buf, n, factor); }
