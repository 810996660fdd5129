/*
 * bench_udp.c - the run of `inagg bench udp` (see bench_udp.h): the kernel's UDP ceiling on
 * loopback. One sender process blasts datagrams of one size with sendmmsg, one receiver
 * process drains them with recvmmsg; the receive rate is the most any UDP dataplane on this
 * host can move at that datagram size, the number the switch's and workers' packet rates are
 * compared against.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "apps/bench/bench_udp.h"
#include "apps/bench/samples.h"
#include "apps/launch/launch.h"
#include "lib/base/util.h"

#define UDP_MAGIC 0x696e6167u /* "inag" */
#define KIND_DATA 0u
#define KIND_END 1u
#define RECV_POLL_MS 100 /* receive timeout, so the deadline is checked */
#define END_MARKER_WINDOW_NS 1000000000ull /* sender keeps sending end markers this long */
#define SENDER_EXIT_MS 10000 /* a sender that reported exits within this */

/* Start of every datagram; the rest is filler. */
struct dgram_hdr {
    uint32_t magic;
    uint32_t kind;
    uint64_t seq;
};

/* What the sender process reports back through a pipe. */
struct sender_report {
    uint64_t sent;
    uint64_t elapsed_ns;
    int sndbuf; /* effective SO_SNDBUF */
    int err; /* errno of a fatal send error, 0 if none */
};

static int set_sockbuf(int fd, int force_opt, int opt, int bytes)
{
    if (bytes > 0 && setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof(bytes)) != 0)
        setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
    int eff = 0;
    socklen_t len = sizeof(eff);
    getsockopt(fd, SOL_SOCKET, opt, &eff, &len);
    return eff;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The sender process: data for o->seconds, then end markers until the receiver is gone
 * (ECONNREFUSED) or END_MARKER_WINDOW_NS passes. */
static void run_sender(const struct udp_opts *o, uint16_t port, struct sender_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct dgram_hdr *hdrs = calloc(o->batch, sizeof(*hdrs));
    struct iovec *iov = calloc(2u * o->batch, sizeof(*iov));
    struct mmsghdr *msgs = calloc(o->batch, sizeof(*msgs));
    char *body = calloc(1, o->size - sizeof(struct dgram_hdr) + 1);
    if (fd < 0 || !hdrs || !iov || !msgs || !body) {
        rep->err = fd < 0 ? errno : ENOMEM;
        goto out;
    }
    rep->sndbuf = set_sockbuf(fd, SO_SNDBUFFORCE, SO_SNDBUF, o->sockbuf);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons(port)};
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
        rep->err = errno;
        goto out;
    }
    memset(body, 0xa5, o->size - sizeof(struct dgram_hdr));
    for (unsigned i = 0; i < o->batch; i++) {
        hdrs[i] = (struct dgram_hdr){UDP_MAGIC, KIND_DATA, 0};
        iov[2 * i] = (struct iovec){&hdrs[i], sizeof(hdrs[i])};
        iov[2 * i + 1] = (struct iovec){body, o->size - sizeof(struct dgram_hdr)};
        msgs[i].msg_hdr.msg_iov = &iov[2 * i];
        msgs[i].msg_hdr.msg_iovlen = 2;
    }
    uint64_t t0 = util_now_ns(), now = t0;
    uint64_t end = t0 + (uint64_t)(o->seconds * 1e9);
    uint64_t seq = 0;
    while (now < end) {
        for (unsigned i = 0; i < o->batch; i++)
            hdrs[i].seq = seq + i;
        int n = sendmmsg(fd, msgs, o->batch, 0);
        if (n > 0) {
            seq += (uint64_t)n;
        } else if (n < 0 && errno != EINTR && errno != EAGAIN && errno != ENOBUFS &&
                   errno != ECONNREFUSED) {
            rep->err = errno;
            break;
        }
        now = util_now_ns();
    }
    rep->sent = seq;
    rep->elapsed_ns = now - t0;
    struct dgram_hdr marker = {UDP_MAGIC, KIND_END, seq};
    uint64_t stop = util_now_ns() + END_MARKER_WINDOW_NS;
    while (util_now_ns() < stop) {
        if (send(fd, &marker, sizeof(marker), 0) < 0 && errno == ECONNREFUSED)
            break;
        sleep_ns(1000000);
    }
out:
    if (fd >= 0)
        close(fd);
    free(body);
    free(msgs);
    free(iov);
    free(hdrs);
}

