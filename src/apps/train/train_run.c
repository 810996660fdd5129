/*
 * train_run.c - the run of `inagg train` (see train_run.h), the project's main job: distributed
 * training of a generalized linear model (P4SGD's workload) through the aggregation switch.
 *
 * With no --switch, the command forks an embedded switch on loopback and N worker processes
 * (launch/), each a rank of one job; every worker loads (or generates) the same data, takes
 * its slice (features in model mode, samples in data mode) and trains with glm/train.c over
 * the inagg collective (glm/coll_inagg.c). Workers report one text line per event (glm/train.h's
 * report lines) through a pipe; each is recorded in the result and passed to the caller's
 * view (the command's rendering: progress, then the summary, JSON and a plot).
 * --backend mpi runs the same trainers under mpirun (inagg-mpi-train) and parses the same
 * lines from its stdout. --mode single trains in this process. --switch HOST:PORT runs one
 * rank here (multi-host; rank and world from flags or the launcher's environment).
 * --testbed N builds a testbed of namespaces (launch/testbed_job.c) and runs one rank per host:
 * this command with the same options in its one-rank mode (--switch, --report-lines: its
 * report lines on stdout, read through a pipe as the local ranks' are), or --backend mpi's
 * mpirun with one rank per host over the testbed's links.
 * Every wait is bounded: the library's per-call timeout, a watchdog on silent workers, and
 * the first failure kills the remaining workers.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/bench/harness.h"
#include "apps/glm/collective.h"
#include "apps/glm/dataset.h"
#include "apps/glm/synth.h"
#include "apps/launch/launch.h"
#include "apps/train/train_run.h"
#include "inagg.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/kernels/optim.h"
#include "switchd/switchd.h"

#define P4SGD_PACKET_ELEMS 1024u /* >= micro-batch; evaluation allreduces go in big chunks */
#define MAX_SLOTS 256u
#define MPI_TIME_LIMIT_S 3600u
#define LINE_MAX_LEN 4096
#define RANK_EXIT_MS 10000 /* a rank whose pipe closed exits within this */

/* A run in progress: its options, the result it fills, who is told of each report. */
typedef struct run {
    const train_opts_t *o;
    train_result_t *res;
    const train_view_t *view;
} run_t;

/* Record one report line of rank from_rank (-1: the line's own) and tell the view. 0 to carry
 * on, a negative errno once the run has failed (res->error says why). */
static int record_line(run_t *run, const glm_line_t *l, int from_rank)
{
    train_result_t *r = run->res;
    int rank = from_rank >= 0 ? from_rank : l->rank;
    switch (l->type) {
        case GLM_LINE_SETUP:
            if (r->have_setup)
                return r->failed ? -EIO : 0;
            r->setup = l->setup;
            r->have_setup = 1;
            break;
        case GLM_LINE_EPOCH: {
            glm_epoch_record_t *grown =
                realloc(r->epochs, (r->nepochs + 1) * sizeof(glm_epoch_record_t));
            if (!grown) {
                r->failed = 1;
                snprintf(r->error, sizeof(r->error), "out of memory");
                return -ENOMEM;
            }
            r->epochs = grown;
            r->epochs[r->nepochs++] = l->epoch;
            break;
        }
        case GLM_LINE_DONE: r->done++; break;
        case GLM_LINE_ERROR:
            if (!r->failed) {
                r->failed = 1;
                snprintf(r->error, sizeof(r->error), "%s", l->message);
            }
            return -EIO;
        default: break;
    }
    if (run->view && run->view->report)
        run->view->report(run->view->arg, l, rank);
    return r->failed ? -EIO : 0;
}

typedef struct worker_ctx {
    run_t *run; /* in-process: record each report and tell the view at once */
    int fd; /* forked: write report lines here */
    uint32_t rank;
    int write_failed;
} worker_ctx_t;

