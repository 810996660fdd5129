/*
 * switch_child.c - see launch.h: a switch in a child process, for the benchmarks' and the
 * trainer's embedded switch and the tests: fork, start the switch there, and hand its port
 * back through a pipe once it is bound (a readiness signal, never a sleep). The child runs
 * until SIGTERM or SIGINT.
 */
#include "apps/launch/launch.h"
#include "switchd/switchd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/errmsg.h"

#define READY_TIMEOUT_MS 10000
#define STOP_GRACE_MS 30000

struct child_args {
    const switch_config_t *cfg;
    int ready_fd;
};

static int child_main(void *arg)
{
    const struct child_args *a = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the switch's threads inherit the mask */
    inagg_switch_t *sw;
    char err[256];
    if (switch_start(a->cfg, &sw, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg: switch in child process: %s\n", err);
        return 1;
    }
    char buf[16];
    int n = snprintf(buf, sizeof(buf), "%u\n", switch_port(sw));
    if (write(a->ready_fd, buf, (size_t)n) != n)
        return 1;
    close(a->ready_fd);
    int sig;
    sigwait(&set, &sig);
    if (getenv("INAGG_BENCH_SWITCH_STATS"))
        switch_write_stats(sw, stderr, 0);
    switch_stop(sw);
    return launch_child_leak_check() ? 23 : 0; /* 23: LeakSanitizer's own exit code */
}

pid_t launch_switch(const switch_config_t *cfg, uint16_t *port, char *err, size_t errlen)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        int e = errno;
        return set_err(err, errlen, -e, "pipe: %s", strerror(e));
    }
    struct child_args a = {cfg, p[1]};
    pid_t pid = launch_fork(child_main, &a);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return set_err(err, errlen, (int)pid, "fork: %s", strerror((int)-pid));
    }
    int ready = launch_read_ready(p[0], READY_TIMEOUT_MS);
    close(p[0]);
    if (ready <= 0) {
        int status = 0;
        int rc = launch_stop(pid, SIGKILL, STOP_GRACE_MS, &status);
        if (ready == 0)
            return set_err(err, errlen, -ECHILD, "the switch process ended before it was ready");
        return set_err(err, errlen, rc == 0 ? -ETIMEDOUT : rc,
                       "the switch did not report its port within %d s", READY_TIMEOUT_MS / 1000);
    }
    *port = (uint16_t)ready;
    return pid;
}

int launch_read_ready(int fd, int timeout_ms)
{
    char buf[32] = {0};
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int r = poll(&pf, 1, timeout_ms);
    if (r <= 0)
        return -ETIMEDOUT;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    int port = atoi(buf);
    return port > 0 && port < 65536 ? port : 0;
}

void launch_switch_stop(pid_t pid) { launch_stop(pid, SIGTERM, STOP_GRACE_MS, NULL); }
