/*
 * test_codec.c - the chunk codec (src/lib/codec): the spelling of every mode, round trips against
 * each mode's promise (reversible exact, accuracy within A, fp16 within half an ulp of half,
 * fixed rate bit-identical to an offline libzfp round trip of the same values), the size
 * bound on worst-case data, and hostile chunks (wrong mode or parameter, wrong lengths and
 * bit counts, random corruption) rejected without reading or writing out of bounds.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zfp.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/codec/codec.h"
#include "lib/codec/zfp3.h"

static const size_t k_sizes[] = {1, 3, 4, 5, 255, 256, 1000, 16368};

static float normal(util_rng_t *r)
{
    double u = util_rng_double(r) + 1e-12, v = util_rng_double(r);
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}

static void fill_normal(util_rng_t *r, float *x, size_t n, float scale)
{
    for (size_t i = 0; i < n; i++)
        x[i] = scale * normal(r);
}

static codec_spec_t spec_of(const char *text)
{
    codec_spec_t s;
    char err[256];
    CHECK_MSG(codec_parse(text, &s, err, sizeof err) == 0, "%s: %s", text, err);
    return s;
}

TEST(codec_parse_spellings, 5)
{
    const char *good[] = {"none",
                          "fp16",
                          "zfp:rate=8",
                          "zfp:rate=1",
                          "zfp:rate=32",
                          "zfp:precision=16",
                          "zfp:accuracy=0.001",
                          "zfp:accuracy=1e-09",
                          "zfp:reversible"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        codec_spec_t s = spec_of(good[i]), t;
        char buf[CODEC_SPEC_MAX];
        codec_format(&s, buf, sizeof buf);
        CHECK(codec_parse(buf, &t, NULL, 0) == 0);
        CHECK(t.mode == s.mode && t.param == s.param);
    }
    const char *bad[] = {"",
                         "zfp",
                         "zfp:rate",
                         "zfp:rate=0",
                         "zfp:rate=33",
                         "zfp:rate=8.5",
                         "zfp:rate=8x",
                         "zfp:precision=-1",
                         "zfp:accuracy=0",
                         "zfp:accuracy=nan",
                         "zfp:accuracy=inf",
                         "zfp:accuracy=-1",
                         "zfp:reversible=1",
                         "fp32",
                         "ZFP:rate=8",
                         "zfp:rate= 8"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        codec_spec_t s;
        char err[256] = "";
        CHECK_MSG(codec_parse(bad[i], &s, err, sizeof err) == -EINVAL, "accepted '%s'", bad[i]);
        CHECK(strstr(err, "zfp:rate=R") != NULL);
    }
    CHECK(codec_is_lossy(&(codec_spec_t){CODEC_ZFP_RATE, 8}));
    CHECK(!codec_is_lossy(&(codec_spec_t){CODEC_ZFP_REVERSIBLE, 0}));
    CHECK(codec_is_lossy(&(codec_spec_t){CODEC_FP16, 0}));
}

/* Encode and decode x[0..n) in mode text; returns the chunk length. */
static long roundtrip(codec_ctx_t *c, const float *x, float *y, size_t n, uint8_t *buf, size_t cap)
{
    long len = codec_encode(c, x, n, buf, cap);
    CHECK_MSG(len > 0 && len % 4 == 0, "encode: %ld", len);
    CHECK_MSG((size_t)len <= codec_max_bytes(codec_ctx_spec(c), n), "n=%zu len=%ld max=%zu", n, len,
              codec_max_bytes(codec_ctx_spec(c), n));
    CHECK(codec_chunk_elems(buf, (size_t)len) == n);
    char err[256] = "";
    int rc = codec_decode(c, buf, (size_t)len, y, n, err, sizeof err);
    CHECK_MSG(rc == 0, "decode: %s", err);
    return len;
}

