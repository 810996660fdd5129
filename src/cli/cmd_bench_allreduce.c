/*
 * cmd_bench_allreduce.c - `inagg bench allreduce`: the tensor aggregation benchmark, after
 * SwitchML's microbenchmark (section 6.1).
 *
 * The parent process forks an embedded switch (unless --switch names one) and N worker
 * processes, each a rank of one job. Every worker fills its tensor with known values
 * (bench/benchdata.h), runs warmups and K timed allreduces (each after a barrier), and
 * verifies every result: int32 exactly, float32 within the documented fixed-point bound
 * (worker/quant.h) or the float-addition bound in native mode. Workers report their timings
 * through a pipe; an iteration's tensor aggregation time (TAT) is that of the slowest rank.
 * With --baseline mpi, OpenMPI's MPI_Allreduce then runs the same tensor over TCP in the
 * same invocation and the ratio is printed.
 */
#include <errno.h>
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
#include "base/log.h"
#include "base/util.h"
#include "inagg.h"
#include "worker/quant.h"

#define MAX_ITERS 1000
#define WORKER_EXIT_MS 30000 /* a worker that sent its report exits within this */

typedef struct bench_opts {
    uint32_t workers, iters, warmup, packet_elems, window, threads, switch_threads;
    uint64_t elems, seed;
    int dtype_float;
    inagg_float_mode_t float_mode;
    inagg_protocol_t protocol;
    double loss;
    const char *faults, *switch_addr, *json_path, *baseline;
    uint32_t timeout_ms;
    char faults_buf[160]; /* the spec --loss stands for */
} bench_opts_t;

/* What a worker sends back to the parent. */
typedef struct worker_report {
    int32_t rank;
    int32_t rc;         /* inagg_result_t of the first failure, or 0 */
    int32_t verified;   /* every iteration's result checked out */
    uint32_t iters;
    double tat_ms[MAX_ITERS];
    double max_err;     /* float32: largest error seen, relative to the allowed bound */
    inagg_stats_t stats;
    char error[640];
} worker_report_t;

static void usage(FILE *out)
{
    const inagg_options_t def = INAGG_OPTIONS_INIT;
    fprintf(out,
            "usage: inagg bench allreduce [options]\n"
            "\n"
            "Measures allreduce through the aggregation switch: forks an embedded switch on\n"
            "loopback (or uses --switch) and N local worker processes, fills each tensor with\n"
            "known values, runs warmups and timed allreduces, and verifies every result.\n"
            "Prints tensor aggregation time (TAT: median, min, max over iterations, each the\n"
            "slowest rank's), aggregated tensor elements per second (ATE/s = elems / TAT),\n"
            "goodput, packets and retransmissions. --baseline mpi runs OpenMPI's\n"
            "MPI_Allreduce on the same data over TCP in the same invocation and prints\n"
            "speedup = MPI median TAT / inagg median TAT.\n"
            "\n"
            "options:\n"
            "  --workers N          worker processes (default 4)\n"
            "  --elems E            elements per tensor (default 4000000)\n"
            "  --dtype T            int32 or float32 (default float32)\n"
            "  --float-mode M       fixed (block fixed point, SwitchML) or native (float add\n"
            "                       in the switch) (default fixed)\n"
            "  --iters K            timed iterations (default 10, at most %d)\n"
            "  --warmup W           untimed iterations first (default 2)\n"
            "  --protocol P         switchml (default; throughput-centric) or p4sgd (latency-\n"
            "                       centric: one packet per slot, acknowledged; float32 native)\n"
            "  --packet-elems K     elements per packet: 64, 256 (hardware sizes) up to %u\n"
            "                       (default %u: one full UDP datagram, fastest on loopback;\n"
            "                       on a 1500-byte-MTU network 256..2048 avoids fragments)\n"
            "  --window S           slots (packets in flight per worker) (default %u)\n"
            "  --threads N          engine threads per worker (default 1)\n"
            "  --switch-threads N   dataplane threads of the embedded switch (default 1)\n"
            "  --loss P             drop each packet with probability P on the way up and on\n"
            "                       the way down (injected in the workers; seeded)\n"
            "  --faults SPEC        full fault spec for the workers, e.g.\n"
            "                       drop=0.01,dup=0.01,reorder=0.01,seed=3\n"
            "  --baseline B         mpi or none (default none)\n"
            "  --switch HOST:PORT   use a running switch instead of the embedded one\n"
            "  --timeout-ms MS      per-call progress timeout (default 30000)\n"
            "  --seed S             tensor contents (default 1)\n"
            "  --json FILE|-        also write one JSON object (- for stdout; the table then\n"
            "                       goes to stderr)\n"
            "  -h, --help           this text\n",
            MAX_ITERS, INAGG_MAX_PACKET_ELEMS, def.packet_elems, def.slots);
}

