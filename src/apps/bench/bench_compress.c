/*
 * bench_compress.c - the run of `inagg bench compress` (see bench_compress.h): generated and
 * captured data, chunked coding on threads timed over enough passes, and the check against
 * libzfp's own round trip of each chunk's fields (codec_zfp_reference: ZFP codes its blocks
 * independently, so the block coder must not change a single value).
 */
#include "apps/bench/bench_compress.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zfp.h>

#include "apps/bench/samples.h"
#include "lib/base/util.h"
#include "lib/codec/codec.h"

const char *const bc_modes[BC_N_MODES] = {"zfp:rate=4",        "zfp:rate=8",
                                          "zfp:rate=16",       "zfp:rate=32",
                                          "zfp:precision=4",   "zfp:precision=8",
                                          "zfp:precision=16",  "zfp:precision=32",
                                          "zfp:accuracy=1e-1", "zfp:accuracy=1e-3",
                                          "zfp:accuracy=1e-6", "zfp:accuracy=1e-9",
                                          "zfp:reversible",    "fp16"};
const char *const bc_data[BC_N_DATA] = {"normal", "exponential", "captured"};

/* ---- data ------------------------------------------------------------------------------- */

/* Gradient-like values at scale 1e-3: normal, or |x| ~ Exp(1) (never 0) with a random sign.
 * Generated, not captured from a trainer. */
static void generate(float *x, size_t n, int exponential, uint64_t seed)
{
    util_rng_t r;
    util_rng_seed(&r, seed * 2 + (uint64_t)exponential);
    for (size_t i = 0; i < n; i++) {
        double v;
        if (exponential) {
            double u;
            do
                u = util_rng_double(&r);
            while (u <= 0.0);
            v = -log(u);
            if (v == 0.0)
                v = 1e-30;
            if (util_rng_next(&r) & 1u)
                v = -v;
        } else {
            double u = util_rng_double(&r) + 1e-300, w = util_rng_double(&r);
            v = sqrt(-2.0 * log(u)) * cos(6.283185307179586 * w);
        }
        x[i] = (float)(1e-3 * v);
    }
}

/* Reads the --input files (raw little-endian float32, concatenated in order) into a new array:
 * its length in *n. Refuses, with the file and position, a length that is not whole values,
 * a non-finite value, fewer than BC_MIN_INPUT_VALUES or more than BC_MAX_VALUES in all. */
static float *read_inputs(const bc_opts_t *o, size_t *n)
{
    size_t total = 0, cap = 0; /* values */
    float *x = NULL;
    for (uint32_t k = 0; k < o->ninputs; k++) {
        const char *path = o->inputs[k];
        FILE *f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, BC_CMD ": --input %s: %s\n", path, strerror(errno));
            goto fail;
        }
        size_t bytes = 0; /* of this file, read into x from x + total on */
        int bad = 0;
        for (;;) {
            if (total + bytes / sizeof(float) + 1 >= cap) {
                size_t ncap = cap ? cap * 2 : (size_t)1 << 20;
                if (ncap > BC_MAX_VALUES + 2)
                    ncap = BC_MAX_VALUES + 2;
                float *nx = ncap > cap ? realloc(x, ncap * sizeof(float)) : NULL;
                if (!nx) {
                    fprintf(stderr,
                            BC_CMD ": --input: more than %llu values in all, or out of "
                                   "memory\n",
                            (unsigned long long)BC_MAX_VALUES);
                    bad = 1;
                    break;
                }
                x = nx;
                cap = ncap;
            }
            char *at = (char *)(x + total) + bytes;
            size_t room = (cap - total) * sizeof(float) - bytes;
            size_t r = fread(at, 1, room, f);
            bytes += r;
            if (r < room)
                break; /* end of file or an error */
        }
        if (!bad && ferror(f)) {
            fprintf(stderr, BC_CMD ": --input %s: read error\n", path);
            bad = 1;
        }
        fclose(f);
        if (!bad && bytes % sizeof(float)) {
            fprintf(stderr,
                    BC_CMD ": --input %s: %zu bytes is not a whole number of float32 "
                           "values\n",
                    path, bytes);
            bad = 1;
        }
        for (size_t i = 0; !bad && i < bytes / sizeof(float); i++)
            if (!isfinite(x[total + i])) {
                fprintf(stderr, BC_CMD ": --input %s: value %zu is not finite\n", path, i);
                bad = 1;
            }
        if (bad)
            goto fail;
        total += bytes / sizeof(float);
        if (total > BC_MAX_VALUES) {
            fprintf(stderr, BC_CMD ": --input: more than %llu values in all\n",
                    (unsigned long long)BC_MAX_VALUES);
            goto fail;
        }
    }
    if (total < BC_MIN_INPUT_VALUES) {
        fprintf(stderr, BC_CMD ": --input: %zu values in all, at least %d needed\n", total,
                BC_MIN_INPUT_VALUES);
        goto fail;
    }
    *n = total;
    return x;
