/*
 * model_validate.c - `inagg model validate`: runs `inagg bench allreduce --testbed` at the
 * sizes this machine holds (2-8 hosts, two link rates, two tensor sizes, flat and two-level,
 * compressed with and without the coding overlap, one slow link) and prints each prediction
 * beside its measurement with the relative error and max_rel_error. A case whose options the
 * build does not accept (two-level before it exists) is reported as skipped with the reason.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apps/bench/subrun.h"
#include "apps/cli/model_cli.h"
#include "apps/cli/output.h"
#include "lib/base/errmsg.h"
#include "lib/json/json.h"

#define SUB "validate"
#define TARGET 0.15
#define MAX_ROWS 64
#define CASE_TIMEOUT_S 420u

/* One testbed run: its hosts, links, sizes, and what it varies. */
typedef struct vcase {
    const char *name;
    uint32_t hosts, leaves, per_leaf; /* leaves > 0: two-level */
    const char *rate; /* tools/testbed syntax */
    const char *sizes; /* --sizes list */
    const char *compress; /* NULL: int32 uncompressed */
    int no_helper; /* INAGG_CODEC_HELPER=0: the worker codes on its
                                         protocol thread (still pipelined with the wire) */
    const char *slow; /* INAGG_TESTBED_SLOW_HOST, e.g. "h2:50mbit" */
    int ring; /* also the MPI ring */
    int quick; /* part of --quick */
} vcase_t;

static const vcase_t CASES[] = {
    {"flat-2h-100", 2, 0, 0, "100mbit", "4M,16M", NULL, 0, NULL, 1, 0},
    {"flat-4h-100", 4, 0, 0, "100mbit", "4M,16M", NULL, 0, NULL, 1, 1},
    {"flat-4h-50", 4, 0, 0, "50mbit", "4M,16M", NULL, 0, NULL, 1, 0},
    {"flat-8h-100", 8, 0, 0, "100mbit", "4M,16M", NULL, 0, NULL, 1, 0},
    {"2level-8h-100", 8, 2, 4, "100mbit", "4M,16M", NULL, 0, NULL, 0, 1},
    /* compressed at 20 Mbit/s: at 50 the four hosts' and the switch's coding (1.4-1.8 CPU
     * seconds per allreduce) kept this 2-core machine 93-97% busy, which a model of hosts
     * with CPUs of their own does not describe */
    {"zfp-4h-20-helper", 4, 0, 0, "20mbit", "16M", "zfp:rate=8", 0, NULL, 0, 0},
    {"zfp-4h-20-no-helper", 4, 0, 0, "20mbit", "16M", "zfp:rate=8", 1, NULL, 0, 0},
    {"slow-4h-100-h2at50", 4, 0, 0, "100mbit", "16M", NULL, 0, "h2:50mbit", 1, 1},
};
#define NCASES (sizeof(CASES) / sizeof(CASES[0]))

