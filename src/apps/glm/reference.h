/*
 * reference.h - liblinear (`liblinear-train`, Debian liblinear-tools) as the external reference
 * optimum for L2-regularized logistic regression: its model file read into weights. The tests
 * run liblinear-train (tests/testutil.h: liblinear_reference).
 */
#ifndef INAGG_GLM_REFERENCE_H
#define INAGG_GLM_REFERENCE_H

#include <stddef.h>

#include "apps/glm/dataset.h"
#include "apps/glm/objective.h" /* glm_objective_of_weights */

/* Parse a liblinear model file's text (binary, no bias) into weights for class +1 (malloc'd).
 * name is used in messages ("name:line: what"). */
int glm_liblinear_parse_model(const char *text, const char *name, double **weights,
                              size_t *n_weights, char *err, size_t errlen);

#endif /* INAGG_GLM_REFERENCE_H */
