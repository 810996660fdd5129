/*
 * test_launch.c - launch_group_wait (launch/group.c): it collects a group's output and exits
 * while sleeping, with or without a tick, so a benchmark's parent process does not take a
 * core from the ranks it waits for; a switch's readiness line and the Python lookup that
 * every launcher shares; launch_run's failures as negative errnos with their reasons; children
 * that go with their parent, whatever ends it; the memory a machine has for new processes
 * (MemAvailable, a cgroup's limit) read from given roots, and a refusal that names both.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/launch/launch.h"
#include "harness.h"

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void count_tick(void *arg) { (*(int *)arg)++; }

/* Start two members that print a line and sleep 0.4 s; wait for them with the given tick.
 * The waiting thread's CPU time in ns. */
static uint64_t wait_for_sleepers(void (*tick)(void *), int *ticks)
{
    launch_group_t *g = calloc(1, sizeof(*g));
    CHECK(g != NULL);
    launch_group_init(g);
    char err[256];
    for (int i = 0; i < 2; i++) {
        char *const argv[] = {"/bin/sh", "-c", "echo up; sleep 0.4", NULL};
        CHECK_MSG(launch_group_add(g, argv, NULL, err, sizeof(err)) == i, "%s", err);
    }
    uint64_t cpu0 = thread_cpu_ns();
    CHECK_EQ_INT(launch_group_wait(g, 10000, tick, ticks, 50), 0);
    uint64_t cpu = thread_cpu_ns() - cpu0;
    for (int i = 0; i < 2; i++)
        CHECK_MSG(g->p[i].reaped && g->p[i].status == 0, "member %d status %d", i, g->p[i].status);
    launch_group_end(g);
    free(g);
    return cpu;
}

TEST(launch_group_wait_sleeps_without_a_tick, 20)
{
    uint64_t cpu = wait_for_sleepers(NULL, NULL);
    /* 0.4 s of waiting: a busy loop would use most of it */
    CHECK_MSG(cpu < 60000000ull, "the wait used %.1f ms of CPU", cpu / 1e6);
}

TEST(launch_group_wait_ticks_and_sleeps_between, 20)
{
    int ticks = 0;
    uint64_t cpu = wait_for_sleepers(count_tick, &ticks);
    CHECK_MSG(ticks >= 4 && ticks <= 20, "%d ticks of 50 ms in 0.4 s", ticks);
    CHECK_MSG(cpu < 60000000ull, "the wait used %.1f ms of CPU", cpu / 1e6);
}

/* The readiness line of a starting switch: its port; a closed pipe or no port is 0, silence
 * past the deadline -ETIMEDOUT. */
TEST(launch_read_ready_port_closed_silent, 10)
{
    int p[2];
    CHECK_EQ_INT(pipe(p), 0);
    CHECK_EQ_INT(write(p[1], "7123\n", 5), 5);
    CHECK_EQ_INT(launch_read_ready(p[0], 1000), 7123);
    CHECK_EQ_INT(launch_read_ready(p[0], 50), -ETIMEDOUT);
    CHECK_EQ_INT(write(p[1], "x\n", 2), 2);
    CHECK_EQ_INT(launch_read_ready(p[0], 1000), 0);
    close(p[1]);
    CHECK_EQ_INT(launch_read_ready(p[0], 1000), 0);
    close(p[0]);
}

/* The interpreter: $INAGG_PYTHON when it names an executable, else none; unset, Debian's or
 * one in $PATH. */
TEST(launch_find_python_order, 10)
{
    char buf[4096];
    setenv("INAGG_PYTHON", "/bin/sh", 1);
    CHECK_EQ_INT(launch_find_python(buf, sizeof(buf)), 0);
    CHECK_MSG(strcmp(buf, "/bin/sh") == 0, "%s", buf);
    setenv("INAGG_PYTHON", "/nonexistent/python3", 1);
    CHECK_EQ_INT(launch_find_python(buf, sizeof(buf)), -ENOENT);
    setenv("INAGG_PYTHON", "sh", 1); /* a name: looked up in $PATH */
    CHECK_EQ_INT(launch_find_python(buf, sizeof(buf)), 0);
    CHECK(strchr(buf, '/') != NULL);
    unsetenv("INAGG_PYTHON");
    int rc = launch_find_python(buf, sizeof(buf));
    if (launch_is_executable("/usr/bin/python3"))
        CHECK_MSG(rc == 0 && strcmp(buf, "/usr/bin/python3") == 0, "%d %s", rc, buf);
}

/* launch_run's failures each come back as their own negative errno, with a sentence naming
 * the program: a missing program, a non-zero exit, and the time limit. */
