/*
 * capture.c - see launch.h: a program in its own process group with stdout and stderr on
 * pipes, both read under one deadline; on timeout (or when the line callback asks to stop)
 * the group is killed: SIGTERM first, because a launcher such as mpirun puts its children in
 * process groups of their own and only it, on SIGTERM, takes them down; SIGKILL after a grace
 * period. The child is waited for with WNOWAIT before the group is killed, so its pid (the
 * group id) cannot be reused meanwhile.
 */
#include "apps/launch/launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/util.h"

#define GRACE_NS 3000000000ull /* SIGTERM to SIGKILL */

void launch_append_tail(char *err, size_t errlen, const char *text)
{
    if (!err || errlen == 0)
        return;
    size_t tlen = strlen(text);
    char *tidy = malloc(tlen + 1);
    if (!tidy)
        return;
    size_t n = 0;
    for (size_t i = 0; i < tlen;) {
        if (text[i] == '-' && i + 3 < tlen && text[i + 1] == '-' && text[i + 2] == '-' &&
            text[i + 3] == '-') {
            while (i < tlen && text[i] == '-')
                i++;
            continue;
        }
        char c = text[i++];
        if (c == '\n' || c == '\r' || c == '\t')
            c = ' ';
        if (c == ' ' && (n == 0 || tidy[n - 1] == ' '))
            continue;
        tidy[n++] = c;
    }
    while (n > 0 && tidy[n - 1] == ' ')
        n--;
    tidy[n] = '\0';
    size_t used = strlen(err);
    if (used + 4 < errlen) {
        size_t room = errlen - used - 1;
        if (n <= room) {
            memcpy(err + used, tidy, n + 1);
        } else {
            memcpy(err + used, "...", 3);
            size_t keep = room - 3;
            memcpy(err + used + 3, tidy + n - keep, keep);
            err[used + 3 + keep] = '\0';
        }
    }
    free(tidy);
}

/* Feed stdout bytes to the line callback; a line longer than LAUNCH_LINE_MAX is cut. */
static void feed_lines(launch_capture_t *c, const char *data, size_t len)
{
    for (size_t i = 0; i < len && !c->stopped; i++) {
        char ch = data[i];
        if (ch == '\n') {
            c->line[c->line_len] = '\0';
            if (c->on_line(c->line, c->arg) != 0)
                c->stopped = 1;
            c->line_len = 0;
        } else if (c->line_len < LAUNCH_LINE_MAX) {
            c->line[c->line_len++] = ch;
        }
    }
}

/* Read what is there on fd into the capture; 0 while open, 1 at EOF or error. */
static int drain(int fd, launch_capture_t *c, int is_err)
{
    char chunk[LAUNCH_TAIL_MAX];
    ssize_t n = read(fd, chunk, sizeof(chunk));
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : 1;
    if (n == 0)
        return 1;
    size_t len = (size_t)n;
    if (!is_err && c->on_line) {
        feed_lines(c, chunk, len);
    } else if (!is_err) {
        size_t room = LAUNCH_OUT_MAX - c->out_len;
        size_t take = len < room ? len : room;
        memcpy(c->out + c->out_len, chunk, take);
        c->out_len += take;
        c->out[c->out_len] = '\0';
    } else {
        memcpy(c->tail + c->tail_len, chunk, len);
        c->tail_len += len;
        if (c->tail_len > LAUNCH_TAIL_MAX) {
            memmove(c->tail, c->tail + c->tail_len - LAUNCH_TAIL_MAX, LAUNCH_TAIL_MAX);
            c->tail_len = LAUNCH_TAIL_MAX;
        }
        c->tail[c->tail_len] = '\0';
    }
    return 0;
}

/* 1 once pid has exited (left as a zombie: WNOWAIT), 0 if still running at the deadline. */
static int exited_by(pid_t pid, uint64_t deadline_ns)
{
    for (;;) {
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
        if (r == 0 && si.si_pid == pid)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1; /* not our child any more: nothing to wait for */
        if (util_now_ns() >= deadline_ns)
            return 0;
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int launch_capture(char *const argv[], char *const envp[], unsigned timeout_s,
                   launch_capture_t *cap, const char *what, char *err, size_t errlen)
{
    int outp[2] = {-1, -1}, errp[2] = {-1, -1};
    cap->out_len = cap->tail_len = cap->line_len = 0;
    cap->out[0] = cap->tail[0] = '\0';
    cap->stopped = 0;
    cap->status = 0;
    if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        int e = errno;
        for (int i = 0; i < 2; i++)
            if (outp[i] >= 0)
                close(outp[i]);
        return set_err(err, errlen, -e, "%s: pipe: %s", what, strerror(e));
    }
    launch_spec_t spec = {argv, envp, LAUNCH_DEVNULL, outp[1], errp[1], 1};
    char why[512];
    pid_t pid = launch_spawn(&spec, why, sizeof(why));
    close(outp[1]);
    close(errp[1]);
    if (pid < 0) {
        close(outp[0]);
        close(errp[0]);
        return set_err(err, errlen, (int)pid, "%s: %s", what, why);
    }

    if (cap->running)
        *cap->running = pid;
    uint64_t deadline = util_now_ns() + (uint64_t)timeout_s * 1000000000ull;
    struct pollfd pfd[2] = {{outp[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
    int timed_out = 0;
    while ((pfd[0].fd >= 0 || pfd[1].fd >= 0) && !cap->stopped) {
        uint64_t now = util_now_ns();
        if (now >= deadline) {
            timed_out = 1;
            break;
        }
        uint64_t ms = (deadline - now) / 1000000u + 1;
        int r = poll(pfd, 2, ms > 60000 ? 60000 : (int)ms);
        if (r < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2 && r > 0; i++) {
            if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (drain(pfd[i].fd, cap, i == 1)) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
            }
        }
    }
    if (!timed_out && !cap->stopped && !exited_by(pid, deadline))
        timed_out = 1;
    if (timed_out || cap->stopped) {
        kill(-pid, SIGTERM);
        exited_by(pid, util_now_ns() + GRACE_NS);
    }
    kill(-pid, SIGKILL); /* whatever of the group is left */
    launch_reap(pid, &cap->status, 0);
    if (cap->running)
        *cap->running = 0;
    for (int i = 0; i < 2; i++)
        if (pfd[i].fd >= 0)
            close(pfd[i].fd);
    if (cap->on_line && cap->line_len > 0 && !cap->stopped) {
        cap->line[cap->line_len] = '\0'; /* a last line without its newline */
        cap->line_len = 0;
        if (cap->on_line(cap->line, cap->arg) != 0)
            cap->stopped = 1;
    }
    if (timed_out)
        return -ETIMEDOUT;
    return cap->stopped ? -ECANCELED : 0;
}
