/*
 * httpmetrics.c - see httpmetrics.h. One thread polls the listener and the open
 * connections; a connection reads its request into a fixed buffer, gets its whole response
 * rendered at once, and is closed when that is sent or its deadline passes. When all
 * HTTPM_MAX_CLIENTS are open, a new connection closes the oldest: clients that connect and
 * wait hold nothing for long.
 */
#include "switchd/server/httpmetrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/errmsg.h"
#include "lib/base/log.h"
#include "lib/base/util.h"
#include "lib/client/ctl.h"

typedef struct httpm_client {
    int fd;
    uint64_t seq; /* accept order */
    uint64_t deadline_ms;
    char req[HTTPM_REQUEST_MAX + 1]; /* the head, and the NUL that ends it */
    size_t req_len;
    char *resp; /* the whole response once the request is in, else NULL */
    size_t resp_len, resp_sent;
} httpm_client_t;

struct httpm {
    int listen_fd;
    uint16_t port;
    void (*render)(void *ctx, FILE *out);
    void *ctx;
    pthread_t tid;
    _Atomic int stop;
    httpm_client_t clients[HTTPM_MAX_CLIENTS];
    int nclients;
    uint64_t accepted;
};

static uint64_t now_ms(void) { return util_now_ns() / 1000000ull; }

