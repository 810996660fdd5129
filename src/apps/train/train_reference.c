/*
 * train_reference.c - what `inagg train`'s result is measured against (see train_run.h): the
 * optimum of the same problem from liblinear-train (logistic regression, or the hinge loss's
 * SVM) on the very data the ranks trained on, written to a temp file; or, where liblinear does
 * not apply (squared loss, l2 = 0, not installed, --reference single), the same training in
 * one process without the switch (the trajectory the distributed run should follow). Its
 * objective and training accuracy, evaluated here the trainers' way, give the run's gap.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/glm/collective.h"
#include "apps/glm/objective.h"
#include "apps/launch/launch.h"
#include "apps/train/train_run.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"

#define LIBLINEAR_EPS                                                                              \
    1e-3 /* liblinear's stopping tolerance: its objective then agrees with 1e-4's to 9 digits */
#define LIBLINEAR_TIMEOUT_MS 300000

int train_reference_parse(const char *text, int *out)
{
    static const char *const names[] = {"auto", "liblinear", "single", "none"};
    for (int i = 0; i < 4; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = i;
            return 0;
        }
    return -EINVAL;
}

/* liblinear's solver for this objective (0 logistic, 3 hinge), or -1. */
static int liblinear_solver(glm_objective_t o)
{
    return o == GLM_OBJ_LOGISTIC ? 0 : o == GLM_OBJ_HINGE ? 3 : -1;
}

static int by_liblinear(const train_opts_t *o, const glm_dataset_t *d, double l2,
                        train_reference_t *ref, char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/inagg-train-ref-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return set_err(err, errlen, -errno, "cannot create %s: %s", path, strerror(errno));
    FILE *f = fdopen(fd, "w");
    int rc = f ? glm_dataset_write_libsvm(d, f) : -errno;
    if (f && fclose(f) != 0 && rc == 0)
        rc = -errno;
    if (!f)
        close(fd);
    double *w = NULL;
    size_t n = 0;
    int solver = liblinear_solver(o->cfg.objective);
    if (rc != 0)
        set_err(err, errlen, rc, "writing the data for liblinear to %s: %s", path, strerror(-rc));
    else
        rc = launch_liblinear(path, solver, 1.0 / (l2 * (double)d->rows), LIBLINEAR_EPS,
                              LIBLINEAR_TIMEOUT_MS, &w, &n, err, errlen);
    unlink(path);
    if (rc != 0)
        return rc;
    ref->objective = glm_evaluate_weights(o->cfg.objective, d, w, n, l2, &ref->accuracy);
    free(w);
    ref->source = "liblinear";
    snprintf(ref->what, sizeof(ref->what), "the optimum: liblinear-train -s %d -e %g", solver,
             LIBLINEAR_EPS);
    return 0;
}

static int last_epoch(const glm_epoch_record_t *e, void *arg)
{
    *(glm_epoch_record_t *)arg = *e;
    return 0;
}

static int by_single_process(const train_opts_t *o, const train_result_t *r, const glm_dataset_t *d,
                             train_reference_t *ref, char *err, size_t errlen)
{
    glm_train_config_t cfg = o->cfg;
    cfg.mode = cfg.mode == GLM_MODE_DATA ? GLM_MODE_DATA : GLM_MODE_SINGLE; /* world 1 */
    cfg.in_switch = 0; /* the optimizer steps here */
    cfg.lr = r->setup.lr; /* as resolved for the run (no second calibration) */
    cfg.l2 = r->setup.l2;
    cfg.progress = NULL;
    cfg.capture = NULL;
    glm_coll_t *coll = NULL;
    int rc = glm_coll_local_create(&coll, err, errlen);
    glm_epoch_record_t last = {0};
    if (rc == 0)
        rc = glm_train(&cfg, coll, d, NULL, NULL, last_epoch, &last, NULL, err, errlen);
    glm_coll_destroy(coll);
    if (rc != 0)
        return rc;
    ref->objective = last.objective;
    ref->accuracy = last.accuracy;
    ref->source = "single";
    snprintf(ref->what, sizeof(ref->what), "the same training in one process, no switch");
    return 0;
}

void train_reference_compute(const train_opts_t *o, const train_result_t *r,
                             const glm_dataset_t *given, train_reference_t *ref)
{
    memset(ref, 0, sizeof(*ref));
    int kind = o->reference;
    int lib_ok = liblinear_solver(o->cfg.objective) >= 0 && r->setup.l2 > 0;
    if (kind == TRAIN_REF_NONE)
        return;
    if (kind == TRAIN_REF_LIBLINEAR && !lib_ok) {
        snprintf(ref->why_not, sizeof(ref->why_not),
                 "liblinear solves logistic and hinge with l2 > 0 (this run: %s, l2 %g)",
                 glm_objective_name(o->cfg.objective), r->setup.l2);
        return;
    }
    int use_lib = kind == TRAIN_REF_LIBLINEAR ||
                  (kind == TRAIN_REF_AUTO && lib_ok && launch_liblinear_available());
    if (!use_lib && o->cfg.mode == GLM_MODE_SINGLE)
        return; /* the run is the single-process result */
    uint64_t t0 = util_now_ns();
    glm_dataset_t loaded = {0}, test = {0};
    const glm_dataset_t *d = given;
    char err[1024] = "";
    int rc = 0;
    if (!d) {
        rc = glm_load_inputs(o->data, o->synthetic, NULL, o->cfg.seed, o->cfg.objective,
                             o->precision, &loaded, &test, err, sizeof(err));
        d = &loaded;
    }
    if (rc == 0)
        rc = use_lib ? by_liblinear(o, d, r->setup.l2, ref, err, sizeof(err))
                     : by_single_process(o, r, d, ref, err, sizeof(err));
    glm_dataset_free(&loaded);
    glm_dataset_free(&test);
    if (rc != 0) {
        snprintf(ref->why_not, sizeof(ref->why_not), "%s", err);
        return;
    }
    ref->have = 1;
    ref->seconds = (double)(util_now_ns() - t0) / 1e9;
}