static int emit(worker_ctx_t *w, glm_line_t *l)
{
    l->rank = (int)w->rank;
    if (w->run) {
        int rc = record_line(w->run, l, (int)w->rank);
        return rc == 0 || l->type == GLM_LINE_ERROR ? 0 : -EIO;
    }
    char buf[LINE_MAX_LEN];
    int n = glm_line_format(l, buf, sizeof(buf) - 1);
    if (n < 0)
        return 0;
    buf[n++] = '\n';
    size_t off = 0;
    while (off < (size_t)n) {
        ssize_t k = write(w->fd, buf + off, (size_t)n - off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            w->write_failed = 1;
            return -EPIPE; /* the parent is gone: stop */
        }
        off += (size_t)k;
    }
    return 0;
}

static int w_setup(const glm_setup_record_t *s, void *arg)
{
    worker_ctx_t *w = arg;
    if (w->rank != 0)
        return 0;
    glm_line_t l;
    glm_line_init(&l, GLM_LINE_SETUP, (int)w->rank);
    l.setup = *s;
    return emit(w, &l);
}

static int w_epoch(const glm_epoch_record_t *e, void *arg)
{
    worker_ctx_t *w = arg;
    if (w->rank != 0)
        return 0;
    glm_line_t l;
    glm_line_init(&l, GLM_LINE_EPOCH, (int)w->rank);
    l.epoch = *e;
    return emit(w, &l);
}

static int w_progress(uint32_t epoch, double fraction, void *arg)
{
    worker_ctx_t *w = arg;
    if (w->run && w->rank != 0)
        return 0;
    glm_line_t l;
    glm_line_init(&l, GLM_LINE_PROGRESS, (int)w->rank); /* every rank: the parent's sign of life */
    l.progress_epoch = epoch;
    l.progress_fraction = fraction;
    return emit(w, &l);
}

static void w_error(worker_ctx_t *w, const char *msg)
{
    glm_line_t l;
    glm_line_init(&l, GLM_LINE_ERROR, (int)w->rank);
    if (strncmp(msg, "rank ", 5) == 0)
        snprintf(l.message, sizeof(l.message), "%s", msg);
    else
        snprintf(l.message, sizeof(l.message), "rank %u: %s", w->rank, msg);
    emit(w, &l);
}

static uint32_t p4sgd_slots(const train_opts_t *o)
{
    size_t nmb = (o->cfg.batch + o->cfg.micro_batch - 1) / o->cfg.micro_batch;
    return (uint32_t)util_min_u64(util_max_u64(16, nmb), MAX_SLOTS);
}

static uint32_t packet_elems(const train_opts_t *o)
{
    if (o->cfg.mode == GLM_MODE_DATA)
        return 0; /* the library's default: one full datagram per packet */
    return (uint32_t)util_max_u64(P4SGD_PACKET_ELEMS, o->cfg.micro_batch);
}

/* --capture-gradients: one step's gradient appended to this rank's file. */
static int capture_write(const float *g, size_t n, void *arg)
{
    return fwrite(g, sizeof(float), n, (FILE *)arg) == n ? 0 : -EIO;
}

/* Opens PREFIX.rankR.f32 for the capture (err set on failure). */
static FILE *capture_open(const char *prefix, uint32_t rank, char *err, size_t errlen)
{
    char path[4096];
    if ((size_t)snprintf(path, sizeof(path), "%s.rank%u.f32", prefix, rank) >= sizeof(path)) {
        set_err(err, errlen, -ENAMETOOLONG, "--capture-gradients: the prefix is too long");
        return NULL;
    }
    FILE *f = fopen(path, "wb");
    if (!f)
        set_err(err, errlen, -errno, "--capture-gradients: cannot create %s: %s", path,
                strerror(errno));
    return f;
}

/* The inputs the parent loaded once for its forked ranks (they share its pages). */
typedef struct preload {
    glm_dataset_t train, test;
    int loaded; /* train holds the training set (run_local loaded it) */
} preload_t;

