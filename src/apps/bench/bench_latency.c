/*
 * bench_latency.c - the run of `inagg bench latency` (see bench_latency.h): the worker
 * process, the local ranks and the testbed's, the MPI baseline, the testbed itself.
 *
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
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/bench/bench_latency.h"
#include "apps/bench/benchdata.h"
#include "apps/bench/harness.h"
#include "apps/bench/rank_report.h"
#include "apps/bench/ranks.h"
#include "apps/bench/samples.h"
#include "apps/bench/subrun.h"
#include "apps/launch/launch.h"
#include "lib/base/pollmode.h"
#include "lib/base/util.h"
#include "lib/wire/wire.h"

#define WORKER_EXIT_MS 30000 /* a worker that sent its report exits within this */

const char *lat_proto_name(const lat_opts_t *o)
{
    return o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml";
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
    bench_rank_report_t *rep = bench_rank_reports_new(1, o->iters);
    uint32_t send[LAT_MAX_ELEMS], recv[LAT_MAX_ELEMS], token = 1, token_sum;
    inagg_comm_t *comm = NULL;
    inagg_result_t rc = INAGG_OK;
    if (!rep)
        return 1; /* no report: the parent says the rank ended without one */
    rep->rank = (int32_t)rank;
    /* one operation is one packet of --elems: the smallest that carries it, which a testbed's
     * MTU 1500 takes whole (the library refuses a size the path would fragment) */
    inagg_options_t opts =
        bench_comm_options(o->protocol, o->slots, o->elems, o->timeout_ms, o->faults);
    opts.float_mode = INAGG_FLOAT_NATIVE; /* same arithmetic for both protocols */
    opts.poll_us = o->poll_us;
    char detail[256];
    rc = inagg_comm_create(&comm, addr, job, rank, o->workers, &opts, detail, sizeof(detail));
    if (rc != INAGG_OK) {
        snprintf(rep->error, sizeof(rep->error), "rank %u: joining: %s: %s", rank,
                 inagg_strerror(rc), detail);
        goto done;
    }
    lat_opts_t align = *o;
    align.dtype_float = 0; /* the aligning allreduce is one int32 */
    rep->verified = 1;
    rep->t_start = util_now_ns() * 1e-9;
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
        if (it >= o->warmup && rep->iters < rep->cap)
            rep->times_s[rep->iters++] = (double)(t1 - t0) / 1e9;
        if (!verify(o, it, recv) || token_sum != o->workers) {
            rep->verified = 0;
            snprintf(rep->error, sizeof(rep->error), "rank %u, operation %llu: wrong result", rank,
                     (unsigned long long)it);
            break;
        }
    }
    if (rc != INAGG_OK) {
        rep->verified = 0;
        snprintf(rep->error, sizeof(rep->error), "rank %u: %s: %s", rank, inagg_strerror(rc),
                 inagg_last_error(comm));
    }
    inagg_get_stats(comm, &rep->stats);
    rep->t_end = util_now_ns() * 1e-9;
done:
    rep->rc = rc;
    if (comm)
        inagg_comm_destroy(comm);
    bench_rank_meta_t meta = {.name = "inagg",
                              .world = o->workers,
                              .elems = o->elems,
                              .dtype = o->dtype_float ? "float32" : "int32",
                              .packet_elems = o->elems,
                              .window = o->slots};
    int ok = bench_rank_report_write(out_fd, rep, &meta) == 0 && rc == INAGG_OK && rep->verified;
    free(rep);
    return ok ? 0 : 1;
}

/* ---- run ---------------------------------------------------------------------------------- */

typedef struct rank_ctx {
    const lat_opts_t *o;
    const char *addr, *job;
} rank_ctx_t;

static int rank_main(uint32_t rank, int fd, void *arg)
{
    const rank_ctx_t *c = arg;
    return worker_main(c->o, rank, c->addr, c->job, fd);
}

/* Rank r's decoded report: its latencies (microseconds) folded into slowest[]. 1 when it
 * verified with every operation, else 0 after a message (the report's own error when it has
 * one). */
