/*
 * lr_calib.c - the trainer's default step size (glm_calibrated_lr, see train.h): a trial of
 * each candidate rate on a seeded sample of the training rows (the run's own SGD: batch,
 * schedule, l2, as many epochs as the run's default), keeping the rate whose trial model has
 * the lowest objective on the WHOLE training set (so a rate that only fits the sample loses).
 * The candidates are powers of two around the curvature bound glm_default_lr, so the choice
 * adapts to the data's scale and conditioning rather than to its mean row norm alone (Bottou's
 * calibration of SGD's eta0 on a sample). Deterministic for (data, config): every rank computes
 * the same rate from the same full training set.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/trainer.h"
#include "lib/base/util.h"

/* The trial: rows of the sample, epochs over them, and the candidate factors 2^k. Cost: up to
 * 9 x 20 x 16384 sampled rows plus 9 passes over the data (fewer: the search stops two
 * candidates past the best), under a second on a9a. */
#define CALIB_SAMPLE 16384u
#define CALIB_EPOCHS GLM_DEFAULT_EPOCHS
#define CALIB_K_MIN (-2)
#define CALIB_K_MAX 6

/* SGD as the trainer runs it (mini-batches of b, w -= lr_e (g/b + l2 w), lazy L2 scale) on
 * the sample rows idx[0..n) for CALIB_EPOCHS epochs; returns the objective of the result on
 * every row of d (+inf when it diverged). x is a cols-double scratch, z a b-double one; xa
 * (cols doubles) non-NULL: the result is the tail average of the iterates as the trainer
 * takes it (average.c: from glm_average_start, every `period` mini-batches and at each
 * epoch's end). */
static double trial(const glm_dataset_t *d, glm_objective_t o, const uint32_t *idx, size_t n,
                    size_t b, double lr, glm_lr_schedule_t sched, double l2, double *x, double *z,
                    double *xa, size_t period, const double *pc, uint32_t *last)
{
    memset(x, 0, d->cols * sizeof(double));
    if (xa)
        memset(xa, 0, d->cols * sizeof(double));
    double s = 1.0;
    uint64_t tick = 0, navg = 0;
    const uint32_t from = glm_average_start(CALIB_EPOCHS);
    for (uint32_t e = 1; e <= CALIB_EPOCHS; e++) {
        double lr_e = glm_epoch_lr(lr, sched, e);
        uint32_t step = 0;
        if (pc)
            memset(last, 0, d->cols * sizeof(uint32_t));
        for (size_t i0 = 0; i0 < n; i0 += b) {
            size_t i1 = i0 + b < n ? i0 + b : n, bn = i1 - i0;
            for (size_t i = i0; i < i1; i++) {
                size_t r = idx[i];
                double dot = 0;
                for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++) {
                    size_t c = d->col[k];
                    if (pc && last[c] != step) { /* catch up with the skipped shrinks */
                        x[c] *= pow(1.0 - lr_e * l2 * pc[c], (double)(step - last[c]));
                        last[c] = step;
                    }
                    dot += (double)d->val[k] * x[c];
                }
                z[i - i0] = glm_dloss(o, s * dot, (double)d->label[r]);
            }
            if (pc) {
                /* w_c -= lr p_c (g_c / b + l2 w_c): the shrink on the first visit, once */
                for (size_t i = i0; i < i1; i++) {
                    size_t r = idx[i];
                    for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++) {
                        size_t c = d->col[k];
                        if (last[c] == step) {
                            x[c] *= 1.0 - lr_e * l2 * pc[c];
                            last[c] = step + 1;
                        }
                    }
                }
                for (size_t i = i0; i < i1; i++) {
                    size_t r = idx[i];
                    double f = lr_e * z[i - i0] / (double)bn;
                    for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++)
                        x[d->col[k]] -= f * pc[d->col[k]] * (double)d->val[k];
                }
                step++; /* divergence shows as a non-finite objective below */
            } else {
                s *= 1.0 - lr_e * l2;
                if (!(s > 1e-6))
                    return INFINITY;
                for (size_t i = i0; i < i1; i++) {
                    size_t r = idx[i];
                    double f = lr_e * z[i - i0] / ((double)bn * s);
                    for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++)
                        x[d->col[k]] -= f * (double)d->val[k];
                }
            }
            int last_batch = i1 >= n;
            if ((pc && last_batch) || (pc && xa && e >= from && (tick + 1) % period == 0)) {
                for (size_t c = 0; c < d->cols; c++) { /* every coordinate up to date */
                    if (last[c] != step) {
                        x[c] *= pow(1.0 - lr_e * l2 * pc[c], (double)(step - last[c]));
                        last[c] = step;
                    }
                }
            }
            if (xa && e >= from && (++tick % period == 0 || last_batch)) {
                double w = glm_average_weight(++navg);
                for (size_t c = 0; c < d->cols; c++)
                    xa[c] += w * (s * x[c] - xa[c]);
            }
        }
    }
    if (xa && navg) { /* evaluate the mean: it becomes x, with scale 1 */
        memcpy(x, xa, d->cols * sizeof(double));
        s = 1.0;
    }
    double loss = 0, sq = 0;
    for (size_t r = 0; r < d->rows; r++) {
        double dot = 0;
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++)
            dot += (double)d->val[k] * x[d->col[k]];
        loss += glm_loss(o, s * dot, (double)d->label[r]);
    }
    for (size_t c = 0; c < d->cols; c++)
        sq += x[c] * x[c];
    double obj = loss / (double)d->rows + 0.5 * l2 * s * s * sq;
    return isfinite(obj) ? obj : INFINITY;
}

