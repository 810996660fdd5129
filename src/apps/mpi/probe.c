/*
 * probe.c - does an inagg switch answer on its control port: a TCP connection and a STATS
 * request whose first reply line must come within the time given, so that a server that
 * accepts and never answers is found in that time, not by a join that waits for the job's
 * timeout. The PMPI interposer and the Open MPI component ask it before their ranks join.
 */
#include "apps/mpi/probe.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms =
        (deadline->tv_sec - now.tv_sec) * 1000L + (deadline->tv_nsec - now.tv_nsec) / 1000000L;
    return ms > 0 ? ms : 0;
}

/* Wait for `events` on fd until the deadline: 1 when ready, 0 when the time is up. */
static int wait_fd(int fd, short events, const struct timespec *deadline)
{
    for (;;) {
        struct pollfd pfd = {fd, events, 0};
        int n = poll(&pfd, 1, (int)ms_left(deadline));
        if (n > 0)
            return 1;
        if (n == 0 || errno != EINTR || ms_left(deadline) == 0)
            return 0;
    }
}

/* Does the switch answer on its control port within `ms` in all: the TCP connection, then a
 * STATS request whose first reply line must arrive in that time too. A server that accepts
 * and never answers is found here, within `ms`, not by a join that waits for the job's
 * timeout. */
int switch_probe(const char *addr, int ms, const char *knob, char *why, size_t len)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    char host[256];
    snprintf(host, sizeof(host), "%s", addr);
    char *colon = strrchr(host, ':');
    if (!colon || colon == host || !colon[1]) {
        snprintf(why, len, "the switch '%.100s' is not HOST:PORT", addr);
        return 0;
    }
    *colon = '\0';
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, colon + 1, &hints, &ai);
    if (gai != 0 || !ai) {
        snprintf(why, len, "cannot resolve '%.100s': %.100s", addr, gai_strerror(gai));
        return 0;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int connected = 0, ok = 0;
    if (fd < 0) {
        snprintf(why, len, "socket: %s", strerror(errno));
    } else if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        connected = 1;
    } else if (errno != EINPROGRESS) {
        snprintf(why, len, "cannot connect to %.100s: %.100s", addr, strerror(errno));
    } else {
        int ready = wait_fd(fd, POLLOUT, &deadline);
        int err = 0;
        socklen_t elen = sizeof(err);
        if (ready && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0 && err == 0)
            connected = 1;
        else
            snprintf(why, len, "cannot connect to %.100s within %d ms (%s): %.60s", addr, ms, knob,
                     ready ? strerror(err ? err : errno) : "timed out");
    }
    if (connected) {
        static const char stats[] = "STATS\n";
        char line[128];
        size_t got = 0;
        ssize_t w = send(fd, stats, sizeof(stats) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        while (w == (ssize_t)sizeof(stats) - 1 && got < sizeof(line) - 1 &&
               !memchr(line, '\n', got) && wait_fd(fd, POLLIN, &deadline)) {
            ssize_t n = recv(fd, line + got, sizeof(line) - 1 - got, MSG_DONTWAIT);
            if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR)))
                break;
            got += n > 0 ? (size_t)n : 0;
        }
        line[got] = '\0';
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (got > 0 && strncmp(line, "ERR", 3) != 0)
            ok = 1; /* the start of the counters (a long first line need not end here) */
        else if (got > 0)
            snprintf(why, len, "the switch at %.100s refused: %.100s", addr, line);
        else
            snprintf(why, len,
                     "%.80s accepted the connection but did not answer within %d ms "
                     "(%s): not an inagg switch, or a stuck one",
                     addr, ms, knob);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return ok;
}
