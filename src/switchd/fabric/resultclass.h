/*
 * resultclass.h - the transmit stage's view of a result frame the aggregation stage sent:
 * its wire header and its latency class (a resend when the same job, slot and rank was sent
 * already this round).
 */
#ifndef INAGG_FABRIC_RESULTCLASS_H
#define INAGG_FABRIC_RESULTCLASS_H

#include <stdint.h>

typedef struct resend_ent {
    uint32_t tag, round;
} resend_ent_t;
#define RESEND_SLOTS 65536

/* The wire header inside a result frame (UDP, or a RoCE message's first frame), or NULL with
 * the class to use in *lat (RoCE frames after the first: aggregated int32). */
const uint8_t *fabric_result_header(const uint8_t *frame, uint32_t len, uint8_t *lat);

/* The latency class of a result whose wire header is h: LAT_RESEND when the same (job, slot,
 * rank) was already sent this round (remembered in resend, RESEND_SLOTS entries), else its
 * dtype's. */
uint8_t fabric_result_class(resend_ent_t *resend, const uint8_t *h);

#endif /* INAGG_FABRIC_RESULTCLASS_H */
