/*
 * average.c - tail averaging of the SGD iterates (Polyak-Ruppert averaging over the last half
 * of the epochs), the trainer's default for plain SGD: the model reported after an epoch of
 * the tail, and returned at the end, is the mean of the iterates since the tail began, while
 * SGD itself goes on from its last iterate. Averaging removes most of the noise a fixed or
 * slowly decaying step leaves in the last iterate, so 20 epochs get close to the optimum on
 * data where no single rate does.
 *
 * Every rank keeps the mean of its own part of the model (model mode: its feature slice; data
 * mode: the whole model, the same on every rank), summed at the same global mini-batches in
 * every mode, so single, model and data training average the same iterates. Summing costs a
 * pass over the rank's coordinates, so it is done every glm_average_period mini-batches: about
 * as often as a mini-batch's nonzeros cover the model, keeping its cost near an update's.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/trainer.h"

uint32_t glm_average_start(uint32_t epochs) { return epochs / 2 + 1; }

double glm_average_weight(uint64_t n) { return (GLM_AVG_ETA + 1.0) / ((double)n + GLM_AVG_ETA); }

size_t glm_average_period(const glm_dataset_t *d, size_t batch)
{
    if (d->nnz == 0 || d->rows == 0)
        return 1;
    double per_batch = (double)d->nnz * (double)batch / (double)d->rows;
    double p = ceil((double)d->cols / per_batch);
    return p < 1 ? 1 : (p > 1e6 ? 1000000 : (size_t)p);
}

int trainer_avg_setup(trainer_t *t)
{
    t->avg_on = t->cfg->average == GLM_AVG_TAIL && !t->cfg->optimizer;
    if (!t->avg_on)
        return 0;
    size_t nx = t->nx ? t->nx : 1;
    t->xa = calloc(nx, sizeof(double));
    t->xe = calloc(nx, sizeof(float));
    t->avg_from = glm_average_start(t->cfg->epochs);
    t->avg_period = glm_average_period(t->full, t->cfg->batch);
    t->avg_tick = 0;
    t->avg_n = 0;
    return t->xa && t->xe ? 0 : -ENOMEM;
}

void trainer_avg_release(trainer_t *t)
{
    free(t->xa);
    free(t->xe);
    t->xa = NULL;
    t->xe = NULL;
}

void trainer_avg_step(trainer_t *t, uint32_t epoch, int last_of_epoch)
{
    if (!t->avg_on || epoch < t->avg_from)
        return;
    /* Every period-th mini-batch of the tail, and always the epoch's last one, so the mean
     * after an epoch includes the iterate at its end. */
    if (++t->avg_tick % t->avg_period != 0 && !last_of_epoch)
        return;
    t->avg_n++;
    if (t->pc)
        trainer_pc_catch_up_all(t);
    double wgt = glm_average_weight(t->avg_n);
    for (size_t c = 0; c < t->nx; c++)
        t->xa[c] += wgt * (t->xs * (double)t->x[c] - t->xa[c]);
}

int trainer_avg_swap(trainer_t *t, trainer_avg_saved_t *saved)
{
    saved->x = t->x;
    saved->xs = t->xs;
    if (!t->avg_on || t->avg_n == 0)
        return 0;
    for (size_t c = 0; c < t->nx; c++)
        t->xe[c] = (float)t->xa[c];
    t->x = t->xe;
    t->xs = 1.0;
    return 1;
}

void trainer_avg_restore(trainer_t *t, const trainer_avg_saved_t *saved)
{
    t->x = saved->x;
    t->xs = saved->xs;
}
