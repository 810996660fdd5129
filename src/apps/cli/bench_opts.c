/* bench_opts.c - the options every benchmark shares, parsed once (see bench_opts.h). */
#include "apps/cli/bench_opts.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apps/cli/flags.h"
#include "apps/launch/launch.h"
#include "lib/base/pollmode.h"
#include "lib/netio/mcast.h"

#define MAX_LONGOPTS 128
#define JOB_NAME_MAX 48

/* The shared flags' names, by id. */
static const char *const opt_names[BOPT_COUNT] = {
    [BOPT_WORKERS] = "workers",     [BOPT_WORLD] = "world",
    [BOPT_RANK] = "rank",           [BOPT_JOB] = "job",
    [BOPT_SWITCH] = "switch",       [BOPT_ITERS] = "iters",
    [BOPT_WARMUP] = "warmup",       [BOPT_SEED] = "seed",
    [BOPT_TIMEOUT] = "timeout-ms",  [BOPT_JSON] = "json",
    [BOPT_PLOT] = "plot",           [BOPT_PROTOCOL] = "protocol",
    [BOPT_LOSS] = "loss",           [BOPT_FAULTS] = "faults",
    [BOPT_BASELINE] = "baseline",   [BOPT_TESTBED] = "testbed",
    [BOPT_LINK_RATE] = "link-rate", [BOPT_LINK_DELAY] = "link-delay",
    [BOPT_FABRIC] = "fabric",       [BOPT_SWITCH_THREADS] = "switch-threads",
    [BOPT_POLL] = "poll",           [BOPT_TRANSPORT] = "transport",
};

/* Where flag id's value goes (NULL: the command does not take it). */
static const void *opt_target(const bench_opts_t *b, bench_opt_id_t id)
{
    const void *const targets[BOPT_COUNT] = {
        [BOPT_WORKERS] = b->workers,     [BOPT_WORLD] = b->world,
        [BOPT_RANK] = b->rank,           [BOPT_JOB] = b->job,
        [BOPT_SWITCH] = b->switch_addr,  [BOPT_ITERS] = b->iters,
        [BOPT_WARMUP] = b->warmup,       [BOPT_SEED] = b->seed,
        [BOPT_TIMEOUT] = b->timeout_ms,  [BOPT_JSON] = b->json_path,
        [BOPT_PLOT] = b->plot_path,      [BOPT_PROTOCOL] = b->protocol,
        [BOPT_LOSS] = b->loss,           [BOPT_FAULTS] = b->faults,
        [BOPT_BASELINE] = b->baseline,   [BOPT_TESTBED] = b->testbed,
        [BOPT_LINK_RATE] = b->link_rate, [BOPT_LINK_DELAY] = b->link_delay,
        [BOPT_FABRIC] = b->fabric,       [BOPT_SWITCH_THREADS] = b->switch_threads,
        [BOPT_POLL] = b->poll,           [BOPT_TRANSPORT] = b->transport,
    };
    return targets[id];
}

static const char *opt_name(const bench_opts_t *b, bench_opt_id_t id)
{
    return id == BOPT_TIMEOUT && b->timeout_name ? b->timeout_name : opt_names[id];
}

/* A usage error: the command, then the message. Returns 2. */
static int refuse(const bench_opts_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int refuse(const bench_opts_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", b->cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int bench_check_switch_multicast(const char *value, char *why, size_t whylen)
{
    uint32_t group;
    uint16_t port;
    if (strcmp(value, "off") == 0 || mcast_parse_group(value, 1, &group, &port) == 0)
        return 0;
    snprintf(why, whylen,
             "--switch-multicast wants off or an IPv4 multicast group (224.0.0.0/4, e.g. "
             "239.77.0.0) with an optional :PORT, got '%s'",
             value);
    return -EINVAL;
}

int bench_parse_rate(const char *text, uint64_t *bps)
{
    if (!strcasecmp(text, "none") || !strcasecmp(text, "unlimited") || !strcmp(text, "0")) {
        *bps = 0;
        return 0;
    }
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno || !(v > 0) || text[0] == '-' || text[0] == '+' || isinf(v))
        return -EINVAL;
    static const struct {
        const char *unit;
        double mul;
    } units[] = {{"", 1e6},     {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6},
                 {"gbit", 1e9}, {"k", 1e3}, {"m", 1e6},    {"g", 1e9}};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcasecmp(end, units[i].unit) == 0) {
            double bits = v * units[i].mul;
            if (bits < 1000 || bits > 1e12) /* tbf's useful range; 1 kbit/s .. 1 Tbit/s */
                return -EINVAL;
            *bps = (uint64_t)bits;
            return 0;
        }
    }
    return -EINVAL;
}

