/*
 * bench_floor.c - see bench_floor.h: the raw UDP ping-pong that `inagg bench latency
 * --testbed N` measures beside the allreduce, its echo server and clients (hidden roles of
 * the same command, run inside the testbed's namespaces) and the parent that starts them and
 * folds their round trips into p50 / p99.
 */
#include "apps/bench/bench_floor.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "apps/bench/harness.h"
#include "apps/bench/samples.h"
#include "lib/base/errmsg.h"
#include "lib/base/netaddr.h"
#include "lib/base/pollmode.h"
#include "lib/base/util.h"

#define FLOOR_MAGIC 0x666c6f72u /* "flor": the first word of every ping */
#define FLOOR_MIN_SIZE 12u /* magic, host, sequence number */
#define FLOOR_MAX_SIZE 65507u /* largest UDP payload over IPv4 */
#define FLOOR_MAX_ITERS 1000000u
#define FLOOR_PING_TIMEOUT_MS 200 /* a ping unanswered this long is sent again (lost) */
#define FLOOR_START_MS 15000 /* the echo server must answer within this */
#define FLOOR_SERVER_LIFE_MS 3600000 /* the echo server ends by itself after this */
#define FLOOR_NOT_READY_SLEEP_NS 5000000L

typedef struct floor_report {
    uint32_t samples, lost;
} floor_report_t;

/* How an end of the floor waits for a datagram: as the end of inagg it stands for (the echo
 * server as the switch's --poll, a client as the workers' --poll), so the ratio compares the
 * same waiting. */
typedef struct floor_poll {
    switch_poll_t mode;
    uint32_t spin_us;
} floor_poll_t;

/* Wait up to timeout_ms for fd to be readable; without sleeping while the mode spins
 * (busy, or adaptive within spin_us of since_ns). poll()'s result. */
static int floor_wait(int fd, int timeout_ms, const floor_poll_t *fp, uint64_t since_ns)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    uint64_t spin_ns = switch_poll_spin_ns(fp->mode, fp->spin_us);
    if (spin_ns == UINT64_MAX) /* busy: the whole wait */
        spin_ns = (uint64_t)timeout_ms * 1000000u;
    for (uint64_t now = util_now_ns(); now - since_ns < spin_ns && switch_poll_may_spin(now);
         now = util_now_ns()) {
        int r = poll(&p, 1, 0);
        if (r != 0)
            return r;
        switch_poll_idle();
        if (now - since_ns >= (uint64_t)timeout_ms * 1000000u)
            return 0;
    }
    return poll(&p, 1, timeout_ms);
}

int bench_floor_is_role(int argc, char **argv)
{
    return argc >= 2 &&
           (strcmp(argv[1], "--floor-echo") == 0 || strcmp(argv[1], "--floor-ping") == 0);
}

/* ---- the echo server ---------------------------------------------------------------------- */

/* Send every datagram back to where it came from, unchanged, until life_ms passes (or a
 * signal ends the process). */
static int echo_main(const struct sockaddr_in *listen_at, unsigned life_ms, const floor_poll_t *fp)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (const struct sockaddr *)listen_at, sizeof(*listen_at)) != 0) {
        fprintf(stderr, "inagg bench latency: floor echo server: %s\n", strerror(errno));
        if (fd >= 0)
            close(fd);
        return 1;
    }
    static unsigned char buf[FLOOR_MAX_SIZE + 1];
    uint64_t end = util_now_ns() + (uint64_t)life_ms * 1000000u, last = 0;
    while (util_now_ns() < end) {
        if (floor_wait(fd, 200, fp, last) <= 0)
            continue;
        last = util_now_ns();
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
        if (n >= 0)
            (void)sendto(fd, buf, (size_t)n, 0, (const struct sockaddr *)&from, fl);
    }
    close(fd);
    return 0;
}

/* ---- one host's client -------------------------------------------------------------------- */

static void fill_ping(unsigned char *buf, uint32_t size, uint32_t host, uint32_t seq)
{
    uint32_t head[3] = {htonl(FLOOR_MAGIC), htonl(host), htonl(seq)};
    memcpy(buf, head, sizeof(head));
    for (uint32_t k = FLOOR_MIN_SIZE; k < size; k++)
        buf[k] = (unsigned char)(seq * 31u + k * 7u + host);
}

