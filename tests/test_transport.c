/*
 * test_transport.c - the transport interface over loopback UDP: batches in both directions,
 * gather sends, queue addresses, the receive sleep, waiting on several endpoints, opaque
 * addresses, and fault injection as a wrapping transport.
 */
#include <errno.h>
#include <string.h>

#include "harness.h"
#include "lib/base/util.h"
#include "lib/transport/transport.h"

static transport_t *open_ep(const char *bind, uint32_t queue, const char *faults)
{
    transport_config_t cfg = {.kind = "udp",
                              .bind = bind,
                              .queue = queue,
                              .buffer_bytes = 1 << 20,
                              .faults = faults,
                              .fault_stream = 3};
    transport_t *t = NULL;
    char err[160] = "";
    int rc = transport_open(&cfg, &t, err, sizeof(err));
    CHECK_MSG(rc == 0 && t, "transport_open: %d %s", rc, err);
    return t;
}

/* Receive until `want` packets came or 2 s passed; returns how many. */
static int recv_all(transport_t *t, transport_rx_t *rx, uint8_t (*copy)[64], int want)
{
    int got = 0;
    uint64_t end = util_now_ns() + 2000000000ull;
    while (got < want && util_now_ns() < end) {
        transport_rx_t batch[64];
        int n = transport_recv(t, batch, 64, 50);
        CHECK(n >= 0);
        for (int i = 0; i < n && got < want; i++) {
            rx[got] = batch[i];
            memcpy(copy[got], batch[i].data, batch[i].len < 64 ? batch[i].len : 64);
            got++;
        }
    }
    return got;
}

TEST(transport_udp_gather_batches_and_sources, 10)
{
    transport_t *sw = open_ep("127.0.0.1:0", 0, NULL);
    transport_t *wk = open_ep(NULL, 0, NULL);
    transport_addr_t q0, from_wk;
    CHECK(transport_local_addr(sw, &q0) == 0);
    CHECK(transport_addr_port(&q0) != 0);
    CHECK(transport_local_addr(wk, &from_wk) == 0);

    enum { N = 100 };
    transport_tx_t tx[N];
    uint8_t heads[N][4];
    const char body[] = "payload";
    for (int i = 0; i < N; i++) {
        memcpy(heads[i], &i, 4);
        tx[i] = (transport_tx_t){.head = heads[i],
                                 .head_len = 4,
                                 .body = body,
                                 .body_len = (uint32_t)(i % 2 ? sizeof(body) : 0),
                                 .to = q0};
    }
    CHECK_EQ_INT(transport_send(wk, tx, N, 100), N);
    static transport_rx_t rx[N];
    static uint8_t copy[N][64];
    CHECK_EQ_INT(recv_all(sw, rx, copy, N), N);
    for (int i = 0; i < N; i++) {
        int idx;
        memcpy(&idx, copy[i], 4);
        CHECK_EQ_INT(idx, i); /* loopback keeps order */
        CHECK_EQ_INT(rx[i].len, 4 + (i % 2 ? sizeof(body) : 0));
        if (i % 2)
            CHECK(memcmp(copy[i] + 4, body, sizeof(body)) == 0);
        CHECK_EQ_INT(transport_addr_port(&rx[i].from), transport_addr_port(&from_wk));
        CHECK(transport_addr_equal(&rx[i].from, &rx[0].from));
    }
    /* Answer to the source address the switch saw. */
    transport_tx_t back = {.head = "ok", .head_len = 2, .to = rx[0].from};
    CHECK_EQ_INT(transport_send(sw, &back, 1, 100), 1);
    transport_rx_t r1[1];
    uint8_t c1[1][64];
    CHECK_EQ_INT(recv_all(wk, r1, c1, 1), 1);
    CHECK(memcmp(c1[0], "ok", 2) == 0);
    CHECK(transport_addr_equal(&r1[0].from, &q0) ||
          transport_addr_port(&r1[0].from) == transport_addr_port(&q0));
    /* Nothing more: a zero timeout returns at once. */
    CHECK_EQ_INT(transport_recv(wk, r1, 1, 0), 0);
    transport_close(sw);
    transport_close(wk);
}

