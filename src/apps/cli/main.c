/*
 * main.c - the `inagg` command: dispatches to a subcommand (see commands.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "inagg.h"
#include "lib/base/env.h"
#include "lib/base/log.h"

static void usage(FILE *out)
{
    fprintf(out,
            "inagg %s - in-network aggregation for distributed training\n"
            "\n"
            "usage: inagg <command> [options]     (inagg <command> --help for its options)\n"
            "\n"
            "commands:\n"
            "  switch            run the aggregation switch daemon (UDP dataplane, TCP control)\n"
            "  switch --stats HOST:PORT\n"
            "                    print the counters of a running switch\n"
            "  top HOST:PORT     a live view of a running switch: jobs, rates, drops, slots\n"
            "  bench allreduce   allreduce throughput: embedded switch + N local workers,\n"
            "                    verified results, optional OpenMPI baseline in the same run\n"
            "  bench latency     small-allreduce latency (p50/p99/p99.9), P4SGD's Fig. 8,\n"
            "                    optional OpenMPI baseline in the same run\n"
            "  bench optimizer   the in-switch optimizer against allreduce + a local step,\n"
            "                    verified against torch.optim or an independent reference\n"
            "  bench udp         the kernel's UDP ceiling: one sender, one receiver, loopback\n"
            "  bench mac         the authenticated dataplane's MACs: seal and check per packet\n"
            "                    size on one core, against libsodium, verified\n"
            "  bench compress    ZFP/fp16 codec grid: ratio, GB/s, error vs libzfp (GCOW)\n"
            "  bench train       PyTorch DDP on Fashion-MNIST through Gloo and inagg, on\n"
            "                    loopback or a testbed with rate-limited links (epoch time,\n"
            "                    accuracy, time to accuracy)\n"
            "  model             the performance model: calibrate, predict (up to 1024 workers,\n"
            "                    INA / ring / tree / parameter server), validate on the testbed\n"
            "  train             distributed training of a linear model (P4SGD): embedded switch,\n"
            "                    N workers, model- or data-parallel SGD (no arguments: a demo)\n"
            "  version           print the version\n"
            "\n"
            "environment variables the library (libinagg) reads:\n",
            INAGG_VERSION_STRING);
    for (int i = 0; i < ENV_COUNT; i++) {
        const env_var_t *v = env_var((env_id_t)i);
        fprintf(out, "  %-22s %s, default %s\n  %-22s %s\n", v->name, v->type, v->def, "", v->doc);
    }
}

/* `inagg bench`: its subcommands, every one. */
static void bench_usage(FILE *out)
{
    fprintf(out, "usage: inagg bench <benchmark> [options]   (inagg bench <benchmark> --help)\n"
                 "\n"
                 "benchmarks:\n"
                 "  allreduce   allreduce throughput: embedded switch + N local workers (or a\n"
                 "              testbed), verified results, MPI/Gloo baselines in the same run\n"
                 "  latency     small-allreduce latency (p50/p99/p99.9), P4SGD's Fig. 8\n"
                 "  optimizer   the in-switch optimizer against allreduce + a local step\n"
                 "  udp         the kernel's UDP ceiling: one sender, one receiver, loopback\n"
                 "  mac         the authenticated dataplane's MACs: seal and check per packet\n"
                 "              size on one core, against libsodium, verified\n"
                 "  compress    ZFP/fp16 codec grid: ratio, GB/s, error vs libzfp (GCOW)\n"
                 "  train       PyTorch DDP on Fashion-MNIST through Gloo and inagg (epoch time,\n"
                 "              accuracy, time to accuracy), loopback or a testbed\n");
}

/* `inagg version` (or --version): the version and the wire protocol's; no options but --help. */
static int cmd_version(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    int c = getopt_long(argc, argv, ":h", opts, NULL);
    if (c == 'h') {
        printf("usage: inagg version\n\n"
               "Prints the version of inagg and of the protocol its switch and workers speak\n"
               "(docs/PROTOCOL.md).\n");
        return 0;
    }
    if (c != -1)
        return cli_bad_option("inagg version", c, argv);
    if (cli_no_extra_args("inagg version", argc, argv, optind))
        return 2;
    printf("inagg %s (protocol %d)\n", INAGG_VERSION_STRING, INAGG_PROTOCOL_VERSION);
    return 0;
}

int main(int argc, char **argv)
{
    log_init(LOG_INFO, "inagg");
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0)
        return cmd_version(argc - 1, argv + 1);
    if (strcmp(cmd, "switch") == 0)
        return cmd_switch(argc - 1, argv + 1);
    if (strcmp(cmd, "top") == 0)
        return cmd_top(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0)
        return cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "model") == 0)
        return cmd_model(argc - 2, argv + 2);
    if (strcmp(cmd, "bench") == 0) {
        if (argc >= 3 && strcmp(argv[2], "allreduce") == 0)
            return cmd_bench_allreduce(argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], "udp") == 0)
            return cmd_bench_udp(argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], "mac") == 0)
            return cmd_bench_mac(argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], "latency") == 0)
            return cmd_bench_latency(argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], "optimizer") == 0)
            return cmd_bench_optimizer(argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], "compress") == 0)
            return cmd_bench_compress(argc - 2, argv + 2);
        if (argc >= 3 && strcmp(argv[2], "train") == 0)
            return cmd_bench_train(argc - 2, argv + 2);
        if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 ||
                          strcmp(argv[2], "help") == 0)) {
            bench_usage(stdout);
            return 0;
        }
        if (argc >= 3 && argv[2][0] == '-')
            fprintf(stderr, "inagg bench: unknown option '%.*s' (see --help)\n",
                    (int)strcspn(argv[2], "="), argv[2]);
        else if (argc >= 3)
            fprintf(stderr, "inagg bench: unknown benchmark '%s'\n\n", argv[2]);
        if (argc < 3 || argv[2][0] != '-')
            bench_usage(stderr);
        return 2;
    }
    if (cmd[0] == '-') {
        fprintf(stderr, "inagg: unknown option '%.*s' (see --help)\n", (int)strcspn(cmd, "="), cmd);
        return 2;
    }
    fprintf(stderr, "inagg: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
