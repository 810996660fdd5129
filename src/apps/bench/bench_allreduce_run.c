/*
 * bench_allreduce_run.c - the run of `inagg bench allreduce`: for every tensor size, inagg and
 * then each baseline, either on loopback (an embedded switch and forked ranks, mpirun with
 * local ranks, local Gloo ranks) or across a testbed of network namespaces built for the run:
 * `inagg switch` in the switch namespace, one rank per host namespace (this very command in
 * its single-rank mode, started through `tools/testbed exec`), Open MPI's mpirun in h1 with its
 * orteds started through tools/testbed-rsh, one Gloo rank per host. The testbed is taken
 * down on every path out, and by launch/'s signal handler on SIGINT/SIGTERM/SIGHUP.
 *
 * CPU: every rank reports its own CPU time over its timed iterations and when they ran; the
 * switch process and the machine (/proc/stat) are sampled every 100 ms while the ranks run,
 * and their use over the ranks' timed window is interpolated from the samples.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/bench/baseline_mpi.h"
#include "apps/bench/bench_allreduce.h"
#include "apps/bench/bench_allreduce_ctx.h"
#include "apps/bench/bench_pcap.h"
#include "apps/bench/cpu_sampler.h"
#include "apps/bench/harness.h"
#include "apps/bench/ranks.h"
#include "lib/base/util.h"

#define GLOO_PORT 29500
#define LOOPBACK_BPS 2e9 /* a guess at loopback's allreduce rate, for time estimates only */

/* The run's state (ctx_t) is in bench_allreduce_ctx.h, shared with the switches' starter. */

/* The seconds a system gets for one size before it is killed: generous, since Open MPI's own
 * algorithm choice reaches a third of the link at some sizes and the ranks compute the
 * expected sum of every rank's tensor first. */
static unsigned time_limit_s(const ctx_t *c)
{
    const ar_opts_t *o = &c->so;
    double bps = c->run->on_testbed && o->link_bps ? (double)o->link_bps : LOOPBACK_BPS / 4;
    double per = (double)o->elems * 4 * 8 / bps;
    double build = (double)o->elems * o->workers * o->workers * 30e-9;
    double s = 120 + 10 * per * (o->iters + o->warmup) + build;
    return s > 86400 ? 86400u : (unsigned)s;
}

/* ---- inagg on loopback ------------------------------------------------------------------- */

typedef struct local_rank_ctx {
    const ar_opts_t *o;
    const char *addr, *job;
    const char (*leaf_addr)[64]; /* two levels: rank r joins leaf r / hosts_per_leaf */
} local_rank_ctx_t;

static int local_rank_main(uint32_t rank, int fd, void *arg)
{
    const local_rank_ctx_t *c = arg;
    ar_rank_report_t *rep = bench_rank_reports_new(1, AR_MAX_ITERS);
    if (!rep)
        return 1;
    const char *addr = c->o->leaves ? c->leaf_addr[rank / c->o->hosts_per_leaf] : c->addr;
    int rc = ar_rank_run(c->o, rank, addr, c->job, rep);
    bench_rank_meta_t meta = ar_rank_meta(c->o);
    int wrc = bench_rank_report_write(fd, rep, &meta);
    free(rep);
    return wrc == 0 && rc == 0 ? 0 : 1;
}

