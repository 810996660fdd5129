/*
 * baseline_mpi.c - see baseline_mpi.h. Spawns mpirun in its own process group with stdout
 * and stderr on pipes, reads both under one deadline, and on timeout kills the group:
 * SIGTERM first, because mpirun puts each rank in a process group of its own and only
 * mpirun, on SIGTERM, takes them down; SIGKILL after a grace period. The child is waited
 * for with WNOWAIT before the group is killed, so its pid (the group id) cannot be reused.
 */
#include "mpi/baseline_mpi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/errmsg.h"
#include "json/json.h"
#include "base/util.h"

extern char **environ;

#define BASELINE_MAX_WORKERS 64u /* the int32 tensor values are bounded for 64 ranks */
#define OUT_CAP (64u * 1024u)    /* stdout kept: the report is one short line */
#define TAIL_CAP 4096u           /* stderr kept: its last bytes */
#define GRACE_NS 3000000000ull   /* SIGTERM to SIGKILL */
#define LINE_CAP 8192u             /* a streamed stdout line longer than this is cut */
#define PROGRAM_NAME "inagg-mpi-bench"

const char *const baseline_mpi_flags[] = {
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


/* Append `text` to err, collapsed to one line (whitespace runs to one space, "-----" rules
 * dropped); if it does not fit, keep its end and mark the cut with "...". */
static void append_tail(char *err, size_t errlen, const char *text)
{
    if (!err || errlen == 0)
        return;
    size_t tlen = strlen(text);
    char *tidy = malloc(tlen + 1);
    if (!tidy)
        return;
    size_t n = 0;
    for (size_t i = 0; i < tlen;) {
        if (text[i] == '-' && i + 3 < tlen && text[i + 1] == '-' && text[i + 2] == '-' &&
            text[i + 3] == '-') {
            while (i < tlen && text[i] == '-')
                i++;
            continue;
        }
        char c = text[i++];
        if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
        if (c == ' ' && (n == 0 || tidy[n - 1] == ' '))
            continue;
        tidy[n++] = c;
    }
    while (n > 0 && tidy[n - 1] == ' ')
        n--;
    tidy[n] = '\0';
    size_t used = strlen(err);
    if (used + 4 < errlen) {
        size_t room = errlen - used - 1;
        if (n <= room) {
            memcpy(err + used, tidy, n + 1);
        } else {
            memcpy(err + used, "...", 3);
            size_t keep = room - 3;
            memcpy(err + used + 3, tidy + n - keep, keep);
            err[used + 3 + keep] = '\0';
        }
    }
    free(tidy);
}

static int is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int baseline_mpi_find_mpirun(char *buf, size_t len)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        const char *colon = strchr(path, ':');
        size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
        int n = dlen ? snprintf(buf, len, "%.*s/mpirun", (int)dlen, path)
                     : snprintf(buf, len, "./mpirun");
        if (n > 0 && (size_t)n < len && is_executable_file(buf))
            return 0;
        if (!colon)
            break;
        path = colon + 1;
    }
    if (len)
        buf[0] = '\0';
    return -1;
}