static void check_mode(const char *text, int random_bits)
{
    codec_spec_t s = spec_of(text);
    codec_ctx_t *c;
    CHECK(codec_ctx_open(&s, 16368, &c, NULL, 0) == 0);
    util_rng_t r;
    util_rng_seed(&r, 14);
    size_t cap = codec_max_bytes(&s, 16368);
    float *x = malloc(16368 * 4), *y = malloc(16368 * 4);
    uint8_t *buf = malloc(cap);
    CHECK(x && y && buf);
    for (size_t k = 0; k < sizeof k_sizes / sizeof *k_sizes; k++) {
        size_t n = k_sizes[k];
        if (random_bits) { /* worst case for the coder: arbitrary finite bit patterns */
            for (size_t i = 0; i < n; i++) {
                uint32_t u;
                do
                    u = (uint32_t)util_rng_next(&r);
                while ((u & 0x7f800000u) == 0x7f800000u);
                memcpy(&x[i], &u, 4);
            }
        } else {
            fill_normal(&r, x, n, 0.01f);
        }
        long len = roundtrip(c, x, y, n, buf, cap);
        for (size_t i = 0; i < n; i++) {
            switch (s.mode) {
                case CODEC_ZFP_REVERSIBLE:
                    CHECK_MSG(memcmp(&x[i], &y[i], 4) == 0, "n=%zu i=%zu %a != %a", n, i, x[i],
                              y[i]);
                    break;
                case CODEC_ZFP_ACCURACY: CHECK(fabs((double)x[i] - y[i]) <= s.param); break;
                case CODEC_FP16:
                    CHECK(fabs((double)x[i] - y[i]) <=
                          fmax(fabs(x[i]) * ldexp(1, -11), ldexp(1, -25)));
                    break;
                default: break;
            }
        }
        if (s.mode == CODEC_ZFP_RATE) { /* exactly R bits per value in whole blocks */
            size_t rate = (size_t)s.param, head = n / 64 * 64;
            size_t bits = head * rate + (n - head + 3) / 4 * (rate < 3 ? 9 : 4 * rate);
            CHECK_EQ_INT(len, 8 + ((bits + 7) / 8 + 3) / 4 * 4);
        }
    }
    free(x);
    free(y);
    free(buf);
    codec_ctx_close(c);
}

TEST(codec_roundtrip_reversible_exact, 20) { check_mode("zfp:reversible", 0); }
TEST(codec_roundtrip_reversible_worst_case, 20) { check_mode("zfp:reversible", 1); }
TEST(codec_roundtrip_accuracy_bound, 20)
{
    check_mode("zfp:accuracy=0.001", 0);
    check_mode("zfp:accuracy=1e-06", 0);
    check_mode("zfp:accuracy=1e-09", 0);
}
TEST(codec_roundtrip_precision_and_rate, 20)
{
    check_mode("zfp:precision=32", 1);
    check_mode("zfp:precision=4", 0);
    check_mode("zfp:rate=8", 0);
    check_mode("zfp:rate=32", 1);
    check_mode("zfp:rate=1", 0);
}
TEST(codec_roundtrip_fp16, 10) { check_mode("fp16", 0); }

/* libzfp's zfp_compress/zfp_decompress of a whole field (1-D of n values, or 3-D of 4 x 4 x
 * n/16) in mode s, written here from libzfp's documented API alone. */
static void field_round_trip(const codec_spec_t *s, int dims, const float *x, size_t n, float *ref)
{
    zfp_field *f = dims == 3 ? zfp_field_3d((void *)x, zfp_type_float, 4, 4, n / 16)
                             : zfp_field_1d((void *)x, zfp_type_float, n);
    zfp_field *g = dims == 3 ? zfp_field_3d(ref, zfp_type_float, 4, 4, n / 16)
                             : zfp_field_1d(ref, zfp_type_float, n);
    zfp_stream *z = zfp_stream_open(NULL);
    if (s->mode == CODEC_ZFP_RATE)
        zfp_stream_set_rate(z, s->param, zfp_type_float, (uint)dims, zfp_false);
    else if (s->mode == CODEC_ZFP_PRECISION)
        zfp_stream_set_precision(z, (uint)s->param);
    else if (s->mode == CODEC_ZFP_ACCURACY)
        zfp_stream_set_accuracy(z, s->param);
    else
        zfp_stream_set_reversible(z);
    size_t cap = zfp_stream_maximum_size(z, f);
    void *mem = malloc(cap);
    bitstream *bs = stream_open(mem, cap);
    zfp_stream_set_bit_stream(z, bs);
    CHECK(zfp_compress(z, f) > 0);
    zfp_stream_rewind(z);
    CHECK(zfp_decompress(z, g) > 0);
    zfp_field_free(f);
    zfp_field_free(g);
    zfp_stream_close(z);
    stream_close(bs);
    free(mem);
}

