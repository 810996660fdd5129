/*
 * test_ctl.c - the control protocol line helpers (src/lib/client/ctl.c): key=value lookups
 * (missing keys, keys that prefix or suffix other keys, numeric overflow and signs), the verb
 * test, the free text after the verb, line splitting across partial buffers, and the blocking
 * reader/writer over a socketpair: partial arrival, timeouts with nothing to read, peer close
 * (-ECONNRESET), and writes to a closed or full peer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/client/ctl.h"

static void get_is(const char *line, const char *key, const char *want)
{
    char v[64];
    memset(v, 'q', sizeof(v));
    int rc = ctlline_get(line, key, v, sizeof(v));
    CHECK_MSG(rc == 0, "ctlline_get(\"%s\", \"%s\") = %d", line, key, rc);
    CHECK_MSG(strcmp(v, want) == 0, "ctlline_get(\"%s\", \"%s\") = \"%s\", want \"%s\"", line, key,
              v, want);
}

static void get_missing(const char *line, const char *key)
{
    char v[64] = "untouched";
    int rc = ctlline_get(line, key, v, sizeof(v));
    CHECK_MSG(rc == -ENOENT, "ctlline_get(\"%s\", \"%s\") = %d (\"%s\"), want -ENOENT", line, key,
              rc, v);
}

TEST(ctl_get_values, 5)
{
    const char *joined = "JOINED id=3 token=2882400001 threads=2 port=7000 slots=128 elems=1024";
    get_is(joined, "id", "3");
    get_is(joined, "token", "2882400001");
    get_is(joined, "elems", "1024"); /* last pair, no trailing space */
    get_is(joined, "port", "7000");
    get_missing(joined, "world");
    get_missing(joined, "JOINED"); /* the verb is not a key */
    get_missing(joined, "i"); /* a prefix of a key is not that key */
    get_missing(joined, "slot");
    get_missing(joined, "lots"); /* nor a suffix */
    get_missing(joined, "3"); /* nor a value */
    get_missing(joined, "");
    /* A key that is a prefix of an earlier key, or has it as a suffix. */
    get_is("X slotsx=5 slots=7", "slots", "7");
    get_is("X idle=1 myid=4 id=2", "id", "2");
    get_is("X id=2 idle=1", "idle", "1");
    get_is("X a=b=c", "a", "b=c");
    get_is("X k=", "k", "");
    get_is("X  double=space", "double", "space");
    get_is("X k=first k=second", "k", "first");
    get_missing("id=3", "id"); /* only words after the verb */
    get_missing("VERB", "id");
    get_missing("", "id");
    get_missing("X id", "id"); /* no '=' */
    get_missing("X id =3", "id");
    /* ERR free text: keys may appear but the text is found by ctlline_rest. */
    get_is("JOIN version=1 job=bench rank=0 world=4 slots=128 elems=1024 float=fixed "
           "protocol=switchml",
           "protocol", "switchml");
    /* A value that does not fit is refused, not truncated. */
    char small[4];
    CHECK(ctlline_get("X k=abcd", "k", small, sizeof(small)) != 0);
    CHECK_EQ_INT(ctlline_get("X k=abc", "k", small, sizeof(small)), 0);
    CHECK(strcmp(small, "abc") == 0);
}

