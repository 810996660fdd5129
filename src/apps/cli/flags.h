/*
 * flags.h - the flag parsing every command shares: integers in a range, --protocol, --loss,
 * --baseline, an option getopt refused and stray arguments, each refused with a message that
 * names the command, the flag and what is allowed.
 */
#ifndef INAGG_CLI_FLAGS_H
#define INAGG_CLI_FLAGS_H

#include <stdint.h>

#include "inagg.h"

/* Parse an unsigned integer in lo..hi. 0, or -EINVAL after a message naming cmd and flag. */
int cli_parse_u64(const char *cmd, const char *flag, const char *text, uint64_t lo, uint64_t hi,
                  uint64_t *out);

/* The same into a uint32_t (hi at most UINT32_MAX). */
int cli_parse_u32(const char *cmd, const char *flag, const char *text, uint32_t lo, uint32_t hi,
                  uint32_t *out);

/* "switchml" or "p4sgd". 0, or -EINVAL after a message naming cmd. */
int cli_parse_protocol(const char *cmd, const char *text, inagg_protocol_t *out);

/* A probability in [0, 1) for --loss. 0, or -EINVAL after a message naming cmd. */
int cli_parse_loss(const char *cmd, const char *text, double *out);

/* --baseline: `name` (the one baseline the command has) or "none"; *out = text. 0, or -EINVAL
 * after a message naming cmd. */
int cli_parse_baseline(const char *cmd, const char *text, const char *name, const char **out);

/* An option getopt_long refused (c: '?' unknown, ':' its value missing; optstring starting
 * with ':' and opterr = 0), said in the one wording every command uses:
 *   inagg bench allreduce: unknown option '--x' (see --help)
 *   inagg bench allreduce: option '--elems' needs a value (see --help)
 * Returns 2, the exit status of bad usage. */
int cli_bad_option(const char *cmd, int c, char **argv);

/* 0 when argv[first..argc) is empty (getopt's optind), else -EINVAL after a message naming cmd and
 * the first stray argument. */
int cli_no_extra_args(const char *cmd, int argc, char **argv, int first);

#endif /* INAGG_CLI_FLAGS_H */
