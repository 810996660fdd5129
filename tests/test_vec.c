/*
 * test_vec.c - the vector kernels: every kernel on the scalar and the native (AVX2 where the
 * CPU has it) path gives bit-identical results that match a reference written here, over many
 * lengths and misaligned pointers; the add-overflow flag, the non-finite flag of absmax and
 * the wire byte order are checked on crafted inputs.
 */
#include <arpa/inet.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/kernels/vec.h"

static const size_t k_lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 1000, 4097};
/* Byte offsets from a 64-byte aligned base: aligned, off by whole words, and off by bytes. */
static const size_t k_offs[] = {0, 4, 12, 28, 1, 2, 3};

#define NPATH 2 /* path 0: scalar, path 1: native */

struct buf {
    unsigned char *base;
    void *p;
};

static void buf_alloc(struct buf *b, size_t n, size_t off)
{
    b->base = aligned_alloc(64, (n * 4 + off + 64 + 63) / 64 * 64);
    CHECK(b->base != NULL);
    b->p = b->base + off;
}

static void buf_free(struct buf *b) { free(b->base); }

static uint32_t rd32(const void *p, size_t i)
{
    uint32_t v;
    memcpy(&v, (const unsigned char *)p + 4 * i, 4);
    return v;
}

static void wr32(void *p, size_t i, uint32_t v) { memcpy((unsigned char *)p + 4 * i, &v, 4); }

static float rdf(const void *p, size_t i)
{
    float v;
    memcpy(&v, (const unsigned char *)p + 4 * i, 4);
    return v;
}

static void wrf(void *p, size_t i, float v) { memcpy((unsigned char *)p + 4 * i, &v, 4); }

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

static void use_path(int path) { vec_force_scalar(path == 0); }

/* A float with a random sign, mantissa and an exponent in [emin, emax] (denormal below -126). */
static float rand_float(util_rng_t *r, int emin, int emax)
{
    uint64_t x = util_rng_next(r);
    int e = emin + (int)(x % (uint64_t)(emax - emin + 1));
    double mant = 1.0 + util_rng_double(r);
    float f = (float)ldexp(mant, e);
    return (x >> 40) & 1 ? -f : f;
}

static void fill_words(util_rng_t *r, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wr32(p, i, (uint32_t)util_rng_next(r));
}

/* Compare a path's output buffer with the scalar one, byte for byte. */
static void check_same(const struct buf *out, size_t n, size_t len, size_t off)
{
    CHECK_MSG(memcmp(out[0].p, out[1].p, n * 4) == 0,
              "scalar and native paths differ (n=%zu, off=%zu)", len, off);
}

TEST(vec_impl_selection, 5)
{
    vec_force_scalar(1);
    CHECK(strcmp(vec_impl_name(), "scalar") == 0);
    vec_force_scalar(0);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2"))
        CHECK(strcmp(vec_impl_name(), "avx2") == 0);
    else
        CHECK(strcmp(vec_impl_name(), "scalar") == 0);
}

