/*
 * cmd_bench_latency.c - `inagg bench latency`: the latency of small allreduces, after P4SGD's
 * Fig. 8 (8 float32 elements among N workers).
 *
 * The parent forks an embedded switch (unless --switch names one) and N worker processes,
 * each a rank of one job. Every iteration starts with an untimed 1-element allreduce through
 * the same protocol, which lines the ranks up (a barrier with sub-round-trip skew), then the
 * timed allreduce of --elems elements, whose result is verified. An iteration's latency is
 * the slowest rank's, as in the MPI baseline (inagg-mpi-bench --mode latency, which puts an
 * MPI_Barrier before each timed MPI_Allreduce). Reported: p50 / p99 / p99.9 over iterations
 * (nearest rank). --baseline mpi runs that baseline in the same invocation and prints
 * speedup_p50 = MPI p50 / inagg p50.
 *
 * --testbed N builds a testbed of N host namespaces (tools/testbed, launch/testbed_job.c): the
 * aggregation switch in the switch namespace (the fabric's own with --fabric inagg), rank k
 * in host h(k+1) as this command in its one-rank mode (--rank, which writes its report to a
 * file: the namespaces share the file system), and the MPI baseline through mpirun in h1 with
 * one rank per host, so both cross the same links and the same fabric.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/bench/bench_latency.h"
#include "apps/bench/harness.h"
#include "apps/cli/bench_opts.h"
#include "apps/cli/commands.h"
#include "apps/cli/flags.h"
#include "apps/cli/output.h"
#include "lib/base/errmsg.h"
#include "lib/base/pollmode.h"
#include "lib/json/json.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: inagg bench latency [options]\n"
        "\n"
        "Latency of small allreduces through the aggregation switch, as in the P4SGD\n"
        "paper's Fig. 8: N local worker processes and an embedded switch (or --switch)\n"
        "allreduce --elems values, one operation at a time, and every result is verified.\n"
        "Each timed operation follows an untimed 1-element allreduce that lines the ranks\n"
        "up; its latency is the slowest rank's. Prints p50 / p99 / p99.9 (microseconds).\n"
        "--baseline mpi runs OpenMPI's MPI_Allreduce (TCP over loopback, an MPI_Barrier\n"
        "before each) with the same N and size in the same invocation and prints\n"
        "speedup_p50 = MPI p50 / inagg p50.\n"
        "\n"
        "options:\n"
        "  --workers N          worker processes (default 4)\n"
        "  --elems E            elements per allreduce, 1..%u (default 8, P4SGD's micro-batch)\n"
        "  --dtype T            float32 (default) or int32\n"
        "  --iters K            timed operations (default 5000)\n"
        "  --warmup W           untimed operations first (default 200)\n"
        "  --protocol P         p4sgd (default; latency-centric) or switchml\n"
        "  --slots S            slots of the job (default 16)\n"
        "  --loss P             drop each packet with probability P in the workers (seeded)\n"
        "  --faults SPEC        full fault spec for the workers (drop=,dup=,reorder=,seed=)\n"
        "  --baseline B         mpi or none (default none)\n"
        "  --switch HOST:PORT   use a running switch instead of the embedded one\n"
        "  --rank R --job NAME --report-file PATH [--rank-cpu K]\n"
        "                       run one rank (of --workers) of job NAME on --switch and\n"
        "                       write its report to PATH (what --testbed runs on each host),\n"
        "                       pinned to the K-th CPU it may use (mod their number)\n"
        "  --testbed N          run across a testbed of N host namespaces (tools/testbed,\n"
        "                       root): the switch in the switch namespace, one worker per\n"
        "                       host, the MPI baseline one rank per host over the same\n"
        "                       links; taken down at the end. Exit 3: testbeds cannot be\n"
        "                       built here\n"
        "  --fabric F           with --testbed: inagg (tools/testbed's default: `inagg\n"
        "                       switch --l2`, which also aggregates; docs/FABRIC.md) or\n"
        "                       bridge\n"
        "  --link-delay D       with --testbed --fabric inagg: one-way delay per link (25us)\n"
        "  --link-rate R        with --testbed: every link's rate (1gbit; default none)\n"
        "  --poll MODE          how the workers wait for a result: adaptive[:US] (default\n"
        "                       adaptive:200), sleep or busy (options.poll_us, INAGG_POLL)\n"
        "  --switch-poll MODE   with --testbed: the --poll of the testbed's switch (with\n"
        "                       --fabric inagg, of the fabric's `inagg switch --l2`)\n"
        "                       (adaptive[:US] by default, sleep, busy; `inagg switch\n"
        "                       --help`)\n"
        "  --pin-hosts on|off   with --testbed: host k's worker (and the floor's client\n"
        "                       there) pinned to the (k-1)-th CPU, mod their number, as\n"
        "                       each host has CPUs of its own (default on; off: the kernel\n"
        "                       places them, and two hosts may share a core while one\n"
        "                       idles: a run then measures ~3 us slower at 2 hosts)\n"
        "  --switch-multicast GROUP|off  with --testbed --fabric bridge: the testbed\n"
        "                       switch's --multicast (default 239.77.0.0: a round's\n"
        "                       result leaves once, to the job's group; off: once per\n"
        "                       rank)\n"
        "                       --testbed also measures the medium's floor in the same run:\n"
        "                       a UDP ping-pong of inagg's packet size from each host to\n"
        "                       the switch namespace whose echo server waits as the switch\n"
        "                       (--switch-poll) and whose clients wait as the workers\n"
        "                       (--poll) (floor_us, floor_ratio_p50)\n"
        "  --timeout-ms MS      per-call progress timeout (default 30000)\n"
        "  --seed S             contents (default 1)\n"
        "  --json FILE|-        also write one JSON object (- for stdout; the table then\n"
        "                       goes to stderr): workers, elems, protocol, iters, verified,\n"
        "                       latency_us {p50, p99, p999, mean}, and with a baseline\n"
        "                       baseline {name, latency_us {p50, p99, p999}}, speedup_p50;\n"
        "                       with --testbed floor_us {p50, p99, samples, lost} and\n"
        "                       floor_ratio_p50 = inagg p50 / floor p50\n"
        "  -h, --help           this text\n"
        "\n"
        "example:\n"
        "  inagg bench latency --workers 4 --baseline mpi --json -\n"
        "  inagg bench latency --testbed 4 --fabric inagg --link-delay 25us --baseline mpi\n",
        LAT_MAX_ELEMS);
}

#define LAT_CMD "inagg bench latency"

/* ---- parse ------------------------------------------------------------------------------ */

