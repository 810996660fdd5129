/*
 * bench_allreduce.h - the run of `inagg bench allreduce`: its options, what one rank reports,
 * what a run measures per tensor size and per system, and the pieces that produce them: run
 * (bench_allreduce_run.c: loopback ranks, or a testbed of namespaces; the baselines), one rank
 * (bench_allreduce_rank.c), the ranks' summary (bench_allreduce_ranks.c), the switches
 * (bench_allreduce_switches.c) and the link-aware defaults (bench_allreduce_defaults.c). The
 * command's parsing and rendering are cli/bench_allreduce_cli.h.
 */
#ifndef INAGG_BENCH_BENCH_ALLREDUCE_H
#define INAGG_BENCH_BENCH_ALLREDUCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "apps/bench/rank_report.h"
#include "apps/launch/launch.h"
#include "inagg.h"

#define AR_CMD "inagg bench allreduce"
#define AR_MAX_ITERS 1000u
#define AR_MAX_SIZES 16
#define AR_MAX_SAMPLES 65536
#define AR_MAX_LEAVES 8
#define AR_MAX_SHARDS 8
/* The testbed's defaults: window bounds, retransmission floor and ceiling, switch threads. */
#define AR_TESTBED_WINDOW_MIN 4u
#define AR_TESTBED_WINDOW_MAX 64u
#define AR_TESTBED_RTO_MIN_US 20000u
#define AR_TESTBED_RTO_MAX_US 500000u
#define AR_TESTBED_SWITCH_THREADS 2u

/* The systems a run measures: inagg, then the baselines in the order --baseline names them. */
typedef enum ar_system { AR_INAGG, AR_MPI, AR_MPI_RING, AR_GLOO, AR_NSYS } ar_system_t;
extern const char *const ar_system_name[AR_NSYS]; /* inagg, mpi, mpi-ring, gloo */
extern const char *const ar_system_key[AR_NSYS]; /* JSON: inagg, mpi, mpi_ring, gloo */

/* Which options the command line gave (1) or left to the defaults (0): the testbed's
 * link-aware defaults apply to the others only. */
typedef struct ar_given {
    uint8_t packet, window, rto_min, rto_max, switch_threads, iters, warmup, workers, dtype;
} ar_given_t;

typedef struct ar_opts {
    uint32_t workers, iters, warmup, packet_elems, window, threads, switch_threads;
    uint32_t rto_min_us, rto_max_us; /* 0: the library's */
    uint32_t timeout_ms;
    uint64_t elems, seed;
    int dtype_float;
    inagg_float_mode_t float_mode;
    inagg_protocol_t protocol;
    const char *compress; /* --compress MODE (NULL: none), checked by codec_parse */
    double loss; /* loopback: injected in the workers; testbed: on the links */
    const char *faults, *switch_addr, *json_path, *plot_path, *job;
    char faults_buf[160];
    int nbase; /* baselines, in the order given; base[0] is `the` baseline */
    ar_system_t base[AR_NSYS];
    int single; /* one rank of a job (--rank): print its report, no switch */
    uint32_t rank;
    uint32_t testbed; /* hosts of a testbed to build, 0: loopback */
    uint32_t leaves, hosts_per_leaf; /* two levels: leaf switches of hosts_per_leaf ranks each
                                  under a spine (0: one switch); a rank joins its leaf as rank
                                  rank % hosts_per_leaf, its data and check are global */
    uint32_t shards; /* switches the job's slots are spread over (0, 1: one) */
    int pin_switches; /* loopback: pin switch process k to CPU k (mod the CPUs) */
    int no_dataplane_auth; /* the ranks' packets go without MACs (only JOIN proves the
                                  launcher's secret): for measuring what the MACs cost */
    uint32_t switch_cpu_share; /* loopback: each switch process capped at this percent of one
                                  CPU (a switch of fixed capacity; 0: uncapped) */
    const char *link_rate; /* as given (tc syntax), passed to tools/testbed */
    const char *fabric; /* tools/testbed --fabric (NULL: its default) */
    const char *xdp; /* tools/testbed --xdp: the inagg fabric's ports on AF_XDP
                                  (auto|on|off; NULL: the tool's default) */
    const char *switch_multicast; /* --switch-multicast: the bridge testbed's switch's
                                  --multicast group (NULL or "off": none) */
    const char *transport; /* --transport udp|roce (NULL: udp) */
    const char *pcap; /* --pcap FILE: the fabric's frames (testbed) */
    const char *roce_psn; /* --roce-psn N: every RoCE QP's first PSN (NULL: random) */
    const char *roce_mtu; /* --roce-mtu N: the RoCE path MTU (NULL: from the link's MTU) */
    const char *link_delay; /* tools/testbed --link-delay (NULL: none) */
    uint64_t link_bps; /* 0: unlimited */
    uint32_t mtu;
    int nsizes; /* 0: the one size --elems */
    uint64_t sizes[AR_MAX_SIZES]; /* bytes per rank, ascending */
    ar_given_t given;
} ar_opts_t;

/* What one rank measured (bench/rank_report.h): one JSON line through a pipe from a forked
 * rank, from a rank on another host (inagg's single-rank mode, tools/gloo_allreduce.py), or
 * printed by `--rank`; room for AR_MAX_ITERS samples (bench_rank_reports_new). */
typedef bench_rank_report_t ar_rank_report_t;

/* The longest report line of a rank: AR_MAX_ITERS samples and the rest. */
#define AR_REPORT_LINE_MAX (AR_MAX_ITERS * 32u + 16384u)

