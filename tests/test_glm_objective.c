/*
 * test_glm_objective.c - GLM losses and derivatives (values, finite differences, logistic
 * stability at extreme activations), evaluation on hand-computed examples, the liblinear model
 * parser, and liblinear on a9a as a real optimum: its objective is reproduced independently,
 * beats w = 0 and is stationary.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/dataset.h"
#include "apps/glm/objective.h"
#include "apps/glm/reference.h"
#include "harness.h"
#include "testutil.h"

#define CHECK_NEAR(a, b, tol)                                                                      \
    do {                                                                                           \
        double a__ = (a), b__ = (b);                                                               \
        CHECK_MSG(fabs(a__ - b__) <= (tol), "%s = %.17g, expected %.17g", #a, a__, b__);           \
    } while (0)

TEST(glm_loss_values, 10)
{
    const glm_objective_t L = GLM_OBJ_LOGISTIC, Q = GLM_OBJ_SQUARED, H = GLM_OBJ_HINGE;
    CHECK_NEAR(glm_loss(L, 0, 1), log(2.0), 1e-15);
    CHECK_NEAR(glm_loss(L, 2, 1), log(1 + exp(-2.0)), 1e-15);
    CHECK_NEAR(glm_loss(L, 2, -1), log(1 + exp(2.0)), 1e-14);
    CHECK_NEAR(glm_loss(L, -0.5, -1), log(1 + exp(-0.5)), 1e-15);
    CHECK_NEAR(glm_loss(Q, 3, 1), 2.0, 0);
    CHECK_NEAR(glm_loss(Q, -1, 0.5), 1.125, 0);
    CHECK_NEAR(glm_loss(H, 0.5, 1), 0.5, 0);
    CHECK_NEAR(glm_loss(H, 2, 1), 0.0, 0);
    CHECK_NEAR(glm_loss(H, -1, -1), 0.0, 0);
    CHECK_NEAR(glm_loss(H, -1, 1), 2.0, 0);

    CHECK_NEAR(glm_dloss(L, 0, 1), -0.5, 1e-15);
    CHECK_NEAR(glm_dloss(L, 0, -1), 0.5, 1e-15);
    CHECK_NEAR(glm_dloss(L, 1, 1), -1 / (1 + exp(1.0)), 1e-15);
    CHECK_NEAR(glm_dloss(Q, 3, 1), 2.0, 0);
    CHECK_NEAR(glm_dloss(H, 0.5, 1), -1.0, 0);
    CHECK_NEAR(glm_dloss(H, 0.5, -1), 1.0, 0);
    CHECK_NEAR(glm_dloss(H, 2, 1), 0.0, 0);

    /* Stable at extreme activations: finite, and the right limits. */
    CHECK(isfinite(glm_loss(L, 1000, 1)) && glm_loss(L, 1000, 1) >= 0);
    CHECK(glm_loss(L, 1000, 1) < 1e-300);
    CHECK_NEAR(glm_loss(L, -1000, 1), 1000.0, 1e-9);
    CHECK_NEAR(glm_loss(L, 1000, -1), 1000.0, 1e-9);
    CHECK_NEAR(glm_loss(L, 40, 1), exp(-40.0), 1e-30); /* not rounded to 0 by 1 + tiny */
    CHECK_NEAR(glm_dloss(L, 1000, 1), 0.0, 1e-300);
    CHECK_NEAR(glm_dloss(L, -1000, 1), -1.0, 0);
    CHECK_NEAR(glm_dloss(L, -1000, -1), 0.0, 1e-300);
    CHECK_NEAR(glm_dloss(L, 1000, -1), 1.0, 0);
    CHECK(isfinite(glm_dloss(L, 1e308, 1)) && isfinite(glm_loss(L, -1e300, 1)));

    CHECK(glm_correct(0, 1) == 1);
    CHECK(glm_correct(0, -1) == 0);
    CHECK(glm_correct(-0.1, -1) == 1);
    CHECK(glm_correct(0.1, -1) == 0);
    CHECK(glm_correct(-3, 1) == 0);

    glm_objective_t o;
    for (int i = 0; i < 3; i++) {
        CHECK(glm_objective_parse(glm_objective_name((glm_objective_t)i), &o) == 0);
        CHECK_EQ_INT(o, i);
    }
    CHECK(glm_objective_parse("Logistic", &o) == -EINVAL);
    CHECK(glm_objective_parse("", &o) == -EINVAL);
    CHECK(strcmp(glm_objective_name(GLM_OBJ_HINGE), "hinge") == 0);
}

