/*
 * harness.h - what every benchmark's run shares: the switch it runs on (given, or embedded
 * in a child), a job name unique to the run, the workers' fault spec from --loss, the options
 * a rank's communicator starts from, and reading a rank's report whole from its pipe.
 */
#ifndef INAGG_BENCH_HARNESS_H
#define INAGG_BENCH_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "inagg.h"

/* The workers' fault spec: `faults` when given, else for loss > 0 "drop=LOSS,seed=SEED" in
 * buf, else NULL. */
const char *bench_worker_faults(const char *faults, double loss, uint64_t seed, char *buf,
                                size_t len);

/* The options every benchmark's rank gives its communicator: the library's defaults with the
 * run's protocol, window (slots), packet size, per-call timeout and fault spec. A benchmark
 * sets its own further options (float mode, threads, ...) on the result. */
inagg_options_t bench_comm_options(inagg_protocol_t protocol, uint32_t slots, uint32_t packet_elems,
                                   uint32_t timeout_ms, const char *faults);

/* The switch a benchmark runs on: `given` (HOST:PORT) when not NULL, else an embedded one
 * forked on 127.0.0.1 with `threads` dataplane threads. Writes its address to addr and returns
 * the embedded switch's pid, 0 when `given` is used, or -1 after a message naming cmd. */
pid_t bench_switch_begin(const char *cmd, const char *given, uint32_t threads,
                         uint32_t worker_timeout_ms, char *addr, size_t len);

/* Stop what bench_switch_begin started (nothing for pid <= 0). */
void bench_switch_end(pid_t pid);

/* A job name unique to this run: "PREFIX-PID-N" into buf. Returns buf. */
const char *bench_job_name(const char *prefix, char *buf, size_t len);

/* Read exactly len bytes from fd. 0, or -1 at EOF or on an error first. */
int bench_read_full(int fd, void *buf, size_t len);

#endif /* INAGG_BENCH_HARNESS_H */
