/*
 * test_train.c - the GLM trainers (glm/train.c) over the collective backends: model
 * parallelism over inagg's p4sgd protocol follows the single-process trajectory within a
 * derived float-rounding bound, pipelined == unpipelined bit for bit, data parallelism over
 * switchml follows within the fixed-point bound, the a9a result against liblinear, the MPI
 * backend, the report lines, a failing worker's message through `inagg train`, and a diverged
 * run's error code (the collective's own, -EDOM).
 *
 * The tolerance (also in docs/TRAINING.md). Single and W-rank model training see the same
 * samples in the same order and run the same update expression; they differ only in how an
 * activation z = a.x is rounded: single rounds the double dot product to float once (error
 * <= u|z|), W ranks round W partial sums and the switch adds W floats in rank order (error
 * <= W u sum_i |p_i|), u = 2^-24. Both are within u (W+1) ||a|| ||x|| <= u (W+1) A X of the
 * exact value (A = max row norm, X = the largest ||x|| on the path). The loss derivative is
 * beta-Lipschitz in z (logistic: 1/4), so one step's gradient differs by at most
 * lr beta u (W+1) A^2 X, and the rounding of the stored float model adds at most u X. A
 * mini-batch SGD step on a convex beta A^2 + l2 smooth objective is non-expansive when
 * lr (beta A^2 + l2) <= 2 (checked), so these perturbations add up without growing:
 *     ||x_W - x_1|| <= u X sum_t (lr_t beta (W+1) A^2 + 1)                        (dx)
 * The objective is (A + l2 X)-Lipschitz in x along the path (|dloss| <= 1 for logistic), and
 * its evaluation rounds z the same way (the loss is 1-Lipschitz in z) and sums ||x||^2 in
 * float:  |F_W - F_1| <= (A + l2 X) dx + u (W+1) A X + l2 W u X^2.
 * X is taken as twice the largest ||x|| seen at the ends of epochs (the path of a decreasing
 * rate is smooth; the factor covers excursions within an epoch).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/glm/collective.h"
#include "apps/glm/dataset.h"
#include "apps/glm/objective.h"
#include "apps/glm/reference.h"
#include "apps/glm/synth.h"
#include "apps/glm/train.h"
#include "apps/launch/launch.h"
#include "harness.h"
#include "lib/base/util.h"
#include "testutil.h"

#define MAX_EPOCHS 32
#define U32 (1.0 / 16777216.0) /* u = 2^-24, float32 unit roundoff */

/* The small synthetic problem of the trajectory tests: 3000 unit-norm sparse rows. */
#define SMALL_SPEC "sparse:3000x600:0.03"
#define SMALL_SEED 5

typedef struct run_out {
    glm_epoch_record_t rec[MAX_EPOCHS];
    uint32_t nrec;
    glm_setup_record_t setup;
} run_out_t;

typedef struct job {
    const char *spec, *path; /* synthetic spec or LIBSVM file */
    uint64_t seed;
    glm_train_config_t cfg;
    uint32_t world;
    int p4sgd;
    uint32_t slots;
    const char *addr;
    char name[64];
    /* shared with the forked ranks */
    run_out_t *out; /* rank 0's records */
    float *weights; /* world x cols */
    size_t cols;
    char (*err)[512];
} job_t;

static int rec_epoch(const glm_epoch_record_t *e, void *arg)
{
    run_out_t *o = arg;
    if (o->nrec < MAX_EPOCHS)
        o->rec[o->nrec++] = *e;
    return 0;
}

static int rec_setup(const glm_setup_record_t *s, void *arg)
{
    run_out_t *o = arg;
    o->setup = *s;
    return 0;
}

static void load(const job_t *j, glm_dataset_t *d)
{
    glm_dataset_t test;
    char err[512];
    int rc = glm_load_inputs(j->path, j->path ? NULL : j->spec, NULL, j->seed, j->cfg.objective, 32,
                             d, &test, err, sizeof(err));
    CHECK_MSG(rc == 0, "loading: %s", err);
}