static void run_inagg_local(ctx_t *c, ar_sys_result_t *r)
{
    const ar_opts_t *o = &c->so;
    char job[64], err[256];
    local_rank_ctx_t lc = {o, c->sw_addr, bench_job_name("bench", job, sizeof(job)),
                           (const char(*)[64])c->leaf_addr};
    ar_rank_report_t *reps = bench_rank_reports_new(o->workers, AR_MAX_ITERS);
    int *got = calloc(o->workers, sizeof(int));
    launch_ranks_t *g = calloc(1, sizeof(*g));
    if (!reps || !got || !g) {
        snprintf(r->error, sizeof(r->error), "out of memory");
        goto out;
    }
    sampler_begin(&c->sampler, c->sw_pid);
    if (launch_ranks_start(g, o->workers, local_rank_main, &lc, LAUNCH_PIPE, err, sizeof(err)) !=
        0) {
        snprintf(r->error, sizeof(r->error), "starting the workers: %s", err);
        goto out;
    }
    uint64_t deadline = util_now_ns() + (uint64_t)time_limit_s(c) * 1000000000ull;
    int open_fds = bench_ranks_collect_reports(g, o->workers, reps, AR_REPORT_LINE_MAX, got,
                                               deadline, (int)SAMPLE_MS, sampler_tick, &c->sampler);
    if (open_fds < 0) {
        launch_ranks_kill(g);
        snprintf(r->error, sizeof(r->error), "out of memory for the workers' reports");
        goto out;
    }
    int timed_out = open_fds > 0;
    for (uint32_t k = 0; k < o->workers; k++)
        launch_ranks_wait_one(g, k, timed_out ? 0 : 30000);
    r->ran = 1;
    for (uint32_t k = 0; k < o->workers; k++) {
        if (!got[k]) {
            char st[96];
            snprintf(r->error, sizeof(r->error), "worker %u %s without a report", k,
                     timed_out ? "was killed at the time limit"
                               : launch_status_text(g->status[k], st, sizeof(st)));
            goto out;
        }
    }
    ar_summarize_ranks(reps, o->workers, o->iters, r);
    double t0, t1;
    ar_ranks_window(reps, o->workers, &t0, &t1);
    sampler_window(&c->sampler, t0, t1, r);
out:
    free(reps);
    free(got);
    free(g);
}

/* ---- processes in the testbed's hosts ------------------------------------------------------ */

/* Run one command per rank, rank k in host h(k+1) of the testbed (or locally when argv_of
 * builds local command lines), and parse each one's JSON report. The ranks' common window is
 * in t0/t1. 0, or a negative errno with r->error set. */
typedef int (*argv_fn)(ctx_t *c, uint32_t rank, char **argv, size_t cap, char *store,
                       size_t store_len);

static int run_rank_group(ctx_t *c, const char *what, argv_fn build, ar_rank_report_t *reps,
                          ar_sys_result_t *r, double *t0, double *t1)
{
    const ar_opts_t *o = &c->so;
    launch_group_t *g = malloc(sizeof(*g));
    char *store = malloc(o->workers * 4096u);
    int rc = -1;
    if (!g || !store) {
        snprintf(r->error, sizeof(r->error), "out of memory");
        goto out;
    }
    launch_group_init(g);
    char err[512];
    for (uint32_t k = 0; k < o->workers; k++) {
        char *argv[96];
        if (build(c, k, argv, 96, store + k * 4096u, 4096) != 0 ||
            launch_group_add(g, argv, NULL, err, sizeof(err)) < 0) {
            snprintf(r->error, sizeof(r->error), "%s rank %u could not start: %s", what, k, err);
            launch_group_end(g);
            goto out;
        }
    }
    int wrc = launch_group_wait(g, time_limit_s(c) * 1000u, sampler_tick, &c->sampler, SAMPLE_MS);
    launch_group_end(g);
    r->ran = 1;
    for (uint32_t k = 0; k < o->workers; k++) {
        launch_proc_t *p = &g->p[k];
        const char *line = p->out;
        const char *last = NULL;
        for (const char *q = line; q && *q; q = strchr(q, '\n') ? strchr(q, '\n') + 1 : NULL) {
            if (*q == '{')
                last = q;
        }
        if (!last || bench_rank_report_decode(last, &reps[k]) < 0) {
            char st[96];
            int code = launch_exit_code(p->status);
            snprintf(r->error, sizeof(r->error), "%s rank %u (h%u) %s without a report%s: ", what,
                     k, k + 1,
                     wrc == -ETIMEDOUT ? "was killed after the time limit"
                                       : launch_status_text(p->status, st, sizeof(st)),
                     code == 3 ? " (python3-torch with Gloo is not installed?)" : "");
            launch_append_tail(r->error, sizeof(r->error), p->tail_len ? p->tail : "(no stderr)");
            goto out;
        }
    }
    ar_ranks_window(reps, o->workers, t0, t1);
    rc = 0;
out:
    free(g);
    free(store);
    return rc;
}