int baseline_mpi_find_named(const char *name, const char *env_var, char *buf, size_t len)
{
    if (len == 0)
        return -1;
    buf[0] = '\0';
    const char *env = env_var ? getenv(env_var) : NULL;
    if (env && *env) {
        int n = snprintf(buf, len, "%s", env);
        return n > 0 && (size_t)n < len && is_executable_file(buf) ? 0 : -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return -1;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    int m = snprintf(buf, len, "%s/%s", self, name);
    return m > 0 && (size_t)m < len && is_executable_file(buf) ? 0 : -1;
}

int baseline_mpi_find_program(char *buf, size_t len)
{
    return baseline_mpi_find_named(PROGRAM_NAME, "INAGG_MPI_BENCH", buf, len);
}

/* environ without the names in extra_env, then extra_env; NULL-terminated, caller frees
 * the array (not the strings). */
static char **build_env(void)
{
    size_t n = 0, extra = 0;
    while (environ && environ[n])
        n++;
    while (extra_env[extra])
        extra++;
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

struct capture {
    char out[OUT_CAP + 1];
    size_t out_len;
    char tail[2 * TAIL_CAP + 1];
    size_t tail_len;
    /* Streaming: each complete stdout line goes to on_line (then out keeps nothing). */
    int (*on_line)(const char *line, void *arg);
    void *arg;
    char line[LINE_CAP + 1];
    size_t line_len;
    int line_cut;  /* the current line overflowed: its rest is dropped */
    int stopped;   /* on_line asked to stop */
};

/* Feed stdout bytes to the line callback. */
static void feed_lines(struct capture *c, const char *data, size_t len)
{
    for (size_t i = 0; i < len && !c->stopped; i++) {
        char ch = data[i];
        if (ch == '\n') {
            c->line[c->line_len] = '\0';
            if (c->on_line(c->line, c->arg) != 0)
                c->stopped = 1;
            c->line_len = 0;
            c->line_cut = 0;
        } else if (c->line_len < LINE_CAP) {
            c->line[c->line_len++] = ch;
        } else {
            c->line_cut = 1;
        }
    }
}

/* Read what is there on fd into the capture; 0 while open, 1 at EOF or error. */
static int drain(int fd, struct capture *c, int is_err)
{
    char chunk[TAIL_CAP];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : 1;
    if (n == 0)
        return 1;
    size_t len = (size_t)n;
    if (!is_err && c->on_line) {
        feed_lines(c, chunk, len);
    } else if (!is_err) {
        size_t room = OUT_CAP - c->out_len;
        size_t take = len < room ? len : room;
        memcpy(c->out + c->out_len, chunk, take);
        c->out_len += take;
        c->out[c->out_len] = '\0';
    } else {
        memcpy(c->tail + c->tail_len, chunk, len);
        c->tail_len += len;
        if (c->tail_len > TAIL_CAP) {
            memmove(c->tail, c->tail + c->tail_len - TAIL_CAP, TAIL_CAP);
            c->tail_len = TAIL_CAP;
        }
        c->tail[c->tail_len] = '\0';
    }
    return 0;
}

/* 1 once pid has exited (left as a zombie: WNOWAIT), 0 if still running at the deadline. */
static int wait_exit_until(pid_t pid, uint64_t deadline_ns)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && si.si_pid == pid)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1; /* not our child any more: nothing to wait for */
        if (util_now_ns() >= deadline_ns)
            return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int parse_report(const char *line, struct baseline_mpi_result *out)
{
    static const char *const keys[] = {"median", "min", "max", "ate_per_s", "p50", "p99",
                                       "p999"};
    double *dst[] = {&out->tat_median_ms, &out->tat_min_ms, &out->tat_max_ms, &out->ate_per_s,
                     &out->lat_p50_us,    &out->lat_p99_us, &out->lat_p999_us};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(keys); i++)
        if (json_find_number(line, keys[i], dst[i]) != 0)
            return -1;
    if (strstr(line, "\"verified\":true"))
        out->verified = 1;
    else if (strstr(line, "\"verified\":false"))
        out->verified = 0;
    else
        return -1;
    return 0;
}

/*
 * Run mpirun (argv[0] its path) in its own process group, stdout and stderr on pipes, under
 * one deadline; on timeout, or when the line callback asks to stop, kill the group (SIGTERM,
 * then SIGKILL). *status: the wait status. 0, or -1 if it could not be started (err says why).
 */
static int spawn_collect(char *argv[], unsigned timeout_s, struct capture *cap, int *status,
                         int *timed_out_out, char *err, size_t errlen)
{
    const char *mpirun = argv[0];
    char **env = build_env();
    int outp[2] = {-1, -1}, errp[2] = {-1, -1};
    if (!env) {
        set_err(err, errlen, "MPI baseline: out of memory");
        return -1;
    }
    if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        set_err(err, errlen, "MPI baseline: pipe: %s", strerror(errno));
        for (int i = 0; i < 2; i++)
            if (outp[i] >= 0)
                close(outp[i]);
        free(env);
        return -1;
    }

    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
    posix_spawnattr_init(&attr);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGHUP);
    sigaddset(&dfl, SIGCHLD);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr,
                             POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    int sr = posix_spawn(&pid, mpirun, &fa, &attr, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(env);
    close(outp[1]);
    close(errp[1]);
    if (sr != 0) {
        close(outp[0]);
        close(errp[0]);
        set_err(err, errlen, "MPI baseline: cannot start %s: %s", mpirun, strerror(sr));
        return -1;
    }

    uint64_t deadline = util_now_ns() + (uint64_t)timeout_s * 1000000000ull;
    struct pollfd pfd[2] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
    int timed_out = 0;
    while ((pfd[0].fd >= 0 || pfd[1].fd >= 0) && !cap->stopped) {
        uint64_t now = util_now_ns();
        if (now >= deadline) {
            timed_out = 1;
            break;
        }
        uint64_t ms = (deadline - now) / 1000000u + 1;
        int r = poll(pfd, 2, ms > 60000 ? 60000 : (int)ms);
        if (r < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2 && r > 0; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (drain(pfd[i].fd, cap, i == 1)) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
            }
        }
    }
    if (!timed_out && !cap->stopped && !wait_exit_until(pid, deadline))
        timed_out = 1;
    if (timed_out || cap->stopped) {
        kill(-pid, SIGTERM);
        wait_exit_until(pid, util_now_ns() + GRACE_NS);
    }
    kill(-pid, SIGKILL); /* whatever of the group is left: ranks, daemons */
    *status = 0;
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    for (int i = 0; i < 2; i++)
        if (pfd[i].fd >= 0)
            close(pfd[i].fd);

    *timed_out_out = timed_out;
    return 0;
}