TEST(vec_byte_order_is_big_endian, 5)
{
    for (int path = 0; path < NPATH; path++) {
        use_path(path);
        int32_t iv[9] = {0x01020304, -1, 0, 1, INT32_MIN, INT32_MAX, 0x7f, 0x100, 0x0a0b0c0d};
        uint32_t be[9];
        vec_i32_to_be(iv, be, 9);
        const unsigned char *b = (const unsigned char *)be;
        CHECK(b[0] == 1 && b[1] == 2 && b[2] == 3 && b[3] == 4);
        CHECK(b[32] == 0x0a && b[33] == 0x0b && b[34] == 0x0c && b[35] == 0x0d);
        CHECK(b[16] == 0x80 && b[17] == 0 && b[18] == 0 && b[19] == 0);
        int32_t back[9];
        vec_be_to_i32(be, back, 9);
        CHECK(memcmp(back, iv, sizeof(iv)) == 0);

        float fv[9] = {1.0f, -2.0f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
        vec_f32_to_be(fv, be, 9);
        CHECK(b[0] == 0x3f && b[1] == 0x80 && b[2] == 0 && b[3] == 0);
        CHECK(b[4] == 0xc0 && b[5] == 0 && b[6] == 0 && b[7] == 0);

        float fx[9] = {1.5f, -1.0f, 0.25f, 0, 0, 0, 0, 0, 2.0f};
        vec_f32_to_fixed_be(fx, be, 9, 2.0);
        CHECK(b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 3);
        CHECK(b[4] == 0xff && b[5] == 0xff && b[6] == 0xff && b[7] == 0xfe);
        CHECK(b[32] == 0 && b[33] == 0 && b[34] == 0 && b[35] == 4);

        unsigned char wire[36] = {0, 0, 1, 0, 0xff, 0xff, 0xff, 0xff};
        wire[32] = 0x12, wire[33] = 0x34, wire[34] = 0x56, wire[35] = 0x78;
        int32_t acc[9];
        vec_be_load_i32(acc, (const uint32_t *)(const void *)wire, 9);
        CHECK_EQ_INT(acc[0], 256);
        CHECK_EQ_INT(acc[1], -1);
        CHECK_EQ_INT(acc[8], 0x12345678);
        uint32_t words[9];
        memcpy(words, wire, sizeof(words));
        vec_bswap32_inplace(words, 9);
        CHECK_EQ_INT(words[0], 256);
        CHECK_EQ_INT(words[8], 0x12345678);
    }
}

TEST(vec_fixed_rounding_half_even, 5)
{
    /* Ties go to even; the product is taken in double (a float product would round 2^30-ish
       values to a multiple of 64 or 128 before the integer rounding). */
    const float in[10] = {0.5f,  1.5f,        2.5f,  -0.5f,         -1.5f,
                          -2.5f, 3.49999976f, -0.0f, 1073741760.0f, -1073741760.0f};
    const int32_t want1[10] = {0, 2, 2, 0, -2, -2, 3, 0, 1073741760, -1073741760};
    const double scale2 = 1.9999999;
    for (int path = 0; path < NPATH; path++) {
        use_path(path);
        uint32_t be[10];
        vec_f32_to_fixed_be(in, be, 10, 1.0);
        for (int i = 0; i < 10; i++)
            CHECK_EQ_INT((int32_t)ntohl(be[i]), want1[i]);
        vec_f32_to_fixed_be(in + 8, be, 2, scale2);
        CHECK_EQ_INT((int32_t)ntohl(be[0]), 2147483413);
        CHECK_EQ_INT((int32_t)ntohl(be[1]), -2147483413);
        float big[16];
        for (int i = 0; i < 16; i++)
            big[i] = i % 2 ? -1.0f : 1.0f;
        vec_f32_to_fixed_be(big, be, 10, 2147483647.0);
        CHECK_EQ_INT((int32_t)ntohl(be[0]), INT32_MAX);
        CHECK_EQ_INT((int32_t)ntohl(be[1]), -INT32_MAX);
    }
}

TEST(vec_f32_to_fixed_paths_agree, 20)
{
    static const double scales[] = {
        1.0, 3.0, 0.5, 1e-3, 715827882.0, 2147483647.0, 2147483647.0 / 3.0, 0x1p100};
    util_rng_t r;
    util_rng_seed(&r, 11);
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
            for (size_t si = 0; si < INAGG_ARRAY_LEN(scales); si++) {
                size_t n = k_lens[li], off = k_offs[oi];
                double scale = scales[si];
                /* Largest float magnitude that keeps |in * scale| <= 2^31 - 1. */
                double lim = 2147483647.0 / scale;
                struct buf in, out[NPATH];
                buf_alloc(&in, n, off);
                for (size_t i = 0; i < n; i++) {
                    double v;
                    switch (util_rng_next(&r) % 4) {
                        case 0: v = (util_rng_double(&r) * 2 - 1) * lim; break;
                        case 1:
                            v = ldexp(util_rng_double(&r) - 0.5, -(int)(util_rng_next(&r) % 40)) *
                                lim;
                            break;
                        case 2: /* ties when the scale is a power of two */
                            v = ((double)((int64_t)(util_rng_next(&r) % 200) - 100) + 0.5) / scale;
                            break;
                        default: v = rand_float(&r, -149, -100); break;
                    }
                    float f = (float)v;
                    if (fabs((double)f * scale) > 2147483647.0)
                        f = 0.0f;
                    wrf(in.p, i, f);
                }
                for (int path = 0; path < NPATH; path++) {
                    use_path(path);
                    buf_alloc(&out[path], n, (off * 3) % 8);
                    vec_f32_to_fixed_be(in.p, out[path].p, n, scale);
                }
                check_same(out, n, n, off);
                for (size_t i = 0; i < n; i++) {
                    int32_t want = (int32_t)nearbyint((double)rdf(in.p, i) * scale);
                    CHECK_EQ_INT((int32_t)ntohl(rd32(out[0].p, i)), want);
                }
                buf_free(&in);
                for (int path = 0; path < NPATH; path++)
                    buf_free(&out[path]);
            }
        }
    }
}

