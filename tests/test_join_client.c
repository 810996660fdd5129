/*
 * test_join_client.c - the one JOIN client (src/lib/client/join_client.c) against a scripted
 * switch on loopback: transient refusals ("busy") retried on new connections until JOINED,
 * a final refusal not retried, retries bounded by retry_ms with the attempts named, a stop
 * flag ending a wait for an answer, and the secret's handshake (HELLO, CHALLENGE, the
 * verifier in the JOIN, the dataplane keys once JOINED says dpauth=1).
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/util.h"
#include "lib/client/join_client.h"
#include "lib/wire/auth.h"

/* The scripted switch: for connection number `conn` (from 0) and the line it got, the answer
 * (NULL: none, the connection stays silent). */
typedef const char *(*script_fn)(uint32_t conn, const char *line);

typedef struct fake_switch {
    int lfd;
    char addr[32];
    script_fn script;
    atomic_int stop;
    uint32_t conns;
    char last_join[CTL_LINE_MAX];
    pthread_t tid;
} fake_switch_t;

static void serve_conn(fake_switch_t *fs, int fd)
{
    ctl_reader_t rd = {.len = 0};
    char line[CTL_LINE_MAX];
    while (!atomic_load(&fs->stop)) {
        int rc = ctl_read_line(fd, &rd, line, sizeof(line), 100);
        if (rc == -ETIMEDOUT)
            continue;
        if (rc != 0)
            return;
        if (strncmp(line, "JOIN ", 5) == 0)
            snprintf(fs->last_join, sizeof(fs->last_join), "%s", line);
        const char *answer = fs->script(fs->conns - 1, line);
        if (answer && ctl_write_line(fd, answer, 1000) != 0)
            return;
    }
}

