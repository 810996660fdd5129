/*
 * test_model.c - the performance model (src/apps/model) against values computed by hand: the pool
 * size from the bandwidth-delay product (SwitchML appendix C), the ring at its slowest link
 * (AllReduce-Switch), INA's link, switch and window bounds, a hierarchy, compression with and
 * without overlap, parameter server, concurrent and tree allreduce, a bucketed iteration, and
 * P4SGD's equations 1-3.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "apps/model/model.h"
#include "harness.h"

#define NEAR(a, b) (fabs((a) - (b)) <= 1e-9 + 1e-9 * fabs(b))
#define CHECK_NEAR(a, b)                                                                           \
    CHECK_MSG(NEAR((a), (b)), "%s = %.12g, want %.12g", #a, (double)(a), (double)(b))

TEST(model_pool_size_bdp, 5)
{
    /* 10 Gbit/s x 100 us = 125000 B over 1100 B packets = 113.6 -> 114, next power 128 */
    CHECK_EQ_INT(model_pool_size(10e9, 100e-6, 1100, 0), 114);
    CHECK_EQ_INT(model_pool_size(10e9, 100e-6, 1100, 1), 128);
    /* 100 Gbit/s x 40 us = 500000 B / 1100 = 454.5 -> 455, next power 512 (SwitchML's) */
    CHECK_EQ_INT(model_pool_size(100e9, 40e-6, 1100, 0), 455);
    CHECK_EQ_INT(model_pool_size(100e9, 40e-6, 1100, 1), 512);
    /* exact: 1e6 B/s x 1 ms = 1000 B = 10 packets of 100 B: 10, not 11 */
    CHECK_EQ_INT(model_pool_size(8e6, 1e-3, 100, 0), 10);
    CHECK_EQ_INT(model_pool_size(8e6, 1e-3, 100, 1), 16);
    CHECK_EQ_INT(model_pool_size(1e6, 1e-9, 1500, 0), 1); /* at least one slot */
}

TEST(model_ring_slowest_link, 5)
{
    /* AllReduce-Switch: n B_min / 2(n-1); 4 x 50 Mbit/s / 6 */
    CHECK_NEAR(model_ring_eff_bw(4, 50e6), 4 * 50e6 / 6.0);
    model_params_t p;
    model_params_default(&p);
    p.link_bps = 100e6;
    p.msg_s = 0;
    /* 12 MB over 4 hosts: 6 steps of 3 MB at 100 Mbit/s = 1.44 s */
    CHECK_NEAR(model_allreduce(MODEL_RING, &p, 4, 12e6).total_s, 1.44);
    /* one host at 50 Mbit/s: the whole ring at its rate, 2.88 s = 12 MB x 8 / (n B_min/2(n-1)) */
    p.slow_bps = 50e6;
    CHECK_NEAR(model_allreduce(MODEL_RING, &p, 4, 12e6).total_s, 2.88);
    CHECK_NEAR(12e6 * 8 / model_ring_eff_bw(4, 50e6), 2.88);
    /* alpha per step: 6 x 10 ms more */
    p.msg_s = 0.01;
    CHECK_NEAR(model_allreduce(MODEL_RING, &p, 4, 12e6).total_s, 2.94);
    /* the wait for the slowest host per step: 6 x 5 ms more again; 8 hosts: 14 steps */
    p.ring_step_s = 0.005;
    CHECK_NEAR(model_allreduce(MODEL_RING, &p, 4, 12e6).total_s, 2.97);
    p.slow_bps = 0;
    CHECK_NEAR(model_allreduce(MODEL_RING, &p, 8, 16e6).total_s, 14 * (2e6 * 8 / 100e6 + 0.015));
    /* traffic: INA |U| each way, ring 2|U|(n-1)/n (SwitchML s3) */
    CHECK_NEAR(model_ina_bytes_each_way(1.0), 1.0);
    CHECK_NEAR(model_ring_bytes_each_way(4, 1.0), 1.5);
}

static model_params_t ina_params(void)
{
    model_params_t p;
    model_params_default(&p);
    p.link_bps = 100e6;
    p.packet_elems = 2048;
    p.overhead_bytes = 74;
    p.switch_pkt_s = 10e-6;
    p.switch_threads = 2;
    p.hop_s = 50e-6;
    p.slots = 4;
    return p;
}

