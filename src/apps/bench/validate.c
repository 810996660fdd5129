/*
 * validate.c - the cases and runs of `inagg model validate` (validate.h): each case's command
 * line, its run, and the rows read back from its report with the model's prediction beside
 * the measurement.
 */
#include "apps/bench/validate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/subrun.h"
#include "lib/base/errmsg.h"
#include "lib/json/json.h"

#define VAL_WHO "inagg model validate" /* the command its progress lines name */
#define CASE_TIMEOUT_S 420u

const vcase_t validate_cases[] = {
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
const size_t validate_ncases = sizeof(validate_cases) / sizeof(validate_cases[0]);

/* Whether `inagg bench allreduce` accepts --leaves (the hierarchy). */
int validate_has_leaves(const char *dir)
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
    while (at && *nrows < VALIDATE_MAX_ROWS - 2) {
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
                        VAL_WHO ": %s: no measurement or prediction for %s "
                                "(%s)\n",
                        c->name, r->sys, err);
                return -EPROTO;
            }
            fprintf(stderr,
                    VAL_WHO ":   %-5s %5.1f MB: predicted %.3f s, measured "
                            "%.3f s, error %.1f%%\n",
                    r->sys, bytes / 1e6, r->pred_s, r->meas_s, r->rel * 100);
            ok++;
        }
        at = b + 7;
    }
    return ok ? 0 : -EPROTO;
}

int validate_run_case(const vcase_t *c, int quick, const char *dir, const model_calib_t *cal,
                      int has_leaves, vrow_t *rows, int *nrows)
{
    if (c->leaves && !has_leaves) {
        vrow_t *r = &rows[(*nrows)++];
        *r = (vrow_t){
            .c = c, .sys = "inagg", .skipped = 1, .pred_s = NAN, .meas_s = NAN, .rel = NAN};
        snprintf(r->why, sizeof(r->why),
                 "this build's `inagg bench allreduce` has no "
                 "--leaves/--hosts-per-leaf (the two-level testbed)");
        fprintf(stderr, VAL_WHO ":   skipped: %s\n", r->why);
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
        fprintf(stderr, VAL_WHO ": %s failed: %s\n", c->name, err);
        return strstr(err, "cannot build testbeds") || strstr(err, "status 3") ? -EOPNOTSUPP : rc;
    }
    char *text = NULL;
    if (bench_read_file(k.json, &text) < 0) {
        fprintf(stderr, VAL_WHO ": %s: no report\n", c->name);
        return -EPROTO;
    }
    rc = case_rows(c, cal, text, rows, nrows);
    free(text);
    return rc;
}

/* Remove the runs' files and dir itself (without --keep). */
void validate_remove_files(const char *dir)
{
    for (size_t i = 0; i < validate_ncases; i++) {
        char f[4300];
        snprintf(f, sizeof(f), "%s/%s.json", dir, validate_cases[i].name);
        unlink(f);
        strncat(f, ".log", sizeof(f) - strlen(f) - 1);
        unlink(f);
        snprintf(f, sizeof(f), "%s/%s.png", dir, validate_cases[i].name);
        unlink(f);
    }
    char f[4300];
    snprintf(f, sizeof(f), "%s/help", dir);
    unlink(f);
    rmdir(dir);
}

vsummary_t validate_summarize(const vrow_t *rows, int nrows)
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
