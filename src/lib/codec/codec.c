/*
 * codec.c - encoding and decoding one chunk (see codec.h for the chunk format and what the
 * decoder checks). ZFP chunks are coded block by block, 64 consecutive values a 3-D block and
 * 4-value 1-D blocks for the tail (codec.h: the layout), into the context's scratch, so the
 * exact bit count is known and decoding can stop at the first block that runs past it; fixed
 * rate codes its 3-D blocks with zfp3.c, the rest with libzfp's block coders. fp16 is
 * converted here, round to nearest even.
 *
 * The coded bits are libzfp's bit stream in this machine's word order (little-endian x86-64
 * on both sides here).
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zfp.h>

#include "lib/base/errmsg.h"
#include "lib/codec/codec.h"
#include "lib/codec/zfp3.h"
#include "lib/codec/zfp_mode.h"

#define SCRATCH_SLACK                                                                              \
    320u /* zero bytes after a chunk: > one block (CODEC_ZFP_BLOCK3_BITS) + a word */

struct codec_ctx {
    codec_spec_t spec;
    size_t max_elems;
    zfp_stream *zfp; /* 1-D blocks: the chunk's tail */
    zfp_stream *zfp3; /* 3-D blocks of 64 values, on the same bit stream */
    bitstream *bs;
    uint8_t *scratch; /* 8-byte aligned, scratch_cap bytes, ending at a guard page */
    size_t scratch_cap;
    void *map; /* the mapping that holds scratch and, after it, the guard page */
    size_t map_len;
};

/* The scratch ends exactly where an inaccessible page begins: libzfp (not built with the
 * sanitizers) cannot read past it unnoticed even if the bound in codec.h were wrong. */
static int scratch_alloc(codec_ctx_t *c)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = (c->scratch_cap + page - 1) / page * page;
    c->map_len = data + page;
    c->map = mmap(NULL, c->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        return -ENOMEM;
    }
    if (mprotect((uint8_t *)c->map + data, page, PROT_NONE) != 0)
        return -ENOMEM;
    c->scratch = (uint8_t *)c->map + data - c->scratch_cap;
    return 0;
}

/* The header's param byte; bit 7 marks the 64-value layout (codec.h), so a decoder that codes
 * 4-value blocks only refuses such a chunk instead of decoding other values from it. */
static uint8_t param_tag(const codec_spec_t *s)
{
    switch (s->mode) {
        case CODEC_ZFP_RATE: return (uint8_t)((int)s->param | CODEC_LAYOUT64_TAG);
        case CODEC_ZFP_REVERSIBLE: return CODEC_LAYOUT64_TAG;
        case CODEC_ZFP_PRECISION: return (uint8_t)(int)s->param;
        case CODEC_ZFP_ACCURACY: return (uint8_t)(int8_t)ilogb(s->param);
        default: return 0;
    }
}

/* The mode on one of the context's streams: dims 1 or 3, maxbits as codec.h says. */
static void set_zfp_mode(zfp_stream *z, const codec_spec_t *s, uint dims)
{
    codec_zfp_stream_mode(z, s, dims);
    if (s->mode != CODEC_ZFP_RATE) {
        uint minbits, maxbits, maxprec;
        int minexp;
        zfp_stream_params(z, &minbits, &maxbits, &maxprec, &minexp);
        maxbits = (uint)(dims == 3 ? codec_zfp_block3_bits(s) : codec_zfp_block_bits(s));
        zfp_stream_set_params(z, minbits, maxbits, maxprec, minexp);
    }
}

int codec_ctx_open(const codec_spec_t *s, size_t max_elems, codec_ctx_t **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    if (s->mode <= CODEC_NONE || s->mode >= CODEC_MODE_COUNT || max_elems == 0 ||
        max_elems > CODEC_MAX_ELEMS) {
        return set_err(err, errlen, -EINVAL, "codec: no mode, or chunks of %zu values (1..%u)",
                       max_elems, CODEC_MAX_ELEMS);
    }
    codec_ctx_t *c = calloc(1, sizeof(*c));
    if (!c)
        goto nomem;
    c->spec = *s;
    c->max_elems = max_elems;
    if (codec_is_zfp(s->mode)) {
        c->scratch_cap = (codec_max_bytes(s, max_elems) + 7u) / 8u * 8u + SCRATCH_SLACK;
        if (scratch_alloc(c) < 0)
            goto nomem;
        c->bs = stream_open(c->scratch, c->scratch_cap);
        c->zfp = zfp_stream_open(c->bs);
        c->zfp3 = zfp_stream_open(c->bs);
        if (!c->bs || !c->zfp || !c->zfp3)
            goto nomem;
        set_zfp_mode(c->zfp, s, 1);
        set_zfp_mode(c->zfp3, s, 3);
    }
    *out = c;
    return 0;
nomem:
    codec_ctx_close(c);
    return set_err(err, errlen, -ENOMEM, "codec: out of memory");
}

