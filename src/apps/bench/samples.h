/*
 * samples.h - summaries of a benchmark's timed samples: sorting, the median, nearest-rank
 * percentiles.
 */
#ifndef INAGG_BENCH_SAMPLES_H
#define INAGG_BENCH_SAMPLES_H

#include <stddef.h>

/* Sort v[n] ascending. */
void bench_sort(double *v, size_t n);

/* The median of v[n] (n >= 1); sorts v. */
double bench_median(double *v, size_t n);

/* Nearest-rank percentile (p in 0..1) of sorted v[n]; NaN for n = 0. */
double bench_percentile(const double *v, size_t n, double p);

#endif /* INAGG_BENCH_SAMPLES_H */
