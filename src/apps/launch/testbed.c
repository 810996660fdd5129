/*
 * testbed.c - see launch.h: the testbed of network namespaces (tools/testbed) as a program
 * sees it: find the tool beside the build, bring a testbed up and read its JSON report, build
 * `tools/testbed exec NAME HOST -- CMD` lines, take it down on every exit path, and on
 * SIGINT/SIGTERM/SIGHUP take it down from a signal handler (fork + execve + waitpid are
 * async-signal-safe) before the process dies; and when it dies of what no handler sees
 * (SIGKILL), a sentinel process it started with the guard takes the testbed down: it waits for
 * the end of a pipe only this process writes to. `tools/testbed down` ends every process still
 * inside the testbed's namespaces, so the switch, the ranks, mpirun and its orteds and the Gloo
 * ranks need no bookkeeping of their own here.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/json/json.h"

#define UP_TIMEOUT_S(n) (120u + 2u * (n)) /* building takes ~0.2 s per host on an idle box */
#define DOWN_TIMEOUT_MS 120000

extern char **environ;

int launch_testbed_find(char *buf, size_t len)
{
    const char *env = getenv("INAGG_TESTBED_TOOL");
    if (env && *env) {
        int n = snprintf(buf, len, "%s", env);
        return n > 0 && (size_t)n < len && launch_is_executable(buf) ? 0 : -ENOENT;
    }
    if (launch_beside_self("../tools/testbed", buf, len) != 0)
        return -ENOENT;
    return launch_is_executable(buf) ? 0 : -ENOENT;
}

int launch_testbed_sibling(const launch_testbed_t *tb, const char *file, char *buf, size_t len)
{
    const char *slash = strrchr(tb->tool, '/');
    int dlen = slash ? (int)(slash - tb->tool) : 1;
    int n = snprintf(buf, len, "%.*s/%s", dlen, slash ? tb->tool : ".", file);
    if (n <= 0 || (size_t)n >= len)
        return -ENOENT;
    return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

const char *launch_testbed_host_addr(const launch_testbed_t *tb, unsigned k, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%u", tb->net3, k);
    return buf;
}

size_t launch_testbed_argv(const launch_testbed_t *tb, const char *host, char *const *cmd,
                           char **out, size_t cap)
{
    size_t n = 0, c = 0;
    while (cmd && cmd[c])
        c++;
    if (cap < c + 6)
        return 0;
    out[n++] = (char *)tb->tool;
    out[n++] = "exec";
    out[n++] = (char *)tb->name;
    out[n++] = (char *)host;
    out[n++] = "--";
    for (size_t i = 0; i < c; i++)
        out[n++] = cmd[i];
    out[n] = NULL;
    return n;
}

/* ---- teardown on a signal ------------------------------------------------------------------ */

static char guard_tool[4096], guard_name[16];
static char *guard_argv[4];
static volatile sig_atomic_t guard_on;
static volatile pid_t guard_building; /* `tools/testbed up` while it runs */
static struct sigaction guard_old[3];
static const int guard_sigs[3] = {SIGINT, SIGTERM, SIGHUP};
static volatile int sentinel_fd = -1; /* the write end of the sentinel's pipe */
static pid_t sentinel_pid;

static void say(const char *s)
{
    ssize_t r = write(STDERR_FILENO, s, strlen(s));
    (void)r;
}

/* In a child: out of our process group, deaf to the signals that end us (a Ctrl-C or a
 * `timeout` sends them to the whole group, and must not end a teardown), then
 * `tools/testbed down NAME`. Never returns. */
static void exec_down(void)
{
    struct sigaction ign;
    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    for (int i = 0; i < 3; i++)
        sigaction(guard_sigs[i], &ign, NULL);
    setpgid(0, 0);
    int fd = STDOUT_FILENO;
    dup2(STDERR_FILENO, fd);
    execve(guard_argv[0], guard_argv, environ);
    _exit(127);
}

/* The sentinel: blocks on the read end of a pipe whose write end only the guarded process
 * (and its forked children, which die with it) holds. A byte first: the testbed was taken down
 * otherwise, nothing to do; the end of the pipe alone: the process died unguarded. */
static void sentinel_main(int rfd)
{
    const int ending[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; i < sizeof(ending) / sizeof(ending[0]); i++)
        signal(ending[i], SIG_DFL); /* none of its parent's handlers */
    setpgid(0, 0); /* a Ctrl-C to its parent's group is not for it */
    for (int fd = 3; fd < 1024; fd++)
        if (fd != rfd)
            close(fd);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        close(null);
    }
    char c;
    ssize_t n;
    while ((n = read(rfd, &c, 1)) < 0 && errno == EINTR)
        ;
    if (n != 0)
        _exit(0);
    say("inagg: the process that built testbed ");
    say(guard_name);
    say(" is gone: taking it down\n");
    exec_down();
}

