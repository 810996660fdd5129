/*
 * zfp3.c - libzfp 1.0's fixed-rate 3-D float block format (see zfp3.h), coded directly: the
 * block exponent, the block-floating-point cast, the separable lifting transform along x, y
 * and z, the coefficients in increasing sequency as negabinary, and the embedded bit-plane
 * code with its group tests, cut at the block's budget of 64R bits.
 */
#include "lib/codec/zfp3.h"

#include <math.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define NB_MASK 0xaaaaaaaau /* negabinary: alternate bits */
#define EXP_BIAS 127
#define MIN_SCALED_EXP (-97) /* 2^(30 - emax) still a float */

/* The ZFP format's order of the 64 coefficients (x + 4y + 16z): by sequency i + j + k, the
 * order every ZFP coder shares. */
static const uint8_t k_order[64] = {0,  1,  4,  16, 20, 17, 5,  2,  8,  32, 21, 6,  18, 24, 9,  33,
                                    36, 3,  12, 48, 22, 25, 37, 40, 34, 10, 7,  19, 28, 13, 49, 52,
                                    41, 38, 26, 23, 29, 53, 11, 35, 44, 14, 50, 56, 42, 27, 39, 45,
                                    30, 54, 57, 60, 51, 15, 43, 46, 58, 61, 55, 31, 62, 59, 47, 63};

/* ---- bits, least significant first, into and out of whole 64-bit words ----------------- */

typedef struct {
    uint64_t *w;
    uint64_t acc;
    unsigned fill; /* bits in acc */
} bit_writer_t;

static inline void put(bit_writer_t *b, uint64_t v, unsigned n) /* the low n (0..64) bits of v */
{
    if (n == 0)
        return;
    if (n < 64)
        v &= ((uint64_t)1 << n) - 1u;
    b->acc |= v << b->fill;
    if (b->fill + n >= 64) {
        *b->w++ = b->acc;
        unsigned used = 64 - b->fill;
        b->acc = used < 64 ? v >> used : 0;
        b->fill = b->fill + n - 64;
    } else {
        b->fill += n;
    }
}

typedef struct {
    const uint64_t *w;
    const uint64_t *end;
    uint64_t cur; /* the current word, consumed bits shifted out */
    unsigned left; /* bits left in cur */
} bit_reader_t;

static inline uint64_t next_word(bit_reader_t *b) { return b->w < b->end ? *b->w++ : 0; }

static inline uint64_t get(bit_reader_t *b, unsigned n) /* n (0..64) bits */
{
    if (n == 0)
        return 0;
    if (n <= b->left) {
        uint64_t v = n < 64 ? b->cur & (((uint64_t)1 << n) - 1u) : b->cur;
        b->cur = n < 64 ? b->cur >> n : 0;
        b->left -= n;
        return v;
    }
    uint64_t v = b->cur, nw = next_word(b);
    unsigned have = b->left, more = n - have;
    v |= (more < 64 ? nw & (((uint64_t)1 << more) - 1u) : nw) << have;
    b->cur = more < 64 ? nw >> more : 0;
    b->left = 64 - more;
    return v;
}

/* The next n (1..63) bits without consuming them. */
static inline uint64_t peek(bit_reader_t *b, unsigned n)
{
    uint64_t v = b->cur;
    if (n > b->left && b->w < b->end)
        v |= *b->w << b->left;
    return v & (((uint64_t)1 << n) - 1u);
}

static inline void skip(bit_reader_t *b, unsigned n) { (void)get(b, n); }

/* ---- transform ---------------------------------------------------------------------------- */

static inline void fwd_lift(int32_t *p, unsigned s)
{
    int32_t x = p[0], y = p[s], z = p[2 * s], w = p[3 * s];
    x += w;
    x >>= 1;
    w -= x;
    z += y;
    z >>= 1;
    y -= z;
    x += z;
    x >>= 1;
    z -= x;
    w += y;
    w >>= 1;
    y -= w;
    w += y >> 1;
    y -= w >> 1;
    p[0] = x;
    p[s] = y;
    p[2 * s] = z;
    p[3 * s] = w;
}