typedef struct vrow {
    const vcase_t *c;
    const char *sys; /* "inagg" or "ring" */
    double bytes, pred_s, meas_s, rel;
    double machine_pct; /* the whole machine's CPU during the run (NAN: not reported) */
    const char *bound;
    int skipped;
    char why[200];
} vrow_t;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg model validate [--params FILE] [--quick] [--json FILE|-] [--keep DIR]\n"
            "\n"
            "Runs `inagg bench allreduce --testbed N --fabric bridge` (root, network namespaces)\n"
            "for each case below, every result verified, 3 timed iterations after 1 warmup,\n"
            "and compares the median TAT of inagg (and of the MPI ring) with the model's\n"
            "prediction from the calibration (--params, default %s; when that file does not\n"
            "exist, `inagg model calibrate --out FILE` runs first):\n",
            MODEL_DEFAULT_PARAMS);
    for (size_t i = 0; i < NCASES; i++) {
        const vcase_t *c = &CASES[i];
        fprintf(out, "  %-22s %u hosts%s, %s, sizes %s%s%s%s%s%s\n", c->name, c->hosts,
                c->leaves ? " (2 leaves x 4 + a spine)" : "", c->rate, c->sizes,
                c->compress ? ", float32 " : ", int32", c->compress ? c->compress : "",
                c->no_helper ? " without the encoder helper" : "", c->slow ? ", slow link " : "",
                c->slow ? c->slow : "");
    }
    fprintf(out,
            "\n"
            "Prints predicted against measured per row, rel_error = |predicted - measured| /\n"
            "measured, and max_rel_error (target %.2f). About 3 minutes (8 on a busy machine);\n"
            "--quick runs the cases marked for it at the smaller size (about 1 minute). The\n"
            "machine column is the whole machine's CPU during a run: a row where it reached\n"
            "90%% is flagged (the model describes hosts with CPUs of their own). A case the\n"
            "build does not accept is skipped with the reason. Take the measure lock on a\n"
            "shared machine: flock /tmp/inagg-measure.lock inagg model validate ...\n"
            "\n"
            "  --params FILE   the calibration (inagg model calibrate)\n"
            "  --quick         the short set\n"
            "  --json FILE|-   one JSON object (- for stdout; the table then goes to stderr)\n"
            "  --keep DIR      keep each run's bench JSON and log in DIR\n"
            "  -h, --help      this text\n"
            "Exit: 0 when every case ran or was skipped with a reason, 1 when a run failed,\n"
            "2 bad usage, 3 when testbeds cannot be built here.\n",
            TARGET);
}

/* Whether `inagg bench allreduce` accepts --leaves (the hierarchy). */
static int bench_has_leaves(const char *dir)
{
    char json[4200];
    snprintf(json, sizeof(json), "%s/help", dir);
    char *args[] = {"inagg", "bench", "allreduce", "--help", NULL};
    char err[256];
    if (bench_run_self(args, json, 30, err, sizeof(err)) < 0)
        return 0;
    char logp[4300], *text = NULL;
    snprintf(logp, sizeof(logp), "%s.log", json);
    int has = 0;
    if (bench_read_file(logp, &text) >= 0) {
        has = strstr(text, "--leaves") != NULL && strstr(text, "--hosts-per-leaf") != NULL;
        free(text);
    }
    unlink(logp);
    return has;
}

/* The object of system `key` ("inagg" or "mpi_ring") in the sizes entry at `at` (its
 * entry under "speedups" does not count), or NULL when it is not before `end`. */
static const char *system_in(const char *at, const char *end, const char *key)
{
    char k[40], k2[40];
    snprintf(k, sizeof(k), "\"%s\":{", key);
    snprintf(k2, sizeof(k2), "\"%s\": {", key);
    const char *p = strstr(at, k);
    if (!p)
        p = strstr(at, k2);
    return p && (!end || p < end) ? p : NULL;
}

/* The number `name` inside the member `member` of system `key`'s object, or NAN. */
static double system_number(const char *at, const char *end, const char *key, const char *member,
                            const char *name)
{
    const char *p = system_in(at, end, key);
    const char *m = p ? strstr(p, member) : NULL;
    double v = NAN;
    if (m && (!end || m < end))
        json_find_number(m, name, &v);
    return v;
}

/* The median TAT of `key` in the sizes entry at `at`. */
static double tat_of(const char *at, const char *end, const char *key)
{
    return system_number(at, end, key, "\"tat_s\"", "median");
}

/* How busy the whole machine was (% of all its CPUs) during `key`'s timed iterations. */
static double machine_of(const char *at, const char *end, const char *key)
{
    return system_number(at, end, key, "\"cpu\"", "machine");
}

