/*
 * train.h - the GLM trainers (P4SGD's workload): mini-batch SGD on an L2-regularised
 * generalised linear model, in three shapes written once against the collective interface
 * (collective.h), so they run alone, over inagg's switch, or over MPI:
 *
 *   single  one process, all features and samples: the reference trajectory.
 *   model   P4SGD Algorithm 1: features split across ranks (balanced by nonzeros); per
 *           micro-batch of MB samples each rank computes MB partial activations, they are
 *           summed by a small allreduce, each rank accumulates the gradient of its own
 *           feature slice; one update per mini-batch of B samples. Pipelined: the allreduces
 *           of all micro-batches of a mini-batch are started before any is waited for, and
 *           the backward passes then run in micro-batch order, so the result is bit-identical
 *           to the unpipelined order (forward, allreduce, backward one micro-batch at a time).
 *   data    samples split across ranks (contiguous rows); each rank computes the gradient of
 *           the samples of the global mini-batch it owns; the D-float gradient is summed by an
 *           allreduce and every rank applies the same update.
 *
 * Objective: mean loss + l2/2 ||w||^2, no bias term, w starts at zero. Update per mini-batch
 * of b samples: w -= lr_e * (g / b + l2 * w), g the summed loss gradient, lr_e the epoch's rate.
 * Sample order: a seeded permutation of all S samples per epoch, the same on every rank and in
 * every mode (so the global mini-batches of single, model and data training are the same sets
 * of samples).
 *
 * The library never prints: epoch records go to a callback; the records' one-line text form
 * (glm_record_format / glm_record_parse) carries them from worker processes to the command.
 */
#ifndef INAGG_GLM_TRAIN_H
#define INAGG_GLM_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "apps/glm/collective.h"
#include "apps/glm/dataset.h"
#include "apps/glm/objective.h"

typedef enum glm_mode { GLM_MODE_SINGLE = 0, GLM_MODE_MODEL = 1, GLM_MODE_DATA = 2 } glm_mode_t;

typedef enum glm_lr_schedule {
    GLM_LR_SQRT = 0, /* lr_e = lr / sqrt(e), e = 1, 2, ... (default) */
    GLM_LR_CONST = 1 /* lr_e = lr */
} glm_lr_schedule_t;

/* The curvature bound glm_default_lr: GLM_LR_SCALE / (beta * mean ||a||^2 over the training
 * rows), beta the loss's curvature bound in z (1/4 logistic and hinge, 1 squared): a step of
 * about 2/L for the mini-batch smoothness L. The default rate is calibrated around it
 * (glm_calibrated_lr). */
#define GLM_LR_SCALE 1.75

#define GLM_DEFAULT_BATCH 64
#define GLM_DEFAULT_MICRO_BATCH 8 /* P4SGD's engines work on 8 samples at a time */
#define GLM_DEFAULT_EPOCHS 20
#define GLM_DEFAULT_SEED 1

/* Plain SGD's reported model: the mean of the iterates of the last half of the epochs
 * (average.c; the default), or the last iterate. */
typedef enum glm_average { GLM_AVG_TAIL = 0, GLM_AVG_NONE = 1 } glm_average_t;

/* Plain SGD's per-coordinate step scaling (precond.c): none (the default: one rate for all
 * features), or p_c = 1/sqrt(mean a_c^2), normalised. */
typedef enum glm_precond { GLM_PRECOND_NONE = 0, GLM_PRECOND_DIAG = 1 } glm_precond_t;

typedef struct glm_train_config {
    glm_mode_t mode;
    glm_objective_t objective;
    size_t batch; /* B >= 1 */
    size_t micro_batch; /* MB in 1..B (model and single modes) */
    uint32_t epochs; /* >= 1 */
    double lr; /* > 0, or 0 for the default from the data (glm_default_lr) */
    glm_lr_schedule_t schedule;
    double l2; /* >= 0, or < 0 for the default 1/S (liblinear's C = 1) */
    int pipeline; /* model/single: start all micro-batches before waiting */
    uint64_t seed; /* shuffle */
    /* Optional: called about every progress_ms during an epoch (heartbeat / progress bar);
     * a non-zero return stops training with an error. */
    int (*progress)(uint32_t epoch, double fraction, void *arg);
    uint32_t progress_ms;
    void *progress_arg;
    /* Data mode only: 0 = plain SGD (above); 1 + optim_kind_t (kernels/optim.h) = that
     * optimizer, with weight decay = l2 and a constant rate, run by every worker on its copy
     * after the gradient allreduce, or by the switch when in_switch (the collective's
     * push_pull: the switch averages, so each rank pushes W times its share of the mean). */
    int optimizer;
    int in_switch;
    int eps_outside; /* 0: sqrt(v + eps) (the paper's), 1: sqrt(v) + eps (PyTorch's) */
    glm_average_t average; /* plain SGD: tail averaging (default) or none */
    glm_precond_t precondition; /* plain SGD: none (default) or diagonal step scaling */
    /* Optional, data mode: called with this rank's gradient as it goes to the allreduce (the
     * values a codec would see) for each of the first capture_steps steps; a non-zero return
     * stops training with "gradient capture failed". */
    int (*capture)(const float *g, size_t n, void *arg);
    uint32_t capture_steps;
    void *capture_arg;
} glm_train_config_t;

