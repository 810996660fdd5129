/*
 * test_bench_defaults.c - ar_link_defaults (bench/bench_allreduce_defaults.c), the testbed's
 * link-aware choice of packet size: with MACs on (every bench job has a secret) a datagram,
 * as the worker builds it, still fits one frame of the link's MTU at every MTU, so no packet
 * of a MAC'd run is ever an IP fragment pair; and the packet is the largest power of two that
 * fits, so the MAC's 28 bytes never halve it where they need not.
 */
#include <stdint.h>
#include <string.h>

#include "apps/bench/bench_allreduce.h"
#include "harness.h"
#include "inagg.h"
#include "lib/wire/wire.h"
#include "lib/worker/proto.h"

#define IPV4_UDP_BYTES 28u /* what the frame's MTU holds besides the datagram */

/* The bytes of the datagram a worker sends for a packet of `elems` elements. */
static uint32_t datagram_bytes(uint32_t elems, int dp_auth)
{
    worker_params_t p;
    memset(&p, 0, sizeof(p));
    p.dp_auth = dp_auth;
    p.elems = elems;
    return worker_hdr_bytes(&p) + (uint32_t)worker_payload_cap(&p);
}

TEST(bench_testbed_packet_fits_one_frame_with_macs_at_every_mtu, 20)
{
    uint32_t checked = 0;
    for (uint32_t mtu = 576; mtu <= 65000; mtu++) {
        ar_opts_t o;
        memset(&o, 0, sizeof(o));
        o.threads = 1;
        char note[512];
        ar_link_defaults(&o, mtu, 1000000000ull, note, sizeof(note));
        uint32_t with_mac = datagram_bytes(o.packet_elems, 1);
        CHECK_MSG(with_mac + IPV4_UDP_BYTES <= mtu,
                  "MTU %u: %u elements make %u-byte datagrams with their MAC, %u with the IP "
                  "and UDP headers: fragmented",
                  mtu, o.packet_elems, with_mac, with_mac + IPV4_UDP_BYTES);
        CHECK_MSG(datagram_bytes(o.packet_elems, 0) < with_mac,
                  "MTU %u: the MAC adds no bytes to the datagram", mtu);
        CHECK_MSG(strstr(note, "one frame each") != NULL, "MTU %u: the note says '%s'", mtu, note);
        /* the largest power of two that fits: twice as many would not */
        uint32_t twice = 2 * o.packet_elems;
        CHECK_MSG(
            (o.packet_elems & (o.packet_elems - 1)) == 0 &&
                (twice > INAGG_MAX_PACKET_ELEMS || datagram_bytes(twice, 1) + IPV4_UDP_BYTES > mtu),
            "MTU %u: %u elements, but %u would fit one frame too", mtu, o.packet_elems, twice);
        checked++;
    }
    CHECK(checked == 65000 - 576 + 1);
}

TEST(bench_testbed_9000_mtu_sends_2048_elements_in_8256_byte_datagrams, 5)
{
    ar_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = 1;
    char note[512];
    ar_link_defaults(&o, 9000, 1000000000ull, note, sizeof(note));
    CHECK_EQ_INT(o.packet_elems, 2048);
    CHECK_EQ_INT(datagram_bytes(o.packet_elems, 1), 8256); /* 36 header + 28 MAC + 8192 */
    CHECK(strstr(note, "8256 B datagrams: one frame each") != NULL);
}

