/*
 * test_fabric.c - the L2 fabric's pure parts: Ethernet/IPv4/UDP framing (and what it calls
 * malformed), MAC learning, moves and ageing, the delay line (order, release times, jitter
 * never reordering, wrap-around, overflow), the SPSC frame queue, duration parsing, the
 * AF_PACKET transport's linked mode end to end through its queues, the FABRIC control line,
 * the latency class of result frames (read from the wire header's real offsets), and the
 * classify stage's flooding and its range checks of aggregation ports and RoCE keys.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "inagg/version.h"
#include "lib/client/ctl.h"
#include "lib/netio/ethframe.h"
#include "lib/netio/roce_frame.h"
#include "lib/transport/afpacket.h"
#include "lib/transport/transport.h"
#include "lib/wire/fabricmsg.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/aggstage.h"
#include "switchd/fabric/bytering.h"
#include "switchd/fabric/delayline.h"
#include "switchd/fabric/fabric.h"
#include "switchd/fabric/forward.h"
#include "switchd/fabric/frameq.h"
#include "switchd/fabric/lathist.h"
#include "switchd/fabric/mactable.h"
#include "switchd/fabric/port.h"
#include "switchd/fabric/resultclass.h"

static const uint8_t MAC_A[6] = {2, 0, 0, 0, 0, 0xa}, MAC_B[6] = {2, 0, 0, 0, 0, 0xb},
                     MAC_C[6] = {2, 0, 0, 0, 0, 0xc};

TEST(ethframe_roundtrip_and_malformed, 5)
{
    uint8_t f[256];
    uint32_t sip = inet_addr("10.1.2.3"), dip = inet_addr("10.1.2.254");
    ethf_write_udp(f, MAC_A, MAC_B, sip, dip, 40000, 7001, 100);
    memset(f + ETHF_UDP_HDR_LEN, 0x5a, 100);
    ethf_udp_t u;
    CHECK_EQ_INT(ethf_parse(f, ETHF_UDP_HDR_LEN + 100, &u), ETHF_UDP);
    CHECK(memcmp(u.dst_mac, MAC_B, 6) == 0 && memcmp(u.src_mac, MAC_A, 6) == 0);
    CHECK(u.src_ip == sip && u.dst_ip == dip);
    CHECK_EQ_INT(u.src_port, 40000);
    CHECK_EQ_INT(u.dst_port, 7001);
    CHECK_EQ_INT(u.payload_len, 100);
    CHECK(u.payload == f + ETHF_UDP_HDR_LEN);
    /* the IPv4 header checksum verifies to zero */
    uint32_t s = 0;
    for (int i = 0; i < 20; i += 2)
        s += (uint32_t)(f[14 + i] << 8 | f[15 + i]);
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    CHECK_EQ_INT(s, 0xffff);
    /* trailing padding is fine; a frame shorter than its IP length is not */
    CHECK_EQ_INT(ethf_parse(f, ETHF_UDP_HDR_LEN + 120, &u), ETHF_UDP);
    CHECK_EQ_INT(ethf_parse(f, ETHF_UDP_HDR_LEN + 99, &u), ETHF_MALFORMED);
    CHECK_EQ_INT(ethf_parse(f, 13, &u), ETHF_MALFORMED);
    uint8_t g[256];
    memcpy(g, f, sizeof(g));
    g[14] = 0x43; /* ihl 3 */
    CHECK_EQ_INT(ethf_parse(g, ETHF_UDP_HDR_LEN + 100, &u), ETHF_MALFORMED);
    memcpy(g, f, sizeof(g));
    g[14 + 6] = 0x20; /* more fragments */
    CHECK_EQ_INT(ethf_parse(g, ETHF_UDP_HDR_LEN + 100, &u), ETHF_FRAGMENT);
    memcpy(g, f, sizeof(g));
    g[14 + 9] = 6; /* TCP */
    CHECK_EQ_INT(ethf_parse(g, ETHF_UDP_HDR_LEN + 100, &u), ETHF_OTHER);
    memcpy(g, f, sizeof(g));
    g[12] = 0x08, g[13] = 0x06; /* ARP */
    CHECK_EQ_INT(ethf_parse(g, 60, &u), ETHF_OTHER);
    memcpy(g, f, sizeof(g));
    g[ETHF_UDP_HDR_LEN - 4] = 0, g[ETHF_UDP_HDR_LEN - 3] = 4; /* UDP length 4 < 8 */
    CHECK_EQ_INT(ethf_parse(g, ETHF_UDP_HDR_LEN + 100, &u), ETHF_MALFORMED);
}