void codec_ctx_close(codec_ctx_t *c)
{
    if (!c)
        return;
    if (c->zfp)
        zfp_stream_close(c->zfp);
    if (c->zfp3)
        zfp_stream_close(c->zfp3);
    if (c->bs)
        stream_close(c->bs);
    if (c->map)
        munmap(c->map, c->map_len);
    free(c);
}

const codec_spec_t *codec_ctx_spec(const codec_ctx_t *c) { return &c->spec; }

static void put_header(uint8_t *d, const codec_spec_t *s, size_t n, uint32_t bits)
{
    d[0] = (uint8_t)s->mode;
    d[1] = param_tag(s);
    d[2] = (uint8_t)(n >> 8);
    d[3] = (uint8_t)n;
    d[4] = (uint8_t)(bits >> 24);
    d[5] = (uint8_t)(bits >> 16);
    d[6] = (uint8_t)(bits >> 8);
    d[7] = (uint8_t)bits;
}

size_t codec_chunk_elems(const void *src, size_t len)
{
    const uint8_t *p = src;
    return len < CODEC_HEADER_SIZE ? 0 : ((size_t)p[2] << 8 | p[3]);
}

/* ---- fp16 ------------------------------------------------------------------------------- */

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & 0x7fffffffu;
    if (a >= 0x477fe000u) /* >= 65520 rounds past the largest half: saturate to 65504 */
        return (uint16_t)(sign | 0x7bffu);
    if (a < 0x38800000u) { /* below 2^-14: a half subnormal (or zero) */
        float m;
        float af;
        memcpy(&af, &a, 4);
        m = af * 16777216.0f; /* 2^24: units of the smallest subnormal, exact */
        return (uint16_t)(sign | (uint32_t)nearbyintf(m));
    }
    uint32_t r = a - 0x38000000u; /* rebias 127 -> 15 */
    uint32_t half = r >> 13, rest = r & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
        half++;
    return (uint16_t)(sign | half);
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float f;
    if (e == 0) {
        f = (float)m * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    uint32_t x = sign | ((e + 112u) << 23) | (m << 13);
    memcpy(&f, &x, 4);
    return f;
}

/* ---- encode ----------------------------------------------------------------------------- */

/* The chunk's 3-D blocks, then its 1-D tail, into the scratch: the bits written. */
static size_t zfp_encode_chunk(codec_ctx_t *c, const float *src, size_t n)
{
    size_t head = codec_zfp_head(&c->spec, n);
    if (c->spec.mode == CODEC_ZFP_RATE) { /* every block R whole words: zfp3.c, or libzfp */
        unsigned rate = (unsigned)c->spec.param;
        uint64_t *w = (uint64_t *)(void *)c->scratch;
        for (size_t i = 0; i < head; i += CODEC_ZFP_BLOCK3_VALUES, w += rate)
            if (zfp3_encode_block(src + i, w, rate) < 0) {
                stream_wseek(c->bs, (size_t)(w - (uint64_t *)(void *)c->scratch) * 64u);
                zfp_encode_block_float_3(c->zfp3, src + i);
            }
        stream_wseek(c->bs, head / CODEC_ZFP_BLOCK3_VALUES * codec_zfp_block3_bits(&c->spec));
    } else {
        zfp_stream_rewind(c->zfp);
        for (size_t i = 0; i < head; i += CODEC_ZFP_BLOCK3_VALUES)
            zfp_encode_block_float_3(c->zfp3, src + i);
    }
    size_t full = n / 4u * 4u;
    for (size_t i = head; i < full; i += 4)
        zfp_encode_block_float_1(c->zfp, src + i);
    if (full < n)
        zfp_encode_partial_block_strided_float_1(c->zfp, src + full, n - full, 1);
    return stream_wtell(c->bs);
}

long codec_encode(codec_ctx_t *c, const float *src, size_t n, void *dst, size_t cap)
{
    uint8_t *d = dst;
    if (n == 0 || n > c->max_elems || cap < codec_max_bytes(&c->spec, n))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(src[i]))
            return -EDOM;
    size_t body;
    uint32_t bits;
    if (c->spec.mode == CODEC_FP16) {
        for (size_t i = 0; i < n; i++) {
            uint16_t h = f32_to_f16(src[i]);
            d[CODEC_HEADER_SIZE + 2 * i] = (uint8_t)(h >> 8);
            d[CODEC_HEADER_SIZE + 2 * i + 1] = (uint8_t)h;
        }
        body = 2u * n;
        bits = (uint32_t)(body * 8u);
    } else {
        bits = (uint32_t)zfp_encode_chunk(c, src, n);
        stream_flush(c->bs);
        body = (bits + 7u) / 8u;
        if (CODEC_HEADER_SIZE + body > cap)
            return -ENOSPC;
        memcpy(d + CODEC_HEADER_SIZE, c->scratch, body);
    }
    put_header(d, &c->spec, n, bits);
    size_t len = CODEC_HEADER_SIZE + body;
    while (len % 4u)
        d[len++] = 0;
    return (long)len;
}

