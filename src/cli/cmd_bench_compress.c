/*
 * cmd_bench_compress.c - `inagg bench compress`: GCOW's grid of ZFP modes (fixed rate and
 * fixed precision 4, 8, 16, 32; fixed accuracy 1e-1, 1e-3, 1e-6, 1e-9; reversible) and fp16 on
 * generated gradient-like data (normal, and zero-free exponential magnitudes with random
 * signs) and on captured gradients (--input: raw float32 files, e.g. from `inagg train
 * --capture-gradients`), coded the way the aggregation path codes it: chunk by chunk (src/codec), chunks
 * spread over codec threads. For each mode: compression ratio, encode and decode GB/s with one
 * thread and with --threads, the maximum and RMS error against the original values and
 * against an offline libzfp round trip of the whole array (zfp_compress / zfp_decompress:
 * ZFP codes 4-value blocks independently, so chunking must not change a single value).
 * Medians of --repeats runs. Text table, --json FILE|-, --plot FILE.png (gnuplot).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zfp.h>

#include "base/util.h"
#include "cli/bench_opts.h"
#include "cli/commands.h"
#include "bench/samples.h"
#include "cli/flags.h"
#include "cli/output.h"
#include "codec/codec.h"
#include "json/json.h"
#include "launch/launch.h"

#define BC_CMD "inagg bench compress"
#define BC_MAX_THREADS 16
#define BC_MAX_INPUTS 64
#define BC_MAX_VALUES (1ull << 28) /* 1 GiB of float32 per data set */
#define BC_MIN_INPUT_VALUES 4096

static const char *const k_modes[] = {
    "zfp:rate=4", "zfp:rate=8", "zfp:rate=16", "zfp:rate=32",
    "zfp:precision=4", "zfp:precision=8", "zfp:precision=16", "zfp:precision=32",
    "zfp:accuracy=1e-1", "zfp:accuracy=1e-3", "zfp:accuracy=1e-6", "zfp:accuracy=1e-9",
    "zfp:reversible", "fp16"};
#define N_MODES (sizeof k_modes / sizeof *k_modes)
static const char *const k_data[] = {"normal", "exponential", "captured"};
#define N_DATA (sizeof k_data / sizeof *k_data)

typedef struct bc_opts {
    size_t elems, chunk;
    uint32_t threads, repeats;
    uint64_t seed;
    int data_mask; /* bit 0 normal, bit 1 exponential, bit 2 captured (--input) */
    const char *inputs[BC_MAX_INPUTS];
    uint32_t ninputs;
    size_t captured; /* values read from the inputs */
    const char *json_path, *plot_path;
} bc_opts_t;

typedef struct bc_result {
    const char *mode, *data;
    size_t values;
    double ratio, bits_per_value;
    double enc_gbs[2], dec_gbs[2]; /* [0] one thread, [1] --threads */
    double max_err, rms_err;       /* against the original */
    double ref_max_diff, ref_rms_diff; /* against the offline libzfp round trip (NaN: fp16) */
} bc_result_t;

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
                    fprintf(stderr, BC_CMD ": --input: more than %llu values in all, or out of "
                            "memory\n", (unsigned long long)BC_MAX_VALUES);
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
            fprintf(stderr, BC_CMD ": --input %s: %zu bytes is not a whole number of float32 "
                    "values\n", path, bytes);
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
    uint8_t *buf;    /* [nchunks * cap] */
    size_t *len;     /* [nchunks] */
    size_t cap, nchunks;
    uint32_t passes;  /* over every chunk per timed run (short runs would time thread start-up) */
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

/* Encode (decode = 0) or decode every chunk on nthreads threads: seconds, or -1. */
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