/* The prediction for one row from the calibration and the run's own settings. */
static double predict(const model_calib_t *cal, const vcase_t *c, const char *report, int ring,
                      double bytes, const char **bound, char *err, size_t errlen)
{
    double link;
    if (model_parse_rate(c->rate, &link) != 0)
        return (void)set_err(err, errlen, -EINVAL, "bad rate %s", c->rate), NAN;
    model_params_t p;
    if (model_calib_params(cal, link, c->compress, &p, err, errlen) != 0)
        return NAN;
    double v;
    if (json_find_number(report, "packet_elems", &v) == 0 && v > 0)
        p.packet_elems = (uint32_t)v;
    if (json_find_number(report, "window", &v) == 0 && v > 0)
        p.slots = (uint32_t)v;
    if (json_find_number(report, "switch_threads", &v) == 0 && v > 0)
        p.switch_threads = (uint32_t)v;
    if (c->slow) {
        const char *r = strchr(c->slow, ':');
        if (!r || model_parse_rate(r + 1, &p.slow_bps) != 0)
            return (void)set_err(err, errlen, -EINVAL, "bad slow host %s", c->slow), NAN;
    }
    if (c->leaves) {
        p.levels = 2;
        p.fanout = c->per_leaf;
    }
    /* inagg codes packet by packet inside the window, overlapped with the wire either way;
     * without the encoder helper the coding shares the worker's protocol thread */
    p.code_overlap = 1;
    p.code_inline = c->no_helper;
    model_time_t t = model_allreduce(ring ? MODEL_RING : MODEL_INA, &p, c->hosts, bytes);
    *bound = t.bound;
    return t.total_s;
}

/* One case's `inagg bench allreduce` command line and the buffers its arguments live in. */
typedef struct case_cmd {
    char *args[40];
    char sizes_arg[64], json[4200], png[4300], hosts[16], leaves[16], per[16];
} case_cmd_t;

static void case_command(const vcase_t *c, int quick, const char *dir, case_cmd_t *k)
{
    char sizes[32];
    snprintf(sizes, sizeof(sizes), "%s", c->sizes);
    char *comma = strchr(sizes, ',');
    if (quick && comma) /* the first size only */
        *comma = '\0';
    snprintf(k->sizes_arg, sizeof(k->sizes_arg), "--sizes=%s", quick ? sizes : c->sizes);
    snprintf(k->json, sizeof(k->json), "%s/%s.json", dir, c->name);
    /* the sweep's plot goes with the run's files, not into the cwd */
    snprintf(k->png, sizeof(k->png), "%s/%s.png", dir, c->name);
    snprintf(k->hosts, sizeof(k->hosts), "%u", c->hosts);
    snprintf(k->leaves, sizeof(k->leaves), "%u", c->leaves);
    snprintf(k->per, sizeof(k->per), "%u", c->per_leaf);
    char **args = k->args;
    int a = 0;
    char *fixed[] = {"inagg",         "bench",      "allreduce", "--testbed",
                     k->hosts,        "--fabric",   "bridge",    "--link-rate",
                     (char *)c->rate, k->sizes_arg, "--iters",   "3",
                     "--warmup",      "1",          "--dtype",   c->compress ? "float32" : "int32"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        args[a++] = fixed[i];
    if (c->compress) {
        args[a++] = "--compress";
        args[a++] = (char *)c->compress;
    }
    if (c->leaves) {
        args[a++] = "--leaves";
        args[a++] = k->leaves;
        args[a++] = "--hosts-per-leaf";
        args[a++] = k->per;
    }
    char *tail[] = {
        "--baseline", c->ring ? "mpi-ring" : "none", "--json", k->json, "--plot", k->png, NULL};
    for (size_t i = 0; i < sizeof(tail) / sizeof(tail[0]); i++)
        args[a++] = tail[i];
}

/* The rows of one case's report text: predicted against measured per size (and ring). 0, or
 * -EPROTO when a row has no measurement or prediction, or none came. */
static int case_rows(const vcase_t *c, const model_calib_t *cal, const char *text, vrow_t *rows,
                     int *nrows)
{
    char err[600] = "";
    int ok = 0;
    const char *at = strstr(text, "\"sizes\"");
    while (at && *nrows < MAX_ROWS - 2) {
        const char *b = strstr(at, "\"bytes\"");
        if (!b)
            break;
        const char *next = strstr(b + 7, "\"bytes\"");
        double bytes;
        if (json_find_number(b, "bytes", &bytes) != 0)
            break;
        for (int ring = 0; ring <= c->ring; ring++) {
            vrow_t *r = &rows[(*nrows)++];
            *r = (vrow_t){.c = c, .sys = ring ? "ring" : "inagg", .bytes = bytes};
            r->meas_s = tat_of(b, next, ring ? "mpi_ring" : "inagg");
            r->machine_pct = machine_of(b, next, ring ? "mpi_ring" : "inagg");
            r->pred_s = predict(cal, c, text, ring, bytes, &r->bound, err, sizeof(err));
            r->rel = fabs(r->pred_s - r->meas_s) / r->meas_s;
            if (!isfinite(r->rel)) {
                fprintf(stderr,
                        MODEL_CMD " " SUB ": %s: no measurement or prediction for %s "
                                  "(%s)\n",
                        c->name, r->sys, err);
                return -EPROTO;
            }
            fprintf(stderr,
                    MODEL_CMD " " SUB ":   %-5s %5.1f MB: predicted %.3f s, measured "
                              "%.3f s, error %.1f%%\n",
                    r->sys, bytes / 1e6, r->pred_s, r->meas_s, r->rel * 100);
            ok++;
        }
        at = b + 7;
    }
    return ok ? 0 : -EPROTO;
}

static int run_case(const vcase_t *c, int quick, const char *dir, const model_calib_t *cal,
                    int has_leaves, vrow_t *rows, int *nrows)
{
    if (c->leaves && !has_leaves) {
        vrow_t *r = &rows[(*nrows)++];
        *r = (vrow_t){
            .c = c, .sys = "inagg", .skipped = 1, .pred_s = NAN, .meas_s = NAN, .rel = NAN};
        snprintf(r->why, sizeof(r->why),
                 "this build's `inagg bench allreduce` has no "
                 "--leaves/--hosts-per-leaf (the two-level testbed)");
        fprintf(stderr, MODEL_CMD " " SUB ":   skipped: %s\n", r->why);
        return 0;
    }
    case_cmd_t k;
    case_command(c, quick, dir, &k);
    if (c->no_helper)
        setenv("INAGG_CODEC_HELPER", "0", 1);
    if (c->slow)
        setenv("INAGG_TESTBED_SLOW_HOST", c->slow, 1);
    char err[600];
    int rc = bench_run_self(k.args, k.json, CASE_TIMEOUT_S, err, sizeof(err));
    unsetenv("INAGG_CODEC_HELPER");
    unsetenv("INAGG_TESTBED_SLOW_HOST");
    if (rc < 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": %s failed: %s\n", c->name, err);
        return strstr(err, "cannot build testbeds") || strstr(err, "status 3") ? -EOPNOTSUPP : rc;
    }
    char *text = NULL;
    if (bench_read_file(k.json, &text) < 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": %s: no report\n", c->name);
        return -EPROTO;
    }
    rc = case_rows(c, cal, text, rows, nrows);
    free(text);
    return rc;
}

