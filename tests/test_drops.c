/*
 * test_drops.c - the switch's per-packet range checks (PROTOCOL.md 1.3, src/switchd/server/dataplane.c)
 * seen from a worker that holds the job's real id and token: packets with a bad rank, slot,
 * count, thread, packet type (protocol; switchml jobs, as p4sgd takes both types a worker
 * sends) and element type each pass the token check and are counted under their own reason,
 * exactly as many as were sent, while the job's int32 result stays exact, for both protocols. A removed or reordered check shows up here as a wrong count or a wrong sum.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"
#include "inagg.h"
#include "lib/base/netaddr.h"
#include "lib/wire/wire.h"
#include "lib/worker/comm.h"
#include "lib/worker/proto.h"
#include "testutil.h"

#define ROUNDS 25u /* packets of each kind */
#define ELEMS 4096u /* the allreduce's length */

typedef struct drop_spec {
    const char *addr;
    inagg_protocol_t protocol;
    int32_t *out; /* [2][ELEMS], shared */
} drop_spec_t;

enum { K_RANK, K_SLOT, K_THREAD, K_COUNT, K_TYPE, K_DTYPE, K_KINDS };
static const char *const k_reason[K_KINDS] = {"bad_rank",  "bad_slot",       "wrong_thread",
                                              "bad_count", "wrong_protocol", "dtype_not_allowed"};

/* Send ROUNDS packets of each kind with the job's id and token. Both protocols' engine states
 * begin with their worker_params_t (proto_switchml.c struct sml, p4engine.h struct
 * p4engine), which gives the switch's queues, its slot-to-queue base, the pool and the packet
 * size the job was granted. */
static int spray(const inagg_comm_t *c)
{
    const worker_params_t *p = (const worker_params_t *)c->ps;
    struct sockaddr_in q0; /* the UDP transport keeps a sockaddr_in in the address bytes */
    memcpy(&q0, p->sw_queue0.u.bytes, sizeof(q0));
    const uint16_t port0 = ntohs(q0.sin_port);
    if (p->sw_queues < 2)
        return 10; /* the wrong-thread case needs two dataplane threads */
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0)
        return 11;
    const size_t cap = WIRE_HEADER_SIZE + 4u * ((size_t)p->elems + 1);
    uint8_t *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return 12;
    }
    const uint32_t owner0 = transport_slot_queue(p->sw_base, p->sw_queues, 0);
    for (uint32_t i = 0; i < ROUNDS; i++) {
        for (int k = 0; k < K_KINDS; k++) {
            if (k == K_TYPE && c->opts.protocol == INAGG_PROTO_P4SGD)
                continue; /* p4sgd takes both packet types a worker sends */
            wire_header_t h = {.version = INAGG_PROTOCOL_VERSION,
                               .type = WIRE_CONTRIB,
                               .job = c->job_id,
                               .token = c->token,
                               .rank = 0,
                               .slot = 0,
                               .round = 0,
                               .count = 4,
                               .dtype = WIRE_INT32};
            uint32_t queue = owner0;
            switch (k) {
                case K_RANK: h.rank = c->world; break;
                case K_SLOT:
                    h.slot = p->slots;
                    queue = transport_slot_queue(p->sw_base, p->sw_queues, p->slots);
                    break;
                case K_THREAD: queue = (owner0 + 1) % p->sw_queues; break;
                case K_COUNT: h.count = p->elems + 1; break;
                case K_TYPE: /* p4sgd's acknowledgement, which a switchml job does not take */
                    h.type = WIRE_ACK;
                    h.count = 0;
                    break;
                case K_DTYPE: /* the float encoding the job did not agree on */
                    h.dtype = p->float_mode == INAGG_FLOAT_NATIVE ? WIRE_FIXED32 : WIRE_FLOAT32;
                    break;
            }
            size_t len = WIRE_HEADER_SIZE + 4u * h.count;
            memset(buf, 0, len);
            wire_encode_header(&h, buf);
            struct sockaddr_in to = {.sin_family = AF_INET,
                                     .sin_port = htons((uint16_t)(port0 + queue)),
                                     .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
            if (sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to)) != (ssize_t)len) {
                free(buf);
                close(fd);
                return 13;
            }
        }
        usleep(500); /* well inside the switch's socket buffer */
    }
    free(buf);
    close(fd);
    return 0;
}

