/*
 * process.c - see launch.h: finding programs, spawning one, forking functions and ranks, and
 * the bounded waits every caller uses.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* In the child: point stream `target` at `how` (see launch_spec_t). 0 or an errno. Only
 * async-signal-safe calls: this runs between fork() and execve(). */
static int redirect(int target, int how)
{
    if (how == LAUNCH_INHERIT)
        return 0;
    if (how == LAUNCH_DEVNULL) {
        int fd = open("/dev/null", target == 0 ? O_RDONLY : O_WRONLY);
        if (fd < 0)
            return errno;
        int rc = fd == target ? 0 : dup2(fd, target) < 0 ? errno : 0;
        if (fd != target)
            close(fd);
        return rc;
    }
    int from = how == LAUNCH_TO_OUT ? 1 : how;
    if (from == target) /* dup2 onto itself would leave close-on-exec set */
        return fcntl(target, F_SETFD, 0) < 0 ? errno : 0;
    return dup2(from, target) < 0 ? errno : 0;
}

/* In the child of launch_spawn: streams, mask and dispositions as launch_spawn promises, then
 * execve. Never returns: on failure the errno goes back through report_fd. */
static void spawn_exec(const launch_spec_t *s, int report_fd)
{
    int rc = redirect(0, s->in);
    if (rc == 0)
        rc = redirect(1, s->out);
    if (rc == 0)
        rc = redirect(2, s->err);
    if (rc == 0 && s->keep_fd > 2 && fcntl(s->keep_fd, F_SETFD, 0) < 0)
        rc = errno;
    const int dfl[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};
    for (size_t i = 0; i < sizeof(dfl) / sizeof(dfl[0]); i++)
        signal(dfl[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (rc == 0) {
        execve(s->argv[0], s->argv, s->envp ? s->envp : environ);
        rc = errno;
    }
    ssize_t w = write(report_fd, &rc, sizeof(rc));
    (void)w;
    _exit(127);
}

pid_t launch_spawn(const launch_spec_t *s, char *err, size_t errlen)
{
    if (!s || !s->argv || !s->argv[0] || s->in == LAUNCH_TO_OUT || s->out == LAUNCH_TO_OUT) {
        return set_err(err, errlen, -EINVAL, "launch: invalid program specification");
    }
    const char *prog = s->argv[0];
    int report[2]; /* the child's execve errno; closed by a successful execve */
    if (pipe2(report, O_CLOEXEC) != 0) {
        int e = errno;
        return set_err(err, errlen, -e, "%s: cannot set up the child process: %s", prog,
                       strerror(e));
    }
    /* SIGTERM, not SIGKILL, at this process's death: a program such as mpirun then ends
     * what it started in turn. */
    pid_t pid = launch_fork_child(SIGTERM, s->new_group);
    if (pid == 0) {
        close(report[0]);
        spawn_exec(s, report[1]);
    }
    close(report[1]);
    if (pid < 0) {
        close(report[0]);
        return set_err(err, errlen, (int)pid, "cannot start %s: %s", prog, strerror((int)-pid));
    }
    int child_errno = 0;
    ssize_t n;
    while ((n = read(report[0], &child_errno, sizeof(child_errno))) < 0 && errno == EINTR)
        ;
    close(report[0]);
    if (n == (ssize_t)sizeof(child_errno)) {
        launch_reap(pid, NULL, 0);
        return set_err(err, errlen, -child_errno, "cannot start %s: %s", prog,
                       strerror(child_errno));
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
        pid_t w = launch_reap(pid, &st, WNOHANG);
        if (w == pid) {
            if (status)
                *status = st;
            return 0;
        }
        if (w < 0)
            return -errno;
        if (util_now_ns() >= deadline)
            break;
        nap_us(nap);
        nap = nap < 20000 ? nap * 2 : 20000;
    }
    kill(pid, SIGKILL);
    launch_reap(pid, &st, 0);
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

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
int launch_child_leak_check(void) { return __lsan_do_recoverable_leak_check() != 0; }
#else
int launch_child_leak_check(void) { return 0; }
#endif

pid_t launch_fork(int (*fn)(void *arg), void *arg)
{
    fflush(NULL);
    pid_t pid = launch_fork_child(SIGKILL, 0);
    if (pid == 0)
        _exit(fn(arg));
    return pid;
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
    fflush(NULL);
    for (uint32_t r = 0; r < n; r++) {
        int p[2] = {-1, -1};
        if ((flags & LAUNCH_PIPE) && pipe2(p, O_CLOEXEC) != 0) {
            int e = errno;
            launch_ranks_kill(g);
            return set_err(err, errlen, -e, "pipe: %s", strerror(e));
        }
        pid_t pid = launch_fork_child(SIGKILL, 0);
        if (pid == 0) {
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
        if (p[1] >= 0)
            close(p[1]);
        if (pid < 0) {
            if (p[0] >= 0)
                close(p[0]);
            launch_ranks_kill(g);
            return set_err(err, errlen, (int)pid, "fork: %s", strerror((int)-pid));
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
