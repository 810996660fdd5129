/*
 * train.c - the GLM trainers (see train.h): single, model-parallel (P4SGD Algorithm 1, with
 * and without micro-batch pipelining) and data-parallel mini-batch SGD, written once against
 * the collective interface; the evaluation after each epoch; the one-line report format.
 *
 * Numerics shared by every mode, so the trajectories can be compared:
 *   - activations z are float32 (what travels through the switch); a rank's partial dot
 *     product is accumulated in double and rounded once to float;
 *   - gradients are accumulated in double, per coordinate in sample order;
 *   - the model is xs * x, x float32 and xs a double scale: a step x <- x - lr*(g/b + l2*x)
 *     shrinks xs by (1 - lr*l2) and changes only the coordinates the mini-batch touched,
 *     x[c] = (float)(x[c] - lr*g[c]/(b*xs)), so a step costs the mini-batch's nonzeros, not
 *     the model's length (the usual lazy-L2 device of sparse SGD solvers); xs is folded back
 *     into x when it falls below 1e-4.
 * Single mode is model mode with one rank: the same code, all features in one slice.
 */
#include "glm/train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/errmsg.h"
#include "json/json.h"
#include "kernels/optim.h"
#include "base/util.h"
#include "glm/synth.h"


const char *glm_mode_name(glm_mode_t m)
{
    switch (m) {
    case GLM_MODE_SINGLE: return "single";
    case GLM_MODE_MODEL: return "model";
    case GLM_MODE_DATA: return "data";
    }
    return "unknown";
}

