/*
 * cpu_sampler.h - CPU use while a benchmark's ranks run: the switch process and the machine
 * (/proc/stat) sampled every SAMPLE_MS, and their use over the ranks' timed window
 * interpolated from the samples (bench allreduce's CPU columns).
 */
#ifndef INAGG_BENCH_CPU_SAMPLER_H
#define INAGG_BENCH_CPU_SAMPLER_H

#include <sys/types.h>

#include "apps/bench/bench_allreduce.h"

#define SAMPLE_MS 100u

typedef struct sample {
    double t; /* wall clock */
    double sw_ticks; /* the switch process's utime + stime */
    double busy, total, soft; /* the machine's, all cores (jiffies) */
} sample_t;

typedef struct sampler {
    pid_t sw; /* 0: no switch to sample */
    uint32_t n;
    sample_t *s; /* AR_MAX_SAMPLES */
} sampler_t;

/* Start sampling (sw 0: no switch process to sample); takes the first sample. */
void sampler_begin(sampler_t *sp, pid_t sw);
/* Take one sample (a launch_group_wait tick; arg is the sampler_t). */
void sampler_tick(void *arg);
/* The switch's and the machine's CPU use between wall times t0 and t1, into r. */
void sampler_window(const sampler_t *sp, double t0, double t1, ar_sys_result_t *r);

#endif
