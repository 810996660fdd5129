/*
 * allreduce_sizes.c - a plain MPI program (it knows nothing of inagg) that allreduces every
 * size from 4 bytes to a maximum (8 MiB unless argv[1] says other bytes), doubling, as
 * MPI_INT and as MPI_FLOAT sums on MPI_COMM_WORLD, and checks every element of every result
 * on every rank; argv[2], when given, allreduces the largest size that many times more (a
 * job that runs while its network is changed under it). Run under libinagg-pmpi.so it shows that packets are sized to the path: at
 * every MTU every size comes back whole and right (tests/cli_pmpi_testbed.sh runs it across
 * the testbed's hosts at MTU 1500 and 9000).
 *
 *     mpicc -O2 allreduce_sizes.c -o allreduce_sizes && mpirun -n 4 ./allreduce_sizes
 *     mpirun -n 4 ./allreduce_sizes 1048576 100     # up to 1 MiB, then 1 MiB 100 times
 *
 * Rank 0 prints one line per size and dtype ("ok BYTES TYPE MS", or FAIL with how many
 * elements were wrong and its first), then "N passed, M failed"; exits 0 only when every
 * check passed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Rank r's element i: small integers, so that float sums are exact in any order. */
static int ival(int r, long i) { return (int)((i * 7 + r * 13) % 1000) - 500; }
static float fval(int r, long i) { return (float)((i * 3 + r) % 256) * 0.25f; }

/* Elements of an int sum that differ from what `world` ranks add up to; the first in *first. */
static long wrong_ints(const int *v, long n, int world, long *first)
{
    long bad = 0;
    for (long i = 0; i < n; i++) {
        long want = 0;
        for (int r = 0; r < world; r++)
            want += ival(r, i);
        if (v[i] != want && bad++ == 0)
            *first = i;
    }
    return bad;
}

static long wrong_floats(const float *v, long n, int world, long *first)
{
    long bad = 0;
    for (long i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < world; r++)
            want += fval(r, i);
        if (v[i] != want && bad++ == 0)
            *first = i;
    }
    return bad;
}

/* Allreduce the first n elements as MPI_INT (dt 0) or MPI_FLOAT (1) and check the result on
 * every rank; rank 0 prints the line. 1 when every rank's result was right. */
static int check_size(long n, int dt, int rank, int world, const void *send, void *recv)
{
    long first = -1, bad;
    double t0 = MPI_Wtime();
    if (dt == 0) {
        for (long i = 0; i < n; i++)
            ((int *)recv)[i] = -1;
        MPI_Allreduce(send, recv, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        bad = wrong_ints(recv, n, world, &first);
    } else {
        for (long i = 0; i < n; i++)
            ((float *)recv)[i] = -1.0f;
        MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        bad = wrong_floats(recv, n, world, &first);
    }
    double ms = (MPI_Wtime() - t0) * 1e3;
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    const char *what = dt == 0 ? "MPI_INT" : "MPI_FLOAT";
    if (rank == 0 && all_bad)
        printf("FAIL %ld bytes %s: %ld wrong elements over all ranks (rank 0's first: %ld)\n",
               n * 4, what, all_bad, first);
    else if (rank == 0)
        printf("ok   %ld bytes %s %.2f ms\n", n * 4, what, ms);
    fflush(stdout); /* the launcher forwards it through a pipe */
    return all_bad == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, world;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    long max_bytes = argc > 1 ? atol(argv[1]) : 8L << 20;
    long again = argc > 2 ? atol(argv[2]) : 0;
    if (max_bytes < 4)
        max_bytes = 4;
    long max_n = max_bytes / 4, top = 1;
    int *is = malloc((size_t)max_n * sizeof(int)), *ir = malloc((size_t)max_n * sizeof(int));
    float *fs = malloc((size_t)max_n * sizeof(float)), *fr = malloc((size_t)max_n * sizeof(float));
    if (!is || !ir || !fs || !fr) {
        fprintf(stderr, "rank %d: out of memory for %ld bytes\n", rank, max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (long i = 0; i < max_n; i++) {
        is[i] = ival(rank, i);
        fs[i] = fval(rank, i);
    }
    int passed = 0, failed = 0;
    for (long n = 1; n <= max_n; n *= 2) {
        top = n;
        for (int dt = 0; dt < 2; dt++) {
            if (check_size(n, dt, rank, world, dt ? (void *)fs : (void *)is,
                           dt ? (void *)fr : (void *)ir))
                passed++;
            else
                failed++;
        }
    }
    for (long k = 0; k < again; k++) {
        if (check_size(top, 0, rank, world, is, ir))
            passed++;
        else
            failed++;
    }
    if (rank == 0)
        printf("%d passed, %d failed\n", passed, failed);
    free(is);
    free(ir);
    free(fs);
    free(fr);
    MPI_Finalize();
    return failed ? 1 : 0;
}
