/*
 * test_harness.c - the test machinery checks itself: in the ASan build a worker process that
 * leaks memory is reported as failed (forked children end with _exit, which would skip
 * LeakSanitizer), so leak checking really runs; a worker that frees everything passes. And
 * the runner fails a test that exits 0 midway, leaves a child running or unwaited, or whose
 * test switch dies (selftest_ tests, run only by harness_fails_... with the variable set).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "testutil.h"

#if defined(__SANITIZE_ADDRESS__)
static void *volatile g_sink;

/* 64 separate blocks whose pointers are dropped: even if a stale copy of one stays on the
 * stack (LeakSanitizer is conservative), the others are unreachable. */
__attribute__((noinline)) static void leak_blocks(uint32_t rank)
{
    for (int i = 0; i < 64; i++) {
        char *p = malloc(1024 + rank);
        if (p)
            memset(p, 1, 1024);
        g_sink = p;
    }
    g_sink = NULL;
}

static int leaking_worker(uint32_t rank, void *arg)
{
    (void)arg;
    leak_blocks(rank);
    return 0;
}

static int clean_worker(uint32_t rank, void *arg)
{
    (void)arg;
    char *p = malloc(4096 + rank);
    free(p);
    return p ? 0 : 1;
}

#endif

TEST(harness_catches_a_leaking_worker, 30)
{
#if defined(__SANITIZE_ADDRESS__)
    CHECK_EQ_INT(run_workers(2, clean_worker, NULL, 20), 0);
    CHECK_EQ_INT(run_workers(2, leaking_worker, NULL, 20), 2);
#else
    SKIP("leak checking runs in the ASan build (make SAN=1)");
#endif
}

/* ---- tests that must fail: run only with INAGG_HARNESS_SELFTEST set, by the test below ---- */

TEST(selftest_exits_early, 10) { exit(0); /* as a helper that returns into the test body would */ }

TEST(selftest_leaves_a_child_running, 10)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        sleep(30);
        _exit(0);
    }
}

TEST(selftest_leaves_a_child_unwaited, 10)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0)
        _exit(0);
    usleep(200 * 1000);
}

TEST(selftest_switch_dies_before_the_end, 20)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    kill(ts.pid, SIGKILL);
    ts_stop(&ts);
}

/* Each selftest_ test fails, with its reason. */
TEST(harness_fails_early_exits_children_and_bad_switches, 60)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "INAGG_HARNESS_SELFTEST=1 %s/inagg-tests selftest_ 2>&1",
             harness_build_dir());
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL);
    char out[8192];
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    int status = pclose(p);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d:\n%s", status, out);
    static const char *const want[] = {"FAIL    selftest_exits_early",
                                       "exited 0 before the end of the test",
                                       "FAIL    selftest_leaves_a_child_running",
                                       "left a child process running",
                                       "FAIL    selftest_leaves_a_child_unwaited",
                                       "left a child process unwaited",
                                       "FAIL    selftest_switch_dies_before_the_end",
                                       "did not stop cleanly",
                                       "0 passed, 4 failed"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK_MSG(strstr(out, want[i]) != NULL, "no '%s' in:\n%s", want[i], out);
}