TEST(launch_run_errors_are_errnos_with_reasons, 10)
{
    char err[256] = "";
    char *const missing[] = {"/nonexistent/inagg-no-such-program", NULL};
    launch_spec_t s = {missing, NULL, LAUNCH_DEVNULL, LAUNCH_DEVNULL, LAUNCH_DEVNULL, 0};
    int rc = launch_run(&s, 5000, err, sizeof(err));
    CHECK_MSG(rc == -ENOENT && strstr(err, "inagg-no-such-program"), "%d: %s", rc, err);

    char *const exit3[] = {"/bin/sh", "-c", "exit 3", NULL};
    s.argv = exit3;
    err[0] = '\0';
    rc = launch_run(&s, 5000, err, sizeof(err));
    CHECK_MSG(rc == -ECHILD && strstr(err, "/bin/sh") && strstr(err, "3"), "%d: %s", rc, err);

    char *const sleeper[] = {"/bin/sh", "-c", "exec sleep 30", NULL};
    s.argv = sleeper;
    err[0] = '\0';
    rc = launch_run(&s, 200, err, sizeof(err));
    CHECK_MSG(rc == -ETIMEDOUT && strstr(err, "time limit"), "%d: %s", rc, err);

    char path[256];
    err[0] = '\0';
    rc = launch_cpucap(getpid(), 0, 0, path, sizeof(path), err, sizeof(err));
    CHECK_MSG(rc == -EINVAL && strstr(err, "1 to 100 percent"), "%d: %s", rc, err);
}

/* ---- children go with their parent ---------------------------------------------------------- */

/* Whether pid still runs (gone, or a zombie nobody reaped yet, is not running). */
static int running(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

/* Whether pid stops running within ms. */
static int stops_within(pid_t pid, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        if (!running(pid))
            return 1;
        usleep(10000);
    }
    return !running(pid);
}

static int sleep_forever(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return 0;
}

struct middle {
    int fd; /* where its children's pids go */
    int sig; /* what it dies of */
};

/* A parent: a forked function, and `sh` (in a group of its own) with a background sleep, both
 * its children; their pids (fork, sh, sleep) to m->fd; then it dies of m->sig. */
static int middle_main(void *arg)
{
    const struct middle *m = arg;
    pid_t pids[3] = {launch_fork(sleep_forever, NULL), 0, 0};
    int p[2];
    if (pids[0] <= 0 || pipe2(p, O_CLOEXEC) != 0)
        return 1;
    char *const argv[] = {"/bin/sh", "-c", "sleep 30 & echo $!; wait", NULL};
    launch_spec_t s = {argv, NULL, LAUNCH_DEVNULL, p[1], LAUNCH_INHERIT, 1, 0};
    pids[1] = launch_spawn(&s, NULL, 0);
    close(p[1]);
    char line[32] = "";
    ssize_t n = read(p[0], line, sizeof(line) - 1);
    pids[2] = n > 0 ? (pid_t)atoi(line) : 0;
    if (pids[1] <= 0 || pids[2] <= 0 || write(m->fd, pids, sizeof(pids)) != sizeof(pids))
        return 1;
    raise(m->sig);
    return sleep_forever(NULL);
}

/* Start a middle process that dies of sig; its children's pids into pids[3]. */
static void run_middle(int sig, pid_t pids[3])
{
    int p[2];
    CHECK_EQ_INT(pipe2(p, O_CLOEXEC), 0);
    struct middle m = {p[1], sig};
    pid_t mid = launch_fork(middle_main, &m);
    close(p[1]);
    CHECK(mid > 0);
    CHECK_EQ_INT(read(p[0], pids, 3 * sizeof(pid_t)), (int)(3 * sizeof(pid_t)));
    close(p[0]);
    int status = 0;
    CHECK_EQ_INT(launch_wait(mid, 10000, &status), 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == sig, "the middle process: status %d",
              status);
}

/* SIGKILL, which no handler sees: the forked function and the program go by their
 * PR_SET_PDEATHSIG. */
TEST(launch_children_go_when_their_parent_is_killed, 20)
{
    pid_t pids[3];
    run_middle(SIGKILL, pids);
    CHECK_MSG(stops_within(pids[0], 5000), "the forked child %d outlived its parent", pids[0]);
    CHECK_MSG(stops_within(pids[1], 5000), "the spawned program %d outlived its parent", pids[1]);
    kill(pids[2], SIGKILL); /* sh's own child: sh does not end it (see launch.h) */
}

/* SIGTERM: the parent's handler ends its children and the process group each program leads,
 * so a program's own child (the sleep under sh) goes too; then the parent dies of SIGTERM. */