TEST(model_ina_bounds, 5)
{
    model_params_t p = ina_params();
    double bytes = 2048.0 * 4 * 100; /* 100 packets */
    /* rtt = 2 (50 us + 8266 B x 8 / 100 Mbit/s) + 10 us */
    double rtt = 2 * (50e-6 + 8266 * 8 / 100e6) + 10e-6;
    CHECK_NEAR(model_ina_rtt(&p), rtt);
    model_time_t t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.link_s, (bytes + 100 * 74) * 8 / 100e6); /* 66.128 ms */
    CHECK_NEAR(t.proc_s, 4 * 100 * 10e-6 / 2); /* 2 ms */
    CHECK_NEAR(t.window_s, 100 * rtt / 4);
    CHECK_NEAR(t.total_s, t.link_s + rtt);
    CHECK(strcmp(t.bound, "link") == 0);
    /* one slot: 100 round trips */
    p.slots = 1;
    t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.total_s, 100 * rtt + rtt);
    CHECK(strcmp(t.bound, "window") == 0);
    /* one host at 50 Mbit/s: INA waits for the slowest contributor too */
    p.slots = 4;
    p.slow_bps = 50e6;
    CHECK_NEAR(model_allreduce(MODEL_INA, &p, 4, bytes).link_s, (bytes + 7400) * 8 / 50e6);
    /* a slow switch: 1 ms per packet -> 4 x 100 x 1 ms / 2 threads = 200 ms */
    p.slow_bps = 0;
    p.switch_pkt_s = 1e-3;
    t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.proc_s, 0.2);
    CHECK(strcmp(t.bound, "switch") == 0);
    /* a wire-efficiency check: SwitchML's 256-element packets, 76 B of headers: 93.1% */
    CHECK_NEAR(model_wire_efficiency(1024, 76), 1024.0 / 1100.0);
}

TEST(model_ina_hierarchy, 5)
{
    model_params_t p = ina_params();
    p.switch_pkt_s = 1e-3;
    double bytes = 2048.0 * 4 * 100;
    /* flat 8 workers: the switch handles 8 x 100 packets */
    CHECK_NEAR(model_allreduce(MODEL_INA, &p, 8, bytes).proc_s, 8 * 100 * 1e-3 / 2);
    /* 2 levels of fan-out 4: leaves have 4 children, the spine 2: 4 x 100 */
    p.levels = 2;
    p.fanout = 4;
    CHECK_EQ_INT(model_fanout(&p, 8), 4);
    CHECK_NEAR(model_allreduce(MODEL_INA, &p, 8, bytes).proc_s, 4 * 100 * 1e-3 / 2);
    /* 2 levels: twice the hops and the switch work in the round trip */
    CHECK_NEAR(model_ina_rtt(&p), 4 * (50e-6 + 8266 * 8 / 100e6) + 2e-3);
    /* fan-out from the levels: 1024 workers over 2 levels -> 32 */
    p.fanout = 0;
    CHECK_EQ_INT(model_fanout(&p, 1024), 32);
    /* 3 levels of fan-out 4 over 100 workers: the root has ceil(100/16) = 7 children */
    p.levels = 3;
    p.fanout = 4;
    CHECK_NEAR(model_allreduce(MODEL_INA, &p, 100, bytes).proc_s, 7 * 100 * 1e-3 / 2);
}

TEST(model_compression_overlap, 5)
{
    model_params_t p = ina_params();
    p.switch_pkt_s = 0;
    p.hop_s = 0;
    p.slots = 1000;
    p.ratio = 4;
    p.enc_Bps = p.dec_Bps = 1e8;
    double bytes = 2048.0 * 4 * 100;
    double link = (bytes / 4 + 7400) * 8 / 100e6; /* 16.976 ms */
    double code = 2 * bytes / 1e8; /* 16.384 ms: encode + decode */
    double rtt = model_ina_rtt(&p);
    model_time_t t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.link_s, link);
    CHECK_NEAR(t.total_s, link + rtt); /* overlapped: the slower of the two */
    p.code_overlap = 0;
    t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.total_s, link + code + rtt); /* in turn: the sum */
    CHECK(strcmp(t.bound, "codec") == 0 || strcmp(t.bound, "link") == 0);
    /* the aggregator's coding: (n decodes + 1 encode) per value, over its threads */
    p.code_overlap = 1;
    p.agg_value_s = 1e-7;
    t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.total_s, 5 * (bytes / 4) * 1e-7 / 2 + rtt);
    CHECK(strcmp(t.bound, "codec") == 0);
    /* coding on the worker's protocol thread, pipelined with the wire: the worker's stage is
     * its per-element work plus the coding, the link runs beside it */
    p.agg_value_s = 0;
    p.worker_elem_s = 1e-8;
    p.code_inline = 1;
    t = model_allreduce(MODEL_INA, &p, 4, bytes);
    double worker = (bytes / 4) * 1e-8 + code; /* 18.432 ms > the link's 16.976 */
    CHECK_NEAR(t.total_s, worker + rtt);
    CHECK(strcmp(t.bound, "worker") == 0);
    p.worker_elem_s = 0;
    t = model_allreduce(MODEL_INA, &p, 4, bytes);
    CHECK_NEAR(t.total_s, link + rtt); /* coding alone is below the link: still link-bound */
}

