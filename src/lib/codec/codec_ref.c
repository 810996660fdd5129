/*
 * codec_ref.c - libzfp's own whole-field round trip of a chunk in the codec's ZFP layout
 * (codec.h): the 3-D field of its first codec_zfp_head values, the 1-D field of the rest. The
 * bench and the tests compare the block coder in codec.c against it value for value.
 */
#include <errno.h>
#include <stdlib.h>

#include <zfp.h>

#include "lib/codec/codec.h"
#include "lib/codec/zfp_mode.h"

/* zfp_compress then zfp_decompress of field f into g: 0, or -ENOMEM / -EIO. */
static int round_trip(const codec_spec_t *s, uint dims, zfp_field *f, zfp_field *g)
{
    zfp_stream *z = zfp_stream_open(NULL);
    if (!z)
        return -ENOMEM;
    codec_zfp_stream_mode(z, s, dims);
    size_t cap = zfp_stream_maximum_size(z, f);
    void *mem = malloc(cap);
    bitstream *bs = mem ? stream_open(mem, cap) : NULL;
    int rc = -ENOMEM;
    if (bs) {
        zfp_stream_set_bit_stream(z, bs);
        rc = -EIO;
        if (zfp_compress(z, f) > 0) {
            zfp_stream_rewind(z);
            rc = zfp_decompress(z, g) > 0 ? 0 : -EIO;
        }
        stream_close(bs);
    }
    free(mem);
    zfp_stream_close(z);
    return rc;
}

/* The field of x[0..n) in dims 1 or 3 (4 x 4 x n/16), and its twin over ref. */
static int part(const codec_spec_t *s, uint dims, const float *x, size_t n, float *ref)
{
    zfp_field *f, *g;
    if (dims == 3) {
        f = zfp_field_3d((void *)x, zfp_type_float, 4, 4, n / 16u);
        g = zfp_field_3d(ref, zfp_type_float, 4, 4, n / 16u);
    } else {
        f = zfp_field_1d((void *)x, zfp_type_float, n);
        g = zfp_field_1d(ref, zfp_type_float, n);
    }
    int rc = f && g ? round_trip(s, dims, f, g) : -ENOMEM;
    if (f)
        zfp_field_free(f);
    if (g)
        zfp_field_free(g);
    return rc;
}

int codec_zfp_reference(const codec_spec_t *s, const float *x, size_t n, float *ref)
{
    if (!codec_is_zfp(s->mode))
        return -EINVAL;
    size_t head = codec_zfp_head(s, n);
    int rc = head ? part(s, 3, x, head, ref) : 0;
    if (rc == 0 && head < n)
        rc = part(s, 1, x + head, n - head, ref + head);
    return rc;
}
