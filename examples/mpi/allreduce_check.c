/*
 * allreduce_check.c - a plain MPI program (it knows nothing of inagg) that checks MPI_Allreduce
 * and MPI_Iallreduce results and times them. Used to show that libinagg-pmpi.so, preloaded,
 * changes nothing an MPI program can see:
 *
 *     mpicc -O2 allreduce_check.c -o allreduce_check
 *     mpirun -n 4 ./allreduce_check                          # plain MPI
 *     INAGG_SWITCH=127.0.0.1:7000 mpirun -n 4 -x INAGG_SWITCH \
 *         -x LD_PRELOAD=/path/to/libinagg-pmpi.so ./allreduce_check
 *     mpirun -n 4 ./allreduce_check --time ELEMS ITERS       # median time of MPI_Allreduce
 *
 * Checks: int and float sums on MPI_COMM_WORLD (separate buffers and MPI_IN_PLACE, 1 to 1M
 * elements), on a duplicate, on a congruent split and on a half split; nonblocking allreduces
 * completed by MPI_Wait, MPI_Test loops, MPI_Waitall and MPI_Waitany, overlapped with
 * point-to-point messages; MPI_MAX, MPI_DOUBLE and MPI_PROD. Prints "N passed, M failed".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, passed, failed;

static void check(int ok, const char *what)
{
    int all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (all)
        passed++;
    else
        failed++;
    if (rank == 0 && !all)
        printf("FAIL %s\n", what);
}

/* Rank r contributes f(r, i); the sum over ranks is exact in float for these values. */
static int ival(int r, long i) { return (int)((i * 7 + r * 13) % 1000) - 500; }
static float fval(int r, long i) { return (float)((i * 3 + r) % 256) * 0.25f; }

static int sum_ok_int(const int *v, long n, int world, int nranks_from)
{
    for (long i = 0; i < n; i++) {
        long want = 0;
        for (int r = nranks_from; r < nranks_from + world; r++)
            want += ival(r, i);
        if (v[i] != want)
            return 0;
    }
    return 1;
}

static int sum_ok_float(const float *v, long n, int world)
{
    for (long i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < world; r++)
            want += fval(r, i);
        if (v[i] != want)
            return 0;
    }
    return 1;
}

static void checks_on(MPI_Comm comm, const char *name)
{
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    long sizes[] = {1, 7, 1000, 16360, 16361, 100000, 1000000}; /* around one packet */
    char what[128];
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        long n = sizes[k];
        int *a = malloc(n * sizeof(int)), *b = malloc(n * sizeof(int));
        float *f = malloc(n * sizeof(float)), *g = malloc(n * sizeof(float));
        for (long i = 0; i < n; i++) {
            a[i] = ival(crank, i);
            f[i] = fval(crank, i);
        }
        MPI_Allreduce(a, b, (int)n, MPI_INT, MPI_SUM, comm);
        snprintf(what, sizeof(what), "%s int sum n=%ld", name, n);
        check(sum_ok_int(b, n, csize, 0) && a[n - 1] == ival(crank, n - 1), what);
        MPI_Allreduce(MPI_IN_PLACE, a, (int)n, MPI_INT, MPI_SUM, comm);
        snprintf(what, sizeof(what), "%s int sum in place n=%ld", name, n);
        check(sum_ok_int(a, n, csize, 0), what);
        MPI_Allreduce(f, g, (int)n, MPI_FLOAT, MPI_SUM, comm);
        snprintf(what, sizeof(what), "%s float sum n=%ld", name, n);
        check(sum_ok_float(g, n, csize), what);
        MPI_Allreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, MPI_SUM, comm);
        snprintf(what, sizeof(what), "%s float sum in place n=%ld", name, n);
        check(sum_ok_float(f, n, csize), what);
        free(a), free(b), free(f), free(g);
    }
}