/* Remove the runs' files and dir itself (without --keep). */
static void remove_run_files(const char *dir)
{
    for (size_t i = 0; i < NCASES; i++) {
        char f[4300];
        snprintf(f, sizeof(f), "%s/%s.json", dir, CASES[i].name);
        unlink(f);
        strncat(f, ".log", sizeof(f) - strlen(f) - 1);
        unlink(f);
        snprintf(f, sizeof(f), "%s/%s.png", dir, CASES[i].name);
        unlink(f);
    }
    char f[4300];
    snprintf(f, sizeof(f), "%s/help", dir);
    unlink(f);
    rmdir(dir);
}

/* The worst relative errors over the measured rows. */
typedef struct vsummary {
    double maxrel, maxrel_ina;
    int measured;
} vsummary_t;

static vsummary_t summarize(const vrow_t *rows, int nrows)
{
    vsummary_t s = {0, 0, 0};
    for (int i = 0; i < nrows; i++)
        if (!rows[i].skipped) {
            s.measured++;
            if (rows[i].rel > s.maxrel)
                s.maxrel = rows[i].rel;
            if (!strcmp(rows[i].sys, "inagg") && rows[i].rel > s.maxrel_ina)
                s.maxrel_ina = rows[i].rel;
        }
    return s;
}

