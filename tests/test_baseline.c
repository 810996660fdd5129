/*
 * test_baseline.c - the benchmark's tensor contents (bench/benchdata.h) and the MPI
 * baseline runner (bench/baseline_mpi.c): a real mpirun run when OpenMPI and
 * inagg-mpi-bench are there, and the failure paths (missing program, timeout, non-zero exit,
 * garbage output) that must end with a clear message instead of a hang.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/bench/baseline_mpi.h"
#include "apps/bench/benchdata.h"
#include "apps/launch/launch.h"
#include "harness.h"
#include "lib/base/util.h"

TEST(benchdata_int32_range_and_determinism, 10)
{
    const uint64_t seeds[] = {0, 1, 42, UINT64_MAX};
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (size_t s = 0; s < INAGG_ARRAY_LEN(seeds); s++) {
        for (uint32_t r = 0; r < 64; r++) {
            for (uint64_t i = 0; i < 4096; i++) {
                int32_t v = bench_value_i32(seeds[s], r, i);
                CHECK(v >= -BENCH_I32_BOUND && v < BENCH_I32_BOUND);
                CHECK_EQ_INT(v, bench_value_i32(seeds[s], r, i));
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        }
    }
    /* The range is used, not just respected. */
    CHECK(lo < -BENCH_I32_BOUND + BENCH_I32_BOUND / 64);
    CHECK(hi > BENCH_I32_BOUND - BENCH_I32_BOUND / 64);
    /* Ranks, seeds and indices all change the values. */
    int same_rank = 0, same_seed = 0;
    for (uint64_t i = 0; i < 1000; i++) {
        same_rank += bench_value_i32(7, 0, i) == bench_value_i32(7, 1, i);
        same_seed += bench_value_i32(7, 0, i) == bench_value_i32(8, 0, i);
    }
    CHECK(same_rank < 5 && same_seed < 5);
    /* Far indices (beyond 2^32) work and the sum of 64 ranks matches an int64 sum. */
    for (uint64_t i = (1ull << 40); i < (1ull << 40) + 1000; i++) {
        int64_t sum = 0;
        for (uint32_t r = 0; r < 64; r++)
            sum += bench_value_i32(3, r, i);
        CHECK(sum > INT32_MIN && sum < INT32_MAX);
        CHECK_EQ_INT(bench_expected_i32(3, 64, i), sum);
    }
}

TEST(benchdata_float32_range_and_blocks, 10)
{
    double lo = INFINITY, hi = 0;
    int neg = 0, pos = 0;
    for (uint32_t r = 0; r < 8; r++) {
        for (uint64_t i = 0; i < 256 * BENCH_F32_BLOCK; i += 7) {
            float v = bench_value_f32(5, r, i);
            CHECK(isfinite(v) && isnormal(v));
            float again = bench_value_f32(5, r, i);
            CHECK(memcmp(&v, &again, sizeof(v)) == 0);
            double m = fabs((double)v);
            CHECK(m >= ldexp(1.0, BENCH_F32_EXP_MIN - BENCH_F32_EXP_SPREAD + 1));
            CHECK(m < ldexp(1.0, BENCH_F32_EXP_MAX + 1));
            lo = m < lo ? m : lo;
            hi = m > hi ? m : hi;
            neg += v < 0;
            pos += v > 0;
        }
    }
    CHECK(lo < ldexp(1.0, -18) && hi > ldexp(1.0, 18)); /* roughly 2^-20..2^20 */
    CHECK(neg > pos / 2 && pos > neg / 2);
    /* Within a block the magnitudes stay within the block's 8 binades, on every rank. */
    for (uint64_t b = 0; b < 64; b++) {
        double bmin = INFINITY, bmax = 0;
        for (uint32_t r = 0; r < 4; r++) {
            for (uint64_t i = b * BENCH_F32_BLOCK; i < (b + 1) * BENCH_F32_BLOCK; i++) {
                double m = fabs((double)bench_value_f32(9, r, i));
                bmin = m < bmin ? m : bmin;
                bmax = m > bmax ? m : bmax;
            }
        }
        CHECK(bmax / bmin < ldexp(1.0, BENCH_F32_EXP_SPREAD));
    }
    double mag;
    double sum = bench_expected_f32(5, 4, 123, &mag);
    double manual = 0;
    for (uint32_t r = 0; r < 4; r++)
        manual += (double)bench_value_f32(5, r, 123);
    CHECK(sum == manual && mag >= fabs(sum));
}

/* SKIPs unless mpirun is installed and inagg-mpi-bench was built next to the tests. */
static void require_mpi(void)
{
    char path[PATH_MAX];
    if (launch_find_mpirun(path, sizeof(path)) != 0)
        SKIP("mpirun not installed");
    snprintf(path, sizeof(path), "%s/inagg-mpi-bench", harness_build_dir());
    if (access(path, X_OK) != 0)
        SKIP("inagg-mpi-bench not built (needs mpicc)");
    setenv("INAGG_MPI_BENCH", path, 1);
}