/* Single-process reference in this process; weights malloc'd into *w. */
static void run_single(const job_t *j, run_out_t *out, float **w)
{
    glm_dataset_t d;
    load(j, &d);
    glm_coll_t *c;
    char err[512];
    CHECK(glm_coll_local_create(&c, err, sizeof(err)) == 0);
    glm_train_config_t cfg = j->cfg;
    cfg.mode = GLM_MODE_SINGLE;
    memset(out, 0, sizeof(*out));
    int rc = glm_train(&cfg, c, &d, NULL, rec_setup, rec_epoch, out, w, err, sizeof(err));
    CHECK_MSG(rc == 0, "single: %s", err);
    /* The weights handed back are the model the last record evaluated. */
    if (w && *w && out->nrec > 0) {
        double *wd = malloc(d.cols * sizeof(double));
        for (size_t k = 0; k < d.cols; k++)
            wd[k] = (*w)[k];
        double obj = glm_objective_of_weights(cfg.objective, &d, wd, d.cols, out->setup.l2);
        double last = out->rec[out->nrec - 1].objective;
        CHECK_MSG(fabs(obj - last) <= 1e-5 * fabs(last),
                  "final weights give objective %.9g, "
                  "the last epoch reported %.9g",
                  obj, last);
        free(wd);
    }
    glm_coll_destroy(c);
    glm_dataset_free(&d);
}

static int rank_main(uint32_t rank, void *arg)
{
    job_t *j = arg;
    glm_dataset_t d;
    char err[512];
    enum glm_label_kind kind =
        j->cfg.objective == GLM_OBJ_SQUARED ? GLM_LABELS_REAL : GLM_LABELS_BINARY;
    int rc = j->path ? glm_load_libsvm(j->path, kind, &d, err, sizeof(err))
                     : glm_synthetic(j->spec, j->seed, kind, &d, err, sizeof(err));
    glm_coll_t *c = NULL;
    if (rc == 0)
        rc = glm_coll_inagg_create(&c, j->addr, j->name, rank, j->world, j->p4sgd, j->slots,
                                   j->p4sgd ? 1024 : 0, 20000, NULL, NULL, 0, err, sizeof(err));
    float *w = NULL;
    run_out_t local;
    memset(&local, 0, sizeof(local));
    if (rc == 0)
        rc = glm_train(&j->cfg, c, &d, NULL, rec_setup, rec_epoch, &local, &w, err, sizeof(err));
    if (rc == 0) {
        if (rank == 0)
            *j->out = local;
        memcpy(j->weights + (size_t)rank * j->cols, w, j->cols * sizeof(float));
    } else {
        snprintf(j->err[rank], sizeof(j->err[rank]), "%s", err);
    }
    free(w);
    glm_coll_destroy(c);
    glm_dataset_free(&d);
    return rc == 0 ? 0 : 1;
}

/* Run job j on `world` ranks over a fresh switch; the summed weights go to w (cols). */
static void run_inagg(job_t *j, uint32_t world, run_out_t *out, float *w, int timeout_s)
{
    static int serial;
    glm_dataset_t d;
    load(j, &d);
    j->cols = d.cols;
    glm_dataset_free(&d);
    j->world = world;
    snprintf(j->name, sizeof(j->name), "train-test-%d-%d", (int)getpid(), serial++);
    j->out = shared_alloc(sizeof(run_out_t));
    j->weights = shared_alloc(world * j->cols * sizeof(float));
    j->err = shared_alloc(world * sizeof(*j->err));
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    j->addr = ts.addr;
    int failed = run_workers(world, rank_main, j, timeout_s);
    ts_stop(&ts);
    for (uint32_t r = 0; r < world && failed; r++)
        if (j->err[r][0])
            harness_fail(__FILE__, __LINE__, "rank %u: %s", r, j->err[r]);
    CHECK_MSG(failed == 0, "%d ranks failed without a message", failed);
    *out = *j->out;
    memset(w, 0, j->cols * sizeof(float));
    for (uint32_t r = 0; r < world; r++)
        for (size_t c = 0; c < j->cols; c++)
            w[c] += j->weights[(size_t)r * j->cols + c]; /* slices are disjoint: exact */
}

static double max_row_norm(const glm_dataset_t *d, double *max_abs)
{
    double best = 0, amax = 0;
    for (size_t r = 0; r < d->rows; r++) {
        double s = 0;
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++) {
            s += (double)d->val[k] * d->val[k];
            amax = fmax(amax, fabs((double)d->val[k]));
        }
        best = fmax(best, s);
    }
    if (max_abs)
        *max_abs = amax;
    return sqrt(best);
}

static double dist(const float *a, const float *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s);
}

/* Steps per epoch. */
static double steps(size_t rows, size_t batch) { return (double)((rows + batch - 1) / batch); }

static job_t small_job(glm_mode_t mode)
{
    job_t j;
    memset(&j, 0, sizeof(j));
    j.spec = SMALL_SPEC;
    j.seed = SMALL_SEED;
    glm_train_config_t cfg = GLM_TRAIN_CONFIG_INIT;
    cfg.mode = mode;
    cfg.epochs = 4;
    cfg.seed = 11;
    j.cfg = cfg;
    j.p4sgd = mode == GLM_MODE_MODEL;
    j.slots = 16;
    return j;
}