/* One rank: load (or take the parent's preload), join, train, report. 0 or 1 (the error was
 * reported). */
static int worker_main(const train_opts_t *o, uint32_t rank, uint32_t world, const char *addr,
                       const char *job, worker_ctx_t *w, const preload_t *pre)
{
    char err[1024];
    glm_dataset_t train, test;
    if (pre) {
        train = pre->train; /* this process's copy-on-write view; freed below as its own */
        test = pre->test;
    } else if (glm_load_inputs(o->data, o->synthetic, o->test, o->cfg.seed, o->cfg.objective,
                               o->precision, &train, &test, err, sizeof(err)) != 0) {
        w_error(w, err);
        return 1;
    }
    glm_coll_t *coll = NULL;
    int rc;
    if (o->cfg.mode == GLM_MODE_SINGLE)
        rc = glm_coll_local_create(&coll, err, sizeof(err));
    else {
        glm_coll_optimizer_t opt = {0};
        if (o->cfg.in_switch) {
            /* The switch needs the optimizer at join: the model's length, the rate and the
             * weight decay (= l2) must be resolved here, as glm_train would resolve them. */
            optim_config_t dflt = OPTIM_CONFIG_INIT;
            opt.kind = o->cfg.optimizer - 1;
            opt.params = train.cols;
            opt.lr = (float)glm_resolved_lr(&o->cfg, &train);
            opt.beta1 = dflt.beta1;
            opt.beta2 = dflt.beta2;
            opt.eps = dflt.eps;
            opt.weight_decay = (float)glm_resolved_l2(&o->cfg, &train);
            opt.eps_outside = o->cfg.eps_outside;
        }
        rc = glm_coll_inagg_create(
            &coll, addr, job, rank, world, o->protocol == 1,
            o->protocol == 1 || o->cfg.mode == GLM_MODE_MODEL ? p4sgd_slots(o) : 16,
            packet_elems(o), o->timeout_ms, o->cfg.in_switch ? &opt : NULL, o->compress,
            o->no_feedback, err, sizeof(err));
    }
    FILE *cap = NULL;
    if (rc == 0 && o->capture_prefix &&
        !(cap = capture_open(o->capture_prefix, rank, err, sizeof(err))))
        rc = -EIO;
    if (rc == 0) {
        glm_train_config_t cfg = o->cfg;
        cfg.progress = w_progress;
        cfg.progress_arg = w;
        cfg.progress_ms = w->run ? 100 : 250;
        cfg.capture = cap ? capture_write : NULL;
        cfg.capture_arg = cap;
        rc = glm_train(&cfg, coll, &train, o->test ? &test : NULL, w_setup, w_epoch, w, NULL, err,
                       sizeof(err));
    }
    if (cap && fclose(cap) != 0 && rc == 0) {
        rc = set_err(err, sizeof(err), -EIO,
                     "--capture-gradients: writing rank %u's file "
                     "failed: %s",
                     rank, strerror(errno));
    }
    if (rc != 0 && !w->write_failed && !(w->run && w->run->res->failed))
        w_error(w, err);
    glm_coll_destroy(coll);
    glm_dataset_free(&train);
    glm_dataset_free(&test);
    if (rc == 0) {
        glm_line_t l;
        glm_line_init(&l, GLM_LINE_DONE, (int)w->rank);
        emit(w, &l);
    }
    return rc == 0 ? 0 : 1;
}

/* ---- the local job: embedded switch + forked workers -------------------------------------- */

typedef struct rank_ctx {
    const train_opts_t *o;
    const char *addr, *job;
    const preload_t *pre;
} rank_ctx_t;

static int rank_main(uint32_t rank, int fd, void *arg)
{
    const rank_ctx_t *c = arg;
    signal(SIGPIPE, SIG_IGN);
    worker_ctx_t w = {NULL, fd, rank, 0};
    return worker_main(c->o, rank, c->o->workers, c->addr, c->job, &w, c->pre);
}

