/*
 * cmd_model.c - `inagg model calibrate|predict|validate`: dispatch, the overview help, and
 * the parsers the three share (rates, sizes, usage errors).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/model_cli.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: inagg model calibrate [--out FILE] [--no-testbed]\n"
            "       inagg model predict [--params FILE] (--workers N | --workers-range A-B)\n"
            "                           --size BYTES [--link-rate R] [--levels L] ... [--json -]\n"
            "       inagg model predict --preset gcow-resnet50|gcow-vit|switchml [--plot F.png]\n"
            "       inagg model validate [--params FILE] [--quick] [--json FILE|-]\n"
            "\n"
            "The performance model of allreduce: in-network aggregation (one switch or a\n"
            "hierarchy), ring, tree, parameter server and concurrent allreduce, with and\n"
            "without compression and overlap, from the papers' equations (docs/MODEL.md)\n"
            "with this implementation's measured costs as parameters.\n"
            "\n"
            "  calibrate   short micro-benchmarks of this build (switch cost per packet,\n"
            "              worker cost per element, latency of a hop and of an MPI message,\n"
            "              codec throughput and ratio) into a JSON file (default %s)\n"
            "  predict     the time of one allreduce (or training iteration) for given\n"
            "              workers (up to %u), size, link rate, levels; --plot draws time and\n"
            "              speedup against workers for INA, ring, tree and parameter server\n"
            "  validate    runs the testbed (2-8 hosts, two link rates, two sizes, flat and\n"
            "              two-level, compressed, one slow link) and prints predicted against\n"
            "              measured with max_rel_error\n"
            "\n"
            "`inagg model SUB --help` explains each.\n",
            MODEL_DEFAULT_PARAMS, MODEL_MAX_WORKERS);
}

int model_bad(const char *sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, MODEL_CMD " %s: ", sub);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n" MODEL_CMD " %s: see --help\n", sub);
    va_end(ap);
    return 2;
}

int model_parse_flags(const model_flags_t *spec, int argc, char **argv, void *ctx)
{
    char cmd[64];
    snprintf(cmd, sizeof(cmd), MODEL_CMD " %s", spec->sub);
    optind = 1;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    int ch;
    while ((ch = getopt_long(argc, argv, spec->shortopts, spec->longopts, NULL)) != -1) {
        if (ch == 'h') {
            spec->usage(stdout);
            return 1;
        }
        int rc = ch == '?' || ch == ':' ? -1 : spec->flag(ctx, ch);
        if (rc < 0)
            return cli_bad_option(cmd, ch, argv);
        if (rc > 0)
            return rc;
    }
    if (optind < argc)
        return model_bad(spec->sub, "unexpected argument '%s'", argv[optind]);
    return 0;
}

int cmd_model(int argc, char **argv)
{
    if (argc < 1) {
        usage(stderr);
        return 2;
    }
    const char *sub = argv[0];
    if (!strcmp(sub, "-h") || !strcmp(sub, "--help") || !strcmp(sub, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(sub, "calibrate"))
        return model_calibrate_main(argc, argv);
    if (!strcmp(sub, "predict"))
        return model_predict_main(argc, argv);
    if (!strcmp(sub, "validate"))
        return model_validate_main(argc, argv);
    if (sub[0] == '-') {
        fprintf(stderr, MODEL_CMD ": unknown option '%.*s' (see --help)\n", (int)strcspn(sub, "="),
                sub);
        return 2;
    }
    fprintf(stderr,
            MODEL_CMD ": unknown subcommand '%s': calibrate, predict or validate "
                      "(inagg model --help)\n",
            sub);
    return 2;
}
