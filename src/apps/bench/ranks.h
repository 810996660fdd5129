/*
 * ranks.h - the parent's side of N local ranks (launch_ranks_start with LAUNCH_PIPE): each
 * rank's report (bench/rank_report.h: one JSON line) read whole from its pipe, all ranks at
 * once under one deadline, so a silent rank costs the run its time limit and no more, and a
 * rank that writes a long report never blocks on a parent reading another rank.
 */
#ifndef INAGG_BENCH_RANKS_H
#define INAGG_BENCH_RANKS_H

#include <stddef.h>
#include <stdint.h>

#include "apps/bench/rank_report.h"
#include "apps/launch/launch.h"

/* Read up to `size` bytes of rank k's report into (char *)reports + k * size, for the n
 * ranks of g, until each pipe has given `size` bytes or closed, or until deadline_ns
 * (util_now_ns) passes. tick(ctx), when not NULL, runs between polls, at least every
 * poll_ms. got[k]: the bytes rank k gave. Closes the pipes it finished with. Returns how many
 * ranks were still open at the deadline (0: every report is in or its rank closed early). */
uint32_t bench_ranks_collect(launch_ranks_t *g, uint32_t n, void *reports, size_t size, size_t *got,
                             uint64_t deadline_ns, int poll_ms, void (*tick)(void *ctx), void *ctx);

/* Every rank's report line from its pipe (bench_ranks_collect, lines up to line_max bytes),
 * each decoded into reps[k] (times_s and cap set by the caller); ok[k]: 1 when rank k's line
 * came whole (its pipe closed after it) and decoded, else 0. Returns how many ranks were still
 * open at the deadline, or -ENOMEM. */
int bench_ranks_collect_reports(launch_ranks_t *g, uint32_t n, bench_rank_report_t *reps,
                                size_t line_max, int *ok, uint64_t deadline_ns, int poll_ms,
                                void (*tick)(void *ctx), void *ctx);

#endif /* INAGG_BENCH_RANKS_H */