/* The u32 flags: their field and range. 0 taken, 2 refused, -1 not one of them. */
static int parse_u32_flag(bench_opts_t *b, bench_opt_id_t id, const char *arg)
{
    uint32_t *field;
    uint64_t lo = 1, hi = INAGG_MAX_WORLD, v;
    switch (id) {
        case BOPT_WORKERS: field = b->workers; break;
        case BOPT_WORLD: field = b->world; break;
        case BOPT_RANK:
            field = b->rank;
            lo = 0;
            hi = INAGG_MAX_WORLD - 1;
            break;
        case BOPT_ITERS:
            field = b->iters;
            hi = b->iters_max ? b->iters_max : 1000000;
            break;
        case BOPT_WARMUP:
            field = b->warmup;
            lo = 0;
            hi = b->warmup_max ? b->warmup_max : 1000;
            break;
        case BOPT_TIMEOUT:
            field = b->timeout_ms;
            lo = b->timeout_min ? b->timeout_min : 1;
            hi = 3600000;
            break;
        case BOPT_TESTBED:
            field = b->testbed;
            hi = LAUNCH_TESTBED_MAX_HOSTS;
            break;
        case BOPT_SWITCH_THREADS:
            field = b->switch_threads;
            hi = 64;
            break;
        default: return -1;
    }
    char flag[40];
    snprintf(flag, sizeof(flag), "--%s", opt_name(b, id));
    if (cli_parse_u64(b->cmd, flag, arg, lo, hi, &v) < 0)
        return 2;
    *field = (uint32_t)v;
    return 0;
}

/* A flag whose value is one word of a few, or a spec checked here. 0 taken, 2 refused, -1 not
 * one of them. */
static int parse_word_flag(bench_opts_t *b, bench_opt_id_t id, const char *arg)
{
    switch (id) {
        case BOPT_PROTOCOL: return cli_parse_protocol(b->cmd, arg, b->protocol) < 0 ? 2 : 0;
        case BOPT_LOSS: return cli_parse_loss(b->cmd, arg, b->loss) < 0 ? 2 : 0;
        case BOPT_BASELINE:
            return cli_parse_baseline(b->cmd, arg, b->baseline_name, b->baseline) < 0 ? 2 : 0;
        case BOPT_FABRIC:
            if (strcmp(arg, "bridge") != 0 && strcmp(arg, "inagg") != 0)
                return refuse(b, "--fabric is bridge or inagg, got '%s'", arg);
            *b->fabric = arg;
            return 0;
        case BOPT_TRANSPORT:
            if (strcmp(arg, "udp") != 0 && strcmp(arg, "roce") != 0)
                return refuse(b, "--transport is udp or roce, got '%s'", arg);
            *b->transport = arg;
            return 0;
        case BOPT_LINK_RATE: {
            uint64_t bps;
            if (bench_parse_rate(arg, &bps) < 0)
                return refuse(b,
                              "--link-rate needs a rate such as 100mbit, 1gbit, 500kbit, a "
                              "number of Mbit/s, or none; got '%s'",
                              arg);
            *b->link_rate = arg;
            if (b->link_bps)
                *b->link_bps = bps;
            return 0;
        }
        case BOPT_POLL: {
            switch_poll_t mode;
            uint32_t spin;
            char why[160];
            if (switch_poll_parse(arg, &mode, &spin, why, sizeof(why)) != 0)
                return refuse(b, "--poll: %s", why);
            *b->poll = arg;
            if (b->poll_us)
                *b->poll_us = switch_poll_worker_us(mode, spin);
            return 0;
        }
        case BOPT_JOB:
            if (!*arg || strlen(arg) > JOB_NAME_MAX)
                return refuse(b, "--job needs a name of 1..%d characters", JOB_NAME_MAX);
            *b->job = arg;
            return 0;
        default: return -1;
    }
}

