/*
 * train.c - the GLM trainers (see train.h): single, model-parallel (P4SGD Algorithm 1, with
 * and without micro-batch pipelining) and data-parallel mini-batch SGD, written once against
 * the collective interface. Here: names, checks, the inputs, each rank's setup and the epoch
 * loop; the epochs themselves and the evaluation are in train_epochs.c, the one-line report
 * format in report_line.c.
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
#include "apps/glm/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/synth.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/kernels/optim.h"

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
    return -EINVAL;
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
        return set_err(err, errlen, -EINVAL, "the mini-batch size must be at least 1");
    }
    if (cfg->micro_batch < 1 || cfg->micro_batch > cfg->batch) {
        return set_err(err, errlen, -EINVAL, "the micro-batch size (%zu) must be in 1..batch (%zu)",
                       cfg->micro_batch, cfg->batch);
    }
    if (cfg->epochs < 1) {
        return set_err(err, errlen, -EINVAL, "at least one epoch is needed");
    }
    if (!(cfg->lr >= 0) || !isfinite(cfg->lr) || !isfinite(cfg->l2)) {
        return set_err(err, errlen, -EINVAL,
                       "the learning rate and l2 must be finite, the rate >= 0");
    }
    if (cfg->optimizer < 0 || cfg->optimizer > 1 + OPTIM_SMORMS3) {
        return set_err(err, errlen, -EINVAL, "unknown optimizer %d", cfg->optimizer);
    }
    if (cfg->optimizer && cfg->mode != GLM_MODE_DATA) {
        return set_err(err, errlen, -EINVAL,
                       "an optimizer (--optimizer) applies to data mode: model mode "
                       "updates each worker's slice with plain SGD");
    }
    if (cfg->in_switch && !cfg->optimizer) {
        return set_err(err, errlen, -EINVAL, "--in-switch needs --optimizer");
    }
    if (cfg->mode == GLM_MODE_SINGLE && world != 1) {
        return set_err(err, errlen, -EINVAL, "single mode runs on one process (world %zu)", world);
    }
    if (cfg->mode != GLM_MODE_SINGLE && cfg->mode != GLM_MODE_MODEL && cfg->mode != GLM_MODE_DATA) {
        return set_err(err, errlen, -EINVAL, "unknown training mode %d", (int)cfg->mode);
    }
    if (cfg->objective != GLM_OBJ_LOGISTIC && cfg->objective != GLM_OBJ_SQUARED &&
        cfg->objective != GLM_OBJ_HINGE) {
        return set_err(err, errlen, -EINVAL, "unknown objective %d", (int)cfg->objective);
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
        return set_err(err, errlen, -EINVAL,
                       "give exactly one of a data file and a synthetic spec");
    }
    if (precision != 32 && precision != 8 && precision != 4) {
        return set_err(err, errlen, -EINVAL, "precision must be 32, 8 or 4 bits (got %d)",
                       precision);
    }
    int rc = data_path ? glm_load_libsvm(data_path, kind, train, err, errlen)
                       : glm_synthetic(synthetic, seed, kind, train, err, errlen);
    if (rc < 0)
        return rc;
    if (test_path && (rc = glm_load_libsvm(test_path, kind, test, err, errlen)) < 0) {
        glm_dataset_free(train);
        return rc;
    }
    if (precision != 32 && (rc = glm_dataset_quantize(train, precision, err, errlen)) < 0) {
        glm_dataset_free(train);
        glm_dataset_free(test);
        return rc;
    }
    if (test_path) {
        size_t cols = util_max_u64(train->cols, test->cols);
        glm_dataset_set_cols(train, cols);
        glm_dataset_set_cols(test, cols);
        if (train->cols != cols || test->cols != cols) {
            glm_dataset_free(train);
            glm_dataset_free(test);
            return set_err(err, errlen, -ENOMEM, "out of memory matching the test set's features");
        }
    }
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
            return set_err(t->err, t->errlen, -ENOMEM, "rank %u: out of memory", r);
        }
        glm_partition_columns(full, (int)W, bounds);
        t->c0 = bounds[r];
        t->c1 = bounds[r + 1];
        free(bounds);
        char e[512];
        int rc = glm_dataset_column_slice(full, t->c0, t->c1, &t->own, e, sizeof(e));
        if (rc == 0 && t->test)
            rc = glm_dataset_column_slice(t->test, t->c0, t->c1, &t->own_test, e, sizeof(e));
        if (rc < 0)
            return set_err(t->err, t->errlen, rc, "rank %u: slicing features: %s", r, e);
        t->d = &t->own;
        t->t = t->test ? &t->own_test : NULL;
    } else if (cfg->mode == GLM_MODE_DATA && W > 1) {
        t->r0 = (size_t)((uint64_t)S * r / W);
        t->r1 = (size_t)((uint64_t)S * (r + 1) / W);
        t->t0 = (size_t)((uint64_t)T * r / W);
        t->t1 = (size_t)((uint64_t)T * (r + 1) / W);
        char e[512];
        int rc = glm_dataset_row_slice(full, t->r0, t->r1, &t->own, e, sizeof(e));
        if (rc == 0 && t->test)
            rc = glm_dataset_row_slice(t->test, t->t0, t->t1, &t->own_test, e, sizeof(e));
        if (rc < 0)
            return set_err(t->err, t->errlen, rc, "rank %u: slicing samples: %s", r, e);
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
                return set_err(t->err, t->errlen, -EINVAL, "optimizer: %s", why);
            }
            unsigned words = optim_state_words(&oc);
            if (!cfg->in_switch && words) {
                t->ostate = malloc(nx * words * sizeof(float));
                if (!t->ostate) {
                    return set_err(t->err, t->errlen, -ENOMEM, "rank %u: out of memory", r);
                }
                optim_state_init(&oc, t->ostate, nx);
            }
        }
    } else {
        t->act = calloc(cfg->batch, sizeof(float));
        t->nev = S + T + 1;
    }
    t->ev = calloc(t->nev, sizeof(float));
    if (trainer_pc_setup(t) != 0) {
        return set_err(t->err, t->errlen, -ENOMEM, "rank %u: out of memory for the step scaling",
                       r);
    }
    if (trainer_avg_setup(t) != 0) {
        return set_err(t->err, t->errlen, -ENOMEM, "rank %u: out of memory for the averaged model",
                       r);
    }
    if (!t->x || !t->g || !t->perm || !t->ev || (cfg->mode == GLM_MODE_DATA ? !t->gf : !t->act)) {
        return set_err(t->err, t->errlen, -ENOMEM,
                       "rank %u: out of memory for %zu features, %zu samples", r, D, S);
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
    trainer_avg_release(t);
    trainer_pc_release(t);
}

double glm_resolved_lr(const glm_train_config_t *cfg, const glm_dataset_t *d)
{
    if (cfg->lr > 0)
        return cfg->lr;
    switch (cfg->optimizer) {
        case 1 + OPTIM_ADAGRAD: return 0.1;
        case 1 + OPTIM_ADAM:
        case 1 + OPTIM_SMORMS3: return 0.01;
        default:
            return glm_calibrated_lr(
                d, cfg->objective, cfg->batch, cfg->schedule, glm_resolved_l2(cfg, d), cfg->seed,
                cfg->average == GLM_AVG_TAIL, cfg->precondition == GLM_PRECOND_DIAG);
    }
}

double glm_resolved_l2(const glm_train_config_t *cfg, const glm_dataset_t *d)
{
    return cfg->l2 >= 0 ? cfg->l2 : 1.0 / (double)d->rows;
}

/* The run's facts to on_setup (when given) once the trainer is prepared: 0, or -ECANCELED
 * when it asks to stop. */
