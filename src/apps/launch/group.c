/*
 * group.c - see launch.h: several programs at once, each in its own process group with its
 * stdout and stderr on pipes, all read by one poll loop under one deadline, with a periodic
 * callback (a sampler of CPU use) while they run. Used for the ranks of a job started on other
 * hosts (one process per host), whose reports arrive on their stdout.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

#define GRACE_MS 3000u

void launch_group_init(launch_group_t *g) { g->n = 0; }

int launch_group_add(launch_group_t *g, char *const argv[], char *const envp[], char *err,
                     size_t errlen)
{
    if (g->n >= LAUNCH_MAX_RANKS) {
        return set_err(err, errlen, -EINVAL, "launch: more than %u processes in one group",
                       LAUNCH_MAX_RANKS);
    }
    launch_proc_t *p = &g->p[g->n];
    p->pid = 0;
    p->out_len = p->tail_len = 0;
    p->out[0] = p->tail[0] = '\0';
    p->status = p->reaped = 0;
    p->out_fd = p->err_fd = -1;
    int outp[2] = {-1, -1}, errp[2] = {-1, -1};
    if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (outp[i] >= 0)
                close(outp[i]);
        }
        return set_err(err, errlen, -e, "launch: pipe: %s", strerror(e));
    }
    launch_spec_t spec = {argv, envp, LAUNCH_DEVNULL, outp[1], errp[1], 1, 0};
    pid_t pid = launch_spawn(&spec, err, errlen);
    close(outp[1]);
    close(errp[1]);
    if (pid < 0) {
        close(outp[0]);
        close(errp[0]);
        return (int)pid;
    }
    p->pid = pid;
    p->out_fd = outp[0];
    p->err_fd = errp[0];
    return (int)g->n++;
}

/* Read what is there on one of p's pipes; closes it at EOF. */
static void drain(launch_proc_t *p, int is_err)
{
    char chunk[LAUNCH_TAIL_MAX];
    int *fd = is_err ? &p->err_fd : &p->out_fd;
    ssize_t n = read(*fd, chunk, sizeof(chunk));
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(*fd);
        *fd = -1;
        return;
    }
    size_t len = (size_t)n;
    if (!is_err) {
        size_t room = LAUNCH_OUT_MAX - p->out_len, take = len < room ? len : room;
        memcpy(p->out + p->out_len, chunk, take);
        p->out_len += take;
        p->out[p->out_len] = '\0';
        return;
    }
    memcpy(p->tail + p->tail_len, chunk, len);
    p->tail_len += len;
    if (p->tail_len > LAUNCH_TAIL_MAX) {
        memmove(p->tail, p->tail + p->tail_len - LAUNCH_TAIL_MAX, LAUNCH_TAIL_MAX);
        p->tail_len = LAUNCH_TAIL_MAX;
    }
    p->tail[p->tail_len] = '\0';
}

/* Reap the members that exited; the number still to reap. */
static unsigned reap(launch_group_t *g)
{
    unsigned left = 0;
    for (unsigned i = 0; i < g->n; i++) {
        launch_proc_t *p = &g->p[i];
        if (p->reaped || p->pid <= 0)
            continue;
        if (launch_reap(p->pid, &p->status, WNOHANG) == p->pid) {
            p->reaped = 1;
            kill(-p->pid, SIGKILL); /* what it left running in its group */
        } else {
            left++;
        }
    }
    return left;
}

int launch_group_wait(launch_group_t *g, unsigned timeout_ms, void (*tick)(void *arg), void *arg,
                      unsigned tick_ms)
{
    uint64_t start = util_now_ns(), deadline = start + (uint64_t)timeout_ms * 1000000ull;
    uint64_t next_tick = tick ? start : UINT64_MAX; /* without a tick, sleep until output,
                                                      an exit or the deadline */
    if (tick_ms == 0)
        tick_ms = 100;
    struct pollfd pfd[2 * LAUNCH_MAX_RANKS];
    for (;;) {
        uint64_t now = util_now_ns();
        if (tick && now >= next_tick) {
            tick(arg);
            next_tick = now + (uint64_t)tick_ms * 1000000ull;
        }
        unsigned nfd = 0;
        for (unsigned i = 0; i < g->n; i++) {
            if (g->p[i].out_fd >= 0)
                pfd[nfd++] = (struct pollfd){g->p[i].out_fd, POLLIN, 0};
            if (g->p[i].err_fd >= 0)
                pfd[nfd++] = (struct pollfd){g->p[i].err_fd, POLLIN, 0};
        }
        if (nfd == 0 && reap(g) == 0)
            return 0;
        if (now >= deadline)
            break;
        uint64_t until = next_tick < deadline ? next_tick : deadline;
        uint64_t wait_ms = until > now ? (until - now) / 1000000ull + 1 : 0;
        int ms = wait_ms > 1000 ? 1000 : (int)wait_ms; /* a turn at least every second */
        if (nfd == 0) { /* every pipe closed: wait for the exits */
            ms = ms > 20 ? 20 : ms;
            poll(NULL, 0, ms);
            continue;
        }
        int r = poll(pfd, nfd, ms);
        if (r <= 0)
            continue;
        for (unsigned k = 0; k < nfd; k++) {
            if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            for (unsigned i = 0; i < g->n; i++) {
                if (g->p[i].out_fd == pfd[k].fd)
                    drain(&g->p[i], 0);
                else if (g->p[i].err_fd == pfd[k].fd)
                    drain(&g->p[i], 1);
            }
        }
    }
    launch_group_end(g);
    return -ETIMEDOUT;
}

void launch_group_end(launch_group_t *g)
{
    int any = 0;
    for (unsigned i = 0; i < g->n; i++) {
        if (g->p[i].pid > 0 && !g->p[i].reaped) {
            kill(-g->p[i].pid, SIGTERM);
            any = 1;
        }
    }
    uint64_t deadline = util_now_ns() + (uint64_t)GRACE_MS * 1000000ull;
    while (any && reap(g) > 0 && util_now_ns() < deadline)
        poll(NULL, 0, 20);
    for (unsigned i = 0; i < g->n; i++) {
        launch_proc_t *p = &g->p[i];
        if (p->pid > 0 && !p->reaped) {
            kill(-p->pid, SIGKILL);
            launch_reap(p->pid, &p->status, 0);
            p->reaped = 1;
        }
        if (p->out_fd >= 0)
            close(p->out_fd);
        if (p->err_fd >= 0)
            close(p->err_fd);
        p->out_fd = p->err_fd = -1;
    }
}