static double median(double *v, uint32_t n)
{
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* libzfp's own round trip of the whole array in the same mode into ref. 0 or -1. */
static int offline_zfp(const codec_spec_t *s, const float *x, size_t n, float *ref)
{
    zfp_field *f = zfp_field_1d((void *)x, zfp_type_float, n);
    zfp_field *g = zfp_field_1d(ref, zfp_type_float, n);
    zfp_stream *z = zfp_stream_open(NULL);
    int rc = -1;
    if (!f || !g || !z)
        goto out;
    switch (s->mode) {
    case CODEC_ZFP_RATE: zfp_stream_set_rate(z, s->param, zfp_type_float, 1, zfp_false); break;
    case CODEC_ZFP_PRECISION: zfp_stream_set_precision(z, (uint)s->param); break;
    case CODEC_ZFP_ACCURACY: zfp_stream_set_accuracy(z, s->param); break;
    default: zfp_stream_set_reversible(z); break;
    }
    size_t cap = zfp_stream_maximum_size(z, f);
    void *mem = malloc(cap);
    bitstream *bs = mem ? stream_open(mem, cap) : NULL;
    if (bs) {
        zfp_stream_set_bit_stream(z, bs);
        if (zfp_compress(z, f) > 0) {
            zfp_stream_rewind(z);
            rc = zfp_decompress(z, g) > 0 ? 0 : -1;
        }
        stream_close(bs);
    }
    free(mem);
out:
    if (z)
        zfp_stream_close(z);
    if (f)
        zfp_field_free(f);
    if (g)
        zfp_field_free(g);
    return rc;
}

static int measure(const bc_opts_t *o, const char *mode, const char *data, const float *x,
                   float *y, float *ref, bc_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->mode = mode;
    res->data = data;
    res->values = o->elems;
    job_t j = {.o = o, .x = x, .y = y};
    if (codec_parse(mode, &j.spec, NULL, 0) != 0)
        return -1;
    j.nchunks = (o->elems + o->chunk - 1) / o->chunk;
    j.cap = codec_max_bytes(&j.spec, o->chunk);
    j.buf = malloc(j.nchunks * j.cap);
    j.len = calloc(j.nchunks, sizeof(size_t));
    if (!j.buf || !j.len) {
        free(j.buf);
        free(j.len);
        return -1;
    }
    /* One untimed pass each way (first touch of the buffers), which also sizes the timed runs:
     * enough passes over the data set for at least 0.2 s on one thread each way. */
    j.passes = 1;
    double t_enc = run_coders(&j, 1, 0), t_dec = t_enc > 0 ? run_coders(&j, 1, 1) : -1;
    int rc = t_enc > 0 && t_dec > 0 ? 0 : -1;
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
                rc = -1;
        }
    for (int t = 0; t < 2 && rc == 0; t++) {
        double bytes = (double)o->elems * 4.0 * j.passes;
        res->enc_gbs[t] = bytes / median(enc[t], o->repeats) * 1e-9;
        res->dec_gbs[t] = bytes / median(dec[t], o->repeats) * 1e-9;
    }
    if (rc == 0) {
        size_t total = 0;
        for (size_t k = 0; k < j.nchunks; k++)
            total += j.len[k];
        res->ratio = (double)o->elems * 4.0 / (double)total;
        res->bits_per_value = (double)total * 8.0 / (double)o->elems;
        double se = 0, sr = 0;
        int have_ref = j.spec.mode != CODEC_FP16 && offline_zfp(&j.spec, x, o->elems, ref) == 0;
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

/* ---- output ----------------------------------------------------------------------------- */

static void render_text(FILE *out, const bc_opts_t *o, const bc_result_t *r, size_t n)
{
    if (o->data_mask & 3)
        fprintf(out, "inagg bench compress: %zu values per generated data set (gradient-like, "
                "scale 1e-3)", o->elems);
    else
        fprintf(out, "inagg bench compress:");
    if (o->data_mask & 4)
        fprintf(out, "%s%zu captured values from %u file(s)", o->data_mask & 3 ? "; " : " ",
                o->captured, o->ninputs);
    fprintf(out, ", chunks of %zu values, %u codec thread(s) against 1, median of %u\n",
            o->chunk, o->threads, o->repeats);
    fprintf(out, "%-12s %-20s %7s %6s %9s %9s %9s %9s %10s %10s %10s\n", "data", "mode", "ratio",
           "bits", "enc GB/s", "dec GB/s", "enc xT", "dec xT", "max err", "rms err",
           "vs libzfp");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%-12s %-20s %7.2f %6.2f %9.3f %9.3f %8.2fx %8.2fx %10.3g %10.3g %10.3g\n",
               r[i].data, r[i].mode, r[i].ratio, r[i].bits_per_value, r[i].enc_gbs[0],
               r[i].dec_gbs[0], r[i].enc_gbs[1] / r[i].enc_gbs[0],
               r[i].dec_gbs[1] / r[i].dec_gbs[0], r[i].max_err, r[i].rms_err, r[i].ref_max_diff);
    fprintf(out, "(enc/dec GB/s: float32 bytes per second on one thread; xT: speedup with %u "
           "threads; vs libzfp: largest difference from libzfp's own round trip of the whole "
           "array, which must be 0; fp16 has none)\n", o->threads);
}

static int render_json(const bc_opts_t *o, const bc_result_t *r, size_t n)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_int(&w, "elems", (int64_t)o->elems);
    json_int(&w, "chunk", (int64_t)o->chunk);
    json_int(&w, "threads", o->threads);
    json_int(&w, "repeats", o->repeats);
    json_int(&w, "seed", (int64_t)o->seed);
    json_string(&w, "data_source", "generated (normal; zero-free exponential magnitudes, random "
                "sign), scale 1e-3; captured: the --input files");
    json_begin_array(&w, "inputs");
    for (uint32_t k = 0; k < o->ninputs; k++)
        json_string(&w, NULL, o->inputs[k]);
    json_end_array(&w);
    json_int(&w, "captured_values", (int64_t)o->captured);
    json_begin_array(&w, "results");
    for (size_t i = 0; i < n; i++) {
        json_begin_object(&w, NULL);
        json_string(&w, "data", r[i].data);
        json_string(&w, "mode", r[i].mode);
        json_int(&w, "values", (int64_t)r[i].values);
        json_number(&w, "ratio", r[i].ratio);
        json_number(&w, "bits_per_value", r[i].bits_per_value);
        json_number(&w, "encode_gbs_1", r[i].enc_gbs[0]);
        json_number(&w, "decode_gbs_1", r[i].dec_gbs[0]);
        json_number(&w, "encode_gbs_threads", r[i].enc_gbs[1]);
        json_number(&w, "decode_gbs_threads", r[i].dec_gbs[1]);
        json_number(&w, "max_error", r[i].max_err);
        json_number(&w, "rms_error", r[i].rms_err);
        json_number(&w, "max_diff_vs_libzfp", r[i].ref_max_diff);
        json_number(&w, "rms_diff_vs_libzfp", r[i].ref_rms_diff);
        json_end_object(&w);
    }
    json_end_array(&w);
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, BC_CMD);
}

