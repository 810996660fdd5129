/*
 * spawn.c - a switch in a child process, for the benchmarks' embedded switch and the tests:
 * fork, start the switch there, and hand its port back through a pipe once it is bound (a
 * readiness signal, never a sleep). The child runs until SIGTERM or SIGINT.
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "switch/switch.h"

static void child_main(const switch_config_t *cfg, int ready_fd)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* the switch's threads inherit the mask */
    inagg_switch_t *sw;
    char err[256];
    if (switch_start(cfg, &sw, err, sizeof(err)) != 0) {
        fprintf(stderr, "inagg: switch in child process: %s\n", err);
        _exit(1);
    }
    char buf[16];
    int n = snprintf(buf, sizeof(buf), "%u\n", switch_port(sw));
    if (write(ready_fd, buf, (size_t)n) != n)
        _exit(1);
    close(ready_fd);
    int sig;
    sigwait(&set, &sig);
    if (getenv("INAGG_BENCH_SWITCH_STATS"))
        switch_write_stats(sw, stderr, 0);
    switch_stop(sw);
    _exit(0);
}

pid_t switch_spawn(const switch_config_t *cfg, uint16_t *port)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        child_main(cfg, p[1]);
    }
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        return -1;
    }
    char buf[16] = {0};
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    ssize_t n = poll(&pf, 1, 10000) == 1 ? read(p[0], buf, sizeof(buf) - 1) : -1;
    close(p[0]);
    if (n <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    *port = (uint16_t)atoi(buf);
    return pid;
}