TEST(train_model_parallel_follows_single, 120)
{
    job_t j = small_job(GLM_MODE_MODEL);
    glm_dataset_t d;
    load(&j, &d);
    /* The bound below needs non-expansive steps: the curvature bound's rate, not the
     * calibrated default (which may be larger). */
    j.cfg.lr = glm_default_lr(&d, j.cfg.objective);
    double A = max_row_norm(&d, NULL);
    size_t S = d.rows, cols = d.cols;
    run_out_t ref;
    float *w_ref = NULL;
    run_single(&j, &ref, &w_ref);
    CHECK_EQ_INT(ref.nrec, j.cfg.epochs);
    double lr = ref.setup.lr, l2 = ref.setup.l2, beta = 0.25, X = 0;
    /* Preconditions of the bound: a non-expansive step, and real learning to follow. */
    CHECK_MSG(lr * (beta * A * A + l2) <= 2, "lr %g, A %g: the step may expand", lr, A);
    CHECK_MSG(ref.rec[j.cfg.epochs - 1].objective < ref.rec[0].objective - 0.02,
              "the reference does not learn: %g -> %g", ref.rec[0].objective,
              ref.rec[j.cfg.epochs - 1].objective);
    for (uint32_t e = 0; e < ref.nrec; e++)
        X = fmax(X, 2 * ref.rec[e].weight_norm);
    float *w = calloc(cols, sizeof(float));
    const uint32_t worlds[] = {1, 2, 4};
    for (size_t k = 0; k < INAGG_ARRAY_LEN(worlds); k++) {
        uint32_t W = worlds[k];
        run_out_t got;
        run_inagg(&j, W, &got, w, 60);
        CHECK_EQ_INT(got.nrec, ref.nrec);
        double sum = 0, worst = 0;
        for (uint32_t e = 0; e < ref.nrec; e++) {
            sum += steps(S, j.cfg.batch) * (ref.rec[e].lr * beta * (W + 1) * A * A + 1);
            double dx = U32 * X * sum;
            double tol = (A + l2 * X) * dx + U32 * (W + 1) * A * X + l2 * W * U32 * X * X;
            double diff = fabs(got.rec[e].objective - ref.rec[e].objective);
            CHECK_MSG(diff <= tol,
                      "W=%u epoch %u: objective %.12g vs single %.12g (diff %.3g > "
                      "bound %.3g)",
                      W, e + 1, got.rec[e].objective, ref.rec[e].objective, diff, tol);
            CHECK_MSG(got.rec[e].accuracy == ref.rec[e].accuracy ||
                          fabs(got.rec[e].accuracy - ref.rec[e].accuracy) <= 2.5 / S,
                      "W=%u epoch %u: accuracy %g vs %g", W, e + 1, got.rec[e].accuracy,
                      ref.rec[e].accuracy);
            worst = fmax(worst, diff / tol);
            if (e + 1 == ref.nrec) {
                double dw = dist(w, w_ref, cols);
                CHECK_MSG(dw <= dx, "W=%u: ||w - w_single|| = %.3g > bound %.3g", W, dw, dx);
                /* The bound is meaningful: far below what training gained (from log 2 at w = 0). */
                CHECK_MSG(tol < 0.02 * (log(2.0) - ref.rec[e].objective),
                          "bound %.3g is too loose to test anything", tol);
            }
        }
        if (W == 1) /* one rank: the same arithmetic as single, bit for bit */
            CHECK(memcmp(w, w_ref, cols * sizeof(float)) == 0);
        printf("    W=%u: worst objective difference %.3g of the bound\n", W, worst);
    }
    free(w);
    free(w_ref);
    glm_dataset_free(&d);
}

TEST(train_pipelined_equals_unpipelined_bitwise, 90)
{
    job_t j = small_job(GLM_MODE_MODEL);
    j.cfg.epochs = 3;
    j.cfg.batch = 128;
    j.cfg.micro_batch = 4; /* 32 micro-batches per mini-batch over 16 slots: windowed */
    glm_dataset_t d;
    load(&j, &d);
    size_t cols = d.cols;
    glm_dataset_free(&d);
    run_out_t piped, plain;
    float *wp = calloc(cols, sizeof(float)), *wn = calloc(cols, sizeof(float));
    j.cfg.pipeline = 1;
    run_inagg(&j, 4, &piped, wp, 60);
    j.cfg.pipeline = 0;
    run_inagg(&j, 4, &plain, wn, 60);
    CHECK_EQ_INT(piped.nrec, 3);
    CHECK_EQ_INT(plain.nrec, 3);
    for (uint32_t e = 0; e < 3; e++) {
        CHECK_MSG(memcmp(&piped.rec[e].objective, &plain.rec[e].objective, sizeof(double)) == 0,
                  "epoch %u: %.17g vs %.17g", e + 1, piped.rec[e].objective,
                  plain.rec[e].objective);
        CHECK(piped.rec[e].accuracy == plain.rec[e].accuracy);
    }
    CHECK(memcmp(wp, wn, cols * sizeof(float)) == 0);
    CHECK(piped.rec[2].objective < piped.rec[0].objective);
    free(wp);
    free(wn);
}