static void sentinel_start(void)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return; /* then only the signal handler and the next run's reaping are left */
    pid_t pid = fork();
    if (pid == 0)
        sentinel_main(p[0]);
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        return;
    }
    sentinel_pid = pid;
    sentinel_fd = p[1];
}

/* Tell the sentinel the testbed is handled, and reap it. Async-signal-safe up to the wait. */
static void sentinel_disarm(int reap)
{
    int fd = sentinel_fd;
    if (fd < 0)
        return;
    sentinel_fd = -1;
    ssize_t w = write(fd, "d", 1);
    (void)w;
    close(fd);
    if (reap && sentinel_pid > 0)
        launch_wait(sentinel_pid, 5000, NULL);
    sentinel_pid = 0;
}

static void guard_handler(int sig)
{
    launch_end_children(); /* the switch, the ranks, mpirun: before their testbed goes */
    sentinel_disarm(0); /* it goes with us, and finds the testbed handled */
    if (guard_on) {
        guard_on = 0;
        say("inagg: interrupted: taking testbed ");
        say(guard_name);
        say(" down\n");
        pid_t up = guard_building;
        if (up > 0) { /* up removes what it built on SIGTERM; then down finds nothing */
            kill(-up, SIGTERM);
            while (waitpid(up, NULL, 0) < 0 && errno == EINTR)
                ;
        }
        pid_t pid = fork();
        if (pid == 0)
            exec_down();
        if (pid > 0)
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void launch_testbed_guard(launch_testbed_t *tb)
{
    sentinel_disarm(1); /* a guard before: its testbed is handled */
    snprintf(guard_tool, sizeof(guard_tool), "%s", tb->tool);
    snprintf(guard_name, sizeof(guard_name), "%s", tb->name);
    guard_argv[0] = guard_tool;
    guard_argv[1] = "down";
    guard_argv[2] = guard_name;
    guard_argv[3] = NULL;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = guard_handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
        sigaddset(&sa.sa_mask, guard_sigs[i]);
    guard_on = 1;
    sentinel_start();
    for (int i = 0; i < 3; i++)
        sigaction(guard_sigs[i], &sa, &guard_old[i]);
}

void launch_testbed_unguard(void)
{
    if (!guard_argv[0])
        return;
    for (int i = 0; i < 3; i++)
        sigaction(guard_sigs[i], &guard_old[i], NULL);
    sentinel_disarm(1);
    guard_on = 0;
    guard_argv[0] = NULL;
}

/* ---- up and down ------------------------------------------------------------------------- */

/* The last non-empty line of text into buf. */
static void last_line(const char *text, char *buf, size_t len)
{
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
        n--;
    size_t b = n;
    while (b > 0 && text[b - 1] != '\n')
        b--;
    snprintf(buf, len, "%.*s", (int)(n - b), text + b);
}

int launch_testbed_up(launch_testbed_t *tb, unsigned hosts, const char *name, const char *rate,
                      unsigned mtu, double loss, char *err, size_t errlen)
{
    tb->is_up = 0;
    snprintf(tb->name, sizeof(tb->name), "%s", name);
    char ns[16], mtus[16], losss[32];
    snprintf(ns, sizeof(ns), "%u", hosts);
    snprintf(mtus, sizeof(mtus), "%u", mtu);
    snprintf(losss, sizeof(losss), "%.6g", loss);
    char *argv[24];
    size_t a = 0;
    argv[a++] = tb->tool;
    argv[a++] = "up";
    argv[a++] = ns;
    argv[a++] = "--name";
    argv[a++] = tb->name;
    argv[a++] = "--link-rate";
    argv[a++] = (char *)rate;
    argv[a++] = "--mtu";
    argv[a++] = mtus;
    if (loss > 0) {
        argv[a++] = "--loss";
        argv[a++] = losss;
    }
    if (tb->fabric) {
        argv[a++] = "--fabric";
        argv[a++] = (char *)tb->fabric;
    }
    if (tb->link_delay) {
        argv[a++] = "--link-delay";
        argv[a++] = (char *)tb->link_delay;
    }
    if (tb->xdp) {
        argv[a++] = "--xdp";
        argv[a++] = (char *)tb->xdp;
    }
    char leaves[16], hpl[16];
    if (tb->leaves) {
        snprintf(leaves, sizeof(leaves), "%u", tb->leaves);
        snprintf(hpl, sizeof(hpl), "%u", tb->hosts_per_leaf);
        argv[a++] = "--leaves";
        argv[a++] = leaves;
        argv[a++] = "--hosts-per-leaf";
        argv[a++] = hpl;
    }
    argv[a++] = "--json";
    argv[a] = NULL;
    launch_capture_t *cap = calloc(1, sizeof(*cap));
    if (!cap) {
        return set_err(err, errlen, -ENOMEM, "testbed: out of memory");
    }
    cap->running = &guard_building;
    int rc = launch_capture(argv, NULL, UP_TIMEOUT_S(hosts), cap, "tools/testbed up", err, errlen);
    int code = launch_exit_code(cap->status);
    if (rc == 0 && code == LAUNCH_TESTBED_CANNOT) {
        char why[512];
        last_line(cap->tail, why, sizeof(why));
        free(cap);
        return set_err(err, errlen, -EOPNOTSUPP, "%s",
                       why[0] ? why : "testbeds cannot be built here");
    }
    if (rc == 0 && code != 0) {
        rc = set_err(err, errlen, -ECHILD,
                     "tools/testbed up failed (%s): ", code < 0 ? "killed" : "exit status");
        launch_append_tail(err, errlen, cap->tail_len ? cap->tail : "(no message)");
        free(cap);
        return rc;
    }
    if (rc != 0) {
        if (rc == -ETIMEDOUT)
            rc = set_err(err, errlen, rc, "tools/testbed up did not finish in %u s",
                         UP_TIMEOUT_S(hosts));
        free(cap);
        launch_testbed_down(tb); /* whatever it left when it was killed */
        return rc;
    }
    tb->is_up = 1;
    double v;
    const char *j = cap->out;
    if (json_find_string(j, "subnet", tb->subnet, sizeof(tb->subnet)) != 0 ||
        json_find_string(j, "iface", tb->iface, sizeof(tb->iface)) != 0 ||
        json_find_string(j, "addr", tb->switch_addr, sizeof(tb->switch_addr)) != 0 ||
        json_find_number(j, "mtu", &v) != 0) {
        rc = set_err(err, errlen, -EPROTO, "tools/testbed up: unexpected report: ");
        launch_append_tail(err, errlen, cap->out_len ? cap->out : "(empty)");
        free(cap);
        launch_testbed_down(tb);
        return rc;
    }
    tb->mtu = (unsigned)v;
    tb->link_bps = json_find_number(j, "link_rate_bps", &v) == 0 && v > 0 ? (uint64_t)v : 0;
    tb->loss = json_find_number(j, "loss", &v) == 0 ? v : 0;
    tb->fabric_port = json_find_number(j, "fabric_port", &v) == 0 && v > 0 ? (unsigned)v : 0;
    tb->fabric_pid = json_find_number(j, "fabric_pid", &v) == 0 && v > 0 ? (pid_t)v : 0;
    tb->hosts = hosts;
    snprintf(tb->net3, sizeof(tb->net3), "%s", tb->subnet);
    char *dot = strrchr(tb->net3, '.');
    if (dot)
        *dot = '\0';
    free(cap);
    return 0;
}

void launch_testbed_down(launch_testbed_t *tb)
{
    if (!tb->name[0] || !tb->tool[0])
        return;
    char *argv[] = {tb->tool, "down", tb->name, NULL};
    launch_spec_t spec = {argv, NULL, LAUNCH_DEVNULL, LAUNCH_DEVNULL, LAUNCH_INHERIT, 1, 0};
    char err[512];
    if (launch_run(&spec, DOWN_TIMEOUT_MS, err, sizeof(err)) != 0)
        fprintf(stderr, "inagg: tools/testbed down %s: %s\n", tb->name, err);
    tb->is_up = 0;
}

/* Whether process pid is a running inagg (the owner of a testbed b<pid>). */
static int inagg_alive(long pid)
{
    char path[64], comm[32] = "";
    snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = fgets(comm, sizeof(comm), f) != NULL && strncmp(comm, "inagg", 5) == 0;
    fclose(f);
    return ok;
}

void launch_testbed_reap_stale(const char *tool)
{
    char *argv[] = {(char *)tool, "list", "--json", NULL};
    launch_capture_t *cap = calloc(1, sizeof(*cap));
    if (!cap)
        return;
    char err[256];
    if (launch_capture(argv, NULL, 30, cap, "tools/testbed list", err, sizeof(err)) == 0 &&
        launch_exit_code(cap->status) == 0) {
        /* every "b<digits>" string: a testbed (or leftover) name of this command's runs */
        for (const char *p = cap->out; (p = strstr(p, "\"b")) != NULL; p++) {
            const char *d = p + 2, *e = d;
            while (*e >= '0' && *e <= '9')
                e++;
            if (e == d || *e != '"' || e - d > 10)
                continue;
            long pid = strtol(d, NULL, 10);
            if (pid == (long)getpid() || inagg_alive(pid))
                continue;
            launch_testbed_t old;
            memset(&old, 0, sizeof(old));
            snprintf(old.tool, sizeof(old.tool), "%s", tool);
            snprintf(old.name, sizeof(old.name), "b%ld", pid);
            fprintf(stderr, "inagg: removing testbed %s, left by a run that is gone\n", old.name);
            launch_testbed_down(&old);
        }
    }
    free(cap);
}