TEST(vec_fixed_to_f32_paths_agree, 20)
{
    static const double inv[] = {1.0,     1.0 / 3.0, 0x1p-31,          1e30 / 2147483647.0,
                                 0x1p100, 0x1p-140,  1.0 / 715827882.0};
    util_rng_t r;
    util_rng_seed(&r, 12);
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
            for (size_t si = 0; si < INAGG_ARRAY_LEN(inv); si++) {
                size_t n = k_lens[li], off = k_offs[oi];
                struct buf in, out[NPATH];
                buf_alloc(&in, n, off);
                fill_words(&r, in.p, n);
                if (n > 2) {
                    wr32(in.p, 0, htonl(0x80000000u));
                    wr32(in.p, n - 1, htonl(0x7fffffffu));
                }
                for (int path = 0; path < NPATH; path++) {
                    use_path(path);
                    buf_alloc(&out[path], n, (off * 5) % 8);
                    vec_fixed_be_to_f32(in.p, out[path].p, n, inv[si]);
                }
                check_same(out, n, n, off);
                for (size_t i = 0; i < n; i++) {
                    float want = (float)((double)(int32_t)ntohl(rd32(in.p, i)) * inv[si]);
                    CHECK(f2u(rdf(out[0].p, i)) == f2u(want));
                }
                buf_free(&in);
                for (int path = 0; path < NPATH; path++)
                    buf_free(&out[path]);
            }
        }
    }
}

TEST(vec_absmax_paths_agree, 20)
{
    util_rng_t r;
    util_rng_seed(&r, 13);
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
            size_t n = k_lens[li], off = k_offs[oi];
            struct buf in;
            buf_alloc(&in, n, off);
            for (size_t i = 0; i < n; i++)
                wrf(in.p, i, rand_float(&r, -149, 127));
            if (n > 3)
                wrf(in.p, n / 2, -0.0f);
            float want = 0.0f;
            for (size_t i = 0; i < n; i++)
                want = fmaxf(want, fabsf(rdf(in.p, i)));
            for (int path = 0; path < NPATH; path++) {
                use_path(path);
                int nf = -1;
                float got = vec_f32_absmax(in.p, n, &nf);
                CHECK_EQ_INT(nf, 0);
                CHECK(f2u(got) == f2u(want));
            }
            buf_free(&in);
        }
    }
    int nf = -1;
    CHECK(vec_f32_absmax(NULL, 0, &nf) == 0.0f && nf == 0);
    const float small[3] = {-0.0f, 0x1p-149f, -0x1p-140f};
    CHECK(vec_f32_absmax(small, 3, &nf) == 0x1p-140f && nf == 0);
}

