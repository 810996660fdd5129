/*
 * mpirun.c - see launch.h: the mpirun command line (flags that keep MPI on TCP over loopback,
 * or one rank per host of a testbed or cluster over its network; the environment OpenMPI
 * needs to run as root and oversubscribed) and running it with its output captured, for the
 * MPI baseline (bench/baseline_mpi.c) and the MPI trainer.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

extern char **environ;

#define MPIRUN_MAX_RANKS 64u

const char *const launch_mpirun_flags[] = {"--allow-run-as-root",
                                           "--oversubscribe",
                                           "--bind-to",
                                           "none",
                                           "--mca",
                                           "pml",
                                           "ob1", /* point-to-point over BTLs, not UCX/OFI */
                                           "--mca",
                                           "btl",
                                           "tcp,self", /* no shared memory (vader), no RDMA */
                                           "--mca",
                                           "btl_tcp_if_include",
                                           "lo", /* data over loopback */
                                           "--mca",
                                           "oob_tcp_if_include",
                                           "lo", /* and the runtime's control channel */
                                           NULL};

/* Environment entries set for mpirun, replacing any the caller has. */
static const char *const extra_env[] = {"OMPI_MCA_rmaps_base_oversubscribe=1",
                                        "OMPI_ALLOW_RUN_AS_ROOT=1",
                                        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", NULL};

int launch_find_mpirun(char *buf, size_t len) { return launch_find_in_path("mpirun", buf, len); }

static size_t count_strings(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* environ without the names in extra_env, then extra_env; NULL-terminated, caller frees
 * the array (not the strings). */
static char **build_env(void)
{
    size_t n = count_strings((const char *const *)environ), extra = count_strings(extra_env);
    char **env = calloc(n + extra + 1, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int replaced = 0;
        for (size_t j = 0; j < extra && !replaced; j++) {
            size_t nlen = (size_t)(strchr(extra_env[j], '=') - extra_env[j]) + 1;
            replaced = strncmp(environ[i], extra_env[j], nlen) == 0;
        }
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < extra; j++)
        env[k++] = (char *)extra_env[j];
    env[k] = NULL;
    return env;
}

/* Append v (NULL-terminated) to argv at *a. */
static void append(char **argv, size_t *a, const char *const *v)
{
    for (size_t i = 0; v && v[i]; i++)
        argv[(*a)++] = (char *)v[i];
}

int launch_mpirun(unsigned np, const char *program, const char *const *args, unsigned timeout_s,
                  launch_capture_t *cap, char *err, size_t errlen)
{
    return launch_mpirun_cfg(NULL, np, program, args, timeout_s, cap, err, errlen);
}

int launch_mpirun_cfg(const launch_mpirun_cfg_t *cfg, unsigned np, const char *program,
                      const char *const *args, unsigned timeout_s, launch_capture_t *cap, char *err,
                      size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    cap->status = 0;
    if (!program || np < 1 || np > MPIRUN_MAX_RANKS) {
        return set_err(err, errlen, -EINVAL,
                       "mpirun: invalid parameters (1..%u ranks and a program are "
                       "needed)",
                       MPIRUN_MAX_RANKS);
    }
    char mpirun[PATH_MAX];
    if (launch_find_mpirun(mpirun, sizeof(mpirun)) != 0) {
        return set_err(err, errlen, -ENOENT,
                       "mpirun not found in $PATH: OpenMPI is not installed (e.g. apt-get install "
                       "openmpi-bin libopenmpi-dev)");
    }
    int remote = cfg && cfg->hosts;
    const char *ifinc = cfg && cfg->if_include ? cfg->if_include : "lo";
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = count_strings(args) + count_strings(launch_mpirun_flags) + 40 +
               (cfg ? count_strings(cfg->prefix) + count_strings(cfg->mca) * 2 : 0);
    char **argv = calloc(n, sizeof(*argv));
    char **env = build_env();
    if (!argv || !env) {
        free(argv);
        free(env);
        return set_err(err, errlen, -ENOMEM, "mpirun: out of memory");
    }
    char nps[16];
    snprintf(nps, sizeof(nps), "%u", np);
    size_t a = 0;
    if (cfg)
        append(argv, &a, cfg->prefix);
    argv[a++] = mpirun;
    if (!remote) {
        append(argv, &a, launch_mpirun_flags);
        if (cfg && cfg->if_include) { /* the flags say lo; a later --mca of the name wins */
            const char *const inc[] = {
                "--mca", "btl_tcp_if_include", ifinc, "--mca", "oob_tcp_if_include", ifinc, NULL};
            append(argv, &a, inc);
        }
    } else {
        const char *const flags[] = {
            "--allow-run-as-root", "--host", cfg->hosts, "--map-by", "node", "--bind-to", "none",
            "--mca", "pml", "ob1", /* point-to-point over BTLs, not UCX/OFI */
            "--mca", "btl", "tcp,self", /* TCP between hosts, no RDMA */
            "--mca", "btl_tcp_if_include", ifinc, /* data on the cluster's network only */
            "--mca", "oob_tcp_if_include", ifinc, /* and the runtime's control channel */
            /* the TCP BTL's flags without "put": large messages go as pipelined send/receive
             * fragments, not by ob1's emulated-RDMA pipeline, with which a 2-rank ring
             * allreduce on a testbed ran at 2/3 of the link for 1-8 MiB (docs/perf-log/
             * 2026-11-23-testbed-against-ring-and-gloo.md, "The MPI baseline on the testbed") */
            "--mca", "btl_tcp_flags", "send,inplace,need-ack,need-csum,hetero-rdma", NULL};
        append(argv, &a, flags);
    }
    if (cfg && cfg->rsh_agent) {
        const char *const agent[] = {"--mca", "plm_rsh_agent", cfg->rsh_agent, NULL};
        append(argv, &a, agent);
    }
    if (remote && cores > 0 && np > (unsigned long)cores) {
        /* Open MPI sees one slot per host, so it would not know that its ranks share
         * fewer cores: let a waiting rank yield the core instead of spinning on it. */
        const char *const yield[] = {"--mca", "mpi_yield_when_idle", "1", NULL};
        append(argv, &a, yield);
    }
    for (size_t i = 0; cfg && cfg->mca && cfg->mca[i] && cfg->mca[i + 1]; i += 2) {
        argv[a++] = "--mca";
        argv[a++] = (char *)cfg->mca[i];
        argv[a++] = (char *)cfg->mca[i + 1];
    }
    argv[a++] = "-np";
    argv[a++] = nps;
    argv[a++] = (char *)program;
    append(argv, &a, args);
    argv[a] = NULL;
    int rc = launch_capture(argv, env, timeout_s, cap, "MPI run", err, errlen);
    free(argv);
    free(env);
    int status = cap->status;
    if (rc == -ETIMEDOUT) {
        rc = set_err(err, errlen, rc,
                     "mpirun timed out after %u s (%u ranks) and was killed; stderr: ", timeout_s,
                     np);
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else if (rc == -ECANCELED) {
        rc = set_err(err, errlen, rc, "stopped by the caller");
    } else if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        if (WIFEXITED(status))
            rc = set_err(err, errlen, -ECHILD,
                         "mpirun exited with status %d; stderr: ", WEXITSTATUS(status));
        else
            rc = set_err(err, errlen, -ECHILD, "mpirun was killed by signal %d; stderr: ",
                         WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    }
    return rc;
}