static inline uint32_t asr(uint32_t v, unsigned k) { return (uint32_t)((int32_t)v >> k); }

/* The inverse on wrapping 32-bit words: a decoded block may hold any bits. */
static inline void inv_lift(uint32_t *p, unsigned s)
{
    uint32_t x = p[0], y = p[s], z = p[2 * s], w = p[3 * s];
    y += asr(w, 1);
    w -= asr(y, 1);
    y += w;
    w <<= 1;
    w -= y;
    z += x;
    x <<= 1;
    x -= z;
    y += z;
    z <<= 1;
    z -= y;
    w += x;
    x <<= 1;
    x -= w;
    p[0] = x;
    p[s] = y;
    p[2 * s] = z;
    p[3 * s] = w;
}

static void fwd_xform(int32_t *p)
{
    for (unsigned i = 0; i < 16; i++)
        fwd_lift(p + 4 * i, 1); /* along x */
    for (unsigned z = 0; z < 4; z++)
        for (unsigned x = 0; x < 4; x++)
            fwd_lift(p + 16 * z + x, 4); /* along y */
    for (unsigned i = 0; i < 16; i++)
        fwd_lift(p + i, 16); /* along z */
}

static void inv_xform(uint32_t *p)
{
    for (unsigned i = 0; i < 16; i++)
        inv_lift(p + i, 16);
    for (unsigned z = 0; z < 4; z++)
        for (unsigned x = 0; x < 4; x++)
            inv_lift(p + 16 * z + x, 4);
    for (unsigned i = 0; i < 16; i++)
        inv_lift(p + 4 * i, 1);
}

/* ---- bit planes --------------------------------------------------------------------------- */

/* Bit k of u[0..64) as one word, bit i from u[i]. */
static inline uint64_t plane(const uint32_t *u, unsigned k)
{
#ifdef __SSE2__
    uint64_t x = 0;
    __m128i sh = _mm_cvtsi32_si128((int)(31 - k));
    for (unsigned i = 0; i < 64; i += 4) {
        __m128i v = _mm_sll_epi32(_mm_loadu_si128((const __m128i *)(u + i)), sh);
        x |= (uint64_t)(unsigned)_mm_movemask_ps(_mm_castsi128_ps(v)) << i;
    }
    return x;
#else
    uint64_t x = 0;
    for (unsigned i = 0; i < 64; i++)
        x |= (uint64_t)((u[i] >> k) & 1u) << i;
    return x;
#endif
}

/* The planes from the top while the budget lasts: the first n bits of a plane verbatim (the
 * values already significant), then group tests, each 1 followed by the run to the next one. */
static void encode_planes(bit_writer_t *b, const uint32_t *u, unsigned bits)
{
    unsigned n = 0;
    for (unsigned k = 32; bits && k-- > 0;) {
        uint64_t x = plane(u, k);
        unsigned m = n < bits ? n : bits;
        put(b, x, m);
        bits -= m;
        x = m < 64 ? x >> m : 0;
        while (bits && n < 64) {
            bits--;
            if (!x) {
                put(b, 0, 1);
                break;
            }
            put(b, 1, 1);
            unsigned lim = 63 - n, z = (unsigned)__builtin_ctzll(x);
            if (z >= lim) { /* the run reaches value 63, which is then a one without a bit */
                unsigned r = bits < lim ? bits : lim;
                put(b, 0, r);
                bits -= r;
                x = 0;
                n = 64;
            } else if (bits <= z) {
                put(b, 0, bits);
                bits = 0;
            } else {
                put(b, (uint64_t)1 << z, z + 1);
                bits -= z + 1;
                x >>= z + 1;
                n += z + 1;
            }
        }
    }
}

