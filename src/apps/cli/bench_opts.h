/*
 * bench_opts.h - the options every benchmark (and `inagg train`) shares, parsed once: one
 * getopt_long table for --workers, --iters, --seed, --json, --switch, --testbed, --link-rate,
 * ... and one loop that chains the command's own flags after them. A command says which
 * shared flags it takes by pointing them at its own option struct's fields (NULL: not taken,
 * so refused as an unknown option), sets their limits where they differ from the defaults,
 * and reads back which ones were given. Every refusal names the command, the flag and what it
 * allows; unknown options keep cli_bad_option's one wording and exit 2.
 */
#ifndef INAGG_CLI_BENCH_OPTS_H
#define INAGG_CLI_BENCH_OPTS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "inagg.h"

/* The shared flags, in the order of the table. */
typedef enum bench_opt_id {
    BOPT_WORKERS,
    BOPT_WORLD,
    BOPT_RANK,
    BOPT_JOB,
    BOPT_SWITCH,
    BOPT_ITERS,
    BOPT_WARMUP,
    BOPT_SEED,
    BOPT_TIMEOUT,
    BOPT_JSON,
    BOPT_PLOT,
    BOPT_PROTOCOL,
    BOPT_LOSS,
    BOPT_FAULTS,
    BOPT_BASELINE,
    BOPT_TESTBED,
    BOPT_LINK_RATE,
    BOPT_LINK_DELAY,
    BOPT_FABRIC,
    BOPT_SWITCH_THREADS,
    BOPT_POLL,
    BOPT_TRANSPORT,
    BOPT_COUNT
} bench_opt_id_t;

#define BOPT_BIT(id) (1u << (id))

/* getopt_long's value for a shared flag: BENCH_OPT_CODE + its id. A command's own flags use
 * values below it. */
#define BENCH_OPT_CODE 0x3000

struct bench_opts;

/* After argv: the command's checks across its flags (b->given says which shared ones were
 * given), and what it derives from them. 0, or a negative errno with the reason in why, which
 * bench_opts_parse says after the command's name (a usage error). */
typedef int (*bench_check_fn)(void *ctx, const struct bench_opts *b, char *why, size_t whylen);

/* The defaults every benchmark gives its shared flags, as designated initializers of its own
 * options struct (a macro: each command's struct is its own type, with these fields alike):
 * 4 workers, seed 1, a 30 s timeout. */
#define BENCH_OPTS_DEFAULTS .workers = 4, .seed = 1, .timeout_ms = 30000

/* The shared flags of a benchmark that runs a switch job with ranks, on loopback or a testbed
 * (bench allreduce, bench latency), bound to the fields of the same names in its options
 * struct `o`: designated initializers of a bench_opts_t. */
#define BENCH_OPTS_JOB_FLAGS(o)                                                                    \
    .workers = &(o)->workers, .rank = &(o)->rank, .job = &(o)->job,                                \
    .switch_addr = &(o)->switch_addr, .iters = &(o)->iters, .warmup = &(o)->warmup,                \
    .seed = &(o)->seed, .timeout_ms = &(o)->timeout_ms, .json_path = &(o)->json_path,              \
    .protocol = &(o)->protocol, .loss = &(o)->loss, .faults = &(o)->faults,                        \
    .testbed = &(o)->testbed, .link_rate = &(o)->link_rate, .link_delay = &(o)->link_delay,        \
    .fabric = &(o)->fabric

typedef struct bench_opts {
    const char *cmd; /* "inagg bench latency": every message starts with it */
    /* Where each shared flag's value goes; NULL: the command does not take it. */
    uint32_t *workers, *world, *rank, *iters, *warmup, *timeout_ms, *testbed, *switch_threads;
    uint64_t *seed;
    double *loss;
    inagg_protocol_t *protocol;
    const char **job, **switch_addr, **json_path, **plot_path, **faults, **baseline;
    const char **link_rate, **link_delay, **fabric, **transport, **poll;
    uint64_t *link_bps; /* with link_rate: the rate in bit/s (0: not limited) */
    uint32_t *poll_us; /* with poll: the workers' options.poll_us */
    /* Limits where the command's differ from the defaults (0: the default). */
    uint32_t iters_max, warmup_max, timeout_min;
    uint64_t seed_max;
    const char *timeout_name; /* the flag's name without "--" (default "timeout-ms") */
    const char *baseline_name; /* the one baseline --baseline takes besides none */
    bench_check_fn check; /* NULL: no checks across the flags */
    uint32_t given; /* out: BOPT_BIT(id) of each shared flag given */
} bench_opts_t;

/* A command's own flag c (its value in optarg): 0 taken, 2 refused (said), -1 not its own. */
typedef int (*bench_own_flag_fn)(void *ctx, int c);

/* Parse argv: the shared flags into b's fields, the command's own (`own`, ending with a zero
 * entry, values below BENCH_OPT_CODE) through own_flag(ctx, c), -h/--help through usage; an
 * argument that is no option is refused (after a flag with an optional value: saying that
 * the value goes after '='); then b->check(ctx, ...). 0 parsed, 1 help printed, 2 a usage
 * error said. */
int bench_opts_parse(bench_opts_t *b, int argc, char **argv, const struct option *own,
                     bench_own_flag_fn own_flag, void *ctx, void (*usage)(FILE *out));

/* Whether the shared flag id was given. */
static inline int bench_opts_given(const bench_opts_t *b, bench_opt_id_t id)
{
    return (b->given & BOPT_BIT(id)) != 0;
}

/* tc's rate syntax (100mbit, 1gbit, 500kbit, 2.5g) or a bare number of Mbit/s; none,
 * unlimited or 0: not limited (*bps = 0). 0, or -EINVAL. */
int bench_parse_rate(const char *text, uint64_t *bps);

/* The value of a bench command's --switch-multicast: off, or GROUP[:PORT] as `inagg switch
 * --multicast` takes it. 0, or -EINVAL with the reason (naming the flag) in why. */
int bench_check_switch_multicast(const char *value, char *why, size_t whylen);

#endif /* INAGG_CLI_BENCH_OPTS_H */