static char *response(const char *status, const char *type, const char *extra, const char *body,
                      size_t body_len, size_t *len)
{
    char *text = NULL;
    FILE *m = open_memstream(&text, len);
    if (!m)
        return NULL;
    fprintf(m,
            "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
            "Connection: close\r\n\r\n",
            status, type, body_len, extra ? extra : "");
    fwrite(body, 1, body_len, m);
    if (fclose(m) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static char *plain(const char *status, const char *extra, const char *body, size_t *len)
{
    return response(status, "text/plain; charset=utf-8", extra, body, strlen(body), len);
}

/* The response to a complete request head. */
static char *answer(httpm_t *h, const char *req, size_t *len)
{
    char method[16], path[256], version[16];
    if (sscanf(req, "%15s %255s %15s", method, path, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0)
        return plain("400 Bad Request", NULL, "bad request\n", len);
    char *q = strchr(path, '?');
    if (q)
        *q = 0;
    if (strcmp(path, "/metrics") != 0)
        return plain("404 Not Found", NULL, "only /metrics is here\n", len);
    int head = strcmp(method, "HEAD") == 0;
    if (strcmp(method, "GET") != 0 && !head)
        return plain("405 Method Not Allowed", "Allow: GET, HEAD\r\n", "GET /metrics\n", len);
    char *body = NULL;
    size_t body_len = 0;
    FILE *m = open_memstream(&body, &body_len);
    if (!m)
        return NULL;
    h->render(h->ctx, m);
    char *r = NULL;
    if (fclose(m) == 0) {
        r = response("200 OK", "text/plain; version=0.0.4; charset=utf-8", NULL, body, body_len,
                     len);
        if (r && head) /* the head alone, Content-Length as for GET */
            *len -= body_len;
    }
    free(body);
    return r;
}

static void drop(httpm_t *h, int i)
{
    close(h->clients[i].fd);
    free(h->clients[i].resp);
    h->clients[i] = h->clients[--h->nclients];
}

/* The connection accepted first. */
static int oldest(const httpm_t *h)
{
    int o = 0;
    for (int i = 1; i < h->nclients; i++)
        if (h->clients[i].seq < h->clients[o].seq)
            o = i;
    return o;
}

static void accept_clients(httpm_t *h)
{
    for (int k = 0; k < 64; k++) { /* bounded: the loop comes back */
        int fd = accept4(h->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (h->nclients == HTTPM_MAX_CLIENTS)
            drop(h, oldest(h)); /* full: idle clients cannot lock a scraper out */
        httpm_client_t *c = &h->clients[h->nclients++];
        memset(c, 0, sizeof(*c));
        c->fd = fd;
        c->seq = h->accepted++;
        c->deadline_ms = now_ms() + HTTPM_DEADLINE_MS;
    }
}

/* Read what is there; once the head is complete, prepare the response. 0, or a negative
 * errno: close it. */
static int serve_read(httpm_t *h, httpm_client_t *c)
{
    for (;;) {
        size_t room = sizeof(c->req) - 1 - c->req_len; /* the NUL's byte kept */
        if (room == 0)
            return -EMSGSIZE; /* head longer than HTTPM_REQUEST_MAX */
        ssize_t n = recv(c->fd, c->req + c->req_len, room, 0);
        if (n == 0)
            return -ECONNRESET;
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
        c->req_len += (size_t)n;
        c->req[c->req_len] = 0;
        if (memchr(c->req, 0, c->req_len)) { /* not text: no request line to read */
            c->resp = plain("400 Bad Request", NULL, "bad request\n", &c->resp_len);
            return c->resp ? 0 : -ENOMEM;
        }
        if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n")) {
            c->resp = answer(h, c->req, &c->resp_len);
            return c->resp ? 0 : -ENOMEM;
        }
    }
}

/* Send what the socket takes: 1 when all is sent, 0 more to come, or a negative errno. */
static int serve_write(httpm_client_t *c)
{
    while (c->resp_sent < c->resp_len) {
        ssize_t n = send(c->fd, c->resp + c->resp_sent, c->resp_len - c->resp_sent, MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
        c->resp_sent += (size_t)n;
    }
    return 1;
}

static void *httpm_main(void *arg)
{
    httpm_t *h = arg;
    struct pollfd pfds[HTTPM_MAX_CLIENTS + 1];
    while (!atomic_load(&h->stop)) {
        pfds[0] = (struct pollfd){.fd = h->listen_fd, .events = POLLIN};
        for (int i = 0; i < h->nclients; i++)
            pfds[i + 1] = (struct pollfd){.fd = h->clients[i].fd,
                                          .events = h->clients[i].resp ? POLLOUT : POLLIN};
        int n = h->nclients;
        int pr = poll(pfds, (nfds_t)n + 1, 100);
        if (pr < 0 && errno != EINTR)
            LOG_W("metrics: poll: %s", strerror(errno));
        uint64_t now = now_ms();
        for (int i = n - 1; i >= 0; i--) { /* in reverse: drop swaps in the last */
            httpm_client_t *c = &h->clients[i];
            short re = pr > 0 ? pfds[i + 1].revents : 0;
            int rc = 0;
            if (re & (POLLIN | POLLHUP | POLLERR))
                rc = c->resp ? -ECONNRESET : serve_read(h, c); /* no second request */
            if (rc == 0 && c->resp) /* non-blocking: takes what the socket takes */
                rc = serve_write(c);
            if (rc != 0 || now > c->deadline_ms)
                drop(h, i);
        }
        if (pr > 0 && (pfds[0].revents & POLLIN))
            accept_clients(h);
    }
    while (h->nclients > 0)
        drop(h, h->nclients - 1);
    return NULL;
}

int httpm_start(const char *host_port, void (*render)(void *ctx, FILE *out), void *ctx,
                httpm_t **out, char *err, size_t errlen)
{
    int fd = ctl_listen(host_port);
    if (fd < 0)
        return set_err(err, errlen, fd, "metrics address '%s': %s", host_port,
                       fd == -EINVAL ? "expected HOST:PORT" : strerror(-fd));
    httpm_t *h = calloc(1, sizeof(*h));
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    if (!h || getsockname(fd, (struct sockaddr *)&a, &alen) != 0) {
        int rc = set_err(err, errlen, h ? -errno : -ENOMEM, "metrics: %s",
                         h ? strerror(errno) : "out of memory");
        free(h);
        close(fd);
        return rc;
    }
    h->listen_fd = fd;
    h->port = ntohs(a.sin_port);
    h->render = render;
    h->ctx = ctx;
    int rc = pthread_create(&h->tid, NULL, httpm_main, h);
    if (rc != 0) {
        close(fd);
        free(h);
        return set_err(err, errlen, -rc, "metrics thread: %s", strerror(rc));
    }
    *out = h;
    return 0;
}

uint16_t httpm_port(const httpm_t *h) { return h->port; }

void httpm_stop(httpm_t *h)
{
    if (!h)
        return;
    atomic_store(&h->stop, 1);
    pthread_join(h->tid, NULL);
    close(h->listen_fd);
    free(h);
}