TEST(vec_absmax_nonfinite_anywhere, 20)
{
    const float bad[4] = {NAN, INFINITY, -INFINITY, -NAN};
    util_rng_t r;
    util_rng_seed(&r, 14);
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        size_t n = k_lens[li];
        if (n == 0)
            continue;
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
            size_t off = k_offs[oi];
            struct buf in;
            buf_alloc(&in, n, off);
            size_t pos[5] = {0, n / 2, n - 1, n > 8 ? n - 8 : 0, n > 9 ? (n & ~(size_t)7) - 1 : 0};
            for (size_t pi = 0; pi < 5; pi++) {
                for (size_t bi = 0; bi < 4; bi++) {
                    for (size_t i = 0; i < n; i++)
                        wrf(in.p, i, rand_float(&r, -20, 127));
                    wrf(in.p, pos[pi], bad[bi]);
                    uint32_t bits[NPATH];
                    for (int path = 0; path < NPATH; path++) {
                        use_path(path);
                        int nf = -1;
                        float got = vec_f32_absmax(in.p, n, &nf);
                        CHECK_MSG(nf == 1, "path %d n=%zu pos=%zu kind=%zu", path, n, pos[pi], bi);
                        CHECK(isnan(bad[bi]) ? isnan(got) : got == INFINITY);
                        bits[path] = f2u(got);
                    }
                    CHECK(bits[0] == bits[1]);
                }
            }
            buf_free(&in);
        }
    }
}

/* The byte-swapping kernels, with the reference ntohl of every word. */
enum swap_kind { SW_I32_TO_BE, SW_BE_TO_I32, SW_LOAD, SW_F32_TO_BE, SW_BE_TO_F32, SW_INPLACE };

static void run_swap(enum swap_kind k, const void *in, void *out, size_t n)
{
    switch (k) {
        case SW_I32_TO_BE: vec_i32_to_be(in, out, n); break;
        case SW_BE_TO_I32: vec_be_to_i32(in, out, n); break;
        case SW_LOAD: vec_be_load_i32(out, in, n); break;
        case SW_F32_TO_BE: vec_f32_to_be(in, out, n); break;
        case SW_BE_TO_F32: vec_be_to_f32(in, out, n); break;
        case SW_INPLACE:
            memcpy(out, in, n * 4);
            vec_bswap32_inplace(out, n);
            break;
    }
}

TEST(vec_byteswap_kernels_paths_agree, 20)
{
    util_rng_t r;
    util_rng_seed(&r, 15);
    for (int k = SW_I32_TO_BE; k <= SW_INPLACE; k++) {
        for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
            for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
                size_t n = k_lens[li], off = k_offs[oi];
                struct buf in, out[NPATH];
                buf_alloc(&in, n, off);
                fill_words(&r, in.p, n);
                for (int path = 0; path < NPATH; path++) {
                    use_path(path);
                    buf_alloc(&out[path], n, (off + 1) % 8);
                    run_swap((enum swap_kind)k, in.p, out[path].p, n);
                }
                check_same(out, n, n, off);
                for (size_t i = 0; i < n; i++)
                    CHECK(rd32(out[0].p, i) == ntohl(rd32(in.p, i)));
                buf_free(&in);
                for (int path = 0; path < NPATH; path++)
                    buf_free(&out[path]);
            }
        }
    }
}

/* acc[i] += in[i] on both paths from the same start; checks the sum and the flag against a
   64-bit reference and returns the flag. */
static int add_i32_both(const int32_t *acc0, const int32_t *add, size_t n, size_t off)
{
    struct buf acc[NPATH], in;
    buf_alloc(&in, n, (off + 2) % 8);
    for (size_t i = 0; i < n; i++)
        wr32(in.p, i, htonl((uint32_t)add[i]));
    int flags[NPATH];
    for (int path = 0; path < NPATH; path++) {
        use_path(path);
        buf_alloc(&acc[path], n, off);
        if (n)
            memcpy(acc[path].p, acc0, n * 4);
        flags[path] = vec_be_add_i32(acc[path].p, in.p, n);
    }
    check_same(acc, n, n, off);
    CHECK_EQ_INT(flags[0], flags[1]);
    int want_flag = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t s = (int64_t)acc0[i] + add[i];
        if (s > INT32_MAX || s < INT32_MIN)
            want_flag = 1;
        CHECK(rd32(acc[0].p, i) == (uint32_t)s);
    }
    CHECK_EQ_INT(flags[0], want_flag);
    buf_free(&in);
    for (int path = 0; path < NPATH; path++)
        buf_free(&acc[path]);
    return flags[0];
}