TEST(mactable_learn_move_age, 5)
{
    mactable_t t;
    CHECK_EQ_INT(mactable_init(&t, 64, 1000), 0);
    CHECK_EQ_INT(mactable_lookup(&t, MAC_A, 0), -ENOENT);
    mactable_learn(&t, MAC_A, 3, 100);
    CHECK_EQ_INT(mactable_lookup(&t, MAC_A, 200), 3);
    mactable_learn(&t, MAC_A, 5, 300); /* moved */
    CHECK_EQ_INT(mactable_lookup(&t, MAC_A, 400), 5);
    CHECK(t.moved == 1 && t.learned == 1);
    CHECK_EQ_INT(mactable_lookup(&t, MAC_A, 300 + 1001), -ENOENT); /* aged out */
    CHECK(t.aged == 1);
    mactable_fix(&t, MAC_B, 9);
    mactable_learn(&t, MAC_B, 1, 10); /* a fixed entry does not move */
    CHECK_EQ_INT(mactable_lookup(&t, MAC_B, 1000000000ull), 9);
    /* fill: the table never loops forever, and counts what it could not learn */
    for (uint32_t i = 0; i < 5000; i++) {
        uint8_t m[6] = {2, 1, (uint8_t)(i >> 16), (uint8_t)(i >> 8), (uint8_t)i, 7};
        mactable_learn(&t, m, 1, 2000);
    }
    CHECK(t.full > 0);
    CHECK(mactable_count(&t, 2000) <= t.cap);
    /* once those age, new addresses take their places: every one is learned and found (each
     * after the one before it aged too, so the probe window is never full of live ones) */
    uint64_t full_before = t.full;
    for (uint32_t i = 0; i < 40; i++) {
        uint8_t m[6] = {2, 3, 0, 0, (uint8_t)i, 9};
        uint64_t now = 5000 + 2000ull * i;
        mactable_learn(&t, m, 4, now);
        CHECK_MSG(mactable_lookup(&t, m, now + 1) == 4, "new address %u not learned over aged ones",
                  i);
    }
    CHECK_MSG(t.full == full_before, "full %llu -> %llu with every old entry aged",
              (unsigned long long)full_before, (unsigned long long)t.full);
    mactable_free(&t);
}

/* The classify stage on its own, for a fabric of two ports and the internal one (no threads,
 * no interfaces: its verdicts are read back, and the aggregation stage's queues behind it): a
 * flood leaves by every port but the one it came in on; UDP to the first port past the
 * aggregation queues goes to the switch's stack, not to a queue; a RoCE Write whose key is
 * one past the last queue is not steered. */
static int classify_init(classify_t *c)
{
    memset(c, 0, sizeof(*c));
    c->nports = 3;
    c->cpu = 2;
    memcpy(c->mac, MAC_B, 6);
    c->ip = inet_addr("10.9.0.254");
    c->port0 = 7000;
    c->nqueues = 2;
    atomic_store(&c->agg_ports, ~0ull);
    atomic_store(&c->add_mode, WIRE_ADD_ANY);
    return mactable_init(&c->mt, 64, 1000000000ull);
}

/* The output ports of a verdict to send, 0 for any other verdict. */
static uint64_t sent_to(verdict_t v) { return v.kind == VERDICT_SEND ? v.ports : 0; }