/*
 * Data parallelism: the global mini-batches are the same samples as single's; each rank sums
 * its share in double, rounds it to float (<= u |g|) and the switch adds W block-fixed-point
 * values: error per element <= W (0.5 + 2^-20) / f with f = (2^31-1) / (W 2^m) and 2^m <=
 * 2 max|g| <= 2 b amax (amax the largest |feature|, |dloss| <= 1), plus half an ulp of the
 * sum. Divided by b, the averaged gradient is off by at most
 * amax (W^2 2^-30 (1 + 2^-19) + (W + 1) u) per coordinate, sqrt(D) times that as a vector;
 * with the rounding of the stored model (u X per step) and the non-expansive steps:
 *     ||x_data - x_1|| <= sum_t (lr_t sqrt(D) amax (W^2 2^-30 (1+2^-19) + (W+1) u) + u X),
 * and the objective as in the model-parallel bound (its evaluation sums float loss sums).
 */
TEST(train_data_parallel_converges_like_single, 120)
{
    job_t j = small_job(GLM_MODE_DATA);
    glm_dataset_t d;
    load(&j, &d);
    j.cfg.lr = glm_default_lr(&d, j.cfg.objective); /* non-expansive steps, as above */
    double amax = 0, A = max_row_norm(&d, &amax);
    size_t S = d.rows, D = d.cols;
    run_out_t ref;
    float *w_ref = NULL;
    run_single(&j, &ref, &w_ref);
    double l2 = ref.setup.l2, X = 0;
    for (uint32_t e = 0; e < ref.nrec; e++)
        X = fmax(X, 2 * ref.rec[e].weight_norm);
    const uint32_t W = 3;
    float *w = calloc(D, sizeof(float));
    run_out_t got;
    run_inagg(&j, W, &got, w, 60);
    for (size_t c = 0; c < D; c++)
        w[c] /= (float)W; /* every rank holds the whole model */
    CHECK_EQ_INT(got.nrec, ref.nrec);
    double per =
        sqrt((double)D) * amax * (W * W * ldexp(1.0, -30) * (1 + ldexp(1.0, -19)) + (W + 1) * U32);
    double dx = 0;
    for (uint32_t e = 0; e < got.nrec; e++)
        dx += steps(S, j.cfg.batch) * (ref.rec[e].lr * per + U32 * X);
    double tol = (A + l2 * X) * dx + 2 * W * U32 * ref.rec[got.nrec - 1].objective;
    double first = got.rec[0].objective, last = got.rec[got.nrec - 1].objective;
    CHECK_MSG(last < first - 0.02, "data-parallel does not learn: %g -> %g", first, last);
    for (uint32_t e = 1; e < got.nrec; e++)
        CHECK_MSG(got.rec[e].objective < got.rec[e - 1].objective, "epoch %u went up", e + 1);
    double diff = fabs(last - ref.rec[ref.nrec - 1].objective);
    CHECK_MSG(diff <= tol, "final objective %.10g vs single %.10g: diff %.3g > bound %.3g", last,
              ref.rec[ref.nrec - 1].objective, diff, tol);
    CHECK_MSG(tol < 0.2 * (first - last), "bound %.3g too loose to test anything", tol);
    printf("    data-parallel: final objective diff %.3g, bound %.3g\n", diff, tol);
    free(w);
    free(w_ref);
    glm_dataset_free(&d);
}

