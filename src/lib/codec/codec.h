/*
 * codec.h - lossy and lossless compression of float32 gradient chunks: ZFP (libzfp 1.0, fixed
 * rate, fixed precision, fixed accuracy, reversible) and IEEE half precision.
 *
 * A job agrees one mode at join (`--compress MODE`, spelled as codec_parse reads it). Each
 * chunk is encoded on its own, so every packet is decodable without any other: a chunk is an
 * 8-byte chunk header followed by the coded bits, padded with zero bytes to a 4-byte multiple
 * (the wire counts 32-bit words):
 *
 *   off size field   meaning
 *    0   1   mode    codec_mode_t of the encoder; must equal the job's
 *    1   1   param   rate or precision (1..32), accuracy's binary exponent (int8), else 0;
 *                    plus 0x80 (CODEC_LAYOUT64_TAG) in zfp:rate and zfp:reversible
 *    2   2   elems   values in the chunk (big-endian), 1..CODEC_MAX_ELEMS
 *    4   4   bits    length of the coded stream in bits (big-endian)
 *
 * ZFP layout of a chunk of n values: in zfp:rate and zfp:reversible, the first n / 64 * 64
 * values are libzfp's 3-D float array of 4 x 4 x (n / 64 * 4) values (x fastest), i.e. one
 * 4x4x4 block per 64 consecutive values, in order, and the last n % 64 values follow as
 * libzfp's 1-D float array (4-value blocks, the last one partial), on the same bit stream
 * right after the 3-D part's last bit. A 64-value block spends its exponent and its bit-plane
 * coding on 16 times more values than a 1-D block: coding is cheaper per value and, at a fixed
 * rate, more accurate. zfp:precision and zfp:accuracy code the whole chunk as the 1-D array:
 * precision P keeps meaning P bit planes per 4 values, and libzfp's 3-D transform does not
 * keep the bound A for tolerances near float32's own precision (1e-9 on values of 0.01),
 * where the 1-D one does. Decoded values equal libzfp's own zfp_compress/zfp_decompress
 * round trip of these arrays (codec_zfp_reference).
 *
 * The decoder trusts nothing in a chunk: mode, param and elems must be what the receiver
 * expects, ceil(bits / 8) must fit in the bytes that arrived (padding at most 3 bytes, all
 * zero), and decoding must consume exactly `bits` bits; values are always finite. Bytes are copied into the context's
 * scratch, zero-padded by more than one ZFP block's worst case, and decoding stops as soon as
 * it passes `bits`, so a hostile chunk can make it read no byte outside the scratch and write
 * no value outside the caller's `elems`. Failures return -EBADMSG (reason in err) and the
 * caller counts the drop.
 *
 * A codec_ctx_t holds two libzfp streams (3-D and 1-D, on one bit stream) and its scratch:
 * one per thread, opened once, so nothing is allocated per chunk. Functions return 0 (or a
 * byte count) or a negative errno.
 */
#ifndef INAGG_CODEC_H
#define INAGG_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef enum codec_mode {
    CODEC_NONE = 0, /* no compression */
    CODEC_ZFP_RATE = 1, /* zfp:rate=R: R bits per value, no error bound */
    CODEC_ZFP_PRECISION = 2, /* zfp:precision=P: P bit planes per block */
    CODEC_ZFP_ACCURACY = 3, /* zfp:accuracy=A: absolute error at most A */
    CODEC_ZFP_REVERSIBLE = 4, /* zfp:reversible: lossless */
    CODEC_FP16 = 5, /* fp16: IEEE binary16, round to nearest even */
    CODEC_MODE_COUNT
} codec_mode_t;

typedef struct codec_spec {
    codec_mode_t mode;
    double param; /* R, P or A; 0 for the others */
} codec_spec_t;

#define CODEC_HEADER_SIZE 8u
#define CODEC_LAYOUT64_TAG 0x80u /* param bit: the chunk holds 64-value blocks */
#define CODEC_MAX_ELEMS 65535u
#define CODEC_SPEC_MAX 48 /* bytes codec_format needs at most, with the NUL */

