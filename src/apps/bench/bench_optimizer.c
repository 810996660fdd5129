/*
 * bench_optimizer.c - the run of `inagg bench optimizer` (see bench_optimizer.h): the workers,
 * the torch.optim helpers, the reference run and the verification.
 *
 *
 * One embedded switch (or --switch) and N worker processes run three jobs in turn, each for
 * `--warmup` untimed and `--steps` timed steps over the same seeded gradients:
 *   in-switch        inagg_push_pull: the switch averages each chunk's gradients, applies the
 *                    optimizer and returns the new parameters (optimizer state lives once, in
 *                    the switch);
 *   allreduce+local  inagg_allreduce of the gradients (float32 native), then every worker
 *                    averages and runs the same optimizer on its own copy (kernels/optim.h, the
 *                    C kernels with torch.optim's semantics) - the usual data-parallel setup;
 *   sum-only         inagg_allreduce alone: what the switch costs without any optimizer;
 *   allreduce+torch.optim (with --baseline torch, for SGD/AdaGrad/Adam with epsilon outside,
 *                    when python3-torch is installed): as allreduce+local, but every worker's
 *                    step is torch.optim's, run by a helper process per worker
 *                    (tools/torch_worker.py) on parameters and gradients in memory shared
 *                    with the worker (no copies); this is then the baseline of the speedup.
 * Updated parameters per second = elems * steps / (slowest rank's time for the timed steps).
 * Verification: the gradients are multiples of 1/8, so their sums are exact in any order; the
 * in-switch and allreduce+local parameters must be bit-identical, and both are compared with a
 * reference run of the same steps by tools/optim_reference.py: PyTorch's torch.optim (SGD,
 * AdaGrad, Adam, epsilon outside the root) with --baseline torch when python3-torch is
 * installed, otherwise its straightforward double-precision implementation (always for SMORMS3
 * and for epsilon inside). Large vectors are checked on an evenly spaced sample (the
 * optimizers are element-wise). max_rel_err = max |p - p_ref| / max |p_ref|.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "apps/bench/bench_optimizer.h"
#include "apps/bench/benchdata.h"
#include "apps/bench/harness.h"
#include "apps/launch/launch.h"
#include "lib/base/util.h"

const char *const optb_run_names[RUN_COUNT] = {"in-switch", "allreduce+local", "sum-only",
                                               "allreduce+torch.optim"};

#define REFERENCE_TIMEOUT_MS 600000 /* a reference run, or the torch probe */

/* Shared with the workers (MAP_SHARED): timings and rank 0's sampled parameters. */
typedef struct optb_shared {
    double seconds[RUN_COUNT][INAGG_MAX_WORLD];
    int32_t rc[RUN_COUNT][INAGG_MAX_WORLD];
    char error[RUN_COUNT][256];
    float sample[RUN_COUNT][OPTB_MAX_SAMPLE]; /* rank 0's final parameters, sampled */
} optb_shared_t;

/* Rank r's gradient element i at step k: a multiple of 1/8 in [-1, 1). */
static float grad_value(uint64_t seed, uint32_t r, uint64_t k, uint64_t i)
{
    return (float)(bench_hash(seed * 1000003u + k, r, i) % 16u) / 8.0f - 1.0f;
}

/* A worker's torch.optim helper (tools/torch_worker.py) over a shared memory region. */
typedef struct torch_helper {
    pid_t pid;
    int to, from; /* its stdin, its stdout */
    float *region; /* n parameters, then n gradients */
    size_t bytes;
} torch_helper_t;

/* tools/NAME beside the build directory of this binary; 0 if readable. */
static int find_tool(const char *name, char *buf, size_t len)
{
    char rel[128];
    snprintf(rel, sizeof(rel), "../tools/%s", name);
    if (launch_beside_self(rel, buf, len) != 0)
        return -ENOENT;
    return access(buf, R_OK);
}

