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
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/output.h"
#include "mpi/baseline_mpi.h"
#include "bench/benchdata.h"
#include "json/json.h"
#include "launch/launch.h"
#include "base/util.h"
#include "inagg.h"

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
            "  --timeout-ms MS      per-call progress timeout (default 30000)\n"
            "  --seed S             contents (default 1)\n"
            "  --json FILE|-        also write one JSON object (- for stdout; the table then\n"
            "                       goes to stderr): workers, elems, protocol, iters, verified,\n"
            "                       latency_us {p50, p99, p999, mean}, and with a baseline\n"
            "                       baseline {name, latency_us {p50, p99, p999}}, speedup_p50\n"
            "  -h, --help           this text\n"
            "\n"
            "example:\n"
            "  inagg bench latency --workers 4 --baseline mpi --json -\n",
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
        {"help", no_argument, 0, 'h'},            {0, 0, 0, 0}};
    uint64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': if (parse_u64("--workers", optarg, 1, INAGG_MAX_WORLD, &v)) return 2; o->workers = (uint32_t)v; break;
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
        default: usage(stderr); return 2;
        }
    }
    if (cli_no_extra_args("inagg bench latency", argc, argv, optind))
        return 2;
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
        lat_report_t rep;
        int got = cli_read_full(g.fd[r], &rep, sizeof(rep)) == 0;
        if (got && rep.iters == o->iters &&
            cli_read_full(g.fd[r], mine, o->iters * sizeof(double)) == 0) {
            for (uint32_t i = 0; i < o->iters; i++)
                if (mine[i] > slowest[i])
                    slowest[i] = mine[i];
        } else if (got && rep.verified) {
            verified = 0;
            fprintf(stderr, "inagg bench latency: rank %u sent a short report\n", r);
        }
        launch_ranks_wait_one(&g, r, WORKER_EXIT_MS);
        if (!got) {
            int st = g.status[r];
            fprintf(stderr, "inagg bench latency: worker %u died without a report (%s %d)\n", r,
                    WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            verified = 0;
            continue;
        }
        if (!rep.verified || rep.rc != INAGG_OK) {
            verified = 0;
            fprintf(stderr, "inagg bench latency: %s\n", rep.error);
        }
        total->packets_sent += rep.stats.packets_sent;
        total->retransmissions += rep.stats.retransmissions;
    }
    return verified;
}

/* Switch, workers, percentiles, the MPI baseline. 0, or -1 when nothing could be run. */
static int run(const lat_opts_t *o, lat_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->speedup = NAN;
    char addr[128];
    pid_t switch_pid = cli_switch_begin("inagg bench latency", o->switch_addr, 1, o->timeout_ms,
                                        addr, sizeof(addr));
    if (switch_pid < 0)
        return -1;
    fprintf(stderr, "inagg bench latency: %u workers, %u %s elements, %s, %u operations...\n",
            o->workers, o->elems, o->dtype_float ? "float32" : "int32", proto_name(o),
            o->iters);
    double *slowest = calloc(o->iters, sizeof(double));
    double *mine = calloc(o->iters, sizeof(double));
    res->verified = slowest && mine && run_workers(o, addr, slowest, mine, &res->total);
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

    if (strcmp(o->baseline, "mpi") == 0) {
        fprintf(stderr, "inagg bench latency: running the MPI baseline...\n");
        struct baseline_mpi_params bp = {.workers = o->workers, .elems = o->elems,
                                         .dtype_float = o->dtype_float, .iters = o->iters,
                                         .warmup = o->warmup, .latency_mode = 1,
                                         .seed = o->seed};
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
    fprintf(table, "  verified       %s (%u operations)\n", r->verified ? "yes" : "NO", r->n);
    fprintf(table, "  latency        p50 %.1f us  p99 %.1f us  p99.9 %.1f us  mean %.1f us\n",
            r->p50, r->p99, r->p999, r->mean);
    fprintf(table, "  packets        %llu sent, %llu retransmitted\n",
            (unsigned long long)r->total.packets_sent,
            (unsigned long long)r->total.retransmissions);
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
    json_begin_object(&w, "latency_us");
    json_number(&w, "p50", r->p50);
    json_number(&w, "p99", r->p99);
    json_number(&w, "p999", r->p999);
    json_number(&w, "mean", r->mean);
    json_end_object(&w);
    json_int(&w, "packets", (int64_t)r->total.packets_sent);
    json_int(&w, "retransmissions", (int64_t)r->total.retransmissions);
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

int cmd_bench_latency(int argc, char **argv)
{
    lat_opts_t o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    signal(SIGPIPE, SIG_IGN);
    lat_result_t res;
    if (run(&o, &res) != 0)
        return 1;
    render_text(o.json_path && strcmp(o.json_path, "-") == 0 ? stderr : stdout, &o, &res);
    int ok = res.verified;
    if (o.json_path && render_json(&o, &res) != 0)
        ok = 0;
    return ok ? 0 : 1;
}
