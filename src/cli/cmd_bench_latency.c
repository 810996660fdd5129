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
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>

#include "cli/bench_floor.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "mpi/baseline_mpi.h"
#include "bench/benchdata.h"
#include "json/json.h"
#include "launch/launch.h"
#include "base/util.h"
#include "inagg.h"
#include "base/pollmode.h"
#include "wire/wire.h"

#define LAT_MAX_ITERS 1000000u
#define LAT_MAX_ELEMS 1024u
#define WORKER_EXIT_MS 30000 /* a worker that sent its report exits within this */

typedef struct lat_opts {
    uint32_t workers, elems, iters, warmup, slots, timeout_ms;
    int dtype_float;
    inagg_protocol_t protocol;
    double loss;
    uint64_t seed;
    const char *faults, *switch_addr, *json_path, *baseline;
    char faults_buf[160]; /* the spec --loss stands for */
    uint32_t testbed;     /* hosts of a testbed to build, 0: loopback */
    const char *link_rate, *fabric, *link_delay; /* tools/testbed's (NULL: its defaults) */
    int single;           /* one rank of a job (--rank): its report into report_file */
    uint32_t rank;
    const char *job, *report_file;
    const char *switch_poll; /* --switch-poll: the testbed switch's --poll (NULL: default) */
    const char *poll;        /* --poll: the workers' wait (options.poll_us; NULL: default) */
    uint32_t poll_us;
} lat_opts_t;

/* What a worker sends back before its `iters` latencies (doubles, microseconds). */
typedef struct lat_report {
    int32_t rank;
    int32_t rc;
    int32_t verified;
    uint32_t iters;
    inagg_stats_t stats;
    char error[512];
} lat_report_t;