/* ---- decode ----------------------------------------------------------------------------- */

/* The chunk's blocks from the scratch, stopping at the first that ends past `bits`: the bits
 * the blocks took (equal to `bits` for a sound chunk). */
static size_t zfp_decode_chunk(codec_ctx_t *c, float *dst, size_t n, size_t bits)
{
    size_t used = 0, head = codec_zfp_head(&c->spec, n);
    if (c->spec.mode == CODEC_ZFP_RATE) { /* every block R whole words: zfp3.c */
        unsigned rate = (unsigned)c->spec.param;
        const uint64_t *w = (const uint64_t *)(const void *)c->scratch;
        for (size_t i = 0; i < head && used <= bits; i += CODEC_ZFP_BLOCK3_VALUES, w += rate) {
            zfp3_decode_block(w, rate, dst + i);
            used += 64u * rate;
        }
        stream_rseek(c->bs, head / CODEC_ZFP_BLOCK3_VALUES * codec_zfp_block3_bits(&c->spec));
    } else {
        zfp_stream_rewind(c->zfp);
        for (size_t i = 0; i < head && used <= bits; i += CODEC_ZFP_BLOCK3_VALUES)
            used += zfp_decode_block_float_3(c->zfp3, dst + i);
    }
    size_t full = n / 4u * 4u;
    for (size_t i = head; i < n && used <= bits; i += 4) {
        if (i < full)
            used += zfp_decode_block_float_1(c->zfp, dst + i);
        else
            used += zfp_decode_partial_block_strided_float_1(c->zfp, dst + i, n - i, 1);
    }
    return used;
}

int codec_decode(codec_ctx_t *c, const void *src, size_t len, float *dst, size_t n, char *err,
                 size_t errlen)
{
    const uint8_t *p = src;
    if (len < CODEC_HEADER_SIZE || len % 4u) {
        return set_err(err, errlen, -EBADMSG,
                       "chunk of %zu bytes: shorter than its header or not whole words", len);
    }
    if (p[0] != (uint8_t)c->spec.mode || p[1] != param_tag(&c->spec)) {
        return set_err(err, errlen, -EBADMSG, "chunk coded in mode %u/%u, the job's is %u/%u", p[0],
                       p[1], (unsigned)c->spec.mode, param_tag(&c->spec));
    }
    size_t elems = codec_chunk_elems(p, len);
    uint32_t bits = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
    if (elems != n || n == 0 || n > c->max_elems) {
        return set_err(err, errlen, -EBADMSG, "chunk claims %zu values, %zu expected", elems, n);
    }
    size_t body = ((size_t)bits + 7u) / 8u;
    if (len > codec_max_bytes(&c->spec, n) || CODEC_HEADER_SIZE + body > len ||
        len - CODEC_HEADER_SIZE - body > 3u) {
        return set_err(err, errlen, -EBADMSG, "chunk of %zu bytes claims %u bits of %zu values",
                       len, bits, n);
    }
    if (c->spec.mode == CODEC_FP16) {
        if (body != 2u * n || bits % 8u) {
            return set_err(err, errlen, -EBADMSG, "fp16 chunk of %u bits for %zu values", bits, n);
        }
        for (size_t i = 0; i < n; i++) {
            uint16_t h =
                (uint16_t)(p[CODEC_HEADER_SIZE + 2 * i] << 8 | p[CODEC_HEADER_SIZE + 2 * i + 1]);
            if ((h & 0x7c00u) == 0x7c00u) {
                return set_err(err, errlen, -EBADMSG, "fp16 chunk holds an infinity or NaN");
            }
            dst[i] = f16_to_f32(h);
        }
        return 0;
    }
    /* body <= codec_max_bytes: the copy and its zero tail fit the scratch */
    memcpy(c->scratch, p + CODEC_HEADER_SIZE, body);
    memset(c->scratch + body, 0, SCRATCH_SLACK);
    size_t used = zfp_decode_chunk(c, dst, n, bits);
    if (used != bits) {
        return set_err(err, errlen, -EBADMSG, "chunk claims %u bits, its blocks take %s%zu", bits,
                       used > bits ? "more than " : "", used);
    }
    int saturated = 0; /* a block near FLT_MAX may decode just past it */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(dst[i])) {
            dst[i] = signbit(dst[i]) ? -FLT_MAX : FLT_MAX;
            saturated = 1;
        }
    return saturated;
}