static uint32_t ping_seq(const unsigned char *buf)
{
    uint32_t s;
    memcpy(&s, buf + 8, 4);
    return ntohl(s);
}

typedef struct ping_state {
    int fd;
    uint32_t size, host;
    unsigned char *tx, *rx;
    uint32_t lost, max_lost;
    int answered; /* the server has answered once */
    floor_poll_t poll; /* how this client waits for an echo */
    uint64_t start_deadline;
} ping_state_t;

/* One round trip of ping seq: its time in microseconds (> 0), or a negative errno after a
 * message (-ETIMEDOUT: unanswered, -EPROTO: a wrong echo). A ping
 * unanswered in FLOOR_PING_TIMEOUT_MS is counted lost and sent again; an echo whose bytes
 * differ from the ping's is an error. */
static double one_round_trip(ping_state_t *s, uint32_t seq)
{
    fill_ping(s->tx, s->size, s->host, seq);
    for (;;) {
        uint64_t t0 = util_now_ns();
        ssize_t sent = send(s->fd, s->tx, s->size, 0);
        int refused = sent < 0 && errno == ECONNREFUSED;
        if (sent < 0 && !refused) {
            fprintf(stderr, "inagg bench latency: floor ping: send: %s\n", strerror(errno));
            return -EIO;
        }
        uint64_t wait_end = t0 + (uint64_t)FLOOR_PING_TIMEOUT_MS * 1000000u;
        while (!refused) {
            uint64_t now = util_now_ns();
            if (now >= wait_end)
                break;
            int left_ms = (int)((wait_end - now + 999999u) / 1000000u);
            if (floor_wait(s->fd, left_ms, &s->poll, t0) <= 0)
                continue;
            ssize_t n = recv(s->fd, s->rx, s->size + 1u, MSG_DONTWAIT);
            uint64_t t1 = util_now_ns();
            if (n < 0) {
                refused = errno == ECONNREFUSED; /* the server is not bound yet */
                if (!refused && errno != EAGAIN && errno != EINTR) {
                    fprintf(stderr, "inagg bench latency: floor ping: recv: %s\n", strerror(errno));
                    return -EIO;
                }
                continue;
            }
            if (n >= (ssize_t)FLOOR_MIN_SIZE && ping_seq(s->rx) != seq)
                continue; /* the late echo of a ping sent again */
            if (n != (ssize_t)s->size || memcmp(s->rx, s->tx, s->size) != 0) {
                fprintf(stderr,
                        "inagg bench latency: floor ping %u: the echo differs from "
                        "the ping (%zd bytes back of %u sent)\n",
                        seq, n, s->size);
                return -EPROTO;
            }
            s->answered = 1;
            return (double)(t1 - t0) / 1e3;
        }
        if (!s->answered) { /* starting: not counted lost, bounded by the start deadline */
            if (util_now_ns() >= s->start_deadline) {
                fprintf(stderr,
                        "inagg bench latency: floor ping: the echo server did not "
                        "answer within %d ms\n",
                        FLOOR_START_MS);
                return -ETIMEDOUT;
            }
            if (refused)
                nanosleep(&(struct timespec){0, FLOOR_NOT_READY_SLEEP_NS}, NULL);
            continue;
        }
        if (++s->lost > s->max_lost) {
            fprintf(stderr, "inagg bench latency: floor ping: %u pings lost, giving up\n", s->lost);
            return -ETIMEDOUT;
        }
    }
}

