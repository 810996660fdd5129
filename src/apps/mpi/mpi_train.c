/*
 * mpi_train.c - inagg-mpi-train, the MPI baseline of `inagg train` (the paper's "CPUSync"):
 * the same trainers (glm/train.c) with a collective backend over OpenMPI: MPI_Allreduce for
 * the blocking sums, MPI_Iallreduce + MPI_Wait for the micro-batch allreduces of pipelined
 * model parallelism. Every rank loads (or generates) the same data; rank 0 prints the report
 * lines of glm/train.h on stdout (one per line, flushed), which `inagg train --backend mpi`
 * parses; a rank that fails prints an error line and aborts the job. Run under mpirun:
 * `inagg train --backend mpi` does that (bench/baseline_mpi.c) with flags that keep MPI on
 * TCP over loopback. Links the glm sources, never libinagg. Exit: 0, 1 failure, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/glm/collective.h"
#include "apps/glm/dataset.h"
#include "apps/glm/objective.h"
#include "apps/glm/train.h"
#include "lib/kernels/optim.h"

struct opts {
    const char *data, *synthetic, *test;
    int precision;
    glm_train_config_t cfg;
};

static void usage(FILE *out)
{
    fprintf(out, "usage: mpirun -np N inagg-mpi-train (--data FILE | --synthetic SPEC)\n"
                 "           [--test-data FILE] [--mode model|data|single]\n"
                 "           [--objective logistic|squared|hinge] [--batch B] [--micro-batch MB]\n"
                 "           [--epochs E] [--lr G] [--lr-schedule sqrt|const] [--l2 L]\n"
                 "           [--no-pipeline] [--average tail|none] [--precondition diag|none] "
                 "[--precision 32|8|4] [--seed S]\n"
                 "\n"
                 "The MPI baseline of `inagg train` (same algorithms, same defaults; see\n"
                 "`inagg train --help`). Rank 0 prints one JSON line per report on stdout.\n");
}

/* A number in [lo, hi] (the whole string): 0, or -EINVAL. */
static int parse_num(const char *s, double lo, double hi, double *out)
{
    if (!s || !*s)
        return -EINVAL;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

/* A whole number in [lo, hi]: 0, or -EINVAL. */
static int parse_whole(const char *s, double lo, double hi, double *out)
{
    return parse_num(s, lo, hi, out) == 0 && *out == floor(*out) ? 0 : -EINVAL;
}

/* A flag with a numeric value into o: NULL, or the flag's name when the value is bad. */
static const char *parse_number_flag(int c, const char *arg, struct opts *o)
{
    double v;
    switch (c) {
        case 'b':
            if (parse_whole(arg, 1, 1 << 20, &v) < 0)
                return "--batch";
            o->cfg.batch = (size_t)v;
            return NULL;
        case 'u':
            if (parse_whole(arg, 1, 1 << 20, &v) < 0)
                return "--micro-batch";
            o->cfg.micro_batch = (size_t)v;
            return NULL;
        case 'e':
            if (parse_whole(arg, 1, 1000000, &v) < 0)
                return "--epochs";
            o->cfg.epochs = (uint32_t)v;
            return NULL;
        case 'g':
            if (parse_num(arg, 0, 1e9, &v) < 0)
                return "--lr";
            o->cfg.lr = v;
            return NULL;
        case 'l':
            if (parse_num(arg, 0, 1e9, &v) < 0)
                return "--l2";
            o->cfg.l2 = v;
            return NULL;
        case 'p':
            if (parse_num(arg, 4, 32, &v) < 0 || (v != 32 && v != 8 && v != 4))
                return "--precision";
            o->precision = (int)v;
            return NULL;
        case 's':
            if (parse_num(arg, 0, 18446744073709551615.0, &v) < 0)
                return "--seed";
            o->cfg.seed = strtoull(arg, NULL, 10);
            return NULL;
    }
    return "an unknown flag";
}

/* arg as one of two names (0 for the first, 1 for the second): 0, or -EINVAL. */
static int parse_pair(const char *arg, const char *first, const char *second, int *out)
{
    if (strcmp(arg, first) != 0 && strcmp(arg, second) != 0)
        return -EINVAL;
    *out = strcmp(arg, second) == 0;
    return 0;
}

/* A flag with a value into o (the named ones here, numbers through parse_number_flag): NULL,
 * or the flag's name when the value is bad. */
static const char *parse_choice_flag(int c, const char *arg, struct opts *o)
{
    int second;
    optim_kind_t k;
    switch (c) {
        case 'm': return glm_mode_parse(arg, &o->cfg.mode) < 0 ? "--mode" : NULL;
        case 'o': return glm_objective_parse(arg, &o->cfg.objective) < 0 ? "--objective" : NULL;
        case 'S':
            if (parse_pair(arg, "sqrt", "const", &second) < 0)
                return "--lr-schedule";
            o->cfg.schedule = second ? GLM_LR_CONST : GLM_LR_SQRT;
            return NULL;
        case 'K':
            if (parse_pair(arg, "diag", "none", &second) < 0)
                return "--precondition";
            o->cfg.precondition = second ? GLM_PRECOND_NONE : GLM_PRECOND_DIAG;
            return NULL;
        case 'V':
            if (parse_pair(arg, "tail", "none", &second) < 0)
                return "--average";
            o->cfg.average = second ? GLM_AVG_NONE : GLM_AVG_TAIL;
            return NULL;
        case 'O':
            if (optim_parse_kind(arg, &k) < 0)
                return "--optimizer";
            o->cfg.optimizer = 1 + (int)k;
            return NULL;
        case 'E':
            if (parse_pair(arg, "inside", "outside", &second) < 0)
                return "--eps-place";
            o->cfg.eps_outside = second;
            return NULL;
    }
    return parse_number_flag(c, arg, o);
}

/* The command line into o: 0, 1 after --help, or -EINVAL (said on stderr unless quiet). */
static int parse_args(int argc, char **argv, struct opts *o, int quiet)
{
    static const struct option longopts[] = {{"data", required_argument, NULL, 'd'},
                                             {"synthetic", required_argument, NULL, 'y'},
                                             {"test-data", required_argument, NULL, 't'},
                                             {"mode", required_argument, NULL, 'm'},
                                             {"objective", required_argument, NULL, 'o'},
                                             {"batch", required_argument, NULL, 'b'},
                                             {"micro-batch", required_argument, NULL, 'u'},
                                             {"epochs", required_argument, NULL, 'e'},
                                             {"lr", required_argument, NULL, 'g'},
                                             {"lr-schedule", required_argument, NULL, 'S'},
                                             {"l2", required_argument, NULL, 'l'},
                                             {"no-pipeline", no_argument, NULL, 'P'},
                                             {"average", required_argument, NULL, 'V'},
                                             {"precondition", required_argument, NULL, 'K'},
                                             {"precision", required_argument, NULL, 'p'},
                                             {"seed", required_argument, NULL, 's'},
                                             {"optimizer", required_argument, NULL, 'O'},
                                             {"eps-place", required_argument, NULL, 'E'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    glm_train_config_t def = GLM_TRAIN_CONFIG_INIT;
    o->cfg = def;
    o->precision = 32;
    opterr = !quiet;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *bad = NULL;
        switch (c) {
            case 'd': o->data = optarg; break;
            case 'y': o->synthetic = optarg; break;
            case 't': o->test = optarg; break;
            case 'P': o->cfg.pipeline = 0; break;
            case 'h':
                if (!quiet)
                    usage(stdout);
                return 1;
            case '?': return -EINVAL; /* getopt said why */
            default: bad = parse_choice_flag(c, optarg, o); break;
        }
        if (bad) {
            if (!quiet)
                fprintf(stderr, "inagg-mpi-train: bad value for %s: '%s'\n", bad, optarg);
            return -EINVAL;
        }
    }
    if (optind < argc || (o->data != NULL) == (o->synthetic != NULL)) {
        if (!quiet)
            fprintf(stderr, "inagg-mpi-train: give exactly one of --data and --synthetic\n");
        return -EINVAL;
    }
    return 0;
}

/* ---- the MPI collective backend ----------------------------------------------------------- */

typedef struct mpi_impl {
    MPI_Request *reqs;
} mpi_impl_t;

/* An MPI call's failure: -EIO (MPI's codes are not errnos), its text in c->err. */
static int mpi_fail(glm_coll_t *c, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "error %d", rc);
    return set_err(c->err, sizeof(c->err), -EIO, "rank %u: %s: %s", c->rank, what, msg);
}

static int mpi_allreduce(glm_coll_t *c, float *buf, size_t n)
{
    if (n == 0)
        return 0;
    if (n > INT_MAX)
        return set_err(c->err, sizeof(c->err), -EOVERFLOW,
                       "rank %u: allreduce of %zu elements is too large", c->rank, n);
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, "MPI_Allreduce", rc);
}