TEST(vec_add_i32_paths_agree, 20)
{
    util_rng_t r;
    util_rng_seed(&r, 16);
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
            size_t n = k_lens[li], off = k_offs[oi];
            int32_t *a = malloc(n * 4 + 4), *b = malloc(n * 4 + 4);
            CHECK(a && b);
            for (int round = 0; round < 2; round++) {
                /* Round 0: full range (overflows likely); round 1: halves (never overflow). */
                for (size_t i = 0; i < n; i++) {
                    a[i] = (int32_t)(uint32_t)util_rng_next(&r);
                    b[i] = (int32_t)(uint32_t)util_rng_next(&r);
                    if (round == 1) {
                        a[i] /= 2;
                        b[i] /= 2;
                    }
                }
                int flag = add_i32_both(a, b, n, off);
                if (round == 1)
                    CHECK_EQ_INT(flag, 0);
            }
            free(a);
            free(b);
        }
    }
}

TEST(vec_add_i32_overflow_flag, 20)
{
    static const int32_t ov_pairs[][2] = {{INT32_MAX, 1},           {INT32_MIN, -1},
                                          {INT32_MAX, INT32_MAX},   {INT32_MIN, INT32_MIN},
                                          {1073741824, 1073741824}, {-1073741825, -1073741824}};
    static const int32_t ok_pairs[][2] = {{INT32_MAX, 0},
                                          {INT32_MAX, -1},
                                          {INT32_MIN, 1},
                                          {INT32_MIN, INT32_MAX},
                                          {INT32_MIN, 0},
                                          {1073741823, 1073741824},
                                          {-1073741824, -1073741824},
                                          {-1, 1}};
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        size_t n = k_lens[li];
        if (n == 0)
            continue;
        int32_t *a = calloc(n, 4), *b = calloc(n, 4);
        CHECK(a && b);
        size_t pos[4] = {0, n / 2, n - 1, n & ~(size_t)7 ? (n & ~(size_t)7) - 1 : 0};
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi += 3) {
            for (size_t pi = 0; pi < 4; pi++) {
                for (size_t k = 0; k < INAGG_ARRAY_LEN(ov_pairs); k++) {
                    memset(a, 0, n * 4);
                    memset(b, 0, n * 4);
                    a[pos[pi]] = ov_pairs[k][0];
                    b[pos[pi]] = ov_pairs[k][1];
                    CHECK_EQ_INT(add_i32_both(a, b, n, k_offs[oi]), 1);
                }
                /* All the non-overflowing extremes at once, placed from pos. */
                memset(a, 0, n * 4);
                memset(b, 0, n * 4);
                for (size_t k = 0; k < INAGG_ARRAY_LEN(ok_pairs); k++) {
                    size_t at = (pos[pi] + k) % n;
                    a[at] = ok_pairs[k][0];
                    b[at] = ok_pairs[k][1];
                }
                CHECK_EQ_INT(add_i32_both(a, b, n, k_offs[oi]), 0);
            }
        }
        free(a);
        free(b);
    }
    /* The wrapped results of the two classic cases. */
    for (int path = 0; path < NPATH; path++) {
        use_path(path);
        int32_t acc[2] = {INT32_MAX, INT32_MIN};
        uint32_t in[2] = {htonl(1u), htonl((uint32_t)-1)};
        CHECK_EQ_INT(vec_be_add_i32(acc, in, 2), 1);
        CHECK_EQ_INT(acc[0], INT32_MIN);
        CHECK_EQ_INT(acc[1], INT32_MAX);
    }
}

TEST(vec_add_f32_paths_agree, 20)
{
    util_rng_t r;
    util_rng_seed(&r, 17);
    for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
        for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
            size_t n = k_lens[li], off = k_offs[oi];
            struct buf acc[NPATH], in, acc0;
            buf_alloc(&in, n, (off + 3) % 8);
            buf_alloc(&acc0, n, 0);
            for (size_t i = 0; i < n; i++) {
                wrf(acc0.p, i, rand_float(&r, -60, 60));
                wr32(in.p, i, htonl(f2u(rand_float(&r, -60, 60))));
            }
            for (int path = 0; path < NPATH; path++) {
                use_path(path);
                buf_alloc(&acc[path], n, off);
                if (n)
                    memcpy(acc[path].p, acc0.p, n * 4);
                vec_be_add_f32(acc[path].p, in.p, n);
            }
            check_same(acc, n, n, off);
            for (size_t i = 0; i < n; i++) {
                float want = rdf(acc0.p, i) + u2f(ntohl(rd32(in.p, i)));
                CHECK(f2u(rdf(acc[0].p, i)) == f2u(want));
            }
            buf_free(&in);
            buf_free(&acc0);
            for (int path = 0; path < NPATH; path++)
                buf_free(&acc[path]);
        }
    }
}

