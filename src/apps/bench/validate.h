/*
 * validate.h - `inagg model validate`'s runs: the cases (2-8 hosts, two link rates, two tensor
 * sizes, flat and two-level, compressed with and without the coding overlap, one slow link),
 * each `inagg bench allreduce --testbed` as a bounded child of this binary, its report read
 * back into rows of predicted beside measured time. A case whose options the build does not
 * accept (two-level before it exists) is a row skipped with the reason. The command's flags,
 * progress and rendering are apps/cli/model_validate.c.
 */
#ifndef INAGG_BENCH_VALIDATE_H
#define INAGG_BENCH_VALIDATE_H

#include <stddef.h>
#include <stdint.h>

#include "apps/bench/calibrate.h"

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

typedef struct vrow {
    const vcase_t *c;
    const char *sys; /* "inagg" or "ring" */
    double bytes, pred_s, meas_s, rel;
    double machine_pct; /* the whole machine's CPU during the run (NAN: not reported) */
    const char *bound;
    int skipped;
    char why[200];
} vrow_t;

/* The worst relative errors over the measured rows. */
typedef struct vsummary {
    double maxrel, maxrel_ina;
    int measured;
} vsummary_t;

#define VALIDATE_MAX_ROWS 64 /* rows of one validation */

/* The cases, in the order they run. */
extern const vcase_t validate_cases[];
extern const size_t validate_ncases;

/* Whether `inagg bench allreduce` accepts --leaves (the hierarchy); dir holds its probe. */
int validate_has_leaves(const char *dir);
/* Run case c (quick: its smaller size) in dir and append its rows (predicted from cal) to
 * rows[*nrows]. 0; -EOPNOTSUPP when testbeds cannot be built here; another negative errno
 * when the run failed (said on stderr). */
int validate_run_case(const vcase_t *c, int quick, const char *dir, const model_calib_t *cal,
                      int has_leaves, vrow_t *rows, int *nrows);
/* Remove the runs' files and dir itself (without --keep). */
void validate_remove_files(const char *dir);
/* The worst relative errors over the measured rows. */
vsummary_t validate_summarize(const vrow_t *rows, int nrows);

#endif /* INAGG_BENCH_VALIDATE_H */
