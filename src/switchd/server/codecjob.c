/*
 * codecjob.c - the switch's side of a compressed job (see codecjob.h): decode a contribution,
 * re-encode a completed sum, keep each slot copy's coded result.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/kernels/vec.h"
#include "switchd/server/codecjob.h"

typedef struct cj_thread {
    codec_ctx_t *ctx;
    float *f; /* [elems] */
    float *g; /* [elems]: the result decoded again (feedback) */
    uint32_t *be; /* [elems] */
} cj_thread_t;

struct codecjob {
    codec_spec_t spec;
    uint32_t nthreads, nslots, elems;
    size_t res_words; /* words per copy's result buffer */
    cj_thread_t *t; /* [nthreads] */
    uint32_t *res; /* [nslots * 2 * res_words] */
    uint32_t *res_len; /* [nslots * 2]: words of the last result */
    float *resid; /* feedback: [nslots * elems], what slot s's last encoding dropped */
    uint32_t *resid_chunk; /* [nslots]: the chunk that residual belongs to (+1; 0: none) */
    uint32_t *resid_n; /* [nslots]: its length */
};

static size_t result_words(const codec_spec_t *s, uint32_t elems)
{
    return (codec_max_bytes(s, elems) + 3u) / 4u;
}

uint64_t codecjob_bytes(const codec_spec_t *s, uint32_t nthreads, uint32_t nslots, uint32_t elems)
{
    return (uint64_t)nslots * 2u * (result_words(s, elems) + 1u) * 4u + 4u * (uint64_t)elems +
           (uint64_t)nslots * ((uint64_t)elems * 4u + 8u) +
           (uint64_t)nthreads * (8u * (uint64_t)elems + codec_max_bytes(s, elems) + 8192u);
}

void codecjob_free(codecjob_t *cj)
{
    if (!cj)
        return;
    for (uint32_t i = 0; cj->t && i < cj->nthreads; i++) {
        codec_ctx_close(cj->t[i].ctx);
        free(cj->t[i].f);
        free(cj->t[i].g);
        free(cj->t[i].be);
    }
    free(cj->t);
    free(cj->res);
    free(cj->res_len);
    free(cj->resid);
    free(cj->resid_chunk);
    free(cj->resid_n);
    free(cj);
}

codecjob_t *codecjob_create(const codec_spec_t *s, int feedback, uint32_t nthreads, uint32_t nslots,
                            uint32_t elems)
{
    codecjob_t *cj = calloc(1, sizeof(*cj));
    if (!cj)
        return NULL;
    cj->spec = *s;
    cj->nthreads = nthreads;
    cj->nslots = nslots;
    cj->elems = elems;
    cj->res_words = result_words(s, elems);
    cj->t = calloc(nthreads, sizeof(cj_thread_t));
    cj->res = calloc((size_t)nslots * 2u * cj->res_words, sizeof(uint32_t));
    cj->res_len = calloc((size_t)nslots * 2u, sizeof(uint32_t));
    if (!cj->t || !cj->res || !cj->res_len)
        goto fail;
    if (feedback) {
        cj->resid = calloc((size_t)nslots * elems, sizeof(float));
        cj->resid_chunk = calloc(nslots, sizeof(uint32_t));
        cj->resid_n = calloc(nslots, sizeof(uint32_t));
        if (!cj->resid || !cj->resid_chunk || !cj->resid_n)
            goto fail;
    }
    for (uint32_t i = 0; i < nthreads; i++) {
        cj->t[i].f = malloc((size_t)elems * sizeof(float));
        cj->t[i].g = malloc((size_t)elems * sizeof(float));
        cj->t[i].be = malloc((size_t)elems * sizeof(uint32_t));
        if (!cj->t[i].f || !cj->t[i].g || !cj->t[i].be ||
            codec_ctx_open(s, elems, &cj->t[i].ctx, NULL, 0) != 0)
            goto fail;
    }
    return cj;
fail:
    codecjob_free(cj);
    return NULL;
}

uint32_t codecjob_decode(codecjob_t *cj, uint32_t thread, const uint32_t *payload, uint32_t words,
                         const uint32_t **out_be, int *saturated)
{
    cj_thread_t *t = &cj->t[thread];
    size_t len = (size_t)words * 4u;
    size_t n = codec_chunk_elems(payload, len);
    int rc = n == 0 || n > cj->elems ? -1 : codec_decode(t->ctx, payload, len, t->f, n, NULL, 0);
    if (rc < 0)
        return 0;
    *saturated = rc == 1;
    vec_f32_to_be(t->f, t->be, n);
    *out_be = t->be;
    return (uint32_t)n;
}

uint32_t codecjob_encode_result(codecjob_t *cj, uint32_t thread, uint32_t slot, uint32_t copy,
                                uint32_t chunk, const uint32_t *sum_be, uint32_t n,
                                const uint32_t **out, int *saturated)
{
    cj_thread_t *t = &cj->t[thread];
    vec_be_to_f32(sum_be, t->f, n);
    float *res = cj->resid ? cj->resid + (size_t)slot * cj->elems : NULL;
    if (res && (cj->resid_chunk[slot] != chunk + 1u || cj->resid_n[slot] != n)) {
        memset(res, 0, (size_t)n * sizeof(float)); /* another chunk's residual: start over */
        cj->resid_chunk[slot] = chunk + 1u;
        cj->resid_n[slot] = n;
    }
    if (res)
        for (uint32_t i = 0; i < n; i++)
            t->f[i] += res[i];
    *saturated = 0;
    for (uint32_t i = 0; i < n; i++)
        if (!isfinite(t->f[i])) {
            t->f[i] = signbit(t->f[i]) ? -FLT_MAX : FLT_MAX; /* sums of finite values: no NaN */
            *saturated = 1;
        }
    size_t at = (size_t)slot * 2u + copy;
    uint32_t *buf = cj->res + at * cj->res_words;
    long l = codec_encode(t->ctx, t->f, n, buf, cj->res_words * 4u);
    cj->res_len[at] = l > 0 ? (uint32_t)((size_t)l / 4u) : 0;
    if (res) { /* what this encoding dropped goes into the chunk's next sum */
        if (l > 0 && codec_decode(t->ctx, buf, (size_t)l, t->g, n, NULL, 0) >= 0)
            for (uint32_t i = 0; i < n; i++)
                res[i] = t->f[i] - t->g[i];
        else
            memset(res, 0, (size_t)n * sizeof(float));
    }
    *out = buf;
    return cj->res_len[at];
}

uint32_t codecjob_result(const codecjob_t *cj, uint32_t slot, uint32_t copy, const uint32_t **out)
{
    size_t at = (size_t)slot * 2u + copy;
    *out = cj->res + at * cj->res_words;
    return cj->res_len[at];
}
