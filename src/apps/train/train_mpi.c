/*
 * train_mpi.c - the training run's MPI backend (see train_int.h): the same trainers as
 * inagg-mpi-train under mpirun, given the run's options as flags; their report lines come
 * from its stdout and are recorded as the local ranks' are, anything else it prints goes to
 * the view as text.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "apps/glm/objective.h"
#include "apps/launch/launch.h"
#include "apps/train/train_int.h"
#include "lib/kernels/optim.h"

#define MPI_TIME_LIMIT_S 3600u

static int mpi_line(const char *line, void *arg)
{
    run_t *run = arg;
    glm_line_t l;
    if (glm_line_parse(line, &l) == GLM_LINE_NONE) {
        if (run->view && run->view->text) /* something else the program or MPI printed */
            run->view->text(run->view->arg, line);
        return 0;
    }
    return train_record_line(run, &l, -1) == 0 ? 0 : 1;
}

int train_run_mpi(const train_opts_t *o, run_t *run, const launch_mpirun_cfg_t *placement)
{
    char prog[4096];
    if (launch_find_program("inagg-mpi-train", "INAGG_MPI_TRAIN", prog, sizeof(prog)) != 0) {
        snprintf(
            run->res->error, sizeof(run->res->error),
            "--backend mpi needs the program '%.1000s', which is missing or not executable (it "
            "is built by `make` when mpicc is installed: apt-get install openmpi-bin "
            "libopenmpi-dev; $INAGG_MPI_TRAIN overrides the path)",
            prog[0] ? prog : "inagg-mpi-train");
        run->res->failed = 1;
        return -ENOENT;
    }
    char batch[32], mb[32], epochs[32], lr[64], l2[64], prec[16], seed[32];
    snprintf(batch, sizeof(batch), "%zu", o->cfg.batch);
    snprintf(mb, sizeof(mb), "%zu", o->cfg.micro_batch);
    snprintf(epochs, sizeof(epochs), "%u", o->cfg.epochs);
    snprintf(lr, sizeof(lr), "%.17g", o->cfg.lr);
    snprintf(l2, sizeof(l2), "%.17g", o->cfg.l2);
    snprintf(prec, sizeof(prec), "%d", o->precision);
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)o->cfg.seed);
    const char *args[40];
    size_t a = 0;
    args[a++] = o->data ? "--data" : "--synthetic";
    args[a++] = o->data ? o->data : o->synthetic;
    if (o->test) {
        args[a++] = "--test-data";
        args[a++] = o->test;
    }
    args[a++] = "--mode";
    args[a++] = glm_mode_name(o->cfg.mode);
    args[a++] = "--objective";
    args[a++] = glm_objective_name(o->cfg.objective);
    args[a++] = "--batch";
    args[a++] = batch;
    args[a++] = "--micro-batch";
    args[a++] = mb;
    args[a++] = "--epochs";
    args[a++] = epochs;
    if (o->lr_given) {
        args[a++] = "--lr";
        args[a++] = lr;
    }
    args[a++] = "--lr-schedule";
    args[a++] = o->cfg.schedule == GLM_LR_SQRT ? "sqrt" : "const";
    if (o->l2_given) {
        args[a++] = "--l2";
        args[a++] = l2;
    }
    if (!o->cfg.pipeline)
        args[a++] = "--no-pipeline";
    if (o->cfg.precondition == GLM_PRECOND_DIAG) {
        args[a++] = "--precondition";
        args[a++] = "diag";
    }
    if (o->cfg.average == GLM_AVG_NONE) {
        args[a++] = "--average";
        args[a++] = "none";
    }
    if (o->cfg.optimizer) {
        args[a++] = "--optimizer";
        args[a++] = optim_kind_name((optim_kind_t)(o->cfg.optimizer - 1));
        args[a++] = "--eps-place";
        args[a++] = o->cfg.eps_outside ? "outside" : "inside";
    }
    args[a++] = "--precision";
    args[a++] = prec;
    args[a++] = "--seed";
    args[a++] = seed;
    args[a] = NULL;
    launch_capture_t *cap = calloc(1, sizeof(*cap));
    if (!cap) {
        snprintf(run->res->error, sizeof(run->res->error), "out of memory");
        run->res->failed = 1;
        return -ENOMEM;
    }
    cap->on_line = mpi_line;
    cap->arg = run;
    char err[1024];
    int rc = launch_mpirun_cfg(placement, o->workers, prog, args, MPI_TIME_LIMIT_S, cap, err,
                               sizeof(err));
    free(cap);
    if (run->res->failed)
        return -EIO; /* a rank's own error line says more than mpirun's stderr */
    if (rc != 0) {
        run->res->failed = 1;
        snprintf(run->res->error, sizeof(run->res->error), "MPI run failed: %s", err);
        return -EIO;
    }
    if (run->res->done == 0) {
        run->res->failed = 1;
        snprintf(run->res->error, sizeof(run->res->error),
                 "the MPI run ended without its final report (%u of %u epochs)", run->res->nepochs,
                 o->cfg.epochs);
        return -EPROTO;
    }
    return 0;
}
