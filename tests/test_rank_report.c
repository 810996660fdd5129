/*
 * test_rank_report.c - what a rank tells its parent (bench/rank_report.c) and its collection
 * (bench_ranks_collect_reports): a report survives its JSON line exactly, a line with more
 * samples than room or without its time window is refused, and of N local ranks the parent
 * decodes the whole lines and marks a rank that wrote half a line or nothing.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/bench/rank_report.h"
#include "apps/bench/ranks.h"
#include "harness.h"
#include "lib/base/util.h"

#define SAMPLES 2000u

static const bench_rank_meta_t meta = {.name = "inagg",
                                       .world = 3,
                                       .elems = 1000,
                                       .dtype = "float32",
                                       .packet_elems = 256,
                                       .window = 8};

/* A report of rank `rank` with SAMPLES distinct samples and every counter set. */
static void fill(bench_rank_report_t *r, uint32_t rank)
{
    bench_rank_report_reset(r);
    r->rank = (int32_t)rank;
    r->verified = 1;
    for (uint32_t i = 0; i < SAMPLES; i++)
        r->times_s[r->iters++] = 1e-6 * (i + 1) + 1e-13 * rank;
    r->t_start = 1.7e9 + 0.123456789;
    r->t_end = r->t_start + 2.5;
    r->cpu_s = 0.75;
    r->max_err = 0.5;
    r->wrong = 3;
    r->checksum = 0xfedcba9876543210ull;
    r->stats.packets_sent = 12345;
    r->stats.retransmissions = 67;
    r->codec.encode_ns = 890;
    snprintf(r->error, sizeof(r->error), "rank %u: a \"quoted\" reason", rank);
}

TEST(rank_report_round_trip_is_exact, 10)
{
    bench_rank_report_t *in = bench_rank_reports_new(2, SAMPLES);
    CHECK(in != NULL);
    fill(&in[0], 7);
    char *line = bench_rank_report_encode(&in[0], &meta);
    CHECK(line != NULL && line[strlen(line) - 1] == '\n' && !strchr(line, '\n')[1]);
    CHECK_EQ_INT(bench_rank_report_decode(line, &in[1]), 0);
    const bench_rank_report_t *a = &in[0], *b = &in[1];
    CHECK_EQ_INT(b->rank, 7);
    CHECK_EQ_INT(b->iters, SAMPLES);
    CHECK(memcmp(a->times_s, b->times_s, SAMPLES * sizeof(double)) == 0);
    CHECK(b->t_start == a->t_start && b->t_end == a->t_end);
    CHECK(b->verified && b->wrong == 3 && b->checksum == a->checksum);
    CHECK(b->stats.packets_sent == 12345 && b->stats.retransmissions == 67);
    CHECK(b->codec.encode_ns == 890 && fabs(b->cpu_s - 0.75) < 1e-12);
    CHECK_MSG(strcmp(b->error, a->error) == 0, "error '%s'", b->error);
    free(line);
    free(in);
}

/* Each counter goes out under its own field's name with its own value (the 32-bit ones too,
 * beside non-zero neighbours), and comes back into that field alone. */