/* The classify stage's verdict carried out as the receive loop does for aggregation. */
static verdict_t classify_into(classify_t *c, aggstage_t *a, uint32_t pin, const uint8_t *fr,
                               uint32_t len)
{
    verdict_t v = classify_frame(c, pin, fr, len, 1);
    if (v.kind == VERDICT_AGGREGATE)
        aggstage_enqueue(a, v.queue, pin, NULL, fr, len, 1);
    return v;
}

TEST(fabric_classify_flood_and_queue_ranges, 5)
{
    static classify_t cl;
    static fabric_link_t link;
    aggstage_t agg = {.link = &link};
    link.nqueues = 2;
    CHECK_EQ_INT(classify_init(&cl), 0);
    for (int q = 0; q < 2; q++)
        CHECK_EQ_INT(frameq_init(&link.rx[q], 16), 0);
    uint8_t fr[ROCE_MAX_FRAME];
    static const uint8_t bcast[6] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    /* a broadcast from port 0: ports 1 and the internal one, never back out of port 0 */
    ethf_write_udp(fr, MAC_A, bcast, inet_addr("10.9.0.1"), inet_addr("10.9.0.255"), 1, 2, 8);
    CHECK_EQ_INT(sent_to(classify_into(&cl, &agg, 0, fr, ETHF_UDP_HDR_LEN + 8)),
                 (1ull << 1) | (1ull << 2));
    CHECK_EQ_INT(atomic_load(&cl.c[CL_FLOODED]), 1);
    /* an unknown unicast from port 1: flooded to 0 and the internal port */
    static const uint8_t unknown[6] = {2, 0, 0, 0, 0, 0x77};
    ethf_write_udp(fr, MAC_C, unknown, inet_addr("10.9.0.2"), inet_addr("10.9.0.3"), 1, 2, 8);
    CHECK_EQ_INT(sent_to(classify_into(&cl, &agg, 1, fr, ETHF_UDP_HDR_LEN + 8)),
                 (1ull << 0) | (1ull << 2));
    /* UDP to the last queue's port is aggregation; one port further is the switch's stack */
    ethf_write_udp(fr, MAC_A, MAC_B, inet_addr("10.9.0.1"), cl.ip, 41000, 7001, 32);
    memset(fr + ETHF_UDP_HDR_LEN, 0, 32);
    verdict_t v = classify_into(&cl, &agg, 0, fr, ETHF_UDP_HDR_LEN + 32);
    CHECK(v.kind == VERDICT_AGGREGATE && v.queue == 1);
    CHECK_EQ_INT(atomic_load(&agg.c[AG_IN]), 1);
    CHECK_EQ_INT(frameq_ready(&link.rx[1]), 1);
    ethf_write_udp(fr, MAC_A, MAC_B, inet_addr("10.9.0.1"), cl.ip, 41000, 7002, 32);
    CHECK_EQ_INT(sent_to(classify_into(&cl, &agg, 0, fr, ETHF_UDP_HDR_LEN + 32)), 1ull << 2);
    CHECK_EQ_INT(atomic_load(&agg.c[AG_IN]), 1);
    CHECK_EQ_INT(atomic_load(&cl.c[CL_TO_CPU]), 1);
    /* a port that does not aggregate: its aggregation frames are counted and dropped */
    uint64_t only1 = 1ull << 1;
    classify_set(&cl, &only1, NULL);
    ethf_write_udp(fr, MAC_A, MAC_B, inet_addr("10.9.0.1"), cl.ip, 41000, 7000, 32);
    CHECK_EQ_INT(classify_into(&cl, &agg, 0, fr, ETHF_UDP_HDR_LEN + 32).kind, VERDICT_DROP);
    CHECK_EQ_INT(atomic_load(&cl.c[CL_AGG_PORT_OFF]), 1);
    CHECK_EQ_INT(atomic_load(&cl.c[CL_SETTINGS_CHANGED]), 1);
    uint64_t all = ~0ull;
    classify_set(&cl, &all, NULL);
    /* RoCE Write Only to the switch: key 1 (the last queue) is steered, key 2 is not (it goes
     * to the switch's stack) */
    uint8_t pay[64];
    memset(pay, 0, sizeof(pay));
    wire_header_t wh = {.version = INAGG_PROTOCOL_VERSION, .type = WIRE_CONTRIB, .job = 1};
    wire_encode_header(&wh, pay);
    roce_hdr_t rh;
    memset(&rh, 0, sizeof(rh));
    memcpy(rh.dst_mac, MAC_B, 6);
    memcpy(rh.src_mac, MAC_A, 6);
    rh.opcode = ROCE_WRITE_ONLY;
    rh.pkey = ROCE_DEFAULT_PKEY;
    rh.hop_limit = 64;
    rh.dma_len = sizeof(pay);
    for (uint32_t key = 1; key <= 2; key++) {
        rh.qp = 0x100 + key;
        rh.rkey = key;
        uint32_t n = roce_write_frame(fr, &rh, pay, sizeof(pay), NULL, 0);
        v = classify_into(&cl, &agg, 0, fr, n);
        CHECK_MSG(key == 1 ? v.kind == VERDICT_AGGREGATE && v.queue == 1 : sent_to(v) == 1ull << 2,
                  "RoCE key %u: verdict %d", key, v.kind);
    }
    CHECK_EQ_INT(atomic_load(&cl.roce.c[RG_FIRST]), 1);
    CHECK_EQ_INT(atomic_load(&cl.roce.c[RG_NO_MATCH]), 1);
    CHECK_EQ_INT(atomic_load(&agg.c[AG_IN]), 2);
    CHECK_EQ_INT(frameq_ready(&link.rx[1]), 2);
    /* flows are never told to go: 6000 more (new QPs, as jobs come and go) are all steered,
     * the later ones in the entries of the flows that had a frame least recently */
    rh.rkey = 0;
    for (uint32_t k = 0; k < 6000; k++) {
        rh.qp = 0x10000 + k;
        uint32_t n = roce_write_frame(fr, &rh, pay, sizeof(pay), NULL, 0);
        uint32_t q = 9;
        CHECK_EQ_INT(roce_steer_classify(&cl.roce, 1, fr, n, 2, &q), ROCE_STEER_AGGREGATE);
        CHECK_EQ_INT(q, 0);
    }
    CHECK_EQ_INT(atomic_load(&cl.roce.c[RG_FIRST]), 6001);
    CHECK_EQ_INT(atomic_load(&cl.roce.c[RG_TABLE_FULL]), 0);
    CHECK(atomic_load(&cl.roce.c[RG_RECYCLED]) > 0);
    for (int q = 0; q < 2; q++)
        frameq_free(&link.rx[q]);
    mactable_free(&cl.mt);
}

