/*
 * zfp_mode.h - a codec spec's ZFP mode on a libzfp stream, as the block coder (codec.c) and
 * libzfp's whole-field reference (codec_ref.c) both set it.
 */
#ifndef INAGG_CODEC_ZFP_MODE_H
#define INAGG_CODEC_ZFP_MODE_H

#include <zfp.h>

#include "lib/codec/codec.h"

/* libzfp's mode for s (rate, precision, accuracy or reversible) on z, for blocks of dims 1
 * or 3 (a fixed rate depends on it). */
static inline void codec_zfp_stream_mode(zfp_stream *z, const codec_spec_t *s, uint dims)
{
    switch (s->mode) {
        case CODEC_ZFP_RATE:
            zfp_stream_set_rate(z, s->param, zfp_type_float, dims, zfp_false);
            break;
        case CODEC_ZFP_PRECISION: zfp_stream_set_precision(z, (uint)s->param); break;
        case CODEC_ZFP_ACCURACY: zfp_stream_set_accuracy(z, s->param); break;
        default: zfp_stream_set_reversible(z); break;
    }
}

#endif /* INAGG_CODEC_ZFP_MODE_H */