/* Append a formatted argument to argv, its text kept in store. */
typedef struct argb {
    char **argv;
    size_t n, cap;
    char *store;
    size_t used, len;
    int full;
} argb_t;

static void arg(argb_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(argb_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->store + b->used, b->len - b->used, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= b->len - b->used || b->n + 2 >= b->cap) {
        b->full = 1;
        return;
    }
    b->argv[b->n++] = b->store + b->used;
    b->argv[b->n] = NULL;
    b->used += (size_t)n + 1;
}

/* Prefix argv with `tools/testbed exec NAME hK --` (rank k-1). */
static int in_host(ctx_t *c, uint32_t rank, argb_t *b)
{
    char host[16];
    snprintf(host, sizeof(host), "h%u", rank + 1);
    arg(b, "%s", c->run->tb.tool);
    arg(b, "exec");
    arg(b, "%s", c->run->tb.name);
    arg(b, "%s", host);
    arg(b, "--");
    return 0;
}

static int inagg_rank_argv(ctx_t *c, uint32_t rank, char **argv, size_t cap, char *store,
                           size_t len)
{
    const ar_opts_t *o = &c->so;
    argb_t b = {argv, 0, cap, store, 0, len, 0};
    in_host(c, rank, &b);
    arg(&b, "%s", c->self);
    arg(&b, "bench");
    arg(&b, "allreduce");
    arg(&b, "--switch");
    arg(&b, "%s", o->leaves ? c->leaf_addr[rank / o->hosts_per_leaf] : c->sw_addr);
    if (o->leaves) { /* join the leaf as rank % H of H; data and check stay global */
        arg(&b, "--leaves");
        arg(&b, "%u", o->leaves);
        arg(&b, "--hosts-per-leaf");
        arg(&b, "%u", o->hosts_per_leaf);
    }
    arg(&b, "--job");
    arg(&b, "%s", o->job);
    arg(&b, "--rank");
    arg(&b, "%u", rank);
    arg(&b, "--world");
    arg(&b, "%u", o->workers);
    arg(&b, "--elems");
    arg(&b, "%llu", (unsigned long long)o->elems);
    arg(&b, "--dtype");
    arg(&b, "%s", o->dtype_float ? "float32" : "int32");
    arg(&b, "--float-mode");
    arg(&b, "%s", o->float_mode == INAGG_FLOAT_FIXED ? "fixed" : "native");
    arg(&b, "--protocol");
    arg(&b, "%s", o->protocol == INAGG_PROTO_P4SGD ? "p4sgd" : "switchml");
    arg(&b, "--iters");
    arg(&b, "%u", o->iters);
    arg(&b, "--warmup");
    arg(&b, "%u", o->warmup);
    arg(&b, "--packet-elems");
    arg(&b, "%u", o->packet_elems);
    arg(&b, "--window");
    arg(&b, "%u", o->window);
    arg(&b, "--threads");
    arg(&b, "%u", o->threads);
    if (o->rto_min_us) {
        arg(&b, "--rto-min-us");
        arg(&b, "%u", o->rto_min_us);
    }
    if (o->rto_max_us) {
        arg(&b, "--rto-max-us");
        arg(&b, "%u", o->rto_max_us);
    }
    arg(&b, "--timeout-ms");
    arg(&b, "%u", o->timeout_ms);
    arg(&b, "--seed");
    arg(&b, "%llu", (unsigned long long)o->seed);
    if (o->compress) {
        arg(&b, "--compress");
        arg(&b, "%s", o->compress);
    }
    if (o->faults) {
        arg(&b, "--faults");
        arg(&b, "%s", o->faults);
    }
    if (o->transport) {
        arg(&b, "--transport");
        arg(&b, "%s", o->transport);
    }
    if (o->roce_psn) {
        arg(&b, "--roce-psn");
        arg(&b, "%s", o->roce_psn);
    }
    if (o->roce_mtu) {
        arg(&b, "--roce-mtu");
        arg(&b, "%s", o->roce_mtu);
    }
    return b.full ? -E2BIG : 0;
}