/* The chunk layout (codec.h): 64 consecutive values per 3-D block, the n % 64 left as 1-D
 * blocks. The per-block coder gives exactly libzfp's own round trip of a 4 x 4 x (n/64*4)
 * field followed by a 1-D field of the tail, for chunks that are whole 64-value groups, that
 * end in a partial 1-D block, that are all tail, and for the packet size the library uses. */
TEST(codec_zfp_layout_matches_libzfp_fields, 20)
{
    static const size_t sizes[] = {1000, 4096, 16368, 16360, 63, 64, 65, 130};
    static const char *modes[] = {"zfp:rate=4", "zfp:rate=8", "zfp:rate=16", "zfp:rate=1",
                                  "zfp:reversible"};
    float *x = malloc(16368 * 4), *y = malloc(16368 * 4), *ref = malloc(16368 * 4);
    size_t cap = 16 + 16368 * 8;
    uint8_t *buf = malloc(cap);
    CHECK(x && y && ref && buf);
    util_rng_t r;
    util_rng_seed(&r, 7);
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        codec_spec_t s = spec_of(modes[m]);
        codec_ctx_t *c;
        CHECK(codec_ctx_open(&s, 16368, &c, NULL, 0) == 0);
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            size_t n = sizes[k], head = n / 64 * 64;
            fill_normal(&r, x, n, 1.0f);
            roundtrip(c, x, y, n, buf, cap);
            if (head)
                field_round_trip(&s, 3, x, head, ref);
            if (head < n)
                field_round_trip(&s, 1, x + head, n - head, ref + head);
            CHECK_MSG(memcmp(y, ref, n * 4) == 0, "%s n=%zu", modes[m], n);
            memset(y, 0xff, n * 4); /* the reference the bench uses says the same */
            CHECK(codec_zfp_reference(&s, x, n, y) == 0);
            CHECK_MSG(memcmp(y, ref, n * 4) == 0, "%s n=%zu: codec_zfp_reference", modes[m], n);
        }
        codec_ctx_close(c);
    }
    free(x);
    free(y);
    free(ref);
    free(buf);
}

/* zfp:accuracy keeps the 1-D layout, whose bound holds (check_mode above), and so does
 * zfp:precision (P planes per 4 values): their chunks equal libzfp's 1-D round trip of the
 * whole chunk. */
TEST(codec_accuracy_and_precision_keep_1d_layout, 10)
{
    static const char *modes[] = {"zfp:accuracy=1e-09", "zfp:precision=8"};
    const size_t n = 1000;
    float x[1000], y[1000], ref[1000];
    util_rng_t r;
    util_rng_seed(&r, 9);
    fill_normal(&r, x, n, 0.01f);
    for (size_t m = 0; m < 2; m++) {
        codec_spec_t s = spec_of(modes[m]);
        codec_ctx_t *c;
        CHECK(codec_ctx_open(&s, n, &c, NULL, 0) == 0);
        uint8_t buf[8192];
        roundtrip(c, x, y, n, buf, sizeof buf);
        codec_ctx_close(c);
        CHECK(codec_zfp_head(&s, n) == 0);
        field_round_trip(&s, 1, x, n, ref);
        CHECK_MSG(memcmp(y, ref, sizeof y) == 0, "%s", modes[m]);
    }
}

/* A smaller chunk never needs more bytes than codec_max_bytes of a larger one: a 60-value
 * 1-D tail can outweigh the 64-value block after it (rate 1, the variable modes). */
