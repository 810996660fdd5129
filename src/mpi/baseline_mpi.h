/*
 * baseline_mpi.h - runs the OpenMPI baseline (inagg-mpi-bench) under mpirun and reads its
 * report, so `inagg bench allreduce` can compare against MPI_Allreduce in the same run; and,
 * more generally, any MPI program (inagg-mpi-train) under the same mpirun flags, its stdout
 * streamed line by line to the caller.
 * MPI is forced over the kernel's TCP stack on loopback, the network stack inagg crosses.
 * Lives in the library (not src/cli) only so the tests can drive it; it never links MPI.
 */
#ifndef INAGG_BASELINE_MPI_H
#define INAGG_BASELINE_MPI_H

#include <stddef.h>
#include <stdint.h>

struct baseline_mpi_params {
    unsigned workers;   /* MPI ranks, 1..64 */
    size_t elems;       /* elements per rank, 1..INT_MAX */
    int dtype_float;    /* 0 int32, 1 float32 */
    unsigned iters;     /* timed iterations, >= 1 */
    unsigned warmup;    /* untimed iterations first */
    int latency_mode;   /* 1: verify every iteration (--mode latency) */
    uint64_t seed;      /* tensor contents, see bench/benchdata.h */
    unsigned timeout_s; /* the whole mpirun run, 0: BASELINE_MPI_DEFAULT_TIMEOUT_S */
};

struct baseline_mpi_result {
    int verified;
    double tat_median_ms, tat_min_ms, tat_max_ms; /* per iteration, slowest rank */
    double ate_per_s;                             /* elems / median seconds */
    double lat_p50_us, lat_p99_us, lat_p999_us;   /* nearest-rank over timed iterations */
};

#define BASELINE_MPI_DEFAULT_TIMEOUT_S 600u

/* The mpirun flags that keep MPI on the kernel's TCP stack over loopback (no shared memory,
 * no RDMA); the program and its arguments follow them. NULL-terminated. */
extern const char *const baseline_mpi_flags[];

/* Absolute path of the mpirun in $PATH into buf. 0, or -1 if there is none. */
int baseline_mpi_find_mpirun(char *buf, size_t len);

/* Path of inagg-mpi-bench into buf: $INAGG_MPI_BENCH if set, else the file next to the
 * running binary (/proc/self/exe). 0 if it exists and is executable, else -1 (buf still
 * holds the path that was tried). */
int baseline_mpi_find_program(char *buf, size_t len);

/* Path of the program `name` into buf: $env_var if that is set (env_var may be NULL), else
 * the file `name` next to the running binary. 0 if it is an executable file, else -1 (buf
 * still holds the path that was tried, or ""). */
int baseline_mpi_find_named(const char *name, const char *env_var, char *buf, size_t len);

/*
 * Runs mpirun on inagg-mpi-bench, returns 0 or -1 with a clear reason in err (mpirun not
 * installed, program missing, timed out, non-zero exit with its stderr tail, unparsable
 * output). A run whose result was wrong returns 0 with out->verified = 0. On timeout the
 * whole process group is sent SIGTERM, then SIGKILL. The caller's process must not reap
 * children it did not start (no SIGCHLD handler that calls wait()).
 */
int baseline_mpi_run(const struct baseline_mpi_params *p, struct baseline_mpi_result *out,
                     char *err, size_t errlen);

/* Any program under mpirun with baseline_mpi_flags. */
struct baseline_mpi_exec_params {
    unsigned np;                /* ranks, 1..64 */
    const char *program;        /* path of the MPI program */
    const char *const *args;    /* its arguments, NULL-terminated (may be NULL) */
    unsigned timeout_s;         /* the whole run, 0: BASELINE_MPI_DEFAULT_TIMEOUT_S */
    /* Each line of the program's stdout as it arrives, without its newline (lines longer
     * than 8 KiB are cut). A non-zero return stops the run: mpirun's process group is
     * killed and baseline_mpi_exec returns -1 with err "stopped by the caller". */
    int (*on_line)(const char *line, void *arg);
    void *arg;
};

/*
 * Runs `mpirun <baseline_mpi_flags> -np N program args...` and streams its stdout to
 * on_line. 0 when mpirun exited with status 0; -1 otherwise, with err saying why (mpirun
 * missing, cannot start, timed out and killed, non-zero exit or signal with the tail of
 * stderr, stopped). *exit_code (may be NULL): mpirun's exit status, -1 if it did not exit.
 * Same process rules as baseline_mpi_run.
 */
int baseline_mpi_exec(const struct baseline_mpi_exec_params *p, int *exit_code, char *err,
                      size_t errlen);

#endif /* INAGG_BASELINE_MPI_H */
