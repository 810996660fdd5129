/*
 * train.h - `inagg train` in three parts: train_args.c parses the command line into
 * train_opts_t, src/apps/train/ runs the job (train_run.h), train_render.c shows the workers'
 * reports as they come and the result (header, per-epoch lines or a progress bar, summary,
 * JSON, plot); cmd_train.c joins them. Internal to the command.
 */
#ifndef INAGG_CLI_TRAIN_H
#define INAGG_CLI_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "apps/train/train_run.h"

#define DEFAULT_SYNTHETIC "rcv1"
#define DEFAULT_WORKERS 4u
#define DEFAULT_TIMEOUT_MS 30000u
/* The embedded switch's default threads: one per online CPU up to this. On the 2-core VM
 * two threads cut a pipelined epoch by a third against one; four were slower than two
 * (docs/perf-log/2026-11-21-training-pipelining-optimizer.md). */
#define MAX_DEFAULT_SWITCH_THREADS 4u

/* The options (defaults, then argv). 0 to run, 1 after --help, 2 after a usage error (its
 * message printed). */
int train_parse_args(int argc, char **argv, train_opts_t *o);

/* ---- what is shown, fed by the run's reports as they come (train_render.c) ---------------- */

typedef struct train_screen {
    const train_opts_t *o;
    const train_result_t *res; /* what train_run fills */
    FILE *human; /* summary and per-epoch lines */
    int tty; /* progress bar on stderr */
    int bar_drawn;
    uint64_t last_bar_ns;
} train_screen_t;

const char *train_backend_name(const train_opts_t *o);
const char *train_protocol_name(const train_opts_t *o);

/* The view train_run reports to (arg: a train_screen_t): a report recorded, shown as a line
 * or on the progress bar; a line of MPI's own, on stderr. */
void train_show_report(void *screen, const glm_line_t *l, int rank);
void train_show_text(void *screen, const char *line);

/* Take a progress bar off the terminal, if one is drawn. */
void train_clear_bar(train_screen_t *r);

/* The first line: what runs where. */
void train_print_header(train_screen_t *r);

/* After a successful run: the summary; the JSON object (--json) and the plot (--plot). The
 * latter two 0, or a negative errno after a message. */
void train_summary(train_screen_t *r, double total_s);
int train_write_json(train_screen_t *r, double total_s);
int train_write_plot(train_screen_t *r);

#endif /* INAGG_CLI_TRAIN_H */