static void usage(FILE *out)
{
    fprintf(out,
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
            "  --poll MODE          how the workers wait for a result: sleep (default), busy\n"
            "                       or adaptive[:US] (options.poll_us, INAGG_POLL)\n"
            "  --switch-poll MODE   with --testbed --fabric bridge: the switch's --poll\n"
            "                       (sleep, busy, adaptive[:US]; `inagg switch --help`)\n"
            "                       --testbed also measures the medium's floor in the same run:\n"
            "                       a UDP ping-pong of inagg's packet size from each host to\n"
            "                       the switch namespace (floor_us, floor_ratio_p50)\n"
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

static const char *proto_name(const lat_opts_t *o)
{
    return o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml";
}

static int parse_u64(const char *flag, const char *v, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return cli_parse_u64("inagg bench latency", flag, v, lo, hi, out);
}

/* ---- the worker process ---------------------------------------------------------------- */

/* One allreduce through the communicator's protocol, completed before returning. */
static inagg_result_t one_allreduce(const lat_opts_t *o, inagg_comm_t *comm, const void *send,
                                    void *recv, uint32_t n)
{
    inagg_dtype_t dt = o->dtype_float ? INAGG_FLOAT32 : INAGG_INT32;
    if (o->protocol == INAGG_PROTO_SWITCHML)
        return inagg_allreduce(comm, send, recv, n, dt, INAGG_SUM);
    inagg_request_t *req;
    inagg_result_t rc = inagg_iallreduce_small(comm, send, recv, n, dt, INAGG_SUM, &req);
    return rc != INAGG_OK ? rc : inagg_wait(req);
}

static int verify(const lat_opts_t *o, uint64_t it, const void *recv)
{
    for (uint32_t k = 0; k < o->elems; k++) {
        uint64_t idx = it * o->elems + k;
        if (!o->dtype_float) {
            if (((const int32_t *)recv)[k] != bench_expected_i32(o->seed, o->workers, idx))
                return 0;
            continue;
        }
        double mag, exact = bench_expected_f32(o->seed, o->workers, idx, &mag);
        double got = ((const float *)recv)[k];
        /* float32 added in some order: within (W-1) ulps of the magnitude sum, plus rounding */
        double bound = ((double)o->workers * ldexp(1.0, -24)) * mag + 1e-30;
        if (!(fabs(got - exact) <= bound))
            return 0;
    }
    return 1;
}

static int worker_main(const lat_opts_t *o, uint32_t rank, const char *addr, const char *job,
                       int out_fd)
{
    lat_report_t rep = {.rank = (int32_t)rank};
    double *lat = calloc(o->iters, sizeof(double));
    uint32_t send[LAT_MAX_ELEMS], recv[LAT_MAX_ELEMS], token = 1, token_sum;
    inagg_comm_t *comm = NULL;
    inagg_result_t rc = INAGG_OK;
    if (!lat) {
        rc = INAGG_ERR_NOMEM;
        snprintf(rep.error, sizeof(rep.error), "rank %u: out of memory", rank);
        goto done;
    }
    inagg_options_t opts = INAGG_OPTIONS_INIT;
    opts.protocol = o->protocol;
    opts.slots = o->slots;
    opts.packet_elems = LAT_MAX_ELEMS;
    opts.float_mode = INAGG_FLOAT_NATIVE; /* same arithmetic for both protocols */
    opts.timeout_ms = o->timeout_ms;
    opts.faults = o->faults;
    opts.poll_us = o->poll_us;
    char detail[256];
    rc = inagg_comm_create(&comm, addr, job, rank, o->workers, &opts, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        snprintf(rep.error, sizeof(rep.error), "rank %u: joining: %s: %s", rank,
                 inagg_strerror(rc), detail);
        goto done;
    }
    lat_opts_t align = *o;
    align.dtype_float = 0; /* the aligning allreduce is one int32 */
    rep.verified = 1;
    for (uint64_t it = 0; it < (uint64_t)o->warmup + o->iters && rc == INAGG_OK; it++) {
        for (uint32_t k = 0; k < o->elems; k++) {
            uint64_t idx = it * o->elems + k;
            if (o->dtype_float) {
                float v = bench_value_f32(o->seed, rank, idx);
                memcpy(&send[k], &v, 4);
            } else {
                send[k] = (uint32_t)bench_value_i32(o->seed, rank, idx);
            }
        }
        memset(recv, 0xff, o->elems * 4u);
        rc = one_allreduce(&align, comm, &token, &token_sum, 1);
        if (rc != INAGG_OK)
            break;
        uint64_t t0 = util_now_ns();
        rc = one_allreduce(o, comm, send, recv, o->elems);
        uint64_t t1 = util_now_ns();
        if (rc != INAGG_OK)
            break;
        if (it >= o->warmup)
            lat[rep.iters++] = (double)(t1 - t0) / 1e3;
        if (!verify(o, it, recv) || token_sum != o->workers) {
            rep.verified = 0;
            snprintf(rep.error, sizeof(rep.error), "rank %u, operation %llu: wrong result",
                     rank, (unsigned long long)it);
            break;
        }
    }
    if (rc != INAGG_OK) {
        rep.verified = 0;
        snprintf(rep.error, sizeof(rep.error), "rank %u: %s: %s", rank, inagg_strerror(rc),
                 inagg_last_error(comm));
    }
    inagg_get_stats(comm, &rep.stats);
done:
    rep.rc = rc;
    if (comm)
        inagg_comm_destroy(comm);
    int ok = write(out_fd, &rep, sizeof(rep)) == (ssize_t)sizeof(rep);
    size_t bytes = rep.iters * sizeof(double), off = 0;
    while (ok && off < bytes) {
        ssize_t n = write(out_fd, (const char *)lat + off, bytes - off);
        if (n <= 0)
            ok = 0;
        else
            off += (size_t)n;
    }
    free(lat);
    return ok && rc == INAGG_OK && rep.verified ? 0 : 1;
}

/* ---- parse ------------------------------------------------------------------------------ */

/* The options with their defaults, then argv's. 0, 1 after --help, 2 after a usage error
 * (its message printed). */
static int parse_args(int argc, char **argv, lat_opts_t *o)
{
    *o = (lat_opts_t){.workers = 4, .elems = 8, .iters = 5000, .warmup = 200, .slots = 16,
                      .timeout_ms = 30000, .dtype_float = 1, .protocol = INAGG_PROTO_P4SGD,
                      .seed = 1, .baseline = "none"};
    static const struct option longopts[] = {
        {"workers", required_argument, 0, 'n'},   {"elems", required_argument, 0, 'e'},
        {"dtype", required_argument, 0, 'd'},     {"iters", required_argument, 0, 'k'},
        {"warmup", required_argument, 0, 'W'},    {"protocol", required_argument, 0, 'P'},
        {"slots", required_argument, 0, 's'},     {"loss", required_argument, 0, 'l'},
        {"faults", required_argument, 0, 'f'},    {"baseline", required_argument, 0, 'b'},
        {"switch", required_argument, 0, 'S'},    {"timeout-ms", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 'r'},      {"json", required_argument, 0, 'j'},
        {"testbed", required_argument, 0, 'B'},   {"link-rate", required_argument, 0, 'L'},
        {"fabric", required_argument, 0, 'Y'},    {"link-delay", required_argument, 0, 'Q'},
        {"rank", required_argument, 0, 'R'},      {"job", required_argument, 0, 'J'},
        {"report-file", required_argument, 0, 'F'},
        {"switch-poll", required_argument, 0, 'G'},
        {"poll", required_argument, 0, 'p'},
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    uint64_t v;
    int c, workers_given = 0, link_given = 0;
    optind = 1;
    opterr = 0; /* cli_bad_option says it, in the one wording */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': if (parse_u64("--workers", optarg, 1, INAGG_MAX_WORLD, &v)) return 2; o->workers = (uint32_t)v; workers_given = 1; break;
        case 'B': if (parse_u64("--testbed", optarg, 1, LAUNCH_TESTBED_MAX_HOSTS, &v)) return 2; o->testbed = (uint32_t)v; break;
        case 'R': if (parse_u64("--rank", optarg, 0, INAGG_MAX_WORLD - 1, &v)) return 2; o->rank = (uint32_t)v; o->single = 1; break;
        case 'L': o->link_rate = optarg; link_given = 1; break;
        case 'Q': o->link_delay = optarg; link_given = 1; break;
        case 'Y':
            if (strcmp(optarg, "bridge") != 0 && strcmp(optarg, "inagg") != 0) {
                fprintf(stderr, "inagg bench latency: --fabric is bridge or inagg, got '%s'\n", optarg);
                return 2;
            }
            o->fabric = optarg;
            link_given = 1;
            break;
        case 'J': o->job = optarg; break;
        case 'G': o->switch_poll = optarg; break;
        case 'p': {
            switch_poll_t m;
            uint32_t spin;
            char perr[160];
            if (switch_poll_parse(optarg, &m, &spin, perr, sizeof(perr)) != 0) {
                fprintf(stderr, "inagg bench latency: --poll: %s\n", perr);
                return 2;
            }
            o->poll = optarg;
            o->poll_us = switch_poll_worker_us(m, spin);
            break;
        }
        case 'F': o->report_file = optarg; break;
        case 'e': if (parse_u64("--elems", optarg, 1, LAT_MAX_ELEMS, &v)) return 2; o->elems = (uint32_t)v; break;
        case 'k': if (parse_u64("--iters", optarg, 1, LAT_MAX_ITERS, &v)) return 2; o->iters = (uint32_t)v; break;
        case 'W': if (parse_u64("--warmup", optarg, 0, LAT_MAX_ITERS, &v)) return 2; o->warmup = (uint32_t)v; break;
        case 's': if (parse_u64("--slots", optarg, 1, 4096, &v)) return 2; o->slots = (uint32_t)v; break;
        case 'o': if (parse_u64("--timeout-ms", optarg, 1, 3600000, &v)) return 2; o->timeout_ms = (uint32_t)v; break;
        case 'r': if (parse_u64("--seed", optarg, 0, UINT64_MAX, &v)) return 2; o->seed = v; break;
        case 'd':
            if (strcmp(optarg, "int32") == 0) o->dtype_float = 0;
            else if (strcmp(optarg, "float32") == 0) o->dtype_float = 1;
            else { fprintf(stderr, "inagg bench latency: --dtype must be int32 or float32\n"); return 2; }
            break;
        case 'P': if (cli_parse_protocol("inagg bench latency", optarg, &o->protocol)) return 2; break;
        case 'l': if (cli_parse_loss("inagg bench latency", optarg, &o->loss)) return 2; break;
        case 'f': o->faults = optarg; break;
        case 'b': if (cli_parse_baseline("inagg bench latency", optarg, "mpi", &o->baseline)) return 2; break;
        case 'S': o->switch_addr = optarg; break;
        case 'j': o->json_path = optarg; break;
        case 'h': usage(stdout); return 1;
        default: return cli_bad_option("inagg bench latency", c, argv);
        }
    }
    if (cli_no_extra_args("inagg bench latency", argc, argv, optind))
        return 2;
    const char *why = NULL;
    if (o->single) {
        if (!o->switch_addr || !o->job || !o->report_file || !workers_given)
            why = "--rank runs one rank of a job: it needs --switch HOST:PORT, --workers W "
                  "(the world), --job NAME and --report-file PATH";
        else if (o->rank >= o->workers)
            why = "--rank must be below --workers";
        else if (o->testbed || strcmp(o->baseline, "none") != 0)
            why = "--rank runs one rank: --testbed and --baseline do not apply";
    } else if (o->job || o->report_file) {
        why = "--job and --report-file go with --rank (one rank of a job)";
    }
    if (!why && o->testbed) {
        if (o->switch_addr)
            why = "--testbed starts its own switch in the switch namespace; --switch does not "
                  "apply";
        else if (workers_given)
            why = "--testbed runs one worker per host; --workers does not apply";
        o->workers = o->testbed;
    } else if (!why && o->switch_poll) {
        why = "--switch-poll sets the testbed's switch: it goes with --testbed N --fabric "
              "bridge (a switch of your own: `inagg switch --poll`)";
    } else if (!why && link_given) {
        why = "--link-rate, --fabric and --link-delay describe the testbed: they go with "
              "--testbed N";
    }
    if (why) {
        fprintf(stderr, "inagg bench latency: %s\n", why);
        return 2;
    }
    if (!why && o->switch_poll) {
        switch_poll_t m;
        uint32_t spin;
        char perr[160];
        if (!o->fabric || strcmp(o->fabric, "bridge") != 0)
            why = "--switch-poll needs --fabric bridge (with the inagg fabric, the fabric's "
                  "own thread aggregates)";
        else if (switch_poll_parse(o->switch_poll, &m, &spin, perr, sizeof(perr)) != 0) {
            fprintf(stderr, "inagg bench latency: --switch-poll: %s\n", perr);
            return 2;
        }
        if (why) {
            fprintf(stderr, "inagg bench latency: %s\n", why);
            return 2;
        }
    }
    o->faults = cli_worker_faults(o->faults, o->loss, o->seed, o->faults_buf,
                                  sizeof(o->faults_buf));
    return 0;
}

/* ---- run ---------------------------------------------------------------------------------- */

typedef struct lat_result {
    int verified;
    uint32_t n;               /* operations measured (0 when the run failed) */
    double p50, p99, p999, mean;
    inagg_stats_t total;      /* summed over the workers */
    int have_base;
    struct baseline_mpi_result base;
    double speedup;
    int have_floor;           /* with --testbed: the raw UDP ping-pong (cli/bench_floor.h) */
    bench_floor_result_t floor;
    double floor_ratio;       /* inagg p50 / floor p50 */
} lat_result_t;

typedef struct rank_ctx {
    const lat_opts_t *o;
    const char *addr, *job;
} rank_ctx_t;

static int rank_main(uint32_t rank, int fd, void *arg)
{
    const rank_ctx_t *c = arg;
    return worker_main(c->o, rank, c->addr, c->job, fd);
}

/* One rank's report from fd (its pipe, or its report file): its latencies folded into
 * slowest[]. 1 when it came and verified, else 0 after a message (said_why: set when the
 * report itself explained the failure). *got: whether a report header came at all. */
static int take_report(const lat_opts_t *o, int fd, uint32_t r, double *slowest, double *mine,
                       inagg_stats_t *total, int *got)
{
    lat_report_t rep;
    *got = fd >= 0 && cli_read_full(fd, &rep, sizeof(rep)) == 0;
    if (!*got)
        return 0;
    int ok = 1;
    if (rep.iters == o->iters && cli_read_full(fd, mine, o->iters * sizeof(double)) == 0) {
        for (uint32_t i = 0; i < o->iters; i++)
            if (mine[i] > slowest[i])
                slowest[i] = mine[i];
    } else if (rep.verified) {
        ok = 0;
        fprintf(stderr, "inagg bench latency: rank %u sent a short report\n", r);
    }
    if (!rep.verified || rep.rc != INAGG_OK) {
        ok = 0;
        rep.error[sizeof(rep.error) - 1] = '\0';
        fprintf(stderr, "inagg bench latency: %s\n", rep.error);
    }
    total->packets_sent += rep.stats.packets_sent;
    total->retransmissions += rep.stats.retransmissions;
    return ok;
}

/* The workers against the switch at addr; the slowest rank's latency of each operation into
 * slowest[iters] (zeroed by the caller). 1 if every report came and verified, else 0. */
static int run_workers(const lat_opts_t *o, const char *addr, double *slowest, double *mine,
                       inagg_stats_t *total)
{
    char job[64], err[256];
    rank_ctx_t ctx = {o, addr, cli_job_name("latency", job, sizeof(job))};
    launch_ranks_t g;
    if (launch_ranks_start(&g, o->workers, rank_main, &ctx, LAUNCH_PIPE, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", err);
        return 0;
    }
    int verified = 1;
    for (uint32_t r = 0; r < o->workers; r++) {
        int got;
        if (!take_report(o, g.fd[r], r, slowest, mine, total, &got))
            verified = 0;
        launch_ranks_wait_one(&g, r, WORKER_EXIT_MS);
        if (!got) {
            int st = g.status[r];
            fprintf(stderr, "inagg bench latency: worker %u died without a report (%s %d)\n", r,
                    WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
    }
    return verified;
}

/* ---- on a testbed ---------------------------------------------------------------------- */

/* The numbers on a testbed rank's command line, as text. */
typedef struct rank_args {
    char host[16], rank[16], world[16], elems[16], iters[16], warmup[16], slots[16];
    char seed[32], timeout[16];
} rank_args_t;

/* argv of rank r in host h(r+1): this command in its one-rank mode; its numbers kept in t. */
static int testbed_rank_argv(const lat_opts_t *o, const launch_tbjob_t *j, const char *self,
                             const char *job, const char *report, uint32_t r, rank_args_t *t,
                             char **argv, size_t cap)
{
    snprintf(t->host, sizeof(t->host), "h%u", r + 1);
    snprintf(t->rank, sizeof(t->rank), "%u", r);
    snprintf(t->world, sizeof(t->world), "%u", o->workers);
    snprintf(t->elems, sizeof(t->elems), "%u", o->elems);
    snprintf(t->iters, sizeof(t->iters), "%u", o->iters);
    snprintf(t->warmup, sizeof(t->warmup), "%u", o->warmup);
    snprintf(t->slots, sizeof(t->slots), "%u", o->slots);
    snprintf(t->seed, sizeof(t->seed), "%llu", (unsigned long long)o->seed);
    snprintf(t->timeout, sizeof(t->timeout), "%u", o->timeout_ms);
    char *cmd[] = {(char *)self, "bench", "latency", "--switch", (char *)j->sw_addr,
                   "--job", (char *)job, "--rank", t->rank, "--workers", t->world,
                   "--elems", t->elems, "--iters", t->iters, "--warmup", t->warmup,
                   "--dtype", o->dtype_float ? "float32" : "int32", "--slots", t->slots,
                   "--seed", t->seed, "--timeout-ms", t->timeout,
                   "--protocol", (char *)proto_name(o), "--report-file", (char *)report,
                   "--poll", o->poll ? (char *)o->poll : "sleep",
                   o->faults ? "--faults" : NULL, (char *)o->faults, NULL};
    return launch_testbed_argv(&j->tb, t->host, cmd, argv, cap) ? 0 : -1;
}

/* The workers, one per host of the testbed, against j's switch; as run_workers. */
static int run_workers_testbed(const lat_opts_t *o, const launch_tbjob_t *j, double *slowest,
                               double *mine, inagg_stats_t *total)
{
    char self[PATH_MAX], dir[] = "/tmp/inagg-latency-XXXXXX", job[64], err[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    if (!mkdtemp(dir)) {
        fprintf(stderr, "inagg bench latency: a directory for the reports: %s\n",
                strerror(errno));
        return 0;
    }
    cli_job_name("latency", job, sizeof(job));
    launch_group_t *g = malloc(sizeof(*g));
    rank_args_t *store = calloc(o->workers, sizeof(*store));
    char (*reports)[PATH_MAX] = calloc(o->workers, PATH_MAX);
    int verified = 0, started = 0;
    if (!g || !store || !reports || launch_job_secret(err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", g && store && reports ? err : "out of memory");
        goto out;
    }
    launch_group_init(g);
    started = 1;
    for (uint32_t r = 0; r < o->workers; r++) {
        char *argv[64];
        snprintf(reports[r], PATH_MAX, "%s/rank%u", dir, r);
        if (testbed_rank_argv(o, j, self, job, reports[r], r, &store[r], argv, 64) != 0 ||
            launch_group_add(g, argv, NULL, err, sizeof(err)) < 0) {
            fprintf(stderr, "inagg bench latency: rank %u could not start: %s\n", r, err);
            goto out;
        }
    }
    /* generous: joining, then two allreduces per operation at most a few ms each */
    unsigned limit_ms = 120000u + (o->warmup + o->iters) * 10u;
    int wrc = launch_group_wait(g, limit_ms, NULL, NULL, 0);
    verified = 1;
    for (uint32_t r = 0; r < o->workers; r++) {
        int fd = open(reports[r], O_RDONLY | O_CLOEXEC), got;
        if (!take_report(o, fd, r, slowest, mine, total, &got))
            verified = 0;
        if (fd >= 0)
            close(fd);
        unlink(reports[r]);
        if (!got) {
            char st[96], why[700] = "";
            launch_append_tail(why, sizeof(why), g->p[r].tail_len ? g->p[r].tail : "(no stderr)");
            fprintf(stderr, "inagg bench latency: rank %u (h%u) %s without a report: %s\n", r,
                    r + 1, wrc == -ETIMEDOUT ? "was killed after the time limit"
                    : launch_status_text(g->p[r].status, st, sizeof(st)), why);
        }
    }
out:
    if (g && started)
        launch_group_end(g);
    rmdir(dir);
    free(reports);
    free(store);
    free(g);
    return verified;
}

/* The medium's floor on testbed j: a UDP ping-pong from every host to the switch namespace
 * with datagrams of inagg's packet size (header, MAC and the elements). 0, or -1 after a
 * message: a testbed run without its floor fails. */
static int measure_floor(const lat_opts_t *o, const launch_tbjob_t *j, lat_result_t *res)
{
    char self[PATH_MAX], err[1024];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    uint32_t size = WIRE_HEADER_MAX + o->elems * 4u;
    fprintf(stderr, "inagg bench latency: measuring the floor (UDP ping-pong of %u bytes from "
            "each host to the switch namespace)...\n", size);
    if (bench_floor_measure(j, self, size, o->iters, o->warmup, &res->floor, err,
                            sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: the floor could not be measured: %s\n", err);
        return -1;
    }
    res->have_floor = 1;
    res->floor_ratio = res->p50 / res->floor.p50_us;
    return 0;
}

/* Switch, workers, percentiles, the MPI baseline (placed by mpi: NULL on loopback). With j
 * the testbed is up and j's switch runs. 0, or -1 when nothing could be run. */
static int run(const lat_opts_t *o, launch_tbjob_t *j, lat_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->speedup = NAN;
    char addr[128];
    pid_t switch_pid = 0;
    if (!j) {
        switch_pid = cli_switch_begin("inagg bench latency", o->switch_addr, 1, o->timeout_ms,
                                      addr, sizeof(addr));
        if (switch_pid < 0)
            return -1;
    }
    fprintf(stderr, "inagg bench latency: %u workers, %u %s elements, %s, %u operations%s%s...\n",
            o->workers, o->elems, o->dtype_float ? "float32" : "int32", proto_name(o),
            o->iters, j ? ", switch at " : "", j ? j->sw_addr : "");
    double *slowest = calloc(o->iters, sizeof(double));
    double *mine = calloc(o->iters, sizeof(double));
    res->verified = slowest && mine &&
                    (j ? run_workers_testbed(o, j, slowest, mine, &res->total)
                       : run_workers(o, addr, slowest, mine, &res->total));
    free(mine);
    cli_switch_end(switch_pid);
    uint32_t n = res->verified ? o->iters : 0;
    if (n) {
        for (uint32_t i = 0; i < n; i++)
            res->mean += slowest[i];
        res->mean /= n;
        cli_sort(slowest, n);
    }
    res->n = n;
    res->p50 = cli_percentile(slowest, n, 0.50);
    res->p99 = cli_percentile(slowest, n, 0.99);
    res->p999 = cli_percentile(slowest, n, 0.999);
    free(slowest);
    if (j && res->verified && measure_floor(o, j, res) != 0)
        res->verified = 0;

    if (strcmp(o->baseline, "mpi") == 0) {
        fprintf(stderr, "inagg bench latency: running the MPI baseline...\n");
        struct baseline_mpi_params bp = {.workers = o->workers, .elems = o->elems,
                                         .dtype_float = o->dtype_float, .iters = o->iters,
                                         .warmup = o->warmup, .latency_mode = 1,
                                         .seed = o->seed, .placement = j ? &j->mpi : NULL};
        char err[512];
        if (baseline_mpi_run(&bp, &res->base, err, sizeof(err)) != 0) {
            fprintf(stderr, "inagg bench latency: MPI baseline failed: %s\n", err);
            res->verified = 0;
        } else if (!res->base.verified) {
            fprintf(stderr, "inagg bench latency: MPI baseline's results did not verify\n");
            res->verified = 0;
        } else {
            res->have_base = 1;
        }
    }
    if (res->have_base)
        res->speedup = res->base.lat_p50_us / res->p50;
    return 0;
}

/* ---- render --------------------------------------------------------------------------------- */

static void render_text(FILE *table, const lat_opts_t *o, const lat_result_t *r)
{
    fprintf(table, "inagg allreduce latency: %u workers, %u %s elements, protocol %s, %s\n",
            o->workers, o->elems, o->dtype_float ? "float32" : "int32", proto_name(o),
            o->faults ? o->faults : "no loss");
    if (o->testbed)
        fprintf(table, "  testbed        %u hosts, fabric %s, link delay %s, links %s\n",
                o->testbed, o->fabric ? o->fabric : "(tools/testbed's default)",
                o->link_delay ? o->link_delay : "none", o->link_rate ? o->link_rate : "not "
                "rate-limited");
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
        fprintf(table, "  floor (UDP)    p50 %.1f us  p99 %.1f us  (%u round trips, %u lost) "
                "-> inagg p50 / floor p50 %.2fx\n", r->floor.p50_us, r->floor.p99_us,
                r->floor.samples, r->floor.lost, r->floor_ratio);
    if (r->have_base)
        fprintf(table, "  MPI_Allreduce  p50 %.1f us  p99 %.1f us  p99.9 %.1f us  -> speedup "
                "(p50) %.2fx\n", r->base.lat_p50_us, r->base.lat_p99_us, r->base.lat_p999_us,
                r->speedup);
}

/* The --json object. 0, or -1 when it could not be written. */
static int render_json(const lat_opts_t *o, const lat_result_t *r)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_int(&w, "workers", o->workers);
    json_int(&w, "elems", o->elems);
    json_string(&w, "dtype", o->dtype_float ? "float32" : "int32");
    json_string(&w, "protocol", proto_name(o));
    json_int(&w, "iters", o->iters);
    json_number(&w, "loss", o->loss);
    json_bool(&w, "verified", r->verified);
    if (o->testbed) {
        json_begin_object(&w, "testbed");
        json_int(&w, "hosts", o->testbed);
        json_string(&w, "fabric", o->fabric ? o->fabric : "default");
        json_string(&w, "link_delay", o->link_delay ? o->link_delay : "0");
        json_string(&w, "link_rate", o->link_rate ? o->link_rate : "none");
        json_string(&w, "switch_poll", o->switch_poll ? o->switch_poll : "default");
        json_string(&w, "worker_poll", o->poll ? o->poll : "default");
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
    return cli_emit_json(&w, o->json_path, "inagg bench latency");
}

/* --rank: one worker against --switch, its report into --report-file. 0 or 1. */
static int run_single(const lat_opts_t *o)
{
    int fd = open(o->report_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "inagg bench latency: %s: %s\n", o->report_file, strerror(errno));
        return 1;
    }
    int rc = worker_main(o, o->rank, o->switch_addr, o->job, fd);
    if (close(fd) != 0)
        rc = 1;
    return rc;
}

/* Build the testbed and start its switch into *out (freed by the caller after
 * launch_tbjob_down). 0; 3 when testbeds cannot be built here; 1 on another failure. */
static int testbed_up(const lat_opts_t *o, launch_tbjob_t **out)
{
    launch_tbjob_t *j = calloc(1, sizeof(*j));
    char err[1024], self[PATH_MAX];
    if (!j) {
        fprintf(stderr, "inagg bench latency: out of memory\n");
        return 1;
    }
    j->tb.fabric = o->fabric;
    j->tb.link_delay = o->link_delay;
    j->switch_poll = o->switch_poll;
    fprintf(stderr, "inagg bench latency: building a testbed of %u hosts (links %s%s%s%s%s)\n",
            o->testbed, o->link_rate ? o->link_rate : "not rate-limited",
            o->fabric ? ", fabric " : "", o->fabric ? o->fabric : "",
            o->link_delay ? ", link delay " : "", o->link_delay ? o->link_delay : "");
    int rc = launch_tbjob_up(j, o->testbed, o->link_rate ? o->link_rate : "none", 1500, 0, err,
                             sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", err);
        free(j);
        return rc == -EOPNOTSUPP ? 3 : 1;
    }
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    if (launch_tbjob_switch(j, self, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", err);
        launch_tbjob_down(j);
        free(j);
        return 1;
    }
    *out = j;
    return 0;
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
        return run_single(&o);
    lat_result_t res;
    launch_tbjob_t *j = NULL;
    if (o.testbed) {
        int rc = testbed_up(&o, &j);
        if (rc)
            return rc;
    }
    int rrc = run(&o, j, &res);
    if (j) {
        launch_tbjob_down(j);
        free(j);
    }
    if (rrc != 0)
        return 1;
    render_text(o.json_path && strcmp(o.json_path, "-") == 0 ? stderr : stdout, &o, &res);
    int ok = res.verified;
    if (o.json_path && render_json(&o, &res) != 0)
        ok = 0;
    return ok ? 0 : 1;
}