TEST(delayline_order_wrap_overflow, 10)
{
    delayline_t d;
    CHECK_EQ_INT(delayline_init(&d, 4096, 1000, 0, 1), 0);
    uint8_t frame[1500];
    CHECK(delayline_due(&d, ~0ull) == NULL);
    CHECK(delayline_next(&d) == UINT64_MAX);
    /* many rounds of push/pop through a small ring: wraps many times, always FIFO */
    uint32_t pushed = 0, popped = 0;
    uint64_t now = 0;
    for (int round = 0; round < 200; round++) {
        for (int k = 0; k < 3; k++) {
            uint32_t len = 60 + (uint32_t)((round * 7 + k * 13) % 1400);
            memset(frame, (int)(pushed & 0xff), len);
            if (delayline_push(&d, now, now, 1, 0, NULL, frame, len) == 0)
                pushed++;
            now += 10;
        }
        CHECK(delayline_due(&d, now) == NULL || delayline_next(&d) <= now);
        now += 1000;
        const delay_rec_t *r;
        while ((r = delayline_due(&d, now))) {
            CHECK_EQ_INT(r->data[0], popped & 0xff);
            CHECK(r->release_ns <= now);
            delayline_pop(&d);
            popped++;
        }
    }
    CHECK_EQ_INT(pushed, popped);
    CHECK(pushed > 300);
    /* overflow: counted, never overwrites */
    int full = 0;
    uint64_t over0 = d.overflow;
    for (int k = 0; k < 10; k++)
        full += delayline_push(&d, now, now, 1, 0, NULL, frame, 1400) == -ENOBUFS;
    CHECK(full > 0 && d.overflow - over0 == (uint64_t)full);
    delayline_free(&d);
    /* jitter: release times stay in order and within delay .. delay + jitter */
    CHECK_EQ_INT(delayline_init(&d, 1 << 20, 5000, 3000, 7), 0);
    for (int k = 0; k < 200; k++)
        CHECK_EQ_INT(delayline_push(&d, (uint64_t)k * 100, 0, 0, 0, NULL, frame, 64), 0);
    uint64_t last = 0;
    for (int k = 0; k < 200; k++) {
        const delay_rec_t *r = delayline_due(&d, ~0ull);
        CHECK(r != NULL);
        CHECK(r->release_ns >= last);
        CHECK(r->release_ns >= (uint64_t)k * 100 + 5000);
        last = r->release_ns;
        delayline_pop(&d);
    }
    delayline_free(&d);
}