/* The table of rows and the verdict, as text. */
static void render_text(FILE *out, const vrow_t *rows, int nrows, const vsummary_t *s, int rc,
                        time_t t0)
{
    fprintf(out, "%-22s %-5s %5s %8s %8s %11s %11s %9s %8s  %s\n", "case", "sys", "hosts", "link",
            "MB", "predicted s", "measured s", "rel_error", "machine", "model bound");
    for (int i = 0; i < nrows; i++) {
        const vrow_t *r = &rows[i];
        if (r->skipped) {
            fprintf(out, "%-22s %-5s %5u %8s %8s %11s %11s %9s %8s  skipped: %s\n", r->c->name,
                    r->sys, r->c->hosts, r->c->rate, "-", "-", "-", "-", "-", r->why);
            continue;
        }
        char busy[16] = "-";
        if (isfinite(r->machine_pct))
            snprintf(busy, sizeof(busy), "%.0f%%", r->machine_pct);
        fprintf(out, "%-22s %-5s %5u %8s %8.2f %11.3f %11.3f %8.1f%% %8s  %s%s\n", r->c->name,
                r->sys, r->c->hosts, r->c->rate, r->bytes / 1e6, r->pred_s, r->meas_s, r->rel * 100,
                busy, r->bound,
                r->machine_pct >= 90 ? " (this machine's CPUs were the limit: outside the model)"
                                     : "");
    }
    if (s->measured) {
        fprintf(out, "max_rel_error %.3f over %d measured rows (target %.2f): %s; %lds\n",
                s->maxrel, s->measured, TARGET, s->maxrel <= TARGET ? "within" : "NOT within",
                (long)(time(NULL) - t0));
        fprintf(out, "max_rel_error of the inagg rows alone %.3f\n", s->maxrel_ina);
    } else {
        fprintf(out, "max_rel_error: no row was measured%s; %lds\n",
                rc ? " (a case failed: see above)" : "", (long)(time(NULL) - t0));
    }
    if (rc)
        fprintf(out, "incomplete: a case failed, the cases after it did not run\n");
}

/* The --json object. 0, or a negative errno when it could not be written. */
static int render_json(const char *json_path, const char *params, const model_calib_t *cal,
                       int quick, const vrow_t *rows, int nrows, const vsummary_t *s)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "params", params);
    json_number(&w, "load1_calibrated", cal->load1);
    json_bool(&w, "quick", quick);
    json_begin_array(&w, "rows");
    for (int i = 0; i < nrows; i++) {
        const vrow_t *r = &rows[i];
        json_begin_object(&w, NULL);
        json_string(&w, "case", r->c->name);
        json_string(&w, "system", r->sys);
        json_int(&w, "hosts", r->c->hosts);
        json_int(&w, "levels", r->c->leaves ? 2 : 1);
        json_string(&w, "link_rate", r->c->rate);
        json_string(&w, "compress", r->c->compress ? r->c->compress : "none");
        json_bool(&w, "encoder_helper", r->c->compress && !r->c->no_helper);
        json_string(&w, "slow_host", r->c->slow ? r->c->slow : "");
        json_bool(&w, "skipped", r->skipped);
        if (r->skipped) {
            json_string(&w, "reason", r->why);
        } else {
            json_number(&w, "bytes", r->bytes);
            json_number(&w, "predicted_s", r->pred_s);
            json_number(&w, "measured_s", r->meas_s);
            json_number(&w, "rel_error", r->rel);
            json_string(&w, "bound", r->bound);
            json_number(&w, "machine_cpu_pct", r->machine_pct);
        }
        json_end_object(&w);
    }
    json_end_array(&w);
    json_number(&w, "max_rel_error", s->measured ? s->maxrel : NAN);
    json_number(&w, "max_rel_error_inagg", s->measured ? s->maxrel_ina : NAN);
    json_number(&w, "target", TARGET);
    json_int(&w, "measured_rows", s->measured);
    json_end_object(&w);
    return cli_emit_json(&w, json_path, MODEL_CMD " " SUB);
}

/* validate's flags */
typedef struct val_flags {
    const char *params, *json_path, *keep;
    int quick;
} val_flags_t;