static int mpi_start(glm_coll_t *c, float *buf, size_t n, size_t h)
{
    mpi_impl_t *im = c->impl;
    if (h >= c->max_inflight || im->reqs[h] != MPI_REQUEST_NULL || n > INT_MAX)
        return set_err(c->err, sizeof(c->err), -EINVAL, "rank %u: bad small allreduce (handle %zu)",
                       c->rank, h);
    int rc =
        MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &im->reqs[h]);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, "MPI_Iallreduce", rc);
}

static int mpi_wait(glm_coll_t *c, size_t h)
{
    mpi_impl_t *im = c->impl;
    if (h >= c->max_inflight || im->reqs[h] == MPI_REQUEST_NULL)
        return set_err(c->err, sizeof(c->err), -EINVAL, "rank %u: wait on idle handle %zu", c->rank,
                       h);
    int rc = MPI_Wait(&im->reqs[h], MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, "MPI_Wait", rc);
}

static void mpi_destroy(glm_coll_t *c)
{
    mpi_impl_t *im = c->impl;
    for (size_t h = 0; im && h < c->max_inflight; h++)
        if (im->reqs[h] != MPI_REQUEST_NULL)
            MPI_Wait(&im->reqs[h], MPI_STATUS_IGNORE);
    if (im)
        free(im->reqs);
    free(im);
    free(c);
}