/* --switch-poll MODE with --testbed: a poll mode. 0, or -EINVAL with the reason in why. */
static int check_switch_poll(const lat_opts_t *o, char *why, size_t whylen)
{
    switch_poll_t m;
    uint32_t spin;
    char perr[160];
    if (switch_poll_parse(o->switch_poll, &m, &spin, perr, sizeof(perr)) != 0)
        return set_err(why, whylen, -EINVAL, "--switch-poll: %s", perr);
    return 0;
}

/* Latency's own flags (bench_own_flag_fn). */
static int parse_own_flag(void *ctx, int c)
{
    lat_opts_t *o = ctx;
    switch (c) {
        case 'e':
            return cli_parse_u32(LAT_CMD, "--elems", optarg, 1, LAT_MAX_ELEMS, &o->elems) < 0 ? 2
                                                                                              : 0;
        case 's': return cli_parse_u32(LAT_CMD, "--slots", optarg, 1, 4096, &o->slots) < 0 ? 2 : 0;
        case 'd':
            if (strcmp(optarg, "int32") != 0 && strcmp(optarg, "float32") != 0) {
                fprintf(stderr, LAT_CMD ": --dtype must be int32 or float32\n");
                return 2;
            }
            o->dtype_float = strcmp(optarg, "float32") == 0;
            return 0;
        case 'F': o->report_file = optarg; return 0;
        case 'G': o->switch_poll = optarg; return 0;
        case 'M': o->switch_multicast = optarg; return 0;
        case 'P':
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0) {
                fprintf(stderr, LAT_CMD ": --pin-hosts is on or off, got '%s'\n", optarg);
                return 2;
            }
            o->pin_hosts = strcmp(optarg, "on") == 0;
            o->pin_hosts_given = 1;
            return 0;
        case 'C': {
            uint32_t k;
            if (cli_parse_u32(LAT_CMD, "--rank-cpu", optarg, 0, UINT32_MAX, &k) < 0)
                return 2;
            o->rank_cpu = k;
            return 0;
        }
        default: return -1;
    }
}