TEST(ctl_get_numbers, 5)
{
    uint32_t u = 77;
    uint64_t q = 77;
    CHECK_EQ_INT(ctl_get_u32("X n=0", "n", &u), 0);
    CHECK_EQ_INT(u, 0);
    CHECK_EQ_INT(ctl_get_u32("X n=4294967295", "n", &u), 0);
    CHECK_EQ_INT(u, 4294967295u);
    CHECK_EQ_INT(ctl_get_u32("X n=007", "n", &u), 0); /* decimal, not octal */
    CHECK_EQ_INT(u, 7);
    u = 77;
    CHECK_EQ_INT(ctl_get_u32("X n=4294967296", "n", &u), -ERANGE);
    CHECK_EQ_INT(u, 77);
    CHECK_EQ_INT(ctl_get_u32("X n=99999999999999999999", "n", &u), -EINVAL); /* > 2^64 */
    CHECK_EQ_INT(ctl_get_u32("X n=-1", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=-0", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=abc", "n", &u), -EINVAL);
    /* Digits only: no sign, no leading white space, no wrap-around of a negative number. */
    CHECK_EQ_INT(ctl_get_u32("X n=+5", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=\t-18446744073709551615", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=\t7", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=12abc", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=0x10", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=1.5", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X n=", "n", &u), -EINVAL);
    CHECK_EQ_INT(ctl_get_u32("X m=5", "n", &u), -ENOENT);
    CHECK_EQ_INT(ctl_get_u32("X nn=5", "n", &u), -ENOENT);
    CHECK_EQ_INT(ctl_get_u32("X nn=5 n=6", "n", &u), 0);
    CHECK_EQ_INT(u, 6);
    CHECK_EQ_INT(u, 6);

    CHECK_EQ_INT(ctl_get_u64("X t=18446744073709551615", "t", &q), 0);
    CHECK(q == UINT64_MAX);
    CHECK_EQ_INT(ctl_get_u64("X t=4294967296", "t", &q), 0);
    CHECK(q == 4294967296ull);
    q = 77;
    CHECK_EQ_INT(ctl_get_u64("X t=18446744073709551616", "t", &q), -EINVAL);
    CHECK_EQ_INT(ctl_get_u64("X t=-1", "t", &q), -EINVAL);
    CHECK_EQ_INT(ctl_get_u64("X t=-18446744073709551615", "t", &q), -EINVAL);
    CHECK_EQ_INT(ctl_get_u64("X t=x1", "t", &q), -EINVAL);
    CHECK_EQ_INT(ctl_get_u64("X t=1 ", "t", &q), 0); /* the value ends at the space */
    CHECK(q == 1);
    q = 77;
    CHECK_EQ_INT(ctl_get_u64("X", "t", &q), -ENOENT);
    CHECK(q == 77);
    /* A value longer than any u64 is refused (whatever the code). */
    CHECK(ctl_get_u64("X t=000000000000000000000000000000000000001", "t", &q) != 0);
    CHECK(q == 77);
}

TEST(ctl_is_and_rest, 5)
{
    CHECK(ctlline_is("JOIN version=1 job=x", "JOIN"));
    CHECK(ctlline_is("JOIN", "JOIN"));
    CHECK(!ctlline_is("JOINED id=3", "JOIN"));
    CHECK(!ctlline_is("JOI", "JOIN"));
    CHECK(!ctlline_is("", "JOIN"));
    CHECK(!ctlline_is("join x=1", "JOIN"));
    CHECK(!ctlline_is(" JOIN", "JOIN"));
    CHECK(ctlline_is("ERR refused pool exhausted", "ERR"));
    CHECK(!ctlline_is("ERROR x", "ERR"));

    CHECK(strcmp(ctlline_rest("ERR refused pool exhausted: job asks 512 slots, 100 of 8192 free"),
                 "refused pool exhausted: job asks 512 slots, 100 of 8192 free") == 0);
    CHECK(strcmp(ctlline_rest("FAILED rank 2 timed out"), "rank 2 timed out") == 0);
    CHECK(strcmp(ctlline_rest("ERR"), "") == 0);
    CHECK(strcmp(ctlline_rest("ERR "), "") == 0);
    CHECK(strcmp(ctlline_rest(""), "") == 0);
    CHECK(strcmp(ctlline_rest("ERR  two spaces"), " two spaces") == 0);
}

static void feed(ctl_reader_t *r, const char *s)
{
    size_t n = strlen(s);
    CHECK(r->len + n <= sizeof(r->buf));
    memcpy(r->buf + r->len, s, n);
    r->len += n;
}

