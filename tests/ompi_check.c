/*
 * ompi_check.c - a plain MPI program that checks every MPI_Allreduce result, for
 * tests/cli_ompi.sh: sums of MPI_INT, MPI_INT32_T, MPI_FLOAT (and MPI_INTEGER, MPI_REAL where
 * Fortran types exist) from 1 element to 4 MiB, in place and not, on MPI_COMM_WORLD, on a
 * duplicate of it and on halves split from it, then calls the switch does not serve (MPI_MAX,
 * MPI_DOUBLE) on the same communicators, and MPI_Iallreduce finished by an MPI_Testall loop.
 * Every element is compared with the sum computed here.
 * Floats hold small integers, so any order of adding gives the exact sum.
 *
 *   mpirun -n 4 ompi_check                   rank 0 prints "ompi_check: N passed, M failed"
 *   mpirun -n 4 ompi_check --time ELEMS ITERS   the median seconds of a float sum of ELEMS
 *   mpirun -n 4 ompi_check --thread-multiple    the same checks under MPI_THREAD_MULTIPLE
 *                                               (as mpi4py initializes MPI)
 */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long g_passed, g_failed;

static void check(MPI_Comm comm, int ok, const char *what)
{
    int all = 0, rank = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    MPI_Comm_rank(comm, &rank);
    if (all) {
        g_passed++;
        return;
    }
    g_failed++;
    if (rank == 0)
        fprintf(stderr, "ompi_check: FAIL %s\n", what);
}

/* A rank's value of element i: small integers, so float sums are exact in any order. */
static int32_t value(int rank, long i) { return (int32_t)((i * 7 + rank * 13) % 1000) - 300; }

static int32_t expected(int size, long i)
{
    int32_t s = 0;
    for (int r = 0; r < size; r++)
        s += value(r, i);
    return s;
}

/* One sum of n elements of `dt` (4-byte int or float), in place or not; 1 when right. */
static int sum_ok(MPI_Comm comm, MPI_Datatype dt, int is_float, long n, int in_place)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    if (!a || !b)
        return 0;
    for (long i = 0; i < n; i++) {
        if (is_float)
            ((float *)a)[i] = (float)value(rank, i);
        else
            a[i] = value(rank, i);
        b[i] = -12345;
    }
    if (in_place)
        MPI_Allreduce(MPI_IN_PLACE, a, (int)n, dt, MPI_SUM, comm);
    else
        MPI_Allreduce(a, b, (int)n, dt, MPI_SUM, comm);
    const int32_t *r = in_place ? a : b;
    int ok = 1;
    for (long i = 0; i < n && ok; i++)
        ok = is_float ? ((const float *)r)[i] == (float)expected(size, i)
                      : r[i] == expected(size, i);
    if (!in_place) /* the send buffer is left as it was */
        for (long i = 0; i < n && ok; i++)
            ok = is_float ? ((float *)a)[i] == (float)value(rank, i) : a[i] == value(rank, i);
    free(a);
    free(b);
    return ok;
}

/* The calls the switch does not serve, on the same communicator: MPI's results. */
static void others(MPI_Comm comm, const char *name)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char what[160];
    int mx = 0;
    MPI_Allreduce(&rank, &mx, 1, MPI_INT, MPI_MAX, comm);
    snprintf(what, sizeof(what), "%s: int max", name);
    check(comm, mx == size - 1, what);
    double d[3] = {rank, 1.5, -rank}, e[3];
    MPI_Allreduce(d, e, 3, MPI_DOUBLE, MPI_SUM, comm);
    snprintf(what, sizeof(what), "%s: double sum", name);
    check(comm, e[1] == 1.5 * size && e[0] == -e[2], what);
}

/* Nonblocking: three MPI_Iallreduce in flight (an int sum, a float sum in place, an int max
 * the switch does not serve), a blocking sum while they are, then a bounded MPI_Testall loop
 * (Open MPI's progress completes them) and MPI_Waitall; every result checked. */