static void decode_planes(bit_reader_t *b, uint32_t *u, unsigned bits)
{
    memset(u, 0, 64 * sizeof(*u));
    unsigned n = 0;
    for (unsigned k = 32; bits && k-- > 0;) {
        unsigned m = n < bits ? n : bits;
        uint64_t x = get(b, m);
        bits -= m;
        while (n < 64 && bits) {
            bits--;
            if (!get(b, 1))
                break;
            unsigned lim = 63 - n, avail = bits < lim ? bits : lim;
            uint64_t p = avail ? peek(b, avail) : 0;
            if (p) {
                unsigned z = (unsigned)__builtin_ctzll(p);
                skip(b, z + 1);
                bits -= z + 1;
                n += z;
            } else {
                skip(b, avail);
                bits -= avail;
                n += avail;
            }
            x += (uint64_t)1 << n;
            n++;
        }
        for (; x; x &= x - 1u)
            u[__builtin_ctzll(x)] += (uint32_t)1 << k;
    }
}

/* ---- blocks ------------------------------------------------------------------------------- */

/* The largest |x[i]| of a block (finite values). */
static float max_abs(const float *x)
{
#ifdef __SSE2__
    __m128 sign = _mm_set1_ps(-0.0f), m0 = _mm_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    for (unsigned i = 0; i < 64; i += 16) {
        m0 = _mm_max_ps(m0, _mm_andnot_ps(sign, _mm_loadu_ps(x + i)));
        m1 = _mm_max_ps(m1, _mm_andnot_ps(sign, _mm_loadu_ps(x + i + 4)));
        m2 = _mm_max_ps(m2, _mm_andnot_ps(sign, _mm_loadu_ps(x + i + 8)));
        m3 = _mm_max_ps(m3, _mm_andnot_ps(sign, _mm_loadu_ps(x + i + 12)));
    }
    float lane[4];
    _mm_storeu_ps(lane, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
    float max = lane[0];
    for (unsigned i = 1; i < 4; i++)
        max = lane[i] > max ? lane[i] : max;
    return max;
#else
    float max = 0;
    for (unsigned i = 0; i < 64; i++) {
        float f = fabsf(x[i]);
        if (max < f)
            max = f;
    }
    return max;
#endif
}

int zfp3_encode_block(const float *x, uint64_t *words, unsigned rate)
{
    float max = max_abs(x);
    bit_writer_t b = {words, 0, 0};
    unsigned budget = 64u * rate;
    if (max > 0) {
        int emax;
        frexpf(max, &emax);
        if (emax < MIN_SCALED_EXP)
            return -1;
        put(&b, 2u * (unsigned)(emax + EXP_BIAS) + 1u, 9);
        float s = ldexpf(1.0f, 30 - emax);
        int32_t ib[64];
        for (unsigned i = 0; i < 64; i++)
            ib[i] = (int32_t)(s * x[i]);
        fwd_xform(ib);
        uint32_t u[64];
        for (unsigned i = 0; i < 64; i++)
            u[i] = ((uint32_t)ib[k_order[i]] + NB_MASK) ^ NB_MASK;
        encode_planes(&b, u, budget - 9);
    } else {
        put(&b, 0, 1); /* all zero */
    }
    if (b.fill)
        *b.w++ = b.acc;
    while (b.w < words + rate)
        *b.w++ = 0; /* fixed rate: pad to the budget */
    return 0;
}

void zfp3_decode_block(const uint64_t *words, unsigned rate, float *x)
{
    bit_reader_t b = {words, words + rate, 0, 0};
    if (!get(&b, 1)) {
        memset(x, 0, 64 * sizeof(*x));
        return;
    }
    int emax = (int)get(&b, 8) - EXP_BIAS;
    uint32_t u[64], ib[64];
    decode_planes(&b, u, 64u * rate - 9);
    for (unsigned i = 0; i < 64; i++)
        ib[k_order[i]] = (u[i] ^ NB_MASK) - NB_MASK;
    inv_xform(ib);
    float s = ldexpf(1.0f, emax - 30);
    for (unsigned i = 0; i < 64; i++)
        x[i] = s * (float)(int32_t)ib[i];
}
