/*
 * codec_spec.c - the spelling of a compression mode (`--compress MODE`), read and written in
 * one place for the CLI, the C API, JOIN and the Python package, and the size bound of a mode
 * that tells whether a packet of n values always fits in a datagram.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/codec/codec.h"

#define SPELLINGS                                                                                  \
    "none, fp16, zfp:rate=R, zfp:precision=P (R, P integers 1..32), "                              \
    "zfp:accuracy=A (2^-126 <= A <= 2^30) or zfp:reversible"

/* An integer 1..32 after `key=`: 0, or -EINVAL. */
static int parse_int_param(const char *v, double *out)
{
    char *end = NULL;
    if (*v < '0' || *v > '9')
        return -EINVAL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < 1 || x > 32)
        return -EINVAL;
    *out = (double)x;
    return 0;
}

int codec_parse(const char *text, codec_spec_t *out, char *err, size_t errlen)
{
    codec_spec_t s = {CODEC_NONE, 0.0};
    if (!text || !out) {
        return set_err(err, errlen, -EINVAL, "no compression mode given");
    }
    if (strcmp(text, "none") == 0) {
        s.mode = CODEC_NONE;
    } else if (strcmp(text, "fp16") == 0) {
        s.mode = CODEC_FP16;
    } else if (strcmp(text, "zfp:reversible") == 0) {
        s.mode = CODEC_ZFP_REVERSIBLE;
    } else if (strncmp(text, "zfp:rate=", 9) == 0) {
        s.mode = CODEC_ZFP_RATE;
        if (parse_int_param(text + 9, &s.param) < 0)
            goto bad_value;
    } else if (strncmp(text, "zfp:precision=", 14) == 0) {
        s.mode = CODEC_ZFP_PRECISION;
        if (parse_int_param(text + 14, &s.param) < 0)
            goto bad_value;
    } else if (strncmp(text, "zfp:accuracy=", 13) == 0) {
        s.mode = CODEC_ZFP_ACCURACY;
        char *end = NULL;
        if ((text[13] < '0' || text[13] > '9') && text[13] != '.')
            goto bad_value;
        errno = 0;
        double a = strtod(text + 13, &end);
        if (errno || end == text + 13 || *end != '\0' || !isfinite(a) || a < ldexp(1.0, -126) ||
            a > ldexp(1.0, 30))
            goto bad_value;
        s.param = a;
    } else {
        return set_err(err, errlen, -EINVAL, "unknown compression mode '%s' (expected %s)", text,
                       SPELLINGS);
    }
    *out = s;
    return 0;
bad_value:
    return set_err(err, errlen, -EINVAL, "bad value in compression mode '%s' (expected %s)", text,
                   SPELLINGS);
}

void codec_format(const codec_spec_t *s, char *buf, size_t cap)
{
    switch (s->mode) {
        case CODEC_ZFP_RATE: snprintf(buf, cap, "zfp:rate=%d", (int)s->param); break;
        case CODEC_ZFP_PRECISION: snprintf(buf, cap, "zfp:precision=%d", (int)s->param); break;
        case CODEC_ZFP_ACCURACY: snprintf(buf, cap, "zfp:accuracy=%.17g", s->param); break;
        case CODEC_ZFP_REVERSIBLE: snprintf(buf, cap, "zfp:reversible"); break;
        case CODEC_FP16: snprintf(buf, cap, "fp16"); break;
        default: snprintf(buf, cap, "none"); break;
    }
}

int codec_is_lossy(const codec_spec_t *s)
{
    return s->mode != CODEC_NONE && s->mode != CODEC_ZFP_REVERSIBLE;
}

size_t codec_zfp_block_bits(const codec_spec_t *s)
{
    if (s->mode == CODEC_ZFP_RATE) /* libzfp's floor: 9 bits (a float block's exponent) */
        return 4u * (size_t)s->param < 9u ? 9u : 4u * (size_t)s->param;
    return CODEC_ZFP_BLOCK_BITS;
}

int codec_is_zfp(codec_mode_t m)
{
    return m == CODEC_ZFP_RATE || m == CODEC_ZFP_PRECISION || m == CODEC_ZFP_ACCURACY ||
           m == CODEC_ZFP_REVERSIBLE;
}

size_t codec_zfp_block3_bits(const codec_spec_t *s)
{
    if (s->mode == CODEC_ZFP_RATE)
        return CODEC_ZFP_BLOCK3_VALUES * (size_t)s->param;
    return CODEC_ZFP_BLOCK3_BITS;
}

size_t codec_zfp_head(const codec_spec_t *s, size_t n)
{
    if (s->mode != CODEC_ZFP_RATE && s->mode != CODEC_ZFP_REVERSIBLE)
        return 0; /* precision and accuracy keep their 4-value blocks (codec.h) */
    return n / CODEC_ZFP_BLOCK3_VALUES * CODEC_ZFP_BLOCK3_VALUES;
}

/* Most bits of a ZFP chunk of exactly n values: its 3-D blocks, then its 1-D tail. */
static size_t zfp_chunk_bits(const codec_spec_t *s, size_t n)
{
    size_t head = codec_zfp_head(s, n);
    return head / CODEC_ZFP_BLOCK3_VALUES * codec_zfp_block3_bits(s) +
           (n - head + 3u) / 4u * codec_zfp_block_bits(s);
}

/* Most bits of a ZFP chunk of n or fewer values. A 1-D tail of 60 values may take more than
 * the 64-value block that replaces it at the next multiple of 64 (at rates 1 and 2 and in the
 * variable modes), so the bound also covers the longest tail of the previous group. */
static size_t zfp_chunk_bits_upto(const codec_spec_t *s, size_t n)
{
    size_t bits = zfp_chunk_bits(s, n);
    size_t groups = n / CODEC_ZFP_BLOCK3_VALUES;
    if (groups > 0) {
        size_t prev = zfp_chunk_bits(s, groups * CODEC_ZFP_BLOCK3_VALUES - 1u);
        if (prev > bits)
            bits = prev;
    }
    return bits;
}

size_t codec_max_bytes(const codec_spec_t *s, size_t n)
{
    size_t body;
    switch (s->mode) {
        case CODEC_FP16: body = 2u * n; break;
        case CODEC_ZFP_RATE:
        case CODEC_ZFP_PRECISION:
        case CODEC_ZFP_ACCURACY:
        case CODEC_ZFP_REVERSIBLE: body = (zfp_chunk_bits_upto(s, n) + 7u) / 8u; break;
        default: return 4u * n;
    }
    return CODEC_HEADER_SIZE + (body + 3u) / 4u * 4u;
}

size_t codec_max_elems(const codec_spec_t *s, size_t bytes)
{
    size_t lo = 0, hi = CODEC_MAX_ELEMS / 4u; /* in blocks of 4 */
    while (lo < hi) {
        size_t mid = (lo + hi + 1) / 2;
        if (codec_max_bytes(s, mid * 4u) <= bytes)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo * 4u;
}
