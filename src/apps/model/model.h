/*
 * model.h - the performance model of allreduce and of a training iteration: in-network
 * aggregation (flat or a hierarchy of switches), ring, tree, parameter server and concurrent
 * allreduce, with or without compression and overlap. Pure arithmetic (no I/O, no clock):
 * every function maps parameters to seconds (or slots), and each cites the equation it
 * implements. docs/MODEL.md gives the equations, the calibration and the validation.
 *
 * Sources: P4SGD (Huang et al., TPDS 2023) equations 1-3; SwitchML (Sapio et al., NSDI 2021)
 * section 3 (traffic 2|U| against 4|U|(n-1)/n) and appendix C (pool size from the
 * bandwidth-delay product); AllReduce-Switch (Liu et al., TCSI 2021) section II and Table II
 * (tree, ring, in-network; ring at n*B_min/2(n-1)); GCOW (He, ETH MSc thesis 2024) section
 * 2.1, Table 2.1 and section 4.4 (parameter server, concurrent and ring allreduce, with and
 * without compression and compute-communication overlap).
 */
#ifndef INAGG_MODEL_H
#define INAGG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#define MODEL_MAX_WORKERS 1024u
#define MODEL_MAX_LEVELS 4u

/* The systems the model compares. */
typedef enum model_sys {
    MODEL_INA, /* in-network aggregation: SwitchML's streaming pool, a switch per level */
    MODEL_RING, /* ring allreduce: reduce-scatter then allgather, 2(n-1) steps */
    MODEL_TREE, /* tree allreduce: reduce up a tree of fan-out m, broadcast down */
    MODEL_PS, /* one parameter server (GCOW's PS): every worker pushes, the server sends */
    MODEL_CA, /* concurrent allreduce (GCOW's CA): an allgather, each worker sums N copies */
    MODEL_NSYS
} model_sys_t;
extern const char *const model_sys_name[MODEL_NSYS]; /* ina, ring, tree, ps, ca */

typedef struct model_params {
    /* links */
    double link_bps; /* B: each host link's rate, each way (bit/s) */
    double slow_bps; /* the slowest host link (B_min); 0: every link at link_bps */
    double hop_s; /* tau: one-way latency of one hop, processing included (s) */
    /* packets (in-network aggregation) */
    uint32_t packet_elems; /* k: elements per packet */
    uint32_t elem_bytes; /* bytes per element (4) */
    uint32_t overhead_bytes; /* bytes per packet on the wire beyond the payload (headers) */
    uint32_t slots; /* s: packets in flight per worker; 0: the pool size from the BDP */
    /* processing */
    double switch_pkt_s; /* switch CPU per contribution packet (receive, check, add, send) */
    uint32_t switch_threads; /* dataplane threads sharing that work */
    double worker_elem_s; /* worker CPU per element (convert out and back in) */
    /* host-to-host transport (ring, tree, PS, CA) */
    double msg_s; /* alpha: fixed cost of one message step between two hosts (s) */
    double ring_step_s; /* the ring's further cost per step of a large message: a step ends
                              when the slowest of the n hosts has received, reduced and sent
                              on its chunk (calibrated on the testbed; 0: none) */
    double stream_eff; /* share of a link one host-to-host stream carries (TCP: ~0.99) */
    /* compression */
    double ratio; /* uncompressed over compressed bytes; 1: none */
    double enc_Bps, dec_Bps; /* a worker's codec: uncompressed bytes per second; 0: free */
    double agg_value_s; /* aggregator's coding per value (n decodes + 1 encode counted per
                              value coded); 0: free (a codec at line rate on the aggregator) */
    int code_overlap; /* coding pipelined with the wire (inagg: always, packet by
                              packet within the window; GCOW: the codec on the NIC), else
                              added to it (GCOW: a bucket coded whole before it is sent) */
    int code_inline; /* INA with code_overlap: the worker's coding runs on its protocol
                              thread (inagg without the encoder helper), so it adds to the
                              worker's per-element work instead of running beside it */
    int overlap; /* with compute_s: the backward pass of bucket i+1 overlapped
                              with the communication of bucket i (GCOW Fig. 2.2) */
    /* topology */
    uint32_t levels; /* switch levels (1: one switch); tree depth for MODEL_TREE */
    uint32_t fanout; /* children per switch (levels > 1) and the tree's m; 0: n^(1/L) */
    /* a training iteration (GCOW section 4.4) */
    double compute_s; /* forward + backward time of one iteration; 0: allreduce only */
    uint32_t buckets; /* gradient buckets the backward pass emits (>= 1) */
} model_params_t;