TEST(codec_max_bytes_bounds_shorter_chunks, 10)
{
    static const char *modes[] = {"zfp:rate=1",       "zfp:rate=2",     "zfp:rate=8",
                                  "zfp:precision=32", "zfp:reversible", "zfp:accuracy=1e-3"};
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        codec_spec_t s = spec_of(modes[m]);
        for (size_t n = 2; n <= 1024; n++)
            CHECK_MSG(codec_max_bytes(&s, n - 1) <= codec_max_bytes(&s, n), "%s n=%zu", modes[m],
                      n);
        size_t fit = codec_max_elems(&s, 65000);
        CHECK(fit > 0 && codec_max_bytes(&s, fit) <= 65000);
        CHECK(fit == 65532 || codec_max_bytes(&s, fit + 4) > 65000);
    }
}

static int decode_rc(codec_ctx_t *c, const uint8_t *chunk, size_t len, size_t n)
{
    /* exactly len bytes on the heap and exactly n outputs: ASan sees any stray access */
    uint8_t *in = malloc(len ? len : 1);
    float *out = malloc(n * 4);
    CHECK(in && out);
    memcpy(in, chunk, len);
    char err[256] = "";
    int rc = codec_decode(c, in, len, out, n, err, sizeof err);
    CHECK(rc == 0 || rc == 1 || (rc == -EBADMSG && err[0] != '\0'));
    for (size_t i = 0; rc >= 0 && i < n; i++)
        CHECK(isfinite(out[i]));
    if (rc == 1)
        rc = 0;
    free(in);
    free(out);
    return rc;
}

TEST(codec_hostile_chunks_rejected, 30)
{
    const char *modes[] = {"zfp:rate=8", "zfp:precision=16", "zfp:accuracy=0.001", "zfp:reversible",
                           "fp16"};
    util_rng_t r;
    util_rng_seed(&r, 99);
    for (size_t m = 0; m < 5; m++) {
        codec_spec_t s = spec_of(modes[m]);
        codec_ctx_t *c;
        const size_t n = 257;
        CHECK(codec_ctx_open(&s, n, &c, NULL, 0) == 0);
        float x[257];
        fill_normal(&r, x, n, 1.0f);
        uint8_t good[4096], bad[4096];
        long len = codec_encode(c, x, n, good, sizeof good);
        CHECK(len > 0);
        CHECK(decode_rc(c, good, (size_t)len, n) == 0);
        /* wrong mode, wrong parameter */
        memcpy(bad, good, (size_t)len);
        bad[0] = (uint8_t)((bad[0] % 5) + 1);
        CHECK(decode_rc(c, bad, (size_t)len, n) == -EBADMSG);
        memcpy(bad, good, (size_t)len);
        bad[1] ^= 0x10;
        CHECK(decode_rc(c, bad, (size_t)len, n) == -EBADMSG);
        /* element count other than expected, or than the chunk claims */
        CHECK(decode_rc(c, good, (size_t)len, n - 1) == -EBADMSG);
        memcpy(bad, good, (size_t)len);
        bad[3] ^= 1;
        CHECK(decode_rc(c, bad, (size_t)len, n) == -EBADMSG);
        /* truncated at every length, and extended by zero words */
        for (size_t l = 0; l < (size_t)len; l++)
            CHECK(decode_rc(c, good, l, n) == -EBADMSG);
        memset(good + len, 0, 64);
        CHECK(decode_rc(c, good, (size_t)len + 4, n) == -EBADMSG);
        /* bit counts: one more, one less, the largest */
        uint32_t bits =
            (uint32_t)good[4] << 24 | (uint32_t)good[5] << 16 | (uint32_t)good[6] << 8 | good[7];
        const uint32_t tries[] = {bits + 1, bits - 1, bits + 32, 0, 0xffffffffu};
        for (size_t t = 0; t < 5; t++) {
            memcpy(bad, good, (size_t)len);
            bad[4] = (uint8_t)(tries[t] >> 24);
            bad[5] = (uint8_t)(tries[t] >> 16);
            bad[6] = (uint8_t)(tries[t] >> 8);
            bad[7] = (uint8_t)tries[t];
            CHECK_MSG(decode_rc(c, bad, (size_t)len, n) == -EBADMSG, "%s bits %u", modes[m],
                      tries[t]);
        }
        /* random corruption of the body: rejected or decoded, never out of bounds */
        for (int t = 0; t < 2000; t++) {
            memcpy(bad, good, (size_t)len);
            int flips = 1 + (int)(util_rng_next(&r) % 8);
            for (int f = 0; f < flips; f++) {
                size_t at =
                    CODEC_HEADER_SIZE + util_rng_next(&r) % ((size_t)len - CODEC_HEADER_SIZE);
                bad[at] = (uint8_t)util_rng_next(&r);
            }
            (void)decode_rc(c, bad, (size_t)len, n);
        }
        codec_ctx_close(c);
    }
    /* fp16: an infinity or NaN code is rejected */
    codec_spec_t s = spec_of("fp16");
    codec_ctx_t *c;
    CHECK(codec_ctx_open(&s, 4, &c, NULL, 0) == 0);
    float x[4] = {1, 2, 3, 4};
    uint8_t buf[64];
    long len = codec_encode(c, x, 4, buf, sizeof buf);
    CHECK(len == 16);
    buf[8] = 0x7c;
    buf[9] = 0x00;
    CHECK(decode_rc(c, buf, (size_t)len, 4) == -EBADMSG);
    /* encoder refuses non-finite input and a too small buffer */
    x[2] = NAN;
    CHECK(codec_encode(c, x, 4, buf, sizeof buf) == -EDOM);
    x[2] = 3;
    CHECK(codec_encode(c, x, 4, buf, 8) == -EINVAL);
    codec_ctx_close(c);
}