/* Ratio against RMS error, one series per data set and mode family (gnuplot). */
static int render_plot(const bc_opts_t *o, const bc_result_t *r, size_t n)
{
    char gnuplot[4096];
    if (launch_find_in_path("gnuplot", gnuplot, sizeof(gnuplot)) != 0) {
        fprintf(stderr, BC_CMD ": --plot needs gnuplot (apt-get install gnuplot-nox)\n");
        return -1;
    }
    char dir[] = "/tmp/inagg-bcplot-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char data[64], script[64];
    snprintf(data, sizeof(data), "%s/data", dir);
    snprintf(script, sizeof(script), "%s/plot.gp", dir);
    static const char *const fam[] = {"zfp:rate", "zfp:precision", "zfp:accuracy",
                                      "zfp:reversible", "fp16"};
    FILE *f = fopen(data, "w");
    FILE *g = f ? fopen(script, "w") : NULL;
    int rc = -1, series = 0;
    if (f && g) {
        fprintf(g, "set terminal pngcairo size 900,560 font ',10'\nset output \"%s\"\n"
                   "set title \"compression ratio against RMS error, chunks of %zu values\"\n"
                   "set logscale x 10\nset logscale y 2\nset grid\nset key outside right\n"
                   "set xlabel \"RMS error (generated data at scale 1e-3; captured data as sent)\"\n"
                   "set ylabel \"ratio\"\nplot ",
                o->plot_path, o->chunk);
        for (size_t d = 0; d < N_DATA; d++)
            for (size_t m = 0; m < sizeof fam / sizeof *fam; m++) {
                int any = 0;
                for (size_t i = 0; i < n; i++)
                    if (strcmp(r[i].data, k_data[d]) == 0 &&
                        strncmp(r[i].mode, fam[m], strlen(fam[m])) == 0) {
                        fprintf(f, "%.6g %.6g\n", r[i].rms_err > 0 ? r[i].rms_err : 1e-12,
                                r[i].ratio);
                        any = 1;
                    }
                if (!any)
                    continue;
                fprintf(f, "\n\n");
                fprintf(g, "%s\"%s\" index %d with linespoints title \"%s %s\"",
                        series ? ", " : "", data, series, k_data[d], fam[m]);
                series++;
            }
        fprintf(g, "\n");
        fclose(f);
        fclose(g);
        f = g = NULL;
        char *argv[] = {gnuplot, script, NULL};
        launch_spec_t s = {.argv = argv, .in = LAUNCH_DEVNULL, .out = LAUNCH_INHERIT,
                           .err = LAUNCH_INHERIT};
        char err[256];
        rc = launch_run(&s, 30000, err, sizeof(err));
        if (rc != 0)
            fprintf(stderr, BC_CMD ": gnuplot: %s\n", err);
    }
    if (f)
        fclose(f);
    if (g)
        fclose(g);
    unlink(data);
    unlink(script);
    rmdir(dir);
    return rc;
}