TEST(rank_report_counters_keyed_by_field_with_their_values, 10)
{
    bench_rank_report_t *r = bench_rank_reports_new(2, SAMPLES);
    CHECK(r != NULL);
    fill(&r[0], 2);
    r[0].stats.duplicates_ignored = 11;
    r[0].stats.bytes_sent = 1ull << 40;
    r[0].stats.bytes_received = 13;
    r[0].stats.srtt_us = 4000000001u;
    r[0].stats.rto_us = 77; /* not carried */
    r[0].codec.decode_ns = 17;
    r[0].codec.overlap_ns = 19;
    r[0].codec.rto_code_floor_us = 23;
    r[0].codec.chunks_encoded = 0x500000029ull;
    r[0].codec.chunks_ahead = 31;
    char *line = bench_rank_report_encode(&r[0], &meta);
    CHECK(line != NULL);
    const char *want[] = {"\"packets_sent\":12345,",    "\"retransmissions\":67,",
                          "\"duplicates_ignored\":11,", "\"bytes_sent\":1099511627776,",
                          "\"bytes_received\":13,",     "\"srtt_us\":4000000001,",
                          "\"encode_ns\":890,",         "\"decode_ns\":17,",
                          "\"overlap_ns\":19,",         "\"chunks_encoded\":21474836521,",
                          "\"chunks_ahead\":31,",       "\"rto_code_floor_us\":23,"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        CHECK_MSG(strstr(line, want[i]) != NULL, "%s not in %s", want[i], line);
    CHECK_EQ_INT(bench_rank_report_decode(line, &r[1]), 0);
    CHECK(r[1].stats.srtt_us == 4000000001u && r[1].stats.rto_us == 0);
    CHECK(r[1].stats.bytes_sent == 1ull << 40 && r[1].codec.chunks_encoded == 0x500000029ull);
    CHECK(r[1].codec.rto_code_floor_us == 23 && r[1].codec.chunks_ahead == 31);
    free(line);
    free(r);
}

TEST(rank_report_refuses_what_does_not_fit_or_lacks_its_window, 10)
{
    bench_rank_report_t *r = bench_rank_reports_new(2, SAMPLES);
    CHECK(r != NULL);
    fill(&r[0], 1);
    char *line = bench_rank_report_encode(&r[0], &meta);
    CHECK(line != NULL);
    r[1].cap = SAMPLES - 1;
    CHECK_EQ_INT(bench_rank_report_decode(line, &r[1]), -E2BIG);
    r[1].cap = SAMPLES;
    char *cut = strstr(line, "\"t_start\"");
    CHECK(cut != NULL);
    cut[1] = 'x'; /* the key is gone */
    CHECK_EQ_INT(bench_rank_report_decode(line, &r[1]), -EINVAL);
    CHECK_EQ_INT(bench_rank_report_decode("no report here", &r[1]), -EINVAL);
    free(line);
    free(r);
}

/* Rank 0 writes its whole line, rank 1 half of it, rank 2 nothing. */
static int rank_main(uint32_t rank, int fd, void *arg)
{
    (void)arg;
    bench_rank_report_t *r = bench_rank_reports_new(1, SAMPLES);
    if (!r)
        return 1;
    fill(r, rank);
    int rc = 0;
    if (rank == 0) {
        rc = bench_rank_report_write(fd, r, &meta);
    } else if (rank == 1) {
        char *line = bench_rank_report_encode(r, &meta);
        rc = line && write(fd, line, strlen(line) / 2) > 0 ? 0 : 1;
        free(line);
    }
    free(r);
    return rc == 0 ? 0 : 1;
}

TEST(rank_reports_collected_whole_and_partial_ones_marked, 20)
{
    launch_ranks_t g;
    char err[256];
    CHECK_EQ_INT(launch_ranks_start(&g, 3, rank_main, NULL, LAUNCH_PIPE, err, sizeof(err)), 0);
    bench_rank_report_t *reps = bench_rank_reports_new(3, SAMPLES);
    int ok[3];
    CHECK(reps != NULL);
    int open = bench_ranks_collect_reports(&g, 3, reps, SAMPLES * 32u + 16384u, ok,
                                           util_now_ns() + 5000000000ull, 50, NULL, NULL);
    CHECK_EQ_INT(open, 0);
    CHECK(ok[0] && !ok[1] && !ok[2]);
    CHECK_EQ_INT(reps[0].rank, 0);
    CHECK_EQ_INT(reps[0].iters, SAMPLES);
    CHECK(reps[0].times_s[SAMPLES - 1] == 1e-6 * SAMPLES);
    for (uint32_t k = 0; k < 3; k++)
        launch_ranks_wait_one(&g, k, 5000);
    free(reps);
}