TEST(frameq_spsc_and_durations, 5)
{
    frameq_t q;
    CHECK_EQ_INT(frameq_init(&q, 3), 0);
    CHECK_EQ_INT(q.cap, 4);
    for (int i = 0; i < 4; i++) {
        frameq_slot_t *s = frameq_reserve(&q);
        CHECK(s != NULL);
        s->len = (uint32_t)i;
        frameq_publish(&q);
    }
    CHECK(frameq_reserve(&q) == NULL);
    CHECK_EQ_INT(frameq_ready(&q), 4);
    CHECK_EQ_INT(frameq_at(&q, 2)->len, 2);
    frameq_release(&q, 3);
    CHECK_EQ_INT(frameq_at(&q, 0)->len, 3);
    CHECK_EQ_INT(frameq_wait(&q, 0), 1);
    frameq_release(&q, 1);
    CHECK_EQ_INT(frameq_wait(&q, 20), 0);
    frameq_free(&q);
    uint64_t ns;
    CHECK(fabric_parse_duration("25us", &ns) == 0 && ns == 25000);
    CHECK(fabric_parse_duration("1.5ms", &ns) == 0 && ns == 1500000);
    CHECK(fabric_parse_duration("0", &ns) == 0 && ns == 0);
    CHECK(fabric_parse_duration("25", &ns) == -EINVAL);
    CHECK(fabric_parse_duration("-1us", &ns) == -EINVAL);
    CHECK(fabric_parse_duration("5 parsecs", &ns) == -EINVAL);
}

/* The fabric's aggregation port carrying UDP: what the fabric queues arrives as packets with
 * the sender's address; what the endpoint sends leaves as frames to that address and port. */