#define GLM_TRAIN_CONFIG_INIT                                                                      \
    {                                                                                              \
        .mode = GLM_MODE_MODEL, .objective = GLM_OBJ_LOGISTIC, .batch = GLM_DEFAULT_BATCH,         \
        .micro_batch = GLM_DEFAULT_MICRO_BATCH, .epochs = GLM_DEFAULT_EPOCHS, .lr = 0.0,           \
        .schedule = GLM_LR_SQRT, .l2 = -1.0, .pipeline = 1, .seed = GLM_DEFAULT_SEED               \
    }

/* Facts about a run, known before the first epoch (rank 0 reports them). */
typedef struct glm_setup_record {
    uint64_t rows, cols, nnz, test_rows;
    double lr; /* the base rate in use (after the default was resolved) */
    double l2; /* the regularisation in use (after the default was resolved) */
    uint64_t slice_cols; /* this rank's features (model) or all (data/single) */
    uint64_t slice_rows; /* this rank's samples (data) or all (model/single) */
} glm_setup_record_t;

typedef struct glm_epoch_record {
    uint32_t epoch; /* 1-based */
    double objective; /* over the whole training set, after the epoch */
    double mean_loss;
    double accuracy; /* training accuracy */
    double test_accuracy; /* NaN without a test set */
    double weight_norm; /* ||w|| after the epoch */
    double lr; /* the rate used this epoch */
    double seconds; /* training time of the epoch (evaluation excluded) */
    double comm_seconds; /* of which blocked in communication */
    double comm_share; /* comm_seconds / seconds */
    double eval_seconds; /* the evaluation after the epoch */
    double payload_bytes_per_sample; /* float payload this rank sent per training sample */
    double wire_bytes_per_sample; /* UDP bytes this rank sent per sample (0: unknown) */
} glm_epoch_record_t;

/* Callbacks: the run's facts once before the first epoch, then each epoch's record; a non-zero
 * return stops training (glm_train returns -ECANCELED). */
typedef int (*glm_setup_fn)(const glm_setup_record_t *setup, void *arg);
typedef int (*glm_epoch_fn)(const glm_epoch_record_t *rec, void *arg);

/* The default base learning rate for this data and objective (see GLM_LR_SCALE). */
double glm_default_lr(const glm_dataset_t *d, glm_objective_t o);

/* The default rate of plain SGD (lr_calib.c): each of glm_default_lr x 2^k, k in -2..6, runs
 * the run's SGD (batch, schedule, l2, 20 epochs) on a seeded sample of up to 16384 rows; the
 * rate whose model has the lowest objective on all of d is used; average: the trial's model is
 * the tail average of its iterates, as the trainer's (average.c). */
double glm_calibrated_lr(const glm_dataset_t *d, glm_objective_t o, size_t batch,
                         glm_lr_schedule_t sched, double l2, uint64_t seed, int average,
                         int precondition);

/* The rate a run uses: cfg->lr when given (> 0), else for plain SGD glm_calibrated_lr and for an
 * optimizer its customary default (AdaGrad 0.1, Adam and SMORMS3 0.01, SGD glm_default_lr). */
double glm_resolved_lr(const glm_train_config_t *cfg, const glm_dataset_t *d);

/* The L2 weight a run uses: cfg->l2 when given (>= 0), else 1/S (liblinear's C = 1). */
double glm_resolved_l2(const glm_train_config_t *cfg, const glm_dataset_t *d);

/* Tail averaging (average.c): the first averaged epoch of a run of `epochs` (the last half),
 * and the mini-batches between two summed iterates for data d and batch b (>= 1, about
 * cols / (nonzeros of a mini-batch), the same in every mode). */
