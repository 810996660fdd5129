/*
 * rto.h - the retransmission timeout of a worker engine: RFC 6298's estimator (smoothed RTT
 * and its variance, RTO = SRTT + 4 RTTVAR, clamped), fed only by packets sent once (Karn's
 * rule: the caller skips retransmitted ones), and doubled on timeouts (backoff). Shared by
 * the streaming engine (switchml) and the small-message engine (p4sgd).
 */
#ifndef INAGG_WORKER_RTO_H
#define INAGG_WORKER_RTO_H

#include <stdint.h>

typedef struct rto_estimator {
    double srtt_us, rttvar_us;
    int have_rtt;
    uint32_t rto_us, min_us, max_us;
} rto_estimator_t;

static inline void rto_init(rto_estimator_t *r, uint32_t initial_us, uint32_t min_us,
                            uint32_t max_us)
{
    r->srtt_us = r->rttvar_us = 0;
    r->have_rtt = 0;
    r->rto_us = initial_us;
    r->min_us = min_us;
    r->max_us = max_us;
}

/* One round-trip sample from a packet that was sent exactly once. */
static inline void rto_sample(rto_estimator_t *r, double sample_us)
{
    if (!r->have_rtt) {
        r->srtt_us = sample_us;
        r->rttvar_us = sample_us / 2;
        r->have_rtt = 1;
    } else {
        double err = r->srtt_us - sample_us;
        r->rttvar_us = 0.75 * r->rttvar_us + 0.25 * (err < 0 ? -err : err);
        r->srtt_us = 0.875 * r->srtt_us + 0.125 * sample_us;
    }
    double rto = r->srtt_us + 4 * r->rttvar_us;
    if (rto < r->min_us)
        rto = r->min_us;
    if (rto > r->max_us)
        rto = r->max_us;
    r->rto_us = (uint32_t)rto;
}

/* Twice `us`, at most max_us: the backoff of one packet's timer. */
static inline uint32_t rto_doubled(uint32_t us, uint32_t max_us)
{
    uint64_t d = (uint64_t)us * 2u;
    return d > max_us ? max_us : (uint32_t)d;
}

/* Back off the timeout for the packets sent from now on too (as TCP does per connection):
 * timeouts in a burst mostly mean a slow peer or a busy host, not many losses. The next
 * fresh sample brings the estimate back. */
static inline void rto_backoff(rto_estimator_t *r) { r->rto_us = rto_doubled(r->rto_us, r->max_us); }

#endif /* INAGG_WORKER_RTO_H */
