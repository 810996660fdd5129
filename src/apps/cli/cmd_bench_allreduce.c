/*
 * cmd_bench_allreduce.c - `inagg bench allreduce`: the tensor aggregation benchmark, after
 * SwitchML's microbenchmark (section 6.1), on loopback or across a testbed of network
 * namespaces with rate-limited links, with Open MPI (its own algorithm choice and the ring)
 * and Gloo as baselines on the same tensor in the same run.
 *
 * parse (bench_allreduce_args.c), run (bench_allreduce_run.c, one rank in
 * bench_allreduce_rank.c), render (bench_allreduce_render.c). With --rank it is one rank of a
 * job on a running switch and prints that rank's report: the testbed runs its ranks that way.
 * A run that failed (a rank could not join, a call failed, the switch stopped) prints its error,
 * naming the rank, and no results table; its --json says it under "error".
 * Exit: 0 every result verified, 1 a run failed or did not verify, 2 bad usage (sizes whose
 * ranks need more memory than the machine has available among them), 3 a testbed
 * cannot be built on this machine (not root, no network namespaces).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "apps/cli/bench_allreduce_cli.h"
#include "apps/cli/commands.h"
#include "apps/cli/output.h"

static int single_rank(const ar_opts_t *o)
{
    ar_rank_report_t *rep = bench_rank_reports_new(1, AR_MAX_ITERS);
    if (!rep) {
        fprintf(stderr, AR_CMD ": out of memory\n");
        return 1;
    }
    int rc = ar_rank_run(o, o->rank, o->switch_addr, o->job, rep);
    bench_rank_meta_t meta = ar_rank_meta(o);
    fflush(stdout);
    if (bench_rank_report_write(STDOUT_FILENO, rep, &meta) < 0)
        rc = -EIO;
    if (rc != 0)
        fprintf(stderr, AR_CMD ": %s\n", rep->error[0] ? rep->error : "rank failed");
    free(rep);
    return rc == 0 ? 0 : 1;
}

int cmd_bench_allreduce(int argc, char **argv)
{
    ar_opts_t o;
    signal(SIGPIPE, SIG_IGN); /* also for --help: a reader that stops early is not an error */
    int prc = ar_parse(argc, argv, &o);
    if (prc)
        return prc == 1 ? 0 : prc;
    char err[512];
    if (ar_check_memory(&o, err, sizeof(err)) != 0) {
        fprintf(stderr, AR_CMD ": %s; ask for fewer --elems or --workers\n", err);
        return 2;
    }
    if (o.single)
        return single_rank(&o);
    ar_run_t *run = calloc(1, sizeof(*run));
    if (!run) {
        fprintf(stderr, AR_CMD ": out of memory\n");
        return 1;
    }
    int rc = ar_run(&o, run);
    if (rc != 0) {
        free(run);
        return rc == -EOPNOTSUPP ? 3 : 1; /* 3: testbeds cannot be built here */
    }
    ar_render_text(cli_text_stream(o.json_path), run);
    int ok = ar_run_ok(run);
    if (o.json_path && ar_render_json(run) != 0)
        ok = 0;
    if (o.nsizes && ar_render_plot(run, o.plot_path) != 0)
        ok = 0;
    free(run);
    return ok ? 0 : 1;
}