TEST(model_ps_ca_tree, 5)
{
    model_params_t p;
    model_params_default(&p);
    p.link_bps = 1e9;
    p.msg_s = 0;
    /* PS: the server's link carries 8 x 1 MB: 64 ms; CA: each downlink 7 MB: 56 ms */
    CHECK_NEAR(model_allreduce(MODEL_PS, &p, 8, 1e6).total_s, 0.064);
    CHECK_NEAR(model_allreduce(MODEL_CA, &p, 8, 1e6).total_s, 0.056);
    /* tree (Table II): bandwidth B/2 -> 16 ms, delay 2 log2(8) x 1 ms */
    p.msg_s = 1e-3;
    p.fanout = 2;
    CHECK_NEAR(model_allreduce(MODEL_TREE, &p, 8, 1e6).total_s, 0.016 + 0.006);
    /* compression divides the wire: PS with ratio 50 */
    p.msg_s = 0;
    p.ratio = 50;
    CHECK_NEAR(model_allreduce(MODEL_PS, &p, 8, 1e6).total_s, 0.064 / 50);
    /* CA decodes what it receives: 7 MB at 10 MB/s = 0.7 s bounds it */
    p.dec_Bps = 1e7;
    CHECK_NEAR(model_allreduce(MODEL_CA, &p, 8, 1e6).total_s, 0.7);
}

TEST(model_iteration_buckets, 5)
{
    model_params_t p;
    model_params_default(&p);
    p.link_bps = 8e7; /* 10 MB/s */
    p.msg_s = 0;
    p.compute_s = 0.4;
    p.buckets = 4;
    /* ring of 2 over a 1 MB bucket: 2 steps of 0.5 MB = 0.1 s; compute 0.1 s per bucket */
    CHECK_NEAR(model_allreduce(MODEL_RING, &p, 2, 1e6).total_s, 0.1);
    p.overlap = 1;
    CHECK_NEAR(model_iteration(MODEL_RING, &p, 2, 4e6), 0.1 + 3 * 0.1 + 0.1);
    p.overlap = 0;
    CHECK_NEAR(model_iteration(MODEL_RING, &p, 2, 4e6), 0.4 + 4 * 0.1);
}

TEST(model_p4sgd_equations, 5)
{
    CHECK_NEAR(model_p4sgd_dp(1, 2, 4, 100, 10, 0.5), 1 + 0.5 + 10 + 0.5); /* eq. 1 */
    CHECK_NEAR(model_p4sgd_mp(1, 2, 8, 4, 0.5), 1 + 2 + 2 + 0.5); /* eq. 2 */
    CHECK_NEAR(model_p4sgd_mp_pipelined(4, 2, 64, 8, 8, 4, 0.5), 0.5 + 2 + 2 + 0.5); /* eq. 3 */
}

TEST(model_params_rejected, 5)
{
    model_params_t p;
    char err[128];
    model_params_default(&p);
    CHECK_EQ_INT(model_params_check(&p, err, sizeof(err)), 0);
    p.link_bps = 0;
    CHECK_EQ_INT(model_params_check(&p, err, sizeof(err)), -EINVAL);
    CHECK(strstr(err, "link rate") != NULL);
    model_params_default(&p);
    p.levels = 9;
    CHECK_EQ_INT(model_params_check(&p, err, sizeof(err)), -EINVAL);
    model_params_default(&p);
    p.hop_s = -1;
    CHECK_EQ_INT(model_params_check(&p, err, sizeof(err)), -EINVAL);
    model_params_default(&p);
    p.stream_eff = 1.5;
    CHECK_EQ_INT(model_params_check(&p, err, sizeof(err)), -EINVAL);
    model_params_default(&p);
    p.ring_step_s = -1e-3;
    CHECK_EQ_INT(model_params_check(&p, err, sizeof(err)), -EINVAL);
}