TEST(ctl_take_line_partial_buffers, 5)
{
    ctl_reader_t r;
    memset(&r, 0, sizeof(r));
    char line[CTL_LINE_MAX + 1];
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 0);
    feed(&r, "JOIN ver");
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 0);
    CHECK_EQ_INT(r.len, 8); /* nothing consumed */
    feed(&r, "sion=1 rank=0");
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 0);
    feed(&r, "\nSTART seq=1\nST");
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "JOIN version=1 rank=0") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "START seq=1") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 0);
    CHECK_EQ_INT(r.len, 2);
    CHECK(memcmp(r.buf, "ST", 2) == 0);
    /* CRLF endings lose the CR; empty lines are lines. */
    feed(&r, "OP\r\n\n\r\nLAST\n");
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "STOP") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "LAST") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 0);
    CHECK_EQ_INT(r.len, 0);
    /* A line longer than the caller's buffer is truncated and consumed whole. */
    feed(&r, "ABCDEFGHIJ k=v\nNEXT\n");
    char small[6];
    CHECK_EQ_INT(ctl_take_line(&r, small, sizeof(small)), 1);
    CHECK(strcmp(small, "ABCDE") == 0);
    CHECK_EQ_INT(ctl_take_line(&r, small, sizeof(small)), 1);
    CHECK(strcmp(small, "NEXT") == 0);
    CHECK_EQ_INT(r.len, 0);
    /* Byte by byte. */
    const char *msg = "RESULT ok=1 n=42\n";
    for (size_t i = 0; msg[i]; i++) {
        char one[2] = {msg[i], 0};
        CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 0);
        feed(&r, one);
    }
    CHECK_EQ_INT(ctl_take_line(&r, line, sizeof(line)), 1);
    CHECK(strcmp(line, "RESULT ok=1 n=42") == 0);
}

static double now_ms(void) { return (double)util_now_ns() / 1e6; }

static void pair(int sv[2]) { CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0); }

static void raw_send(int fd, const char *s)
{
    size_t n = strlen(s);
    CHECK_EQ_INT(send(fd, s, n, MSG_NOSIGNAL), (long long)n);
}

TEST(ctl_read_line_socketpair, 10)
{
    int sv[2];
    pair(sv);
    ctl_reader_t r;
    memset(&r, 0, sizeof(r));
    char line[CTL_LINE_MAX + 1];

    /* Nothing arrives: times out after about 100 ms. */
    double t0 = now_ms();
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 100), -ETIMEDOUT);
    double dt = now_ms() - t0;
    CHECK_MSG(dt >= 95 && dt < 1000, "timeout took %.1f ms", dt);
    /* A partial line is kept across the timeout, completed later. */
    raw_send(sv[1], "HEL");
    t0 = now_ms();
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 50), -ETIMEDOUT);
    dt = now_ms() - t0;
    CHECK_MSG(dt >= 45 && dt < 1000, "timeout took %.1f ms", dt);
    CHECK_EQ_INT(r.len, 3);
    raw_send(sv[1], "LO x=1\nSECOND\nTHI");
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), 0);
    CHECK(strcmp(line, "HELLO x=1") == 0);
    /* The second line is already buffered: no wait. */
    t0 = now_ms();
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), 0);
    CHECK(strcmp(line, "SECOND") == 0);
    CHECK(now_ms() - t0 < 50);
    /* Zero timeout with nothing complete: immediate -ETIMEDOUT. */
    t0 = now_ms();
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 0), -ETIMEDOUT);
    CHECK(now_ms() - t0 < 50);

    /* ctl_write_line on the other end appends the newline. */
    CHECK_EQ_INT(ctl_write_line(sv[1], "RD x=2", 1000), 0);
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), 0);
    CHECK(strcmp(line, "THIRD x=2") == 0);
    CHECK_EQ_INT(ctl_write_line(sv[0], "BACK", 1000), 0);
    char raw[16] = {0};
    CHECK_EQ_INT(recv(sv[1], raw, sizeof(raw), 0), 5);
    CHECK(memcmp(raw, "BACK\n", 5) == 0);
    CHECK_EQ_INT(ctl_write_line(sv[0], "", 1000), 0);
    CHECK_EQ_INT(recv(sv[1], raw, sizeof(raw), 0), 1);
    CHECK_EQ_INT(raw[0], '\n');

    /* Lines already sent are delivered after the peer closes, then -ECONNRESET. */
    raw_send(sv[1], "A\nB\npartial");
    close(sv[1]);
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), 0);
    CHECK(strcmp(line, "A") == 0);
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), 0);
    CHECK(strcmp(line, "B") == 0);
    t0 = now_ms();
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), -ECONNRESET);
    CHECK(now_ms() - t0 < 500); /* EOF is noticed at once, not at the deadline */
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), -ECONNRESET);
    close(sv[0]);

    /* Peer closes while the reader waits on an empty buffer. */
    pair(sv);
    memset(&r, 0, sizeof(r));
    close(sv[1]);
    CHECK_EQ_INT(ctl_read_line(sv[0], &r, line, sizeof(line), 1000), -ECONNRESET);
    close(sv[0]);
}

