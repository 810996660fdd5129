/*
 * cmd_train.c - `inagg train`: its options parsed (train_args.c), the training run
 * (src/apps/train/train_run.h) shown as its reports come (train_render.c), then the summary,
 * the JSON report and the plot. Exit: 0 done, 1 the run failed, 2 bad usage (or data this
 * machine cannot hold), 3 a testbed cannot be built here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/cli/commands.h"
#include "apps/cli/plot.h"
#include "apps/cli/train.h"
#include "lib/base/log.h"

/* Where a run's summary and epoch lines go: stderr when the JSON takes stdout; nowhere for a
 * rank other than 0 of a job run against a given switch (it only reports a failure). */
static FILE *human_stream(const train_opts_t *o)
{
    int json_stdout = o->json_path && strcmp(o->json_path, "-") == 0;
    FILE *human = json_stdout ? stderr : stdout;
    int one_rank_here =
        o->cfg.mode != GLM_MODE_SINGLE && !o->testbed && !o->backend_mpi && o->switch_addr;
    if (one_rank_here && !train_is_rank0(o)) {
        human = fopen("/dev/null", "w");
        if (!human)
            human = stderr;
    }
    return human;
}

/* After a successful run, rank 0 shows its result: 0, or 1 when --json or --plot failed. */
static int show_result(train_screen_t *s, const train_result_t *res)
{
    int out = 0;
    train_summary(s, res->seconds);
    if (s->o->json_path && train_write_json(s, res->seconds) != 0)
        out = 1;
    if (s->o->plot_path && train_write_plot(s) != 0)
        out = 1;
    return out;
}

int cmd_train(int argc, char **argv)
{
    train_opts_t o;
    int prc = train_parse_args(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    log_init(LOG_WARN, "inagg"); /* the embedded switch: no per-job chatter ($INAGG_LOG wins) */
    char err[512];
    if (train_check_memory(&o, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg train: %s; ask for fewer samples or features\n", err);
        return 2;
    }
    if (o.plot_path && cli_plot_available("inagg train") < 0)
        return 1;
    train_result_t res;
    if (o.report_lines) { /* one rank of a testbed run: its reports are its parent's to show */
        int rc = train_run(&o, NULL, &res);
        train_result_free(&res);
        return rc == 0 ? 0 : 1;
    }
    int is_rank0 = train_is_rank0(&o);
    train_screen_t screen = {.o = &o, .res = &res, .human = human_stream(&o)};
    screen.tty = isatty(STDERR_FILENO) && is_rank0;
    if (is_rank0)
        train_print_header(&screen);
    train_view_t view = {train_show_report, train_show_text, &screen};
    int rc = train_run(&o, &view, &res), out;
    if (rc != 0) {
        train_clear_bar(&screen);
        fprintf(stderr, "inagg train: %s\n", res.error);
        out = res.cannot ? 3 : 1;
    } else {
        out = is_rank0 ? show_result(&screen, &res) : 0;
    }
    if (screen.human != stdout && screen.human != stderr)
        fclose(screen.human);
    train_result_free(&res);
    return out;
}