TEST(fabric_port_udp, 10)
{
    static fabric_link_t link;
    memset(&link, 0, sizeof(link));
    link.nqueues = 2;
    for (int q = 0; q < 2; q++) {
        CHECK_EQ_INT(frameq_init(&link.rx[q], 16), 0);
        CHECK_EQ_INT(frameq_init(&link.tx[q], 16), 0);
    }
    link.tx_efd = link.tx[0].efd; /* any eventfd will do here */
    memcpy(link.mac, MAC_B, 6);
    link.ip = inet_addr("10.9.0.254");
    link.port0 = 7000;
    fabric_port_config_t pc;
    fabric_port_config_init(&pc, &link, 0, 0);
    transport_config_t cfg = {.kind = "afpacket", .opener = &pc.opener, .queue = 1};
    transport_t *t = NULL;
    char err[160] = "";
    CHECK_MSG(transport_open(&cfg, &t, err, sizeof(err)) == 0, "%s", err);
    transport_addr_t me;
    char text[64];
    CHECK_EQ_INT(transport_local_addr(t, &me), 0);
    transport_addr_format(&me, text, sizeof(text));
    CHECK_MSG(strcmp(text, "10.9.0.254:7001") == 0, "%s", text);
    /* one frame in from port 3 */
    frameq_slot_t *s = frameq_reserve(&link.rx[1]);
    if (!s) {
        CHECK(s != NULL);
        return;
    }
    ethf_write_udp(s->data, MAC_A, MAC_B, inet_addr("10.9.0.1"), link.ip, 41000, 7001, 8);
    memcpy(s->data + ETHF_UDP_HDR_LEN, "abcdefgh", 8);
    s->len = ETHF_UDP_HDR_LEN + 8;
    s->port = 3;
    s->t_ns = 1;
    frameq_publish(&link.rx[1]);
    transport_rx_t rx[4];
    CHECK_EQ_INT(transport_recv(t, rx, 4, 100), 1);
    CHECK(rx[0].len == 8 && memcmp(rx[0].data, "abcdefgh", 8) == 0);
    transport_addr_format(&rx[0].from, text, sizeof(text));
    CHECK_MSG(strcmp(text, "10.9.0.1:41000") == 0, "%s", text);
    /* a reply to it: a frame from the switch's MAC/IP/port to the sender, out of port 3 */
    transport_tx_t p = {
        .head = "HEAD", .head_len = 4, .body = "body", .body_len = 4, .to = rx[0].from};
    CHECK_EQ_INT(transport_send(t, &p, 1, 0), 1);
    CHECK_EQ_INT(frameq_ready(&link.tx[1]), 1);
    frameq_slot_t *o = frameq_at(&link.tx[1], 0);
    ethf_udp_t u;
    CHECK_EQ_INT(ethf_parse(o->data, o->len, &u), ETHF_UDP);
    CHECK_EQ_INT(o->port, 3);
    CHECK(memcmp(u.dst_mac, MAC_A, 6) == 0 && memcmp(u.src_mac, MAC_B, 6) == 0);
    CHECK(u.src_port == 7001 && u.dst_port == 41000 && u.payload_len == 8);
    CHECK(memcmp(u.payload, "HEADbody", 8) == 0);
    /* a packet larger than a frame is counted and dropped, not truncated */
    static uint8_t big[FRAMEQ_DATA];
    p.body = big;
    p.body_len = sizeof(big);
    CHECK_EQ_INT(transport_send(t, &p, 1, 0), 0);
    CHECK(atomic_load(&link.tx_too_big) == 1);
    /* queue 5 does not exist */
    transport_t *t2 = NULL;
    cfg.queue = 5;
    CHECK(transport_open(&cfg, &t2, err, sizeof(err)) == -EINVAL);
    transport_close(t);
    /* without a fabric: no endpoint */
    pc.link = NULL;
    cfg.queue = 0;
    CHECK(transport_open(&cfg, &t2, err, sizeof(err)) == -EINVAL);
    for (int q = 0; q < 2; q++) {
        frameq_free(&link.rx[q]);
        frameq_free(&link.tx[q]);
    }
}