TEST(transport_udp_queues_are_ports, 10)
{
    transport_t *q0 = open_ep("127.0.0.1:0", 0, NULL);
    transport_addr_t a0, a2;
    CHECK(transport_local_addr(q0, &a0) == 0);
    char bind[64];
    snprintf(bind, sizeof(bind), "127.0.0.1:%u", transport_addr_port(&a0));
    transport_t *q2 = NULL;
    transport_config_t cfg = {.bind = bind, .queue = 2};
    char err[160];
    int rc = transport_open(&cfg, &q2, err, sizeof(err));
    if (rc == -EADDRINUSE) { /* someone holds port + 2: not this test's subject */
        transport_close(q0);
        SKIP("port + 2 is taken on this machine");
    }
    CHECK_MSG(rc == 0, "%s", err);
    CHECK(transport_local_addr(q2, &a2) == 0);
    CHECK_EQ_INT(transport_addr_port(&a2), transport_addr_port(&a0) + 2);
    transport_addr_t computed;
    CHECK(transport_queue_addr(q0, &a0, 2, &computed) == 0);
    CHECK(transport_addr_equal(&computed, &a2));
    char text[64];
    transport_addr_format(&computed, text, sizeof(text));
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%u", transport_addr_port(&a2));
    CHECK_MSG(strcmp(text, want) == 0, "formatted '%s', want '%s'", text, want);
    /* The slot rule: slot s of a job based at queue b of n. */
    CHECK_EQ_INT(transport_slot_queue(1, 3, 0), 1);
    CHECK_EQ_INT(transport_slot_queue(1, 3, 2), 0);
    CHECK_EQ_INT(transport_slot_queue(0, 1, 99), 0);
    transport_close(q0);
    transport_close(q2);
}

TEST(transport_open_errors_say_why, 10)
{
    transport_t *t = (transport_t *)1;
    char err[160] = "";
    transport_config_t bad_kind = {.kind = "carrier-pigeon"};
    CHECK(transport_open(&bad_kind, &t, err, sizeof(err)) == -EINVAL && !t);
    CHECK(strstr(err, "carrier-pigeon") != NULL);
    transport_config_t bad_addr = {.bind = "not an address"};
    err[0] = '\0';
    CHECK(transport_open(&bad_addr, &t, err, sizeof(err)) < 0 && !t && err[0]);
    transport_config_t bad_faults = {.faults = "drop=7"};
    err[0] = '\0';
    CHECK(transport_open(&bad_faults, &t, err, sizeof(err)) == -EINVAL && !t);
    CHECK(strstr(err, "fault") != NULL);
    transport_addr_t a;
    CHECK(transport_parse_addr("udp", "127.0.0.1", &a) != 0); /* no port */
    CHECK(transport_parse_addr("udp", "127.0.0.1:70000", &a) != 0);
    CHECK(transport_parse_addr("nope", "127.0.0.1:7", &a) != 0);
    CHECK(transport_parse_addr("udp", "localhost:7000", &a) == 0);
    CHECK_EQ_INT(transport_addr_port(&a), 7000);
    transport_addr_set_port(&a, 7001);
    CHECK_EQ_INT(transport_addr_port(&a), 7001);
    transport_addr_t none = {0};
    CHECK(!transport_addr_is_set(&none) && transport_addr_is_set(&a));
    CHECK(!transport_addr_equal(&none, &a));
}