/* What the parent keeps of a rank's pipe: a partial line, and whether it finished. */
typedef struct child {
    int finished; /* done line seen */
    char buf[LINE_MAX_LEN];
    size_t len;
    uint64_t last_heard_ns;
} child_t;

static void feed_child(run_t *run, child_t *c, uint32_t rank, const char *data, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (data[i] != '\n') {
            if (c->len < sizeof(c->buf) - 1)
                c->buf[c->len++] = data[i];
            continue;
        }
        c->buf[c->len] = '\0';
        c->len = 0;
        glm_line_t l;
        if (glm_line_parse(c->buf, &l) == GLM_LINE_NONE)
            continue;
        if (l.type == GLM_LINE_DONE)
            c->finished = 1;
        record_line(run, &l, (int)rank);
    }
}

/* Rank r's pipe is readable or closed: its lines, or at EOF its exit. */
static void read_rank(run_t *run, launch_ranks_t *g, child_t *c, uint32_t r, uint64_t now)
{
    char data[8192];
    ssize_t got = read(g->fd[r], data, sizeof(data));
    if (got > 0) {
        c->last_heard_ns = now;
        feed_child(run, c, r, data, (size_t)got);
        return;
    }
    if (got < 0 && errno == EINTR)
        return;
    launch_ranks_wait_one(g, r, RANK_EXIT_MS); /* closes the pipe */
    int status = g->status[r];
    if (!c->finished && !run->res->failed) {
        run->res->failed = 1;
        if (WIFSIGNALED(status))
            snprintf(run->res->error, sizeof(run->res->error),
                     "rank %u was killed by signal %d (%s) without a report", r, WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(run->res->error, sizeof(run->res->error),
                     "rank %u exited with status %d without a report", r, WEXITSTATUS(status));
    }
}

/* Read every rank's reports until all pipes closed or the run failed. */
static void watch_ranks(const train_opts_t *o, run_t *run, launch_ranks_t *g, child_t *ch)
{
    uint32_t W = g->n;
    /* A rank is given up on when silent for this long: the library fails a collective after
     * timeout_ms, so a live worker always says something well before (loading included). */
    uint64_t idle_limit_ns = (uint64_t)o->timeout_ms * 4000000ull + 120000000000ull;
    for (uint32_t r = 0; r < W; r++)
        ch[r].last_heard_ns = util_now_ns();
    while (!run->res->failed) {
        struct pollfd pfd[LAUNCH_MAX_RANKS];
        uint32_t map[LAUNCH_MAX_RANKS];
        nfds_t n = 0;
        for (uint32_t r = 0; r < W; r++) {
            if (g->fd[r] >= 0) {
                pfd[n] = (struct pollfd){g->fd[r], POLLIN, 0};
                map[n++] = r;
            }
        }
        if (n == 0)
            break;
        int k = poll(pfd, n, 200);
        if (k < 0 && errno != EINTR) {
            snprintf(run->res->error, sizeof(run->res->error), "poll: %s", strerror(errno));
            run->res->failed = 1;
            break;
        }
        uint64_t now = util_now_ns();
        for (nfds_t i = 0; i < n && !run->res->failed; i++) {
            uint32_t r = map[i];
            if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                read_rank(run, g, &ch[r], r, now);
            } else if (now - ch[r].last_heard_ns > idle_limit_ns) {
                run->res->failed = 1;
                snprintf(run->res->error, sizeof(run->res->error),
                         "rank %u said nothing for %.0f s: killed", r,
                         (double)(now - ch[r].last_heard_ns) / 1e9);
            }
        }
    }
}

/* The ranks forked here; *in gets the inputs they trained on, kept for the reference (the
 * caller frees them). */
