/*
 * cmd_bench_compress.c - `inagg bench compress`: GCOW's grid of ZFP modes (fixed rate and
 * fixed precision 4, 8, 16, 32; fixed accuracy 1e-1, 1e-3, 1e-6, 1e-9; reversible) and fp16 on
 * generated gradient-like data (normal, and zero-free exponential magnitudes with random
 * signs) and on captured gradients (--input: raw float32 files, e.g. from `inagg train
 * --capture-gradients`), coded the way the aggregation path codes it: chunk by chunk (src/lib/codec), chunks
 * spread over codec threads. For each mode: compression ratio, encode and decode GB/s with one
 * thread and with --threads, the maximum and RMS error against the original values and
 * against an offline libzfp round trip of the whole array (zfp_compress / zfp_decompress:
 * ZFP codes 4-value blocks independently, so chunking must not change a single value).
 * Medians of --repeats runs. The run is bench/bench_compress.c; here: the flags, and the text
 * table, --json FILE|- and --plot FILE.png (gnuplot).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/bench_compress.h"
#include "apps/cli/bench_opts.h"
#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/output.h"
#include "apps/cli/plot.h"
#include "apps/launch/launch.h"
#include "lib/codec/codec.h"
#include "lib/json/json.h"

/* ---- output ----------------------------------------------------------------------------- */

static void render_text(FILE *out, const bc_opts_t *o, const bc_result_t *r, size_t n)
{
    if (o->data_mask & 3)
        fprintf(out,
                "inagg bench compress: %zu values per generated data set (gradient-like, "
                "scale 1e-3)",
                o->elems);
    else
        fprintf(out, "inagg bench compress:");
    if (o->data_mask & 4)
        fprintf(out, "%s%zu captured values from %u file(s)", o->data_mask & 3 ? "; " : " ",
                o->captured, o->ninputs);
    fprintf(out, ", chunks of %zu values, %u codec thread(s) against 1, median of %u\n", o->chunk,
            o->threads, o->repeats);
    fprintf(out, "%-12s %-20s %7s %6s %9s %9s %9s %9s %10s %10s %10s\n", "data", "mode", "ratio",
            "bits", "enc GB/s", "dec GB/s", "enc xT", "dec xT", "max err", "rms err", "vs libzfp");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%-12s %-20s %7.2f %6.2f %9.3f %9.3f %8.2fx %8.2fx %10.3g %10.3g %10.3g\n",
                r[i].data, r[i].mode, r[i].ratio, r[i].bits_per_value, r[i].enc_gbs[0],
                r[i].dec_gbs[0], r[i].enc_gbs[1] / r[i].enc_gbs[0],
                r[i].dec_gbs[1] / r[i].dec_gbs[0], r[i].max_err, r[i].rms_err, r[i].ref_max_diff);
    fprintf(out,
            "(enc/dec GB/s: float32 bytes per second on one thread; xT: speedup with %u "
            "threads; vs libzfp: largest difference from libzfp's own round trip of the whole "
            "array, which must be 0; fp16 has none)\n",
            o->threads);
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
    json_string(&w, "data_source",
                "generated (normal; zero-free exponential magnitudes, random "
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
    static const char *const fam[] = {"zfp:rate", "zfp:precision", "zfp:accuracy", "zfp:reversible",
                                      "fp16"};
    cli_plot_t p;
    int rc = cli_plot_open(&p, BC_CMD), series = 0;
    if (rc < 0)
        return rc;
    fprintf(p.scriptf,
            "set terminal pngcairo size 900,560 font ',10'\nset output \"%s\"\n"
            "set title \"compression ratio against RMS error, chunks of %zu values\"\n"
            "set logscale x 10\nset logscale y 2\nset grid\nset key outside right\n"
            "set xlabel \"RMS error (generated data at scale 1e-3; captured data as sent)\"\n"
            "set ylabel \"ratio\"\nplot ",
            o->plot_path, o->chunk);
    for (size_t d = 0; d < BC_N_DATA; d++)
        for (size_t m = 0; m < sizeof fam / sizeof *fam; m++) {
            int any = 0;
            for (size_t i = 0; i < n; i++)
                if (strcmp(r[i].data, bc_data[d]) == 0 &&
                    strncmp(r[i].mode, fam[m], strlen(fam[m])) == 0) {
                    fprintf(p.dataf, "%.6g %.6g\n", r[i].rms_err > 0 ? r[i].rms_err : 1e-12,
                            r[i].ratio);
                    any = 1;
                }
            if (!any)
                continue;
            fprintf(p.dataf, "\n\n");
            fprintf(p.scriptf, "%s\"%s\" index %d with linespoints title \"%s %s\"",
                    series ? ", " : "", p.data, series, bc_data[d], fam[m]);
            series++;
        }
    fprintf(p.scriptf, "\n");
    return cli_plot_run(&p, o->plot_path);
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
            "  --elems N     values per data set (default 2097152; at least 1048576); refused\n"
            "                at once (exit 2) when they need more memory than is available\n"
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
            if (cli_parse_u64(BC_CMD, "--elems", optarg, 1048576, 1ull << 28, &v) < 0)
                return 2;
            o->elems = (size_t)v;
            return 0;
        case 'c':
            if (cli_parse_u64(BC_CMD, "--chunk", optarg, 4, CODEC_MAX_ELEMS, &v) < 0)
                return 2;
            if (v % 4) {
                fprintf(stderr, BC_CMD ": --chunk must be a multiple of 4 (ZFP's block)\n");
                return 2;
            }
            o->chunk = (size_t)v;
            return 0;
        case 't':
            return cli_parse_u32(BC_CMD, "--threads", optarg, 1, BC_MAX_THREADS, &o->threads) < 0
                       ? 2
                       : 0;
        case 'k': return cli_parse_u32(BC_CMD, "--repeats", optarg, 1, 64, &o->repeats) < 0 ? 2 : 0;
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
    *o = (bc_opts_t){
        .elems = 2097152, .chunk = 4096, .threads = 2, .repeats = 3, .seed = 1, .data_mask = 3};
    static const struct option own[] = {{"elems", required_argument, 0, 'e'},
                                        {"chunk", required_argument, 0, 'c'},
                                        {"threads", required_argument, 0, 't'},
                                        {"repeats", required_argument, 0, 'k'},
                                        {"data", required_argument, 0, 'd'},
                                        {"input", required_argument, 0, 'i'},
                                        {0, 0, 0, 0}};
    bench_opts_t b = {
        .cmd = BC_CMD, .seed = &o->seed, .json_path = &o->json_path, .plot_path = &o->plot_path};
    bc_parse_ctx_t pc = {.o = o};
    int rc = bench_opts_parse(&b, argc, argv, own, parse_own_flag, &pc, usage);
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
    char what[96], err[512];
    snprintf(what, sizeof(what), "--elems %zu", o.elems);
    if (launch_mem_check(bc_memory_bytes(&o), what, err, sizeof(err)) != 0) {
        fprintf(stderr, BC_CMD ": %s; ask for fewer --elems\n", err);
        return 2;
    }
    bc_result_t *res = NULL;
    size_t n = 0;
    int rc = bc_run(&o, data_given, &res, &n) < 0 ? 1 : 0;
    if (n > 0) {
        render_text(cli_text_stream(o.json_path), &o, res, n);
        if (o.json_path && render_json(&o, res, n) != 0)
            rc = 1;
        if (o.plot_path && render_plot(&o, res, n) != 0)
            rc = 1;
    }
    free(res);
    return rc;
}