static void torch_stop(torch_helper_t *t)
{
    if (t->to >= 0) {
        (void)!write(t->to, "q", 1);
        close(t->to);
    }
    if (t->from >= 0)
        close(t->from);
    if (t->pid > 0)
        launch_wait(t->pid, 2000, NULL); /* it quits on "q"; killed after 2 s */
    t->pid = 0;
    if (t->region && t->region != MAP_FAILED)
        munmap(t->region, t->bytes);
}

/* Start the helper; 0 once it said ready, else a negative errno (-ENOENT: torch or the
 * script missing, -EIO: it did not start). */
static int torch_start(torch_helper_t *t, const optb_opts_t *o)
{
    *t = (torch_helper_t){.to = -1, .from = -1};
    char script[PATH_MAX], py[PATH_MAX];
    if (find_tool("torch_worker.py", script, sizeof(script)) != 0 ||
        launch_find_python(py, sizeof(py)) != 0)
        return -ENOENT;
    t->bytes = (size_t)o->elems * 8u;
    int fd = memfd_create("inagg-torch", 0); /* inherited by the helper: no CLOEXEC */
    if (fd < 0 || ftruncate(fd, (off_t)t->bytes) != 0) {
        if (fd >= 0)
            close(fd);
        return -EIO;
    }
    t->region = mmap(NULL, t->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int in[2], out[2];
    if (t->region == MAP_FAILED || pipe2(in, O_CLOEXEC) != 0) {
        close(fd);
        return -EIO;
    }
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        close(fd);
        return -EIO;
    }
    char fds[16], ns[32], lr[32], b1[32], b2[32], eps[32];
    snprintf(fds, sizeof(fds), "%d", fd);
    snprintf(ns, sizeof(ns), "%llu", (unsigned long long)o->elems);
    snprintf(lr, sizeof(lr), "%.9g", (double)o->oc.lr);
    snprintf(b1, sizeof(b1), "%.9g", (double)o->oc.beta1);
    snprintf(b2, sizeof(b2), "%.9g", (double)o->oc.beta2);
    snprintf(eps, sizeof(eps), "%.9g", (double)o->oc.eps);
    char *argv[] = {py, script, fds, ns,  (char *)optim_kind_name(o->oc.kind),
                    lr, b1,     b2,  eps, NULL};
    launch_spec_t spec = {argv, NULL, in[0], out[1], LAUNCH_INHERIT, 0};
    pid_t pid = launch_spawn(&spec, NULL, 0);
    t->pid = pid > 0 ? pid : 0;
    close(fd);
    close(in[0]);
    close(out[1]);
    t->to = in[1];
    t->from = out[0];
    char c = 0;
    struct pollfd pf = {.fd = t->from, .events = POLLIN};
    if (pid < 0 || poll(&pf, 1, 120000) != 1 || read(t->from, &c, 1) != 1 || c != 'r') {
        torch_stop(t);
        return -EIO;
    }
    return 0;
}

/* One torch.optim step on the shared parameters with the gradient already in place. */
static int torch_step(torch_helper_t *t, uint32_t timeout_ms)
{
    char c = 0;
    struct pollfd pf = {.fd = t->from, .events = POLLIN};
    if (write(t->to, "s", 1) != 1 || poll(&pf, 1, (int)timeout_ms) != 1 ||
        read(t->from, &c, 1) != 1 || c != 'd')
        return -EIO;
    return 0;
}

/* ---- the workers ------------------------------------------------------------------------ */

static void sample_params(const optb_opts_t *o, const float *p, float *out, uint32_t ns)
{
    for (uint32_t j = 0; j < ns; j++)
        out[j] = p[(uint64_t)j * o->elems / ns];
}