/* What the command line gave stays; only what it left out gets the link's defaults. */
TEST(bench_testbed_defaults_keep_what_was_given, 5)
{
    ar_opts_t o;
    memset(&o, 0, sizeof(o));
    o.threads = 1;
    o.packet_elems = 100;
    o.window = 7;
    o.rto_min_us = 1234;
    o.rto_max_us = 999999;
    o.switch_threads = 3;
    o.given =
        (ar_given_t){.packet = 1, .window = 1, .rto_min = 1, .rto_max = 1, .switch_threads = 1};
    char note[512];
    ar_link_defaults(&o, 9000, 1000000000ull, note, sizeof(note));
    CHECK_MSG(o.packet_elems == 100 && o.window == 7 && o.rto_min_us == 1234 &&
                  o.rto_max_us == 999999 && o.switch_threads == 3,
              "given options replaced: packet %u window %u rto %u..%u switch threads %u",
              o.packet_elems, o.window, o.rto_min_us, o.rto_max_us, o.switch_threads);
    CHECK_MSG(strstr(note, "window 7 (as given)") != NULL, "the note says '%s'", note);
    o.given = (ar_given_t){0};
    ar_link_defaults(&o, 9000, 1000000000ull, note, sizeof(note));
    CHECK_MSG(o.packet_elems == 2048 && o.window != 7 && o.rto_min_us == AR_TESTBED_RTO_MIN_US &&
                  o.rto_max_us == AR_TESTBED_RTO_MAX_US &&
                  o.switch_threads == AR_TESTBED_SWITCH_THREADS,
              "defaults not applied: packet %u window %u rto %u..%u switch threads %u",
              o.packet_elems, o.window, o.rto_min_us, o.rto_max_us, o.switch_threads);
}

/* RoCE: the packet fills whole frames of the path MTU, its header and MAC included, rather
 * than leaving a last frame of a few bytes. */
TEST(bench_testbed_roce_packet_fills_whole_frames, 5)
{
    static const struct {
        uint32_t mtu;
        const char *roce_mtu;
        int no_auth;
        uint32_t want;
    } cases[] = {
        {9000, NULL, 0, 2032}, /* 64 + 8128 = 2 x 4096, not 3 frames for 2048 */
        {9000, NULL, 1, 2039}, /* 36 + 8156, without the MAC */
        {9000, "2048", 0, 2032}, /* 4 x 2048 */
        {1500, NULL, 0, 240}, /* 256 elements would be 1088 B: 1 x 1024 instead of 2 frames */
        {9000, "256", 0, 2032},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ar_opts_t o;
        memset(&o, 0, sizeof(o));
        o.threads = 1;
        o.transport = "roce";
        o.roce_mtu = cases[i].roce_mtu;
        o.no_dataplane_auth = cases[i].no_auth;
        char note[512];
        ar_link_defaults(&o, cases[i].mtu, 1000000000ull, note, sizeof(note));
        CHECK_MSG(o.packet_elems == cases[i].want, "MTU %u, path MTU %s: %u elements, want %u",
                  cases[i].mtu, cases[i].roce_mtu ? cases[i].roce_mtu : "(link)", o.packet_elems,
                  cases[i].want);
        CHECK_MSG(strstr(note, "B path MTU") != NULL, "the note says '%s'", note);
    }
}

/* The window holds about 3 ms of the link for UDP, 1 ms for RoCE, whose frames wait in the
 * link's queue one by one (docs/perf-log/2026-11-27-roce-window-2host-round.md); bounded by the testbed's limits. */
TEST(bench_testbed_window_is_link_time_shorter_for_roce, 5)
{
    static const struct {
        const char *transport;
        uint64_t bps;
        uint32_t want;
    } cases[] = {
        {"udp", 1000000000ull, 46}, /* 375000 B / 8256 B */
        {"roce", 1000000000ull, 16}, /* 125000 B / 8192 B */
        {"roce", 500000000ull, 8},
        {"roce", 2000000000ull, 31},
        {"roce", 10000000ull, AR_TESTBED_WINDOW_MIN},
        {"udp", 100000000000ull, AR_TESTBED_WINDOW_MAX},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ar_opts_t o;
        memset(&o, 0, sizeof(o));
        o.threads = 1;
        o.transport = cases[i].transport;
        char note[512];
        ar_link_defaults(&o, 9000, cases[i].bps, note, sizeof(note));
        CHECK_MSG(o.window == cases[i].want, "%s at %llu bit/s: window %u, want %u",
                  cases[i].transport, (unsigned long long)cases[i].bps, o.window, cases[i].want);
        CHECK_MSG(strstr(note, strcmp(cases[i].transport, "roce") == 0 ? "about 1 ms"
                                                                       : "about 3 ms") != NULL,
                  "the note says '%s'", note);
    }
}
