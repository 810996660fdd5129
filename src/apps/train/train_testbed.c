/*
 * train_testbed.c - the training run across a testbed of network namespaces built here (see
 * train_int.h; launch/testbed_job.c): its switch and one rank per host, each this binary's
 * `train` with the command line's training options in its one-rank mode (--switch,
 * --report-lines: its report lines on stdout, read through a pipe as the local ranks' are);
 * or with --backend mpi, mpirun with one rank per host over the testbed's links.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/harness.h"
#include "apps/launch/launch.h"
#include "apps/train/train_int.h"
#include "lib/base/errmsg.h"

/* Whether argv[i] is one of the options that describe this run rather than a rank's
 * training (the testbed's, the output's, the embedded switch's); *takes: it has a separate
 * value. */
static int parent_only(const char *a, int *takes)
{
    static const char *const names[] = {"--testbed", "--fabric", "--link-delay",     "--link-rate",
                                        "--json",    "--plot",   "--switch-threads", NULL};
    *takes = 0;
    for (int k = 0; names[k]; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
            *takes = a[n] == '\0';
            return 1;
        }
    }
    return 0;
}

/* Start rank r in host h(r+1): this binary, `train`, the command line's training options,
 * then --switch --rank --world --job --report-lines; its stdout on a pipe into g->fd[r]. */
static int start_testbed_rank(const train_opts_t *o, const launch_tbjob_t *j, const char *self,
                              const char *job, uint32_t r, launch_ranks_t *g, char *err,
                              size_t errlen)
{
    size_t cap = (size_t)o->argc + 24;
    char **cmd = calloc(cap, sizeof(char *)), **argv = calloc(cap + 8, sizeof(char *));
    char host[16], rank[16], world[16];
    int rc = -ENOMEM, p[2] = {-1, -1};
    if (!cmd || !argv) {
        set_err(err, errlen, rc, "out of memory");
        goto out;
    }
    snprintf(host, sizeof(host), "h%u", r + 1);
    snprintf(rank, sizeof(rank), "%u", r);
    snprintf(world, sizeof(world), "%u", o->workers);
    size_t n = 0;
    cmd[n++] = (char *)self;
    cmd[n++] = "train";
    for (int i = 1; i < o->argc; i++) {
        int takes;
        if (strcmp(o->argv[i], "train") == 0 && i == 1)
            continue;
        if (parent_only(o->argv[i], &takes)) {
            i += takes;
            continue;
        }
        cmd[n++] = o->argv[i];
    }
    const char *tail[] = {"--switch", j->sw_addr, "--rank",         rank, "--world", world,
                          "--job",    job,        "--report-lines", NULL};
    for (int k = 0; tail[k]; k++)
        cmd[n++] = (char *)tail[k];
    cmd[n] = NULL;
    if (launch_testbed_argv(&j->tb, host, cmd, argv, cap + 8) == 0) {
        rc = set_err(err, errlen, -E2BIG, "rank %u's command line is too long", r);
        goto out;
    }
    if (pipe2(p, O_CLOEXEC) != 0) {
        rc = set_err(err, errlen, -errno, "pipe: %s", strerror(errno));
        goto out;
    }
    launch_spec_t spec = {argv, NULL, LAUNCH_DEVNULL, p[1], LAUNCH_INHERIT, 1, 0};
    pid_t pid = launch_spawn(&spec, err, errlen);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        rc = (int)pid;
        goto out;
    }
    g->pid[r] = pid;
    g->fd[r] = p[0];
    g->reaped[r] = 0;
    rc = 0;
out:
    free(cmd);
    free(argv);
    return rc;
}

/* The job across a testbed built here: the switch (or mpirun) and one rank per host. */
int train_run_testbed(const train_opts_t *o, run_t *run)
{
    launch_tbjob_t *j = calloc(1, sizeof(*j));
    child_t *ch = calloc(o->workers, sizeof(child_t));
    launch_ranks_t *g = calloc(1, sizeof(*g));
    char err[1024], self[PATH_MAX], job[64];
    int up = 0;
    if (!j || !ch || !g) {
        snprintf(run->res->error, sizeof(run->res->error), "out of memory");
        goto fail;
    }
    j->tb.fabric = o->fabric;
    j->tb.link_delay = o->link_delay;
    int rc = launch_tbjob_up(j, o->testbed, o->link_rate ? o->link_rate : "none", 9000, 0, err,
                             sizeof(err));
    if (rc != 0) {
        snprintf(run->res->error, sizeof(run->res->error), "%s", err);
        if (rc == -EOPNOTSUPP)
            run->res->cannot = 1;
        goto fail;
    }
    up = 1;
    if (o->backend_mpi) {
        rc = train_run_mpi(o, run, &j->mpi);
        goto done;
    }
    ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
    self[sl > 0 ? sl : 0] = '\0';
    if (launch_tbjob_switch(j, self, o->switch_threads, err, sizeof(err)) != 0 ||
        launch_job_secret(err, sizeof(err)) != 0) {
        snprintf(run->res->error, sizeof(run->res->error), "%s", err);
        goto fail;
    }
    bench_job_name("train", job, sizeof(job));
    g->n = o->workers;
    for (uint32_t r = 0; r < o->workers; r++) {
        g->fd[r] = -1;
        g->reaped[r] = 1;
    }
    for (uint32_t r = 0; r < o->workers; r++) {
        if (start_testbed_rank(o, j, self, job, r, g, err, sizeof(err)) != 0) {
            snprintf(run->res->error, sizeof(run->res->error), "rank %u could not start: %s", r,
                     err);
            run->res->failed = 1;
            break;
        }
    }
    if (!run->res->failed)
        train_watch_ranks(o, run, g, ch);
    launch_ranks_kill(g); /* the first failure ends the others */
    rc = run->res->failed ? -EIO : 0;
done:
    launch_tbjob_down(j);
    free(j);
    free(ch);
    free(g);
    return rc;
fail:
    run->res->failed = 1;
    if (up)
        launch_tbjob_down(j);
    free(j);
    free(ch);
    free(g);
    return -EIO;
}