static int worker_main(const optb_opts_t *o, enum optb_run run, uint32_t rank, const char *addr,
                       const char *job, optb_shared_t *sh, uint32_t ns)
{
    inagg_optimizer_t z = INAGG_OPTIMIZER_INIT;
    z.kind = (inagg_optimizer_kind_t)o->oc.kind;
    z.params = o->elems;
    z.lr = o->oc.lr;
    z.beta1 = o->oc.beta1;
    z.beta2 = o->oc.beta2;
    z.eps = o->oc.eps;
    z.eps_outside = o->oc.eps_placement == OPTIM_EPS_OUTSIDE;
    inagg_options_t opts =
        bench_comm_options(o->protocol, o->window, o->packet_elems, o->timeout_ms, o->faults);
    opts.float_mode = INAGG_FLOAT_NATIVE;
    if (run == RUN_IN_SWITCH)
        opts.optimizer = &z;
    size_t n = o->elems;
    torch_helper_t th = {.to = -1, .from = -1};
    if (run == RUN_TORCH && torch_start(&th, o) != 0) {
        sh->rc[run][rank] = INAGG_ERR_UNSUPPORTED;
        snprintf(sh->error[run], sizeof(sh->error[run]),
                 "rank %u: torch_worker.py did not "
                 "start (python3-torch missing?)",
                 rank);
        return 1;
    }
    float *g = run == RUN_TORCH ? th.region + n : malloc(n * sizeof(float));
    float *p = run == RUN_TORCH ? th.region : calloc(n, sizeof(float));
    unsigned words = optim_state_words(&o->oc);
    float *state = run == RUN_LOCAL && words ? malloc(n * words * sizeof(float)) : NULL;
    inagg_comm_t *comm = NULL;
    char detail[256] = "";
    inagg_result_t rc = INAGG_ERR_NOMEM;
    if (g && p && (run != RUN_LOCAL || !words || state))
        rc = inagg_comm_create(&comm, addr, job, rank, o->workers, &opts, detail, sizeof(detail));
    if (state)
        optim_state_init(&o->oc, state, n);
    uint64_t t0 = 0;
    for (uint32_t k = 0; rc == INAGG_OK && k < o->warmup + o->steps; k++) {
        if (k == o->warmup) {
            rc = inagg_barrier(comm);
            t0 = util_now_ns();
            if (rc != INAGG_OK)
                break;
        }
        for (size_t i = 0; i < n; i++)
            g[i] = grad_value(o->seed, rank, k, i);
        if (run == RUN_IN_SWITCH) {
            rc = inagg_push_pull(comm, g, p, n);
        } else {
            rc = inagg_allreduce(comm, g, g, n, INAGG_FLOAT32, INAGG_SUM);
            if (rc == INAGG_OK && (run == RUN_LOCAL || run == RUN_TORCH)) {
                float w = (float)o->workers;
                for (size_t i = 0; i < n; i++)
                    g[i] = g[i] / w; /* the average, as the switch forms it */
                if (run == RUN_LOCAL)
                    optim_step(&o->oc, p, state, g, n, (uint64_t)k + 1);
                else if (torch_step(&th, o->timeout_ms) != 0)
                    rc = INAGG_ERR_SYSTEM;
            }
        }
    }
    uint64_t t1 = util_now_ns();
    sh->seconds[run][rank] = (double)(t1 - t0) / 1e9;
    sh->rc[run][rank] = rc;
    if (rc != INAGG_OK && rank == 0)
        snprintf(sh->error[run], sizeof(sh->error[run]), "%s: %.200s", inagg_strerror(rc),
                 comm ? inagg_last_error(comm) : detail);
    if (rc == INAGG_OK && rank == 0 && run != RUN_SUM_ONLY)
        sample_params(o, p, sh->sample[run], ns);
    if (comm)
        inagg_comm_destroy(comm);
    if (run == RUN_TORCH) {
        torch_stop(&th);
    } else {
        free(g);
        free(p);
    }
    free(state);
    return rc == INAGG_OK ? 0 : 1;
}

typedef struct rank_ctx {
    const optb_opts_t *o;
    enum optb_run run;
    const char *addr, *job;
    optb_shared_t *sh;
    uint32_t ns;
} rank_ctx_t;

static int rank_main(uint32_t rank, int fd, void *arg)
{
    (void)fd;
    const rank_ctx_t *c = arg;
    return worker_main(c->o, c->run, rank, c->addr, c->job, c->sh, c->ns);
}