TEST(train_a9a_logistic_within_1pct_of_liblinear, 240)
{
    const char *path = harness_dataset("a9a");
    if (!path)
        SKIP("../shared/datasets/a9a is absent");
    if (!liblinear_available())
        SKIP("liblinear-train is not installed (apt-get install liblinear-tools)");
    double *wl = NULL, ref = 0;
    size_t nwl = 0;
    char err[512];
    CHECK_MSG(liblinear_reference(path, 1.0, 1e-4, 60, &wl, &nwl, &ref, err, sizeof(err)) == 0,
              "liblinear: %s", err);
    free(wl);
    CHECK_MSG(fabs(ref - 0.3234) < 0.002, "liblinear's optimum %.6f, expected about 0.3234", ref);
    job_t j;
    memset(&j, 0, sizeof(j));
    j.path = path;
    glm_train_config_t cfg = GLM_TRAIN_CONFIG_INIT; /* the command's defaults */
    cfg.epochs = 20;
    j.cfg = cfg; /* l2 < 0: 1/S, liblinear's C = 1 */
    j.p4sgd = 1;
    j.slots = 16;
    run_out_t got;
    float *w = calloc(124, sizeof(float));
    run_inagg(&j, 4, &got, w, 200);
    CHECK_EQ_INT(got.nrec, 20);
    const glm_epoch_record_t *last = &got.rec[19];
    printf("    a9a: objective %.6f vs liblinear %.6f (+%.3f%%), accuracy %.4f, %.3f s/epoch\n",
           last->objective, ref, 100 * (last->objective / ref - 1), last->accuracy, last->seconds);
    CHECK_MSG(last->objective <= 1.01 * ref, "objective %.6f is not within 1%% of %.6f",
              last->objective, ref);
    CHECK_MSG(last->accuracy >= 0.84, "training accuracy %.4f < 0.84", last->accuracy);
    free(w);
}

TEST(train_a9a_squared_and_hinge_decrease, 180)
{
    const char *path = harness_dataset("a9a");
    if (!path)
        SKIP("../shared/datasets/a9a is absent");
    const glm_objective_t objs[] = {GLM_OBJ_SQUARED, GLM_OBJ_HINGE};
    const double at_zero[] = {0.5, 1.0}; /* mean y^2/2 and mean max(0, 1) at w = 0 */
    for (size_t k = 0; k < 2; k++) {
        job_t j;
        memset(&j, 0, sizeof(j));
        j.path = path;
        glm_train_config_t cfg = GLM_TRAIN_CONFIG_INIT;
        cfg.objective = objs[k];
        cfg.epochs = 3;
        j.cfg = cfg;
        j.p4sgd = 1;
        j.slots = 16;
        run_out_t got;
        float *w = calloc(124, sizeof(float));
        run_inagg(&j, 2, &got, w, 120);
        CHECK_EQ_INT(got.nrec, 3);
        printf("    %s: %.5f %.5f %.5f (accuracy %.4f)\n", glm_objective_name(objs[k]),
               got.rec[0].objective, got.rec[1].objective, got.rec[2].objective,
               got.rec[2].accuracy);
        CHECK_MSG(got.rec[0].objective < 0.8 * at_zero[k], "%s: first epoch %.4f vs %.4f at 0",
                  glm_objective_name(objs[k]), got.rec[0].objective, at_zero[k]);
        CHECK_MSG(got.rec[2].objective < got.rec[0].objective, "%s: %.5f -> %.5f",
                  glm_objective_name(objs[k]), got.rec[0].objective, got.rec[2].objective);
        CHECK(got.rec[2].accuracy > 0.8);
        free(w);
    }
}

/* ---- MPI ------------------------------------------------------------------------------------ */

typedef struct mpi_lines {
    run_out_t out;
    int done, errors;
    char error[1024];
} mpi_lines_t;

static int on_mpi_line(const char *line, void *arg)
{
    mpi_lines_t *m = arg;
    glm_line_t l;
    switch (glm_line_parse(line, &l)) {
        case GLM_LINE_SETUP: m->out.setup = l.setup; break;
        case GLM_LINE_EPOCH: rec_epoch(&l.epoch, &m->out); break;
        case GLM_LINE_DONE: m->done++; break;
        case GLM_LINE_ERROR:
            m->errors++;
            snprintf(m->error, sizeof(m->error), "%s", l.message);
            break;
        default: break;
    }
    return 0;
}