/* Read MODE: none | fp16 | zfp:rate=R (1..32) | zfp:precision=P (1..32) |
 * zfp:accuracy=A (2^-126 <= A <= 2^30) | zfp:reversible. R and P are integers. 0, or -EINVAL
 * with the accepted spellings in err. */
int codec_parse(const char *text, codec_spec_t *out, char *err, size_t errlen);
/* The spelling codec_parse reads back to the same spec. */
void codec_format(const codec_spec_t *s, char *buf, size_t cap);
/* 1 for the ZFP modes (rate, precision, accuracy, reversible), else 0. */
int codec_is_zfp(codec_mode_t m);
/* 1 for a mode that may change values (everything but none and zfp:reversible). */
int codec_is_lossy(const codec_spec_t *s);
/* Bits one 4-value (1-D) ZFP block may take: 4R at fixed rate (at least 9: rates 1 and 2 take
 * 2.25 bits per value), else CODEC_ZFP_BLOCK_BITS. Bits one 64-value (3-D) block may take:
 * 64R at fixed rate, else CODEC_ZFP_BLOCK3_BITS. The streams' maxbits are set to these on
 * both sides, so libzfp neither writes nor reads more per block. They are above libzfp's own
 * worst cases for a float block (1-D: 146 bits reversible, 139 otherwise; 3-D: 9 + 63 +
 * 64 * 32 = 2120, a few more reversible); the reversible round trip of arbitrary bit patterns
 * in tests/test_codec.c checks that nothing is cut. */
#define CODEC_ZFP_BLOCK_BITS 152u
#define CODEC_ZFP_BLOCK3_BITS 2176u
#define CODEC_ZFP_BLOCK3_VALUES 64u
size_t codec_zfp_block_bits(const codec_spec_t *s);
size_t codec_zfp_block3_bits(const codec_spec_t *s);
/* How many of a chunk's first n values are coded as 64-value blocks (see the layout above). */
size_t codec_zfp_head(const codec_spec_t *s, size_t n);
/* Most bytes a chunk of n values, or of any fewer values, can take in this mode, header and
 * padding included (so a packet size that fits bounds every shorter chunk too). */
size_t codec_max_bytes(const codec_spec_t *s, size_t n);

/* The most values (a multiple of 4, at most CODEC_MAX_ELEMS) whose chunk always fits in
 * `bytes`; 0 if none does. */
size_t codec_max_elems(const codec_spec_t *s, size_t bytes);

typedef struct codec_ctx codec_ctx_t;

/* A context for chunks of at most max_elems values in mode s. 0 or -EINVAL / -ENOMEM. */
int codec_ctx_open(const codec_spec_t *s, size_t max_elems, codec_ctx_t **out, char *err,
                   size_t errlen);
void codec_ctx_close(codec_ctx_t *c);
const codec_spec_t *codec_ctx_spec(const codec_ctx_t *c);

/* Encode n (1..max_elems) values into dst (cap >= codec_max_bytes(spec, n)): the chunk's
 * length in bytes (a multiple of 4), or -EINVAL / -ENOSPC. */
long codec_encode(codec_ctx_t *c, const float *src, size_t n, void *dst, size_t cap);
/* Decode a chunk of len bytes that must hold exactly n values into dst[0..n). 0; 1 when values
 * decoded past the float range (a block near FLT_MAX) and were clamped to +-FLT_MAX; or
 * -EBADMSG with the reason in err (dst may then hold anything, but nothing past dst[n - 1]). */
int codec_decode(codec_ctx_t *c, const void *src, size_t len, float *dst, size_t n, char *err,
                 size_t errlen);
/* The element count a chunk claims (0 if it is shorter than its header). */
size_t codec_chunk_elems(const void *src, size_t len);

/* libzfp's own round trip (zfp_compress, zfp_decompress of whole fields) of one chunk of n
 * values in ZFP mode s, in the layout above, into ref[0..n): what codec_decode(codec_encode(x))
 * must equal value for value. 0, or -EINVAL (not a ZFP mode) / -ENOMEM / -EIO. */
int codec_zfp_reference(const codec_spec_t *s, const float *x, size_t n, float *ref);

#endif /* INAGG_CODEC_H */