static void nonblocking_checks(MPI_Comm comm)
{
    enum { N = 200000, K = 4 };
    int crank, csize;
    MPI_Comm_rank(comm, &crank);
    MPI_Comm_size(comm, &csize);
    int *bufs[K];
    MPI_Request req[K + 2];
    for (int k = 0; k < K; k++) {
        bufs[k] = malloc(N * sizeof(int));
        for (long i = 0; i < N; i++)
            bufs[k][i] = ival(crank, i + k);
    }
    /* MPI_Wait, with a ring exchange in between (the allreduce must not block it). */
    MPI_Iallreduce(MPI_IN_PLACE, bufs[0], N, MPI_INT, MPI_SUM, comm, &req[0]);
    int token = crank, got = -1;
    MPI_Sendrecv(&token, 1, MPI_INT, (crank + 1) % csize, 5, &got, 1, MPI_INT,
                 (crank + csize - 1) % csize, 5, comm, MPI_STATUS_IGNORE);
    MPI_Wait(&req[0], MPI_STATUS_IGNORE);
    int ok = got == (crank + csize - 1) % csize && req[0] == MPI_REQUEST_NULL;
    for (long i = 0; i < N && ok; i++) {
        long want = 0;
        for (int r = 0; r < csize; r++)
            want += ival(r, i);
        ok = bufs[0][i] == want;
    }
    check(ok, "Iallreduce + Sendrecv + Wait");

    /* MPI_Test until done. */
    float *f = malloc(N * sizeof(float)), *g = malloc(N * sizeof(float));
    for (long i = 0; i < N; i++)
        f[i] = fval(crank, i);
    MPI_Iallreduce(f, g, N, MPI_FLOAT, MPI_SUM, comm, &req[0]);
    int done = 0;
    long spins = 0;
    while (!done) {
        MPI_Test(&req[0], &done, MPI_STATUS_IGNORE);
        spins++;
    }
    check(sum_ok_float(g, N, csize), "Iallreduce + Test loop");

    /* Several in flight, with an Irecv/Isend pair, completed by Waitall. */
    for (int k = 1; k < K; k++)
        MPI_Iallreduce(MPI_IN_PLACE, bufs[k], N, MPI_INT, MPI_SUM, comm, &req[k - 1]);
    int out = crank * 10, in = -1;
    MPI_Irecv(&in, 1, MPI_INT, (crank + csize - 1) % csize, 6, comm, &req[K - 1]);
    MPI_Isend(&out, 1, MPI_INT, (crank + 1) % csize, 6, comm, &req[K]);
    MPI_Waitall(K + 1, req, MPI_STATUSES_IGNORE);
    ok = in == ((crank + csize - 1) % csize) * 10;
    for (int k = 1; k < K && ok; k++)
        for (long i = 0; i < N && ok; i++) {
            long want = 0;
            for (int r = 0; r < csize; r++)
                want += ival(r, i + k);
            ok = bufs[k][i] == want;
        }
    check(ok, "three Iallreduce + Isend/Irecv + Waitall");

    /* Waitany over two. */
    for (long i = 0; i < N; i++)
        f[i] = fval(crank, i);
    MPI_Iallreduce(MPI_IN_PLACE, f, N, MPI_FLOAT, MPI_SUM, comm, &req[0]);
    MPI_Iallreduce(MPI_IN_PLACE, bufs[0], 1, MPI_INT, MPI_MAX, comm, &req[1]);
    int idx, left = 2;
    while (left--)
        MPI_Waitany(2, req, &idx, MPI_STATUS_IGNORE);
    check(sum_ok_float(f, N, csize) && req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL,
          "Iallreduce sum + Iallreduce max + Waitany");
    for (int k = 0; k < K; k++)
        free(bufs[k]);
    free(f), free(g);
}

static void passthrough_checks(void)
{
    double d[3] = {rank, 1.5, -rank}, e[3];
    MPI_Allreduce(d, e, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    check(e[1] == 1.5 * size && e[0] == (double)size * (size - 1) / 2, "double sum");
    int m = rank * 3, mx = -1;
    MPI_Allreduce(&m, &mx, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    check(mx == (size - 1) * 3, "int max");
    float p = 2.0f, q = 0;
    MPI_Allreduce(&p, &q, 1, MPI_FLOAT, MPI_PROD, MPI_COMM_WORLD);
    check(q == (float)(1 << size), "float prod");
    long l = rank, ls = 0;
    MPI_Allreduce(&l, &ls, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    check(ls == (long)size * (size - 1) / 2, "long sum");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void time_allreduce(long n, int iters)
{
    float *f = malloc(n * sizeof(float));
    double *t = malloc(iters * sizeof(double));
    for (long i = 0; i < n; i++)
        f[i] = fval(rank, i);
    for (int w = 0; w < 2; w++)
        MPI_Allreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    for (int k = 0; k < iters; k++) {
        for (long i = 0; i < n; i++)
            f[i] = fval(rank, i);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Allreduce(MPI_IN_PLACE, f, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double dt = MPI_Wtime() - t0, slowest = 0;
        MPI_Allreduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        t[k] = slowest;
    }
    int ok = sum_ok_float(f, n, size);
    qsort(t, iters, sizeof(double), cmp_double);
    if (rank == 0)
        printf("{\"elems\": %ld, \"iters\": %d, \"ranks\": %d, \"median_s\": %.6f, "
               "\"min_s\": %.6f, \"verified\": %s}\n",
               n, iters, size, t[iters / 2], t[0], ok ? "true" : "false");
    free(f);
    free(t);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc == 4 && strcmp(argv[1], "--time") == 0) {
        time_allreduce(atol(argv[2]), atoi(argv[3]));
        MPI_Finalize();
        return 0;
    }
    checks_on(MPI_COMM_WORLD, "world");
    MPI_Comm dup, split, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    checks_on(dup, "dup");
    nonblocking_checks(dup);
    nonblocking_checks(MPI_COMM_WORLD);
    MPI_Comm_free(&dup);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &split); /* all ranks, reversed */
    checks_on(split, "split-reversed");
    MPI_Comm_free(&split);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    checks_on(half, "half");
    MPI_Comm_free(&half);
    passthrough_checks();
    if (rank == 0)
        printf("%d passed, %d failed\n", passed, failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