TEST(ctl_read_line_overlong_and_fill, 10)
{
    int sv[2];
    pair(sv);
    ctl_reader_t r;
    memset(&r, 0, sizeof(r));
    char line[CTL_LINE_MAX + 1];
    /* ctl_fill: -EAGAIN with nothing there, bytes read otherwise, 0 at EOF. */
    CHECK_EQ_INT(ctl_fill(sv[0], &r), -EAGAIN);
    raw_send(sv[1], "abc");
    CHECK_EQ_INT(ctl_fill(sv[0], &r), 3);
    CHECK_EQ_INT(r.len, 3);
    /* More than the reader's buffer without a newline: -EMSGSIZE, not a hang. */
    static char junk[5 * CTL_LINE_MAX];
    memset(junk, 'j', sizeof(junk));
    CHECK_EQ_INT(send(sv[1], junk, sizeof(junk), MSG_NOSIGNAL), (long long)sizeof(junk));
    int rc = ctl_read_line(sv[0], &r, line, sizeof(line), 1000);
    CHECK_EQ_INT(rc, -EMSGSIZE);
    CHECK_EQ_INT(r.len, sizeof(r.buf));
    CHECK_EQ_INT(ctl_fill(sv[0], &r), -EMSGSIZE);
    close(sv[0]);
    close(sv[1]);

    pair(sv);
    memset(&r, 0, sizeof(r));
    close(sv[1]);
    CHECK_EQ_INT(ctl_fill(sv[0], &r), 0);
    close(sv[0]);
}

TEST(ctl_write_line_errors, 10)
{
    signal(SIGPIPE, SIG_IGN); /* belt and braces: the writer uses MSG_NOSIGNAL */
    int sv[2];
    pair(sv);
    /* Too long for a line. */
    static char longline[CTL_LINE_MAX + 2];
    memset(longline, 'x', CTL_LINE_MAX + 1);
    longline[CTL_LINE_MAX + 1] = '\0';
    CHECK_EQ_INT(ctl_write_line(sv[0], longline, 100), -EMSGSIZE);
    longline[CTL_LINE_MAX] = '\0'; /* exactly CTL_LINE_MAX is fine */
    CHECK_EQ_INT(ctl_write_line(sv[0], longline, 1000), 0);
    ctl_reader_t r;
    memset(&r, 0, sizeof(r));
    static char line[CTL_LINE_MAX + 1];
    CHECK_EQ_INT(ctl_read_line(sv[1], &r, line, sizeof(line), 1000), 0);
    CHECK_EQ_INT(strlen(line), CTL_LINE_MAX);

    /* Peer never reads: the socket fills and the write times out, bounded. */
    int fl = fcntl(sv[0], F_GETFL);
    CHECK(fcntl(sv[0], F_SETFL, fl | O_NONBLOCK) == 0);
    char chunk[4096];
    memset(chunk, 'f', sizeof(chunk));
    long total = 0;
    for (;;) {
        ssize_t w = send(sv[0], chunk, sizeof(chunk), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            break;
        }
        total += w;
        CHECK(total < (64L << 20));
    }
    for (;;) { /* then the last few bytes of room */
        ssize_t w = send(sv[0], chunk, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
            break;
        }
        total += w;
        CHECK(total < (64L << 20));
    }
    double t0 = now_ms();
    CHECK_EQ_INT(ctl_write_line(sv[0], "BLOCKED", 100), -ETIMEDOUT);
    double dt = now_ms() - t0;
    CHECK_MSG(dt >= 95 && dt < 1000, "write timeout took %.1f ms", dt);

    /* Peer closed: an error (EPIPE or ECONNRESET), no signal, no hang. */
    close(sv[1]);
    int rc = ctl_write_line(sv[0], "HELLO", 1000);
    CHECK_MSG(rc == -EPIPE || rc == -ECONNRESET, "write to closed peer: %d", rc);
    close(sv[0]);
}