static void check_sane(const struct baseline_mpi_result *r, size_t elems)
{
    CHECK(r->verified == 1);
    CHECK(r->tat_min_ms > 0 && r->tat_min_ms <= r->tat_median_ms);
    CHECK(r->tat_median_ms <= r->tat_max_ms && r->tat_max_ms < 60000);
    double ate = (double)elems / (r->tat_median_ms / 1e3);
    CHECK_MSG(fabs(r->ate_per_s - ate) <= 1e-3 * ate, "ate %g vs %g", r->ate_per_s, ate);
    CHECK(r->lat_p50_us > 0 && r->lat_p50_us <= r->lat_p99_us);
    CHECK(r->lat_p99_us <= r->lat_p999_us);
    CHECK(fabs(r->lat_p999_us - r->tat_max_ms * 1e3) <= 1e-3 * r->lat_p999_us);
}

TEST(baseline_mpi_runs_and_verifies, 120)
{
    require_mpi();
    for (int f = 0; f < 2; f++) {
        struct baseline_mpi_params p = {.workers = 2,
                                        .elems = 100000,
                                        .dtype_float = f,
                                        .iters = 3,
                                        .warmup = 1,
                                        .seed = 11,
                                        .timeout_s = 50};
        struct baseline_mpi_result r;
        char err[512];
        int rc = baseline_mpi_run(&p, &r, err, sizeof(err));
        CHECK_MSG(rc == 0, "%s: %s", f ? "float32" : "int32", err);
        check_sane(&r, p.elems);
    }
    struct baseline_mpi_params lat = {.workers = 3,
                                      .elems = 256,
                                      .dtype_float = 1,
                                      .iters = 50,
                                      .warmup = 5,
                                      .latency_mode = 1,
                                      .seed = 2,
                                      .timeout_s = 50};
    struct baseline_mpi_result r;
    char err[512];
    CHECK_MSG(baseline_mpi_run(&lat, &r, err, sizeof(err)) == 0, "latency: %s", err);
    check_sane(&r, lat.elems);
}

TEST(baseline_mpi_missing_program_fails_clearly, 10)
{
    setenv("INAGG_MPI_BENCH", "/nonexistent", 1);
    struct baseline_mpi_params p = {.workers = 2, .elems = 1000, .iters = 1, .timeout_s = 5};
    struct baseline_mpi_result r;
    char err[512];
    CHECK_EQ_INT(baseline_mpi_run(&p, &r, err, sizeof(err)), -ENOENT);
    CHECK_MSG(strstr(err, "/nonexistent") && strstr(err, "missing"), "message: %s", err);
    CHECK(r.verified == 0);
    p.workers = 0;
    CHECK_EQ_INT(baseline_mpi_run(&p, &r, err, sizeof(err)), -EINVAL);
    CHECK_MSG(strstr(err, "invalid"), "message: %s", err);
}

/* Runs the baseline with a shell script in a fresh directory standing in for
 * inagg-mpi-bench; removes it afterwards. */
static int run_fake(const char *body, unsigned timeout_s, char *err, size_t errlen)
{
    char dir[] = "/tmp/inagg-test-baseline-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/fake-bench", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    CHECK(fclose(f) == 0);
    CHECK(chmod(path, 0755) == 0);
    setenv("INAGG_MPI_BENCH", path, 1);
    struct baseline_mpi_params p = {
        .workers = 2, .elems = 1000, .iters = 1, .timeout_s = timeout_s};
    struct baseline_mpi_result r;
    int rc = baseline_mpi_run(&p, &r, err, errlen);
    unlink(path);
    rmdir(dir);
    return rc;
}

TEST(baseline_mpi_timeout_kills_the_run, 30)
{
    char path[PATH_MAX];
    if (launch_find_mpirun(path, sizeof(path)) != 0)
        SKIP("mpirun not installed");
    char err[512];
    uint64_t t0 = util_now_ns();
    CHECK_EQ_INT(run_fake("echo started >&2; exec sleep 60", 2, err, sizeof(err)), -ETIMEDOUT);
    double s = (double)(util_now_ns() - t0) / 1e9;
    CHECK_MSG(strstr(err, "timed out"), "message: %s", err);
    CHECK_MSG(s >= 1.9 && s < 10, "took %.2f s", s);
}

TEST(baseline_mpi_failure_and_garbage_are_reported, 30)
{
    char path[PATH_MAX];
    if (launch_find_mpirun(path, sizeof(path)) != 0)
        SKIP("mpirun not installed");
    char err[1024];
    CHECK_EQ_INT(run_fake("echo 'rank failed: no memory' >&2; exit 3", 20, err, sizeof(err)), -EIO);
    CHECK_MSG(strstr(err, "status") && strstr(err, "no memory"), "message: %s", err);
    CHECK_EQ_INT(run_fake("echo hello world", 20, err, sizeof(err)), -EPROTO);
    CHECK_MSG(strstr(err, "unparsable") && strstr(err, "hello"), "message: %s", err);
    CHECK_EQ_INT(run_fake("echo '{\"name\":\"mpi\",\"verified\":true}'", 20, err, sizeof(err)),
                 -EPROTO);
    CHECK_MSG(strstr(err, "unparsable"), "message: %s", err);
}