fail:
    free(x);
    return NULL;
}

/* ---- chunked coding on threads ---------------------------------------------------------- */

typedef struct job {
    const bc_opts_t *o;
    codec_spec_t spec;
    const float *x;
    float *y;
    uint8_t *buf; /* [nchunks * cap] */
    size_t *len; /* [nchunks] */
    size_t cap, nchunks;
    uint32_t passes; /* over every chunk per timed run (short runs would time thread start-up) */
    uint32_t nthreads, index;
    int decode, failed;
} job_t;

static void *coder(void *arg)
{
    job_t *j = arg;
    codec_ctx_t *c;
    if (codec_ctx_open(&j->spec, j->o->chunk, &c, NULL, 0) != 0) {
        j->failed = 1;
        return NULL;
    }
    for (uint32_t pass = 0; pass < j->passes && !j->failed; pass++)
        for (size_t k = j->index; k < j->nchunks; k += j->nthreads) { /* chunk k: thread k % T */
            size_t off = k * j->o->chunk;
            size_t n = j->o->elems - off < j->o->chunk ? j->o->elems - off : j->o->chunk;
            uint8_t *b = j->buf + k * j->cap;
            if (!j->decode) {
                long l = codec_encode(c, j->x + off, n, b, j->cap);
                if (l < 0)
                    j->failed = 1;
                else
                    j->len[k] = (size_t)l;
            } else if (codec_decode(c, b, j->len[k], j->y + off, n, NULL, 0) < 0) {
                j->failed = 1;
            }
        }
    codec_ctx_close(c);
    return NULL;
}

/* Encode (decode = 0) or decode every chunk on nthreads threads: seconds, or -1 when a coder
 * failed (a time, not an error code). */
static double run_coders(job_t *base, uint32_t nthreads, int decode)
{
    job_t jobs[BC_MAX_THREADS];
    pthread_t tid[BC_MAX_THREADS];
    uint64_t t0 = util_now_ns();
    int failed = 0;
    for (uint32_t i = 0; i < nthreads; i++) {
        jobs[i] = *base;
        jobs[i].nthreads = nthreads;
        jobs[i].index = i;
        jobs[i].decode = decode;
        if (pthread_create(&tid[i], NULL, coder, &jobs[i]) != 0)
            return -1;
    }
    for (uint32_t i = 0; i < nthreads; i++) {
        pthread_join(tid[i], NULL);
        failed |= jobs[i].failed;
    }
    return failed ? -1 : (double)(util_now_ns() - t0) * 1e-9;
}

/* libzfp's own round trip of every chunk in the codec's layout (codec_zfp_reference) into
 * ref: 0, or a negative errno. */