static int run_local(const train_opts_t *given, run_t *run, preload_t *in)
{
    /* The inputs and the default step size are the same for every rank (the same seed, a
     * deterministic calibration on the whole training set): made once here, before the ranks
     * fork, instead of once per rank. */
    train_opts_t local = *given;
    const train_opts_t *o = &local;
    char lerr[1024];
    if (glm_load_inputs(o->data, o->synthetic, o->test, o->cfg.seed, o->cfg.objective, o->precision,
                        &in->train, &in->test, lerr, sizeof(lerr)) != 0) {
        snprintf(run->res->error, sizeof(run->res->error), "%s", lerr);
        run->res->failed = 1;
        return -EIO;
    }
    in->loaded = 1;
    local.cfg.lr = glm_resolved_lr(&local.cfg, &in->train); /* lr_given stays as it was */
    uint16_t port = 0;
    switch_config_t scfg = SWITCH_CONFIG_INIT;
    scfg.listen = "127.0.0.1:0";
    scfg.worker_timeout_ms = o->timeout_ms;
    scfg.threads = o->switch_threads;
    char err[256];
    pid_t sw = launch_switch(&scfg, &port, err, sizeof(err));
    if (sw < 0) {
        snprintf(run->res->error, sizeof(run->res->error), "the embedded switch did not start");
        run->res->failed = 1;
        return -EIO;
    }
    char addr[64], job[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
    rank_ctx_t ctx = {o, addr, bench_job_name("train", job, sizeof(job)), in};
    child_t *ch = calloc(o->workers, sizeof(child_t));
    launch_ranks_t *g = calloc(1, sizeof(*g));
    if (!ch || !g) {
        snprintf(run->res->error, sizeof(run->res->error), "out of memory");
        run->res->failed = 1;
    } else if (launch_ranks_start(g, o->workers, rank_main, &ctx, LAUNCH_PIPE, err, sizeof(err)) !=
               0) {
        snprintf(run->res->error, sizeof(run->res->error), "%s", err);
        run->res->failed = 1;
    } else {
        watch_ranks(o, run, g, ch);
        launch_ranks_kill(g); /* the first failure ends the others */
    }
    free(g);
    free(ch);
    launch_switch_stop(sw);
    return run->res->failed ? -EIO : 0;
}

/* ---- the MPI backend ---------------------------------------------------------------------- */

static int mpi_line(const char *line, void *arg)
{
    run_t *run = arg;
    glm_line_t l;
    if (glm_line_parse(line, &l) == GLM_LINE_NONE) {
        if (run->view && run->view->text) /* something else the program or MPI printed */
            run->view->text(run->view->arg, line);
        return 0;
    }
    return record_line(run, &l, -1) == 0 ? 0 : 1;
}

static int run_mpi(const train_opts_t *o, run_t *run, const launch_mpirun_cfg_t *placement)
{
    char prog[4096];
    if (launch_find_program("inagg-mpi-train", "INAGG_MPI_TRAIN", prog, sizeof(prog)) != 0) {
        snprintf(
            run->res->error, sizeof(run->res->error),
            "--backend mpi needs the program '%.1000s', which is missing or not executable (it "
            "is built by `make` when mpicc is installed: apt-get install openmpi-bin "
            "libopenmpi-dev; $INAGG_MPI_TRAIN overrides the path)",
            prog[0] ? prog : "inagg-mpi-train");
        run->res->failed = 1;
        return -ENOENT;
    }
    char batch[32], mb[32], epochs[32], lr[64], l2[64], prec[16], seed[32];
    snprintf(batch, sizeof(batch), "%zu", o->cfg.batch);
    snprintf(mb, sizeof(mb), "%zu", o->cfg.micro_batch);
    snprintf(epochs, sizeof(epochs), "%u", o->cfg.epochs);
    snprintf(lr, sizeof(lr), "%.17g", o->cfg.lr);
    snprintf(l2, sizeof(l2), "%.17g", o->cfg.l2);
    snprintf(prec, sizeof(prec), "%d", o->precision);
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->cfg.seed);
    const char *args[40];
    size_t a = 0;
    args[a++] = o->data ? "--data" : "--synthetic";
    args[a++] = o->data ? o->data : o->synthetic;
    if (o->test) {
        args[a++] = "--test-data";
        args[a++] = o->test;
    }
    args[a++] = "--mode";
    args[a++] = glm_mode_name(o->cfg.mode);
    args[a++] = "--objective";
    args[a++] = glm_objective_name(o->cfg.objective);
    args[a++] = "--batch";
    args[a++] = batch;
    args[a++] = "--micro-batch";
    args[a++] = mb;
    args[a++] = "--epochs";
    args[a++] = epochs;
    if (o->lr_given) {
        args[a++] = "--lr";
        args[a++] = lr;
    }
    args[a++] = "--lr-schedule";
    args[a++] = o->cfg.schedule == GLM_LR_SQRT ? "sqrt" : "const";
    if (o->l2_given) {
        args[a++] = "--l2";
        args[a++] = l2;
    }
    if (!o->cfg.pipeline)
        args[a++] = "--no-pipeline";
    if (o->cfg.precondition == GLM_PRECOND_DIAG) {
        args[a++] = "--precondition";
        args[a++] = "diag";
    }
    if (o->cfg.average == GLM_AVG_NONE) {
        args[a++] = "--average";
        args[a++] = "none";
    }
    if (o->cfg.optimizer) {
        args[a++] = "--optimizer";
        args[a++] = optim_kind_name((optim_kind_t)(o->cfg.optimizer - 1));
        args[a++] = "--eps-place";
        args[a++] = o->cfg.eps_outside ? "outside" : "inside";
    }
    args[a++] = "--precision";
    args[a++] = prec;
    args[a++] = "--seed";
    args[a++] = seed;
    args[a] = NULL;
    launch_capture_t *cap = calloc(1, sizeof(*cap));
    if (!cap) {
        snprintf(run->res->error, sizeof(run->res->error), "out of memory");
        run->res->failed = 1;
        return -ENOMEM;
    }
    cap->on_line = mpi_line;
    cap->arg = run;
    char err[1024];
    int rc = launch_mpirun_cfg(placement, o->workers, prog, args, MPI_TIME_LIMIT_S, cap, err,
                               sizeof(err));
    free(cap);
    if (run->res->failed)
        return -EIO; /* a rank's own error line says more than mpirun's stderr */
    if (rc != 0) {
        run->res->failed = 1;
        snprintf(run->res->error, sizeof(run->res->error), "MPI run failed: %s", err);
        return -EIO;
    }
    if (run->res->done == 0) {
        run->res->failed = 1;
        snprintf(run->res->error, sizeof(run->res->error),
                 "the MPI run ended without its final report (%u of %u epochs)", run->res->nepochs,
                 o->cfg.epochs);
        return -EPROTO;
    }
    return 0;
}

