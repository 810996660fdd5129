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
static inline void rto_backoff(rto_estimator_t *r)
{
    r->rto_us = rto_doubled(r->rto_us, r->max_us);
}

/* Coding time (compressed jobs). A coded packet's answer waits for the switch to decode
 * `world` contributions and encode one sum, for every slot ahead of it on the same switch
 * queue; when a window is sent at once (a call's start, a burst after a stall) the last slot
 * of a queue waits for all of them. Round-trip samples of the first slots are short and do
 * not show this, so a timeout from them alone fires before the switch could have answered.
 * The floor below is twice the switch's coding work for one window of one queue, estimated
 * from this worker's own measured coding time per chunk (same codec, same chunk size):
 *   2 * ceil(slots / queues) * (world * decode_ns + encode_ns),
 * at most cap_us; decode_ns is taken as encode_ns until a decode was measured. 0 while
 * nothing was measured. The caller lets this floor exceed the configured rto_max: a cap
 * below the switch's coding time for one window only makes the switch code duplicates. */
static inline uint32_t rto_code_floor_us(double encode_ns, double decode_ns, uint32_t world,
                                         uint32_t slots, uint32_t queues, uint32_t cap_us)
{
    if (encode_ns <= 0 && decode_ns <= 0)
        return 0;
    if (queues == 0)
        queues = 1;
    if (decode_ns <= 0)
        decode_ns = encode_ns;
    if (encode_ns <= 0)
        encode_ns = decode_ns;
    double per_queue = (double)((slots + queues - 1) / queues);
    double us = 2.0 * per_queue * ((double)world * decode_ns + encode_ns) / 1000.0;
    return us >= (double)cap_us ? cap_us : (uint32_t)us;
}

/* An exponentially weighted mean of coding times (weight 1/8, as SRTT): the first sample is
 * taken as it is. */
static inline void rto_code_mean(double *mean_ns, double sample_ns)
{
    *mean_ns = *mean_ns <= 0 ? sample_ns : 0.875 * *mean_ns + 0.125 * sample_ns;
}

#endif /* INAGG_WORKER_RTO_H */