/* FABRIC / FABRIC_STATE: what parses, what is refused and why, and the round trip. */
TEST(fabric_control_line, 5)
{
    wire_fabric_t m;
    char why[160], line[CTL_LINE_MAX];
    CHECK_EQ_INT(wire_fabric_parse("FABRIC", &m, why, sizeof(why)), 0);
    CHECK(!m.has_ports && !m.has_add);
    CHECK_EQ_INT(wire_fabric_parse("FABRIC agg_ports=p1,p2 add=fixed", &m, why, sizeof(why)), 0);
    CHECK(m.has_ports && strcmp(m.ports, "p1,p2") == 0 && m.has_add && m.add == WIRE_ADD_FIXED);
    CHECK_EQ_INT(wire_fabric_format(WIRE_VERB_FABRIC, &m, line, sizeof(line)), 0);
    CHECK_MSG(strcmp(line, "FABRIC agg_ports=p1,p2 add=fixed") == 0, "%s", line);
    CHECK_EQ_INT(wire_fabric_parse("FABRIC add=float", &m, why, sizeof(why)), 0);
    CHECK(!m.has_ports && m.add == WIRE_ADD_FLOAT);
    CHECK_EQ_INT(wire_fabric_format(WIRE_VERB_FABRIC_STATE, &m, line, sizeof(line)), -EINVAL);
    static const char *const bad[] = {
        "FABRIC add=double",
        "FABRIC agg_ports=",
        "FABRIC agg_ports=p1,,p2",
        "FABRIC agg_ports=p1 agg_ports=p2",
        "FABRIC add=any add=fixed",
        "FABRIC speed=9",
        "FABRIC agg_ports=a_name_longer_than_15",
        "FABRIC agg_ports=p1;rm",
        "FABRIC  add=any",
        "FABRIC add",
        "FABRIC_STATE add=any",
        "STATS",
        "FABRICX add=any",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = 0;
        CHECK_MSG(wire_fabric_parse(bad[i], &m, why, sizeof(why)) == -EPROTO, "%s", bad[i]);
        CHECK_MSG(why[0] != 0, "no reason for %s", bad[i]);
    }
    CHECK_EQ_INT(wire_fabric_parse("FABRIC_STATE agg_ports=none add=any", &m, why, sizeof(why)), 0);
    CHECK(strcmp(m.ports, "none") == 0 && m.add == WIRE_ADD_ANY);
    CHECK_EQ_INT(wire_verb_of("FABRIC_STATE agg_ports=all add=any"), WIRE_VERB_FABRIC_STATE);
    CHECK_EQ_INT(wire_verb_of("FABRIC"), WIRE_VERB_FABRIC);
    CHECK_EQ_INT(wire_add_mode_parse("float", &m.add), 0);
    CHECK(strcmp(wire_add_mode_name(WIRE_ADD_FIXED), "fixed") == 0);
}

/* A result's latency class comes from its dtype (float32 and coded: float), and a second
 * result of the same (job, slot, rank) and round is a resend; results that differ only in
 * the token (which earlier code read as slot and round) are not. */
TEST(fabric_result_class_reads_the_header, 5)
{
    static resend_ent_t tab[RESEND_SLOTS];
    memset(tab, 0, sizeof(tab));
    uint8_t b[WIRE_HEADER_SIZE];
    wire_header_t h = {.version = 2,
                       .type = WIRE_RESULT,
                       .job = 3,
                       .rank = 1,
                       .token = 0x1122334455667788ull,
                       .slot = 5,
                       .round = 9,
                       .dtype = WIRE_FLOAT32};
    wire_encode_header(&h, b);
    CHECK_EQ_INT(fabric_result_class(tab, b), LAT_AGG_FLOAT);
    CHECK_EQ_INT(fabric_result_class(tab, b), LAT_RESEND);
    h.round = 10;
    h.dtype = WIRE_FIXED32;
    wire_encode_header(&h, b);
    CHECK_EQ_INT(fabric_result_class(tab, b), LAT_AGG_INT);
    h.slot = 6; /* another slot, same round: not a resend */
    wire_encode_header(&h, b);
    CHECK_EQ_INT(fabric_result_class(tab, b), LAT_AGG_INT);
    h.token ^= 0xffffffffull; /* the token does not name the slot */
    wire_encode_header(&h, b);
    CHECK_EQ_INT(fabric_result_class(tab, b), LAT_RESEND);
    h.dtype = WIRE_CODED;
    h.round = 11;
    wire_encode_header(&h, b);
    CHECK_EQ_INT(fabric_result_class(tab, b), LAT_AGG_FLOAT);
}

/* The ring between the classify and transmit stages: order, the skip at the ring's end,
 * refusal when full or too big, and a producer and a consumer thread moving 20000 records
 * of varying sizes intact and in order. */