/* One system at one size. Percentages are of one core (machine: of all cores); NaN absent. */
typedef struct ar_sys_result {
    int ran, verified;
    int completed; /* every rank ran every iteration without an error (verified or
                                  not); 0: it failed (join, a call, a process), no numbers */
    uint32_t iters;
    double tat_median_s, tat_min_s, tat_max_s;
    double cpu_switch, cpu_workers, cpu_workers_max, cpu_machine, cpu_softirq;
    char checksum[24];
    int checksums_agree;
    uint64_t packets, retransmissions, duplicates;
    /* fail-overs (the most any rank made), chunks handed on and reduced again (summed), the
     * longest stall of any rank, and stale results dropped (summed) */
    uint64_t failovers, chunks_handed_on, chunks_reduced_again, stale_dropped;
    uint32_t stall_ms_max;
    uint64_t encode_ns, decode_ns, overlap_ns; /* coding, summed over the ranks */
    uint64_t chunks_encoded, chunks_ahead; /* ... and chunks (ahead: by the helpers) */
    uint32_t code_floor_us; /* the largest timeout floor for coding time */
    double worst; /* float32: largest error relative to its bound */
    char error[768];
} ar_sys_result_t;

typedef struct ar_size_result {
    uint64_t elems;
    uint32_t iters, warmup;
    ar_sys_result_t sys[AR_NSYS];
} ar_size_result_t;

typedef struct ar_run {
    ar_opts_t opts; /* as given, with the testbed's link-aware defaults applied */
    const ar_opts_t *o; /* &opts */
    uint32_t world; /* ranks: --workers, or the testbed's hosts */
    int nsizes;
    ar_size_result_t size[AR_MAX_SIZES];
    int on_testbed;
    launch_testbed_t tb;
    char defaults_note[512]; /* the link-aware choices, said once */
    double busy_before; /* the machine's busy share (all cores, %) in the second before
                                  the first measurement: other users' load on a shared box */
    uint32_t nswitch_cpu; /* loopback: CPU seconds each switch process used over the whole
                                  run (shard 0 or the spine first, then the other shards or
                                  the leaves): a sharded job's per-switch load */
    double switch_cpu_s[AR_MAX_SHARDS + AR_MAX_LEAVES];
} ar_run_t;

/* ---- link-aware defaults (bench_allreduce_defaults.c) ---- */

/* The testbed's link-aware defaults for what was not given; a sentence saying what was
 * chosen and why into note. */
void ar_link_defaults(ar_opts_t *o, uint32_t mtu, uint64_t link_bps, char *note, size_t len);
/* The path MTU the run's RoCE ranks use: --roce-mtu, else what the link's MTU carries (the
 * testbed's, else Ethernet's 1500), as the worker's endpoint chooses it. */
uint32_t ar_roce_path_mtu(const ar_opts_t *o);
/* The bytes before a packet's payload: inagg's header, and its MAC unless
 * --no-dataplane-auth. */
uint32_t ar_packet_header_bytes(const ar_opts_t *o);

/* Bytes per rank of one size. */
static inline uint64_t ar_bytes(const ar_size_result_t *s) { return s->elems * 4u; }

/* ---- one rank (bench_allreduce_rank.c) ---- */

/* Run rank `rank` of o->workers against the switch at addr, job `job`: fill, join, warmup
 * and timed allreduces, verify every result. Fills rep (its times_s and cap kept: room for
 * o->iters samples); 0 when every result verified, else a negative errno. */
int ar_rank_run(const ar_opts_t *o, uint32_t rank, const char *addr, const char *job,
                ar_rank_report_t *rep);

/* The memory one rank allocates for o->elems elements (its tensors and their expected
 * results, as ar_rank_run allocates them), bytes. */
uint64_t ar_rank_bytes(const ar_opts_t *o);

/* 0 when the ranks this machine runs (one with --rank, else o->workers: local processes or
 * testbed hosts) fit in its memory at the largest size, each ar_rank_bytes; else -ENOMEM
 * with the figures in err (launch_mem_check). */
int ar_check_memory(const ar_opts_t *o, char *err, size_t errlen);

/* The retransmission timeouts a rank runs with: the options' or the library's defaults. */
void ar_effective_rto(const ar_opts_t *o, uint32_t *rto_us, uint32_t *min_us, uint32_t *max_us);

/* What a report line says about the job of o. */
bench_rank_meta_t ar_rank_meta(const ar_opts_t *o);

/* ---- run (bench_allreduce_run.c) ---- */

/* Every size, every system, locally or on a testbed built and taken down here. 0 when the run
 * produced results (each system's own success is in its result), else a negative errno after
 * a message: -EOPNOTSUPP when the testbed cannot be built on this machine. */
int ar_run(const ar_opts_t *o, ar_run_t *run);

/* The slowest rank's time per iteration into r (median, min, max), verification, checksums,
 * counters and CPU from the ranks' reports. */
void ar_summarize_ranks(const ar_rank_report_t *reps, uint32_t n, uint32_t iters,
                        ar_sys_result_t *r);
/* A system's result before anything is known (times NaN, not verified). */
void ar_result_init(ar_sys_result_t *r);
/* The wall-clock window from the first rank's start to the last rank's end of its timed
 * iterations. */
void ar_ranks_window(const ar_rank_report_t *reps, uint32_t n, double *t0, double *t1);

#endif /* INAGG_BENCH_BENCH_ALLREDUCE_H */