static int drop_worker(uint32_t rank, void *arg)
{
    drop_spec_t *s = arg;
    inagg_options_t o = INAGG_OPTIONS_INIT;
    o.protocol = s->protocol;
    o.slots = 8;
    o.packet_elems = 256; /* so one more element still fits a datagram */
    o.timeout_ms = 10000;
    inagg_comm_t *c;
    char d[256];
    if (inagg_comm_create(&c, s->addr, "drops", rank, 2, &o, d, sizeof(d)) != INAGG_OK) {
        fprintf(stderr, "    rank %u: %s\n", rank, d);
        return 1;
    }
    int rc = 0;
    if (rank == 0)
        rc = spray(c);
    /* int32 sums of known values, after every bad packet is in */
    if (rc == 0 && inagg_barrier(c) != INAGG_OK)
        rc = 2;
    int32_t *in = malloc(ELEMS * sizeof(int32_t)), *out = s->out + (size_t)rank * ELEMS;
    for (uint32_t i = 0; in && i < ELEMS; i++)
        in[i] = (int32_t)(i * 7u + rank * 1000003u) - 50000;
    if (rc == 0 && in) {
        inagg_result_t r = inagg_allreduce(c, in, out, ELEMS, INAGG_INT32, INAGG_SUM);
        if (r != INAGG_OK) {
            fprintf(stderr, "    rank %u: allreduce: %s: %s\n", rank, inagg_strerror(r),
                    inagg_last_error(c));
            rc = 3;
        }
    } else if (rc == 0) {
        rc = 3;
    }
    free(in);
    inagg_comm_destroy(c);
    return rc;
}

/* The job's count of a drop reason: from its retired record's drops_by_reason. */
static double reason_count(const char *stats, const char *reason)
{
    const char *r = strstr(stats, "\"drops_by_reason\"");
    CHECK_MSG(r != NULL, "no drops_by_reason in %s", stats);
    return ts_number(r, reason);
}

static void drops_test(inagg_protocol_t protocol)
{
    switch_config_t cfg = SWITCH_CONFIG_INIT;
    cfg.threads = 2;
    test_switch_t ts;
    ts_start(&ts, &cfg);
    drop_spec_t s = {
        .addr = ts.addr, .protocol = protocol, .out = shared_alloc(2 * ELEMS * sizeof(int32_t))};
    int rc = run_workers(2, drop_worker, &s, 60);
    char stats[32768];
    ts_stats_json(&ts, stats, sizeof(stats));
    ts_stop(&ts);
    CHECK_EQ_INT(rc, 0);
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t i = 0; i < ELEMS; i++) {
            int32_t want = (int32_t)(i * 7u) - 50000 + (int32_t)(i * 7u + 1000003u) - 50000;
            CHECK_MSG(s.out[r * ELEMS + i] == want, "rank %u elem %u: %d != %d", r, i,
                      s.out[r * ELEMS + i], want);
        }
    for (int k = 0; k < K_KINDS; k++) {
        double want = k == K_TYPE && protocol == INAGG_PROTO_P4SGD ? 0 : ROUNDS;
        CHECK_MSG(reason_count(stats, k_reason[k]) == want, "%s: %g, sent %g\n%s", k_reason[k],
                  reason_count(stats, k_reason[k]), want, stats);
    }
    CHECK_MSG(ts_number(stats, "bad_token") == 0, "%s", stats);
}

TEST(switch_range_checks_count_each_reason_switchml, 90) { drops_test(INAGG_PROTO_SWITCHML); }
TEST(switch_range_checks_count_each_reason_p4sgd, 90) { drops_test(INAGG_PROTO_P4SGD); }