TEST(train_mpi_model_parallel_follows_single, 180)
{
    char mpirun[PATH_MAX], prog[PATH_MAX + 32];
    if (launch_find_mpirun(mpirun, sizeof(mpirun)) != 0)
        SKIP("mpirun is not installed");
    snprintf(prog, sizeof(prog), "%s/inagg-mpi-train", harness_build_dir());
    if (access(prog, X_OK) != 0)
        SKIP("inagg-mpi-train was not built (no mpicc)");
    /* The command's --seed seeds both the synthetic data and the shuffle. */
    job_t k = small_job(GLM_MODE_MODEL);
    k.cfg.epochs = 3;
    k.cfg.seed = SMALL_SEED;
    glm_dataset_t d;
    load(&k, &d);
    k.cfg.lr = glm_default_lr(&d, k.cfg.objective); /* non-expansive steps, as above */
    char lr_arg[32];
    snprintf(lr_arg, sizeof(lr_arg), "%.17g", k.cfg.lr);
    double A = max_row_norm(&d, NULL);
    size_t S = d.rows;
    glm_dataset_free(&d);
    run_out_t ref;
    float *w_ref = NULL;
    run_single(&k, &ref, &w_ref);
    free(w_ref);
    char seed[16];
    snprintf(seed, sizeof(seed), "%d", SMALL_SEED);
    const char *args[] = {"--synthetic", SMALL_SPEC, "--seed", seed,   "--mode", "model",
                          "--epochs",    "3",        "--lr",   lr_arg, NULL};
    mpi_lines_t *m = calloc(1, sizeof(*m));
    launch_capture_t *cap = calloc(1, sizeof(*cap));
    CHECK(m && cap);
    cap->on_line = on_mpi_line;
    cap->arg = m;
    char err[1024];
    int rc = launch_mpirun(2, prog, args, 150, cap, err, sizeof(err));
    free(cap);
    CHECK_MSG(rc == 0 && m->errors == 0, "mpirun: %s %s", err, m->error);
    CHECK_EQ_INT(m->done, 1);
    CHECK_EQ_INT(m->out.nrec, 3);
    double lr = ref.setup.lr, l2 = ref.setup.l2, beta = 0.25, X = 0, sum = 0;
    const uint32_t W = 2;
    for (uint32_t e = 0; e < ref.nrec; e++)
        X = fmax(X, 2 * ref.rec[e].weight_norm);
    CHECK(lr * (beta * A * A + l2) <= 2);
    for (uint32_t e = 0; e < ref.nrec; e++) {
        sum += steps(S, k.cfg.batch) * (ref.rec[e].lr * beta * (W + 1) * A * A + 1);
        double tol = (A + l2 * X) * U32 * X * sum + U32 * (W + 1) * A * X + l2 * W * U32 * X * X;
        double diff = fabs(m->out.rec[e].objective - ref.rec[e].objective);
        CHECK_MSG(diff <= tol, "MPI epoch %u: %.12g vs single %.12g (diff %.3g > %.3g)", e + 1,
                  m->out.rec[e].objective, ref.rec[e].objective, diff, tol);
    }
    CHECK_EQ_INT((long long)m->out.setup.rows, (long long)S);
    free(m);
}

/* ---- failures and formats ------------------------------------------------------------------ */

