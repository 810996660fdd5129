/* ctl.c - see ctl.h. */
#include "lib/client/ctl.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/netaddr.h"
#include "lib/base/util.h"

long ctl_fill(int fd, ctl_reader_t *r)
{
    /* A peer that sends CTL_LINE_MAX bytes without a newline is not speaking this protocol. */
    if (r->len >= CTL_LINE_MAX && !memchr(r->buf, '\n', r->len))
        return -EMSGSIZE;
    if (r->len >= sizeof(r->buf))
        return -EAGAIN;
    ssize_t n = recv(fd, r->buf + r->len, sizeof(r->buf) - r->len, MSG_DONTWAIT);
    if (n < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -EAGAIN : -errno;
    r->len += (size_t)n;
    return n;
}

int ctl_take_line(ctl_reader_t *r, char *line, size_t cap)
{
    char *nl = memchr(r->buf, '\n', r->len);
    if (!nl)
        return 0;
    size_t n = (size_t)(nl - r->buf);
    size_t copy = n < cap - 1 ? n : cap - 1;
    memcpy(line, r->buf, copy);
    line[copy] = '\0';
    if (copy > 0 && line[copy - 1] == '\r')
        line[copy - 1] = '\0';
    memmove(r->buf, nl + 1, r->len - n - 1);
    r->len -= n + 1;
    return 1;
}

int ctl_read_line(int fd, ctl_reader_t *r, char *line, size_t cap, int timeout_ms)
{
    uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        if (ctl_take_line(r, line, cap))
            return 0;
        long got = ctl_fill(fd, r);
        if (got == 0)
            return -ECONNRESET;
        if (got > 0)
            continue;
        if (got != -EAGAIN)
            return (int)got;
        uint64_t now = util_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int wait_ms = (int)((deadline - now) / 1000000ull) + 1;
        if (poll(&p, 1, wait_ms) < 0 && errno != EINTR)
            return -errno;
    }
}

int ctl_write_line(int fd, const char *line, int timeout_ms)
{
    char buf[CTL_LINE_MAX + 2];
    size_t n = strlen(line);
    if (n > CTL_LINE_MAX)
        return -EMSGSIZE;
    memcpy(buf, line, n);
    buf[n++] = '\n';
    size_t off = 0;
    uint64_t deadline = util_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    while (off < n) {
        ssize_t w = send(fd, buf + off, n - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        uint64_t now = util_now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        poll(&p, 1, (int)((deadline - now) / 1000000ull) + 1);
    }
    return 0;
}

int ctl_queue_line(ctl_writer_t *w, const char *line)
{
    size_t n = strlen(line);
    if (n > CTL_LINE_MAX)
        return -EMSGSIZE;
    if (w->len + n + 1 > w->max)
        return -ENOBUFS;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n + 1)
            cap *= 2;
        char *b = realloc(w->buf, cap);
        if (!b)
            return -ENOMEM;
        w->buf = b;
        w->cap = cap;
    }
    if (w->len == 0)
        w->since_ns = util_now_ns();
    memcpy(w->buf + w->len, line, n);
    w->buf[w->len + n] = '\n';
    w->len += n + 1;
    return 0;
}

long ctl_flush(int fd, ctl_writer_t *w)
{
    if (w->len == 0)
        return 0;
    size_t off = 0;
    while (off < w->len) {
        ssize_t n = send(fd, w->buf + off, w->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        break;
    }
    memmove(w->buf, w->buf + off, w->len - off);
    w->len -= off;
    if (w->len == 0)
        w->since_ns = 0;
    return (long)off;
}

void ctl_writer_free(ctl_writer_t *w)
{
    free(w->buf);
    *w = (ctl_writer_t){0};
}

int ctl_connect(const struct sockaddr_in *addr, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            return -e;
        }
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int pr = poll(&p, 1, timeout_ms);
        int err = 0;
        socklen_t len = sizeof(err);
        if (pr <= 0) {
            close(fd);
            return pr == 0 ? -ETIMEDOUT : -errno;
        }
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            close(fd);
            return -err;
        }
    }
    return fd;
}

int ctl_connect_to(const char *host_port, int timeout_ms)
{
    struct sockaddr_in a;
    int rc = netaddr_parse(host_port, 0, &a);
    return rc != 0 ? rc : ctl_connect(&a, timeout_ms);
}

int ctl_listen(const char *host_port)
{
    struct sockaddr_in a;
    int rc = netaddr_parse(host_port, 0, &a);
    if (rc != 0)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 256) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    return fd;
}