/* What goes with --rank (one rank of a job), --testbed and its links. The message, or NULL. */
static const char *check_placement(lat_opts_t *o, const bench_opts_t *b)
{
    int workers_given = bench_opts_given(b, BOPT_WORKERS);
    if (o->single) {
        if (!o->switch_addr || !o->job || !o->report_file || !workers_given)
            return "--rank runs one rank of a job: it needs --switch HOST:PORT, --workers W "
                   "(the world), --job NAME and --report-file PATH";
        if (o->rank >= o->workers)
            return "--rank must be below --workers";
        if (o->testbed || strcmp(o->baseline, "none") != 0)
            return "--rank runs one rank: --testbed and --baseline do not apply";
    } else if (o->job || o->report_file) {
        return "--job and --report-file go with --rank (one rank of a job)";
    }
    if (o->pin_hosts_given && !o->testbed)
        return "--pin-hosts places the testbed's hosts on CPUs: it goes with --testbed N";
    if (o->rank_cpu >= 0 && !o->single)
        return "--rank-cpu pins one rank: it goes with --rank";
    if (o->switch_multicast && (!o->testbed || !o->fabric || strcmp(o->fabric, "bridge") != 0))
        return "--switch-multicast sets the bridge testbed's `inagg switch`: it goes with "
               "--testbed N --fabric bridge";
    if (o->testbed) {
        if (o->switch_addr)
            return "--testbed starts its own switch in the switch namespace; --switch does "
                   "not apply";
        if (workers_given)
            return "--testbed runs one worker per host; --workers does not apply";
        o->workers = o->testbed;
    } else if (o->switch_poll) {
        return "--switch-poll sets the testbed's switch: it goes with --testbed N (a switch "
               "of your own: `inagg switch --poll`)";
    } else if (b->given &
               (BOPT_BIT(BOPT_LINK_RATE) | BOPT_BIT(BOPT_LINK_DELAY) | BOPT_BIT(BOPT_FABRIC))) {
        return "--link-rate, --fabric and --link-delay describe the testbed: they go with "
               "--testbed N";
    }
    return NULL;
}

/* Latency's checks across its flags, then the workers' fault spec (bench_check_fn). */
static int check_flags(void *ctx, const bench_opts_t *b, char *why, size_t whylen)
{
    lat_opts_t *o = ctx;
    o->single = bench_opts_given(b, BOPT_RANK);
    const char *placement = check_placement(o, b);
    if (placement)
        return set_err(why, whylen, -EINVAL, "%s", placement);
    if (o->switch_poll) {
        int rc = check_switch_poll(o, why, whylen);
        if (rc < 0)
            return rc;
    }
    if (o->switch_multicast) {
        int rc = bench_check_switch_multicast(o->switch_multicast, why, whylen);
        if (rc < 0)
            return rc;
    }
    o->faults =
        bench_worker_faults(o->faults, o->loss, o->seed, o->faults_buf, sizeof(o->faults_buf));
    return 0;
}

/* The options with their defaults, then argv's. 0, 1 after --help, 2 after a usage error
 * (its message printed). */