/* ---- on a testbed ----------------------------------------------------------------------- */

/* Whether argv[i] is one of the options that describe this run rather than a rank's
 * training (the testbed's, the output's, the embedded switch's); *takes: it has a separate
 * value. */
static int parent_only(const char *a, int *takes)
{
    static const char *const names[] = {"--testbed", "--fabric", "--link-delay",     "--link-rate",
                                        "--json",    "--plot",   "--switch-threads", NULL};
    *takes = 0;
    for (int k = 0; names[k]; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
            *takes = a[n] == '\0';
            return 1;
        }
    }
    return 0;
}

/* Start rank r in host h(r+1): this binary, `train`, the command line's training options,
 * then --switch --rank --world --job --report-lines; its stdout on a pipe into g->fd[r]. */
static int start_testbed_rank(const train_opts_t *o, const launch_tbjob_t *j, const char *self,
                              const char *job, uint32_t r, launch_ranks_t *g, char *err,
                              size_t errlen)
{
    size_t cap = (size_t)o->argc + 24;
    char **cmd = calloc(cap, sizeof(char *)), **argv = calloc(cap + 8, sizeof(char *));
    char host[16], rank[16], world[16];
    int rc = -ENOMEM, p[2] = {-1, -1};
    if (!cmd || !argv) {
        set_err(err, errlen, rc, "out of memory");
        goto out;
    }
    snprintf(host, sizeof(host), "h%u", r + 1);
    snprintf(rank, sizeof(rank), "%u", r);
    snprintf(world, sizeof(world), "%u", o->workers);
    size_t n = 0;
    cmd[n++] = (char *)self;
    cmd[n++] = "train";
    for (int i = 1; i < o->argc; i++) {
        int takes;
        if (strcmp(o->argv[i], "train") == 0 && i == 1)
            continue;
        if (parent_only(o->argv[i], &takes)) {
            i += takes;
            continue;
        }
        cmd[n++] = o->argv[i];
    }
    const char *tail[] = {"--switch", j->sw_addr, "--rank",         rank, "--world", world,
                          "--job",    job,        "--report-lines", NULL};
    for (int k = 0; tail[k]; k++)
        cmd[n++] = (char *)tail[k];
    cmd[n] = NULL;
    if (launch_testbed_argv(&j->tb, host, cmd, argv, cap + 8) == 0) {
        rc = set_err(err, errlen, -E2BIG, "rank %u's command line is too long", r);
        goto out;
    }
    if (pipe2(p, O_CLOEXEC) != 0) {
        rc = set_err(err, errlen, -errno, "pipe: %s", strerror(errno));
        goto out;
    }
    launch_spec_t spec = {argv, NULL, LAUNCH_DEVNULL, p[1], LAUNCH_INHERIT, 1, 0};
    pid_t pid = launch_spawn(&spec, err, errlen);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        rc = (int)pid;
        goto out;
    }
    g->pid[r] = pid;
    g->fd[r] = p[0];
    g->reaped[r] = 0;
    rc = 0;
