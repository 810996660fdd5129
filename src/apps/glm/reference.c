/*
 * reference.c - reads the model file of liblinear-train (L2-regularized logistic regression,
 * no bias) into weights for class +1, so a trainer's result can be compared with a real
 * optimum (the tests run liblinear-train itself: tests/testutil.c).
 */
#include "apps/glm/reference.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/base/errmsg.h"

/* ---- model file ---------------------------------------------------------------------------- */

int glm_liblinear_parse_model(const char *text, const char *name, double **weights,
                              size_t *n_weights, char *err, size_t errlen)
{
    *weights = NULL;
    *n_weights = 0;
    long nr_class = -1;
    double first_label = NAN, bias = NAN;
    long long nr_feature = -1;
    size_t line_no = 0;
    const char *p = text;
    int in_weights = 0;
    while (*p && !in_weights) {
        line_no++;
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char line[256];
        if (n >= sizeof(line)) {
            return set_err(err, errlen, -EINVAL, "%s:%zu: header line too long", name, line_no);
        }
        memcpy(line, p, n);
        line[n] = '\0';
        while (n > 0 && (line[n - 1] == ' ' || line[n - 1] == '\r' || line[n - 1] == '\t'))
            line[--n] = '\0';
        p = nl ? nl + 1 : p + n;
        char *rest;
        if (strcmp(line, "w") == 0) {
            in_weights = 1;
        } else if (strncmp(line, "nr_class ", 9) == 0) {
            nr_class = strtol(line + 9, &rest, 10);
            if (*rest != '\0' || nr_class != 2) {
                return set_err(err, errlen, -EINVAL,
                               "%s:%zu: '%s': expected a binary model (nr_class 2)", name, line_no,
                               line);
            }
        } else if (strncmp(line, "label ", 6) == 0) {
            first_label = strtod(line + 6, &rest);
            if (rest == line + 6 || !isfinite(first_label)) {
                return set_err(err, errlen, -EINVAL, "%s:%zu: '%s': bad label line", name, line_no,
                               line);
            }
        } else if (strncmp(line, "nr_feature ", 11) == 0) {
            nr_feature = strtoll(line + 11, &rest, 10);
            if (*rest != '\0' || nr_feature < 0 || nr_feature > 1000000000LL) {
                return set_err(err, errlen, -EINVAL, "%s:%zu: '%s': bad feature count", name,
                               line_no, line);
            }
        } else if (strncmp(line, "bias ", 5) == 0) {
            bias = strtod(line + 5, &rest);
            if (*rest != '\0' || !(bias < 0)) {
                return set_err(err, errlen, -EINVAL,
                               "%s:%zu: '%s': expected no bias term (bias -1)", name, line_no,
                               line);
            }
        }
        /* Other header lines (solver_type, ...) carry nothing needed here. */
    }
    if (!in_weights || nr_class != 2 || nr_feature < 0 || isnan(first_label) || isnan(bias)) {
        return set_err(
            err, errlen, -EINVAL,
            "%s:%zu: incomplete header (need nr_class 2, label, nr_feature, bias, then w)", name,
            line_no);
    }
    double *w = malloc((size_t)(nr_feature ? nr_feature : 1) * sizeof(double));
    if (!w) {
        return set_err(err, errlen, -ENOMEM, "%s: out of memory", name);
    }
    const double sign = first_label > 0 ? 1.0 : -1.0;
    for (long long j = 0; j < nr_feature; j++) {
        line_no++;
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v)) {
            free(w);
            return set_err(err, errlen, -EINVAL,
                           "%s:%zu: weight %lld of %lld missing or not a number", name, line_no,
                           j + 1, nr_feature);
        }
        w[j] = sign * v;
        p = end;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == '\n')
            p++;
        else if (*p != '\0' || j + 1 < nr_feature) {
            free(w);
            return set_err(err, errlen, -EINVAL, "%s:%zu: expected one weight per line", name,
                           line_no);
        }
    }
    *weights = w;
    *n_weights = (size_t)nr_feature;
    return 0;
}
