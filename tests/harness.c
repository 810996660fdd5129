/*
 * harness.c - the test runner (see harness.h). Every test runs in its own forked child
 * (launch/) so a crash or a hang fails that test only; SIGALRM bounds it. A test passes only
 * when it ran to its end, left no child behind and (ASan build) leaked nothing. Output ends with
 * the summary line that CI reads.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "apps/launch/launch.h"
#include "lib/base/log.h"

#define MAX_TESTS 512
#define EXIT_SKIP 77

struct test_entry {
    const char *name;
    test_fn fn;
    int timeout_s;
    const char *file;
};

static struct test_entry g_tests[MAX_TESTS];
static int g_ntests;
static char g_build_dir[PATH_MAX];
static char g_dataset_path[PATH_MAX + 64];

void harness_register(const char *name, test_fn fn, int timeout_s, const char *file)
{
    if (g_ntests < MAX_TESTS)
        g_tests[g_ntests++] = (struct test_entry){name, fn, timeout_s, file};
}

void harness_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "    %s:%d: %s\n", file, line, msg);
    fflush(stderr);
    _exit(1);
}

void harness_skip(const char *why)
{
    fprintf(stderr, "    skipped: %s\n", why);
    fflush(stderr);
    _exit(EXIT_SKIP);
}

const char *harness_build_dir(void) { return g_build_dir; }

const char *harness_dataset(const char *name)
{
    /* The build dir is <repo>/build*, the datasets live in <repo>/../shared/datasets. */
    snprintf(g_dataset_path, sizeof(g_dataset_path), "%s/../../shared/datasets/%s", g_build_dir,
             name);
    struct stat st;
    if (stat(g_dataset_path, &st) != 0)
        return NULL;
    return g_dataset_path;
}

static int cmp_tests(const void *a, const void *b)
{
    const struct test_entry *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : strcmp(x->name, y->name);
}

static int selected(const char *name, int argc, char **argv, int first)
{
    if (first >= argc)
        return 1;
    for (int i = first; i < argc; i++)
        if (strstr(name, argv[i]))
            return 1;
    return 0;
}

struct test_run {
    const struct test_entry *t;
    unsigned alarm_s;
    int done_fd; /* the test writes one byte here once it ran to its end */
};

/* In the test's own process: its own process group (so a timeout can kill the test's helper
 * processes too), an alarm at its time limit, then the test. A test passes only when its
 * function returned, it left no child process running or unwaited, and (ASan build) nothing
 * leaked; it then reports that it ran to its end through done_fd, so an exit(0) from the
 * middle of a test (or from a forked helper running on into the test) is no pass. */
static int run_test(void *arg)
{
    const struct test_run *r = arg;
    setpgid(0, 0);
    alarm(r->alarm_s);
    r->t->fn();
    fflush(NULL);
    int st;
    pid_t left = waitpid(-1, &st, WNOHANG);
    if (left >= 0) {
        if (left == 0)
            fprintf(stderr, "    the test left a child process running\n");
        else
            fprintf(stderr, "    the test left a child process unwaited (pid %d)\n", (int)left);
        return 1;
    }
    if (launch_child_leak_check()) {
        fprintf(stderr, "    the test leaked memory (LeakSanitizer report above)\n");
        return 1;
    }
    char done = 'd';
    if (write(r->done_fd, &done, 1) != 1)
        return 1;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(g_build_dir, sizeof(g_build_dir), "%s", self);
    }
    /* the switches and ranks the tests run in this process log errors only (INAGG_LOG wins):
     * their expected failures would bury the results in warnings */
    log_init(LOG_ERROR, "inagg-tests");
    double scale = 1.0;
    const char *env_scale = getenv("INAGG_TEST_TIMEOUT_SCALE");
    if (env_scale)
        scale = atof(env_scale);
    int first = 1, list = 0;
    while (first < argc && argv[first][0] == '-') {
        if (strcmp(argv[first], "--list") == 0) {
            list = 1;
            first++;
        } else if (strcmp(argv[first], "--timeout-scale") == 0 && first + 1 < argc) {
            scale = atof(argv[first + 1]);
            first += 2;
        } else {
            fprintf(stderr, "usage: %s [--list] [--timeout-scale F] [substring ...]\n", argv[0]);
            return 2;
        }
    }
    if (scale <= 0)
        scale = 1.0;
    qsort(g_tests, (size_t)g_ntests, sizeof(g_tests[0]), cmp_tests);
    int passed = 0, failed = 0, skipped = 0;
    for (int i = 0; i < g_ntests; i++) {
        struct test_entry *t = &g_tests[i];
        if (!selected(t->name, argc, argv, first))
            continue;
        /* Tests meant to fail, which show that the harness fails them (test_harness.c). */
        if (strncmp(t->name, "selftest_", 9) == 0 && !getenv("INAGG_HARNESS_SELFTEST"))
            continue;
        if (list) {
            printf("%s\n", t->name);
            continue;
        }
        double t0 = now_s();
        int done[2];
        if (pipe2(done, O_CLOEXEC | O_NONBLOCK) != 0) {
            perror("pipe");
            return 2;
        }
        struct test_run run = {t, (unsigned)(t->timeout_s * scale + 0.5), done[1]};
        pid_t pid = launch_fork(run_test, &run);
        close(done[1]);
        int status = 0;
        /* SIGALRM ends the test at its limit; the wait's own deadline is only a backstop. */
        if (pid > 0) {
            launch_wait(pid, (int)(run.alarm_s + 10) * 1000, &status);
            kill(-pid, SIGKILL);
        } else {
            status = 1 << 8; /* could not fork: a failure */
        }
        double dt = now_s() - t0;
        char byte;
        int completed = read(done[0], &byte, 1) == 1;
        close(done[0]);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !completed) {
            printf("FAIL    %-44s exited 0 before the end of the test\n", t->name);
            failed++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            printf("ok      %-44s %6.2fs\n", t->name, dt);
            passed++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP) {
            printf("skip    %-44s\n", t->name);
            skipped++;
        } else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) {
            printf("FAIL    %-44s timed out after %ds\n", t->name, t->timeout_s);
            failed++;
        } else if (WIFSIGNALED(status)) {
            printf("FAIL    %-44s killed by signal %d\n", t->name, WTERMSIG(status));
            failed++;
        } else {
            printf("FAIL    %-44s exit %d\n", t->name, WEXITSTATUS(status));
            failed++;
        }
    }
    if (!list)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : 0;
}