out:
    free(cmd);
    free(argv);
    return rc;
}

/* The job across a testbed built here: the switch (or mpirun) and one rank per host. */
static int run_testbed(const train_opts_t *o, run_t *run)
{
    launch_tbjob_t *j = calloc(1, sizeof(*j));
    child_t *ch = calloc(o->workers, sizeof(child_t));
    launch_ranks_t *g = calloc(1, sizeof(*g));
    char err[1024], self[PATH_MAX], job[64];
    int up = 0;
    if (!j || !ch || !g) {
        snprintf(run->res->error, sizeof(run->res->error), "out of memory");
        goto fail;
    }
    j->tb.fabric = o->fabric;
    j->tb.link_delay = o->link_delay;
    int rc = launch_tbjob_up(j, o->testbed, o->link_rate ? o->link_rate : "none", 9000, 0, err,
                             sizeof(err));
    if (rc != 0) {
        snprintf(run->res->error, sizeof(run->res->error), "%s", err);
        if (rc == -EOPNOTSUPP)
            run->res->cannot = 1;
        goto fail;
    }
    up = 1;
    if (o->backend_mpi) {
        rc = run_mpi(o, run, &j->mpi);
        goto done;
    }
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    if (launch_tbjob_switch(j, self, o->switch_threads, err, sizeof(err)) != 0 ||
        launch_job_secret(err, sizeof(err)) != 0) {
        snprintf(run->res->error, sizeof(run->res->error), "%s", err);
        goto fail;
    }
    bench_job_name("train", job, sizeof(job));
    g->n = o->workers;
    for (uint32_t r = 0; r < o->workers; r++) {
        g->fd[r] = -1;
        g->reaped[r] = 1;
    }
    for (uint32_t r = 0; r < o->workers; r++) {
        if (start_testbed_rank(o, j, self, job, r, g, err, sizeof(err)) != 0) {
            snprintf(run->res->error, sizeof(run->res->error), "rank %u could not start: %s", r,
                     err);
            run->res->failed = 1;
            break;
        }
    }
    if (!run->res->failed)
        watch_ranks(o, run, g, ch);
    launch_ranks_kill(g); /* the first failure ends the others */
    rc = run->res->failed ? -EIO : 0;
done:
    launch_tbjob_down(j);
    free(j);
    free(ch);
    free(g);
    return rc;
fail:
    run->res->failed = 1;
    if (up)
        launch_tbjob_down(j);
    free(j);
    free(ch);
    free(g);
    return -EIO;
}