TEST(launch_children_and_their_groups_go_on_sigterm, 20)
{
    pid_t pids[3];
    run_middle(SIGTERM, pids);
    for (int i = 0; i < 3; i++) {
        int gone = stops_within(pids[i], 5000);
        if (!gone)
            kill(pids[i], SIGKILL);
        CHECK_MSG(gone, "child %d (pid %d) outlived its parent's SIGTERM", i, pids[i]);
    }
    CHECK_EQ_INT(launch_children(), 0);
}

/* A child whose parent is gone before PR_SET_PDEATHSIG took hold learns it from getppid(). */
TEST(launch_die_with_parent_sees_a_parent_gone, 10)
{
    CHECK_EQ_INT(launch_die_with_parent(SIGKILL, getppid()), 0);
    CHECK_EQ_INT(launch_die_with_parent(SIGKILL, getppid() + 1), -ESRCH);
    CHECK_EQ_INT(prctl(PR_SET_PDEATHSIG, 0), 0);
}

/* ---- memory for new processes ---------------------------------------------------------------- */

static void put(const char *dir, const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, rel);
    for (char *s = strchr(path + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "w");
    CHECK_MSG(f != NULL, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* cgroup v2: an ancestor's memory.max binds (the cgroup's own is "max"); the room under it is
 * what a process may use when it is less than MemAvailable; the refusal names every figure. */
TEST(launch_mem_cgroup_v2_limit_and_refusal, 10)
{
    char dir[] = "/tmp/inagg-memfit-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    put(dir, "proc/meminfo", "MemTotal: 8388608 kB\nMemAvailable: 4194304 kB\n");
    put(dir, "proc/self/cgroup", "0::/a/b\n");
    put(dir, "cg/a/memory.max", "1073741824\n");
    put(dir, "cg/a/memory.current", "536870912\n");
    put(dir, "cg/a/b/memory.max", "max\n");
    put(dir, "cg/a/b/memory.current", "1048576\n");
    char proc[300], cg[300], err[512] = "";
    snprintf(proc, sizeof(proc), "%s/proc", dir);
    snprintf(cg, sizeof(cg), "%s/cg", dir);
    launch_mem_t m;
    launch_mem_read(proc, cg, &m);
    CHECK_MSG(m.available == 4ull << 30, "MemAvailable %llu", (unsigned long long)m.available);
    CHECK_MSG(m.cg_limit == 1ull << 30 && m.cg_usage == 512ull << 20, "limit %llu usage %llu",
              (unsigned long long)m.cg_limit, (unsigned long long)m.cg_usage);
    CHECK(launch_mem_free(&m) == 512ull << 20);
    CHECK_EQ_INT(launch_mem_fits(&m, 100ull << 20, "the ranks", err, sizeof(err)), 0);
    CHECK_EQ_INT(launch_mem_fits(&m, 600ull << 20, "the ranks", err, sizeof(err)), -ENOMEM);
    CHECK_MSG(strstr(err, "the ranks: 600.0 MiB of memory needed") &&
                  strstr(err, "512.0 MiB available") && strstr(err, "MemAvailable 4.0 GiB") &&
                  strstr(err, "limit 1.0 GiB"),
              "%s", err);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}

/* cgroup v1 with no limit (its huge "unlimited" value): MemAvailable alone decides; nothing
 * known: everything fits. */
TEST(launch_mem_cgroup_v1_unlimited_and_unknown, 10)
{
    char dir[] = "/tmp/inagg-memfit-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    put(dir, "proc/meminfo", "MemAvailable: 2097152 kB\n");
    put(dir, "proc/self/cgroup", "5:cpu:/x\n4:memory:/x\n");
    put(dir, "cg/memory/x/memory.limit_in_bytes", "9223372036854771712\n");
    put(dir, "cg/memory/x/memory.usage_in_bytes", "1048576\n");
    char proc[300], cg[300], err[512] = "";
    snprintf(proc, sizeof(proc), "%s/proc", dir);
    snprintf(cg, sizeof(cg), "%s/cg", dir);
    launch_mem_t m;
    launch_mem_read(proc, cg, &m);
    CHECK(m.cg_limit == 0 && launch_mem_free(&m) == 2ull << 30);
    CHECK_EQ_INT(launch_mem_fits(&m, 3ull << 30, "x", err, sizeof(err)), -ENOMEM);
    CHECK_MSG(!strstr(err, "cgroup"), "%s", err);
    put(dir, "cg/memory/x/memory.limit_in_bytes", "1073741824\n");
    launch_mem_read(proc, cg, &m);
    CHECK(m.cg_limit == 1ull << 30 && launch_mem_free(&m) == (1ull << 30) - (1ull << 20));
    snprintf(proc, sizeof(proc), "%s/none", dir);
    launch_mem_read(proc, cg, &m);
    CHECK(launch_mem_free(&m) == UINT64_MAX);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
}