static void run_inagg_testbed(ctx_t *c, ar_sys_result_t *r)
{
    const ar_opts_t *o = &c->so;
    ar_rank_report_t *reps = bench_rank_reports_new(o->workers, AR_MAX_ITERS);
    if (!reps || launch_job_secret(r->error, sizeof(r->error)) != 0) {
        if (!reps)
            snprintf(r->error, sizeof(r->error), "out of memory");
        free(reps);
        return;
    }
    /* the switch's CPU: the one started here, or the inagg fabric's process */
    sampler_begin(&c->sampler, c->sw_pid ? c->sw_pid : c->run->tb.fabric_pid);
    double t0, t1;
    bench_pcap_t *cap = NULL;
    if (o->pcap && c->run->on_testbed) {
        char ns[64], why[256];
        snprintf(ns, sizeof(ns), "inagg-tb-%s-sw", c->run->tb.name);
        if (bench_pcap_start(ns, c->run->tb.hosts, o->pcap, &cap, why, sizeof(why)) != 0) {
            snprintf(r->error, sizeof(r->error), "%s", why);
            free(reps);
            return;
        }
    }
    if (run_rank_group(c, "inagg", inagg_rank_argv, reps, r, &t0, &t1) == 0) {
        ar_summarize_ranks(reps, o->workers, o->iters, r);
        sampler_window(&c->sampler, t0, t1, r);
    }
    if (cap) {
        uint64_t wrote, skipped;
        bench_pcap_stop(cap, &wrote, &skipped);
        fprintf(stderr, AR_CMD ": --pcap %s: %llu frames on the fabric's ports%s\n", o->pcap,
                (unsigned long long)wrote, skipped ? " (more were seen: the capture is full)" : "");
    }
    free(reps);
}

/* ---- Gloo ---------------------------------------------------------------------------------- */

static int gloo_rank_argv(ctx_t *c, uint32_t rank, char **argv, size_t cap, char *store, size_t len)
{
    const ar_opts_t *o = &c->so;
    argb_t b = {argv, 0, cap, store, 0, len, 0};
    char master[64];
    if (c->run->on_testbed) {
        in_host(c, rank, &b);
        snprintf(master, sizeof(master), "%s.1:%d", c->run->tb.net3, c->gloo_port);
    } else {
        snprintf(master, sizeof(master), "127.0.0.1:%d", c->gloo_port);
    }
    arg(&b, "%s", c->python);
    arg(&b, "%s", c->gloo);
    arg(&b, "--rank");
    arg(&b, "%u", rank);
    arg(&b, "--world");
    arg(&b, "%u", o->workers);
    arg(&b, "--master");
    arg(&b, "%s", master);
    arg(&b, "--ifname");
    arg(&b, "%s", c->run->on_testbed ? c->run->tb.iface : "lo");
    arg(&b, "--elems");
    arg(&b, "%llu", (unsigned long long)o->elems);
    arg(&b, "--dtype");
    arg(&b, "%s", o->dtype_float ? "float32" : "int32");
    arg(&b, "--iters");
    arg(&b, "%u", o->iters);
    arg(&b, "--warmup");
    arg(&b, "%u", o->warmup);
    arg(&b, "--seed");
    arg(&b, "%llu", (unsigned long long)o->seed);
    arg(&b, "--timeout-s");
    arg(&b, "%u", time_limit_s(c));
    return b.full ? -E2BIG : 0;
}