/* Run the inagg binary with args, stderr into buf; returns the exit status (or -1). */
static int run_cli(const char *const *args, char *buf, size_t len, int timeout_s)
{
    char bin[PATH_MAX + 16];
    snprintf(bin, sizeof(bin), "%s/inagg", harness_build_dir());
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    char *argv[32];
    size_t a = 0;
    argv[a++] = bin;
    for (size_t i = 0; args[i] && a < 31; i++)
        argv[a++] = (char *)args[i];
    argv[a] = NULL;
    launch_spec_t spec = {argv, NULL, LAUNCH_INHERIT, LAUNCH_DEVNULL, p[1], 0};
    char err[256];
    pid_t pid = launch_spawn(&spec, err, sizeof(err));
    close(p[1]);
    CHECK_MSG(pid > 0, "%s", err);
    size_t got = 0;
    ssize_t n;
    while (got + 1 < len && (n = read(p[0], buf + got, len - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(p[0]);
    return wait_pid(pid, timeout_s);
}

TEST(train_failing_worker_reports_reader_message, 60)
{
    char dir[] = "/tmp/inagg-train-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[128];
    snprintf(path, sizeof(path), "%s/cut.svm", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "+1 1:0.5 3:1\n-1 2:1 4:0.25\n+1 1:1 5:"); /* cut in the middle of line 3 */
    fclose(f);
    char err[4096];
    const char *args[] = {"train",    "--data", path,        "--workers", "3",
                          "--epochs", "1",      "--timeout", "5000",      NULL};
    uint64_t t0 = util_now_ns();
    int rc = run_cli(args, err, sizeof(err), 50);
    double s = (double)(util_now_ns() - t0) / 1e9;
    unlink(path);
    rmdir(dir);
    CHECK_MSG(rc == 1, "exit %d, stderr: %s", rc, err);
    char where[160];
    snprintf(where, sizeof(where), "%s:3:", path);
    /* the inputs are read once, before the ranks start: the reader's message, no rank's */
    CHECK_MSG(strstr(err, where) && strstr(err, "has no value"), "stderr: %s", err);
    CHECK_MSG(s < 20, "took %.1f s", s);
}

TEST(train_report_lines_roundtrip, 10)
{
    glm_line_t l, back;
    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_EPOCH;
    l.rank = 0;
    l.epoch.epoch = 7;
    l.epoch.objective = 0.1 + 0.2; /* not a short decimal */
    l.epoch.mean_loss = 1.0 / 3;
    l.epoch.accuracy = 0.84871472;
    l.epoch.test_accuracy = NAN;
    l.epoch.weight_norm = 12.5;
    l.epoch.lr = 0.5047;
    l.epoch.seconds = 1e-7;
    l.epoch.comm_share = 0.96;
    char buf[2048];
    int n = glm_line_format(&l, buf, sizeof(buf));
    CHECK(n > 0 && (size_t)n == strlen(buf) && !strchr(buf, '\n'));
    CHECK_EQ_INT(glm_line_parse(buf, &back), GLM_LINE_EPOCH);
    CHECK_EQ_INT(back.epoch.epoch, 7);
    CHECK(memcmp(&back.epoch.objective, &l.epoch.objective, sizeof(double)) == 0);
    CHECK(back.epoch.mean_loss == l.epoch.mean_loss && back.epoch.accuracy == l.epoch.accuracy);
    CHECK(isnan(back.epoch.test_accuracy) && back.epoch.weight_norm == 12.5);
    CHECK(back.epoch.seconds == 1e-7 && back.epoch.comm_share == 0.96);

    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_ERROR;
    l.rank = 3;
    snprintf(l.message, sizeof(l.message), "rank 3: a \"b\"\\c\nnext\tline");
    CHECK(glm_line_format(&l, buf, sizeof(buf)) > 0 && !strchr(buf, '\n'));
    CHECK_EQ_INT(glm_line_parse(buf, &back), GLM_LINE_ERROR);
    CHECK_EQ_INT(back.rank, 3);
    CHECK_MSG(strcmp(back.message, l.message) == 0, "got '%s'", back.message);

    memset(&l, 0, sizeof(l));
    l.type = GLM_LINE_SETUP;
    l.setup.rows = 32561;
    l.setup.cols = 123;
    l.setup.lr = 0.5;
    l.setup.l2 = 1.0 / 32561;
    CHECK(glm_line_format(&l, buf, sizeof(buf)) > 0);
    CHECK_EQ_INT(glm_line_parse(buf, &back), GLM_LINE_SETUP);
    CHECK(back.setup.rows == 32561 && back.setup.cols == 123 && back.setup.l2 == l.setup.l2);

    CHECK_EQ_INT(glm_line_parse("hello", &back), GLM_LINE_NONE);
    CHECK_EQ_INT(glm_line_parse("{\"type\":\"epochs\"}", &back), GLM_LINE_NONE);
    CHECK_EQ_INT(glm_line_format(&l, buf, 10), -ENOSPC); /* too small */
}

TEST(train_config_checks_and_defaults, 10)
{
    char err[256];
    glm_train_config_t c = GLM_TRAIN_CONFIG_INIT;
    CHECK_EQ_INT(glm_train_check(&c, 4, err, sizeof(err)), 0);
    c.micro_batch = c.batch + 1;
    CHECK_EQ_INT(glm_train_check(&c, 4, err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "micro-batch"), "%s", err);
    c = (glm_train_config_t)GLM_TRAIN_CONFIG_INIT;
    c.mode = GLM_MODE_SINGLE;
    CHECK_EQ_INT(glm_train_check(&c, 2, err, sizeof(err)), -EINVAL);
    c = (glm_train_config_t)GLM_TRAIN_CONFIG_INIT;
    c.epochs = 0;
    CHECK_EQ_INT(glm_train_check(&c, 1, err, sizeof(err)), -EINVAL);
    c = (glm_train_config_t)GLM_TRAIN_CONFIG_INIT;
    c.lr = NAN;
    CHECK_EQ_INT(glm_train_check(&c, 1, err, sizeof(err)), -EINVAL);

    /* Default rate: GLM_LR_SCALE / (beta mean ||a||^2). Two rows of squared norms 4 and 2. */
    glm_dataset_t d;
    CHECK(glm_parse_libsvm("1 1:2\n-1 1:1 2:1\n", 17, "mem", GLM_LABELS_BINARY, &d, err,
                           sizeof(err)) == 0);
    CHECK(fabs(glm_default_lr(&d, GLM_OBJ_LOGISTIC) - GLM_LR_SCALE / (0.25 * 3)) < 1e-12);
    CHECK(fabs(glm_default_lr(&d, GLM_OBJ_SQUARED) - GLM_LR_SCALE / 3) < 1e-12);
    CHECK(glm_epoch_lr(2.0, GLM_LR_SQRT, 4) == 1.0 && glm_epoch_lr(2.0, GLM_LR_CONST, 4) == 2.0);

    /* A model-parallel run needs at least one feature per worker; a test set must match. */
    glm_coll_t *lc;
    CHECK(glm_coll_local_create(&lc, err, sizeof(err)) == 0);
    c = (glm_train_config_t)GLM_TRAIN_CONFIG_INIT;
    c.mode = GLM_MODE_SINGLE;
    c.epochs = 2;
    glm_dataset_t t;
    CHECK(glm_parse_libsvm("1 1:1 3:1\n", 10, "t", GLM_LABELS_BINARY, &t, err, sizeof(err)) == 0);
    CHECK_EQ_INT(glm_train(&c, lc, &d, &t, NULL, NULL, NULL, NULL, err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "test set"), "%s", err);
    glm_dataset_set_cols(&t, d.cols);
    glm_dataset_set_cols(&d, t.cols);
    run_out_t out;
    memset(&out, 0, sizeof(out));
    CHECK_MSG(glm_train(&c, lc, &d, &t, rec_setup, rec_epoch, &out, NULL, err, sizeof(err)) == 0,
              "%s", err);
    CHECK_EQ_INT(out.nrec, 2);
    CHECK(out.rec[1].test_accuracy >= 0 && out.rec[1].test_accuracy <= 1);
    CHECK(out.setup.l2 == 0.5); /* default 1/S */
    glm_coll_destroy(lc);
    glm_dataset_free(&d);
    glm_dataset_free(&t);
}

/* Tail averaging's rules (average.c): the last half of the epochs, polynomial-decay weights
 * that start at 1, and a summing period that keeps its cost near a mini-batch's nonzeros. */
TEST(train_average_rules, 10)
{
    CHECK_EQ_INT((int)glm_average_start(20), 11);
    CHECK_EQ_INT((int)glm_average_start(1), 1);
    CHECK_EQ_INT((int)glm_average_start(3), 2);
    CHECK(glm_average_weight(1) == 1.0);
    CHECK(fabs(glm_average_weight(2) - (GLM_AVG_ETA + 1) / (2 + GLM_AVG_ETA)) < 1e-15);
    CHECK(glm_average_weight(1000) < glm_average_weight(10));
    char err[256];
    glm_dataset_t d;
    /* 2 rows, 3 nonzeros, 2 features: a mini-batch of 64 covers the model: every step. */
    CHECK(glm_parse_libsvm("1 1:2\n-1 1:1 2:1\n", 17, "mem", GLM_LABELS_BINARY, &d, err,
                           sizeof(err)) == 0);
    CHECK_EQ_INT((int)glm_average_period(&d, 64), 1);
    /* The same rows over 1000 features: a mini-batch of 2 holds 3 nonzeros, so every
     * ceil(1000 / 3) = 334th mini-batch. */
    glm_dataset_set_cols(&d, 1000);
    CHECK_EQ_INT((int)glm_average_period(&d, 2), 334);
    glm_dataset_free(&d);
}

/* A run that diverges: the rank's allreduce refuses the Inf gradient (INAGG_ERR_NONFINITE),
 * and glm_train returns the collective's own code, -EDOM, with the hint to lower --lr. */
TEST(train_diverged_run_returns_the_collectives_code, 30)
{
    switch_config_t scfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &scfg);
    glm_dataset_t d;
    char err[512] = "";
    CHECK(glm_synthetic("dense:64x8", 1, GLM_LABELS_REAL, &d, err, sizeof(err)) == 0);
    char job[64];
    snprintf(job, sizeof(job), "diverge-%d", (int)getpid());
    glm_coll_t *c = NULL;
    int rc = glm_coll_inagg_create(&c, ts.addr, job, 0, 1, 0, 4, 0, 10000, NULL, NULL, 0, err,
                                   sizeof(err));
    CHECK_MSG(rc == 0, "%s", err);
    glm_train_config_t cfg = GLM_TRAIN_CONFIG_INIT;
    cfg.mode = GLM_MODE_DATA;
    cfg.objective = GLM_OBJ_SQUARED;
    cfg.schedule = GLM_LR_CONST;
    cfg.lr = 1e30;
    cfg.epochs = 3;
    rc = glm_train(&cfg, c, &d, NULL, NULL, NULL, NULL, NULL, err, sizeof(err));
    CHECK_MSG(rc == -EDOM && strstr(err, "lower --lr"), "%d: %s", rc, err);
    glm_coll_destroy(c);
    glm_dataset_free(&d);
    ts_stop(&ts);
}