typedef struct ring_prod_arg {
    bytering_t *r;
    uint32_t n;
    uint32_t refused;
} ring_prod_arg_t;

static void *ring_producer(void *arg)
{
    ring_prod_arg_t *a = arg;
    uint8_t frame[3000];
    for (uint32_t i = 0; i < a->n;) {
        uint32_t len = 1 + (i * 7919u) % sizeof(frame);
        memset(frame, (int)(i & 0xff), len);
        memcpy(frame, &i, sizeof(i) < len ? sizeof(i) : len);
        if (bytering_push(a->r, i, i, 0, NULL, frame, len) == 0)
            i++;
        else if (++a->refused > 50000000u)
            break; /* bounded: the consumer died */
    }
    return NULL;
}

TEST(bytering_spsc_order_wrap_full, 20)
{
    bytering_t r;
    CHECK_EQ_INT(RING_ALIGN + sizeof(bytering_rec_t), 56); /* the sizes below assume it: a
                                                          300-byte frame takes 368 bytes */
    CHECK_EQ_INT(bytering_init(&r, 1000), 0); /* rounded to 1008 */
    uint8_t f[600] = {1, 2, 3};
    struct virtio_net_hdr vh = {.gso_type = VIRTIO_NET_HDR_GSO_TCPV4, .gso_size = 1448};
    CHECK_EQ_INT(bytering_push(&r, 5, 11, 3, &vh, f, 300), 0);
    CHECK_EQ_INT(bytering_push(&r, 6, 12, 4, NULL, f, 300), 0);
    CHECK_EQ_INT(bytering_push(&r, 7, 13, 5, NULL, f, 300), -ENOBUFS); /* full */
    CHECK_EQ_INT(bytering_push(&r, 7, 13, 5, NULL, f, 2000), -ENOBUFS); /* never fits */
    const bytering_rec_t *rec = bytering_peek(&r);
    CHECK(rec && rec->ports == 5 && rec->t_ns == 11 && rec->kind == 3 && rec->len == 300);
    CHECK(rec && rec->has_vh && rec->vh.gso_size == 1448 && rec->data[2] == 3);
    bytering_pop(&r);
    /* records of 368 bytes at 0 and 368: the third finds 272 bytes before the end, skips
     * them and starts at 0, where the first one was */
    CHECK_EQ_INT(bytering_push(&r, 8, 14, 0, NULL, f, 300), 0);
    rec = bytering_peek(&r);
    CHECK(rec && rec->ports == 6 && !rec->has_vh);
    bytering_pop(&r);
    rec = bytering_peek(&r);
    CHECK(rec && rec->ports == 8 && rec->len == 300 &&
          (const uint8_t *)rec == r.ring.buf + RING_ALIGN);
    bytering_pop(&r);
    CHECK(bytering_peek(&r) == NULL);
    CHECK_EQ_INT(bytering_used(&r), 0);
    bytering_free(&r);

    CHECK_EQ_INT(bytering_init(&r, 64 << 10), 0);
    ring_prod_arg_t a = {&r, 20000, 0};
    pthread_t t;
    CHECK_EQ_INT(pthread_create(&t, NULL, ring_producer, &a), 0);
    uint32_t got = 0, bad = 0;
    uint64_t deadline = util_now_ns() + 15000000000ull;
    while (got < a.n && util_now_ns() < deadline) {
        rec = bytering_peek(&r);
        if (!rec)
            continue;
        uint32_t len = 1 + (got * 7919u) % 3000u, first;
        memcpy(&first, rec->data, sizeof(first));
        if (rec->ports != got || rec->len != len || (len >= 4 && first != got) ||
            rec->data[len - 1] != (len <= 4 ? ((const uint8_t *)&got)[len - 1] : (got & 0xff)))
            bad++;
        bytering_pop(&r);
        got++;
    }
    pthread_join(t, NULL);
    CHECK_EQ_INT(got, 20000);
    CHECK_EQ_INT(bad, 0);
    bytering_free(&r);
}