static void nonblocking(MPI_Comm comm, const char *name, long n)
{
    int rank, size, mx = -1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    int32_t *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    float *f = malloc((size_t)n * 4);
    if (!a || !b || !f)
        return;
    for (long i = 0; i < n; i++) {
        a[i] = value(rank, i);
        b[i] = -12345;
        f[i] = (float)value(rank, i);
    }
    MPI_Request req[3];
    MPI_Iallreduce(a, b, (int)n, MPI_INT, MPI_SUM, comm, &req[0]);
    MPI_Iallreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, MPI_SUM, comm, &req[1]);
    MPI_Iallreduce(&rank, &mx, 1, MPI_INT, MPI_MAX, comm, &req[2]);
    int between = sum_ok(comm, MPI_FLOAT, 1, n, 0);
    int done = 0;
    double t0 = MPI_Wtime();
    while (!done && MPI_Wtime() - t0 < 60)
        MPI_Testall(3, req, &done, MPI_STATUSES_IGNORE);
    if (!done)
        MPI_Waitall(3, req, MPI_STATUSES_IGNORE);
    int ok = done && between && mx == size - 1;
    for (long i = 0; i < n && ok; i++)
        ok =
            b[i] == expected(size, i) && f[i] == (float)expected(size, i) && a[i] == value(rank, i);
    char what[160];
    snprintf(what, sizeof(what),
             "%s: %ld elements: two Iallreduce sums and a max, a blocking sum "
             "between, Testall%s",
             name, n, done ? "" : " (did not complete in 60 s)");
    check(comm, ok, what);
    free(a);
    free(b);
    free(f);
}

static void sums_on(MPI_Comm comm, const char *name, int max_log2)
{
    struct {
        MPI_Datatype dt;
        int is_float;
        const char *name;
    } types[] = {{MPI_INT, 0, "MPI_INT"},
                 {MPI_INT32_T, 0, "MPI_INT32_T"},
                 {MPI_FLOAT, 1, "MPI_FLOAT"},
                 {MPI_INTEGER, 0, "MPI_INTEGER"},
                 {MPI_REAL, 1, "MPI_REAL"}};
    char what[160];
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        int tsize = 0;
        if (types[t].dt == MPI_DATATYPE_NULL || MPI_Type_size(types[t].dt, &tsize) != MPI_SUCCESS ||
            tsize != 4)
            continue;
        /* 1 element, odd sizes around a packet, 64 KiB and the default 1 MiB threshold, up to
         * 4 MiB */
        long sizes[] = {1, 7, 1000, 16383, 16384, 16385, 100003, 262143, 262144, 1L << 20};
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
            if (sizes[k] > (1L << max_log2))
                continue;
            for (int in_place = 0; in_place < 2; in_place++) {
                snprintf(what, sizeof(what), "%s: %s sum of %ld%s", name, types[t].name, sizes[k],
                         in_place ? " in place" : "");
                check(comm, sum_ok(comm, types[t].dt, types[t].is_float, sizes[k], in_place), what);
            }
        }
    }
    others(comm, name);
    nonblocking(comm, name, 7);
    nonblocking(comm, name, 100003);
}

static int timing(long n, int iters)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float *f = calloc((size_t)n, sizeof(float));
    double *t = calloc((size_t)iters, sizeof(double));
    if (!f || !t)
        return 1;
    for (int i = 0; i < iters + 3; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (i >= 3) /* three warm-up calls */
            t[i - 3] = slowest;
    }
    for (int i = 1; i < iters; i++) /* insertion sort: the median */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    if (rank == 0)
        printf("elems %ld bytes %ld median_us %.1f\n", n, n * 4, t[iters / 2] * 1e6);
    free(f);
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    int multiple = argc == 2 && strcmp(argv[1], "--thread-multiple") == 0, provided = 0;
    if (multiple) {
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        if (provided != MPI_THREAD_MULTIPLE) {
            fprintf(stderr, "ompi_check: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
            MPI_Finalize();
            return 2;
        }
    } else {
        MPI_Init(&argc, &argv);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 4 && strcmp(argv[1], "--time") == 0) {
        int rc = timing(atol(argv[2]), atoi(argv[3]));
        MPI_Finalize();
        return rc;
    }
    sums_on(MPI_COMM_WORLD, "MPI_COMM_WORLD", 20);
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    sums_on(dup, "a duplicate", 17);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    sums_on(half, "a half", 17);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    long counts[2] = {g_passed, g_failed}, total[2] = {0, 0};
    MPI_Reduce(counts, total, 2, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ompi_check: %ld passed, %ld failed\n", total[0] / size, total[1] / size);
    MPI_Finalize();
    return g_failed ? 1 : 0;
}
