/*
 * train.h - `inagg train` in three parts: train_args.c parses the command line into
 * train_opts_t, train_run.c runs the job (one process, local worker processes with an embedded
 * switch, one rank against a running switch, or the MPI backend), train_render.c shows the
 * workers' reports (header, per-epoch lines or a progress bar, summary, JSON, plot). Internal
 * to the command.
 */
#ifndef INAGG_CLI_TRAIN_H
#define INAGG_CLI_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "apps/glm/train.h"

#define DEFAULT_SYNTHETIC "rcv1"
#define DEFAULT_WORKERS 4u
#define DEFAULT_TIMEOUT_MS 30000u
/* The embedded switch's default threads: one per online CPU up to this. On the 2-core VM
 * two threads cut a pipelined epoch by a third against one; four were slower than two
 * (docs/perf-log/2026-11-21-training-pipelining-optimizer.md). */
#define MAX_DEFAULT_SWITCH_THREADS 4u

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

/* The options (defaults, then argv). 0 to run, 1 after --help, 2 after a usage error (its
 * message printed). */
int train_parse_args(int argc, char **argv, train_opts_t *o);

/* ---- the report state, fed by every backend and rendered as it comes --------------------- */

typedef struct run {
    const train_opts_t *o;
    FILE *human; /* summary and per-epoch lines */
    int tty; /* progress bar on stderr */
    uint32_t world;
    glm_setup_record_t setup;
    int have_setup;
    glm_epoch_record_t *epochs;
    uint32_t nepochs;
    uint32_t done; /* ranks that finished */
    int failed;
    int cannot; /* a testbed cannot be built on this machine (exit 3) */
    char error[1400];
    uint64_t t_start;
    int bar_drawn;
    uint64_t last_bar_ns;
    struct train_reference *ref; /* computed after the run (NULL: none) */
} run_t;

/* ---- the reference a finished run is measured against (train_reference.c) ------------------ */

typedef struct train_reference {
    int have;
    const char *source; /* "liblinear" or "single" */
    char what[160]; /* how it was made, for the summary */
    double objective, accuracy; /* over the training set, the trainers' objective */
    double seconds; /* what making it took */
    char why_not[1100]; /* !have: why there is none (empty: none was wanted) */
} train_reference_t;

/* "auto", "liblinear", "single" or "none" into *out (TRAIN_REF_*). 0, or -EINVAL. */
int train_reference_parse(const char *text, int *out);

/* The reference of the finished run r: with --reference auto, liblinear-train's optimum when
 * it is installed and solves the objective (logistic, hinge; l2 > 0), else the same training
 * in one process (nothing for a --mode single run, which is that). train: the data the ranks
 * trained on, or NULL to load it again. Never fails: ref->why_not says why there is none. */
void train_reference_compute(const run_t *r, const glm_dataset_t *train, train_reference_t *ref);

const char *train_backend_name(const train_opts_t *o);
const char *train_protocol_name(const train_opts_t *o);

/* Feed one report line of rank from_rank (-1: the line's own); renders it. 0 to carry on,
 * a negative errno once the run has failed (r->error says why). */
int train_handle_line(run_t *r, const glm_line_t *l, int from_rank);

/* Take a progress bar off the terminal, if one is drawn. */
void train_clear_bar(run_t *r);

/* The first line: what runs where. */
void train_print_header(run_t *r);

/* After a successful run: the summary; the JSON object (--json) and the plot (--plot). The
 * latter two 0, or a negative errno after a message. */
void train_summary(run_t *r, double total_s);
int train_write_json(run_t *r, double total_s);
int train_write_plot(run_t *r);

#endif /* INAGG_CLI_TRAIN_H */