/* Shared flag id with its value arg. 0 taken, 2 refused (said). */
static int parse_shared_flag(bench_opts_t *b, bench_opt_id_t id, const char *arg)
{
    b->given |= BOPT_BIT(id);
    int rc = parse_u32_flag(b, id, arg);
    if (rc < 0)
        rc = parse_word_flag(b, id, arg);
    if (rc >= 0)
        return rc;
    uint64_t v;
    switch (id) {
        case BOPT_SEED:
            if (cli_parse_u64(b->cmd, "--seed", arg, 0, b->seed_max ? b->seed_max : UINT64_MAX,
                              &v) < 0)
                return 2;
            *b->seed = v;
            return 0;
        case BOPT_SWITCH: *b->switch_addr = arg; return 0;
        case BOPT_JSON: *b->json_path = arg; return 0;
        case BOPT_PLOT: *b->plot_path = arg; return 0;
        case BOPT_FAULTS: *b->faults = arg; return 0;
        case BOPT_LINK_DELAY: *b->link_delay = arg; return 0;
        default: return refuse(b, "--%s is not handled", opt_name(b, id));
    }
}

/* The shared flags b takes, then the command's own, then --help, into table. The number of
 * entries, or -E2BIG (too many), or -EEXIST (an own flag is also a shared one b takes). */
static int build_table(const bench_opts_t *b, const struct option *own, struct option *table)
{
    int n = 0;
    for (int id = 0; id < BOPT_COUNT; id++) {
        if (opt_target(b, (bench_opt_id_t)id))
            table[n++] = (struct option){opt_name(b, (bench_opt_id_t)id), required_argument, NULL,
                                         BENCH_OPT_CODE + id};
    }
    int shared = n;
    for (; own && own->name; own++) {
        if (n >= MAX_LONGOPTS - 2)
            return -E2BIG;
        for (int k = 0; k < shared; k++)
            if (strcmp(table[k].name, own->name) == 0)
                return -EEXIST;
        table[n++] = *own;
    }
    table[n++] = (struct option){"help", no_argument, NULL, 'h'};
    table[n] = (struct option){0, 0, 0, 0};
    return n;
}

/* After parsing: an argument left over is refused, with a hint when it follows a flag whose
 * value is optional (getopt took it for an argument). 0, or 2 after a message. */
static int refuse_strays(const bench_opts_t *b, int argc, char **argv, const struct option *table)
{
    if (optind >= argc)
        return 0;
    const char *prev = optind > 1 ? argv[optind - 1] : "";
    for (const struct option *t = table; t->name; t++)
        if (t->has_arg == optional_argument && strncmp(prev, "--", 2) == 0 &&
            strcmp(prev + 2, t->name) == 0)
            return refuse(b, "--%s takes its value after '=' (--%s=VALUE), got '%s' after it",
                          t->name, t->name, argv[optind]);
    return cli_no_extra_args(b->cmd, argc, argv, optind) < 0 ? 2 : 0;
}

int bench_opts_parse(bench_opts_t *b, int argc, char **argv, const struct option *own,
                     bench_own_flag_fn own_flag, void *ctx, void (*usage)(FILE *out))
{
    struct option table[MAX_LONGOPTS];
    int n = build_table(b, own, table);
    if (n < 0)
        return refuse(b, "%s",
                      n == -EEXIST ? "a flag of its own is also a shared one"
                                   : "too many options for one table");
    b->given = 0;
    optind = 1;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    int c;
    while ((c = getopt_long(argc, argv, ":h", table, NULL)) != -1) {
        int rc = 0;
        if (c >= BENCH_OPT_CODE && c < BENCH_OPT_CODE + BOPT_COUNT)
            rc = parse_shared_flag(b, (bench_opt_id_t)(c - BENCH_OPT_CODE), optarg);
        else if (c == 'h') {
            usage(stdout);
            return 1;
        } else if (c == '?' || c == ':' || !own_flag || (rc = own_flag(ctx, c)) < 0)
            return cli_bad_option(b->cmd, c, argv);
        if (rc)
            return rc;
    }
    int rc = refuse_strays(b, argc, argv, table);
    if (rc || !b->check)
        return rc;
    char why[256];
    return b->check(ctx, b, why, sizeof(why)) < 0 ? refuse(b, "%s", why) : 0;
}