static int ping_main(const struct sockaddr_in *to, uint32_t host, uint32_t size, uint32_t iters,
                     uint32_t warmup, const char *report_file, const floor_poll_t *fp)
{
    int rc = 1, out = -1;
    ping_state_t s = {.size = size, .host = host, .max_lost = iters / 10u + 10u, .poll = *fp};
    s.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    s.tx = malloc(size);
    s.rx = malloc(size + 1u);
    double *rtt = calloc(iters, sizeof(double));
    if (s.fd < 0 || !s.tx || !s.rx || !rtt ||
        connect(s.fd, (const struct sockaddr *)to, sizeof(*to)) != 0) {
        fprintf(stderr, "inagg bench latency: floor ping: %s\n",
                s.fd < 0 || !s.tx || !s.rx || !rtt ? "out of resources" : strerror(errno));
        goto out;
    }
    s.start_deadline = util_now_ns() + (uint64_t)FLOOR_START_MS * 1000000u;
    for (uint32_t i = 0; i < warmup + iters; i++) {
        double us = one_round_trip(&s, i);
        if (us < 0)
            goto out;
        if (i >= warmup)
            rtt[i - warmup] = us;
    }
    out = open(report_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    floor_report_t rep = {iters, s.lost};
    if (out < 0 || write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep) ||
        write(out, rtt, iters * sizeof(double)) != (ssize_t)(iters * sizeof(double))) {
        fprintf(stderr, "inagg bench latency: floor ping: %s: %s\n", report_file, strerror(errno));
        goto out;
    }
    rc = 0;
out:
    if (out >= 0 && close(out) != 0)
        rc = 1;
    if (s.fd >= 0)
        close(s.fd);
    free(s.tx);
    free(s.rx);
    free(rtt);
    return rc;
}

/* ---- the roles' command line ------------------------------------------------------------ */

/* A hidden role's number flag: an integer in lo..hi, or a message and -EINVAL. */
static int parse_u64_in(const char *flag, const char *text, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(text, &end, 10);
    if (end == text || *end || errno || x < lo || x > hi || text[0] == '-') {
        fprintf(stderr, "inagg bench latency: %s needs an integer in %llu..%llu, got '%s'\n", flag,
                (unsigned long long)lo, (unsigned long long)hi, text);
        return -EINVAL;
    }
    *out = x;
    return 0;
}

static int role_usage(const char *why)
{
    fprintf(stderr,
            "inagg bench latency: %s\n"
            "usage: inagg bench latency --floor-echo HOST:PORT [--floor-life-ms MS]\n"
            "                           [--floor-poll MODE]\n"
            "       inagg bench latency --floor-ping HOST:PORT --floor-size B --floor-host K\n"
            "                           --iters N --warmup W --report-file PATH\n"
            "                           [--floor-poll MODE] [--floor-cpu K (pinned to the\n"
            "                           K-th CPU it may use, modulo their number)]\n",
            why);
    return 2;
}

int bench_floor_role_main(int argc, char **argv)
{
    static const struct option longopts[] = {{"floor-echo", required_argument, 0, 'E'},
                                             {"floor-ping", required_argument, 0, 'P'},
                                             {"floor-size", required_argument, 0, 's'},
                                             {"floor-host", required_argument, 0, 'H'},
                                             {"floor-life-ms", required_argument, 0, 'l'},
                                             {"iters", required_argument, 0, 'k'},
                                             {"warmup", required_argument, 0, 'W'},
                                             {"report-file", required_argument, 0, 'F'},
                                             {"floor-poll", required_argument, 0, 'p'},
                                             {"floor-cpu", required_argument, 0, 'c'},
                                             {0, 0, 0, 0}};
    floor_poll_t fp = {SWITCH_POLL_ADAPTIVE, 0};
    char perr[160];
    const char *echo = NULL, *ping = NULL, *report = NULL;
    uint64_t size = 0, host = 0, iters = 0, warmup = 0, life = FLOOR_SERVER_LIFE_MS;
    uint64_t cpu = UINT64_MAX; /* --floor-cpu: not pinned */
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *f = NULL;
        uint64_t *v = NULL, lo = 0, hi = 0;
        switch (c) {
            case 'E': echo = optarg; break;
            case 'P': ping = optarg; break;
            case 'F': report = optarg; break;
            case 'p':
                if (switch_poll_parse(optarg, &fp.mode, &fp.spin_us, perr, sizeof(perr)) != 0) {
                    fprintf(stderr, "inagg bench latency: --floor-poll: %s\n", perr);
                    return 2;
                }
                break;
            case 's':
                f = "--floor-size";
                v = &size;
                lo = FLOOR_MIN_SIZE;
                hi = FLOOR_MAX_SIZE;
                break;
            case 'H':
                f = "--floor-host";
                v = &host;
                lo = 0;
                hi = UINT32_MAX;
                break;
            case 'l':
                f = "--floor-life-ms";
                v = &life;
                lo = 1;
                hi = FLOOR_SERVER_LIFE_MS;
                break;
            case 'k':
                f = "--iters";
                v = &iters;
                lo = 1;
                hi = FLOOR_MAX_ITERS;
                break;
            case 'W':
                f = "--warmup";
                v = &warmup;
                lo = 0;
                hi = FLOOR_MAX_ITERS;
                break;
            case 'c':
                f = "--floor-cpu";
                v = &cpu;
                lo = 0;
                hi = UINT32_MAX;
                break;
            default: return role_usage("unknown or incomplete option for the floor's roles");
        }
        if (f && parse_u64_in(f, optarg, lo, hi, v))
            return 2;
    }
    if (optind < argc)
        return role_usage("unexpected argument");
    struct sockaddr_in a;
    const char *addr = echo ? echo : ping;
    int prc = netaddr_parse(addr, 0, &a);
    if (prc != 0) {
        char why[160];
        netaddr_explain(addr, prc, why, sizeof(why));
        fprintf(stderr, "inagg bench latency: bad address '%s': %s\n", addr, why);
        return 2;
    }
    if (echo)
        return echo_main(&a, (unsigned)life, &fp);
    if (!size || !iters || !report)
        return role_usage("--floor-ping needs --floor-size, --iters and --report-file");
    signal(SIGPIPE, SIG_IGN);
    int pinned = cpu == UINT64_MAX ? 0 : switch_pin_self_spread((uint32_t)cpu);
    if (pinned < 0) {
        fprintf(stderr, "inagg bench latency: floor ping: cannot pin to CPU %llu: %s\n",
                (unsigned long long)cpu, strerror(-pinned));
        return 1;
    }
    return ping_main(&a, (uint32_t)host, (uint32_t)size, (uint32_t)iters, (uint32_t)warmup, report,
                     &fp);
}