TEST(glm_dloss_finite_difference, 10)
{
    const double zs[] = {-7.0, -2.5, -1.3, -0.2, 0.3, 0.7, 1.9, 4.0, 12.0};
    const double ys[] = {-1.0, 1.0, 0.7};
    const double h = 1e-5;
    for (int o = 0; o < 3; o++) {
        for (size_t i = 0; i < sizeof(zs) / sizeof(zs[0]); i++) {
            for (size_t j = 0; j < 3; j++) {
                double z = zs[i], y = ys[j];
                if (o == GLM_OBJ_HINGE && fabs(1 - y * z) < 2 * h)
                    continue; /* the kink */
                double fd = (glm_loss((glm_objective_t)o, z + h, y) -
                             glm_loss((glm_objective_t)o, z - h, y)) /
                            (2 * h);
                double an = glm_dloss((glm_objective_t)o, z, y);
                CHECK_MSG(fabs(fd - an) <= 1e-6 * (1 + fabs(an)),
                          "%s z=%g y=%g: dloss %.12g, finite difference %.12g",
                          glm_objective_name((glm_objective_t)o), z, y, an, fd);
            }
        }
    }
}

TEST(glm_evaluate_small, 10)
{
    const float z[] = {2.0f, -1.0f, 0.0f, 0.5f};
    const float y[] = {1.0f, 1.0f, -1.0f, -1.0f};
    glm_eval_t e = glm_evaluate(GLM_OBJ_LOGISTIC, z, y, 4, 0.1, 3.0);
    double mean = (log1p(exp(-2.0)) + log1p(exp(1.0)) + log(2.0) + log1p(exp(0.5))) / 4;
    CHECK_NEAR(e.mean_loss, mean, 1e-15);
    CHECK_NEAR(e.objective, mean + 0.15, 1e-15);
    CHECK_NEAR(e.accuracy, 0.25, 0);

    e = glm_evaluate(GLM_OBJ_SQUARED, z, y, 4, 0.0, 3.0);
    CHECK_NEAR(e.mean_loss, (0.5 + 2.0 + 0.5 + 1.125) / 4, 1e-15);
    CHECK_NEAR(e.objective, e.mean_loss, 0);
    e = glm_evaluate(GLM_OBJ_HINGE, z, y, 4, 1.0, 0.5);
    CHECK_NEAR(e.mean_loss, (0.0 + 2.0 + 1.0 + 1.5) / 4, 1e-15);
    CHECK_NEAR(e.objective, e.mean_loss + 0.25, 1e-15);

    /* Partial sums over two owners add up to the whole. */
    double loss = 0, correct = 0;
    glm_eval_partial(GLM_OBJ_HINGE, z, y, 1, &loss, &correct);
    glm_eval_partial(GLM_OBJ_HINGE, z + 1, y + 1, 3, &loss, &correct);
    CHECK_NEAR(loss, 4.5, 1e-15);
    CHECK_NEAR(correct, 1.0, 0);

    e = glm_evaluate(GLM_OBJ_LOGISTIC, z, y, 0, 0.0, 0.0);
    CHECK(e.mean_loss == 0 && e.accuracy == 0);
}

TEST(glm_objective_of_weights_small, 10)
{
    const char *text = "1 1:1 2:2\n-1 2:1 3:-1\n";
    glm_dataset_t d;
    char err[256] = "";
    CHECK_MSG(glm_parse_libsvm(text, strlen(text), "w", GLM_LABELS_BINARY, &d, err, sizeof(err)) ==
                  0,
              "%s", err);
    /* z = {0.5 + 2*0.25, 0.25 - (-1)} = {1, 1.25}; weights beyond cols (the 4th) ignored. */
    const double w[] = {0.5, 0.25, -1.0, 100.0};
    double acc = -1;
    double obj = glm_evaluate_weights(GLM_OBJ_SQUARED, &d, w, 4, 0.2, &acc);
    double want = (0.0 + 0.5 * 2.25 * 2.25) / 2 + 0.1 * (0.25 + 0.0625 + 1.0);
    CHECK_NEAR(obj, want, 1e-15);
    CHECK_NEAR(acc, 0.5, 0);
    CHECK_NEAR(glm_objective_of_weights(GLM_OBJ_SQUARED, &d, w, 4, 0.2), want, 0);
    /* Missing weights are zero: with only w[0], z = {0.5, 0}. */
    obj = glm_objective_of_weights(GLM_OBJ_SQUARED, &d, w, 1, 0.0);
    CHECK_NEAR(obj, (0.125 + 0.5) / 2, 1e-15);
    glm_dataset_free(&d);
}

