/*
 * mpi_allreduce_bench.c - inagg-mpi-bench, the OpenMPI baseline of `inagg bench allreduce`.
 * Every rank fills its tensor with the same deterministic values the inagg benchmark uses
 * (bench/benchdata.h), runs warmup + timed MPI_Allreduce(MPI_SUM) calls, verifies the
 * result, and rank 0 prints one line of JSON. Run under mpirun; `inagg bench allreduce
 * --baseline mpi` does that (bench/baseline_mpi.c). Exit: 0 verified, 1 not, 2 bad usage.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/bench/benchdata.h"
#include "lib/json/json.h"

#define MAX_ITERS 1000000u
#define MAX_WARMUP 1000000u
#define MAX_MISMATCH_REPORTS 5

struct opts {
    size_t elems;
    int dtype_float;
    unsigned iters, warmup;
    int latency_mode;
    uint64_t seed;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np N inagg-mpi-bench --elems E --dtype int32|float32\n"
            "                  [--iters K] [--warmup W] [--mode bench|latency] [--seed S]\n"
            "\n"
            "The OpenMPI baseline of `inagg bench allreduce`: W untimed then K timed\n"
            "MPI_Allreduce(MPI_SUM) calls of E elements, each after an MPI_Barrier. An\n"
            "iteration's time is the slowest rank's. Rank 0 prints one line of JSON.\n"
            "\n"
            "  --elems E     elements per rank, 1..%d (required)\n"
            "  --dtype T     int32 or float32 (required)\n"
            "  --iters K     timed iterations, 1..%u (default 10)\n"
            "  --warmup W    untimed iterations first, 0..%u (default 2)\n"
            "  --mode M      bench: verify the last result (default); latency: verify every\n"
            "                result, for many small calls\n"
            "  --seed S      seed of the tensor contents (default 1)\n"
            "\n"
            "Exit: 0 verified, 1 a result was wrong, 2 bad usage.\n",
            INT_MAX, MAX_ITERS, MAX_WARMUP);
}

/* An unsigned number in [lo, hi] (the whole string): 0, or -EINVAL. */
static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end || v < lo || v > hi)
        return -EINVAL;
    *out = (uint64_t)v;
    return 0;
}

/* 0 parsed, 1 help was asked for, -EINVAL bad usage (explained on stderr by rank 0). */
static int parse_args(int argc, char **argv, struct opts *o, int quiet)
{
    static const struct option longopts[] = {
        {"elems", required_argument, NULL, 'e'}, {"dtype", required_argument, NULL, 'd'},
        {"iters", required_argument, NULL, 'k'}, {"warmup", required_argument, NULL, 'w'},
        {"mode", required_argument, NULL, 'm'},  {"seed", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    *o = (struct opts){0, -1, 10, 2, 0, 1};
    opterr = !quiet;
    uint64_t v;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *bad = NULL;
        switch (c) {
            case 'e':
                if (parse_u64(optarg, 1, INT_MAX, &v) == 0)
                    o->elems = (size_t)v;
                else
                    bad = "--elems";
                break;
            case 'd':
                if (strcmp(optarg, "int32") == 0)
                    o->dtype_float = 0;
                else if (strcmp(optarg, "float32") == 0)
                    o->dtype_float = 1;
                else
                    bad = "--dtype";
                break;
            case 'k':
                if (parse_u64(optarg, 1, MAX_ITERS, &v) == 0)
                    o->iters = (unsigned)v;
                else
                    bad = "--iters";
                break;
            case 'w':
                if (parse_u64(optarg, 0, MAX_WARMUP, &v) == 0)
                    o->warmup = (unsigned)v;
                else
                    bad = "--warmup";
                break;
            case 'm':
                if (strcmp(optarg, "bench") == 0)
                    o->latency_mode = 0;
                else if (strcmp(optarg, "latency") == 0)
                    o->latency_mode = 1;
                else
                    bad = "--mode";
                break;
            case 's':
                if (parse_u64(optarg, 0, UINT64_MAX, &v) == 0)
                    o->seed = v;
                else
                    bad = "--seed";
                break;
            case 'h':
                if (!quiet)
                    usage(stdout);
                return 1;
            default:
                if (!quiet)
                    usage(stderr);
                return -EINVAL;
        }
        if (bad) {
            if (!quiet)
                fprintf(stderr, "inagg-mpi-bench: invalid value '%s' for %s\n", optarg, bad);
            return -EINVAL;
        }
    }
    if (optind < argc || o->elems == 0 || o->dtype_float < 0) {
        if (!quiet) {
            if (optind < argc)
                fprintf(stderr, "inagg-mpi-bench: unexpected argument '%s'\n", argv[optind]);
            else
                fprintf(stderr, "inagg-mpi-bench: --elems and --dtype are required\n");
            usage(stderr);
        }
        return -EINVAL;
    }
    return 0;
}

static void *alloc_or_abort(size_t bytes, const char *what, int rank)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "inagg-mpi-bench: rank %d: cannot allocate %zu bytes for %s\n", rank, bytes,
                what);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