static void *fake_main(void *arg)
{
    fake_switch_t *fs = arg;
    while (!atomic_load(&fs->stop)) {
        struct pollfd p = {.fd = fs->lfd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0)
            continue;
        int fd = accept(fs->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        fs->conns++;
        serve_conn(fs, fd);
        close(fd);
    }
    return NULL;
}

static void fake_start(fake_switch_t *fs, script_fn script)
{
    memset(fs, 0, sizeof(*fs));
    fs->script = script;
    fs->lfd = ctl_listen("127.0.0.1:0");
    CHECK_MSG(fs->lfd >= 0, "listen: %d", fs->lfd);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    CHECK(getsockname(fs->lfd, (struct sockaddr *)&a, &len) == 0);
    snprintf(fs->addr, sizeof(fs->addr), "127.0.0.1:%u", ntohs(a.sin_port));
    CHECK(pthread_create(&fs->tid, NULL, fake_main, fs) == 0);
}

static void fake_stop(fake_switch_t *fs)
{
    atomic_store(&fs->stop, 1);
    pthread_join(fs->tid, NULL);
    close(fs->lfd);
}

static const char *joined_line(int dpauth)
{
    static char line[CTL_LINE_MAX];
    wire_joined_t j = {.token = 77,
                       .id = 3,
                       .threads = 1,
                       .port = 7000,
                       .base = 0,
                       .slots = 4,
                       .elems = 64,
                       .dpauth = (uint32_t)dpauth};
    CHECK(wire_joined_format(&j, line, sizeof(line)) == 0);
    return line;
}

static join_request_t request(const char *addr, uint32_t retry_ms)
{
    join_request_t rq = {
        .addr = addr,
        .join = {.version = INAGG_PROTOCOL_VERSION,
                 .rank = 0,
                 .world = 1,
                 .slots = 4,
                 .elems = 64,
                 .timeout_ms = 2000},
        .block_ms = 2000,
        .answer_ms = 2000,
        .retry_ms = retry_ms,
    };
    snprintf(rq.join.job, sizeof(rq.join.job), "jc");
    return rq;
}

static const char *busy_twice(uint32_t conn, const char *line)
{
    (void)line;
    return conn < 2 ? "ERR busy too many jobs" : joined_line(0);
}

/* Start a fake switch answering with `script` and run the client against it with `retry_ms`
 * to retry; the client's return code, its answer in *a and its message in err. */
static int join_fake(fake_switch_t *fs, script_fn script, uint32_t retry_ms, join_answer_t *a,
                     char *err, size_t errlen)
{
    fake_start(fs, script);
    join_request_t rq = request(fs->addr, retry_ms);
    ctl_reader_t rd;
    return join_client_run(&rq, &rd, a, err, errlen);
}

TEST(join_client_retries_busy_until_joined, 20)
{
    fake_switch_t fs;
    join_answer_t a;
    char err[256] = "";
    int rc = join_fake(&fs, busy_twice, 5000, &a, err, sizeof(err));
    CHECK_MSG(rc == 0, "rc %d: %s", rc, err);
    CHECK_EQ_INT(a.attempts, 3);
    CHECK(a.fd >= 0 && a.joined.id == 3 && a.joined.token == 77 && !a.keyed);
    close(a.fd);
    fake_stop(&fs);
}

static const char *refused(uint32_t conn, const char *line)
{
    (void)conn, (void)line;
    return "ERR refused rank 0 of job 'jc' is taken";
}

TEST(join_client_final_refusal_not_retried, 20)
{
    fake_switch_t fs;
    join_answer_t a;
    char err[256] = "";
    int rc = join_fake(&fs, refused, 5000, &a, err, sizeof(err));
    CHECK_MSG(rc == -ECONNREFUSED, "rc %d: %s", rc, err);
    CHECK_EQ_INT(a.attempts, 1);
    CHECK_EQ_INT(a.refusal, WIRE_REFUSED);
    CHECK(a.fd == -1 && strstr(err, "is taken"));
    fake_stop(&fs);
}

static const char *always_busy(uint32_t conn, const char *line)
{
    (void)conn, (void)line;
    return "ERR busy pool exhausted";
}

TEST(join_client_busy_retries_bounded_by_retry_ms, 20)
{
    fake_switch_t fs;
    join_answer_t a;
    char err[256] = "";
    uint64_t t0 = util_now_ns();
    int rc = join_fake(&fs, always_busy, 300, &a, err, sizeof(err));
    double s = (double)(util_now_ns() - t0) / 1e9;
    CHECK_MSG(rc == -ECONNREFUSED && a.refusal == WIRE_REFUSED_BUSY, "rc %d: %s", rc, err);
    CHECK_MSG(a.attempts > 2 && s < 1.5, "%u attempts in %.2f s", a.attempts, s);
    CHECK_MSG(strstr(err, "still refused after") && strstr(err, "300 ms"), "%s", err);
    fake_stop(&fs);
}

static const char *silent(uint32_t conn, const char *line)
{
    (void)conn, (void)line;
    return NULL;
}

static void *stop_later(void *arg)
{
    usleep(200000);
    atomic_store((atomic_int *)arg, 1);
    return NULL;
}

TEST(join_client_stop_ends_the_wait, 20)
{
    fake_switch_t fs;
    fake_start(&fs, silent);
    atomic_int stop = 0;
    join_request_t rq = request(fs.addr, 0);
    rq.answer_ms = 10000;
    rq.stop = &stop;
    pthread_t tid;
    CHECK(pthread_create(&tid, NULL, stop_later, &stop) == 0);
    ctl_reader_t rd;
    join_answer_t a;
    char err[256] = "";
    uint64_t t0 = util_now_ns();
    int rc = join_client_run(&rq, &rd, &a, err, sizeof(err));
    double s = (double)(util_now_ns() - t0) / 1e9;
    pthread_join(tid, NULL);
    CHECK_MSG(rc == -ECANCELED && s < 1.0, "rc %d after %.2f s: %s", rc, s, err);
    fake_stop(&fs);
}

static const char *with_secret(uint32_t conn, const char *line)
{
    (void)conn;
    if (strncmp(line, "HELLO ", 6) == 0)
        return "CHALLENGE nonce=000102030405060708090a0b0c0d0e0f job=new";
    return joined_line(1);
}

TEST(join_client_secret_handshake_keys_the_dataplane, 20)
{
    fake_switch_t fs;
    fake_start(&fs, with_secret);
    uint8_t v[SHA256_BYTES];
    wire_auth_verifier("s3cret", 6, "jc", v);
    join_request_t rq = request(fs.addr, 0);
    rq.verifier = v;
    ctl_reader_t rd;
    join_answer_t a;
    char err[256] = "";
    int rc = join_client_run(&rq, &rd, &a, err, sizeof(err));
    CHECK_MSG(rc == 0, "rc %d: %s", rc, err);
    CHECK_MSG(strstr(fs.last_join, " verifier="), "JOIN: %s", fs.last_join);
    CHECK(a.keyed && a.joined.dpauth);
    dpauth_keys_t want;
    const uint8_t nonce[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    dpauth_derive(v, nonce, "jc", 0, &want);
    dpauth_bind_job(&want, 77);
    CHECK(memcmp(&want, &a.keys, sizeof(want)) == 0);
    close(a.fd);

    /* dataplane authentication turned off here, but the job asks for it: no keys, an error */
    rq = request(fs.addr, 0);
    rq.verifier = v;
    rq.join.no_dpauth = 1;
    rc = join_client_run(&rq, &rd, &a, err, sizeof(err));
    CHECK_MSG(rc == -EPROTO && strstr(err, "no keys"), "rc %d: %s", rc, err);
    fake_stop(&fs);
}
