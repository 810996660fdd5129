/*
 * train_run.h - the training application's interface: `inagg train`'s run, between the options
 * the command parsed (train_opts_t, src/apps/cli/train_args.c) and its result (train_result_t,
 * shown by src/apps/cli/train_render.c). train_run.c runs the job (one process, local worker
 * processes with an embedded switch, one rank against a running switch, the MPI backend, or
 * one rank per host of a testbed); train_reference.c makes what a finished run is measured
 * against. The run reports each event through a train_view_t as it comes, so that progress
 * is shown while the ranks train; it never prints.
 */
#ifndef INAGG_APPS_TRAIN_RUN_H
#define INAGG_APPS_TRAIN_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "apps/glm/train.h"

/* --reference: what the result is compared with (train_reference.c). */
enum { TRAIN_REF_AUTO = 0, TRAIN_REF_LIBLINEAR, TRAIN_REF_SINGLE, TRAIN_REF_NONE };

typedef struct train_opts {
    const char *data, *synthetic, *test;
    uint32_t workers;
    int workers_given;
    glm_train_config_t cfg;
    int backend_mpi;
    int protocol; /* -1: by mode; 0 switchml; 1 p4sgd */
    int precision;
    const char *compress; /* --compress MODE (NULL: none): the job's codec */
    int no_feedback; /* --no-error-feedback */
    const char *capture_prefix; /* --capture-gradients PREFIX: PREFIX.rankR.f32 (NULL: none) */
    const char *json_path, *plot_path;
    const char *switch_addr, *job;
    long rank, world; /* -1: not given */
    uint32_t timeout_ms;
    uint32_t switch_threads; /* the embedded switch's threads; 0 when there is none */
    int lr_given, l2_given;
    uint32_t testbed; /* hosts of a testbed to build and run on, one rank each; 0: none */
    const char *link_rate, *fabric, *link_delay; /* tools/testbed's (NULL: its defaults) */
    int report_lines; /* --report-lines: one rank writes its report lines to stdout */
    int reference; /* TRAIN_REF_*: the optimum or single-process result compared against */
    int argc; /* the command line, forwarded to the ranks of a testbed run */
    char **argv;
} train_opts_t;

/* The reference a finished run is measured against (train_reference.c). */
typedef struct train_reference {
    int have;
    const char *source; /* "liblinear" or "single" */
    char what[160]; /* how it was made, for the summary */
    double objective, accuracy; /* over the training set, the trainers' objective */
    double seconds; /* what making it took */
    char why_not[1100]; /* !have: why there is none (empty: none was wanted) */
} train_reference_t;

/* What a run gathered from its ranks' reports. */
typedef struct train_result {
    glm_setup_record_t setup;
    int have_setup;
    glm_epoch_record_t *epochs; /* [nepochs], rank 0's */
    uint32_t nepochs;
    uint32_t done; /* ranks that finished */
    int failed;
    int cannot; /* a testbed cannot be built on this machine */
    char error[1400]; /* failed: why */
    double seconds; /* the run, from its start to its last rank's end */
    train_reference_t ref; /* computed after a successful run by rank 0 (ref.have: one) */
} train_result_t;

/* Who is told of the reports as they come (NULL members: nobody). */
typedef struct train_view {
    /* A report of rank `rank`, once recorded in the result: the setup (its first), an epoch,
     * a progress mark, a rank's end. Errors are not reported here: they fail the run. */
    void (*report)(void *arg, const glm_line_t *l, int rank);
    /* A line the MPI program printed that is no report (MPI's own messages). */
    void (*text)(void *arg, const char *line);
    void *arg;
} train_view_t;

/* Whether this process is the run's rank 0 (or runs every rank): the one that shows it. */
int train_is_rank0(const train_opts_t *o);

/* A --synthetic spec's generated data against this machine's memory, before any is made: one
 * copy in this process for its forked ranks (or its one rank), one per rank where each rank
 * generates its own (--backend mpi, --testbed). 0, or -ENOMEM with the reason in err. */
int train_check_memory(const train_opts_t *o, char *err, size_t errlen);

/* Run the training o describes into *res (train_result_free frees it, whatever the outcome):
 * 0, or a negative errno with res->failed and res->error set (res->cannot: a testbed cannot
 * be built here). With o->report_lines it runs one rank of a testbed run and writes its
 * report lines to stdout instead (view unused). */
int train_run(const train_opts_t *o, const train_view_t *view, train_result_t *res);
void train_result_free(train_result_t *res);

/* "auto", "liblinear", "single" or "none" into *out (TRAIN_REF_*). 0, or -EINVAL. */
int train_reference_parse(const char *text, int *out);

/* The reference of a finished run with options o and result res: with --reference auto,
 * liblinear-train's optimum when it is installed and solves the objective (logistic, hinge;
 * l2 > 0), else the same training in one process (nothing for a --mode single run, which is
 * that). train: the data the ranks trained on, or NULL to load it again. Never fails:
 * ref->why_not says why there is none. */
void train_reference_compute(const train_opts_t *o, const train_result_t *res,
                             const glm_dataset_t *train, train_reference_t *ref);

#endif /* INAGG_APPS_TRAIN_RUN_H */
