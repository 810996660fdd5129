/*
 * liblinear.c - liblinear-train (Debian liblinear-tools) as the reference solver of the GLM
 * trainers: run on a LIBSVM file with the model written in a temp dir, bounded by a deadline,
 * and its model read back into weights (glm/reference.h). See launch.h.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/glm/reference.h"
#include "apps/launch/launch.h"
#include "lib/base/errmsg.h"

#define LIBLINEAR_TRAIN "liblinear-train"
#define MODEL_MAX_BYTES (256u << 20) /* a model of 10^7 features is ~200 MB of text */

int launch_liblinear_available(void)
{
    char path[PATH_MAX];
    return launch_find_in_path(LIBLINEAR_TRAIN, path, sizeof(path)) == 0;
}

/* The whole of path (at most MODEL_MAX_BYTES), NUL-terminated and malloc'd, or NULL with the
 * reason in err. */
static char *read_model(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, -errno, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0 || len >= MODEL_MAX_BYTES)
            break;
        if (len + 1 == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown)
                free(buf);
            buf = grown;
            cap *= 2;
        }
    }
    int bad = !buf || ferror(f) || len >= MODEL_MAX_BYTES;
    fclose(f);
    if (bad) {
        free(buf);
        set_err(err, errlen, -EIO, "%s: cannot read it whole", path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

int launch_liblinear(const char *data_path, int solver, double C, double eps, int timeout_ms,
                     double **weights, size_t *n_weights, char *err, size_t errlen)
{
    *weights = NULL;
    *n_weights = 0;
    if (!(C > 0) || !isfinite(C) || !(eps > 0) || !isfinite(eps))
        return set_err(err, errlen, -EINVAL, "liblinear: C (%g) and eps (%g) must be positive", C,
                       eps);
    char prog[PATH_MAX];
    if (launch_find_in_path(LIBLINEAR_TRAIN, prog, sizeof(prog)) != 0)
        return set_err(err, errlen, -ENOENT, "%s: not installed (apt-get install liblinear-tools)",
                       LIBLINEAR_TRAIN);
    const char *tmp = getenv("TMPDIR");
    char dir[1024], model[1100];
    snprintf(dir, sizeof(dir), "%s/inagg-liblinear-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return set_err(err, errlen, -errno, "liblinear: cannot create a temp dir %s: %s", dir,
                       strerror(errno));
    snprintf(model, sizeof(model), "%s/model", dir);
    char s_arg[16], c_arg[64], e_arg[64];
    snprintf(s_arg, sizeof(s_arg), "%d", solver);
    snprintf(c_arg, sizeof(c_arg), "%.17g", C);
    snprintf(e_arg, sizeof(e_arg), "%.17g", eps);
    char *argv[] = {prog,  "-s", s_arg, "-c", c_arg, "-e", e_arg, "-q", (char *)data_path,
                    model, NULL};
    launch_spec_t spec = {argv, NULL, LAUNCH_DEVNULL, LAUNCH_DEVNULL, LAUNCH_TO_OUT, 0, 0};
    int rc = launch_run(&spec, timeout_ms > 0 ? timeout_ms : 1, err, errlen);
    char *text = rc == 0 ? read_model(model, err, errlen) : NULL;
    if (rc == 0 && !text)
        rc = -EIO;
    if (rc == 0)
        rc = glm_liblinear_parse_model(text, model, weights, n_weights, err, errlen);
    free(text);
    unlink(model);
    rmdir(dir);
    return rc;
}