/* ---- the run ------------------------------------------------------------------------------ */

int train_is_rank0(const train_opts_t *o) { return !o->switch_addr || o->rank == 0; }

int train_check_memory(const train_opts_t *o, char *err, size_t errlen)
{
    uint64_t bytes;
    char why[512];
    if (!o->synthetic || o->report_lines ||
        glm_synthetic_bytes(o->synthetic, &bytes, why, sizeof(why)) != 0)
        return 0; /* a bad spec is refused where the data is made, with its reason */
    unsigned copies =
        o->cfg.mode != GLM_MODE_SINGLE && (o->testbed || o->backend_mpi) ? o->workers : 1;
    char what[160];
    snprintf(what, sizeof(what), "--synthetic %s (%u %s)", o->synthetic, copies,
             copies == 1 ? "copy" : "copies, one per rank");
    return launch_mem_check(bytes * copies, what, err, errlen) == 0 ? 0 : -ENOMEM;
}

/* The job in the way o asks: one process, a testbed, MPI, one rank here, or local ranks. */
static int run_job(const train_opts_t *o, run_t *run, preload_t *in)
{
    if (o->cfg.mode == GLM_MODE_SINGLE) {
        worker_ctx_t w = {run, -1, 0, 0};
        return worker_main(o, 0, 1, NULL, NULL, &w, NULL) == 0 && !run->res->failed ? 0 : -EIO;
    }
    if (o->testbed)
        return run_testbed(o, run);
    if (o->backend_mpi)
        return run_mpi(o, run, NULL);
    if (o->switch_addr) {
        worker_ctx_t w = {run, -1, (uint32_t)o->rank, 0};
        int rc = worker_main(o, (uint32_t)o->rank, (uint32_t)o->world, o->switch_addr,
                             o->job ? o->job : "train", &w, NULL);
        return rc == 0 && !run->res->failed ? 0 : -EIO;
    }
    return run_local(o, run, in);
}

int train_run(const train_opts_t *o, const train_view_t *view, train_result_t *res)
{
    memset(res, 0, sizeof(*res));
    signal(SIGPIPE, SIG_IGN);
    if (o->report_lines) {
        /* One rank of a testbed run: report lines on stdout for the parent to render. */
        worker_ctx_t w = {NULL, STDOUT_FILENO, (uint32_t)o->rank, 0};
        int rc = worker_main(o, (uint32_t)o->rank, (uint32_t)o->world, o->switch_addr,
                             o->job ? o->job : "train", &w, NULL);
        return rc == 0 ? 0 : -EIO;
    }
    uint64_t t_start = util_now_ns();
    run_t run = {o, res, view};
    preload_t in;
    memset(&in, 0, sizeof(in));
    int rc = run_job(o, &run, &in);
    res->seconds = (double)(util_now_ns() - t_start) / 1e9;
    if (rc == 0 && res->failed)
        rc = -EIO;
    if (rc != 0) {
        res->failed = 1;
        if (!res->error[0])
            snprintf(res->error, sizeof(res->error), "training failed");
    } else if (train_is_rank0(o)) {
        /* measured after the run: its work would have slowed the ranks' epochs */
        train_reference_compute(o, res, in.loaded ? &in.train : NULL, &res->ref);
    }
    glm_dataset_free(&in.train);
    glm_dataset_free(&in.test);
    return rc;
}

void train_result_free(train_result_t *res)
{
    free(res->epochs);
    res->epochs = NULL;
    res->nepochs = 0;
}