int baseline_mpi_run(const struct baseline_mpi_params *p, struct baseline_mpi_result *out,
                     char *err, size_t errlen)
{
    set_err(err, errlen, "%s", "");
    if (!p || !out) {
        set_err(err, errlen, "baseline_mpi_run: null argument");
        return -1;
    }
    memset(out, 0, sizeof(*out));
    if (p->workers < 1 || p->workers > BASELINE_MAX_WORKERS || p->elems < 1 ||
        p->elems > (size_t)INT_MAX || p->iters < 1) {
        set_err(err, errlen,
                "MPI baseline: invalid parameters (workers %u: 1..%u, elems %zu: 1..%d, "
                "iters %u: >= 1)",
                p->workers, BASELINE_MAX_WORKERS, p->elems, INT_MAX, p->iters);
        return -1;
    }
    char prog[PATH_MAX], mpirun[PATH_MAX];
    if (baseline_mpi_find_program(prog, sizeof(prog)) != 0) {
        set_err(err, errlen,
                "MPI baseline program '%s' is missing or not executable (it is built by "
                "`make` when mpicc is installed; $INAGG_MPI_BENCH overrides the path)",
                prog[0] ? prog : PROGRAM_NAME);
        return -1;
    }
    if (baseline_mpi_find_mpirun(mpirun, sizeof(mpirun)) != 0) {
        set_err(err, errlen,
                "mpirun not found in $PATH: OpenMPI is not installed (e.g. apt-get install "
                "openmpi-bin libopenmpi-dev)");
        return -1;
    }

    char np[16], elems[32], iters[16], warmup[16], seed[32];
    snprintf(np, sizeof(np), "%u", p->workers);
    snprintf(elems, sizeof(elems), "%zu", p->elems);
    snprintf(iters, sizeof(iters), "%u", p->iters);
    snprintf(warmup, sizeof(warmup), "%u", p->warmup);
    snprintf(seed, sizeof(seed), "%llu", (unsigned long long)p->seed);
    char *argv[64];
    size_t a = 0;
    argv[a++] = mpirun;
    for (size_t i = 0; baseline_mpi_flags[i]; i++)
        argv[a++] = (char *)baseline_mpi_flags[i];
    const char *rest[] = {"-np", np, prog, "--elems", elems,
                          "--dtype", p->dtype_float ? "float32" : "int32",
                          "--iters", iters, "--warmup", warmup,
                          "--mode", p->latency_mode ? "latency" : "bench",
                          "--seed", seed};
    for (size_t i = 0; i < INAGG_ARRAY_LEN(rest); i++)
        argv[a++] = (char *)rest[i];
    argv[a] = NULL;

    unsigned timeout_s = p->timeout_s ? p->timeout_s : BASELINE_MPI_DEFAULT_TIMEOUT_S;
    struct capture *cap = calloc(1, sizeof(*cap));
    if (!cap) {
        set_err(err, errlen, "MPI baseline: out of memory");
        return -1;
    }
    int status = 0, timed_out = 0;
    if (spawn_collect(argv, timeout_s, cap, &status, &timed_out, err, errlen) != 0) {
        free(cap);
        return -1;
    }

    int rc = -1;
    char *line = strstr(cap->out, "{\"name\":\"mpi\"");
    if (line) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
    }
    int exited = WIFEXITED(status), code = exited ? WEXITSTATUS(status) : -1;
    if (timed_out) {
        set_err(err, errlen, "mpirun timed out after %u s (%u ranks, %zu elements) and was "
                             "killed; stderr: ",
                timeout_s, p->workers, p->elems);
        append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else if (line && parse_report(line, out) == 0 && (!out->verified || code == 0)) {
        rc = 0;
        if (!out->verified) {
            set_err(err, errlen, "MPI_Allreduce result did not verify: ");
            append_tail(err, errlen, cap->tail);
        }
    } else if (!exited || code != 0) {
        if (exited)
            set_err(err, errlen, "mpirun exited with status %d; stderr: ", code);
        else
            set_err(err, errlen, "mpirun was killed by signal %d; stderr: ",
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else {
        set_err(err, errlen, "unparsable output from %s (expected one JSON line); stdout: ",
                prog);
        if (cap->out_len > 256) /* the head is enough to see what came out */
            cap->out[256] = '\0';
        append_tail(err, errlen, cap->out_len ? cap->out : "(empty)");
    }
    if (rc != 0)
        memset(out, 0, sizeof(*out));
    free(cap);
    return rc;
}

int baseline_mpi_exec(const struct baseline_mpi_exec_params *p, int *exit_code, char *err,
                      size_t errlen)
{
    set_err(err, errlen, "%s", "");
    if (exit_code)
        *exit_code = -1;
    if (!p || !p->program || !p->on_line || p->np < 1 || p->np > BASELINE_MAX_WORKERS) {
        set_err(err, errlen, "baseline_mpi_exec: invalid parameters (1..%u ranks, a program "
                             "and a line callback are needed)", BASELINE_MAX_WORKERS);
        return -1;
    }
    char mpirun[PATH_MAX];
    if (baseline_mpi_find_mpirun(mpirun, sizeof(mpirun)) != 0) {
        set_err(err, errlen,
                "mpirun not found in $PATH: OpenMPI is not installed (e.g. apt-get install "
                "openmpi-bin libopenmpi-dev)");
        return -1;
    }
    size_t nargs = 0;
    while (p->args && p->args[nargs])
        nargs++;
    size_t nflags = 0;
    while (baseline_mpi_flags[nflags])
        nflags++;
    char **argv = calloc(nflags + nargs + 8, sizeof(*argv));
    struct capture *cap = calloc(1, sizeof(*cap));
    if (!argv || !cap) {
        free(argv);
        free(cap);
        set_err(err, errlen, "MPI run: out of memory");
        return -1;
    }
    char np[16];
    snprintf(np, sizeof(np), "%u", p->np);
    size_t a = 0;
    argv[a++] = mpirun;
    for (size_t i = 0; i < nflags; i++)
        argv[a++] = (char *)baseline_mpi_flags[i];
    argv[a++] = "-np";
    argv[a++] = np;
    argv[a++] = (char *)p->program;
    for (size_t i = 0; i < nargs; i++)
        argv[a++] = (char *)p->args[i];
    argv[a] = NULL;
    cap->on_line = p->on_line;
    cap->arg = p->arg;
    unsigned timeout_s = p->timeout_s ? p->timeout_s : BASELINE_MPI_DEFAULT_TIMEOUT_S;
    int status = 0, timed_out = 0, rc = -1;
    if (spawn_collect(argv, timeout_s, cap, &status, &timed_out, err, errlen) != 0)
        goto out;
    if (cap->line_len > 0 && !cap->stopped) { /* a last line without its newline */
        cap->line[cap->line_len] = '\0';
        if (cap->on_line(cap->line, cap->arg) != 0)
            cap->stopped = 1;
    }
    int exited = WIFEXITED(status), code = exited ? WEXITSTATUS(status) : -1;
    if (exit_code)
        *exit_code = code;
    if (timed_out) {
        set_err(err, errlen, "mpirun timed out after %u s (%u ranks) and was killed; stderr: ",
                timeout_s, p->np);
        append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else if (cap->stopped) {
        set_err(err, errlen, "stopped by the caller");
    } else if (!exited || code != 0) {
        if (exited)
            set_err(err, errlen, "mpirun exited with status %d; stderr: ", code);
        else
            set_err(err, errlen, "mpirun was killed by signal %d; stderr: ",
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        append_tail(err, errlen, cap->tail_len ? cap->tail : "(empty)");
    } else {
        rc = 0;
    }
out:
    free(argv);
    free(cap);
    return rc;
}
