/*
 * train_int.h - what the training run's files share (train_run.c: a rank, the local ranks and
 * the run; train_mpi.c: the MPI backend; train_testbed.c: one rank per host of a testbed).
 * Internal to src/apps/train/.
 */
#ifndef INAGG_APPS_TRAIN_INT_H
#define INAGG_APPS_TRAIN_INT_H

#include <stddef.h>
#include <stdint.h>

#include "apps/launch/launch.h"
#include "apps/train/train_run.h"

#define LINE_MAX_LEN 4096

/* A run in progress: its options, the result it fills, who is told of each report. */
typedef struct run {
    const train_opts_t *o;
    train_result_t *res;
    const train_view_t *view;
} run_t;

/* What the parent keeps of a rank's pipe: a partial line, and whether it finished. */
typedef struct child {
    int finished; /* done line seen */
    char buf[LINE_MAX_LEN];
    size_t len;
    uint64_t last_heard_ns;
} child_t;

/* Record one report line of rank from_rank (-1: the line's own) and tell the view. 0 to carry
 * on, a negative errno once the run has failed (res->error says why). */
int train_record_line(run_t *run, const glm_line_t *l, int from_rank);

/* Read every rank's reports from g's pipes (ch: one per rank) until all closed or the run
 * failed; a rank silent too long fails it. */
void train_watch_ranks(const train_opts_t *o, run_t *run, launch_ranks_t *g, child_t *ch);

/* --backend mpi: the trainers under mpirun (placement: a testbed's, or NULL for this host).
 * 0, or a negative errno with the run's error set. */
int train_run_mpi(const train_opts_t *o, run_t *run, const launch_mpirun_cfg_t *placement);

/* --testbed N: the job across a testbed built here, the switch (or mpirun) and one rank per
 * host. 0, or a negative errno with the run's error set. */
int train_run_testbed(const train_opts_t *o, run_t *run);

#endif /* INAGG_APPS_TRAIN_INT_H */
