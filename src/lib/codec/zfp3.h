/*
 * zfp3.h - a fixed-rate coder for one 3-D float block of libzfp 1.0 (64 values, 4x4x4, x
 * fastest), bit for bit what zfp_encode_block_float_3 / zfp_decode_block_float_3 write and
 * read with zfp_stream_set_rate(R, zfp_type_float, 3, unaligned), in fewer instructions: the
 * bit planes are gathered with vector masks and the group tests' runs are written and read a
 * run at a time. A block at rate R takes exactly R 64-bit words of libzfp's bit stream (bits
 * least significant first), so every block starts on a word and needs no stream state.
 */
#ifndef INAGG_CODEC_ZFP3_H
#define INAGG_CODEC_ZFP3_H

#include <stdint.h>

/* Encode x[0..64) at `rate` (1..32) bits per value into words[0..rate). 0, or -1 for a block
 * this coder leaves to libzfp: a largest magnitude below 2^-97, where libzfp's own scale
 * factor overflows float. x must be finite. */
int zfp3_encode_block(const float *x, uint64_t *words, unsigned rate);

/* Decode words[0..rate) into x[0..64): always the values libzfp decodes from those bits. */
void zfp3_decode_block(const uint64_t *words, unsigned rate, float *x);

#endif /* INAGG_CODEC_ZFP3_H */
