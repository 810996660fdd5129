/*
 * baseline_mpi.c - see baseline_mpi.h. The mpirun command line and its process handling are
 * launch/'s (launch_mpirun); this file names the program, passes the benchmark's parameters
 * and reads the report line.
 */
#include "apps/bench/baseline_mpi.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "apps/launch/launch.h"
#include "lib/base/errmsg.h"
#include "lib/base/util.h"
#include "lib/json/json.h"

#define BASELINE_MAX_WORKERS 64u /* the int32 tensor values are bounded for 64 ranks */
#define PROGRAM_NAME "inagg-mpi-bench"

int baseline_mpi_find_program(char *buf, size_t len)
{
    return launch_find_program(PROGRAM_NAME, "INAGG_MPI_BENCH", buf, len) == 0 ? 0 : -ENOENT;
}

/* The report: the line whose "name" is "mpi", with every number and "verified". 0, or -EINVAL. */
static int parse_report(const char *line, struct baseline_mpi_result *out)
{
    static const char *const keys[] = {"median", "min", "max", "ate_per_s", "p50", "p99", "p999"};
    double *dst[] = {&out->tat_median_ms, &out->tat_min_ms, &out->tat_max_ms, &out->ate_per_s,
                     &out->lat_p50_us,    &out->lat_p99_us, &out->lat_p999_us};
    char name[16];
    if (json_find_string(line, "name", name, sizeof(name)) != 0 || strcmp(name, "mpi") != 0)
        return -EINVAL;
    for (size_t i = 0; i < INAGG_ARRAY_LEN(keys); i++)
        if (json_find_number(line, keys[i], dst[i]) != 0)
            return -EINVAL;
    if (json_find_number(line, "cpu_workers_pct", &out->cpu_workers_pct) != 0)
        out->cpu_workers_pct = NAN;
    if (json_find_number(line, "cpu_workers_max_pct", &out->cpu_workers_max_pct) != 0)
        out->cpu_workers_max_pct = NAN;
    if (json_find_string(line, "checksum", out->checksum, sizeof(out->checksum)) != 0)
        out->checksum[0] = '\0';
    return json_find_bool(line, "verified", &out->verified);
}

/* The first line of text that parses as the report into out. 0, or -EINVAL when none does. */
static int find_report(char *text, struct baseline_mpi_result *out)
{
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        int rc = parse_report(line, out);
        if (nl)
            *nl = '\n';
        if (rc == 0)
            return 0;
        line = nl ? nl + 1 : NULL;
    }
    return -EINVAL;
}

int baseline_mpi_run(const struct baseline_mpi_params *p, struct baseline_mpi_result *out,
                     char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!p || !out)
        return set_err(err, errlen, -EINVAL, "baseline_mpi_run: null argument");
    memset(out, 0, sizeof(*out));
    if (p->workers < 1 || p->workers > BASELINE_MAX_WORKERS || p->elems < 1 ||
        p->elems > (size_t)INT_MAX || p->iters < 1) {
        return set_err(err, errlen, -EINVAL,
                       "MPI baseline: invalid parameters (workers %u: 1..%u, elems %zu: 1..%d, "
                       "iters %u: >= 1)",
                       p->workers, BASELINE_MAX_WORKERS, p->elems, INT_MAX, p->iters);
    }
    char prog[PATH_MAX];
    if (baseline_mpi_find_program(prog, sizeof(prog)) != 0) {
        return set_err(err, errlen, -ENOENT,
                       "MPI baseline program '%s' is missing or not executable (it is built by "
                       "`make` when mpicc is installed; $INAGG_MPI_BENCH overrides the path)",
                       prog[0] ? prog : PROGRAM_NAME);
    }

    char elems[32], iters[16], warmup[16], seed[32];
    snprintf(elems, sizeof(elems), "%zu", p->elems);
    snprintf(iters, sizeof(iters), "%u", p->iters);
    snprintf(warmup, sizeof(warmup), "%u", p->warmup);
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)p->seed);
    const char *args[] = {
        "--elems",  elems,  "--dtype", p->dtype_float ? "float32" : "int32",  "--iters", iters,
        "--warmup", warmup, "--mode",  p->latency_mode ? "latency" : "bench", "--seed",  seed,
        NULL};
    unsigned timeout_s = p->timeout_s ? p->timeout_s : BASELINE_MPI_DEFAULT_TIMEOUT_S;
    launch_capture_t *cap = calloc(1, sizeof(*cap));
    if (!cap)
        return set_err(err, errlen, -ENOMEM, "MPI baseline: out of memory");
    int lrc = launch_mpirun_cfg(p->placement, p->workers, prog, args, timeout_s, cap, err, errlen);
    if (lrc != 0 && lrc != -ETIMEDOUT && lrc != -ECHILD) { /* mpirun missing, cannot start */
        free(cap);
        return lrc < 0 ? lrc : -EIO;
    }
    int status = cap->status;
    int rc = -EIO;
    int have_report = lrc != -ETIMEDOUT && find_report(cap->out, out) == 0;
    int exited = WIFEXITED(status), code = exited ? WEXITSTATUS(status) : -1;
    if (lrc == -ETIMEDOUT) {
        rc = set_err(err, errlen, -ETIMEDOUT,
                     "mpirun timed out after %u s (%u ranks, %zu "
                     "elements) and was killed; stderr: ",
                     timeout_s, p->workers, p->elems);
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else if (have_report && (!out->verified || code == 0)) {
        rc = 0;
        if (!out->verified) {
            set_err(err, errlen, 0, "MPI_Allreduce result did not verify: ");
            launch_append_tail(err, errlen, cap->tail);
        }
    } else if (!exited || code != 0) {
        if (exited)
            set_err(err, errlen, 0, "mpirun exited with status %d; stderr: ", code);
        else
            set_err(err, errlen, 0, "mpirun was killed by signal %d; stderr: ",
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else {
        rc = set_err(err, errlen, -EPROTO,
                     "unparsable output from %s (expected one JSON line); "
                     "stdout: ",
                     prog);
        if (cap->out_len > 256) /* the head is enough to see what came out */
            cap->out[256] = '\0';
        launch_append_tail(err, errlen, cap->out_len ? cap->out : "(empty)");
    }
    if (rc != 0)
        memset(out, 0, sizeof(*out));
    free(cap);
    return rc;
}
