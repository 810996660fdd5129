/*
 * train_epochs.c - the epochs of the GLM trainers (see train.h and trainer.h): model-parallel
 * (P4SGD Algorithm 1, with and without micro-batch pipelining; single mode is model mode with
 * one rank), data-parallel, and the evaluation after each epoch. The numerics every mode
 * shares are described at the top of train.c.
 */
#include "apps/glm/trainer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

/* A collective's failure rc (negative) as this trainer's, with the collective's message. */
static int coll_fail(trainer_t *t, int rc)
{
    return set_err(t->err, t->errlen, rc < 0 ? rc : -EIO, "%s",
                   t->coll->err[0] ? t->coll->err : "collective failed");
}

/* Data mode: hand the gradient about to be sent to the capture callback, for the first
 * capture_steps steps. 0, or -ECANCELED when the callback refuses (err set). */
static int capture(trainer_t *t)
{
    const glm_train_config_t *cfg = t->cfg;
    if (!cfg->capture || t->captured >= cfg->capture_steps)
        return 0;
    t->captured++;
    if (cfg->capture(t->gf, t->nx, cfg->capture_arg) != 0) {
        return set_err(t->err, t->errlen, -ECANCELED, "gradient capture failed (step %u)",
                       t->captured);
    }
    return 0;
}

void trainer_shuffle(trainer_t *t, uint32_t epoch)
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
        return set_err(t->err, t->errlen, -ECANCELED, "training stopped by the caller");
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

int trainer_model_epoch(trainer_t *t, uint32_t epoch, double lr)
{
    const glm_train_config_t *cfg = t->cfg;
    int rc;
    size_t S = t->full->rows, B = cfg->batch, MB = cfg->micro_batch;
    size_t window = t->coll->max_inflight < 1 ? 1 : t->coll->max_inflight;
    for (size_t i = 0; i < S; i += B) {
        size_t bb = util_min_u64(B, S - i);
        size_t nmb = (bb + MB - 1) / MB;
        if (t->pc)
            trainer_pc_catch_up_rows(t, i, bb);
        if (cfg->pipeline) {
            /* Start every micro-batch's allreduce (as many as the window holds), then take the
             * results in micro-batch order, starting the next ones as handles free up. */
            size_t w = util_min_u64(window, nmb), started = 0;
            for (size_t j = 0; j < nmb; j++) {
                while (started < nmb && started < j + w) {
                    size_t first = i + started * MB, n = util_min_u64(MB, bb - started * MB);
                    float *a = t->act + started * MB;
                    forward(t, first, n, a);
                    if ((rc = glm_coll_start(t->coll, a, n, started % w)) < 0)
                        return coll_fail(t, rc);
                    started++;
                }
                if ((rc = glm_coll_wait(t->coll, j % w)) < 0)
                    return coll_fail(t, rc);
                size_t first = i + j * MB, n = util_min_u64(MB, bb - j * MB);
                backward(t, first, n, t->act + j * MB);
            }
        } else {
            /* Vanilla model parallelism: forward, allreduce, backward, one at a time. */
            for (size_t j = 0; j < nmb; j++) {
                size_t first = i + j * MB, n = util_min_u64(MB, bb - j * MB);
                float *a = t->act + j * MB;
                forward(t, first, n, a);
                if ((rc = glm_coll_start(t->coll, a, n, 0)) < 0 ||
                    (rc = glm_coll_wait(t->coll, 0)) < 0)
                    return coll_fail(t, rc);
                backward(t, first, n, a);
            }
        }
        if (t->pc)
            trainer_pc_update_sparse(t, i, bb, lr);
        else
            update_sparse(t, i, bb, lr);
        trainer_avg_step(t, epoch, i + bb >= S);
        if ((rc = progress(t, epoch, (double)(i + bb) / (double)S)) < 0)
            return rc;
    }
    return 0;
}

/* ---- data parallel -------------------------------------------------------------------------- */

int trainer_data_epoch(trainer_t *t, uint32_t epoch, double lr)
{
    const glm_train_config_t *cfg = t->cfg;
    int rc;
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
            if ((rc = capture(t)) < 0)
                return rc;
            if ((rc = glm_coll_push_pull(t->coll, t->gf, t->x, t->nx)) < 0)
                return coll_fail(t, rc);
        } else {
            for (size_t c = 0; c < t->nx; c++)
                t->gf[c] = (float)t->g[c];
            if ((rc = capture(t)) < 0)
                return rc;
            if ((rc = glm_coll_allreduce(t->coll, t->gf, t->nx)) < 0)
                return coll_fail(t, rc);
            if (cfg->optimizer) {
                for (size_t c = 0; c < t->nx; c++)
                    t->gf[c] = (float)((double)t->gf[c] / (double)bb);
                optim_step(&t->ocfg, t->x, t->ostate, t->gf, t->nx, ++t->ostep);
            } else {
                if (t->pc)
                    trainer_pc_update_dense(t, t->gf, bb, lr);
                else
                    update_dense(t, t->gf, bb, lr);
                trainer_avg_step(t, epoch, i + bb >= S);
            }
        }
        if ((rc = progress(t, epoch, (double)(i + bb) / (double)S)) < 0)
            return rc;
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

int trainer_evaluate(trainer_t *t, glm_epoch_record_t *rec)
{
    const glm_train_config_t *cfg = t->cfg;
    int rc;
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
        if ((rc = glm_coll_allreduce(t->coll, ev, S + T + 1)) < 0)
            return coll_fail(t, rc);
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
        if ((rc = glm_coll_allreduce_exact(t->coll, sums, 3)) < 0)
            return coll_fail(t, rc);
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
