/*
 * bench_latency.h - the run of `inagg bench latency`: its options, what a run measures and
 * the steps the command calls (bench_latency.c); each rank reports to the parent through
 * bench/rank_report.h. The command's parsing and rendering are cli/cmd_bench_latency.c.
 */
#ifndef INAGG_BENCH_BENCH_LATENCY_H
#define INAGG_BENCH_BENCH_LATENCY_H

#include <stdint.h>

#include "apps/bench/baseline_mpi.h"
#include "apps/bench/bench_floor.h"
#include "apps/launch/launch.h"
#include "inagg.h"

#define LAT_MAX_ITERS 1000000u
#define LAT_MAX_ELEMS 1024u

typedef struct lat_opts {
    uint32_t workers, elems, iters, warmup, slots, timeout_ms;
    int dtype_float;
    inagg_protocol_t protocol;
    double loss;
    uint64_t seed;
    const char *faults, *switch_addr, *json_path, *baseline;
    char faults_buf[160]; /* the spec --loss stands for */
    uint32_t testbed; /* hosts of a testbed to build, 0: loopback */
    const char *link_rate, *fabric, *link_delay; /* tools/testbed's (NULL: its defaults) */
    int single; /* one rank of a job (--rank): its report into report_file */
    uint32_t rank;
    const char *job, *report_file;
    const char *switch_poll; /* --switch-poll: the testbed switch's --poll (NULL: default) */
    const char *switch_multicast; /* --switch-multicast: the testbed switch's --multicast
                                     GROUP or "off" (NULL: the testbed's default) */
    const char *poll; /* --poll: the workers' wait (options.poll_us; NULL: default) */
    uint32_t poll_us;
    int pin_hosts; /* --pin-hosts: with --testbed, host k's worker and floor client on the
                      (k-1)-th CPU (default on) */
    int pin_hosts_given;
    int64_t rank_cpu; /* --rank-cpu: with --rank, the index of its CPU (-1: not pinned) */
} lat_opts_t;

typedef struct lat_result {
    int verified;
    uint32_t n; /* operations measured (0 when the run failed) */
    double p50, p99, p999, mean;
    inagg_stats_t total; /* summed over the workers */
    int have_base;
    struct baseline_mpi_result base;
    double speedup;
    int have_floor; /* with --testbed: the raw UDP ping-pong (bench/bench_floor.h) */
    bench_floor_result_t floor;
    double floor_ratio; /* inagg p50 / floor p50 */
} lat_result_t;

/* "switchml" or "p4sgd". */
const char *lat_proto_name(const lat_opts_t *o);

/* Every iteration on the local ranks (j NULL) or the testbed's, then the MPI baseline when
 * asked. 0 with res filled, or a negative errno after a message. */
int lat_run(const lat_opts_t *o, launch_tbjob_t *j, lat_result_t *res);

/* --rank: one worker against --switch, its report into --report-file. 0, or a negative
 * errno after a message (-EIO: the worker failed; its report says why). */
int lat_run_single(const lat_opts_t *o);

/* Build the testbed and start its switch into *out (freed by the caller after
 * launch_tbjob_down). 0, or a negative errno after a message: -EOPNOTSUPP when testbeds
 * cannot be built here (no root, no network namespaces). */
int lat_testbed_up(const lat_opts_t *o, launch_tbjob_t **out);

/* Take down what lat_testbed_up built, and free j; with $INAGG_BENCH_SWITCH_STATS the
 * testbed switch's counters go to stderr first. */
void lat_testbed_down(launch_tbjob_t *j);

#endif /* INAGG_BENCH_BENCH_LATENCY_H */
