/*
 * subrun.h - a benchmark run as a child of this very binary: `inagg bench ...` (or any
 * subcommand) with its --json going to a file and its messages to FILE.log, under a time
 * limit, and the whole of a report file read back. For commands built from other benchmarks
 * (`inagg model calibrate`, `inagg model validate`).
 */
#ifndef INAGG_BENCH_SUBRUN_H
#define INAGG_BENCH_SUBRUN_H

#include <stddef.h>

/* The whole file into a new NUL-terminated buffer (at most 64 MiB; the caller frees *text).
 * 0, or a negative errno (-EFBIG past 64 MiB). */
int bench_read_file(const char *path, char **text);

/* Run this binary with args (args[0] is replaced by the binary; at most 62 more), its stdout
 * and stderr into json_path.log, for at most timeout_s. 0 when it exited 0; else a negative
 * errno (-ETIMEDOUT: the limit passed, -EIO: it failed) with the reason and its last message
 * in err. */
int bench_run_self(char *const *args, const char *json_path, unsigned timeout_s, char *err,
                   size_t errlen);

#endif /* INAGG_BENCH_SUBRUN_H */