/* Defaults: 100 Gbit/s, 2048-element packets, 74 B of headers, no compression, one level. */
void model_params_default(model_params_t *p);

/* A sentence saying what is wrong with p (0), or -EINVAL with the reason in err. */
int model_params_check(const model_params_t *p, char *err, size_t errlen);

/* ---- building blocks ---------------------------------------------------------------------- */

/* Payload share of the wire for a payload of `payload` bytes and `overhead` header bytes:
 * SwitchML section 5 (32, 64, 256 elements: 63%, 77%, 93% of line rate). */
double model_wire_efficiency(double payload, double overhead);

/* SwitchML appendix C: the pool size s = ceil(BDP / b), BDP = rate * RTT (bytes), b the
 * packet's bytes on the wire; next power of two when pow2. At least 1. */
uint32_t model_pool_size(double rate_bps, double rtt_s, double packet_bytes, int pow2);

/* The effective bandwidth of ring allreduce whose slowest link runs at bmin (AllReduce-Switch
 * section II-C: n * B_min / 2(n-1)); n >= 2. */
double model_ring_eff_bw(uint32_t n, double bmin);

/* Bytes each worker sends (= receives) per allreduce of U bytes (SwitchML section 3):
 * in-network 2|U| in total (|U| each way), ring 4|U|(n-1)/n (2|U|(n-1)/n each way). */
double model_ina_bytes_each_way(double u);
double model_ring_bytes_each_way(uint32_t n, double u);

/* The switch levels' fan-out: p->fanout, or the L-th root of n rounded up. */
uint32_t model_fanout(const model_params_t *p, uint32_t n);

/* Round-trip time of one packet through the in-network path: up and down `levels` hops,
 * serialization of one packet per hop, one switch packet cost per level. */
double model_ina_rtt(const model_params_t *p);

/* ---- allreduce time of `bytes` per worker across n workers -------------------------------- */

/* The time one allreduce takes, with its parts (what bounds it). */
typedef struct model_time {
    double total_s;
    double link_s; /* the busiest link's bytes over its rate */
    double proc_s; /* the busiest processor (switch, server, worker) */
    double window_s; /* in-network: s packets per round trip (SwitchML appendix C) */
    double code_s; /* coding time on the critical path's processor */
    double latency_s; /* fixed: round trips, message steps */
    const char *bound; /* "link", "switch", "window", "codec", "worker", "latency", "server" */
} model_time_t;

model_time_t model_allreduce(model_sys_t sys, const model_params_t *p, uint32_t n, double bytes);

/* ---- a training iteration (GCOW section 4.4, P4SGD section II) ---------------------------- */

/* Iteration time: compute_s plus the allreduce of `bytes` in p->buckets buckets; with
 * p->overlap the communication of bucket i runs during the backward pass of bucket i+1 (a
 * two-stage pipeline), else after the whole backward pass. */
double model_iteration(model_sys_t sys, const model_params_t *p, uint32_t n, double bytes);

/* ---- P4SGD's per-iteration time (section II and III-B) ------------------------------------ */

/* Eq. 1, data parallel: T_fD + T_bD / B + D / BW + T_l (D: model bytes, bw: bytes/s). */
double model_p4sgd_dp(double t_fd, double t_bd, double batch, double d_bytes, double bw_Bps,
                      double t_l);
/* Eq. 2, model parallel: T_fM + T_bM + B / BW + T_l (B: bytes of the batch's activations). */
double model_p4sgd_mp(double t_fm, double t_bm, double b_bytes, double bw_Bps, double t_l);
/* Eq. 3, micro-batch pipelined model parallel: (MB / B) T_fM + T_bM + MB / BW + T_l. */
double model_p4sgd_mp_pipelined(double t_fm, double t_bm, double batch, double micro,
                                double mb_bytes, double bw_Bps, double t_l);

/* "100mbit", "10gbit", "25G", a number of bit/s or of Mbit/s ("100") -> bit/s; 0 ok, -EINVAL
 * bad. */
int model_parse_rate(const char *text, double *bps);
/* Bytes with K/M/G (powers of 1024) -> bytes; 0 ok, -EINVAL bad. */
int model_parse_bytes(const char *text, double *bytes);

#endif /* INAGG_MODEL_H */