/* A TCP port free on loopback now (for the local TCPStore), or GLOO_PORT. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int port = GLOO_PORT;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void run_gloo(ctx_t *c, ar_sys_result_t *r)
{
    const ar_opts_t *o = &c->so;
    if (!c->python[0] && launch_find_python(c->python, sizeof(c->python)) != 0) {
        snprintf(r->error, sizeof(r->error), "python3 is not installed (set INAGG_PYTHON)");
        return;
    }
    if (!c->gloo[0]) {
        const char *env = getenv("INAGG_GLOO_SCRIPT");
        if (env && *env)
            snprintf(c->gloo, sizeof(c->gloo), "%s", env);
        else if (launch_beside_self("../tools/gloo_allreduce.py", c->gloo, sizeof(c->gloo)))
            c->gloo[0] = '\0';
        if (!c->gloo[0] || access(c->gloo, R_OK) != 0) {
            snprintf(r->error, sizeof(r->error),
                     "tools/gloo_allreduce.py not found beside the "
                     "build (%.300s; set INAGG_GLOO_SCRIPT)",
                     c->gloo);
            c->gloo[0] = '\0';
            return;
        }
    }
    c->gloo_port = c->run->on_testbed ? c->gloo_port + 1 : free_port();
    ar_rank_report_t *reps = bench_rank_reports_new(o->workers, AR_MAX_ITERS);
    if (!reps) {
        snprintf(r->error, sizeof(r->error), "out of memory");
        return;
    }
    sampler_begin(&c->sampler, 0);
    double t0, t1;
    if (run_rank_group(c, "gloo", gloo_rank_argv, reps, r, &t0, &t1) == 0) {
        ar_summarize_ranks(reps, o->workers, o->iters, r);
        sampler_window(&c->sampler, t0, t1, r);
    }
    free(reps);
}

/* ---- Open MPI ------------------------------------------------------------------------------ */

static void run_mpi(ctx_t *c, int ring, ar_sys_result_t *r)
{
    const ar_opts_t *o = &c->so;
    static const char *const ring_mca[] = {"coll_tuned_use_dynamic_rules", "1",
                                           "coll_tuned_allreduce_algorithm", "4", NULL};
    char *prefix[8] = {0};
    launch_mpirun_cfg_t cfg = {0};
    cfg.mca = ring ? ring_mca : NULL;
    if (c->run->on_testbed) {
        const launch_testbed_t *tb = &c->run->tb;
        prefix[0] = (char *)tb->tool;
        prefix[1] = "exec";
        prefix[2] = (char *)tb->name;
        prefix[3] = "h1";
        prefix[4] = "--";
        cfg.prefix = (const char *const *)prefix;
        cfg.hosts = c->hosts_list;
        cfg.if_include = tb->subnet;
        cfg.rsh_agent = c->rsh;
    }
    struct baseline_mpi_params bp = {.workers = o->workers,
                                     .elems = o->elems,
                                     .dtype_float = o->dtype_float,
                                     .iters = o->iters,
                                     .warmup = o->warmup,
                                     .seed = o->seed,
                                     .timeout_s = time_limit_s(c),
                                     .placement = &cfg};
    struct baseline_mpi_result base;
    char err[768];
    r->ran = 1;
    if (baseline_mpi_run(&bp, &base, err, sizeof(err)) != 0) {
        snprintf(r->error, sizeof(r->error), "%s", err);
        return;
    }
    r->verified = base.verified;
    r->completed = 1; /* it reported: verified or not */
    if (!base.verified)
        snprintf(r->error, sizeof(r->error), "%s", err);
    r->iters = o->iters;
    r->tat_median_s = base.tat_median_ms / 1e3;
    r->tat_min_s = base.tat_min_ms / 1e3;
    r->tat_max_s = base.tat_max_ms / 1e3;
    r->cpu_workers = base.cpu_workers_pct;
    r->cpu_workers_max = base.cpu_workers_max_pct;
    snprintf(r->checksum, sizeof(r->checksum), "%s", base.checksum);
    r->checksums_agree = 1;
}

/* The machine's busy share (all cores, %) over the next second. */
static double busy_over_a_second(ctx_t *c)
{
    sampler_begin(&c->sampler, 0);
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    sampler_tick(&c->sampler);
    const sample_t *a = &c->sampler.s[0], *b = &c->sampler.s[c->sampler.n - 1];
    double tot = b->total - a->total;
    return c->sampler.n >= 2 && tot > 0 ? (b->busy - a->busy) / tot * 100.0 : NAN;
}