TEST(ctl_listen_and_connect_by_text, 10)
{
    int lfd = ctl_listen("127.0.0.1:0");
    CHECK(lfd >= 0);
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    CHECK(getsockname(lfd, (struct sockaddr *)&a, &len) == 0);
    char text[64];
    snprintf(text, sizeof(text), "localhost:%u", (unsigned)ntohs(a.sin_port));
    int fd = ctl_connect_to(text, 2000);
    CHECK_MSG(fd >= 0, "connect to %s: %d", text, fd);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    CHECK(poll(&p, 1, 2000) == 1);
    int sfd = accept(lfd, NULL, NULL);
    CHECK(sfd >= 0);
    CHECK_EQ_INT(ctl_write_line(fd, "HELLO", 1000), 0);
    ctl_reader_t rd = {0};
    char line[CTL_LINE_MAX];
    CHECK_EQ_INT(ctl_read_line(sfd, &rd, line, sizeof(line), 2000), 0);
    CHECK(strcmp(line, "HELLO") == 0);
    close(sfd);
    close(fd);
    /* The same port again while it is taken; bad texts. */
    CHECK_EQ_INT(ctl_listen(text), -EADDRINUSE);
    close(lfd);
    CHECK_EQ_INT(ctl_listen("127.0.0.1"), -EINVAL);
    CHECK_EQ_INT(ctl_connect_to("127.0.0.1:99999", 100), -EINVAL);
    CHECK_EQ_INT(ctl_connect_to("", 100), -EINVAL);
}

/* The bounded writer: a peer that does not read fills it to its limit, never blocks the
 * writer, and gets every queued byte, in order, once it reads. */
TEST(ctl_writer_bounded_and_ordered, 10)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    ctl_writer_t w = {.max = 64 * 1024};
    char line[64];
    int queued = 0, rc = 0;
    uint64_t t0 = util_now_ns();
    for (; queued < 100000; queued++) {
        snprintf(line, sizeof(line), "line %06d", queued);
        rc = ctl_queue_line(&w, line);
        if (rc != 0)
            break;
        CHECK(ctl_flush(sv[0], &w) >= 0);
    }
    CHECK_EQ_INT(rc, -ENOBUFS);
    CHECK(w.len > 0 && w.len <= w.max && w.since_ns != 0);
    CHECK((util_now_ns() - t0) < 2000000000ull); /* never waited on the peer */
    CHECK_EQ_INT(ctl_queue_line(&w, "line 999999"), -ENOBUFS);
    char big[CTL_LINE_MAX + 2];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    ctl_writer_t w2 = {.max = 1 << 20};
    CHECK_EQ_INT(ctl_queue_line(&w2, big), -EMSGSIZE);
    ctl_writer_free(&w2);
    /* The peer reads everything: every line arrives once, in order. */
    ctl_reader_t rd = {0};
    char got[CTL_LINE_MAX];
    for (int i = 0; i < queued; i++) {
        CHECK(ctl_flush(sv[0], &w) >= 0);
        CHECK_EQ_INT(ctl_read_line(sv[1], &rd, got, sizeof(got), 2000), 0);
        snprintf(line, sizeof(line), "line %06d", i);
        CHECK_MSG(strcmp(got, line) == 0, "got '%s' want '%s'", got, line);
    }
    CHECK_EQ_INT(w.len, 0);
    CHECK_EQ_INT(w.since_ns, 0);
    close(sv[1]);
    CHECK(ctl_queue_line(&w, "after close") == 0);
    long fr = ctl_flush(sv[0], &w);
    CHECK_MSG(fr == -EPIPE || fr == -ECONNRESET, "%ld", fr);
    ctl_writer_free(&w);
    close(sv[0]);
}
