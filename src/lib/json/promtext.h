/*
 * promtext.h - writing the Prometheus text exposition format (version 0.0.4): a metric
 * family's HELP and TYPE lines, then its samples, each with an optional label set whose
 * values are escaped here. The switch's /metrics (switch/metrics.c) and the fabric's
 * counters (fabric/fstats.c) are written with it.
 */
#ifndef INAGG_PROMTEXT_H
#define INAGG_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "# HELP name help" and "# TYPE name type" (type: "counter" or "gauge"). */
void prom_family(FILE *out, const char *name, const char *type, const char *help);

/* A label set: prom_labels(buf, cap, "job", name, "reason", why, NULL) writes
 * `job="...",reason="..."` into buf (values escaped: \\, \" and \n); "" for none. */
void prom_labels(char *buf, size_t cap, ...) __attribute__((sentinel));

/* "name{labels} value" (labels NULL or "": no braces). */
void prom_u64(FILE *out, const char *name, const char *labels, uint64_t v);
void prom_double(FILE *out, const char *name, const char *labels, double v);

#endif /* INAGG_PROMTEXT_H */