/* ---- sizes ----------------------------------------------------------------------------------- */

/* The iterations of one size in a sweep: about 8 s of timed work at most (never fewer than 1),
 * no warmup once one allreduce takes over a second (connections are set up by then anyway,
 * and the first iteration is a small part of the time). */
static void size_iters(const ar_run_t *run, uint64_t bytes, uint32_t *iters, uint32_t *warmup)
{
    const ar_opts_t *o = run->o;
    if (o->nsizes == 0)
        return;
    double bps = run->on_testbed && o->link_bps ? (double)o->link_bps : LOOPBACK_BPS;
    double one = (double)bytes * 8 * 2 / bps + 0.001; /* about a ring allreduce */
    double k = floor(8.0 / one);
    if (k < *iters)
        *iters = k < 1 ? 1 : (uint32_t)k;
    if (one > 1.0 && !o->given.warmup)
        *warmup = 0;
}

static void say_failure(const char *sys, const ar_size_result_t *s, const ar_sys_result_t *r)
{
    if (!r->verified)
        fprintf(stderr, AR_CMD ": %s at %llu elements: %s\n", sys, (unsigned long long)s->elems,
                r->error[0] ? r->error : "did not verify");
}

static void run_size(ctx_t *c, ar_size_result_t *s)
{
    ar_run_t *run = c->run;
    c->so = *run->o;
    c->so.elems = s->elems;
    c->so.iters = s->iters;
    c->so.warmup = s->warmup;
    char job[64];
    c->so.job = bench_job_name("bench", job, sizeof(job));
    for (int k = 0; k < AR_NSYS; k++)
        ar_result_init(&s->sys[k]);
    if (run->o->nsizes)
        fprintf(stderr, AR_CMD ": %llu B per rank (%u iterations, %u warmup)\n",
                (unsigned long long)ar_bytes(s), s->iters, s->warmup);
    if (run->on_testbed)
        run_inagg_testbed(c, &s->sys[AR_INAGG]);
    else
        run_inagg_local(c, &s->sys[AR_INAGG]);
    s->sys[AR_INAGG].ran = 1;
    say_failure("inagg", s, &s->sys[AR_INAGG]);
    for (int k = 0; k < run->o->nbase; k++) {
        ar_system_t b = run->o->base[k];
        ar_sys_result_t *r = &s->sys[b];
        if (b == AR_GLOO)
            run_gloo(c, r);
        else
            run_mpi(c, b == AR_MPI_RING, r);
        r->ran = 1;
        say_failure(ar_system_name[b], s, r);
    }
}

static void plan_sizes(ar_run_t *run)
{
    const ar_opts_t *o = run->o;
    run->nsizes = o->nsizes ? o->nsizes : 1;
    for (int i = 0; i < run->nsizes; i++) {
        ar_size_result_t *s = &run->size[i];
        s->elems = o->nsizes ? o->sizes[i] / 4 : o->elems;
        s->iters = o->iters;
        s->warmup = o->warmup;
        size_iters(run, ar_bytes(s), &s->iters, &s->warmup);
    }
}

/* ---- the run ----------------------------------------------------------------------------------- */