static int parse_uint(const char *flag, const char *v, uint64_t max, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || x > max || v[0] == '-') {
        fprintf(stderr, "inagg bench allreduce: %s needs an integer in 0..%llu, got '%s'\n",
                flag, (unsigned long long)max, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* ---- the worker process ---------------------------------------------------------------- */

typedef struct expected {
    int32_t *i32;
    double *f64;  /* exact sum */
    float *abs;   /* sum of magnitudes (native float bound) */
    int16_t *exp; /* per chunk: the exponent every rank will agree on (fixed point) */
} expected_t;

static int build_expected(const bench_opts_t *o, expected_t *ex)
{
    uint64_t n = o->elems;
    if (!o->dtype_float) {
        ex->i32 = malloc(n * sizeof(int32_t));
        if (!ex->i32)
            return -1;
        for (uint64_t i = 0; i < n; i++)
            ex->i32[i] = bench_expected_i32(o->seed, o->workers, i);
        return 0;
    }
    uint64_t nchunks = (n + o->packet_elems - 1) / o->packet_elems;
    ex->f64 = malloc(n * sizeof(double));
    ex->abs = malloc(n * sizeof(float));
    ex->exp = malloc(nchunks * sizeof(int16_t));
    float *tmp = malloc(o->packet_elems * sizeof(float));
    if (!ex->f64 || !ex->abs || !ex->exp || !tmp) {
        free(tmp);
        return -1;
    }
    for (uint64_t i = 0; i < n; i++) {
        double a;
        ex->f64[i] = bench_expected_f32(o->seed, o->workers, i, &a);
        ex->abs[i] = (float)a;
    }
    for (uint64_t c = 0; c < nchunks; c++) {
        uint64_t off = c * o->packet_elems;
        size_t len = (size_t)util_min_u64(o->packet_elems, n - off);
        int16_t m = QUANT_EXP_ZERO;
        for (uint32_t r = 0; r < o->workers; r++) {
            for (size_t k = 0; k < len; k++)
                tmp[k] = bench_value_f32(o->seed, r, off + k);
            m = quant_exp_max(m, quant_block_exponent(tmp, len));
        }
        ex->exp[c] = m;
    }
    free(tmp);
    return 0;
}

/* Check one result; returns the number of wrong elements (0: verified). */
static uint64_t verify(const bench_opts_t *o, const expected_t *ex, const void *recv,
                       double *worst)
{
    uint64_t bad = 0;
    if (!o->dtype_float) {
        const int32_t *got = recv;
        for (uint64_t i = 0; i < o->elems; i++)
            bad += got[i] != ex->i32[i];
        return bad;
    }
    const float *got = recv;
    for (uint64_t i = 0; i < o->elems; i++) {
        double exact = ex->f64[i], allowed;
        if (o->float_mode == INAGG_FLOAT_FIXED)
            allowed = quant_error_bound(ex->exp[i / o->packet_elems], o->workers, fabs(exact));
        else
            allowed = (double)o->workers * ldexp((double)ex->abs[i], -24) + 1e-30;
        double err = fabs((double)got[i] - exact);
        if (!(err <= allowed))
            bad++;
        else if (allowed > 0 && err / allowed > *worst)
            *worst = err / allowed;
    }
    return bad;
}

static void poison(const bench_opts_t *o, void *recv)
{
    memset(recv, 0xA5, o->elems * 4); /* neither a plausible int32 sum nor a finite float */
}

static int worker_main(const bench_opts_t *o, uint32_t rank, const char *switch_addr,
                       const char *job, int out_fd)
{
    worker_report_t *rep = calloc(1, sizeof(*rep));
    if (!rep)
        return 1;
    rep->rank = (int32_t)rank;
    size_t bytes = o->elems * 4;
    void *send = malloc(bytes ? bytes : 4), *recv = malloc(bytes ? bytes : 4);
    expected_t ex = {0};
    inagg_comm_t *comm = NULL;
    inagg_result_t rc = INAGG_OK;
    if (!send || !recv || build_expected(o, &ex) != 0) {
        rc = INAGG_ERR_NOMEM;
        snprintf(rep->error, sizeof(rep->error), "rank %u: out of memory for %llu elements",
                 rank, (unsigned long long)o->elems);
        goto done;
    }
    for (uint64_t i = 0; i < o->elems; i++) {
        if (o->dtype_float)
            ((float *)send)[i] = bench_value_f32(o->seed, rank, i);
        else
            ((int32_t *)send)[i] = bench_value_i32(o->seed, rank, i);
    }
    inagg_options_t opts = INAGG_OPTIONS_INIT;
    opts.slots = o->window;
    opts.packet_elems = o->packet_elems;
    opts.threads = o->threads;
    opts.float_mode = o->float_mode;
    opts.protocol = o->protocol;
    opts.timeout_ms = o->timeout_ms;
    opts.faults = o->faults;
    char detail[256];
    rc = inagg_comm_create(&comm, switch_addr, job, rank, o->workers, &opts, detail,
                           sizeof(detail));
    if (rc != INAGG_OK) {
        snprintf(rep->error, sizeof(rep->error), "rank %u: joining: %s: %s", rank,
                 inagg_strerror(rc), detail);
        goto done;
    }
    inagg_dtype_t dt = o->dtype_float ? INAGG_FLOAT32 : INAGG_INT32;
    rep->verified = 1;
    int show = rank == 0 && isatty(STDERR_FILENO);
    for (uint32_t it = 0; it < o->warmup + o->iters; it++) {
        poison(o, recv);
        rc = inagg_barrier(comm);
        if (rc == INAGG_OK) {
            uint64_t t0 = util_now_ns();
            rc = inagg_allreduce(comm, send, recv, o->elems, dt, INAGG_SUM);
            uint64_t t1 = util_now_ns();
            if (it >= o->warmup)
                rep->tat_ms[rep->iters++] = (double)(t1 - t0) / 1e6;
            if (show)
                fprintf(stderr, "\r  %s %u/%u: %.2f ms   ", it < o->warmup ? "warmup" : "iter",
                        it < o->warmup ? it + 1 : it - o->warmup + 1,
                        it < o->warmup ? o->warmup : o->iters, (double)(t1 - t0) / 1e6);
        }
        if (rc != INAGG_OK) {
            snprintf(rep->error, sizeof(rep->error), "rank %u, iteration %u: %s: %s", rank, it,
                     inagg_strerror(rc), inagg_last_error(comm));
            rep->verified = 0;
            break;
        }
        uint64_t bad = verify(o, &ex, recv, &rep->max_err);
        if (bad) {
            rep->verified = 0;
            snprintf(rep->error, sizeof(rep->error),
                     "rank %u, iteration %u: %llu of %llu elements wrong", rank, it,
                     (unsigned long long)bad, (unsigned long long)o->elems);
        }
    }
    if (show)
        fprintf(stderr, "\r%60s\r", "");
    inagg_get_stats(comm, &rep->stats);
done:
    rep->rc = rc;
    if (comm)
        inagg_comm_destroy(comm);
    ssize_t w = write(out_fd, rep, sizeof(*rep));
    free(rep);
    free(send);
    free(recv);
    free(ex.i32);
    free(ex.f64);
    free(ex.abs);
    free(ex.exp);
    return w == (ssize_t)sizeof(*rep) && rc == INAGG_OK ? 0 : 1;
}

/* ---- parse ------------------------------------------------------------------------------ */

/* The options with their defaults, then argv's. 0, 1 after --help, 2 after a usage error
 * (its message printed). */
static int parse_args(int argc, char **argv, bench_opts_t *o)
{
    const inagg_options_t def = INAGG_OPTIONS_INIT;
    *o = (bench_opts_t){.workers = 4, .iters = 10, .warmup = 2, .packet_elems = def.packet_elems,
                        .window = def.slots, .threads = 1, .switch_threads = 1,
                        .elems = 4000000, .seed = 1, .dtype_float = 1,
                        .float_mode = INAGG_FLOAT_FIXED, .baseline = "none",
                        .timeout_ms = 30000};
    static const struct option longopts[] = {
        {"workers", required_argument, 0, 'n'},      {"elems", required_argument, 0, 'e'},
        {"dtype", required_argument, 0, 'd'},        {"float-mode", required_argument, 0, 'F'},
        {"iters", required_argument, 0, 'k'},        {"warmup", required_argument, 0, 'W'},
        {"protocol", required_argument, 0, 'P'},     {"packet-elems", required_argument, 0, 'p'},
        {"window", required_argument, 0, 's'},       {"threads", required_argument, 0, 't'},
        {"switch-threads", required_argument, 0, 'T'}, {"loss", required_argument, 0, 'l'},
        {"faults", required_argument, 0, 'f'},       {"baseline", required_argument, 0, 'b'},
        {"switch", required_argument, 0, 'S'},       {"timeout-ms", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 'r'},         {"json", required_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    uint64_t v;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': if (parse_uint("--workers", optarg, INAGG_MAX_WORLD, &v) || !v) goto bad_n; o->workers = (uint32_t)v; break;
        case 'e': if (parse_uint("--elems", optarg, 1ull << 32, &v)) return 2; o->elems = v; break;
        case 'k': if (parse_uint("--iters", optarg, MAX_ITERS, &v) || !v) goto bad_k; o->iters = (uint32_t)v; break;
        case 'W': if (parse_uint("--warmup", optarg, 1000, &v)) return 2; o->warmup = (uint32_t)v; break;
        case 'p': if (parse_uint("--packet-elems", optarg, INAGG_MAX_PACKET_ELEMS, &v) || !v) return 2; o->packet_elems = (uint32_t)v; break;
        case 's': if (parse_uint("--window", optarg, 1u << 20, &v) || !v) return 2; o->window = (uint32_t)v; break;
        case 't': if (parse_uint("--threads", optarg, 64, &v) || !v) return 2; o->threads = (uint32_t)v; break;
        case 'T': if (parse_uint("--switch-threads", optarg, 64, &v) || !v) return 2; o->switch_threads = (uint32_t)v; break;
        case 'o': if (parse_uint("--timeout-ms", optarg, 3600000, &v) || !v) return 2; o->timeout_ms = (uint32_t)v; break;
        case 'r': if (parse_uint("--seed", optarg, UINT64_MAX, &v)) return 2; o->seed = v; break;
        case 'd':
            if (strcmp(optarg, "int32") == 0) o->dtype_float = 0;
            else if (strcmp(optarg, "float32") == 0) o->dtype_float = 1;
            else { fprintf(stderr, "inagg bench allreduce: --dtype must be int32 or float32\n"); return 2; }
            break;
        case 'F':
            if (strcmp(optarg, "fixed") == 0) o->float_mode = INAGG_FLOAT_FIXED;
            else if (strcmp(optarg, "native") == 0) o->float_mode = INAGG_FLOAT_NATIVE;
            else { fprintf(stderr, "inagg bench allreduce: --float-mode must be fixed or native\n"); return 2; }
            break;
        case 'P': if (cli_parse_protocol("inagg bench allreduce", optarg, &o->protocol)) return 2; break;
        case 'l': if (cli_parse_loss("inagg bench allreduce", optarg, &o->loss)) return 2; break;
        case 'f': o->faults = optarg; break;
        case 'b': if (cli_parse_baseline("inagg bench allreduce", optarg, "mpi", &o->baseline)) return 2; break;
        case 'S': o->switch_addr = optarg; break;
        case 'j': o->json_path = optarg; break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return 2;
        }
    }
    if (cli_no_extra_args("inagg bench allreduce", argc, argv, optind))
        return 2;
    if (o->elems == 0) {
        fprintf(stderr, "inagg bench allreduce: --elems must be at least 1\n");
        return 2;
    }
    if (o->threads > o->window) {
        fprintf(stderr, "inagg bench allreduce: --threads (%u) cannot exceed --window (%u)\n",
                o->threads, o->window);
        return 2;
    }
    if (o->protocol == INAGG_PROTO_P4SGD)
        o->float_mode = INAGG_FLOAT_NATIVE; /* p4sgd carries float32 natively */
    o->faults = cli_worker_faults(o->faults, o->loss, o->seed, o->faults_buf,
                                  sizeof(o->faults_buf));
    return 0;
bad_n:
    fprintf(stderr, "inagg bench allreduce: --workers must be 1..%u\n", INAGG_MAX_WORLD);
    return 2;
bad_k:
    fprintf(stderr, "inagg bench allreduce: --iters must be 1..%d\n", MAX_ITERS);
    return 2;
}

/* ---- run ---------------------------------------------------------------------------------- */

typedef struct bench_result {
    int verified;
    uint32_t iters;          /* timed iterations measured (0 when the run failed) */
    double tat_median, tat_min, tat_max, ate, goodput, worst;
    inagg_stats_t total;     /* summed over the workers */
    int have_base;
    struct baseline_mpi_result base;
    double speedup;
} bench_result_t;

typedef struct rank_ctx {
    const bench_opts_t *o;
    const char *addr, *job;
} rank_ctx_t;

static int rank_main(uint32_t rank, int fd, void *arg)
{
    const rank_ctx_t *c = arg;
    return worker_main(c->o, rank, c->addr, c->job, fd);
}

/* The workers against the switch at addr: their reports into reps. 0, or -1 when a worker
 * ended without one (said on stderr). */
static int run_workers(const bench_opts_t *o, const char *addr, worker_report_t *reps)
{
    char job[64], err[256];
    rank_ctx_t ctx = {o, addr, cli_job_name("bench", job, sizeof(job))};
    launch_ranks_t g;
    if (launch_ranks_start(&g, o->workers, rank_main, &ctx, LAUNCH_PIPE, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench allreduce: %s\n", err);
        return -1;
    }
    int ok = 1;
    for (uint32_t r = 0; r < o->workers; r++) {
        int got = cli_read_full(g.fd[r], &reps[r], sizeof(worker_report_t)) == 0;
        launch_ranks_wait_one(&g, r, WORKER_EXIT_MS);
        if (!got) {
            int st = g.status[r];
            fprintf(stderr, "inagg bench allreduce: worker %u died without a report (%s %d)\n",
                    r, WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            ok = 0;
        }
    }
    return ok ? 0 : -1;
}

/* Switch, workers, the slowest rank's TAT per iteration, the MPI baseline. 0, or -1 when the
 * run could not be measured at all. */
static int run(const bench_opts_t *o, bench_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->speedup = NAN;
    char addr[128];
    pid_t switch_pid = cli_switch_begin("inagg bench allreduce", o->switch_addr,
                                        o->switch_threads, o->timeout_ms, addr, sizeof(addr));
    if (switch_pid < 0)
        return -1;
    worker_report_t *reps = calloc(o->workers, sizeof(worker_report_t));
    int rc = reps ? run_workers(o, addr, reps) : -1;
    cli_switch_end(switch_pid);
    if (rc != 0) {
        free(reps);
        return -1;
    }
    res->verified = 1;
    for (uint32_t r = 0; r < o->workers; r++) {
        if (!reps[r].verified || reps[r].rc != INAGG_OK) {
            res->verified = 0;
            fprintf(stderr, "inagg bench allreduce: %s\n", reps[r].error);
        }
        if (reps[r].max_err > res->worst)
            res->worst = reps[r].max_err;
        res->total.packets_sent += reps[r].stats.packets_sent;
        res->total.retransmissions += reps[r].stats.retransmissions;
        res->total.duplicates_ignored += reps[r].stats.duplicates_ignored;
        res->total.bytes_sent += reps[r].stats.bytes_sent;
    }
    double tat[MAX_ITERS];
    res->iters = res->verified ? o->iters : 0;
    for (uint32_t i = 0; i < res->iters; i++) {
        tat[i] = 0;
        for (uint32_t r = 0; r < o->workers; r++)
            if (reps[r].tat_ms[i] > tat[i])
                tat[i] = reps[r].tat_ms[i];
    }
    free(reps);
    uint32_t n = res->iters;
    res->tat_median = n ? cli_median(tat, n) : NAN;
    res->tat_min = n ? tat[0] : NAN;
    res->tat_max = n ? tat[n - 1] : NAN;
    res->ate = (double)o->elems / (res->tat_median / 1e3);
    res->goodput = (double)o->elems * 4 * 8 / (res->tat_median / 1e3) / 1e9;

    if (strcmp(o->baseline, "mpi") == 0) {
        struct baseline_mpi_params bp = {.workers = o->workers, .elems = o->elems,
                                         .dtype_float = o->dtype_float, .iters = o->iters,
                                         .warmup = o->warmup, .seed = o->seed};
        char err[512];
        if (baseline_mpi_run(&bp, &res->base, err, sizeof(err)) != 0) {
            fprintf(stderr, "inagg bench allreduce: MPI baseline failed: %s\n", err);
            res->verified = 0;
        } else {
            res->have_base = 1;
            if (!res->base.verified) {
                fprintf(stderr, "inagg bench allreduce: MPI baseline's result did not verify\n");
                res->verified = 0;
            }
        }
    }
    if (res->have_base)
        res->speedup = res->base.tat_median_ms / res->tat_median;
    return 0;
}

/* ---- render --------------------------------------------------------------------------------- */

static void render_text(FILE *table, const bench_opts_t *o, const bench_result_t *r)
{
    fprintf(table, "inagg allreduce: %u workers, %llu %s elements%s, %u elems/packet, window "
            "%u, %s\n", o->workers, (unsigned long long)o->elems,
            o->dtype_float ? "float32" : "int32",
            o->dtype_float ? (o->float_mode == INAGG_FLOAT_FIXED ? " (fixed point)" : " (native)")
                           : "", o->packet_elems, o->window, o->faults ? o->faults : "no loss");
    fprintf(table, "  verified       %s\n", r->verified ? "yes" : "NO");
    if (o->dtype_float && r->verified)
        fprintf(table, "  worst error    %.3f of the allowed bound\n", r->worst);
    fprintf(table, "  TAT            median %.3f ms  min %.3f ms  max %.3f ms (%u iterations)\n",
            r->tat_median, r->tat_min, r->tat_max, r->iters);
    fprintf(table, "  ATE/s          %.4g elements/s\n", r->ate);
    fprintf(table, "  goodput        %.3f Gbit/s per worker\n", r->goodput);
    fprintf(table, "  packets        %llu sent, %llu retransmitted, %llu duplicate results\n",
            (unsigned long long)r->total.packets_sent,
            (unsigned long long)r->total.retransmissions,
            (unsigned long long)r->total.duplicates_ignored);
    if (r->have_base)
        fprintf(table, "  MPI_Allreduce  median %.3f ms  ATE/s %.4g  -> speedup %.2fx\n",
                r->base.tat_median_ms, r->base.ate_per_s, r->speedup);
}

/* The --json object. 0, or -1 when it could not be written. */
static int render_json(const bench_opts_t *o, const bench_result_t *r)
{
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_int(&w, "workers", o->workers);
    json_int(&w, "elems", (int64_t)o->elems);
    json_string(&w, "dtype", o->dtype_float ? "float32" : "int32");
    json_string(&w, "float_mode", o->float_mode == INAGG_FLOAT_FIXED ? "fixed" : "native");
    json_string(&w, "protocol", o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml");
    json_int(&w, "packet_elems", o->packet_elems);
    json_int(&w, "window", o->window);
    json_number(&w, "loss", o->loss);
    json_bool(&w, "verified", r->verified);
    json_begin_object(&w, "tat_ms");
    json_number(&w, "median", r->tat_median);
    json_number(&w, "min", r->tat_min);
    json_number(&w, "max", r->tat_max);
    json_end_object(&w);
    json_number(&w, "ate_per_s", r->ate);
    json_number(&w, "goodput_gbps", r->goodput);
    json_int(&w, "packets", (int64_t)r->total.packets_sent);
    json_int(&w, "retransmissions", (int64_t)r->total.retransmissions);
    json_int(&w, "duplicate_results", (int64_t)r->total.duplicates_ignored);
    if (r->have_base) {
        json_begin_object(&w, "baseline");
        json_string(&w, "name", "mpi");
        json_begin_object(&w, "tat_ms");
        json_number(&w, "median", r->base.tat_median_ms);
        json_end_object(&w);
        json_number(&w, "ate_per_s", r->base.ate_per_s);
        json_bool(&w, "verified", r->base.verified);
        json_end_object(&w);
        json_number(&w, "speedup", r->speedup);
    }
    json_end_object(&w);
    return cli_emit_json(&w, o->json_path, "inagg bench allreduce");
}

int cmd_bench_allreduce(int argc, char **argv)
{
    bench_opts_t o;
    int prc = parse_args(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    signal(SIGPIPE, SIG_IGN);
    bench_result_t res;
    if (run(&o, &res) != 0)
        return 1;
    render_text(o.json_path && strcmp(o.json_path, "-") == 0 ? stderr : stdout, &o, &res);
    int ok = res.verified;
    if (o.json_path && render_json(&o, &res) != 0)
        ok = 0;
    return ok ? 0 : 1;
}