static int announce_setup(const trainer_t *t, glm_setup_fn on_setup, void *arg)
{
    if (!on_setup)
        return 0;
    glm_setup_record_t su;
    memset(&su, 0, sizeof(su));
    su.rows = t->full->rows;
    su.cols = t->full->cols;
    su.nnz = t->full->nnz;
    su.test_rows = t->test ? t->test->rows : 0;
    su.lr = t->lr;
    su.l2 = t->cfg->l2;
    su.slice_cols = t->nx;
    su.slice_rows = t->r1 - t->r0;
    if (on_setup(&su, arg) != 0)
        return set_err(t->err, t->errlen, -ECANCELED,
                       "training stopped by the caller before the first epoch");
    return 0;
}

int glm_train(const glm_train_config_t *cfg, glm_coll_t *coll, const glm_dataset_t *train,
              const glm_dataset_t *test, glm_setup_fn on_setup, glm_epoch_fn on_epoch, void *arg,
              float **final_weights, char *err, size_t errlen)
{
    if (final_weights)
        *final_weights = NULL;
    if (!cfg || !coll || !train) {
        return set_err(err, errlen, -EINVAL, "glm_train: null argument");
    }
    int rc = glm_train_check(cfg, coll->world, err, errlen);
    if (rc < 0)
        return rc;
    if (train->rows == 0 || train->cols == 0) {
        return set_err(err, errlen, -EINVAL,
                       "the training set is empty (%zu samples, %zu features)", train->rows,
                       train->cols);
    }
    if (train->rows > UINT32_MAX) {
        return set_err(err, errlen, -EINVAL, "too many samples (%zu)", train->rows);
    }
    if (cfg->mode == GLM_MODE_MODEL && train->cols < coll->world) {
        return set_err(err, errlen, -EINVAL,
                       "model parallelism needs at least one feature per worker (%zu "
                       "features, %u workers)",
                       train->cols, coll->world);
    }
    if (test && test->cols != train->cols) {
        return set_err(err, errlen, -EINVAL, "the test set has %zu features, the training set %zu",
                       test->cols, train->cols);
    }
    if (cfg->mode != GLM_MODE_DATA && cfg->micro_batch > coll->max_small) {
        return set_err(err, errlen, -EINVAL,
                       "micro-batch %zu exceeds what one small allreduce carries (%zu)",
                       cfg->micro_batch, coll->max_small);
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
    rc = prepare(&t);
    if (rc < 0)
        goto out;
    rc = announce_setup(&t, on_setup, arg);
    if (rc < 0)
        goto out;
    for (uint32_t e = 1; e <= cfg->epochs; e++) {
        glm_epoch_record_t rec;
        memset(&rec, 0, sizeof(rec));
        rec.epoch = e;
        rec.lr = cfg->optimizer ? t.lr : glm_epoch_lr(t.lr, cfg->schedule, e);
        trainer_shuffle(&t, e);
        uint64_t wait0 = coll->wait_ns, pay0 = coll->payload_bytes;
        uint64_t wire0 = glm_coll_wire_bytes(coll);
        uint64_t t0 = util_now_ns();
        if (t.pc)
            trainer_pc_begin_epoch(&t, rec.lr);
        rc = cfg->mode == GLM_MODE_DATA ? trainer_data_epoch(&t, e, rec.lr)
                                        : trainer_model_epoch(&t, e, rec.lr);
        if (rc < 0)
            goto out;
        if (t.pc)
            trainer_pc_catch_up_all(&t); /* every coordinate at the epoch's end */
        uint64_t t1 = util_now_ns();
        rec.seconds = (double)(t1 - t0) / 1e9;
        rec.comm_seconds = (double)(coll->wait_ns - wait0) / 1e9;
        rec.comm_share = rec.seconds > 0 ? rec.comm_seconds / rec.seconds : 0;
        rec.payload_bytes_per_sample = (double)(coll->payload_bytes - pay0) / (double)train->rows;
        uint64_t wire1 = glm_coll_wire_bytes(coll);
        rec.wire_bytes_per_sample =
            wire1 >= wire0 ? (double)(wire1 - wire0) / (double)train->rows : 0;
        trainer_avg_saved_t saved;
        trainer_avg_swap(&t, &saved); /* the averaged model is the one evaluated */
        rc = trainer_evaluate(&t, &rec);
        trainer_avg_restore(&t, &saved);
        if (rc < 0)
            goto out;
        rec.eval_seconds = (double)(util_now_ns() - t1) / 1e9;
        if (on_epoch && on_epoch(&rec, arg) != 0) {
            rc = set_err(err, errlen, -ECANCELED, "training stopped by the caller after epoch %u",
                         e);
            goto out;
        }
    }
    if (final_weights) {
        float *w = calloc(train->cols, sizeof(float));
        if (!w) {
            rc = set_err(err, errlen, -ENOMEM, "out of memory");
            goto out;
        }
        trainer_avg_saved_t saved;
        trainer_avg_swap(&t, &saved); /* the averaged model, when averaging */
        for (size_t c = 0; c < t.nx; c++) /* the model is xs * x */
            w[t.c0 + c] = (float)((double)t.x[c] * t.xs);
        trainer_avg_restore(&t, &saved);
        *final_weights = w;
    }
    rc = 0;
out:
    release(&t);
    return rc;
}