static int take_report(const lat_opts_t *o, const bench_rank_report_t *rep, uint32_t r,
                       double *slowest, inagg_stats_t *total)
{
    int ok = 1;
    if (rep->iters == o->iters) {
        for (uint32_t i = 0; i < o->iters; i++)
            if (rep->times_s[i] * 1e6 > slowest[i])
                slowest[i] = rep->times_s[i] * 1e6;
    } else if (rep->verified) {
        ok = 0;
        fprintf(stderr, "inagg bench latency: rank %u sent a short report\n", r);
    }
    if (!rep->verified || rep->rc != INAGG_OK) {
        ok = 0;
        fprintf(stderr, "inagg bench latency: %s\n", rep->error);
    }
    total->packets_sent += rep->stats.packets_sent;
    total->retransmissions += rep->stats.retransmissions;
    return ok;
}

/* How long the workers may take: joining, then two allreduces per operation at most a few
 * ms each (generous). */
static unsigned workers_limit_ms(const lat_opts_t *o)
{
    return 120000u + (o->warmup + o->iters) * 10u;
}

/* The longest report line of a rank: its samples and the rest. */
static size_t line_max(const lat_opts_t *o) { return (size_t)o->iters * 32u + 16384u; }

/* The workers against the switch at addr; the slowest rank's latency of each operation into
 * slowest[iters] (zeroed by the caller). 1 if every report came and verified, else 0. */
