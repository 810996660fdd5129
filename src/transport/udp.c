/* udp.c - see udp.h. */
#include "transport/udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int udp_parse_addr(const char *text, uint16_t default_port, struct sockaddr_in *out)
{
    char host[256];
    const char *colon = strrchr(text, ':');
    size_t hlen = colon ? (size_t)(colon - text) : strlen(text);
    if (hlen == 0 || hlen >= sizeof(host))
        return -EINVAL;
    memcpy(host, text, hlen);
    host[hlen] = '\0';
    long port = default_port;
    if (colon) {
        char *end;
        port = strtol(colon + 1, &end, 10);
        if (*end != '\0' || end == colon + 1 || port < 0 || port > 65535)
            return -EINVAL;
    } else if (default_port == 0) {
        return -EINVAL;
    }
    memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &out->sin_addr) == 1)
        return 0;
    struct addrinfo hints = {.ai_family = AF_INET}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res)
        return -EHOSTUNREACH;
    out->sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return 0;
}

static void set_buffer(int fd, int level_force, int level, int bytes)
{
    if (setsockopt(fd, SOL_SOCKET, level_force, &bytes, sizeof(bytes)) != 0)
        setsockopt(fd, SOL_SOCKET, level, &bytes, sizeof(bytes));
}

int udp_open(const struct sockaddr_in *bind_addr, int buffer_bytes)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (buffer_bytes > 0) {
        set_buffer(fd, SO_RCVBUFFORCE, SO_RCVBUF, buffer_bytes);
        set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, buffer_bytes);
    }
    if (bind(fd, (const struct sockaddr *)bind_addr, sizeof(*bind_addr)) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int udp_open_any(int buffer_bytes)
{
    struct sockaddr_in any = {.sin_family = AF_INET};
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    return udp_open(&any, buffer_bytes);
}

uint16_t udp_bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    if (getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return 0;
    return ntohs(a.sin_port);
}

int udp_send_batch(int fd, struct mmsghdr *msgs, int n, int timeout_ms)
{
    int sent = 0;
    while (sent < n) {
        int r = sendmmsg(fd, msgs + sent, (unsigned)(n - sent), MSG_DONTWAIT);
        if (r > 0) {
            sent += r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS)) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int pr = poll(&p, 1, timeout_ms);
            if (pr == 0)
                return sent; /* the rest is lost; retransmission recovers it */
            continue;
        }
        if (r < 0 && errno == ECONNREFUSED)
            continue; /* ICMP from an earlier datagram; not this batch's fault */
        return r < 0 ? -errno : sent;
    }
    return sent;
}

int udp_recv_batch(int fd, struct mmsghdr *msgs, int n, int timeout_ms)
{
    for (;;) {
        int r = recvmmsg(fd, msgs, (unsigned)n, MSG_DONTWAIT, NULL);
        if (r > 0)
            return r;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == ECONNREFUSED)
            continue;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        if (timeout_ms == 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, timeout_ms);
        if (pr < 0 && errno != EINTR)
            return -errno;
        if (pr == 0)
            return 0;
        timeout_ms = 0;
    }
}

int udp_set_receive_timeout(int fd, int timeout_ms)
{
    int fl = fcntl(fd, F_GETFL);
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
        return -errno;
    return 0;
}

int udp_recv_batch_blocking(int fd, struct mmsghdr *msgs, int n)
{
    int r = recvmmsg(fd, msgs, (unsigned)n, MSG_WAITFORONE, NULL);
    if (r >= 0)
        return r;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED)
        return 0;
    return -errno;
}

void udp_format_addr(const struct sockaddr_in *a, char *buf, size_t len)
{
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
    snprintf(buf, len, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
}
