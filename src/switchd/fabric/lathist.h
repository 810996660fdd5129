/*
 * lathist.h - a latency histogram of relaxed atomic buckets (16 per power of two: at most
 * 1/16 relative error), written by the fabric's stages and summed by its stats reader.
 */
#ifndef INAGG_FABRIC_LATHIST_H
#define INAGG_FABRIC_LATHIST_H

#include <stdatomic.h>
#include <stdint.h>

/* The fabric's latency classes: its own latency per frame kind (from taking the frame off its
 * port, after any ingress delay, to handing it to the output port or its delay line), and
 * how late the delay lines released frames against their due time (the link emulation's
 * error). LAT_NONE: a frame that is not measured. */
enum fabric_lat { LAT_FORWARD, LAT_AGG_INT, LAT_AGG_FLOAT, LAT_RESEND, LAT_DELAY_LATE, LAT_COUNT };
#define LAT_NONE 0xff

#define LAT_BUCKETS (44 * 16)
typedef struct lathist {
    _Atomic uint64_t b[LAT_BUCKETS];
} lathist_t;

void lathist_add(lathist_t *h, uint64_t ns);

/* Count and quantiles (ns, the lower edge of the bucket holding it) of a histogram. */
uint64_t lathist_summary(const lathist_t *h, uint64_t *p50, uint64_t *p99);

#endif /* INAGG_FABRIC_LATHIST_H */
