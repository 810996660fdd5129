/*
 * test_bench_ranks.c - bench_ranks_collect (bench/ranks.c), the parent's side of a
 * benchmark's local ranks: whole reports from every rank, a short report seen as short, and a
 * silent rank costing the run its deadline and no more.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/ranks.h"
#include "harness.h"
#include "lib/base/util.h"

#define REPORT_BYTES 100000u /* more than a pipe holds: the rank blocks until it is read */

/* Rank 0 writes a whole report, rank 1 half of one and exits, rank 2 stays silent. */
static int rank_main(uint32_t rank, int fd, void *arg)
{
    (void)arg;
    if (rank == 2) {
        sleep(20);
        return 0;
    }
    size_t n = rank == 0 ? REPORT_BYTES : REPORT_BYTES / 2;
    char *buf = malloc(n);
    if (!buf)
        return 1;
    memset(buf, 'a' + (int)rank, n);
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, buf + off, n - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    free(buf);
    return 0;
}

static void count_tick(void *arg) { (*(int *)arg)++; }

TEST(bench_ranks_collect_whole_short_and_silent, 20)
{
    launch_ranks_t g;
    char err[256];
    CHECK_EQ_INT(launch_ranks_start(&g, 3, rank_main, NULL, LAUNCH_PIPE, err, sizeof(err)), 0);
    char *reports = calloc(3, REPORT_BYTES);
    size_t got[3];
    int ticks = 0;
    uint64_t t0 = util_now_ns();
    uint32_t open = bench_ranks_collect(&g, 3, reports, REPORT_BYTES, got, t0 + 500000000ull, 50,
                                        count_tick, &ticks);
    double waited = (double)(util_now_ns() - t0) / 1e9;
    CHECK_EQ_INT(open, 1);
    CHECK_EQ_INT(got[0], REPORT_BYTES);
    CHECK_EQ_INT(got[1], REPORT_BYTES / 2);
    CHECK_EQ_INT(got[2], 0);
    CHECK(reports[0] == 'a' && reports[REPORT_BYTES - 1] == 'a');
    CHECK(reports[REPORT_BYTES] == 'b' && reports[REPORT_BYTES + REPORT_BYTES / 2 - 1] == 'b');
    CHECK_MSG(waited >= 0.45 && waited < 3.0, "waited %.2f s for a 0.5 s deadline", waited);
    CHECK_MSG(ticks >= 5, "%d ticks of at most 50 ms in 0.5 s", ticks);
    launch_ranks_kill(&g);
    free(reports);
}