/* The receiver (this process) until the end marker or the deadline. */
static int run_receiver(const struct udp_opts *o, int fd, uint64_t deadline, struct udp_run *res)
{
    size_t bufsz = (size_t)o->size + 1; /* one spare byte: a longer datagram shows as such */
    char *bufs = malloc((size_t)o->batch * bufsz);
    struct iovec *iov = calloc(o->batch, sizeof(*iov));
    struct mmsghdr *msgs = calloc(o->batch, sizeof(*msgs));
    if (!bufs || !iov || !msgs) {
        free(bufs);
        free(iov);
        free(msgs);
        fprintf(stderr, "inagg bench udp: out of memory for %u receive buffers\n", o->batch);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < o->batch; i++) {
        iov[i] = (struct iovec){bufs + (size_t)i * bufsz, bufsz};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    uint64_t received = 0, first_batch = 0, first_ns = 0, last_ns = 0;
    int rc = 0, done = 0;
    while (!done && util_now_ns() < deadline) {
        int n = recvmmsg(fd, msgs, o->batch, MSG_WAITFORONE, NULL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                continue;
            fprintf(stderr, "inagg bench udp: recvmmsg: %s\n", strerror(errno));
            rc = -1;
            break;
        }
        uint64_t now = util_now_ns(), data = 0;
        for (int i = 0; i < n; i++) {
            struct dgram_hdr h;
            if (msgs[i].msg_len < sizeof(h))
                continue;
            memcpy(&h, iov[i].iov_base, sizeof(h));
            if (h.magic != UDP_MAGIC)
                continue;
            if (h.kind == KIND_END)
                done = 1;
            else if (msgs[i].msg_len == o->size)
                data++;
        }
        if (data == 0)
            continue;
        if (received == 0) {
            first_ns = now;
            first_batch = data;
        }
        received += data;
        last_ns = now;
    }
    res->received = received;
    /* Datagrams after the first batch over the time since it: the receive rate. */
    res->recv_per_s = last_ns > first_ns
                          ? (double)(received - first_batch) / ((double)(last_ns - first_ns) / 1e9)
                          : 0.0;
    res->gbps = res->recv_per_s * o->size * 8.0 / 1e9;
    free(msgs);
    free(iov);
    free(bufs);
    return rc;
}

struct sender_args {
    const struct udp_opts *o;
    uint16_t port;
    int rx, report_rd, report_wr; /* the receiver's socket and pipe ends, closed in the child */
};

/* The sender process: send, then its report through the pipe. */
static int sender_main(void *arg)
{
    const struct sender_args *a = arg;
    close(a->rx);
    close(a->report_rd);
    struct sender_report rep;
    run_sender(a->o, a->port, &rep);
    ssize_t w = write(a->report_wr, &rep, sizeof(rep));
    return w == (ssize_t)sizeof(rep) ? 0 : 1;
}

/* One repeat: fork the sender, receive, collect the sender's report. */
int udp_run_once(const struct udp_opts *o, struct udp_run *res)
{
    memset(res, 0, sizeof(*res));
    int rx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (rx < 0) {
        fprintf(stderr, "inagg bench udp: socket: %s\n", strerror(errno));
        return -EIO;
    }
    res->rcvbuf = set_sockbuf(rx, SO_RCVBUFFORCE, SO_RCVBUF, o->sockbuf);
    struct timeval tv = {0, RECV_POLL_MS * 1000};
    setsockopt(rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = 0};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(addr);
    int pfd[2] = {-1, -1};
    if (bind(rx, (struct sockaddr *)&addr, sizeof(addr)) != 0 ||
        getsockname(rx, (struct sockaddr *)&addr, &alen) != 0 || pipe2(pfd, O_CLOEXEC) != 0) {
        fprintf(stderr, "inagg bench udp: setting up the receiver: %s\n", strerror(errno));
        close(rx);
        return -EIO;
    }
    uint64_t start = util_now_ns();
    struct sender_args sa = {o, ntohs(addr.sin_port), rx, pfd[0], pfd[1]};
    pid_t pid = launch_fork(sender_main, &sa);
    if (pid < 0) {
        fprintf(stderr, "inagg bench udp: fork: %s\n", strerror((int)-pid));
        close(rx);
        close(pfd[0]);
        close(pfd[1]);
        return -EIO;
    }
    close(pfd[1]);
    uint64_t deadline = start + (uint64_t)((o->seconds + 1.0) * 1e9);
    int rc = run_receiver(o, rx, deadline, res);
    close(rx); /* the sender's next end marker gets ECONNREFUSED and it stops */

    struct sender_report rep;
    memset(&rep, 0, sizeof(rep));
    struct pollfd p = {pfd[0], POLLIN, 0};
    int got = 0;
    uint64_t wait_until = util_now_ns() + END_MARKER_WINDOW_NS + 2000000000ull;
    while (!got && util_now_ns() < wait_until) {
        int r = poll(&p, 1, 100);
        if (r > 0) {
            got = read(pfd[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep);
            break;
        }
        if (r < 0 && errno != EINTR)
            break;
    }
    close(pfd[0]);
    launch_wait(pid, got ? SENDER_EXIT_MS : 0, NULL); /* killed at once when it did not report */
    if (!got) {
        fprintf(stderr, "inagg bench udp: the sender process did not report\n");
        return -EIO;
    }
    if (rep.err) {
        fprintf(stderr, "inagg bench udp: sender: %s\n", strerror(rep.err));
        return -EIO;
    }
    res->sent = rep.sent;
    res->sndbuf = rep.sndbuf;
    res->sent_per_s = rep.elapsed_ns ? (double)rep.sent / ((double)rep.elapsed_ns / 1e9) : 0.0;
    res->loss_pct = rep.sent ? 100.0 * (double)(rep.sent - util_min_u64(rep.sent, res->received)) /
                                   (double)rep.sent
                             : 0.0;
    if (rc == 0 && res->received == 0) {
        fprintf(stderr, "inagg bench udp: no datagram arrived\n");
        rc = -1;
    }
    return rc;
}

double udp_median_of(const struct udp_run *runs, unsigned n, size_t field_offset)
{
    double v[UDP_MAX_REPEATS];
    for (unsigned i = 0; i < n; i++)
        memcpy(&v[i], (const char *)&runs[i] + field_offset, sizeof(double));
    return bench_median(v, n);
}