int glm_mode_parse(const char *name, glm_mode_t *out)
{
    static const glm_mode_t all[] = {GLM_MODE_SINGLE, GLM_MODE_MODEL, GLM_MODE_DATA};
    for (size_t i = 0; name && i < INAGG_ARRAY_LEN(all); i++) {
        if (strcmp(name, glm_mode_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

double glm_default_lr(const glm_dataset_t *d, glm_objective_t o)
{
    double sq = 0;
    for (size_t k = 0; k < d->nnz; k++)
        sq += (double)d->val[k] * (double)d->val[k];
    double mean = d->rows ? sq / (double)d->rows : 0;
    double beta = o == GLM_OBJ_SQUARED ? 1.0 : 0.25;
    return mean > 0 ? GLM_LR_SCALE / (beta * mean) : GLM_LR_SCALE;
}

double glm_epoch_lr(double lr, glm_lr_schedule_t s, uint32_t e)
{
    return s == GLM_LR_SQRT ? lr / sqrt((double)(e ? e : 1)) : lr;
}

int glm_train_check(const glm_train_config_t *cfg, size_t world, char *err, size_t errlen)
{
    if (cfg->batch < 1) {
        set_err(err, errlen, "the mini-batch size must be at least 1");
        return -1;
    }
    if (cfg->micro_batch < 1 || cfg->micro_batch > cfg->batch) {
        set_err(err, errlen, "the micro-batch size (%zu) must be in 1..batch (%zu)",
                cfg->micro_batch, cfg->batch);
        return -1;
    }
    if (cfg->epochs < 1) {
        set_err(err, errlen, "at least one epoch is needed");
        return -1;
    }
    if (!(cfg->lr >= 0) || !isfinite(cfg->lr) || !isfinite(cfg->l2)) {
        set_err(err, errlen, "the learning rate and l2 must be finite, the rate >= 0");
        return -1;
    }
    if (cfg->optimizer < 0 || cfg->optimizer > 1 + OPTIM_SMORMS3) {
        set_err(err, errlen, "unknown optimizer %d", cfg->optimizer);
        return -1;
    }
    if (cfg->optimizer && cfg->mode != GLM_MODE_DATA) {
        set_err(err, errlen, "an optimizer (--optimizer) applies to data mode: model mode "
                "updates each worker's slice with plain SGD");
        return -1;
    }
    if (cfg->in_switch && !cfg->optimizer) {
        set_err(err, errlen, "--in-switch needs --optimizer");
        return -1;
    }
    if (cfg->mode == GLM_MODE_SINGLE && world != 1) {
        set_err(err, errlen, "single mode runs on one process (world %zu)", world);
        return -1;
    }
    if (cfg->mode != GLM_MODE_SINGLE && cfg->mode != GLM_MODE_MODEL &&
        cfg->mode != GLM_MODE_DATA) {
        set_err(err, errlen, "unknown training mode %d", (int)cfg->mode);
        return -1;
    }
    if (cfg->objective != GLM_OBJ_LOGISTIC && cfg->objective != GLM_OBJ_SQUARED &&
        cfg->objective != GLM_OBJ_HINGE) {
        set_err(err, errlen, "unknown objective %d", (int)cfg->objective);
        return -1;
    }
    return 0;
}

int glm_load_inputs(const char *data_path, const char *synthetic, const char *test_path,
                    uint64_t seed, glm_objective_t o, int precision, glm_dataset_t *train,
                    glm_dataset_t *test, char *err, size_t errlen)
{
    memset(train, 0, sizeof(*train));
    memset(test, 0, sizeof(*test));
    enum glm_label_kind kind = o == GLM_OBJ_SQUARED ? GLM_LABELS_REAL : GLM_LABELS_BINARY;
    if ((data_path != NULL) == (synthetic != NULL)) {
        set_err(err, errlen, "give exactly one of a data file and a synthetic spec");
        return -1;
    }
    if (precision != 32 && precision != 8 && precision != 4) {
        set_err(err, errlen, "precision must be 32, 8 or 4 bits (got %d)", precision);
        return -1;
    }
    int rc = data_path ? glm_load_libsvm(data_path, kind, train, err, errlen)
                       : glm_synthetic(synthetic, seed, kind, train, err, errlen);
    if (rc != 0)
        return -1;
    if (test_path && glm_load_libsvm(test_path, kind, test, err, errlen) != 0) {
        glm_dataset_free(train);
        return -1;
    }
    if (precision != 32 && glm_dataset_quantize(train, precision, err, errlen) != 0) {
        glm_dataset_free(train);
        glm_dataset_free(test);
        return -1;
    }
    if (test_path) {
        size_t cols = util_max_u64(train->cols, test->cols);
        glm_dataset_set_cols(train, cols);
        glm_dataset_set_cols(test, cols);
        if (train->cols != cols || test->cols != cols) {
            set_err(err, errlen, "out of memory matching the test set's features");
            glm_dataset_free(train);
            glm_dataset_free(test);
            return -1;
        }
    }
    return 0;
}

/* ---- the trainer's state ---------------------------------------------------------------- */

typedef struct trainer {
    const glm_train_config_t *cfg;
    glm_coll_t *coll;
    const glm_dataset_t *full, *test;
    glm_dataset_t own, own_test; /* the slices when a rank owns part of the data */
    const glm_dataset_t *d, *t;  /* what this rank trains / evaluates on */
    size_t c0, c1;               /* features of this rank's model slice */
    size_t r0, r1;               /* data mode: rows of this rank (global indices) */
    size_t t0, t1;               /* data mode: test rows of this rank */
    size_t nx;                   /* c1 - c0 */
    float *x;                    /* the model is xs * x */
    double xs;
    optim_config_t ocfg;         /* data mode with an optimizer */
    float *ostate;               /* its state when the workers run it */
    uint64_t ostep;
    double *g;
    float *gf;                   /* data mode: the gradient as sent */
    uint32_t *perm;
    float *act;                  /* model mode: activations of one mini-batch */
    float *ev;                   /* evaluation buffer */
    size_t nev;
    double lr;
    uint64_t next_progress_ns;
    char *err;
    size_t errlen;
} trainer_t;

static int coll_fail(trainer_t *t)
{
    set_err(t->err, t->errlen, "%s", t->coll->err[0] ? t->coll->err : "collective failed");
    return -1;
}

static void shuffle(trainer_t *t, uint32_t epoch)
{
    size_t S = t->full->rows;
    for (size_t i = 0; i < S; i++)
        t->perm[i] = (uint32_t)i;
    util_rng_t rng;
    util_rng_seed(&rng, t->cfg->seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)epoch));
    for (size_t i = S; i > 1; i--) {
        size_t j = (size_t)(((util_rng_next(&rng) >> 32) * (uint64_t)i) >> 32);
        uint32_t tmp = t->perm[i - 1];
        t->perm[i - 1] = t->perm[j];
        t->perm[j] = tmp;
    }
}

static int progress(trainer_t *t, uint32_t epoch, double fraction)
{
    const glm_train_config_t *cfg = t->cfg;
    if (!cfg->progress)
        return 0;
    uint64_t now = util_now_ns();
    if (now < t->next_progress_ns)
        return 0;
    t->next_progress_ns = now + (uint64_t)(cfg->progress_ms ? cfg->progress_ms : 200) * 1000000u;
    if (cfg->progress(epoch, fraction, cfg->progress_arg) != 0) {
        set_err(t->err, t->errlen, "training stopped by the caller");
        return -1;
    }
    return 0;
}

/* The L2 part of a step: the whole model shrinks by (1 - lr*l2), through the scale. */
static void shrink(trainer_t *t, double lr)
{
    double f = 1.0 - lr * t->cfg->l2;
    if (f < 0.5) { /* a step that large: fold the scale in and shrink every coordinate */
        for (size_t c = 0; c < t->nx; c++)
            t->x[c] = (float)((double)t->x[c] * t->xs * f);
        t->xs = 1.0;
        return;
    }
    t->xs *= f;
    if (t->xs < 1e-4) {
        for (size_t c = 0; c < t->nx; c++)
            t->x[c] = (float)((double)t->x[c] * t->xs);
        t->xs = 1.0;
    }
}

/* Model mode: one step with the gradient g of the mini-batch perm[first..first+b), touching
 * only the coordinates its samples have; g is left zero for the next mini-batch. A coordinate
 * is stepped on its first visit (g then becomes 0, so later visits skip it); one whose
 * gradient is exactly 0 needs no step (x - k*0 == x in float). */
static void update_sparse(trainer_t *t, size_t first, size_t b, double lr)
{
    shrink(t, lr);
    double k = lr / ((double)b * t->xs);
    const glm_dataset_t *d = t->d;
    float *restrict x = t->x;
    double *restrict g = t->g;
    for (size_t i = 0; i < b; i++) {
        size_t row = t->perm[first + i];
        for (size_t p = d->row_ptr[row]; p < d->row_ptr[row + 1]; p++) {
            size_t c = d->col[p] - t->c0;
            if (g[c] != 0) {
                x[c] = (float)((double)x[c] - k * g[c]);
                g[c] = 0;
            }
        }
    }
}

/* Data mode: one step with the allreduced (dense) gradient gf of b samples. */
static void update_dense(trainer_t *t, const float *gf, size_t b, double lr)
{
    shrink(t, lr);
    double k = lr / ((double)b * t->xs);
    for (size_t c = 0; c < t->nx; c++)
        t->x[c] = (float)((double)t->x[c] - k * (double)gf[c]);
}

/* The model's activation for one row: xs * (a . x). */
static double activation(const trainer_t *t, const glm_dataset_t *d, size_t row, size_t off)
{
    return t->xs * glm_row_dot(d, row, t->x, off);
}

/* ---- model parallel (and single) ---------------------------------------------------------- */

static void forward(trainer_t *t, size_t first, size_t n, float *out)
{
    for (size_t k = 0; k < n; k++)
        out[k] = (float)activation(t, t->d, t->perm[first + k], t->c0);
}

static void backward(trainer_t *t, size_t first, size_t n, const float *z)
{
    glm_objective_t o = t->cfg->objective;
    for (size_t k = 0; k < n; k++) {
        size_t row = t->perm[first + k];
        double s = glm_dloss(o, (double)z[k], (double)t->d->label[row]);
        if (s != 0)
            glm_row_axpy(t->d, row, s, t->g, t->c0);
    }
}

static int model_epoch(trainer_t *t, uint32_t epoch, double lr)
{
    const glm_train_config_t *cfg = t->cfg;
    size_t S = t->full->rows, B = cfg->batch, MB = cfg->micro_batch;
    size_t window = t->coll->max_inflight < 1 ? 1 : t->coll->max_inflight;
    for (size_t i = 0; i < S; i += B) {
        size_t bb = util_min_u64(B, S - i);
        size_t nmb = (bb + MB - 1) / MB;
        if (cfg->pipeline) {
            /* Start every micro-batch's allreduce (as many as the window holds), then take the
             * results in micro-batch order, starting the next ones as handles free up. */
            size_t w = util_min_u64(window, nmb), started = 0;
            for (size_t j = 0; j < nmb; j++) {
                while (started < nmb && started < j + w) {
                    size_t first = i + started * MB, n = util_min_u64(MB, bb - started * MB);
                    float *a = t->act + started * MB;
                    forward(t, first, n, a);
                    if (glm_coll_start(t->coll, a, n, started % w) != 0)
                        return coll_fail(t);
                    started++;
                }
                if (glm_coll_wait(t->coll, j % w) != 0)
                    return coll_fail(t);
                size_t first = i + j * MB, n = util_min_u64(MB, bb - j * MB);
                backward(t, first, n, t->act + j * MB);
            }
        } else {
            /* Vanilla model parallelism: forward, allreduce, backward, one at a time. */
            for (size_t j = 0; j < nmb; j++) {
                size_t first = i + j * MB, n = util_min_u64(MB, bb - j * MB);
                float *a = t->act + j * MB;
                forward(t, first, n, a);
                if (glm_coll_start(t->coll, a, n, 0) != 0 || glm_coll_wait(t->coll, 0) != 0)
                    return coll_fail(t);
                backward(t, first, n, a);
            }
        }
        update_sparse(t, i, bb, lr);
        if (progress(t, epoch, (double)(i + bb) / (double)S) != 0)
            return -1;
    }
    return 0;
}

/* ---- data parallel -------------------------------------------------------------------------- */

static int data_epoch(trainer_t *t, uint32_t epoch, double lr)
{
    const glm_train_config_t *cfg = t->cfg;
    glm_objective_t o = cfg->objective;
    size_t S = t->full->rows, B = cfg->batch;
    for (size_t i = 0; i < S; i += B) {
        size_t bb = util_min_u64(B, S - i);
        memset(t->g, 0, t->nx * sizeof(double));
        for (size_t k = 0; k < bb; k++) {
            size_t row = t->perm[i + k];
            if (row < t->r0 || row >= t->r1)
                continue; /* another rank's sample of this global mini-batch */
            size_t lr_ = row - t->r0;
            float z = (float)activation(t, t->d, lr_, 0);
            double s = glm_dloss(o, (double)z, (double)t->d->label[lr_]);
            if (s != 0)
                glm_row_axpy(t->d, lr_, s, t->g, 0);
        }
        if (cfg->in_switch) {
            /* The switch averages over the W ranks: push W times this rank's share of the
             * mini-batch mean; it returns the parameters after its step. */
            double k = (double)t->coll->world / (double)bb;
            for (size_t c = 0; c < t->nx; c++)
                t->gf[c] = (float)(t->g[c] * k);
            if (glm_coll_push_pull(t->coll, t->gf, t->x, t->nx) != 0)
                return coll_fail(t);
        } else {
            for (size_t c = 0; c < t->nx; c++)
                t->gf[c] = (float)t->g[c];
            if (glm_coll_allreduce(t->coll, t->gf, t->nx) != 0)
                return coll_fail(t);
            if (cfg->optimizer) {
                for (size_t c = 0; c < t->nx; c++)
                    t->gf[c] = (float)((double)t->gf[c] / (double)bb);
                optim_step(&t->ocfg, t->x, t->ostate, t->gf, t->nx, ++t->ostep);
            } else {
                update_dense(t, t->gf, bb, lr);
            }
        }
        if (progress(t, epoch, (double)(i + bb) / (double)S) != 0)
            return -1;
    }
    return 0;
}

/* ---- evaluation ------------------------------------------------------------------------------ */

static double sq_norm(const float *x, size_t n)
{
    double s = 0;
    for (size_t c = 0; c < n; c++)
        s += (double)x[c] * (double)x[c];
    return s;
}

/* Objective, accuracy and test accuracy of the current model on the whole sets. */
static int evaluate(trainer_t *t, glm_epoch_record_t *rec)
{
    const glm_train_config_t *cfg = t->cfg;
    glm_objective_t o = cfg->objective;
    size_t S = t->full->rows, T = t->test ? t->test->rows : 0;
    double loss = 0, correct = 0, tcorrect = 0, wsq;
    if (cfg->mode != GLM_MODE_DATA) {
        /* Every rank: partial activations of all samples and its part of ||x||^2; one
         * allreduce; then every rank computes the same loss from the full activations. */
        float *ev = t->ev;
        for (size_t s = 0; s < S; s++)
            ev[s] = (float)activation(t, t->d, s, t->c0);
        for (size_t s = 0; s < T; s++)
            ev[S + s] = (float)activation(t, t->t, s, t->c0);
        ev[S + T] = (float)(t->xs * t->xs * sq_norm(t->x, t->nx));
        if (glm_coll_allreduce(t->coll, ev, S + T + 1) != 0)
            return coll_fail(t);
        glm_eval_partial(o, ev, t->full->label, S, &loss, &correct);
        if (T) {
            double tloss = 0;
            glm_eval_partial(o, ev + S, t->test->label, T, &tloss, &tcorrect);
        }
        wsq = (double)ev[S + T];
    } else if (cfg->optimizer) {
        /* The model is the same on every rank and every rank holds the whole training set:
         * evaluate locally (an in-switch optimizer job carries only gradients). */
        float *zb = t->ev;
        for (size_t s = 0; s < S; s++)
            zb[s] = (float)activation(t, t->full, s, 0);
        glm_eval_partial(o, zb, t->full->label, S, &loss, &correct);
        if (T) {
            double dummy = 0;
            for (size_t s = 0; s < T; s++)
                zb[s] = (float)activation(t, t->test, s, 0);
            glm_eval_partial(o, zb, t->test->label, T, &dummy, &tcorrect);
        }
        wsq = t->xs * t->xs * sq_norm(t->x, t->nx);
    } else {
        /* Every rank: its rows' loss sum and correct counts; one allreduce of three numbers.
         * The model is the same everywhere, so ||x||^2 is local. */
        float *zb = t->ev;
        double l = 0, c = 0, tc = 0, dummy = 0;
        size_t n = t->r1 - t->r0;
        for (size_t s = 0; s < n; s++)
            zb[s] = (float)activation(t, t->d, s, 0);
        glm_eval_partial(o, zb, t->d->label, n, &l, &c);
        if (T) {
            size_t nt = t->t1 - t->t0;
            for (size_t s = 0; s < nt; s++)
                zb[s] = (float)activation(t, t->t, s, 0);
            glm_eval_partial(o, zb, t->t->label, nt, &dummy, &tc);
        }
        float sums[3] = {(float)l, (float)c, (float)tc};
        if (glm_coll_allreduce(t->coll, sums, 3) != 0)
            return coll_fail(t);
        loss = sums[0];
        correct = floor((double)sums[1] + 0.5); /* counts: fixed-point error is far below 0.5 */
        tcorrect = floor((double)sums[2] + 0.5);
        wsq = t->xs * t->xs * sq_norm(t->x, t->nx);
    }
    rec->mean_loss = S ? loss / (double)S : 0;
    rec->objective = rec->mean_loss + 0.5 * cfg->l2 * wsq;
    rec->accuracy = S ? correct / (double)S : 0;
    rec->test_accuracy = T ? tcorrect / (double)T : NAN;
    rec->weight_norm = sqrt(wsq > 0 ? wsq : 0);
    return 0;
}

/* ---- setup --------------------------------------------------------------------------------- */

static int prepare(trainer_t *t)
{
    const glm_train_config_t *cfg = t->cfg;
    const glm_dataset_t *full = t->full;
    uint32_t W = t->coll->world, r = t->coll->rank;
    size_t S = full->rows, D = full->cols, T = t->test ? t->test->rows : 0;
    t->d = full;
    t->t = t->test;
    t->c0 = 0;
    t->c1 = D;
    t->r0 = 0;
    t->r1 = S;
    t->t0 = 0;
    t->t1 = T;
    if (cfg->mode == GLM_MODE_MODEL && W > 1) {
        size_t *bounds = calloc(W + 1, sizeof(size_t));
        if (!bounds) {
            set_err(t->err, t->errlen, "rank %u: out of memory", r);
            return -1;
        }
        glm_partition_columns(full, (int)W, bounds);
        t->c0 = bounds[r];
        t->c1 = bounds[r + 1];
        free(bounds);
        char e[512];
        if (glm_dataset_column_slice(full, t->c0, t->c1, &t->own, e, sizeof(e)) != 0 ||
            (t->test &&
             glm_dataset_column_slice(t->test, t->c0, t->c1, &t->own_test, e, sizeof(e)) != 0)) {
            set_err(t->err, t->errlen, "rank %u: slicing features: %s", r, e);
            return -1;
        }
        t->d = &t->own;
        t->t = t->test ? &t->own_test : NULL;
    } else if (cfg->mode == GLM_MODE_DATA && W > 1) {
        t->r0 = (size_t)((uint64_t)S * r / W);
        t->r1 = (size_t)((uint64_t)S * (r + 1) / W);
        t->t0 = (size_t)((uint64_t)T * r / W);
        t->t1 = (size_t)((uint64_t)T * (r + 1) / W);
        char e[512];
        if (glm_dataset_row_slice(full, t->r0, t->r1, &t->own, e, sizeof(e)) != 0 ||
            (t->test &&
             glm_dataset_row_slice(t->test, t->t0, t->t1, &t->own_test, e, sizeof(e)) != 0)) {
            set_err(t->err, t->errlen, "rank %u: slicing samples: %s", r, e);
            return -1;
        }
        t->d = &t->own;
        t->t = t->test ? &t->own_test : NULL;
    }
    t->nx = t->c1 - t->c0;
    size_t nx = t->nx ? t->nx : 1;
    t->x = calloc(nx, sizeof(float));
    t->xs = 1.0;
    t->g = calloc(nx, sizeof(double));
    t->perm = malloc((S ? S : 1) * sizeof(uint32_t));
    if (cfg->mode == GLM_MODE_DATA) {
        t->gf = calloc(nx, sizeof(float));
        size_t n = util_max_u64(t->r1 - t->r0, t->t1 - t->t0);
        if (cfg->optimizer)
            n = util_max_u64(S, T); /* evaluated locally on the whole sets */
        t->nev = n ? n : 1;
        if (cfg->optimizer) {
            optim_config_t oc = OPTIM_CONFIG_INIT;
            oc.kind = (optim_kind_t)(cfg->optimizer - 1);
            oc.lr = (float)t->lr;
            oc.weight_decay = (float)cfg->l2;
            oc.eps_placement = cfg->eps_outside ? OPTIM_EPS_OUTSIDE : OPTIM_EPS_INSIDE;
            t->ocfg = oc;
            char why[160];
            if (optim_check(&oc, why, sizeof(why)) != 0) {
                set_err(t->err, t->errlen, "optimizer: %s", why);
                return -1;
            }
            unsigned words = optim_state_words(&oc);
            if (!cfg->in_switch && words) {
                t->ostate = malloc(nx * words * sizeof(float));
                if (!t->ostate) {
                    set_err(t->err, t->errlen, "rank %u: out of memory", r);
                    return -1;
                }
                optim_state_init(&oc, t->ostate, nx);
            }
        }
    } else {
        t->act = calloc(cfg->batch, sizeof(float));
        t->nev = S + T + 1;
    }
    t->ev = calloc(t->nev, sizeof(float));
    if (!t->x || !t->g || !t->perm || !t->ev || (cfg->mode == GLM_MODE_DATA ? !t->gf : !t->act)) {
        set_err(t->err, t->errlen, "rank %u: out of memory for %zu features, %zu samples", r,
                D, S);
        return -1;
    }
    return 0;
}

static void release(trainer_t *t)
{
    glm_dataset_free(&t->own);
    glm_dataset_free(&t->own_test);
    free(t->x);
    free(t->ostate);
    free(t->g);
    free(t->gf);
    free(t->perm);
    free(t->act);
    free(t->ev);
}

double glm_resolved_lr(const glm_train_config_t *cfg, const glm_dataset_t *d)
{
    if (cfg->lr > 0)
        return cfg->lr;
    switch (cfg->optimizer) {
    case 1 + OPTIM_ADAGRAD:
        return 0.1;
    case 1 + OPTIM_ADAM:
    case 1 + OPTIM_SMORMS3:
        return 0.01;
    default:
        return glm_default_lr(d, cfg->objective);
    }
}

double glm_resolved_l2(const glm_train_config_t *cfg, const glm_dataset_t *d)
{
    return cfg->l2 >= 0 ? cfg->l2 : 1.0 / (double)d->rows;
}

int glm_train(const glm_train_config_t *cfg, glm_coll_t *coll, const glm_dataset_t *train,
              const glm_dataset_t *test, glm_setup_fn on_setup, glm_epoch_fn on_epoch,
              void *arg, float **final_weights, char *err, size_t errlen)
{
    if (final_weights)
        *final_weights = NULL;
    if (!cfg || !coll || !train) {
        set_err(err, errlen, "glm_train: null argument");
        return -1;
    }
    if (glm_train_check(cfg, coll->world, err, errlen) != 0)
        return -1;
    if (train->rows == 0 || train->cols == 0) {
        set_err(err, errlen, "the training set is empty (%zu samples, %zu features)",
                train->rows, train->cols);
        return -1;
    }
    if (train->rows > UINT32_MAX) {
        set_err(err, errlen, "too many samples (%zu)", train->rows);
        return -1;
    }
    if (cfg->mode == GLM_MODE_MODEL && train->cols < coll->world) {
        set_err(err, errlen, "model parallelism needs at least one feature per worker (%zu "
                "features, %u workers)", train->cols, coll->world);
        return -1;
    }
    if (test && test->cols != train->cols) {
        set_err(err, errlen, "the test set has %zu features, the training set %zu", test->cols,
                train->cols);
        return -1;
    }
    if (cfg->mode != GLM_MODE_DATA && cfg->micro_batch > coll->max_small) {
        set_err(err, errlen, "micro-batch %zu exceeds what one small allreduce carries (%zu)",
                cfg->micro_batch, coll->max_small);
        return -1;
    }
    trainer_t t;
    memset(&t, 0, sizeof(t));
    t.cfg = cfg;
    t.coll = coll;
    t.full = train;
    t.test = test && test->rows ? test : NULL;
    t.err = err;
    t.errlen = errlen;
    t.lr = glm_resolved_lr(cfg, train);
    glm_train_config_t resolved = *cfg;
    resolved.l2 = glm_resolved_l2(cfg, train);
    t.cfg = cfg = &resolved;
    int rc = -1;
    if (prepare(&t) != 0)
        goto out;
    if (on_setup) {
        glm_setup_record_t su;
        memset(&su, 0, sizeof(su));
        su.rows = train->rows;
        su.cols = train->cols;
        su.nnz = train->nnz;
        su.test_rows = t.test ? t.test->rows : 0;
        su.lr = t.lr;
        su.l2 = cfg->l2;
        su.slice_cols = t.nx;
        su.slice_rows = t.r1 - t.r0;
        if (on_setup(&su, arg) != 0) {
            set_err(err, errlen, "training stopped by the caller before the first epoch");
            goto out;
        }
    }
    for (uint32_t e = 1; e <= cfg->epochs; e++) {
        glm_epoch_record_t rec;
        memset(&rec, 0, sizeof(rec));
        rec.epoch = e;
        rec.lr = cfg->optimizer ? t.lr : glm_epoch_lr(t.lr, cfg->schedule, e);
        shuffle(&t, e);
        uint64_t wait0 = coll->wait_ns, pay0 = coll->payload_bytes;
        uint64_t wire0 = glm_coll_wire_bytes(coll);
        uint64_t t0 = util_now_ns();
        if ((cfg->mode == GLM_MODE_DATA ? data_epoch(&t, e, rec.lr) : model_epoch(&t, e, rec.lr)) != 0)
            goto out;
        uint64_t t1 = util_now_ns();
        rec.seconds = (double)(t1 - t0) / 1e9;
        rec.comm_seconds = (double)(coll->wait_ns - wait0) / 1e9;
        rec.comm_share = rec.seconds > 0 ? rec.comm_seconds / rec.seconds : 0;
        rec.payload_bytes_per_sample = (double)(coll->payload_bytes - pay0) / (double)train->rows;
        uint64_t wire1 = glm_coll_wire_bytes(coll);
        rec.wire_bytes_per_sample = wire1 >= wire0 ? (double)(wire1 - wire0) / (double)train->rows : 0;
        if (evaluate(&t, &rec) != 0)
            goto out;
        rec.eval_seconds = (double)(util_now_ns() - t1) / 1e9;
        if (on_epoch && on_epoch(&rec, arg) != 0) {
            set_err(err, errlen, "training stopped by the caller after epoch %u", e);
            goto out;
        }
    }
    if (final_weights) {
        float *w = calloc(train->cols, sizeof(float));
        if (!w) {
            set_err(err, errlen, "out of memory");
            goto out;
        }
        for (size_t c = 0; c < t.nx; c++) /* the model is xs * x */
            w[t.c0 + c] = (float)((double)t.x[c] * t.xs);
        *final_weights = w;
    }
    rc = 0;
out:
    release(&t);
    return rc;
}

/* ---- the report lines ---------------------------------------------------------------------- */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    int over;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    if (b->over)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= b->cap - b->len) {
        b->over = 1;
        return;
    }
    b->len += (size_t)n;
}

