/*
 * output.h - what the benchmark commands share: the `--json FILE|-` writer (one JSON object
 * per run, "-" meaning stdout); flag parsing (integers, --protocol, --loss, --baseline, stray
 * arguments) with messages that name the command, the flag and what is allowed; the
 * embedded switch they run on; and the small pieces of their runs (job names, reading a
 * rank's report, medians and percentiles).
 */
#ifndef INAGG_CLI_OUTPUT_H
#define INAGG_CLI_OUTPUT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "json/json.h"
#include "inagg.h"

/* Write w's object to path ("-": stdout) and free w. 0, or -1 after a message naming cmd. */
int cli_emit_json(json_writer_t *w, const char *path, const char *cmd);

/* Parse an unsigned integer in lo..hi. 0, or -1 after a message naming cmd and flag. */
int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  uint64_t *out);

/* "switchml" or "p4sgd". 0, or -1 after a message naming cmd. */
int cli_parse_protocol(const char *cmd, const char *text, inagg_protocol_t *out);

/* A probability in [0, 1) for --loss. 0, or -1 after a message naming cmd. */
int cli_parse_loss(const char *cmd, const char *text, double *out);

/* --baseline: `name` (the one baseline the command has) or "none"; *out = text. 0, or -1
 * after a message naming cmd. */
int cli_parse_baseline(const char *cmd, const char *text, const char *name, const char **out);

/* An option getopt_long refused (c: '?' unknown, ':' its value missing; optstring starting
 * with ':' and opterr = 0), said in the one wording every command uses:
 *   inagg bench allreduce: unknown option '--x' (see --help)
 *   inagg bench allreduce: option '--elems' needs a value (see --help)
 * Returns 2, the exit status of bad usage. */
int cli_bad_option(const char *cmd, int c, char **argv);

/* 0 when argv[first..argc) is empty (getopt's optind), else -1 after a message naming cmd and
 * the first stray argument. */
int cli_no_extra_args(const char *cmd, int argc, char **argv, int first);

/* The workers' fault spec: `faults` when given, else for loss > 0 "drop=LOSS,seed=SEED" in
 * buf, else NULL. */
const char *cli_worker_faults(const char *faults, double loss, uint64_t seed, char *buf,
                              size_t len);

/* The switch a benchmark runs on: `given` (HOST:PORT) when not NULL, else an embedded one
 * forked on 127.0.0.1 with `threads` dataplane threads. Writes its address to addr and returns
 * the embedded switch's pid, 0 when `given` is used, or -1 after a message naming cmd. */
pid_t cli_switch_begin(const char *cmd, const char *given, uint32_t threads,
                       uint32_t worker_timeout_ms, char *addr, size_t len);

/* Stop what cli_switch_begin started (nothing for pid <= 0). */
void cli_switch_end(pid_t pid);

/* A job name unique to this run: "PREFIX-PID-N" into buf. Returns buf. */
const char *cli_job_name(const char *prefix, char *buf, size_t len);

/* Read exactly len bytes from fd. 0, or -1 at EOF or on an error first. */
int cli_read_full(int fd, void *buf, size_t len);

/* Sort v[n] ascending. */
void cli_sort(double *v, size_t n);

/* The median of v[n] (n >= 1); sorts v. */
double cli_median(double *v, size_t n);

/* Nearest-rank percentile (p in 0..1) of sorted v[n]; NaN for n = 0. */
double cli_percentile(const double *v, size_t n, double p);

#endif /* INAGG_CLI_OUTPUT_H */