/* ---- the parent ---------------------------------------------------------------------------- */

/* The numbers on client k's command line, as text. */
typedef struct ping_args {
    char host[16], hostno[16], size[16], iters[16], warmup[16], cpu[16];
} ping_args_t;

/* Read client k's report into rtt (its samples appended at *n). 0, or -EPROTO with err set. */
static int take_ping_report(const char *path, uint32_t iters, double *rtt, uint32_t *n,
                            uint32_t *lost, unsigned k, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    floor_report_t rep;
    int ok = fd >= 0 && bench_read_full(fd, &rep, sizeof(rep)) == 0 && rep.samples == iters &&
             bench_read_full(fd, rtt + *n, iters * sizeof(double)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok) {
        return set_err(err, errlen, -EPROTO,
                       "the floor's client in h%u left no complete "
                       "report",
                       k);
    }
    *n += iters;
    *lost += rep.lost;
    return 0;
}

int bench_floor_measure(const launch_tbjob_t *j, const char *self, const bench_floor_spec_t *fs,
                        bench_floor_result_t *out, char *err, size_t errlen)
{
    uint32_t size = fs->size, iters = fs->iters, warmup = fs->warmup;
    const char *echo_poll = fs->echo_poll ? fs->echo_poll : "adaptive";
    const char *ping_poll = fs->ping_poll ? fs->ping_poll : "adaptive";
    const launch_testbed_t *tb = &j->tb;
    unsigned hosts = tb->hosts;
    char listen[48], dir[] = "/tmp/inagg-floor-XXXXXX";
    snprintf(listen, sizeof(listen), "%s:%d", tb->switch_addr, BENCH_FLOOR_PORT);
    memset(out, 0, sizeof(*out));
    if (!mkdtemp(dir)) {
        return set_err(err, errlen, -errno, "a directory for the floor's reports: %s",
                       strerror(errno));
    }
    int rc = -EIO, started = 0, err_fd = memfd_create("inagg-floor-echo", MFD_CLOEXEC);
    pid_t echo = -1;
    launch_group_t *g = malloc(sizeof(*g));
    ping_args_t *args = calloc(hosts, sizeof(*args));
    char(*reports)[PATH_MAX] = calloc(hosts, PATH_MAX);
    double *rtt = calloc((size_t)hosts * iters, sizeof(double));
    if (!g || !args || !reports || !rtt) {
        rc = set_err(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    char *echo_cmd[] = {(char *)self, "bench",        "latency",         "--floor-echo",
                        listen,       "--floor-poll", (char *)echo_poll, NULL};
    char *argv[40];
    launch_testbed_argv(tb, "sw", echo_cmd, argv, 40);
    launch_spec_t spec = {
        argv, NULL, LAUNCH_DEVNULL, LAUNCH_DEVNULL, err_fd >= 0 ? err_fd : LAUNCH_INHERIT, 1, 0};
    echo = launch_spawn(&spec, err, errlen);
    if (echo < 0)
        goto out;
    launch_group_init(g);
    started = 1;
    for (unsigned k = 1; k <= hosts; k++) {
        ping_args_t *a = &args[k - 1];
        snprintf(a->host, sizeof(a->host), "h%u", k);
        snprintf(a->hostno, sizeof(a->hostno), "%u", k);
        snprintf(a->size, sizeof(a->size), "%u", size);
        snprintf(a->iters, sizeof(a->iters), "%u", iters);
        snprintf(a->warmup, sizeof(a->warmup), "%u", warmup);
        snprintf(a->cpu, sizeof(a->cpu), "%u", k - 1);
        snprintf(reports[k - 1], PATH_MAX, "%s/h%u", dir, k);
        char *cmd[] = {(char *)self,
                       "bench",
                       "latency",
                       "--floor-ping",
                       listen,
                       "--floor-host",
                       a->hostno,
                       "--floor-size",
                       a->size,
                       "--iters",
                       a->iters,
                       "--warmup",
                       a->warmup,
                       "--report-file",
                       reports[k - 1],
                       "--floor-poll",
                       (char *)ping_poll,
                       fs->pin_hosts ? "--floor-cpu" : NULL,
                       a->cpu,
                       NULL};
        char e[256];
        if (launch_testbed_argv(tb, a->host, cmd, argv, 40) == 0 ||
            launch_group_add(g, argv, NULL, e, sizeof(e)) < 0) {
            set_err(err, errlen, -ECHILD, "the floor's client in %s could not start", a->host);
            goto out;
        }
    }
    /* start, then each round trip at most a ping timeout per loss; generous on a loaded host */
    unsigned limit_ms = FLOOR_START_MS + 60000u + (warmup + iters) * 2u;
    int wrc = launch_group_wait(g, limit_ms, NULL, NULL, 0);
    uint32_t n = 0;
    for (unsigned k = 1; k <= hosts; k++) {
        char st[96];
        if (wrc == 0 && launch_exit_code(g->p[k - 1].status) == 0 &&
            take_ping_report(reports[k - 1], iters, rtt, &n, &out->lost, k, err, errlen) == 0)
            continue;
        rc = set_err(err, errlen, wrc == -ETIMEDOUT ? -ETIMEDOUT : -EIO,
                     "the floor's client in h%u %s: ", k,
                     wrc == -ETIMEDOUT ? "was killed after the time limit"
                                       : launch_status_text(g->p[k - 1].status, st, sizeof(st)));
        launch_append_tail(err, errlen, g->p[k - 1].tail_len ? g->p[k - 1].tail : "(no stderr)");
        if (err_fd >= 0) {
            char why[512];
            ssize_t m = pread(err_fd, why, sizeof(why) - 1, 0);
            if (m > 0) {
                why[m] = '\0';
                launch_append_tail(err, errlen, " echo server: ");
                launch_append_tail(err, errlen, why);
            }
        }
        goto out;
    }
    bench_sort(rtt, n);
    out->samples = n;
    out->p50_us = bench_percentile(rtt, n, 0.50);
    out->p99_us = bench_percentile(rtt, n, 0.99);
    rc = 0;
out:
    if (started)
        launch_group_end(g);
    if (echo > 0)
        launch_stop(echo, SIGTERM, 5000, NULL);
    if (err_fd >= 0)
        close(err_fd);
    for (unsigned k = 0; reports && k < hosts; k++)
        unlink(reports[k]);
    rmdir(dir);
    free(rtt);
    free(reports);
    free(args);
    free(g);
    return rc;
}
