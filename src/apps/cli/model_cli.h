/*
 * model_cli.h - `inagg model`, inside src/apps/cli: calibrate (micro-benchmarks of this build into a
 * parameters file), predict (the cost models of src/apps/model for any size up to 1024 workers,
 * presets that re-draw the papers' comparisons, PNG plots) and validate (testbed runs against
 * predictions). cmd_model.c dispatches; model_calib.c parses, shows progress and writes the file (the measuring runs and the
 * file's reader are apps/bench/calibrate.c);
 * model_predict.c predicts and renders; model_validate.c runs the testbed and compares.
 */
#ifndef INAGG_CLI_MODEL_CLI_H
#define INAGG_CLI_MODEL_CLI_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "apps/bench/calibrate.h"
#include "apps/model/model.h"

#define MODEL_CMD "inagg model"
#define MODEL_DEFAULT_PARAMS "build/model-params.json"

/* ---- model_calib.c (its run: apps/bench/calibrate.c) ---- */
int model_calibrate_main(int argc, char **argv);

/* ---- model_predict.c ---- */
int model_predict_main(int argc, char **argv);

#define MAX_POINTS 64 /* worker counts in one prediction or plot */

/* predict's options (model_predict.c), which the presets read too */
typedef struct pred_opts {
    const char *params_path, *json_path, *plot_path, *preset, *compress;
    uint32_t w_lo, w_hi;
    double bytes;
    model_params_t p;
    int have_workers, have_size, sys_mask;
    char note[256];
} pred_opts_t;

/* A PNG of ncol series of vals against the worker counts pts (gnuplot), and below it a panel
 * of the speedups against series ref (speedlabel); 0, or a negative errno (reported). */
int model_plot_series(const char *path, const char *title, const char *ylabel,
                      const char *const *names, int ncol, const uint32_t *pts, int npts,
                      const double *vals /* [npts][ncol] */, int ref, const char *speedlabel);

/* The presets (model_presets.c): gcow-resnet50 (vit = 0) / gcow-vit (1), and switchml. Exit
 * codes as the command's. */
int model_preset_gcow(const pred_opts_t *o, int vit);
int model_preset_switchml(const pred_opts_t *o);

/* ---- model_validate.c ---- */
int model_validate_main(int argc, char **argv);

/* ---- shared (cmd_model.c) ---- */
/* A usage error: "inagg model SUB: message" on stderr; returns 2. */
int model_bad(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A subcommand's flags, for model_parse_flags. */
typedef struct model_flags {
    const char *sub; /* "calibrate": refusals start "inagg model calibrate: " */
    const char *shortopts; /* getopt's, starting with ':' (with h) */
    const struct option *longopts; /* ending with a zero entry; --help among them as 'h' */
    void (*usage)(FILE *out);
    /* One of the subcommand's own flags ch, its value in optarg: 0 taken, >0 an exit status
     * after a message, <0 not its own (refused as an unknown option). */
    int (*flag)(void *ctx, int ch);
} model_flags_t;

/* Parse argv with spec's flags (each through spec->flag(ctx, ch)), -h/--help through
 * spec->usage; an unknown option or a stray argument is refused. 0 parsed, 1 help printed,
 * >1 the exit status after a message. */
int model_parse_flags(const model_flags_t *spec, int argc, char **argv, void *ctx);

#endif /* INAGG_CLI_MODEL_CLI_H */