/* ---- the command ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: " BC_CMD " [--elems N] [--chunk N] [--threads T] [--repeats K]\n"
            "                            [--data normal|exponential|both] [--seed S]\n"
            "                            [--input FILE]... [--json FILE|-] [--plot FILE.png]\n"
            "GCOW's grid of ZFP modes and fp16, chunk by chunk as the aggregation path codes\n"
            "them: ratio, encode/decode GB/s (1 and T threads), max and RMS error, and the\n"
            "difference from libzfp's own round trip of the whole array (must be 0).\n"
            "  --elems N     values per data set (default 2097152; at least 1048576)\n"
            "  --chunk N     values per chunk (a packet; multiple of 4, default 4096)\n"
            "  --threads T   codec threads for the parallel run (default 2, at most %d)\n"
            "  --repeats K   timed repeats, median reported (default 3, at most 64)\n"
            "  --data D      normal, exponential (zero-free, random sign) or both (default)\n"
            "  --seed S      generator seed (default 1)\n"
            "  --input FILE  captured values: raw little-endian float32 (repeat for several\n"
            "                files, coded as one data set 'captured'), e.g. the files of\n"
            "                `inagg train --mode data --capture-gradients PREFIX`; with\n"
            "                --input the generated sets run only if --data is given\n"
            "  --json FILE   one JSON object (\"-\": stdout)\n"
            "  --plot FILE   PNG of ratio against RMS error (gnuplot)\n",
            BC_MAX_THREADS);
}

/* What the own-flag parser writes to. */
typedef struct bc_parse_ctx {
    bc_opts_t *o;
    int data_given;
} bc_parse_ctx_t;

/* --data: normal, exponential or both. 0, or 2 after a message. */
static int parse_data(const char *text, bc_parse_ctx_t *pc)
{
    static const char *const names[] = {"normal", "exponential", "both"};
    for (unsigned i = 0; i < 3; i++) {
        if (strcmp(text, names[i]) == 0) {
            pc->o->data_mask = i + 1;
            pc->data_given = 1;
            return 0;
        }
    }
    fprintf(stderr, BC_CMD ": --data must be normal, exponential or both\n");
    return 2;
}