static void fill_send(const struct opts *o, uint32_t rank, void *buf)
{
    if (o->dtype_float) {
        float *f = buf;
        for (size_t i = 0; i < o->elems; i++)
            f[i] = bench_value_f32(o->seed, rank, i);
    } else {
        int32_t *v = buf;
        for (size_t i = 0; i < o->elems; i++)
            v[i] = bench_value_i32(o->seed, rank, i);
    }
}

/* Number of wrong elements in recv; the first few are described on stderr. */
static size_t verify(const struct opts *o, uint32_t world, int rank, const void *recv)
{
    size_t bad = 0;
    for (size_t i = 0; i < o->elems; i++) {
        if (o->dtype_float) {
            double mag;
            double exact = bench_expected_f32(o->seed, world, i, &mag);
            double got = (double)((const float *)recv)[i];
            /* Relative to the sum of magnitudes, not |exact|: a float sum's rounding error
             * scales with its addends, and addends of opposite sign can cancel. */
            double tol = 1e-5 * mag + 1e-6 * (double)world;
            if (fabs(got - exact) <= tol)
                continue;
            if (bad < MAX_MISMATCH_REPORTS)
                fprintf(stderr,
                        "inagg-mpi-bench: rank %d: element %zu is %.9g, expected %.9g "
                        "(tolerance %.3g)\n",
                        rank, i, got, exact, tol);
        } else {
            int32_t exact = bench_expected_i32(o->seed, world, i);
            int32_t got = ((const int32_t *)recv)[i];
            if (got == exact)
                continue;
            if (bad < MAX_MISMATCH_REPORTS)
                fprintf(stderr, "inagg-mpi-bench: rank %d: element %zu is %d, expected %d\n", rank,
                        i, (int)got, (int)exact);
        }
        bad++;
    }
    return bad;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array: the smallest value with at least p% at or
 * below it. */
static double percentile(const double *sorted, size_t n, double p)
{
    size_t r = (size_t)ceil(p / 100.0 * (double)n);
    if (r < 1)
        r = 1;
    if (r > n)
        r = n;
    return sorted[r - 1];
}

static double median(const double *sorted, size_t n)
{
    return n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
}

/* What rank 0 reports besides the times: CPU use of the ranks over the timed iterations
 * (percent of one core; Open MPI's ranks poll while they wait, so this reads high whatever the
 * work) and benchdata.h's checksum of rank 0's last result. */
struct extra {
    double cpu_pct_mean, cpu_pct_max;
    uint64_t checksum;
};

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int report(const struct opts *o, int world, int verified, double *times,
                  const struct extra *x)
{
    size_t n = o->iters;
    qsort(times, n, sizeof(times[0]), cmp_double);
    double med = median(times, n);
    json_writer_t w;
    json_init(&w);
    json_begin_object(&w, NULL);
    json_string(&w, "name", "mpi");
    json_int(&w, "workers", world);
    json_int(&w, "elems", (int64_t)o->elems);
    json_string(&w, "dtype", o->dtype_float ? "float32" : "int32");
    json_string(&w, "mode", o->latency_mode ? "latency" : "bench");
    json_int(&w, "iters", o->iters);
    json_bool(&w, "verified", verified);
    json_begin_object(&w, "tat_ms");
    json_number(&w, "median", med * 1e3);
    json_number(&w, "min", times[0] * 1e3);
    json_number(&w, "max", times[n - 1] * 1e3);
    json_end_object(&w);
    json_number(&w, "ate_per_s", med > 0 ? (double)o->elems / med : 0.0);
    json_begin_object(&w, "latency_us");
    json_number(&w, "p50", percentile(times, n, 50) * 1e6);
    json_number(&w, "p99", percentile(times, n, 99) * 1e6);
    json_number(&w, "p999", percentile(times, n, 99.9) * 1e6);
    json_end_object(&w);
    json_number(&w, "cpu_workers_pct", x->cpu_pct_mean); /* flat: baseline_mpi.c finds keys */
    json_number(&w, "cpu_workers_max_pct", x->cpu_pct_max);
    char sum[24];
    snprintf(sum, sizeof(sum), "%016llx", (unsigned long long)x->checksum);
    json_string(&w, "checksum", sum);
    json_end_object(&w);
    const char *text = json_text(&w);
    int rc = 0;
    if (text) {
        printf("%s\n", text);
        fflush(stdout);
    } else {
        fprintf(stderr, "inagg-mpi-bench: out of memory writing the report\n");
        rc = -ENOMEM;
    }
    json_free(&w);
    return rc;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);

    struct opts o;
    int prc = parse_args(argc, argv, &o, rank != 0);
    if (prc != 0) {
        MPI_Finalize();
        return prc > 0 ? 0 : 2;
    }
    if (o.dtype_float == 0 && world > 64) {
        if (rank == 0)
            fprintf(stderr,
                    "inagg-mpi-bench: int32 values are bounded for at most 64 ranks "
                    "(got %d)\n",
                    world);
        MPI_Finalize();
        return 2;
    }

    size_t bytes = o.elems * 4u;
    void *send = alloc_or_abort(bytes, "the send buffer", rank);
    void *recv = alloc_or_abort(bytes, "the receive buffer", rank);
    double *times = alloc_or_abort(o.iters * sizeof(double), "the timings", rank);
    double *slowest =
        rank == 0 ? alloc_or_abort(o.iters * sizeof(double), "the timings", rank) : NULL;
    fill_send(&o, (uint32_t)rank, send);
    memset(recv, 0, bytes);

    MPI_Datatype type = o.dtype_float ? MPI_FLOAT : MPI_INT32_T;
    unsigned total = o.warmup + o.iters;
    size_t wrong = 0;
    double cpu0 = 0, cpu1 = 0, wall0 = 0, wall1 = 0;
    for (unsigned it = 0; it < total; it++) {
        int last = it + 1 == total;
        if (o.latency_mode || last)
            memset(recv, 0xff, bytes); /* int32 -1, float32 NaN: a stale result cannot pass */
        MPI_Barrier(MPI_COMM_WORLD);
        if (it == o.warmup) {
            cpu0 = cpu_seconds();
            wall0 = MPI_Wtime();
        }
        double t0 = MPI_Wtime();
        MPI_Allreduce(send, recv, (int)o.elems, type, MPI_SUM, MPI_COMM_WORLD);
        double t1 = MPI_Wtime();
        if (it >= o.warmup)
            times[it - o.warmup] = t1 - t0;
        if (last) {
            cpu1 = cpu_seconds();
            wall1 = t1;
        }
        if (o.latency_mode || last)
            wrong += verify(&o, (uint32_t)world, rank, recv);
    }
    if (wrong)
        fprintf(stderr, "inagg-mpi-bench: rank %d: %zu wrong elements\n", rank, wrong);

    MPI_Reduce(times, slowest, (int)o.iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int ok_local = wrong == 0, ok_all = 0;
    MPI_Allreduce(&ok_local, &ok_all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    double pct = wall1 > wall0 ? (cpu1 - cpu0) / (wall1 - wall0) * 100.0 : 0.0, pct_sum = 0;
    struct extra x = {0, 0, rank == 0 ? bench_checksum(recv, o.elems) : 0};
    MPI_Reduce(&pct, &pct_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&pct, &x.cpu_pct_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    x.cpu_pct_mean = pct_sum / world;
    int rc = ok_all ? 0 : 1;
    if (rank == 0 && report(&o, world, ok_all, slowest, &x) != 0)
        rc = 1;

    free(slowest);
    free(times);
    free(recv);
    free(send);
    MPI_Finalize();
    return rc;
}