/* The trials' arrays: the sample's order, the model, a batch's margins, and (when asked for)
 * the averaged model and the step scaling with its last-update steps. */
struct calib_scratch {
    uint32_t *idx;
    double *x, *z, *xa, *pc;
    uint32_t *last;
};

static void scratch_free(struct calib_scratch *s)
{
    free(s->idx);
    free(s->x);
    free(s->z);
    free(s->xa);
    free(s->pc);
    free(s->last);
}

double glm_calibrated_lr(const glm_dataset_t *d, glm_objective_t o, size_t batch,
                         glm_lr_schedule_t sched, double l2, uint64_t seed, int average,
                         int precondition)
{
    const double base = glm_default_lr(d, o);
    if (d->rows == 0 || d->cols == 0 || batch == 0)
        return base;
    size_t n = d->rows < CALIB_SAMPLE ? d->rows : CALIB_SAMPLE;
    struct calib_scratch s = {
        .idx = malloc(n * sizeof(uint32_t)),
        .x = malloc(d->cols * sizeof(double)),
        .z = malloc(batch * sizeof(double)),
        .xa = average ? malloc(d->cols * sizeof(double)) : NULL,
        .pc = precondition ? malloc(d->cols * sizeof(double)) : NULL,
        .last = precondition ? malloc(d->cols * sizeof(uint32_t)) : NULL,
    };
    uint32_t *idx = s.idx;
    if (!idx || !s.x || !s.z || (average && !s.xa) || (precondition && (!s.pc || !s.last)) ||
        (s.pc && glm_precond_compute(d, 0, d->cols, s.pc) != 0)) {
        scratch_free(&s);
        return base; /* no memory for the trial: the bound alone */
    }
    /* A seeded sample without replacement, in random order (files are often sorted). */
    util_rng_t rng;
    util_rng_seed(&rng, seed ^ 0x6c725f63616c6962ull);
    for (size_t i = 0; i < n; i++)
        idx[i] = (uint32_t)((uint64_t)d->rows * i / n);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)(util_rng_next(&rng) % (i + 1));
        uint32_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    /* The trial's period: the trainer's, scaled to the sample's shorter epochs. */
    size_t period = glm_average_period(d, batch);
    double best = INFINITY, best_lr = base;
    /* Rates in increasing order; the trial objective over them is taken to be unimodal (it
     * falls while the rate is too small, rises once it is too large), so the search stops
     * after two candidates in a row worse than the best so far. */
    int worse = 0;
    for (int k = CALIB_K_MIN; k <= CALIB_K_MAX && worse < 2; k++) {
        double lr = ldexp(base, k);
        double obj =
            trial(d, o, idx, n, batch, lr, sched, l2, s.x, s.z, s.xa, period, s.pc, s.last);
        if (obj < best) {
            best = obj;
            best_lr = lr;
            worse = 0;
        } else {
            worse++;
        }
    }
    scratch_free(&s);
    return best_lr;
}