TEST(glm_liblinear_model_parse, 10)
{
    const char *model = "solver_type L2R_LR\nnr_class 2\nlabel -1 1\nnr_feature 3\nbias -1\nw\n"
                        "0.5 \n-1.25 \n0 \n";
    double *w;
    size_t n;
    char err[256] = "";
    CHECK_MSG(glm_liblinear_parse_model(model, "m", &w, &n, err, sizeof(err)) == 0, "%s", err);
    CHECK_EQ_INT(n, 3);
    CHECK(w[0] == -0.5 && w[1] == 1.25 && w[2] == 0.0); /* first label -1: negated */
    free(w);

    const char *plus = "nr_class 2\nlabel 1 -1\nnr_feature 2\nbias -1\nw\n2\n-3";
    CHECK_MSG(glm_liblinear_parse_model(plus, "m", &w, &n, err, sizeof(err)) == 0, "%s", err);
    CHECK(n == 2 && w[0] == 2.0 && w[1] == -3.0);
    free(w);

    const char *shortw = "nr_class 2\nlabel 1 -1\nnr_feature 3\nbias -1\nw\n2\n-3\n";
    CHECK(glm_liblinear_parse_model(shortw, "m", &w, &n, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "m:8:") && strstr(err, "weight 3"), "%s", err);
    const char *bias = "nr_class 2\nlabel 1 -1\nnr_feature 1\nbias 1\nw\n2\n1\n";
    CHECK(glm_liblinear_parse_model(bias, "m", &w, &n, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "m:4:") && strstr(err, "bias"), "%s", err);
    const char *multi = "nr_class 3\nlabel 1 2 3\nnr_feature 1\nbias -1\nw\n1 2 3\n";
    CHECK(glm_liblinear_parse_model(multi, "m", &w, &n, err, sizeof(err)) == -EINVAL);
    CHECK_MSG(strstr(err, "nr_class 2"), "%s", err);
}

TEST(glm_liblinear_a9a, 60)
{
    if (!liblinear_available())
        SKIP("liblinear-train not on PATH (Debian package liblinear-tools)");
    const char *path = harness_dataset("a9a");
    if (!path)
        SKIP("a9a not found in ../shared/datasets");
    double *w = NULL, objective = 0;
    size_t n = 0;
    char err[512] = "";
    const double C = 1.0;
    CHECK_MSG(liblinear_reference(path, C, 1e-4, 30, &w, &n, &objective, err, sizeof(err)) == 0,
              "%s", err);
    CHECK_EQ_INT(n, 123);
    CHECK_MSG(isfinite(objective) && objective > 0, "objective %g", objective);

    glm_dataset_t d;
    CHECK_MSG(glm_load_libsvm(path, GLM_LABELS_BINARY, &d, err, sizeof(err)) == 0, "%s", err);
    const double l2 = 1.0 / (C * (double)d.rows);
    double acc = 0;
    double mine = glm_evaluate_weights(GLM_OBJ_LOGISTIC, &d, w, n, l2, &acc);
    CHECK_MSG(fabs(mine - objective) <= 1e-12 * objective, "objective %.17g, recomputed %.17g",
              objective, mine);
    /* The same from first principles, sharing no code with the library. */
    double loss = 0, sq = 0;
    for (size_t r = 0; r < d.rows; r++) {
        double z = 0;
        for (size_t k = d.row_ptr[r]; k < d.row_ptr[r + 1]; k++)
            z += d.val[k] * w[d.col[k]];
        double m = d.label[r] * z;
        loss += m > 0 ? log(1 + exp(-m)) : log(1 + exp(m)) - m;
    }
    for (size_t j = 0; j < n; j++)
        sq += w[j] * w[j];
    double direct = loss / (double)d.rows + 0.5 * l2 * sq;
    CHECK_MSG(fabs(direct - objective) <= 1e-9 * objective, "objective %.17g, direct %.17g",
              objective, direct);
    CHECK_MSG(acc >= 0.84, "training accuracy %.4f", acc);
    double at_zero = glm_objective_of_weights(GLM_OBJ_LOGISTIC, &d, w, 0, l2);
    CHECK_NEAR(at_zero, log(2.0), 1e-12);
    CHECK_MSG(objective < at_zero - 0.1, "objective %.6f is not below log 2", objective);

    /* Stationary: nudging single weights either way never lowers the objective noticeably. */
    for (size_t j = 0; j < n; j += 8) {
        for (int s = -1; s <= 1; s += 2) {
            double keep = w[j];
            w[j] = keep + s * 1e-3;
            double f = glm_objective_of_weights(GLM_OBJ_LOGISTIC, &d, w, n, l2);
            w[j] = keep;
            CHECK_MSG(f >= objective * (1 - 1e-7), "w[%zu] %+g: %.12g < %.12g", j, s * 1e-3, f,
                      objective);
        }
    }
    /* And it is a real optimum in liblinear's own scale, too: a larger step is clearly worse. */
    double keep = w[0];
    w[0] = keep + 0.5;
    CHECK(glm_objective_of_weights(GLM_OBJ_LOGISTIC, &d, w, n, l2) > objective + 1e-6);
    w[0] = keep;
    glm_dataset_free(&d);
    free(w);

    /* A missing data file is an error, not a crash. */
    CHECK(liblinear_reference("/nonexistent/a9a", C, 1e-4, 10, &w, &n, &objective, err,
                              sizeof(err)) == -ENOENT);
    CHECK(w == NULL);
}
