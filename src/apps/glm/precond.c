/*
 * precond.c - the diagonal step scaling of plain SGD (--precondition diag; off by default,
 * as its lazy per-coordinate shrink costs about 5x a plain step): coordinate c steps with
 * lr * p_c, p_c = 1 / sqrt(mean over rows of a_rc^2), scaled so that sum_c p_c mean(a_c^2)
 * = sum_c mean(a_c^2) (the curvature bound glm_default_lr stays the rate's unit). On data whose features differ in frequency and scale by orders of magnitude
 * (bag-of-words counts times idf), a single rate is either too small for the rare features or
 * unstable for the frequent ones; scaling by the feature's root mean square evens that out
 * (a fixed version of AdaGrad's per-feature rate). The L2 step is scaled too, so the update
 * w_c -= lr p_c (g_c / b + l2 w_c) keeps the objective's optimum.
 *
 * The per-coordinate shrink (1 - lr l2 p_c) cannot ride on the trainer's single lazy scale,
 * so each coordinate remembers the step it was last brought up to date at and catches up with
 * (1 - lr l2 p_c)^k when read or written; within an epoch the rate is constant, and every
 * coordinate is caught up at the epoch's end (and before an averaged iterate is summed).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/trainer.h"
#include "lib/base/util.h"

int glm_precond_compute(const glm_dataset_t *d, size_t c0, size_t c1, double *p)
{
    double *m = calloc(d->cols ? d->cols : 1, sizeof(double));
    if (!m)
        return -ENOMEM;
    for (size_t k = 0; k < d->nnz; k++)
        m[d->col[k]] += (double)d->val[k] * (double)d->val[k];
    double sum_m = 0, sum_pm = 0;
    for (size_t c = 0; c < d->cols; c++) {
        if (m[c] > 0) {
            sum_m += m[c];
            sum_pm += m[c] / sqrt(m[c] / (double)d->rows);
        }
    }
    double scale = sum_pm > 0 ? sum_m / sum_pm : 1.0;
    for (size_t c = c0; c < c1; c++)
        p[c - c0] = m[c] > 0 ? scale / sqrt(m[c] / (double)d->rows) : 1.0;
    free(m);
    return 0;
}

int trainer_pc_setup(trainer_t *t)
{
    if (t->cfg->precondition != GLM_PRECOND_DIAG || t->cfg->optimizer)
        return 0;
    size_t nx = t->nx ? t->nx : 1;
    t->pc = malloc(nx * sizeof(double));
    t->pc_last = calloc(nx, sizeof(uint32_t));
    if (!t->pc || !t->pc_last || glm_precond_compute(t->full, t->c0, t->c1, t->pc) != 0)
        return -ENOMEM;
    t->pc_step = 0;
    return 0;
}

void trainer_pc_release(trainer_t *t)
{
    INAGG_FREE_CLEAR(t->pc);
    INAGG_FREE_CLEAR(t->pc_last);
}

static inline void catch_up(trainer_t *t, size_t c)
{
    uint32_t n = t->pc_step - t->pc_last[c];
    if (n) {
        double f = 1.0 - t->pc_lr * t->cfg->l2 * t->pc[c];
        t->x[c] = (float)((double)t->x[c] * (n == 1 ? f : pow(f, (double)n)));
        t->pc_last[c] = t->pc_step;
    }
}

void trainer_pc_begin_epoch(trainer_t *t, double lr)
{
    t->pc_lr = lr;
    t->pc_step = 0;
    if (t->pc_last)
        memset(t->pc_last, 0, (t->nx ? t->nx : 1) * sizeof(uint32_t));
}

void trainer_pc_catch_up_rows(trainer_t *t, size_t first, size_t b)
{
    const glm_dataset_t *d = t->d;
    for (size_t i = 0; i < b; i++) {
        size_t row = t->perm[first + i];
        for (size_t p = d->row_ptr[row]; p < d->row_ptr[row + 1]; p++)
            catch_up(t, d->col[p] - t->c0);
    }
}

void trainer_pc_catch_up_all(trainer_t *t)
{
    for (size_t c = 0; c < t->nx; c++)
        catch_up(t, c);
}

void trainer_pc_update_sparse(trainer_t *t, size_t first, size_t b, double lr)
{
    const glm_dataset_t *d = t->d;
    const double l2 = t->cfg->l2, k = lr / (double)b;
    for (size_t i = 0; i < b; i++) {
        size_t row = t->perm[first + i];
        for (size_t p = d->row_ptr[row]; p < d->row_ptr[row + 1]; p++) {
            size_t c = d->col[p] - t->c0;
            if (t->pc_last[c] == t->pc_step) { /* first visit this step (caught up before) */
                double pc = t->pc[c];
                t->x[c] = (float)((double)t->x[c] * (1.0 - lr * l2 * pc) - k * pc * t->g[c]);
                t->g[c] = 0;
                t->pc_last[c] = t->pc_step + 1;
            }
        }
    }
    t->pc_step++;
}

void trainer_pc_update_dense(trainer_t *t, const float *gf, size_t b, double lr)
{
    const double l2 = t->cfg->l2, k = lr / (double)b;
    for (size_t c = 0; c < t->nx; c++) {
        double pc = t->pc[c];
        t->x[c] = (float)((double)t->x[c] * (1.0 - lr * l2 * pc) - k * pc * (double)gf[c]);
    }
}
