/*
 * reference.c - runs liblinear-train (L2-regularized logistic regression, no bias) on a LIBSVM
 * file under a time limit, reads its model file, and reports the weights and their objective
 * in the trainers' normalisation, so a trainer's result can be compared with a real optimum.
 */
#include "glm/reference.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "base/util.h"

#define LIBLINEAR_TRAIN "liblinear-train"

extern char **environ;


int glm_liblinear_available(void)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char cand[4096];
    const char *p = path;
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        int w = n == 0 ? snprintf(cand, sizeof(cand), "./%s", LIBLINEAR_TRAIN)
                       : snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, p, LIBLINEAR_TRAIN);
        struct stat st;
        if (w > 0 && (size_t)w < sizeof(cand) && stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
            access(cand, X_OK) == 0)
            return 1;
        if (!colon)
            return 0;
        p = colon + 1;
    }
}

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
            set_err(err, errlen, "%s:%zu: header line too long", name, line_no);
            return -1;
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
                set_err(err, errlen, "%s:%zu: '%s': expected a binary model (nr_class 2)", name,
                        line_no, line);
                return -1;
            }
        } else if (strncmp(line, "label ", 6) == 0) {
            first_label = strtod(line + 6, &rest);
            if (rest == line + 6 || !isfinite(first_label)) {
                set_err(err, errlen, "%s:%zu: '%s': bad label line", name, line_no, line);
                return -1;
            }
        } else if (strncmp(line, "nr_feature ", 11) == 0) {
            nr_feature = strtoll(line + 11, &rest, 10);
            if (*rest != '\0' || nr_feature < 0 || nr_feature > 1000000000LL) {
                set_err(err, errlen, "%s:%zu: '%s': bad feature count", name, line_no, line);
                return -1;
            }
        } else if (strncmp(line, "bias ", 5) == 0) {
            bias = strtod(line + 5, &rest);
            if (*rest != '\0' || !(bias < 0)) {
                set_err(err, errlen, "%s:%zu: '%s': expected no bias term (bias -1)", name,
                        line_no, line);
                return -1;
            }
        }
        /* Other header lines (solver_type, ...) carry nothing needed here. */
    }
    if (!in_weights || nr_class != 2 || nr_feature < 0 || isnan(first_label) || isnan(bias)) {
        set_err(err, errlen,
                "%s:%zu: incomplete header (need nr_class 2, label, nr_feature, bias, then w)",
                name, line_no);
        return -1;
    }
    double *w = malloc((size_t)(nr_feature ? nr_feature : 1) * sizeof(double));
    if (!w) {
        set_err(err, errlen, "%s: out of memory", name);
        return -1;
    }
    const double sign = first_label > 0 ? 1.0 : -1.0;
    for (long long j = 0; j < nr_feature; j++) {
        line_no++;
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || !isfinite(v)) {
            set_err(err, errlen, "%s:%zu: weight %lld of %lld missing or not a number", name,
                    line_no, j + 1, nr_feature);
            free(w);
            return -1;
        }
        w[j] = sign * v;
        p = end;
        while (*p == ' ' || *p == '\t' || *p == '\r')
            p++;
        if (*p == '\n')
            p++;
        else if (*p != '\0' || j + 1 < nr_feature) {
            set_err(err, errlen, "%s:%zu: expected one weight per line", name, line_no);
            free(w);
            return -1;
        }
    }
    *weights = w;
    *n_weights = (size_t)nr_feature;
    return 0;
}

static char *read_text_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
        if (cap - len - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        set_err(err, errlen, "%s: cannot read", path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

/* ---- running liblinear ------------------------------------------------------------------ */

/* Spawn argv with stdin/stdout/stderr on /dev/null; wait at most timeout_s. 0 on exit status 0. */
static int run_with_timeout(char *const argv[], int timeout_s, char *err, size_t errlen)
{
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        set_err(err, errlen, "%s: cannot set up the child process", argv[0]);
        return -1;
    }
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        set_err(err, errlen, "%s: cannot run: %s", argv[0], strerror(rc));
        return -1;
    }
    const uint64_t limit_ns = (uint64_t)(timeout_s > 0 ? timeout_s : 1) * 1000000000ull;
    const uint64_t deadline = util_now_ns() + limit_ns;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            set_err(err, errlen, "%s: waitpid: %s", argv[0], strerror(errno));
            return -1;
        }
        if (util_now_ns() >= deadline) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            set_err(err, errlen, "%s: killed after the time limit of %d s", argv[0], timeout_s);
            return -1;
        }
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status))
        set_err(err, errlen, "%s: exited with status %d%s", argv[0], WEXITSTATUS(status),
                WEXITSTATUS(status) == 127 ? " (not installed?)" : "");
    else
        set_err(err, errlen, "%s: killed by signal %d", argv[0],
                WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return -1;
}

int glm_liblinear_reference(const char *data_path, double C, double eps, int timeout_s,
                            double **weights, size_t *n_weights, double *objective, char *err,
                            size_t errlen)
{
    *weights = NULL;
    *n_weights = 0;
    *objective = NAN;
    if (!(C > 0) || !isfinite(C) || !(eps > 0) || !isfinite(eps)) {
        set_err(err, errlen, "liblinear: C (%g) and eps (%g) must be positive", C, eps);
        return -1;
    }
    glm_dataset_t data;
    if (glm_load_libsvm(data_path, GLM_LABELS_BINARY, &data, err, errlen) != 0)
        return -1;

    const char *tmp = getenv("TMPDIR");
    char dir[1024], model[1100];
    snprintf(dir, sizeof(dir), "%s/inagg-liblinear-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        set_err(err, errlen, "liblinear: cannot create a temp dir %s: %s", dir, strerror(errno));
        glm_dataset_free(&data);
        return -1;
    }
    snprintf(model, sizeof(model), "%s/model", dir);
    char c_arg[64], e_arg[64];
    snprintf(c_arg, sizeof(c_arg), "%.17g", C);
    snprintf(e_arg, sizeof(e_arg), "%.17g", eps);
    char *argv[] = {(char *)LIBLINEAR_TRAIN, "-s", "0", "-c", c_arg, "-e", e_arg, "-q",
                    (char *)data_path, model, NULL};

    int rc = run_with_timeout(argv, timeout_s, err, errlen);
    char *text = NULL;
    if (rc == 0) {
        text = read_text_file(model, err, errlen);
        rc = text ? 0 : -1;
    }
    if (rc == 0)
        rc = glm_liblinear_parse_model(text, model, weights, n_weights, err, errlen);
    if (rc == 0) {
        double l2 = 1.0 / (C * (double)data.rows);
        *objective = glm_objective_of_weights(GLM_OBJ_LOGISTIC, &data, *weights, *n_weights, l2);
    }
    free(text);
    unlink(model);
    rmdir(dir);
    glm_dataset_free(&data);
    return rc;
}
