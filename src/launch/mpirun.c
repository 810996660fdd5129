/*
 * mpirun.c - see launch.h: the mpirun command line (flags that keep MPI on TCP over loopback,
 * the environment OpenMPI needs to run as root and oversubscribed) and running it with its
 * output captured, for the MPI baseline (mpi/baseline_mpi.c) and the MPI trainer.
 */
#include "launch/launch.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "base/errmsg.h"

extern char **environ;

#define MPIRUN_MAX_RANKS 64u

const char *const launch_mpirun_flags[] = {
    "--allow-run-as-root", "--oversubscribe",
    "--bind-to", "none",
    "--mca", "pml", "ob1",                   /* point-to-point over BTLs, not UCX/OFI */
    "--mca", "btl", "tcp,self",              /* no shared memory (vader), no RDMA */
    "--mca", "btl_tcp_if_include", "lo",     /* data over loopback */
    "--mca", "oob_tcp_if_include", "lo",     /* and the runtime's control channel */
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

int launch_mpirun(unsigned np, const char *program, const char *const *args, unsigned timeout_s,
                  launch_capture_t *cap, char *err, size_t errlen)
{
    set_err(err, errlen, "%s", "");
    cap->status = 0;
    if (!program || np < 1 || np > MPIRUN_MAX_RANKS) {
        set_err(err, errlen, "mpirun: invalid parameters (1..%u ranks and a program are "
                             "needed)", MPIRUN_MAX_RANKS);
        return -EINVAL;
    }
    char mpirun[PATH_MAX];
    if (launch_find_mpirun(mpirun, sizeof(mpirun)) != 0) {
        set_err(err, errlen,
                "mpirun not found in $PATH: OpenMPI is not installed (e.g. apt-get install "
                "openmpi-bin libopenmpi-dev)");
        return -ENOENT;
    }
    size_t nargs = count_strings(args), nflags = count_strings(launch_mpirun_flags);
    char **argv = calloc(nflags + nargs + 8, sizeof(*argv));
    char **env = build_env();
    if (!argv || !env) {
        free(argv);
        free(env);
        set_err(err, errlen, "mpirun: out of memory");
        return -ENOMEM;
    }
    char nps[16];
    snprintf(nps, sizeof(nps), "%u", np);
    size_t a = 0;
    argv[a++] = mpirun;
    for (size_t i = 0; i < nflags; i++)
        argv[a++] = (char *)launch_mpirun_flags[i];
    argv[a++] = "-np";
    argv[a++] = nps;
    argv[a++] = (char *)program;
    for (size_t i = 0; i < nargs; i++)
        argv[a++] = (char *)args[i];
    argv[a] = NULL;
    int rc = launch_capture(argv, env, timeout_s, cap, "MPI run", err, errlen);
    free(argv);
    free(env);
    int status = cap->status;
    if (rc == -ETIMEDOUT) {
        set_err(err, errlen, "mpirun timed out after %u s (%u ranks) and was killed; stderr: ",
                timeout_s, np);
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else if (rc == -ECANCELED) {
        set_err(err, errlen, "stopped by the caller");
    } else if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        if (WIFEXITED(status))
            set_err(err, errlen, "mpirun exited with status %d; stderr: ", WEXITSTATUS(status));
        else
            set_err(err, errlen, "mpirun was killed by signal %d; stderr: ",
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
        rc = -ECHILD;
    }
    return rc;
}