uint64_t optb_memory_bytes(const optb_opts_t *o)
{
    uint64_t n = o->elems, words = optim_state_words(&o->oc);
    /* One job at a time: allreduce+local's workers hold g, p and the state (worker_main);
     * the in-switch job's hold g and p, and the embedded switch the parameters and state. */
    uint64_t local = n * sizeof(float) * (2 + words) * o->workers;
    uint64_t in_switch =
        n * sizeof(float) * 2 * o->workers + (o->switch_addr ? 0 : n * sizeof(float) * (1 + words));
    return local > in_switch ? local : in_switch;
}

/* Fork the workers of one run and wait for them, bounded: every step may take the per-call
 * timeout, and the torch helper two minutes to start. 0, or a negative errno when one failed. */
static int run_job(const optb_opts_t *o, enum optb_run run, const char *addr, optb_shared_t *sh,
                   uint32_t ns)
{
    char prefix[64], job[96];
    snprintf(prefix, sizeof(prefix), "opt-%s", optb_run_names[run]);
    rank_ctx_t ctx = {o, run, addr, bench_job_name(prefix, job, sizeof(job)), sh, ns};
    launch_ranks_t g;
    if (launch_ranks_start(&g, o->workers, rank_main, &ctx, 0, NULL, 0) != 0)
        return -ECHILD;
    uint64_t ms = (uint64_t)o->timeout_ms * (o->warmup + o->steps + 4u) + 180000u;
    return launch_ranks_wait(&g, ms > INT_MAX ? INT_MAX : (int)ms) == 0 ? 0 : -EIO;
}

/* ---- verification --------------------------------------------------------------------- */

/* Path of tools/optim_reference.py next to the source tree of this binary, or $INAGG_OPTIM_REF. */
static int find_reference(char *buf, size_t len)
{
    const char *env = getenv("INAGG_OPTIM_REF");
    if (env) {
        snprintf(buf, len, "%s", env);
        return access(buf, R_OK);
    }
    return find_tool("optim_reference.py", buf, len);
}

/* Run the reference on the sampled parameters; fills ref[ns]. *name: "torch" or
 * "independent". 0, or a negative errno with a reason. */