static int offline_zfp(const codec_spec_t *s, const float *x, size_t n, size_t chunk, float *ref)
{
    for (size_t off = 0; off < n; off += chunk) {
        int rc = codec_zfp_reference(s, x + off, n - off < chunk ? n - off : chunk, ref + off);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int measure(const bc_opts_t *o, const char *mode, const char *data, const float *x, float *y,
                   float *ref, bc_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->mode = mode;
    res->data = data;
    res->values = o->elems;
    job_t j = {.o = o, .x = x, .y = y};
    if (codec_parse(mode, &j.spec, NULL, 0) != 0)
        return -EINVAL;
    j.nchunks = (o->elems + o->chunk - 1) / o->chunk;
    j.cap = codec_max_bytes(&j.spec, o->chunk);
    j.buf = malloc(j.nchunks * j.cap);
    j.len = calloc(j.nchunks, sizeof(size_t));
    if (!j.buf || !j.len) {
        free(j.buf);
        free(j.len);
        return -ENOMEM;
    }
    /* One untimed pass each way (first touch of the buffers), which also sizes the timed runs:
     * enough passes over the data set for at least 0.2 s on one thread each way. */
    j.passes = 1;
    double t_enc = run_coders(&j, 1, 0), t_dec = t_enc > 0 ? run_coders(&j, 1, 1) : -1;
    int rc = t_enc > 0 && t_dec > 0 ? 0 : -EIO;
    double once = t_enc < t_dec ? t_enc : t_dec;
    j.passes = once > 0 && once < 0.2 ? (uint32_t)(0.2 / once) + 1 : 1;
    if (j.passes > 1000)
        j.passes = 1000;
    uint32_t tcount[2] = {1, o->threads};
    double enc[2][64], dec[2][64];
    /* one thread and T threads alternate in each repeat, so both see the same load */
    for (uint32_t k = 0; k < o->repeats && rc == 0; k++)
        for (int t = 0; t < 2 && rc == 0; t++) {
            enc[t][k] = run_coders(&j, tcount[t], 0);
            dec[t][k] = run_coders(&j, tcount[t], 1);
            if (enc[t][k] <= 0 || dec[t][k] <= 0)
                rc = -EIO;
        }
    for (int t = 0; t < 2 && rc == 0; t++) {
        double bytes = (double)o->elems * 4.0 * j.passes;
        res->enc_gbs[t] = bytes / bench_median(enc[t], o->repeats) * 1e-9;
        res->dec_gbs[t] = bytes / bench_median(dec[t], o->repeats) * 1e-9;
    }
    if (rc == 0) {
        size_t total = 0;
        for (size_t k = 0; k < j.nchunks; k++)
            total += j.len[k];
        res->ratio = (double)o->elems * 4.0 / (double)total;
        res->bits_per_value = (double)total * 8.0 / (double)o->elems;
        double se = 0, sr = 0;
        int have_ref =
            j.spec.mode != CODEC_FP16 && offline_zfp(&j.spec, x, o->elems, o->chunk, ref) == 0;
        res->ref_max_diff = have_ref ? 0 : NAN;
        for (size_t i = 0; i < o->elems; i++) {
            double e = fabs((double)y[i] - x[i]);
            res->max_err = fmax(res->max_err, e);
            se += e * e;
            if (have_ref) {
                double d = fabs((double)y[i] - ref[i]);
                res->ref_max_diff = fmax(res->ref_max_diff, d);
                sr += d * d;
            }
        }
        res->rms_err = sqrt(se / (double)o->elems);
        res->ref_rms_diff = have_ref ? sqrt(sr / (double)o->elems) : NAN;
    }
    free(j.buf);
    free(j.len);
    return rc;
}

/* The modes on one data set: results appended at res[*n]. 0, or -EIO after a message. */
static int measure_set(const bc_opts_t *o, size_t d, const float *src, float *y, float *ref,
                       bc_result_t *res, size_t *n)
{
    for (size_t m = 0; m < BC_N_MODES; m++) {
        if (measure(o, bc_modes[m], bc_data[d], src, y, ref, &res[*n]) != 0) {
            fprintf(stderr, BC_CMD ": %s on %s data: coding failed\n", bc_modes[m], bc_data[d]);
            return -EIO;
        }
        (*n)++;
        if (!(res[*n - 1].ref_max_diff == 0) && !isnan(res[*n - 1].ref_max_diff)) {
            fprintf(stderr,
                    BC_CMD ": %s on %s data: differs from libzfp's round trip by "
                           "up to %g\n",
                    bc_modes[m], bc_data[d], res[*n - 1].ref_max_diff);
            return -EIO;
        }
    }
    return 0;
}

uint64_t bc_memory_bytes(const bc_opts_t *o)
{
    uint64_t most = o->captured > o->elems ? o->captured : o->elems;
    uint64_t chunk = o->chunk ? o->chunk : 1, nchunks = (most + chunk - 1) / chunk, cap = 0;
    for (size_t m = 0; m < BC_N_MODES; m++) {
        codec_spec_t spec;
        if (codec_parse(bc_modes[m], &spec, NULL, 0) == 0) {
            uint64_t c = codec_max_bytes(&spec, (size_t)chunk);
            cap = c > cap ? c : cap;
        }
    }
    /* run(): x, y, ref; measure(): the codes and their lengths */
    return (o->elems + 2 * most) * sizeof(float) + nchunks * (cap + sizeof(size_t));
}

int bc_run(bc_opts_t *o, int data_given, bc_result_t **res, size_t *n)
{
    float *cap = NULL;
    *n = 0;
    *res = NULL;
    if (o->ninputs) {
        if (!(cap = read_inputs(o, &o->captured)))
            return -EINVAL;
        o->data_mask = (data_given ? o->data_mask : 0) | 4;
    }
    size_t most = o->captured > o->elems ? o->captured : o->elems;
    float *x = malloc(o->elems * sizeof(float)), *y = malloc(most * sizeof(float)),
          *ref = malloc(most * sizeof(float));
    *res = calloc(BC_N_DATA * BC_N_MODES, sizeof(**res));
    int rc = 0;
    if (!x || !y || !ref || !*res) {
        fprintf(stderr, BC_CMD ": out of memory for %zu values\n", most);
        rc = -ENOMEM;
    }
    for (size_t d = 0; d < BC_N_DATA && rc == 0; d++) {
        if (!(o->data_mask & (1 << d)))
            continue;
        bc_opts_t od = *o; /* the data set's own length */
        const float *src = x;
        if (d == 2) {
            od.elems = o->captured;
            src = cap;
        } else {
            generate(x, o->elems, (int)d, o->seed);
        }
        rc = measure_set(&od, d, src, y, ref, *res, n);
    }
    free(cap);
    free(x);
    free(y);
    free(ref);
    return rc;
}
