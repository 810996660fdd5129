/*
 * output.h - what the benchmark commands share: the `--json FILE|-` writer (one JSON object
 * per run, "-" meaning stdout); flag parsing (integers, --protocol, --loss, --baseline, stray
 * arguments) with messages that name the command, the flag and what is allowed; and the
 * embedded switch they run on.
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

#endif /* INAGG_CLI_OUTPUT_H */
