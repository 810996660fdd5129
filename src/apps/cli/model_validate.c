/*
 * model_validate.c - `inagg model validate`: its flags and help, progress, and the table (or
 * JSON) of each prediction beside its measurement with the relative error and max_rel_error.
 * The cases and their runs (`inagg bench allreduce --testbed` at the sizes this machine holds)
 * are the benchmarks' (apps/bench/validate.c).
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

#include "apps/bench/validate.h"
#include "apps/cli/model_cli.h"
#include "apps/cli/output.h"
#include "lib/base/errmsg.h"
#include "lib/json/json.h"

#define SUB "validate"
#define TARGET 0.15

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
    for (size_t i = 0; i < validate_ncases; i++) {
        const vcase_t *c = &validate_cases[i];
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
    int has_leaves = validate_has_leaves(dir);
    static vrow_t rows[VALIDATE_MAX_ROWS];
    int nrows = 0, rc = 0, ncases = 0;
    time_t t0 = time(NULL);
    for (size_t i = 0; i < validate_ncases; i++)
        ncases += !f.quick || validate_cases[i].quick;
    int k = 0;
    for (size_t i = 0; i < validate_ncases && rc == 0; i++) {
        const vcase_t *c = &validate_cases[i];
        if (f.quick && !c->quick)
            continue;
        fprintf(stderr, MODEL_CMD " " SUB ": %d/%d %s (%lds so far)\n", ++k, ncases, c->name,
                (long)(time(NULL) - t0));
        rc = validate_run_case(c, f.quick, dir, &cal, has_leaves, rows, &nrows);
    }
    if (!f.keep)
        validate_remove_files(dir);
    if (rc == -EOPNOTSUPP)
        return 3;
    vsummary_t s = validate_summarize(rows, nrows);
    render_text(cli_text_stream(f.json_path), rows, nrows, &s, rc, t0);
    if (f.json_path && render_json(f.json_path, f.params, &cal, f.quick, rows, nrows, &s) != 0)
        return 1;
    return rc == 0 ? 0 : 1;
}