uint32_t glm_average_start(uint32_t epochs);
/* The step scaling p_c of columns c0..c1 of d into p[0..c1-c0) (precond.c). -ENOMEM: no memory. */
int glm_precond_compute(const glm_dataset_t *d, size_t c0, size_t c1, double *p);
#define GLM_AVG_ETA 3.0
/* The weight of the n-th (1-based) summed iterate in the running mean: the mean becomes
 * mean + w (x - mean), w = (GLM_AVG_ETA + 1) / (n + GLM_AVG_ETA); w(1) = 1. */
double glm_average_weight(uint64_t n);
size_t glm_average_period(const glm_dataset_t *d, size_t batch);

/* The rate of epoch e (1-based). */
double glm_epoch_lr(double lr, glm_lr_schedule_t s, uint32_t e);

/*
 * Train on `train` (the FULL training set, identical on every rank; each rank takes its own
 * slice) with the collective group `coll` (world 1 for single mode), evaluating after every
 * epoch on the whole training set and on `test` (NULL: none; its cols must equal train's).
 * on_setup (may be NULL) receives the run's facts before the first epoch, on_epoch (may be
 * NULL) each epoch's record, on every rank (the records agree across ranks except timings).
 * final_weights (may be NULL): a malloc'd cols-float vector with this rank's part of the final
 * model (model mode: its feature slice, zeros elsewhere; single and data modes: all of it).
 * 0, or a negative errno with a message in err (a collective failure carries the backend's
 * code and message; -ECANCELED when a callback stopped it).
 */
int glm_train(const glm_train_config_t *cfg, glm_coll_t *coll, const glm_dataset_t *train,
              const glm_dataset_t *test, glm_setup_fn on_setup, glm_epoch_fn on_epoch, void *arg,
              float **final_weights, char *err, size_t errlen);

/*
 * The inputs of a run as the command line names them: a LIBSVM file (data_path) or a
 * synthetic spec (glm/synth.h, generated from seed), an optional LIBSVM test file; labels
 * binary (-1/+1) for logistic and hinge, real for squared; features quantized to `precision`
 * bits (32: not at all; 8 or 4: glm_dataset_quantize) for training (the test set keeps full
 * precision); train and test given the same number of features (the larger). Every rank
 * calls this with the same arguments and gets the same data. Errors: the reader's negative
 * errno and message as they are ("file:line: what"), or what else failed. *train and *test are zeroed first.
 */
int glm_load_inputs(const char *data_path, const char *synthetic, const char *test_path,
                    uint64_t seed, glm_objective_t o, int precision, glm_dataset_t *train,
                    glm_dataset_t *test, char *err, size_t errlen);

/* Check a configuration against a dataset shape; 0 or -EINVAL with the reason. */
int glm_train_check(const glm_train_config_t *cfg, size_t world, char *err, size_t errlen);

const char *glm_mode_name(glm_mode_t m);
int glm_mode_parse(const char *name, glm_mode_t *out);

/*
 * One-line text form of the reports a worker sends to the command that renders them (over a
 * pipe, or on an MPI program's stdout): a flat JSON object on one line with a "type" key,
 * numbers with 17 significant digits (exact doubles). No newline is written; returns the
 * length, or -ENOSPC if buf is too small (-EINVAL for a line of no known type, -ENOMEM).
 *   {"type":"setup","rank":R,...}    {"type":"epoch","rank":R,...}
 *   {"type":"progress","rank":R,"epoch":E,"fraction":F}
 *   {"type":"done","rank":R}         {"type":"error","rank":R,"message":"..."}
 */
typedef enum glm_line_type {
    GLM_LINE_NONE = 0, /* not a report line (other output) */
    GLM_LINE_SETUP,
    GLM_LINE_EPOCH,
    GLM_LINE_PROGRESS,
    GLM_LINE_DONE,
    GLM_LINE_ERROR
} glm_line_type_t;

typedef struct glm_line {
    glm_line_type_t type;
    int rank;
    glm_setup_record_t setup;
    glm_epoch_record_t epoch;
    uint32_t progress_epoch;
    double progress_fraction;
    char message[1024];
} glm_line_t;

/* *l zeroed, then its type and rank. */
void glm_line_init(glm_line_t *l, glm_line_type_t type, int rank);

int glm_line_format(const glm_line_t *l, char *buf, size_t len);
/* Parse one line (without its newline). Returns the type (GLM_LINE_NONE for anything that is
 * not a report line, then *l is untouched except type). */
glm_line_type_t glm_line_parse(const char *text, glm_line_t *l);

#endif /* INAGG_GLM_TRAIN_H */
