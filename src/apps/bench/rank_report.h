/*
 * rank_report.h - what one rank tells its parent, the same for every benchmark: one JSON line
 * (src/lib/json) with who it is, its verdict and error, its timed samples and its counters. A
 * local rank writes it to its pipe, a rank in a testbed host to its report file or stdout,
 * and the parent decodes it into the same typed struct; tools/gloo_allreduce.py writes the
 * same line for the Gloo baseline.
 */
#ifndef INAGG_BENCH_RANK_REPORT_H
#define INAGG_BENCH_RANK_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "inagg.h"

/* What the line says about the job, besides the rank's own numbers. */
typedef struct bench_rank_meta {
    const char *name; /* the system: "inagg" */
    uint32_t world;
    uint64_t elems;
    const char *dtype; /* "float32" or "int32" */
    uint32_t packet_elems, window;
} bench_rank_meta_t;

typedef struct bench_rank_report {
    int32_t rank;
    int32_t rc; /* inagg_result_t of the first failure, or 0 */
    int32_t verified; /* every checked result was right */
    uint32_t iters; /* timed samples in times_s */
    uint32_t cap; /* decoding: room in times_s (set by the caller) */
    double *times_s; /* this rank's time per timed iteration, seconds */
    double t_start, t_end; /* wall clock (CLOCK_REALTIME) around the timed iterations */
    double t_fail; /* wall clock when it failed (0: it did not) */
    double cpu_s; /* this process's CPU time over them (NaN: not measured) */
    double max_err; /* float32: largest error relative to its bound */
    uint64_t wrong, checksum; /* wrong elements; bench_checksum of the last result */
    inagg_stats_t stats;
    inagg_codec_stats_t codec; /* compressed runs: coding time and its overlap */
    inagg_transport_stats_t transport; /* the endpoints' own counters (RoCE's) */
    inagg_failover_stats_t failover; /* fail-overs to another (or a restarted) switch */
    const char *transport_names[INAGG_TRANSPORT_COUNTERS_MAX]; /* their names */
    char error[640];
} bench_rank_report_t;

/* n reports, each with room for cap samples (times_s, cap set), zeroed, in one allocation the
 * caller frees with free(); NULL when out of memory. */
bench_rank_report_t *bench_rank_reports_new(uint32_t n, uint32_t cap);

/* Zero r but for its times_s and cap. */
void bench_rank_report_reset(bench_rank_report_t *r);

/* The report as one JSON line ending in a newline, in a new buffer (the caller frees it), or
 * NULL when out of memory. */
char *bench_rank_report_encode(const bench_rank_report_t *r, const bench_rank_meta_t *m);

/* Encode r and write the line whole to fd. 0, or a negative errno. */
int bench_rank_report_write(int fd, const bench_rank_report_t *r, const bench_rank_meta_t *m);

/* A report line (the first '{' of text on) into r, whose times_s and cap the caller set;
 * every other field is reset first. 0, or -EINVAL (no rank, verdict, samples or time window)
 * or -E2BIG (more samples than cap). */
int bench_rank_report_decode(const char *text, bench_rank_report_t *r);

#endif /* INAGG_BENCH_RANK_REPORT_H */
