/*
 * cpu_sampler.c - samples the switch process's CPU ticks and the machine's busy, total and
 * softirq jiffies while ranks run, and interpolates their use over a time window.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/bench/cpu_sampler.h"

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A small file's first bytes into buf (NUL-terminated) with read(2) only. 0, or -1. */
static int read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0)
        return -EIO;
    buf[n] = '\0';
    return 0;
}

void sampler_tick(void *arg)
{
    sampler_t *sp = arg;
    if (!sp->s || sp->n >= AR_MAX_SAMPLES)
        return;
    sample_t x = {wall_now(), NAN, NAN, NAN, NAN};
    char buf[1024], path[64];
    if (sp->sw > 0) {
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)sp->sw);
        char *p = read_small(path, buf, sizeof(buf)) == 0 ? strrchr(buf, ')') : NULL;
        unsigned long long f[13] = {0};
        /* after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime stime */
        if (p && sscanf(p + 2, "%*c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                        &f[0], &f[1], &f[2], &f[3], &f[4], &f[5], &f[6], &f[7], &f[8], &f[9],
                        &f[10], &f[11]) == 12)
            x.sw_ticks = (double)(f[10] + f[11]);
    }
    if (read_small("/proc/stat", buf, sizeof(buf)) == 0) {
        unsigned long long v[8] = {0};
        if (sscanf(buf, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]) == 8) {
            double total = 0;
            for (int i = 0; i < 8; i++)
                total += (double)v[i];
            x.total = total;
            x.busy = total - (double)(v[3] + v[4]); /* minus idle and iowait */
            x.soft = (double)(v[5] + v[6]); /* irq + softirq */
        }
    }
    sp->s[sp->n++] = x;
}

void sampler_begin(sampler_t *sp, pid_t sw)
{
    sp->sw = sw;
    sp->n = 0;
    if (!sp->s)
        sp->s = malloc(AR_MAX_SAMPLES * sizeof(sample_t));
    sampler_tick(sp);
}

/* A sampled counter at time t, interpolated linearly (clamped to the samples' span). */
static double value_at(const sampler_t *sp, size_t field, double t)
{
    if (sp->n == 0)
        return NAN;
    const sample_t *s = sp->s;
#define FIELD(i) (*(const double *)((const char *)&s[i] + field))
    if (t <= s[0].t)
        return FIELD(0);
    for (uint32_t i = 0; i + 1 < sp->n; i++) {
        if (t <= s[i + 1].t) {
            double dt = s[i + 1].t - s[i].t;
            double f = dt > 0 ? (t - s[i].t) / dt : 1;
            return FIELD(i) + f * (FIELD(i + 1) - FIELD(i));
        }
    }
    return FIELD(sp->n - 1);
#undef FIELD
}

/* The switch's CPU (% of a core) and the machine's busy and irq+softirq shares (% of all
 * cores) over [t0, t1]. */
void sampler_window(const sampler_t *sp, double t0, double t1, ar_sys_result_t *r)
{
    double hz = (double)sysconf(_SC_CLK_TCK);
    if (!(t1 > t0) || sp->n < 2)
        return;
    if (sp->sw > 0) {
        double d = value_at(sp, offsetof(sample_t, sw_ticks), t1) -
                   value_at(sp, offsetof(sample_t, sw_ticks), t0);
        r->cpu_switch = d / hz / (t1 - t0) * 100.0;
    }
    double tot =
        value_at(sp, offsetof(sample_t, total), t1) - value_at(sp, offsetof(sample_t, total), t0);
    if (tot > 0) {
        r->cpu_machine = (value_at(sp, offsetof(sample_t, busy), t1) -
                          value_at(sp, offsetof(sample_t, busy), t0)) /
                         tot * 100.0;
        r->cpu_softirq = (value_at(sp, offsetof(sample_t, soft), t1) -
                          value_at(sp, offsetof(sample_t, soft), t0)) /
                         tot * 100.0;
    }
}
