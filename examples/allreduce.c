/*
 * allreduce.c - the smallest complete inagg program: join a job on a switch as one rank,
 * sum a vector with every other rank, check the result.
 *
 * Build against an installed copy (make install PREFIX=...):
 *     cc allreduce.c $(pkg-config --cflags --libs inagg) -o allreduce
 * Run one switch and WORLD copies of the program (here on one host):
 *     inagg switch --listen 127.0.0.1:7000 &
 *     for r in 0 1 2 3; do ./allreduce 127.0.0.1:7000 demo $r 4 & done; wait
 * Exit status 0 when this rank's result is right.
 */
#include <inagg.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s SWITCH_HOST:PORT JOB RANK WORLD\n", argv[0]);
        return 2;
    }
    const char *sw = argv[1], *job = argv[2];
    unsigned rank = (unsigned)atoi(argv[3]), world = (unsigned)atoi(argv[4]);
    enum { N = 100000 };
    static float grad[N];
    for (int i = 0; i < N; i++)
        grad[i] = (float)(rank + 1) * 0.5f + (float)(i % 7); /* what this rank contributes */

    inagg_options_t opt = INAGG_OPTIONS_INIT;
    inagg_comm_t *comm;
    char why[256];
    inagg_result_t rc = inagg_comm_create(&comm, sw, job, rank, world, &opt, why, sizeof why);
    if (rc != INAGG_OK) {
        fprintf(stderr, "rank %u: join failed: %s: %s\n", rank, inagg_strerror(rc), why);
        return 1;
    }
    rc = inagg_allreduce(comm, grad, grad, N, INAGG_FLOAT32, INAGG_AVG); /* in place */
    if (rc != INAGG_OK) {
        fprintf(stderr, "rank %u: allreduce failed: %s: %s\n", rank, inagg_strerror(rc),
                inagg_last_error(comm));
        inagg_comm_destroy(comm);
        return 1;
    }
    int bad = 0;
    for (int i = 0; i < N; i++) { /* mean of (r+1)/2 over r = 0..W-1, plus i % 7 */
        float want = (float)(world + 1) * 0.25f + (float)(i % 7);
        float err = grad[i] - want;
        if (err < -1e-3f || err > 1e-3f)
            bad++;
    }
    uint32_t v = inagg_version(); /* major * 10000 + minor * 100 + patch */
    printf("rank %u of %u: %s (library %u.%u.%u, grad[1] = %g)\n", rank, world,
           bad ? "WRONG" : "ok", v / 10000, v / 100 % 100, v % 100, (double)grad[1]);
    inagg_comm_destroy(comm);
    return bad ? 1 : 0;
}
