/*
 * test_launch.c - launch_group_wait (launch/group.c): it collects a group's output and exits
 * while sleeping, with or without a tick, so a benchmark's parent process does not take a
 * core from the ranks it waits for; a switch's readiness line and the Python lookup that
 * every launcher shares; launch_run's failures as negative errnos with their reasons.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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