static int parse_args(int argc, char **argv, lat_opts_t *o)
{
    *o = (lat_opts_t){BENCH_OPTS_DEFAULTS,
                      .elems = 8,
                      .iters = 5000,
                      .warmup = 200,
                      .slots = 16,
                      .dtype_float = 1,
                      .protocol = INAGG_PROTO_P4SGD,
                      .baseline = "none",
                      .pin_hosts = 1,
                      .rank_cpu = -1};
    bench_opts_t b = {.cmd = LAT_CMD,
                      BENCH_OPTS_JOB_FLAGS(o),
                      .baseline = &o->baseline,
                      .baseline_name = "mpi",
                      .poll = &o->poll,
                      .poll_us = &o->poll_us,
                      .iters_max = LAT_MAX_ITERS,
                      .warmup_max = LAT_MAX_ITERS,
                      .check = check_flags};
    static const struct option own[] = {{"elems", required_argument, 0, 'e'},
                                        {"dtype", required_argument, 0, 'd'},
                                        {"slots", required_argument, 0, 's'},
                                        {"report-file", required_argument, 0, 'F'},
                                        {"switch-poll", required_argument, 0, 'G'},
                                        {"switch-multicast", required_argument, 0, 'M'},
                                        {"pin-hosts", required_argument, 0, 'P'},
                                        {"rank-cpu", required_argument, 0, 'C'},
                                        {0, 0, 0, 0}};
    return bench_opts_parse(&b, argc, argv, own, parse_own_flag, o, usage);
}

/* ---- render --------------------------------------------------------------------------------- */

/* Whether the testbed's aggregation switch is `inagg switch` (--fabric bridge), not the
 * fabric's own. */
static int testbed_switch_is_ours(const lat_opts_t *o)
{
    return o->fabric && strcmp(o->fabric, "bridge") == 0;
}

/* That switch's --multicast: the group, or "off". */
static const char *lat_switch_multicast(const lat_opts_t *o)
{
    return o->switch_multicast ? o->switch_multicast : LAUNCH_TBJOB_MCAST_GROUP;
}

static void render_text(FILE *table, const lat_opts_t *o, const lat_result_t *r)
{
    fprintf(table, "inagg allreduce latency: %u workers, %u %s elements, protocol %s, %s\n",
            o->workers, o->elems, o->dtype_float ? "float32" : "int32", lat_proto_name(o),
            o->faults ? o->faults : "no loss");
    if (o->testbed)
        fprintf(table, "  testbed        %u hosts, fabric %s, link delay %s, links %s\n",
                o->testbed, o->fabric ? o->fabric : "(tools/testbed's default)",
                o->link_delay ? o->link_delay : "none",
                o->link_rate ? o->link_rate
                             : "not "
                               "rate-limited");
    if (o->testbed && testbed_switch_is_ours(o) && strcmp(lat_switch_multicast(o), "off") == 0)
        fprintf(table, "  switch         no --multicast: a result to each rank\n");
    else if (o->testbed && testbed_switch_is_ours(o))
        fprintf(table, "  switch         --multicast %s: a p4sgd round's result leaves once\n",
                lat_switch_multicast(o));
    if (o->testbed)
        fprintf(table, "  hosts' CPUs    %s\n",
                o->pin_hosts ? "host k's worker and floor client on CPU k-1 (mod CPUs)"
                             : "placed by the kernel (--pin-hosts off)");
    if (o->switch_poll || o->poll)
        fprintf(table, "  poll           switch %s, workers %s\n",
                o->switch_poll ? o->switch_poll : "default", o->poll ? o->poll : "default");
    fprintf(table, "  verified       %s (%u operations)\n", r->verified ? "yes" : "NO", r->n);
    fprintf(table, "  latency        p50 %.1f us  p99 %.1f us  p99.9 %.1f us  mean %.1f us\n",
            r->p50, r->p99, r->p999, r->mean);
    fprintf(table, "  packets        %llu sent, %llu retransmitted\n",
            (unsigned long long)r->total.packets_sent,
            (unsigned long long)r->total.retransmissions);
    if (r->have_floor)
        fprintf(table,
                "  floor (UDP)    p50 %.1f us  p99 %.1f us  (%u round trips, %u lost) "
                "-> inagg p50 / floor p50 %.2fx\n",
                r->floor.p50_us, r->floor.p99_us, r->floor.samples, r->floor.lost, r->floor_ratio);
    if (r->have_base)
        fprintf(table,
                "  MPI_Allreduce  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  -> speedup "
                "(p50) %.2fx\n",
                r->base.lat_p50_us, r->base.lat_p99_us, r->base.lat_p999_us, r->speedup);
}