static void sb_num(sbuf_t *b, const char *key, double v)
{
    if (isfinite(v))
        sb_printf(b, ",\"%s\":%.17g", key, v);
    else
        sb_printf(b, ",\"%s\":null", key);
}

static void sb_str(sbuf_t *b, const char *key, const char *s)
{
    sb_printf(b, ",\"%s\":\"", key);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            sb_printf(b, "\\%c", ch);
        else if (ch == '\n')
            sb_printf(b, "\\n");
        else if (ch == '\t')
            sb_printf(b, "\\t");
        else if (ch < 0x20)
            sb_printf(b, "\\u%04x", ch);
        else
            sb_printf(b, "%c", ch);
    }
    sb_printf(b, "\"");
}

static const char *const line_names[] = {"", "setup", "epoch", "progress", "done", "error"};

int glm_line_format(const glm_line_t *l, char *buf, size_t len)
{
    if (!buf || len == 0 || l->type <= GLM_LINE_NONE || l->type > GLM_LINE_ERROR)
        return -1;
    sbuf_t b = {buf, 0, len, 0};
    sb_printf(&b, "{\"type\":\"%s\",\"rank\":%d", line_names[l->type], l->rank);
    switch (l->type) {
    case GLM_LINE_SETUP:
        sb_num(&b, "rows", (double)l->setup.rows);
        sb_num(&b, "cols", (double)l->setup.cols);
        sb_num(&b, "nnz", (double)l->setup.nnz);
        sb_num(&b, "test_rows", (double)l->setup.test_rows);
        sb_num(&b, "lr", l->setup.lr);
        sb_num(&b, "l2", l->setup.l2);
        sb_num(&b, "slice_cols", (double)l->setup.slice_cols);
        sb_num(&b, "slice_rows", (double)l->setup.slice_rows);
        break;
    case GLM_LINE_EPOCH: {
        const glm_epoch_record_t *e = &l->epoch;
        sb_num(&b, "epoch", e->epoch);
        sb_num(&b, "objective", e->objective);
        sb_num(&b, "mean_loss", e->mean_loss);
        sb_num(&b, "accuracy", e->accuracy);
        sb_num(&b, "test_accuracy", e->test_accuracy);
        sb_num(&b, "weight_norm", e->weight_norm);
        sb_num(&b, "lr", e->lr);
        sb_num(&b, "seconds", e->seconds);
        sb_num(&b, "comm_seconds", e->comm_seconds);
        sb_num(&b, "comm_share", e->comm_share);
        sb_num(&b, "eval_seconds", e->eval_seconds);
        sb_num(&b, "payload_bytes_per_sample", e->payload_bytes_per_sample);
        sb_num(&b, "wire_bytes_per_sample", e->wire_bytes_per_sample);
        break;
    }
    case GLM_LINE_PROGRESS:
        sb_num(&b, "epoch", l->progress_epoch);
        sb_num(&b, "fraction", l->progress_fraction);
        break;
    case GLM_LINE_ERROR:
        sb_str(&b, "message", l->message);
        break;
    default:
        break;
    }
    sb_printf(&b, "}");
    return b.over ? -1 : (int)b.len;
}

