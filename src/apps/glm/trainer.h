/*
 * trainer.h - the state of one rank's training run, shared by the two halves of the trainers:
 * train.c (checks, setup, the epoch loop of glm_train) and train_epochs.c (the epochs of each
 * mode and the evaluation after them). Internal to glm/.
 */
#ifndef INAGG_GLM_TRAINER_H
#define INAGG_GLM_TRAINER_H

#include <stddef.h>
#include <stdint.h>

#include "apps/glm/train.h"
#include "lib/kernels/optim.h"

typedef struct trainer {
    const glm_train_config_t *cfg;
    glm_coll_t *coll;
    const glm_dataset_t *full, *test;
    glm_dataset_t own, own_test; /* the slices when a rank owns part of the data */
    const glm_dataset_t *d, *t; /* what this rank trains / evaluates on */
    size_t c0, c1; /* features of this rank's model slice */
    size_t r0, r1; /* data mode: rows of this rank (global indices) */
    size_t t0, t1; /* data mode: test rows of this rank */
    size_t nx; /* c1 - c0 */
    float *x; /* the model is xs * x */
    double xs;
    optim_config_t ocfg; /* data mode with an optimizer */
    float *ostate; /* its state when the workers run it */
    uint64_t ostep;
    double *g;
    float *gf; /* data mode: the gradient as sent */
    uint32_t captured; /* data mode: steps handed to cfg->capture so far */
    uint32_t *perm;
    float *act; /* model mode: activations of one mini-batch */
    float *ev; /* evaluation buffer */
    size_t nev;
    double lr;
    /* tail averaging (average.c) */
    int avg_on;
    double *xa; /* the running weighted mean of the iterates (xs folded in) */
    float *xe; /* their mean, as the model evaluated and returned */
    uint32_t avg_from; /* the first epoch averaged */
    size_t avg_period; /* mini-batches between two summed iterates */
    uint64_t avg_tick, avg_n;
    /* diagonal step scaling (precond.c); pc NULL when off */
    double *pc; /* p_c of this rank's coordinates */
    uint32_t *pc_last; /* the step of the epoch each coordinate is up to date at */
    uint32_t pc_step; /* steps taken this epoch */
    double pc_lr; /* the epoch's rate */
    uint64_t next_progress_ns;
    char *err;
    size_t errlen;
} trainer_t;

/* A new permutation of the samples for epoch `epoch` (the same on every rank). */
void trainer_shuffle(trainer_t *t, uint32_t epoch);

/* One epoch at rate lr: model parallel (and single), or data parallel. 0, or a negative errno
 * with the reason in t->err (a collective's own code; -ECANCELED when a callback stops it). */
int trainer_model_epoch(trainer_t *t, uint32_t epoch, double lr);
int trainer_data_epoch(trainer_t *t, uint32_t epoch, double lr);

/* Objective, accuracy and test accuracy of the current model on the whole sets into rec.
 * 0, or a collective's negative errno with the reason in t->err. */
int trainer_evaluate(trainer_t *t, glm_epoch_record_t *rec);

/* Tail averaging (average.c). setup: -ENOMEM when out of memory. step: after every update of
 * epoch `epoch`, last_of_epoch on the epoch's last mini-batch. swap: point t->x / t->xs at the
 * mean of the averaged iterates (1), or leave them (0: nothing averaged yet); restore undoes
 * it before training goes on. */
typedef struct trainer_avg_saved {
    float *x;
    double xs;
} trainer_avg_saved_t;
/* Diagonal step scaling (precond.c): setup (-ENOMEM: out of memory), the epoch's start at rate lr,
 * bringing the coordinates of a mini-batch's rows (before its forward pass) or all of them up
 * to date, and the two updates (model mode: the mini-batch's coordinates; data mode: all). */
int trainer_pc_setup(trainer_t *t);
void trainer_pc_release(trainer_t *t);
void trainer_pc_begin_epoch(trainer_t *t, double lr);
void trainer_pc_catch_up_rows(trainer_t *t, size_t first, size_t b);
void trainer_pc_catch_up_all(trainer_t *t);
void trainer_pc_update_sparse(trainer_t *t, size_t first, size_t b, double lr);
void trainer_pc_update_dense(trainer_t *t, const float *gf, size_t b, double lr);

int trainer_avg_setup(trainer_t *t);
void trainer_avg_release(trainer_t *t);
void trainer_avg_step(trainer_t *t, uint32_t epoch, int last_of_epoch);
int trainer_avg_swap(trainer_t *t, trainer_avg_saved_t *saved);
void trainer_avg_restore(trainer_t *t, const trainer_avg_saved_t *saved);

#endif /* INAGG_GLM_TRAINER_H */