static int parse_flag(void *ctx, int ch)
{
    val_flags_t *f = ctx;
    switch (ch) {
        case 'p': f->params = optarg; return 0;
        case 'q': f->quick = 1; return 0;
        case 'j': f->json_path = optarg; return 0;
        case 'k': f->keep = optarg; return 0;
        default: return -1;
    }
}

int model_validate_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"params", required_argument, 0, 'p'}, {"quick", no_argument, 0, 'q'},
        {"json", required_argument, 0, 'j'},   {"keep", required_argument, 0, 'k'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    static const model_flags_t spec = {SUB, ":h", longopts, usage, parse_flag};
    val_flags_t f = {.params = MODEL_DEFAULT_PARAMS};
    int prc = model_parse_flags(&spec, argc, argv, &f);
    if (prc)
        return prc == 1 ? 0 : prc;
    if (geteuid() != 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": cannot build testbeds here: needs root (network "
                                  "namespaces)\n");
        return 3;
    }
    if (access(f.params, F_OK) != 0 && errno == ENOENT) { /* a fresh tree: calibrate first */
        fprintf(stderr,
                MODEL_CMD " " SUB ": no calibration at %s: calibrating first (" MODEL_CMD
                          " calibrate --out %s)\n",
                f.params, f.params);
        char *cal_argv[] = {"calibrate", "--out", (char *)f.params, NULL};
        int crc = model_calibrate_main(3, cal_argv);
        if (crc != 0) {
            fprintf(stderr, MODEL_CMD " " SUB ": calibration failed (above); nothing validated\n");
            return crc;
        }
        fprintf(stderr, MODEL_CMD " " SUB ": calibrated; now validating against %s\n", f.params);
    }
    model_calib_t cal;
    char err[600];
    if (model_calib_read(f.params, &cal, err, sizeof(err)) != 0) {
        fprintf(stderr, MODEL_CMD " " SUB ": %s\n", err);
        return 1;
    }
    if (!(cal.ring_step_s > 0))
        fprintf(stderr,
                MODEL_CMD
                " " SUB ": note: %s has no ring_step_s above 0 (calibrated without a "
                "testbed, before it was measured, or the ring measured no slower than "
                "its bytes): the ring's rows are predicted without a wait per step; `" MODEL_CMD
                " calibrate --out %s` measures it\n",
                f.params, f.params);
    char tmp[] = "/tmp/inagg-validate-XXXXXX";
    const char *dir = f.keep;
    if (f.keep && mkdir(f.keep, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, MODEL_CMD " " SUB ": --keep %s: %s\n", f.keep, strerror(errno));
        return 1;
    }
    if (!dir) {
        if (!mkdtemp(tmp)) {
            fprintf(stderr, MODEL_CMD " " SUB ": mkdtemp: %s\n", strerror(errno));
            return 1;
        }
        dir = tmp;
    }
    int has_leaves = bench_has_leaves(dir);
    static vrow_t rows[MAX_ROWS];
    int nrows = 0, rc = 0, ncases = 0;
    time_t t0 = time(NULL);
    for (size_t i = 0; i < NCASES; i++)
        ncases += !f.quick || CASES[i].quick;
    int k = 0;
    for (size_t i = 0; i < NCASES && rc == 0; i++) {
        const vcase_t *c = &CASES[i];
        if (f.quick && !c->quick)
            continue;
        fprintf(stderr, MODEL_CMD " " SUB ": %d/%d %s (%lds so far)\n", ++k, ncases, c->name,
                (long)(time(NULL) - t0));
        rc = run_case(c, f.quick, dir, &cal, has_leaves, rows, &nrows);
    }
    if (!f.keep)
        remove_run_files(dir);
    if (rc == -EOPNOTSUPP)
        return 3;
    vsummary_t s = summarize(rows, nrows);
    render_text(cli_text_stream(f.json_path), rows, nrows, &s, rc, t0);
    if (f.json_path && render_json(f.json_path, f.params, &cal, f.quick, rows, nrows, &s) != 0)
        return 1;
    return rc == 0 ? 0 : 1;
}