/* The --json object. 0, or a negative errno when it could not be written. */
static int render_json(const lat_opts_t *o, const lat_result_t *r)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_int(&w, "workers", o->workers);
    json_int(&w, "elems", o->elems);
    json_string(&w, "dtype", o->dtype_float ? "float32" : "int32");
    json_string(&w, "protocol", lat_proto_name(o));
    json_int(&w, "iters", o->iters);
    json_number(&w, "loss", o->loss);
    json_bool(&w, "verified", r->verified);
    if (o->testbed) {
        cli_json_testbed_begin(&w, o->testbed, o->fabric, o->link_delay, o->link_rate);
        json_string(&w, "switch_poll", o->switch_poll ? o->switch_poll : "default");
        json_string(&w, "worker_poll", o->poll ? o->poll : "default");
        if (testbed_switch_is_ours(o))
            json_string(&w, "switch_multicast", lat_switch_multicast(o));
        json_bool(&w, "pin_hosts", o->pin_hosts);
        json_end_object(&w);
    }
    json_begin_object(&w, "latency_us");
    json_number(&w, "p50", r->p50);
    json_number(&w, "p99", r->p99);
    json_number(&w, "p999", r->p999);
    json_number(&w, "mean", r->mean);
    json_end_object(&w);
    json_int(&w, "packets", (int64_t)r->total.packets_sent);
    json_int(&w, "retransmissions", (int64_t)r->total.retransmissions);
    if (r->have_floor) {
        json_begin_object(&w, "floor_us");
        json_number(&w, "p50", r->floor.p50_us);
        json_number(&w, "p99", r->floor.p99_us);
        json_int(&w, "samples", r->floor.samples);
        json_int(&w, "lost", r->floor.lost);
        json_end_object(&w);
        json_number(&w, "floor_ratio_p50", r->floor_ratio);
    }
    if (r->have_base) {
        json_begin_object(&w, "baseline");
        json_string(&w, "name", "mpi");
        json_begin_object(&w, "latency_us");
        json_number(&w, "p50", r->base.lat_p50_us);
        json_number(&w, "p99", r->base.lat_p99_us);
        json_number(&w, "p999", r->base.lat_p999_us);
        json_end_object(&w);
        json_bool(&w, "verified", r->base.verified);
        json_end_object(&w);
        json_number(&w, "speedup_p50", r->speedup);
    }
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, LAT_CMD);
}

int cmd_bench_latency(int argc, char **argv)
{
    if (bench_floor_is_role(argc, argv))
        return bench_floor_role_main(argc, argv);
    lat_opts_t o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    signal(SIGPIPE, SIG_IGN);
    if (o.single)
        return lat_run_single(&o) < 0 ? 1 : 0;
    lat_result_t res;
    launch_tbjob_t *j = NULL;
    if (o.testbed) {
        int rc = lat_testbed_up(&o, &j);
        if (rc < 0)
            return rc == -EOPNOTSUPP ? 3 : 1; /* 3: testbeds cannot be built here */
    }
    int rrc = lat_run(&o, j, &res);
    if (j)
        lat_testbed_down(j);
    if (rrc != 0)
        return 1;
    render_text(cli_text_stream(o.json_path), &o, &res);
    int json_rc = o.json_path ? render_json(&o, &res) : 0;
    return res.verified && json_rc == 0 ? 0 : 1;
}
