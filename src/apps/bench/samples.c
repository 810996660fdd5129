/* samples.c - summaries of a benchmark's timed samples (see samples.h). */
#include "apps/bench/samples.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *v, size_t n) { qsort(v, n, sizeof(double), cmp_double); }

double bench_median(double *v, size_t n)
{
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_percentile(const double *v, size_t n, double p)
{
    if (n == 0)
        return NAN;
    double rank = ceil(p * (double)n);
    size_t i = rank < 1 ? 0 : (size_t)rank - 1;
    return v[i < n ? i : n - 1];
}
