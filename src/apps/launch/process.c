/*
 * process.c - see launch.h: finding programs, spawning one, forking functions and ranks, and
 * the bounded waits every caller uses.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

extern char **environ;

/* ---- finding programs ------------------------------------------------------------------- */

int launch_is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int launch_find_in_path(const char *name, char *buf, size_t len)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (;;) {
        const char *colon = strchr(path, ':');
        size_t dlen = colon ? (size_t)(colon - path) : strlen(path);
        int n = dlen ? snprintf(buf, len, "%.*s/%s", (int)dlen, path, name)
                     : snprintf(buf, len, "./%s", name);
        if (n > 0 && (size_t)n < len && launch_is_executable(buf))
            return 0;
        if (!colon)
            break;
        path = colon + 1;
    }
    if (len)
        buf[0] = '\0';
    return -ENOENT;
}

int launch_find_python(char *buf, size_t len)
{
    const char *py = getenv("INAGG_PYTHON");
    if (!py)
        py = launch_is_executable("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    if (strchr(py, '/')) {
        snprintf(buf, len, "%s", py);
        return launch_is_executable(buf) ? 0 : -ENOENT;
    }
    return launch_find_in_path(py, buf, len) == 0 ? 0 : -ENOENT;
}

int launch_beside_self(const char *rel, char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
    if (slash)
        *slash = '\0';
    int m = slash ? snprintf(buf, len, "%s/%s", self, rel) : -1;
    if (m > 0 && (size_t)m < len)
        return 0;
    if (len)
        buf[0] = '\0';
    return -ENOENT;
}

int launch_find_program(const char *name, const char *env_var, char *buf, size_t len)
{
    if (len == 0)
        return -ENOENT;
    buf[0] = '\0';
    const char *env = env_var ? getenv(env_var) : NULL;
    if (env && *env) {
        int n = snprintf(buf, len, "%s", env);
        return n > 0 && (size_t)n < len && launch_is_executable(buf) ? 0 : -ENOENT;
    }
    if (launch_beside_self(name, buf, len) != 0)
        return -ENOENT;
    return launch_is_executable(buf) ? 0 : -ENOENT;
}

/* ---- one program ------------------------------------------------------------------------ */

/* Point the child's stream `target` at `how` (see launch_spec_t). 0 or an errno. */
static int redirect(posix_spawn_file_actions_t *fa, int target, int how)
{
    if (how == LAUNCH_INHERIT)
        return 0;
    if (how == LAUNCH_DEVNULL)
        return posix_spawn_file_actions_addopen(fa, target, "/dev/null",
                                                target == 0 ? O_RDONLY : O_WRONLY, 0);
    if (how == LAUNCH_TO_OUT)
        return posix_spawn_file_actions_adddup2(fa, 1, target);
    return posix_spawn_file_actions_adddup2(fa, how, target);
}

pid_t launch_spawn(const launch_spec_t *s, char *err, size_t errlen)
{
    if (!s || !s->argv || !s->argv[0] || s->in == LAUNCH_TO_OUT || s->out == LAUNCH_TO_OUT) {
        return set_err(err, errlen, -EINVAL, "launch: invalid program specification");
    }
    const char *prog = s->argv[0];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0) {
        return set_err(err, errlen, -rc, "%s: cannot set up the child process: %s", prog,
                       strerror(rc));
    }
    posix_spawnattr_init(&attr);
    if (rc == 0)
        rc = redirect(&fa, 0, s->in);
    if (rc == 0)
        rc = redirect(&fa, 1, s->out);
    if (rc == 0)
        rc = redirect(&fa, 2, s->err);
    if (rc == 0 && s->keep_fd > 2) /* dup2 onto itself clears close-on-exec (glibc >= 2.29) */
        rc = posix_spawn_file_actions_adddup2(&fa, s->keep_fd, s->keep_fd);
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
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (s->new_group) {
        posix_spawnattr_setpgroup(&attr, 0);
        flags |= POSIX_SPAWN_SETPGROUP;
    }
    posix_spawnattr_setflags(&attr, flags);
    pid_t pid = -1;
    if (rc == 0)
        rc = posix_spawn(&pid, prog, &fa, &attr, s->argv, s->envp ? s->envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        return set_err(err, errlen, -rc, "cannot start %s: %s", prog, strerror(rc));
    }
    return pid;
}

int launch_run(const launch_spec_t *s, int timeout_ms, char *err, size_t errlen)
{
    pid_t pid = launch_spawn(s, err, errlen);
    if (pid < 0)
        return (int)pid;
    int status = 0;
    int rc = launch_wait(pid, timeout_ms, &status);
    const char *prog = s->argv[0];
    if (rc == -ETIMEDOUT)
        return set_err(err, errlen, rc, "%s: killed after the time limit of %d s", prog,
                       (timeout_ms + 999) / 1000);
    if (rc != 0)
        return set_err(err, errlen, rc, "%s: wait: %s", prog, strerror(-rc));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char what[96];
    return set_err(err, errlen, -ECHILD, "%s: %s", prog,
                   launch_status_text(status, what, sizeof(what)));
}

