/*
 * objective.c - GLM losses and their derivatives (numerically stable logistic), and the
 * objective/accuracy of a model from its activations or from its weights on a dataset.
 */
#include "apps/glm/objective.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "lib/base/util.h"

static const char *const k_names[] = {"logistic", "squared", "hinge"};

int glm_objective_parse(const char *name, glm_objective_t *out)
{
    if (!name)
        return -EINVAL;
    for (int i = 0; i < 3; i++) {
        if (strcmp(name, k_names[i]) == 0) {
            *out = (glm_objective_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

const char *glm_objective_name(glm_objective_t o)
{
    return util_name_of(k_names, INAGG_ARRAY_LEN(k_names), (unsigned)o);
}

double glm_loss(glm_objective_t o, double z, double y)
{
    switch (o) {
        case GLM_OBJ_LOGISTIC: {
            double m = y * z;
            return m > 0.0 ? log1p(exp(-m)) : -m + log1p(exp(m));
        }
        case GLM_OBJ_SQUARED: {
            double r = z - y;
            return 0.5 * r * r;
        }
        case GLM_OBJ_HINGE: {
            double h = 1.0 - y * z;
            return h > 0.0 ? h : 0.0;
        }
    }
    return NAN;
}

double glm_dloss(glm_objective_t o, double z, double y)
{
    switch (o) {
        case GLM_OBJ_LOGISTIC: {
            /* -y * sigmoid(-y z), in the form that neither overflows nor loses precision. */
            double m = y * z;
            if (m > 0.0) {
                double e = exp(-m);
                return -y * e / (1.0 + e);
            }
            return -y / (1.0 + exp(m));
        }
        case GLM_OBJ_SQUARED: return z - y;
        case GLM_OBJ_HINGE: return y * z < 1.0 ? -y : 0.0;
    }
    return NAN;
}

int glm_correct(double z, double y) { return (z >= 0.0) == (y >= 0.0); }

void glm_eval_partial(glm_objective_t o, const float *z, const float *labels, size_t n,
                      double *loss_sum, double *correct)
{
    double loss = 0.0, right = 0.0;
    for (size_t i = 0; i < n; i++) {
        loss += glm_loss(o, z[i], labels[i]);
        right += glm_correct(z[i], labels[i]);
    }
    *loss_sum += loss;
    *correct += right;
}

glm_eval_t glm_evaluate(glm_objective_t o, const float *z, const float *labels, size_t n, double l2,
                        double w_sq_norm)
{
    double loss = 0.0, right = 0.0;
    glm_eval_partial(o, z, labels, n, &loss, &right);
    glm_eval_t e;
    e.mean_loss = n ? loss / (double)n : 0.0;
    e.accuracy = n ? right / (double)n : 0.0;
    e.objective = e.mean_loss + 0.5 * l2 * w_sq_norm;
    return e;
}

double glm_evaluate_weights(glm_objective_t o, const glm_dataset_t *d, const double *w,
                            size_t n_weights, double l2, double *accuracy)
{
    const size_t used = n_weights < d->cols ? n_weights : d->cols;
    double loss = 0.0, right = 0.0;
    for (size_t r = 0; r < d->rows; r++) {
        double z = 0.0;
        for (size_t k = d->row_ptr[r]; k < d->row_ptr[r + 1]; k++)
            if (d->col[k] < used)
                z += (double)d->val[k] * w[d->col[k]];
        loss += glm_loss(o, z, d->label[r]);
        right += glm_correct(z, d->label[r]);
    }
    double sq = 0.0;
    for (size_t j = 0; j < used; j++)
        sq += w[j] * w[j];
    if (accuracy)
        *accuracy = d->rows ? right / (double)d->rows : 0.0;
    double mean = d->rows ? loss / (double)d->rows : 0.0;
    return mean + 0.5 * l2 * sq;
}

double glm_objective_of_weights(glm_objective_t o, const glm_dataset_t *d, const double *w,
                                size_t n_weights, double l2)
{
    return glm_evaluate_weights(o, d, w, n_weights, l2, NULL);
}
