/*
 * baseline_mpi.h - runs the OpenMPI baseline (inagg-mpi-bench) under mpirun and reads its
 * report, so `inagg bench allreduce` and `inagg bench latency` can compare against
 * MPI_Allreduce in the same run. mpirun itself is started by launch/ (launch_mpirun_cfg),
 * which forces MPI over the kernel's TCP stack: on loopback, the network stack inagg crosses,
 * or with one rank per host of a testbed (or cluster) over its network.
 * Lives in the library (not src/apps/cli) only so the tests can drive it; it never links MPI.
 */
#ifndef INAGG_BASELINE_MPI_H
#define INAGG_BASELINE_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "apps/launch/launch.h"

struct baseline_mpi_params {
    unsigned workers; /* MPI ranks, 1..64 */
    size_t elems; /* elements per rank, 1..INT_MAX */
    int dtype_float; /* 0 int32, 1 float32 */
    unsigned iters; /* timed iterations, >= 1 */
    unsigned warmup; /* untimed iterations first */
    int latency_mode; /* 1: verify every iteration (--mode latency) */
    uint64_t seed; /* tensor contents, see bench/benchdata.h */
    unsigned timeout_s; /* the whole mpirun run, 0: BASELINE_MPI_DEFAULT_TIMEOUT_S */
    const launch_mpirun_cfg_t *placement; /* hosts, prefix, rsh agent, MCA settings (e.g. the
                                             forced ring); NULL: all ranks on loopback */
};

struct baseline_mpi_result {
    int verified;
    double tat_median_ms, tat_min_ms, tat_max_ms; /* per iteration, slowest rank */
    double ate_per_s; /* elems / median seconds */
    double lat_p50_us, lat_p99_us, lat_p999_us; /* nearest-rank over timed iterations */
    double cpu_workers_pct, cpu_workers_max_pct; /* mean and busiest rank over the timed
                                                     iterations, % of a core; NaN if absent */
    char checksum[24]; /* bench_checksum of rank 0's last result */
};

#define BASELINE_MPI_DEFAULT_TIMEOUT_S 600u

/* Path of inagg-mpi-bench into buf: $INAGG_MPI_BENCH if set, else the file next to the
 * running binary (/proc/self/exe). 0 if it exists and is executable, else -1 (buf still
 * holds the path that was tried). */
int baseline_mpi_find_program(char *buf, size_t len);

/*
 * Runs mpirun on inagg-mpi-bench, returns 0, or a negative errno (-ENOENT, -ETIMEDOUT, -EIO,
 * -EPROTO, ...) with a clear reason in err (mpirun not
 * installed, program missing, timed out, non-zero exit with its stderr tail, unparsable
 * output). A run whose result was wrong returns 0 with out->verified = 0. On timeout the
 * whole process group is sent SIGTERM, then SIGKILL. The caller's process must not reap
 * children it did not start (no SIGCHLD handler that calls wait()).
 */
int baseline_mpi_run(const struct baseline_mpi_params *p, struct baseline_mpi_result *out,
                     char *err, size_t errlen);

#endif /* INAGG_BASELINE_MPI_H */
