/*
 * reference.h - liblinear (`liblinear-train`, Debian liblinear-tools) as the external reference
 * optimum for L2-regularized logistic regression, reported in the trainers' normalisation.
 */
#ifndef INAGG_GLM_REFERENCE_H
#define INAGG_GLM_REFERENCE_H

#include <stddef.h>

#include "glm/dataset.h"
#include "glm/objective.h" /* glm_objective_of_weights */

/* Is liblinear-train an executable on PATH? 1 or 0. */
int glm_liblinear_available(void);

/* Run `liblinear-train -s 0 -c C -e EPS data model` (no bias term, matching the trainers) with
 * the model in a temp dir, output to /dev/null, killed after timeout_s seconds. Parse the model
 * file (weights negated when its first label is -1, so w.a > 0 predicts +1) and return its
 * weights (malloc'd, *n_weights = nr_feature) and their objective in OUR normalisation: mean
 * logistic loss over the data + l2/2 ||w||^2 with l2 = 1/(C * S) (liblinear minimises
 * C * sum loss + 1/2 ||w||^2, the same problem scaled by C * S). Temp files are removed. */
int glm_liblinear_reference(const char *data_path, double C, double eps, int timeout_s,
                            double **weights, size_t *n_weights, double *objective, char *err,
                            size_t errlen);

/* Parse a liblinear model file's text (binary, no bias) into weights for class +1 (malloc'd).
 * name is used in messages ("name:line: what"). */
int glm_liblinear_parse_model(const char *text, const char *name, double **weights,
                              size_t *n_weights, char *err, size_t errlen);

#endif /* INAGG_GLM_REFERENCE_H */