static int run_reference(const optb_opts_t *o, uint32_t ns, float *ref, const char **name,
                         char *err, size_t errlen)
{
    err[0] = '\0';
    char script[PATH_MAX + 64];
    if (find_reference(script, sizeof(script)) != 0) {
        snprintf(err, errlen, "tools/optim_reference.py not found (set INAGG_OPTIM_REF)");
        return -ENOENT;
    }
    char dir[] = "/tmp/inagg-optref-XXXXXX";
    if (!mkdtemp(dir)) {
        snprintf(err, errlen, "mkdtemp: %s", strerror(errno));
        return -EIO;
    }
    char in[PATH_MAX], out[PATH_MAX];
    snprintf(in, sizeof(in), "%s/in.bin", dir);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    FILE *f = fopen(in, "wb");
    uint32_t steps = o->warmup + o->steps;
    int wrote = f != NULL;
    if (f) {
        uint32_t hdr[2] = {ns, steps};
        wrote &= fwrite("OPTREF1\n", 1, 8, f) == 8 && fwrite(hdr, 4, 2, f) == 2;
        float zero = 0;
        for (uint32_t j = 0; j < ns && wrote; j++)
            wrote &= fwrite(&zero, 4, 1, f) == 1;
        for (uint32_t k = 0; k < steps && wrote; k++)
            for (uint32_t j = 0; j < ns && wrote; j++) {
                uint64_t i = (uint64_t)j * o->elems / ns;
                float s = 0;
                for (uint32_t r = 0; r < o->workers; r++)
                    s += grad_value(o->seed, r, k, i);
                float avg = s / (float)o->workers;
                wrote &= fwrite(&avg, 4, 1, f) == 1;
            }
        wrote &= fclose(f) == 0;
    }
    char py[PATH_MAX];
    if (launch_find_python(py, sizeof(py)) != 0) {
        snprintf(err, errlen, "python3 is not installed");
        wrote = 0;
    }
    int use_torch = strcmp(o->baseline, "torch") == 0 && o->oc.kind != OPTIM_SMORMS3 &&
                    o->oc.eps_placement == OPTIM_EPS_OUTSIDE;
    char lr[32], b1[32], b2[32], eps[32];
    snprintf(lr, sizeof(lr), "%.9g", (double)o->oc.lr);
    snprintf(b1, sizeof(b1), "%.9g", (double)o->oc.beta1);
    snprintf(b2, sizeof(b2), "%.9g", (double)o->oc.beta2);
    snprintf(eps, sizeof(eps), "%.9g", (double)o->oc.eps);
    int rc = -1;
    for (int attempt = 0; wrote && attempt < 2 && rc != 0; attempt++) {
        char *argv[] = {py,
                        script,
                        in,
                        "--optim",
                        (char *)optim_kind_name(o->oc.kind),
                        "--impl",
                        use_torch ? "torch" : "pure",
                        "--lr",
                        lr,
                        "--beta1",
                        b1,
                        "--beta2",
                        b2,
                        "--eps",
                        eps,
                        "--eps-placement",
                        (char *)optim_eps_name(o->oc.eps_placement),
                        NULL};
        int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        launch_spec_t spec = {argv, NULL, LAUNCH_INHERIT, ofd, LAUNCH_DEVNULL, 0};
        int ran = ofd >= 0 ? launch_run(&spec, REFERENCE_TIMEOUT_MS, NULL, 0) : -1;
        if (ofd >= 0)
            close(ofd);
        FILE *r = fopen(out, "r");
        uint32_t got = 0;
        while (r && got < ns && fscanf(r, "%f", &ref[got]) == 1)
            got++;
        if (r)
            fclose(r);
        if (ran == 0 && got == ns) {
            *name = use_torch ? "torch" : "independent";
            rc = 0;
        } else if (use_torch && got == 0) {
            use_torch = 0; /* torch is not installed: the straightforward implementation */
            fprintf(stderr, "inagg bench optimizer: torch is not installed (Debian: "
                            "python3-torch); verifying with the double-precision reference\n");
        } else {
            snprintf(err, errlen, "the reference run failed (%u of %u values)", got, ns);
            break;
        }
    }
    if (!wrote && !err[0])
        snprintf(err, errlen, "cannot write the reference input in %s", dir);
    unlink(in);
    unlink(out);
    rmdir(dir);
    return rc;
}

/* ---- run ---------------------------------------------------------------------------------- */

static double slowest(const optb_shared_t *sh, enum optb_run run, uint32_t workers)
{
    double s = 0;
    for (uint32_t r = 0; r < workers; r++)
        if (sh->seconds[run][r] > s)
            s = sh->seconds[run][r];
    return s;
}

/* Whether torch.optim can run the baseline: asked for, an optimizer and epsilon placement it
 * has, and python3-torch importable. */
static int torch_usable(const optb_opts_t *o)
{
    if (strcmp(o->baseline, "torch") != 0 || o->oc.kind == OPTIM_SMORMS3 ||
        o->oc.eps_placement != OPTIM_EPS_OUTSIDE)
        return 0;
    char py[PATH_MAX];
    char *argv[] = {py, "-c", "import torch", NULL};
    launch_spec_t spec = {argv, NULL, LAUNCH_INHERIT, LAUNCH_DEVNULL, LAUNCH_DEVNULL, 0};
    if (launch_find_python(py, sizeof(py)) != 0 ||
        launch_run(&spec, REFERENCE_TIMEOUT_MS, NULL, 0) != 0) {
        fprintf(stderr, "inagg bench optimizer: python3-torch is not installed: the baseline is "
                        "allreduce + the C kernels\n");
        return 0;
    }
    return 1;
}

/* The final parameters: in-switch == allreduce+local bit for bit, torch's close, and all
 * against the reference run. 1 if they check out (res->ref_name, max_rel set), else 0. */