/* The compression benchmark's own flags (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    bc_parse_ctx_t *pc = ctx;
    bc_opts_t *o = pc->o;
    uint64_t v;
    switch (c) {
    case 'e':
        if (cli_parse_u64(BC_CMD, "--elems", optarg, 1048576, 1ull << 28, &v) < 0) return 2;
        o->elems = (size_t)v;
        return 0;
    case 'c':
        if (cli_parse_u64(BC_CMD, "--chunk", optarg, 4, CODEC_MAX_ELEMS, &v) < 0) return 2;
        if (v % 4) {
            fprintf(stderr, BC_CMD ": --chunk must be a multiple of 4 (ZFP's block)\n");
            return 2;
        }
        o->chunk = (size_t)v;
        return 0;
    case 't':
        if (cli_parse_u64(BC_CMD, "--threads", optarg, 1, BC_MAX_THREADS, &v) < 0) return 2;
        o->threads = (uint32_t)v;
        return 0;
    case 'k':
        if (cli_parse_u64(BC_CMD, "--repeats", optarg, 1, 64, &v) < 0) return 2;
        o->repeats = (uint32_t)v;
        return 0;
    case 'i':
        if (o->ninputs == BC_MAX_INPUTS) {
            fprintf(stderr, BC_CMD ": at most %d --input files\n", BC_MAX_INPUTS);
            return 2;
        }
        o->inputs[o->ninputs++] = optarg;
        return 0;
    case 'd': return parse_data(optarg, pc);
    default: return -1;
    }
}

/* The options with their defaults, then argv's. 0, 1 after --help, 2 after a usage error. */
static int parse_args(int argc, char **argv, bc_opts_t *o, int *data_given)
{
    *o = (bc_opts_t){.elems = 2097152, .chunk = 4096, .threads = 2, .repeats = 3,
                      .seed = 1, .data_mask = 3};
    static const struct option own[] = {
        {"elems", required_argument, 0, 'e'},   {"chunk", required_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'}, {"repeats", required_argument, 0, 'k'},
        {"data", required_argument, 0, 'd'},    {"input", required_argument, 0, 'i'},
        {0, 0, 0, 0}};
    bench_opts_t b = {.cmd = BC_CMD, .seed = &o->seed, .json_path = &o->json_path,
                      .plot_path = &o->plot_path};
    bc_parse_ctx_t pc = {.o = o};
    int rc = bench_opts_parse(&b, argc, argv, own, parse_own_flag, &pc, usage);
    if (rc == 0 && cli_no_extra_args(BC_CMD, argc, argv, optind) < 0)
        rc = 2;
    *data_given = pc.data_given;
    return rc;
}

int cmd_bench_compress(int argc, char **argv)
{
    bc_opts_t o;
    int data_given;
    int prc = parse_args(argc, argv, &o, &data_given);
    if (prc)
        return prc == 1 ? 0 : prc;
    float *cap = NULL;
    if (o.ninputs) {
        if (!(cap = read_inputs(&o, &o.captured)))
            return 1;
        o.data_mask = (data_given ? o.data_mask : 0) | 4;
    }
    size_t most = o.captured > o.elems ? o.captured : o.elems;
    float *x = malloc(o.elems * sizeof(float)), *y = malloc(most * sizeof(float)),
          *ref = malloc(most * sizeof(float));
    bc_result_t *res = calloc(N_DATA * N_MODES, sizeof(*res));
    size_t n = 0;
    int rc = 0;
    if (!x || !y || !ref || !res) {
        fprintf(stderr, BC_CMD ": out of memory for %zu values\n", most);
        rc = 1;
    }
    for (size_t d = 0; d < N_DATA && rc == 0; d++) {
        if (!(o.data_mask & (1 << d)))
            continue;
        bc_opts_t od = o; /* the data set's own length */
        const float *src = x;
        if (d == 2) {
            od.elems = o.captured;
            src = cap;
        } else {
            generate(x, o.elems, (int)d, o.seed);
        }
        for (size_t m = 0; m < N_MODES && rc == 0; m++) {
            if (measure(&od, k_modes[m], k_data[d], src, y, ref, &res[n]) != 0) {
                fprintf(stderr, BC_CMD ": %s on %s data: coding failed\n", k_modes[m], k_data[d]);
                rc = 1;
            } else if (!(res[n].ref_max_diff == 0) && !isnan(res[n].ref_max_diff)) {
                fprintf(stderr, BC_CMD ": %s on %s data: differs from libzfp's round trip by "
                        "up to %g\n", k_modes[m], k_data[d], res[n].ref_max_diff);
                rc = 1;
                n++;
            } else {
                n++;
            }
        }
    }
    if (n > 0) {
        /* with --json - the table goes to stderr */
        render_text(o.json_path && strcmp(o.json_path, "-") == 0 ? stderr : stdout, &o, res, n);
        if (o.json_path && render_json(&o, res, n) != 0)
            rc = 1;
        if (o.plot_path && render_plot(&o, res, n) != 0)
            rc = 1;
    }
    free(cap);
    free(x);
    free(y);
    free(ref);
    free(res);
    return rc;
}