static int run_workers(const lat_opts_t *o, const char *addr, double *slowest, inagg_stats_t *total)
{
    char job[64], err[256];
    rank_ctx_t ctx = {o, addr, bench_job_name("latency", job, sizeof(job))};
    launch_ranks_t g;
    bench_rank_report_t *reps = bench_rank_reports_new(o->workers, o->iters);
    int *got = calloc(o->workers, sizeof(int));
    if (!reps || !got) {
        fprintf(stderr, "inagg bench latency: out of memory for the reports\n");
        free(reps);
        free(got);
        return 0;
    }
    if (launch_ranks_start(&g, o->workers, rank_main, &ctx, LAUNCH_PIPE, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", err);
        free(reps);
        free(got);
        return 0;
    }
    uint64_t deadline = util_now_ns() + (uint64_t)workers_limit_ms(o) * 1000000ull;
    int open_fds = bench_ranks_collect_reports(&g, o->workers, reps, line_max(o), got, deadline,
                                               1000, NULL, NULL);
    int verified = open_fds == 0;
    for (uint32_t r = 0; r < o->workers; r++) {
        if (got[r] && !take_report(o, &reps[r], r, slowest, total))
            verified = 0;
        launch_ranks_wait_one(&g, r, open_fds == 0 ? WORKER_EXIT_MS : 0);
        if (!got[r]) {
            verified = 0;
            int st = g.status[r];
            fprintf(stderr, "inagg bench latency: worker %u died without a report (%s %d)\n", r,
                    WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        }
    }
    free(reps);
    free(got);
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
    char *cmd[] = {(char *)self,
                   "bench",
                   "latency",
                   "--switch",
                   (char *)j->sw_addr,
                   "--job",
                   (char *)job,
                   "--rank",
                   t->rank,
                   "--workers",
                   t->world,
                   "--elems",
                   t->elems,
                   "--iters",
                   t->iters,
                   "--warmup",
                   t->warmup,
                   "--dtype",
                   o->dtype_float ? "float32" : "int32",
                   "--slots",
                   t->slots,
                   "--seed",
                   t->seed,
                   "--timeout-ms",
                   t->timeout,
                   "--protocol",
                   (char *)lat_proto_name(o),
                   "--report-file",
                   (char *)report,
                   "--poll",
                   o->poll ? (char *)o->poll : "adaptive", /* the library's default */
                   NULL,
                   NULL,
                   NULL,
                   NULL,
                   NULL};
    size_t n = 0;
    while (cmd[n])
        n++;
    if (o->pin_hosts) { /* host k's rank on the (k-1)-th CPU: else the kernel places it */
        cmd[n++] = "--rank-cpu";
        cmd[n++] = t->rank;
    }
    if (o->faults) {
        cmd[n++] = "--faults";
        cmd[n++] = (char *)o->faults;
    }
    return launch_testbed_argv(&j->tb, t->host, cmd, argv, cap) ? 0 : -E2BIG;
}

/* The workers, one per host of the testbed, against j's switch; as run_workers. */
static int run_workers_testbed(const lat_opts_t *o, const launch_tbjob_t *j, double *slowest,
                               inagg_stats_t *total)
{
    char self[PATH_MAX], dir[] = "/tmp/inagg-latency-XXXXXX", job[64], err[512];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    if (!mkdtemp(dir)) {
        fprintf(stderr, "inagg bench latency: a directory for the reports: %s\n", strerror(errno));
        return 0;
    }
    bench_job_name("latency", job, sizeof(job));
    launch_group_t *g = malloc(sizeof(*g));
    rank_args_t *store = calloc(o->workers, sizeof(*store));
    char(*reports)[PATH_MAX] = calloc(o->workers, PATH_MAX);
    bench_rank_report_t *rep = bench_rank_reports_new(1, o->iters);
    int verified = 0, started = 0;
    if (!g || !store || !reports || !rep || launch_job_secret(err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: %s\n",
                g && store && reports && rep ? err : "out of memory");
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
    int wrc = launch_group_wait(g, workers_limit_ms(o), NULL, NULL, 0);
    verified = 1;
    for (uint32_t r = 0; r < o->workers; r++) {
        char *text = NULL;
        int got =
            bench_read_file(reports[r], &text) == 0 && bench_rank_report_decode(text, rep) == 0;
        free(text);
        unlink(reports[r]);
        if (!got || !take_report(o, rep, r, slowest, total))
            verified = 0;
        if (!got) {
            char st[96], why[700] = "";
            launch_append_tail(why, sizeof(why), g->p[r].tail_len ? g->p[r].tail : "(no stderr)");
            fprintf(stderr, "inagg bench latency: rank %u (h%u) %s without a report: %s\n", r,
                    r + 1,
                    wrc == -ETIMEDOUT ? "was killed after the time limit"
                                      : launch_status_text(g->p[r].status, st, sizeof(st)),
                    why);
        }
    }
out:
    if (g && started)
        launch_group_end(g);
    rmdir(dir);
    free(rep);
    free(reports);
    free(store);
    free(g);
    return verified;
}

/* The medium's floor on testbed j: a UDP ping-pong from every host to the switch namespace
 * with datagrams of inagg's packet size (header, MAC and the elements). 0, or -EIO after a
 * message: a testbed run without its floor fails. */
static int measure_floor(const lat_opts_t *o, const launch_tbjob_t *j, lat_result_t *res)
{
    char self[PATH_MAX], err[1024];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    uint32_t size = WIRE_HEADER_MAX + o->elems * 4u;
    fprintf(stderr,
            "inagg bench latency: measuring the floor (UDP ping-pong of %u bytes from "
            "each host to the switch namespace)...\n",
            size);
    /* the floor's ends wait as the switch (echo) and the workers (clients) do in this run */
    bench_floor_spec_t fs = {size, o->iters, o->warmup, o->switch_poll, o->poll, o->pin_hosts};
    if (bench_floor_measure(j, self, &fs, &res->floor, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: the floor could not be measured: %s\n", err);
        return -EIO;
    }
    res->have_floor = 1;
    res->floor_ratio = res->p50 / res->floor.p50_us;
    return 0;
}

/* Switch, workers, percentiles, the MPI baseline (placed by mpi: NULL on loopback). With j
 * the testbed is up and j's switch runs. 0, or -EIO when nothing could be run. */
int lat_run(const lat_opts_t *o, launch_tbjob_t *j, lat_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->speedup = NAN;
    char addr[128];
    pid_t switch_pid = 0;
    if (!j) {
        switch_pid = bench_switch_begin("inagg bench latency", o->switch_addr, 1, o->timeout_ms,
                                        addr, sizeof(addr));
        if (switch_pid < 0)
            return -EIO;
    }
    fprintf(stderr, "inagg bench latency: %u workers, %u %s elements, %s, %u operations%s%s...\n",
            o->workers, o->elems, o->dtype_float ? "float32" : "int32", lat_proto_name(o), o->iters,
            j ? ", switch at " : "", j ? j->sw_addr : "");
    double *slowest = calloc(o->iters, sizeof(double));
    res->verified = slowest && (j ? run_workers_testbed(o, j, slowest, &res->total)
                                  : run_workers(o, addr, slowest, &res->total));
    bench_switch_end(switch_pid);
    uint32_t n = res->verified ? o->iters : 0;
    if (n) {
        for (uint32_t i = 0; i < n; i++)
            res->mean += slowest[i];
        res->mean /= n;
        bench_sort(slowest, n);
    }
    res->n = n;
    res->p50 = bench_percentile(slowest, n, 0.50);
    res->p99 = bench_percentile(slowest, n, 0.99);
    res->p999 = bench_percentile(slowest, n, 0.999);
    free(slowest);
    if (j && res->verified && measure_floor(o, j, res) != 0)
        res->verified = 0;

    if (strcmp(o->baseline, "mpi") == 0) {
        fprintf(stderr, "inagg bench latency: running the MPI baseline...\n");
        struct baseline_mpi_params bp = {.workers = o->workers,
                                         .elems = o->elems,
                                         .dtype_float = o->dtype_float,
                                         .iters = o->iters,
                                         .warmup = o->warmup,
                                         .latency_mode = 1,
                                         .seed = o->seed,
                                         .placement = j ? &j->mpi : NULL};
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

int lat_run_single(const lat_opts_t *o)
{
    int pinned = o->rank_cpu < 0 ? 0 : switch_pin_self_spread((uint32_t)o->rank_cpu);
    if (pinned < 0) {
        fprintf(stderr, "inagg bench latency: rank %u cannot pin to CPU index %lld: %s\n", o->rank,
                (long long)o->rank_cpu, strerror(-pinned));
        return pinned;
    }
    int fd = open(o->report_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int e = errno;
        fprintf(stderr, "inagg bench latency: %s: %s\n", o->report_file, strerror(e));
        return -e;
    }
    int rc = worker_main(o, o->rank, o->switch_addr, o->job, fd);
    if (close(fd) != 0)
        rc = 1;
    return rc == 0 ? 0 : -EIO;
}

/* --switch-poll on an inagg fabric: tools/testbed starts its `inagg switch --l2` with the
 * words of $INAGG_FABRIC_ARGS, to which `--poll MODE` is added. 0, or -E2BIG / -errno. */
static int fabric_poll_env(const char *mode)
{
    const char *old = getenv("INAGG_FABRIC_ARGS");
    char v[512];
    int n = snprintf(v, sizeof(v), "%s%s--poll %s", old ? old : "", old && *old ? " " : "", mode);
    if (n < 0 || (size_t)n >= sizeof(v))
        return -E2BIG;
    return setenv("INAGG_FABRIC_ARGS", v, 1) == 0 ? 0 : -errno;
}

int lat_testbed_up(const lat_opts_t *o, launch_tbjob_t **out)
{
    launch_tbjob_t *j = calloc(1, sizeof(*j));
    char err[1024], self[PATH_MAX];
    if (!j) {
        fprintf(stderr, "inagg bench latency: out of memory\n");
        return -ENOMEM;
    }
    j->tb.fabric = o->fabric;
    j->tb.link_delay = o->link_delay;
    j->switch_poll = o->switch_poll; /* the bridge testbed's switch */
    j->switch_multicast = o->switch_multicast;
    if (o->switch_poll && fabric_poll_env(o->switch_poll) != 0) { /* an inagg fabric's */
        fprintf(stderr, "inagg bench latency: $INAGG_FABRIC_ARGS is too long to add --poll\n");
        free(j);
        return -E2BIG;
    }
    fprintf(stderr, "inagg bench latency: building a testbed of %u hosts (links %s%s%s%s%s)\n",
            o->testbed, o->link_rate ? o->link_rate : "not rate-limited",
            o->fabric ? ", fabric " : "", o->fabric ? o->fabric : "",
            o->link_delay ? ", link delay " : "", o->link_delay ? o->link_delay : "");
    int rc = launch_tbjob_up(j, o->testbed, o->link_rate ? o->link_rate : "none", 1500, 0, err,
                             sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", err);
        free(j);
        return rc < 0 ? rc : -EIO;
    }
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    if (launch_tbjob_switch(j, self, 1, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench latency: %s\n", err);
        launch_tbjob_down(j);
        free(j);
        return -EIO;
    }
    *out = j;
    return 0;
}

void lat_testbed_down(launch_tbjob_t *j)
{
    launch_testbed_switch_stats(&j->tb, j->self, j->sw_addr, "inagg bench latency");
    launch_tbjob_down(j);
    free(j);
}
