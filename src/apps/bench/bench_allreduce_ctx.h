/*
 * bench_allreduce_ctx.h - what the run of `inagg bench allreduce` (bench_allreduce_run.c)
 * shares with the code that starts its switches (bench_allreduce_switches.c): the run's
 * state. Only those two files include this.
 */
#ifndef INAGG_BENCH_BENCH_ALLREDUCE_CTX_H
#define INAGG_BENCH_BENCH_ALLREDUCE_CTX_H

#include <limits.h>
#include <sys/types.h>

#include "apps/bench/bench_allreduce.h"
#include "apps/bench/cpu_sampler.h"

#define SWITCH_PORT 7000
#define SWITCH_READY_MS 15000

/* ---- the state of one run ---------------------------------------------------------------- */

typedef struct ctx {
    ar_run_t *run;
    ar_opts_t so; /* the options of the size being run */
    sampler_t sampler;
    pid_t sw_pid; /* the switch process: embedded, or in the switch namespace */
    char sw_addr[AR_MAX_SHARDS * 32]; /* HOST:PORT of its control port (shards: A,B,...) */
    pid_t more_pids[AR_MAX_SHARDS + AR_MAX_LEAVES]; /* the other shards, or the leaves */
    int nmore;
    char leaf_addr[AR_MAX_LEAVES][64]; /* two levels: each leaf's HOST:PORT */
    int sw_err_fd; /* its stderr (a memfd), testbed only */
    char cap_path[AR_MAX_SHARDS + AR_MAX_LEAVES + 1][96]; /* --switch-cpu-share: the CPU
                                  cgroups of the loopback switches (removed at the end) */
    int ncap;
    char self[PATH_MAX]; /* this binary */
    char python[PATH_MAX], gloo[PATH_MAX];
    char rsh[PATH_MAX];
    char hosts_list[LAUNCH_TESTBED_MAX_HOSTS * 16];
    int gloo_port;
} ctx_t;

/* Loopback: the spine and the leaves (--leaves), or K shards (--shards), or the one embedded
 * switch (or the --switch given). 0, or -1 after a message. */
int ar_local_switches(ctx_t *c, const ar_opts_t *o);
/* The switches of a testbed run (see bench_allreduce_switches.c). 0, or -1 after a message. */
int ar_testbed_switches(ctx_t *c);
/* Remove the CPU cgroups of --switch-cpu-share (after the switches were stopped). */
void ar_uncap_switches(ctx_t *c);
/* CPU seconds (user + system) process pid has used, or NAN. */
double ar_process_cpu_s(pid_t pid);

#endif /* INAGG_BENCH_BENCH_ALLREDUCE_CTX_H */
