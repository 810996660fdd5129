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
 * --mode single trains in this process. --switch HOST:PORT runs one rank here (multi-host;
 * rank and world from flags or the launcher's environment). --backend mpi runs the same
 * trainers under mpirun (train_mpi.c); --testbed N, one rank per host of a testbed of
 * namespaces (train_testbed.c).
 * Every wait is bounded: the library's per-call timeout, a watchdog on silent workers, and
 * the first failure kills the remaining workers.
 */
#include <errno.h>
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
#include "apps/train/train_int.h"
#include "apps/train/train_run.h"
#include "inagg.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/kernels/optim.h"
#include "switchd/switchd.h"

#define P4SGD_PACKET_ELEMS 1024u /* >= micro-batch; evaluation allreduces go in big chunks */
#define MAX_SLOTS 256u
#define RANK_EXIT_MS 10000 /* a rank whose pipe closed exits within this */

/* Record one report line of rank from_rank (-1: the line's own) and tell the view. 0 to carry
 * on, a negative errno once the run has failed (res->error says why). */
int train_record_line(run_t *run, const glm_line_t *l, int from_rank)
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
        int rc = train_record_line(w->run, l, (int)w->rank);
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
        train_record_line(run, &l, (int)rank);
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
void train_watch_ranks(const train_opts_t *o, run_t *run, launch_ranks_t *g, child_t *ch)
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
        train_watch_ranks(o, run, g, ch);
        launch_ranks_kill(g); /* the first failure ends the others */
    }
    free(g);
    free(ch);
    launch_switch_stop(sw);
    return run->res->failed ? -EIO : 0;
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
        return train_run_testbed(o, run);
    if (o->backend_mpi)
        return train_run_mpi(o, run, NULL);
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