static double num_or_nan(const char *text, const char *key)
{
    double v;
    return json_find_number(text, key, &v) == 0 ? v : NAN;
}

static uint64_t count_or_zero(const char *text, const char *key)
{
    double v = num_or_nan(text, key);
    return v >= 0 && v < 18446744073709551615.0 ? (uint64_t)v : 0;
}

/* The string value of "key" (JSON escapes undone) into out; 0 or -1. */
static int find_string(const char *text, const char *key, char *out, size_t len)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    const char *p = strstr(text, pat);
    if (!p || len == 0)
        return -1;
    p += strlen(pat);
    size_t n = 0;
    while (*p && *p != '"') {
        char c = *p++;
        if (c == '\\' && *p) {
            char e = *p++;
            if (e == 'n')
                c = '\n';
            else if (e == 't')
                c = '\t';
            else if (e == 'u' && strlen(p) >= 4) {
                char hex[5] = {p[0], p[1], p[2], p[3], 0};
                long v = strtol(hex, NULL, 16);
                c = v > 0 && v < 0x80 ? (char)v : '?';
                p += 4;
            } else
                c = e;
        }
        if (n + 1 < len)
            out[n++] = c;
    }
    out[n] = '\0';
    return 0;
}

glm_line_type_t glm_line_parse(const char *text, glm_line_t *l)
{
    glm_line_type_t type = GLM_LINE_NONE;
    const char *p = text;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, "{\"type\":\"", 9) == 0) {
        for (int i = GLM_LINE_SETUP; i <= GLM_LINE_ERROR; i++) {
            size_t n = strlen(line_names[i]);
            if (strncmp(p + 9, line_names[i], n) == 0 && p[9 + n] == '"') {
                type = (glm_line_type_t)i;
                break;
            }
        }
    }
    if (type == GLM_LINE_NONE) {
        l->type = GLM_LINE_NONE;
        return GLM_LINE_NONE;
    }
    memset(l, 0, sizeof(*l));
    l->type = type;
    double rank = num_or_nan(p, "rank");
    l->rank = isfinite(rank) ? (int)rank : -1;
    switch (type) {
    case GLM_LINE_SETUP:
        l->setup.rows = count_or_zero(p, "rows");
        l->setup.cols = count_or_zero(p, "cols");
        l->setup.nnz = count_or_zero(p, "nnz");
        l->setup.test_rows = count_or_zero(p, "test_rows");
        l->setup.lr = num_or_nan(p, "lr");
        l->setup.l2 = num_or_nan(p, "l2");
        l->setup.slice_cols = count_or_zero(p, "slice_cols");
        l->setup.slice_rows = count_or_zero(p, "slice_rows");
        break;
    case GLM_LINE_EPOCH: {
        glm_epoch_record_t *e = &l->epoch;
        double ep = num_or_nan(p, "epoch");
        e->epoch = isfinite(ep) && ep >= 0 ? (uint32_t)ep : 0;
        e->objective = num_or_nan(p, "objective");
        e->mean_loss = num_or_nan(p, "mean_loss");
        e->accuracy = num_or_nan(p, "accuracy");
        e->test_accuracy = num_or_nan(p, "test_accuracy");
        e->weight_norm = num_or_nan(p, "weight_norm");
        e->lr = num_or_nan(p, "lr");
        e->seconds = num_or_nan(p, "seconds");
        e->comm_seconds = num_or_nan(p, "comm_seconds");
        e->comm_share = num_or_nan(p, "comm_share");
        e->eval_seconds = num_or_nan(p, "eval_seconds");
        e->payload_bytes_per_sample = num_or_nan(p, "payload_bytes_per_sample");
        e->wire_bytes_per_sample = num_or_nan(p, "wire_bytes_per_sample");
        break;
    }
    case GLM_LINE_PROGRESS: {
        double ep = num_or_nan(p, "epoch");
        l->progress_epoch = isfinite(ep) && ep >= 0 ? (uint32_t)ep : 0;
        l->progress_fraction = num_or_nan(p, "fraction");
        break;
    }
    case GLM_LINE_ERROR:
        if (find_string(p, "message", l->message, sizeof(l->message)) != 0)
            snprintf(l->message, sizeof(l->message), "(no message)");
        break;
    default:
        break;
    }
    return type;
}