TEST(transport_wait_ready_and_sleep, 10)
{
    transport_t *a = open_ep(NULL, 0, NULL), *b = open_ep(NULL, 0, NULL);
    transport_t *both[2] = {a, b};
    uint64_t t0 = util_now_ns();
    CHECK_EQ_INT(transport_wait_ready(both, 2, 30), 0);
    CHECK(util_now_ns() - t0 >= 25000000ull);
    transport_addr_t ab;
    CHECK(transport_local_addr(b, &ab) == 0);
    transport_addr_t to;
    CHECK(transport_parse_addr("udp", "127.0.0.1:1", &to) == 0);
    transport_addr_set_port(&to, transport_addr_port(&ab));
    transport_tx_t p = {.head = "x", .head_len = 1, .to = to};
    CHECK_EQ_INT(transport_send(a, &p, 1, 100), 1);
    CHECK_EQ_INT(transport_wait_ready(both, 2, 1000), 2); /* b only */
    transport_t *only_a[2] = {a, NULL};
    CHECK_EQ_INT(transport_wait_ready(only_a, 2, 0), 0); /* a has nothing; NULL skipped */

    /* A sleeping receiver wakes on the first packet and times out on its own. */
    transport_config_t cfg = {.bind = "127.0.0.1:0", .sleep_ms = 40};
    transport_t *s = NULL;
    char err[160];
    CHECK(transport_open(&cfg, &s, err, sizeof(err)) == 0);
    transport_rx_t rx[4];
    t0 = util_now_ns();
    CHECK_EQ_INT(transport_recv(s, rx, 4, 40), 0);
    uint64_t waited = util_now_ns() - t0;
    CHECK_MSG(waited >= 30000000ull && waited < 1000000000ull, "slept %llu ns",
              (unsigned long long)waited);
    transport_addr_t sa;
    CHECK(transport_local_addr(s, &sa) == 0);
    transport_addr_set_port(&to, transport_addr_port(&sa));
    p.to = to;
    CHECK_EQ_INT(transport_send(a, &p, 1, 100), 1);
    CHECK_EQ_INT(transport_recv(s, rx, 4, 40), 1);
    transport_close(a);
    transport_close(b);
    transport_close(s);
}

/* The faulty transport in front of UDP: every decision is counted, the survivors arrive
 * intact, duplicates twice, and a reordered packet overtaken. */
TEST(transport_faulty_wraps_udp, 20)
{
    transport_t *rx_ep = open_ep("127.0.0.1:0", 0, NULL);
    transport_t *tx_ep = open_ep(NULL, 0, "drop=0.1,dup=0.1,reorder=0.1,seed=5");
    transport_addr_t to;
    CHECK(transport_local_addr(rx_ep, &to) == 0);
    enum { N = 2000 };
    static int seen[N];
    int got = 0, out_of_order = 0, last = -1;
    for (int i = 0; i < N; i += 20) {
        transport_tx_t tx[20];
        int ids[20];
        for (int k = 0; k < 20; k++) {
            ids[k] = i + k;
            tx[k] = (transport_tx_t){.head = &ids[k], .head_len = 4, .to = to};
        }
        CHECK_EQ_INT(transport_send(tx_ep, tx, 20, 100), 20);
        transport_rx_t rx[64];
        int n;
        while ((n = transport_recv(rx_ep, rx, 64, 20)) > 0)
            for (int k = 0; k < n; k++) {
                int id;
                CHECK_EQ_INT(rx[k].len, 4);
                memcpy(&id, rx[k].data, 4);
                CHECK(id >= 0 && id < N);
                seen[id]++;
                got++;
                out_of_order += id < last;
                last = id;
            }
    }
    uint64_t d, u, r, d0, u0, r0;
    transport_fault_counts(tx_ep, &d, &u, &r);
    transport_fault_counts(rx_ep, &d0, &u0, &r0);
    CHECK(d0 == 0 && u0 == 0 && r0 == 0); /* an unwrapped endpoint decides nothing */
    CHECK_MSG(d > 100 && u > 100 && r > 50, "dropped %llu, duplicated %llu, reordered %llu",
              (unsigned long long)d, (unsigned long long)u, (unsigned long long)r);
    int zeros = 0, twos = 0;
    for (int i = 0; i < N; i++) {
        CHECK(seen[i] <= 2);
        zeros += seen[i] == 0;
        twos += seen[i] == 2;
    }
    /* At most the one packet still held is missing beyond the drops. */
    CHECK_MSG(zeros == (int)d || zeros == (int)d + 1, "missing %d, dropped %llu", zeros,
              (unsigned long long)d);
    CHECK_EQ_INT(twos, u);
    CHECK(out_of_order > 0);
    CHECK_EQ_INT(got, N - zeros + twos);
    transport_close(tx_ep);
    transport_close(rx_ep);
}