static int run_testbed(ar_run_t *run, ctx_t *c)
{
    launch_testbed_t *tb = &run->tb;
    if (launch_testbed_find(tb->tool, sizeof(tb->tool)) != 0) {
        fprintf(stderr, AR_CMD ": tools/testbed not found (tried %s; set INAGG_TESTBED_TOOL)\n",
                tb->tool[0] ? tb->tool : "../tools/testbed beside the binary");
        return -ENOENT;
    }
    if (launch_testbed_sibling(tb, "testbed-rsh", c->rsh, sizeof(c->rsh)) != 0) {
        fprintf(stderr, AR_CMD ": tools/testbed-rsh is missing beside %s\n", tb->tool);
        return -ENOENT;
    }
    launch_testbed_reap_stale(tb->tool);
    char name[16], err[1024];
    snprintf(name, sizeof(name), "b%d", (int)getpid());
    snprintf(tb->name, sizeof(tb->name), "%s", name);
    tb->fabric = run->o->fabric;
    tb->link_delay = run->o->link_delay;
    tb->xdp = run->o->xdp;
    tb->leaves = run->o->leaves;
    tb->hosts_per_leaf = run->o->hosts_per_leaf;
    launch_testbed_guard(tb);
    fprintf(stderr, AR_CMD ": building testbed %s: %u hosts, links %s, MTU %u%s%s%s%s%s\n", name,
            run->o->testbed, run->o->link_rate, run->o->mtu, run->o->loss > 0 ? ", with loss" : "",
            tb->fabric ? ", fabric " : "", tb->fabric ? tb->fabric : "",
            tb->link_delay ? ", link delay " : "", tb->link_delay ? tb->link_delay : "");
    int rc = launch_testbed_up(tb, run->o->testbed, name, run->o->link_rate, run->o->mtu,
                               run->o->loss, err, sizeof(err));
    if (rc != 0) {
        launch_testbed_unguard();
        fprintf(stderr, AR_CMD ": %s\n", err);
        return rc == -EOPNOTSUPP ? rc : -EIO;
    }
    run->on_testbed = 1;
    ar_link_defaults(&run->opts, tb->mtu, tb->link_bps, run->defaults_note,
                     sizeof(run->defaults_note));
    fprintf(stderr, AR_CMD ": on the testbed: %s\n", run->defaults_note);
    plan_sizes(run);
    size_t used = 0;
    for (unsigned k = 1; k <= tb->hosts && used + 20 < sizeof(c->hosts_list); k++)
        used += (size_t)snprintf(c->hosts_list + used, sizeof(c->hosts_list) - used, "%s%s.%u",
                                 k > 1 ? "," : "", tb->net3, k);
    c->gloo_port = GLOO_PORT;
    c->so = run->opts;
    rc = ar_testbed_switches(c);
    run->busy_before = busy_over_a_second(c);
    for (int i = 0; rc == 0 && i < run->nsizes; i++)
        run_size(c, &run->size[i]);
    launch_testbed_switch_stats(tb, c->self, c->sw_addr, AR_CMD);
    if (c->sw_pid > 0)
        launch_testbed_linger();
    for (int k = 0; k < c->nmore; k++)
        launch_stop(c->more_pids[k], SIGTERM, 10000, NULL);
    if (c->sw_pid > 0)
        launch_stop(c->sw_pid, SIGTERM, 10000, NULL);
    if (c->sw_err_fd >= 0)
        close(c->sw_err_fd);
    launch_testbed_down(tb);
    launch_testbed_unguard();
    return rc;
}

int ar_run(const ar_opts_t *o, ar_run_t *run)
{
    memset(run, 0, sizeof(*run));
    run->opts = *o;
    run->o = &run->opts;
    run->world = o->workers;
    ctx_t *c = calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    c->run = run;
    c->sw_err_fd = -1;
    ssize_t n = readlink("/proc/self/exe", c->self, sizeof(c->self) - 1);
    c->self[n > 0 ? n : 0] = '\0';
    int rc;
    if (o->testbed) {
        rc = run_testbed(run, c);
    } else {
        plan_sizes(run);
        rc = ar_local_switches(c, o);
        run->busy_before = rc == 0 ? busy_over_a_second(c) : NAN;
        for (int i = 0; rc == 0 && i < run->nsizes; i++)
            run_size(c, &run->size[i]);
        if (rc == 0 && c->sw_pid > 0) {
            run->switch_cpu_s[run->nswitch_cpu++] = ar_process_cpu_s(c->sw_pid);
            for (int k = 0; k < c->nmore; k++)
                run->switch_cpu_s[run->nswitch_cpu++] = ar_process_cpu_s(c->more_pids[k]);
        }
        for (int k = 0; k < c->nmore; k++)
            bench_switch_end(c->more_pids[k]);
        if (c->sw_pid > 0)
            bench_switch_end(c->sw_pid);
        ar_uncap_switches(c);
    }
    free(c->sampler.s);
    free(c);
    return rc;
}