static const glm_coll_ops_t mpi_ops = {mpi_allreduce, mpi_start, mpi_wait, NULL, mpi_destroy};

static glm_coll_t *mpi_coll_create(int rank, int world, size_t inflight)
{
    glm_coll_t *c = calloc(1, sizeof(*c));
    mpi_impl_t *im = calloc(1, sizeof(*im));
    if (!c || !im || !(im->reqs = malloc(inflight * sizeof(MPI_Request)))) {
        free(im);
        free(c);
        return NULL;
    }
    for (size_t h = 0; h < inflight; h++)
        im->reqs[h] = MPI_REQUEST_NULL;
    c->ops = &mpi_ops;
    c->impl = im;
    c->rank = (uint32_t)rank;
    c->world = (uint32_t)world;
    c->max_inflight = inflight;
    c->max_small = INT_MAX;
    c->backend = "mpi";
    c->protocol = "none";
    return c;
}

/* ---- reports -------------------------------------------------------------------------------- */

static void emit(const glm_line_t *l)
{
    char buf[2048];
    if (glm_line_format(l, buf, sizeof(buf)) > 0) {
        fputs(buf, stdout);
        fputc('\n', stdout);
        fflush(stdout);
    }
}

static int fail_abort(int rank, const char *msg)
{
    glm_line_t l;
    glm_line_init(&l, GLM_LINE_ERROR, rank);
    snprintf(l.message, sizeof(l.message), "%s", msg);
    emit(&l);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

static int on_setup(const glm_setup_record_t *su, void *arg)
{
    int rank = *(int *)arg;
    if (rank == 0) {
        glm_line_t l;
        glm_line_init(&l, GLM_LINE_SETUP, rank);
        l.setup = *su;
        emit(&l);
    }
    return 0;
}

static int on_epoch(const glm_epoch_record_t *rec, void *arg)
{
    int rank = *(int *)arg;
    if (rank == 0) {
        glm_line_t l;
        glm_line_init(&l, GLM_LINE_EPOCH, rank);
        l.epoch = *rec;
        emit(&l);
    }
    return 0;
}

static int on_progress(uint32_t epoch, double fraction, void *arg)
{
    int rank = *(int *)arg;
    if (rank == 0) {
        glm_line_t l;
        glm_line_init(&l, GLM_LINE_PROGRESS, rank);
        l.progress_epoch = epoch;
        l.progress_fraction = fraction;
        emit(&l);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "inagg-mpi-train: MPI_Init failed\n");
        return 1;
    }
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    struct opts o;
    memset(&o, 0, sizeof(o));
    int prc = parse_args(argc, argv, &o, rank != 0);
    if (prc != 0) {
        MPI_Finalize();
        return prc > 0 ? 0 : 2;
    }
    if (o.cfg.mode == GLM_MODE_SINGLE && world != 1)
        return fail_abort(rank, "--mode single runs on one process: use -np 1");
    o.cfg.progress = on_progress;
    o.cfg.progress_arg = &rank;
    o.cfg.progress_ms = 250;

    char err[1024];
    glm_dataset_t train, test;
    if (glm_load_inputs(o.data, o.synthetic, o.test, o.cfg.seed, o.cfg.objective, o.precision,
                        &train, &test, err, sizeof(err)) != 0)
        return fail_abort(rank, err);
    size_t inflight = (o.cfg.batch + o.cfg.micro_batch - 1) / o.cfg.micro_batch;
    glm_coll_t *coll = mpi_coll_create(rank, world, inflight < 16 ? 16 : inflight);
    if (!coll)
        return fail_abort(rank, "out of memory");
    int rc = glm_train(&o.cfg, coll, &train, o.test ? &test : NULL, on_setup, on_epoch, &rank, NULL,
                       err, sizeof(err));
    if (rc != 0) {
        char msg[1100];
        snprintf(msg, sizeof(msg), "%s", err);
        return fail_abort(rank, msg);
    }
    glm_coll_destroy(coll);
    glm_dataset_free(&train);
    glm_dataset_free(&test);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        glm_line_t l;
        glm_line_init(&l, GLM_LINE_DONE, rank);
        emit(&l);
    }
    MPI_Finalize();
    return 0;
}
