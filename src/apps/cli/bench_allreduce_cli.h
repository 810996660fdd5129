/*
 * bench_allreduce_cli.h - the command side of `inagg bench allreduce`: parsing its flags into
 * ar_opts_t and rendering an ar_run_t as text, JSON or a plot. The run itself is
 * bench/bench_allreduce.h.
 */
#ifndef INAGG_CLI_BENCH_ALLREDUCE_CLI_H
#define INAGG_CLI_BENCH_ALLREDUCE_CLI_H

#include <stdio.h>

#include "apps/bench/bench_allreduce.h"

/* ---- parse (bench_allreduce_args.c) ---- */

/* Options with their defaults, then argv's. 0, 1 after --help, 2 after a usage error (said). */
int ar_parse(int argc, char **argv, ar_opts_t *o);

/* ---- render (bench_allreduce_render.c) ---- */

/* algBw (bits per second of the tensor), busBw = algBw * 2(n-1)/n (nccl-tests), goodput
 * fraction (algBw over the link rate, NaN without one) and the speedup of inagg over sys. */
double ar_alg_bw_gbps(const ar_size_result_t *s, ar_system_t sys);
double ar_bus_bw_gbps(const ar_run_t *run, const ar_size_result_t *s, ar_system_t sys);
double ar_goodput_fraction(const ar_run_t *run, const ar_size_result_t *s, ar_system_t sys);
double ar_speedup(const ar_size_result_t *s, ar_system_t sys);
double ar_theory_ratio(const ar_run_t *run);

void ar_render_text(FILE *out, const ar_run_t *run);
int ar_render_json(const ar_run_t *run);
int ar_render_plot(const ar_run_t *run, const char *path);

/* Whether the run as a whole succeeded: every system measured and verified. */
int ar_run_ok(const ar_run_t *run);

#endif /* INAGG_CLI_BENCH_ALLREDUCE_CLI_H */