/* ---- waiting and ending ------------------------------------------------------------------ */

static void nap_us(uint64_t us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
    nanosleep(&ts, NULL);
}

int launch_wait(pid_t pid, int timeout_ms, int *status)
{
    int st = 0;
    if (status)
        *status = 0;
    if (pid <= 0)
        return -ECHILD; /* never waitpid(0) or (-1): those reap someone else's child */
    uint64_t deadline = util_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    uint64_t nap = 200; /* microseconds, doubling to 20 ms: quick for a child already exiting */
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            if (status)
                *status = st;
            return 0;
        }
        if (w < 0 && errno != EINTR)
            return -errno;
        if (util_now_ns() >= deadline)
            break;
        nap_us(nap);
        nap = nap < 20000 ? nap * 2 : 20000;
    }
    kill(pid, SIGKILL);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (status)
        *status = st;
    return -ETIMEDOUT;
}

int launch_stop(pid_t pid, int sig, int grace_ms, int *status)
{
    if (status)
        *status = 0;
    if (pid <= 0)
        return 0;
    kill(pid, sig);
    return launch_wait(pid, grace_ms, status);
}

const char *launch_status_text(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "ended with wait status %d", status);
    return buf;
}

int launch_exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

/* ---- forked functions and local ranks --------------------------------------------------- */

/* In a fresh child: follow `flags`. 0, or -ESRCH when the parent is already gone. */
static int child_setup(int flags, pid_t parent)
{
    if (flags & LAUNCH_DIE_WITH_PARENT) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            return -ESRCH;
    }
    return 0;
}

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
int launch_child_leak_check(void) { return __lsan_do_recoverable_leak_check() != 0; }
#else
int launch_child_leak_check(void) { return 0; }
#endif

pid_t launch_fork(int (*fn)(void *arg), void *arg, int flags)
{
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (child_setup(flags, parent) != 0)
            _exit(1);
        _exit(fn(arg));
    }
    return pid < 0 ? -errno : pid;
}

int launch_ranks_start(launch_ranks_t *g, uint32_t n, launch_rank_fn fn, void *arg, int flags,
                       char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    for (uint32_t r = 0; r < LAUNCH_MAX_RANKS; r++)
        g->fd[r] = -1;
    if (n < 1 || n > LAUNCH_MAX_RANKS) {
        return set_err(err, errlen, -EINVAL, "launch: %u ranks (1..%u)", n, LAUNCH_MAX_RANKS);
    }
    int src = launch_job_secret(err, errlen);
    if (src != 0)
        return src;
    pid_t parent = getpid();
    fflush(NULL);
    for (uint32_t r = 0; r < n; r++) {
        int p[2] = {-1, -1};
        if ((flags & LAUNCH_PIPE) && pipe2(p, O_CLOEXEC) != 0) {
            int e = errno;
            launch_ranks_kill(g);
            return set_err(err, errlen, -e, "pipe: %s", strerror(e));
        }
        pid_t pid = fork();
        if (pid == 0) {
            if (child_setup(flags, parent) != 0)
                _exit(1);
            if (p[0] >= 0)
                close(p[0]);
            for (uint32_t k = 0; k < r; k++)
                if (g->fd[k] >= 0)
                    close(g->fd[k]);
            int rc = fn(r, p[1], arg);
            if (p[1] >= 0)
                close(p[1]);
            _exit(rc);
        }
        int e = errno;
        if (p[1] >= 0)
            close(p[1]);
        if (pid < 0) {
            if (p[0] >= 0)
                close(p[0]);
            launch_ranks_kill(g);
            return set_err(err, errlen, -e, "fork: %s", strerror(e));
        }
        g->pid[r] = pid;
        g->fd[r] = p[0];
        g->n = r + 1;
    }
    return 0;
}

int launch_ranks_wait_one(launch_ranks_t *g, uint32_t r, int timeout_ms)
{
    if (r >= g->n || g->reaped[r])
        return 0;
    if (g->fd[r] >= 0) {
        close(g->fd[r]);
        g->fd[r] = -1;
    }
    int rc = launch_wait(g->pid[r], timeout_ms, &g->status[r]);
    g->reaped[r] = 1;
    return rc;
}

int launch_ranks_wait(launch_ranks_t *g, int timeout_ms)
{
    uint64_t deadline = util_now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;
    int failed = 0;
    for (uint32_t r = 0; r < g->n; r++) {
        uint64_t now = util_now_ns();
        int left = now < deadline ? (int)((deadline - now) / 1000000ull) : 0;
        int rc = launch_ranks_wait_one(g, r, left);
        if (rc != 0 || !WIFEXITED(g->status[r]) || WEXITSTATUS(g->status[r]) != 0)
            failed++;
    }
    return failed;
}

void launch_ranks_kill(launch_ranks_t *g)
{
    for (uint32_t r = 0; r < g->n; r++)
        if (g->pid[r] > 0 && !g->reaped[r])
            kill(g->pid[r], SIGKILL);
    for (uint32_t r = 0; r < g->n; r++)
        if (g->pid[r] > 0)
            launch_ranks_wait_one(g, r, 10000);
}