TEST(vec_i32_div_paths_agree, 20)
{
    static const int32_t ws[] = {1, 2, 3, 4, 7, 8, 64, 1000, -1, -3, INT32_MAX, INT32_MIN, 0};
    static const int32_t specials[] = {INT32_MIN, INT32_MAX, INT32_MIN + 1, -1, 0, 1, -7, 7};
    util_rng_t r;
    util_rng_seed(&r, 18);
    for (size_t wi = 0; wi < INAGG_ARRAY_LEN(ws); wi++) {
        int32_t w = ws[wi];
        for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
            for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
                size_t n = k_lens[li], off = k_offs[oi];
                struct buf b0, b[NPATH];
                buf_alloc(&b0, n, 0);
                for (size_t i = 0; i < n; i++) {
                    uint64_t x = util_rng_next(&r);
                    int32_t v = (int32_t)(uint32_t)x;
                    if ((x >> 40) % 4 == 0)
                        v = specials[(x >> 44) % INAGG_ARRAY_LEN(specials)];
                    else if ((x >> 40) % 4 == 1)
                        v = (int32_t)((x >> 44) % 20000) - 10000;
                    else if ((x >> 40) % 4 == 2 && w != 0 && w != INT32_MIN)
                        v = (int32_t)((int64_t)w * ((int32_t)((x >> 44) % 2001) - 1000));
                    wr32(b0.p, i, (uint32_t)v);
                }
                for (int path = 0; path < NPATH; path++) {
                    use_path(path);
                    buf_alloc(&b[path], n, off);
                    if (n)
                        memcpy(b[path].p, b0.p, n * 4);
                    vec_i32_div(b[path].p, n, w);
                }
                check_same(b, n, n, off);
                for (size_t i = 0; i < n; i++) {
                    int32_t v = (int32_t)rd32(b0.p, i), want;
                    if (w == 0)
                        want = v;
                    else if (w == -1)
                        want = v == INT32_MIN ? INT32_MIN : -v;
                    else
                        want = v / w;
                    CHECK_MSG((int32_t)rd32(b[0].p, i) == want, "%d / %d", v, w);
                }
                buf_free(&b0);
                for (int path = 0; path < NPATH; path++)
                    buf_free(&b[path]);
            }
        }
    }
}

TEST(vec_f32_scale_paths_agree, 20)
{
    static const float factors[] = {1.0f, 0.5f, 1.0f / 3.0f, 0.125f, -2.0f, 1e-30f, 0.0f};
    util_rng_t r;
    util_rng_seed(&r, 19);
    for (size_t fi = 0; fi < INAGG_ARRAY_LEN(factors); fi++) {
        for (size_t li = 0; li < INAGG_ARRAY_LEN(k_lens); li++) {
            for (size_t oi = 0; oi < INAGG_ARRAY_LEN(k_offs); oi++) {
                size_t n = k_lens[li], off = k_offs[oi];
                struct buf b0, b[NPATH];
                buf_alloc(&b0, n, 0);
                for (size_t i = 0; i < n; i++)
                    wrf(b0.p, i, rand_float(&r, -149, 127));
                for (int path = 0; path < NPATH; path++) {
                    use_path(path);
                    buf_alloc(&b[path], n, off);
                    if (n)
                        memcpy(b[path].p, b0.p, n * 4);
                    vec_f32_scale(b[path].p, n, factors[fi]);
                }
                check_same(b, n, n, off);
                for (size_t i = 0; i < n; i++)
                    CHECK(f2u(rdf(b[0].p, i)) == f2u(rdf(b0.p, i) * factors[fi]));
                buf_free(&b0);
                for (int path = 0; path < NPATH; path++)
                    buf_free(&b[path]);
            }
        }
    }
}