/* A chunk longer than any chunk of its values can be, whose header's bit count matches its
 * length (9,416 bytes claiming 75,264 bits for 256 values at rate 8, where 264 bytes is the
 * most): refused for its length before its body is copied into the codec's scratch (which is
 * sized for the longest legal chunk, so the copy would overrun it). The same input is in the
 * fuzz corpus (tests/fuzz/corpus/codec/oversized-rate8-256). */
TEST(codec_oversized_chunk_refused_before_copy, 10)
{
    codec_spec_t s = spec_of("zfp:rate=8");
    codec_ctx_t *c;
    const size_t n = 256, len = 9416;
    CHECK(codec_ctx_open(&s, n, &c, NULL, 0) == 0);
    CHECK_EQ_INT(codec_max_bytes(&s, n), 264);
    uint8_t *chunk = calloc(1, len);
    float x[256], out[256];
    util_rng_t r;
    util_rng_seed(&r, 7);
    fill_normal(&r, x, n, 1.0f);
    CHECK(chunk && codec_encode(c, x, n, chunk, len) == 264);
    const uint32_t bits = (uint32_t)(len - CODEC_HEADER_SIZE) * 8u; /* 75,264 */
    chunk[4] = (uint8_t)(bits >> 24);
    chunk[5] = (uint8_t)(bits >> 16);
    chunk[6] = (uint8_t)(bits >> 8);
    chunk[7] = (uint8_t)bits;
    char err[200] = "";
    CHECK_EQ_INT(codec_decode(c, chunk, len, out, n, err, sizeof(err)), -EBADMSG);
    CHECK_MSG(strstr(err, "9416 bytes") != NULL, "refused for another reason: %s", err);
    free(chunk);
    codec_ctx_close(c);
}

/* ---- zfp3.c against libzfp's own 3-D block coder ------------------------------------------- */

/* Block kind k of 8: normal, magnitudes over 60 binades, one huge value, all zero with a
 * signed zero, subnormals (libzfp's path), near FLT_MAX, arbitrary finite bit patterns, and
 * a constant. */
static void fill_block(util_rng_t *r, float *x, int kind)
{
    for (unsigned i = 0; i < 64; i++) {
        uint32_t u = (uint32_t)util_rng_next(r);
        switch (kind) {
            case 0: x[i] = normal(r); break;
            case 1: x[i] = ldexpf(normal(r), (int)(u % 60u) - 30); break;
            case 2: x[i] = i == 17 ? 1e30f : normal(r) * 1e-3f; break;
            case 3: x[i] = i == 5 ? -0.0f : 0.0f; break;
            case 4: x[i] = ldexpf(normal(r), -135); break;
            case 5: x[i] = (i & 1 ? -1 : 1) * (FLT_MAX - (float)(u % 7u) * 1e31f); break;
            case 6:
                if ((u & 0x7f800000u) == 0x7f800000u)
                    u &= 0xbfffffffu;
                memcpy(&x[i], &u, 4);
                break;
            default: x[i] = 0.375f; break;
        }
    }
}

