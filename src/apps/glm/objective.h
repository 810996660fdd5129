/*
 * objective.h - the GLM losses (logistic, squared, hinge) as functions of the activation
 * z = w.a and the label y, their derivatives in z, and the objective/accuracy of a model given
 * its activations on a dataset.
 */
#ifndef INAGG_GLM_OBJECTIVE_H
#define INAGG_GLM_OBJECTIVE_H

#include <stddef.h>

#include "apps/glm/dataset.h"

typedef enum { GLM_OBJ_LOGISTIC = 0, GLM_OBJ_SQUARED = 1, GLM_OBJ_HINGE = 2 } glm_objective_t;

/* "logistic" | "squared" | "hinge" -> 0 and *out; -EINVAL for anything else. */
int glm_objective_parse(const char *name, glm_objective_t *out);
/* The name glm_objective_parse accepts; "unknown" for an invalid value. */
const char *glm_objective_name(glm_objective_t o);

/* logistic: log(1 + exp(-y z)), stable for any z; squared: 0.5 (z - y)^2;
 * hinge: max(0, 1 - y z). */
double glm_loss(glm_objective_t o, double z, double y);
/* d loss / d z (hinge: the subgradient -y where y z < 1, else 0); logistic stable for large |z|. */
double glm_dloss(glm_objective_t o, double z, double y);
/* The prediction is correct: sign(z) == sign(y), with z == 0 (and y == 0) counting as +1. */
int glm_correct(double z, double y);

typedef struct glm_eval {
    double objective; /* mean_loss + l2/2 ||w||^2 */
    double mean_loss;
    double accuracy; /* fraction of samples with glm_correct */
} glm_eval_t;

/* Given activations z[i] for all n samples: mean loss, accuracy, and the objective with
 * l2/2 * ||w||^2 (pass w_sq_norm = ||w||^2). n == 0 gives zero loss and accuracy. */
glm_eval_t glm_evaluate(glm_objective_t o, const float *z, const float *labels, size_t n, double l2,
                        double w_sq_norm);
/* Sum of the losses and count of correct predictions over n samples (added to *loss_sum and
 * *correct), for distributed evaluation where each worker owns some samples. */
void glm_eval_partial(glm_objective_t o, const float *z, const float *labels, size_t n,
                      double *loss_sum, double *correct);

/* Objective of double-precision weights on a dataset: mean loss over its rows plus
 * l2/2 ||w||^2. Weights beyond d->cols are ignored (also in the norm), missing ones are 0. */
double glm_objective_of_weights(glm_objective_t o, const glm_dataset_t *d, const double *w,
                                size_t n_weights, double l2);
/* The same, also giving the training accuracy of those weights (accuracy may be NULL). */
double glm_evaluate_weights(glm_objective_t o, const glm_dataset_t *d, const double *w,
                            size_t n_weights, double l2, double *accuracy);

#endif /* INAGG_GLM_OBJECTIVE_H */