static int verify(const optb_opts_t *o, const optb_shared_t *sh, int torch_run, optb_result_t *res)
{
    uint32_t ns = res->ns;
    /* The two ways of running the optimizer must agree bit for bit (exact gradient sums). */
    if (memcmp(sh->sample[RUN_IN_SWITCH], sh->sample[RUN_LOCAL], ns * sizeof(float)) != 0) {
        fprintf(stderr, "inagg bench optimizer: in-switch and allreduce+local parameters "
                        "differ\n");
        return 0;
    }
    if (torch_run) {
        double maxabs = 0, maxdiff = 0;
        for (uint32_t j = 0; j < ns; j++) {
            maxabs = fmax(maxabs, fabs((double)sh->sample[RUN_TORCH][j]));
            maxdiff = fmax(maxdiff, fabs((double)sh->sample[RUN_TORCH][j] -
                                         (double)sh->sample[RUN_IN_SWITCH][j]));
        }
        if (!(maxdiff <= 1e-5 * (maxabs > 0 ? maxabs : 1))) {
            fprintf(stderr,
                    "inagg bench optimizer: the torch.optim workers' parameters differ "
                    "from the switch's by %.3g\n",
                    maxdiff);
            return 0;
        }
    }
    float *ref = malloc(ns * sizeof(float));
    char err[256];
    int ok = 1;
    if (!ref || run_reference(o, ns, ref, &res->ref_name, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg bench optimizer: no reference: %s\n", ref ? err : "no memory");
        ok = 0;
    } else {
        double maxabs = 0, maxdiff = 0;
        for (uint32_t j = 0; j < ns; j++) {
            maxabs = fmax(maxabs, fabs((double)ref[j]));
            maxdiff = fmax(maxdiff, fabs((double)sh->sample[RUN_IN_SWITCH][j] - ref[j]));
        }
        res->max_rel = maxabs > 0 ? maxdiff / maxabs : maxdiff;
        if (!(res->max_rel <= 1e-5)) {
            fprintf(stderr,
                    "inagg bench optimizer: parameters differ from the %s reference "
                    "by %.3g (relative to the largest)\n",
                    res->ref_name, res->max_rel);
            ok = 0;
        }
    }
    free(ref);
    return ok;
}

/* Switch, the runs one after the other, verification. 0, or -1 when nothing could be run. */
int optb_run(const optb_opts_t *o, optb_result_t *res)
{
    memset(res, 0, sizeof(*res));
    res->ref_name = "none";
    res->max_rel = NAN;
    res->ns = o->elems < OPTB_MAX_SAMPLE ? (uint32_t)o->elems : OPTB_MAX_SAMPLE;
    optb_shared_t *sh =
        mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("inagg bench optimizer: mmap");
        return -ENOMEM;
    }
    char addr[128];
    pid_t switch_pid = bench_switch_begin("inagg bench optimizer", o->switch_addr, 1, o->timeout_ms,
                                          addr, sizeof(addr));
    if (switch_pid < 0) {
        munmap(sh, sizeof(*sh));
        return -EIO;
    }
    res->verified = 1;
    int torch_run = torch_usable(o);
    res->nruns = torch_run ? RUN_COUNT : RUN_TORCH;
    for (int run = 0; run < res->nruns; run++) {
        fprintf(stderr, "inagg bench optimizer: %s, %u workers, %llu parameters, %u steps...\n",
                optb_run_names[run], o->workers, (unsigned long long)o->elems, o->steps);
        if (run_job(o, (enum optb_run)run, addr, sh, res->ns) != 0) {
            fprintf(stderr, "inagg bench optimizer: %s run failed: %s\n", optb_run_names[run],
                    sh->error[run][0] ? sh->error[run] : "a worker failed");
            res->verified = 0;
        }
    }
    bench_switch_end(switch_pid);
    for (int run = 0; run < RUN_COUNT; run++) {
        double s = slowest(sh, (enum optb_run)run, o->workers);
        res->pps[run] =
            res->verified && run < res->nruns && s > 0 ? (double)o->elems * o->steps / s : NAN;
    }
    res->base_run = torch_run ? RUN_TORCH : RUN_LOCAL;
    if (res->verified)
        res->verified = verify(o, sh, torch_run, res);
    res->speedup = res->pps[RUN_IN_SWITCH] / res->pps[res->base_run];
    munmap(sh, sizeof(*sh));
    return 0;
}