/* zfp3_encode_block writes the words libzfp's zfp_encode_block_float_3 writes at the same rate
 * (or leaves the block to it), and zfp3_decode_block gives libzfp's values for those words
 * and for arbitrary words (what a hostile chunk carries). */
TEST(codec_zfp3_block_equals_libzfp, 30)
{
    util_rng_t r;
    util_rng_seed(&r, 21);
    uint64_t ours[32], theirs[33];
    float x[64], y[64], ref[64];
    for (unsigned rate = 1; rate <= 32; rate++) {
        bitstream *bs = stream_open(theirs, sizeof theirs);
        zfp_stream *z = zfp_stream_open(bs);
        zfp_stream_set_rate(z, rate, zfp_type_float, 3, zfp_false);
        for (int t = 0; t < 400; t++) {
            fill_block(&r, x, t % 9);
            memset(theirs, 0, sizeof theirs);
            zfp_stream_rewind(z);
            CHECK(zfp_encode_block_float_3(z, x) == 64 * rate);
            stream_flush(bs);
            if (zfp3_encode_block(x, ours, rate) == 0)
                CHECK_MSG(memcmp(ours, theirs, rate * 8) == 0, "rate %u kind %d", rate, t % 9);
            else
                CHECK_MSG(t % 9 == 4, "rate %u kind %d left to libzfp", rate, t % 9);
            if (t % 2) /* arbitrary words */
                for (unsigned i = 0; i < rate; i++)
                    theirs[i] = util_rng_next(&r);
            zfp_stream_rewind(z);
            CHECK(zfp_decode_block_float_3(z, ref) == 64 * rate);
            zfp3_decode_block(theirs, rate, y);
            for (unsigned i = 0; i < 64; i++)
                CHECK_MSG(memcmp(&y[i], &ref[i], 4) == 0 || (isnan(y[i]) && isnan(ref[i])),
                          "rate %u kind %d value %u: %a, libzfp %a", rate, t % 9, i, y[i], ref[i]);
        }
        zfp_stream_close(z);
        stream_close(bs);
    }
}

/* A zfp:rate or zfp:reversible chunk carries the 64-value layout's tag in its param byte, so
 * a chunk from a coder of 4-value blocks only (same mode, same R, same bit count) is refused
 * rather than decoded into other values; precision keeps its plain tag. */
TEST(codec_layout_tag_refuses_4_value_chunks, 10)
{
    static const char *modes[] = {"zfp:rate=8", "zfp:reversible", "zfp:precision=8"};
    float x[256], y[256];
    util_rng_t r;
    util_rng_seed(&r, 5);
    fill_normal(&r, x, 256, 1.0f);
    for (size_t m = 0; m < 3; m++) {
        codec_spec_t s = spec_of(modes[m]);
        codec_ctx_t *c;
        CHECK(codec_ctx_open(&s, 256, &c, NULL, 0) == 0);
        uint8_t buf[4096];
        long len = codec_encode(c, x, 256, buf, sizeof buf);
        CHECK(len > 0);
        int tagged = s.mode != CODEC_ZFP_PRECISION;
        CHECK_MSG((buf[1] & CODEC_LAYOUT64_TAG) == (tagged ? CODEC_LAYOUT64_TAG : 0), "%s",
                  modes[m]);
        if (tagged) {
            buf[1] &= (uint8_t)~CODEC_LAYOUT64_TAG;
            char err[256] = "";
            CHECK(codec_decode(c, buf, (size_t)len, y, 256, err, sizeof err) == -EBADMSG);
            CHECK(strstr(err, "mode") != NULL);
        }
        codec_ctx_close(c);
    }
}
