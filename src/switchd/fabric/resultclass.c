/*
 * resultclass.c - a result frame's wire header and latency class (resultclass.h).
 */
#include "switchd/fabric/resultclass.h"

#include "lib/netio/ethframe.h"
#include "lib/netio/roce_frame.h"
#include "lib/wire/wire.h"
#include "switchd/fabric/lathist.h"

/* Header fields the fabric reads (wire.h has the layout) */
#define WIRE_OFF_TYPE 3
#define WIRE_OFF_JOB 4
#define WIRE_OFF_RANK 6
#define WIRE_OFF_SLOT 16
#define WIRE_OFF_ROUND 20
#define WIRE_OFF_DTYPE 31

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

const uint8_t *fabric_result_header(const uint8_t *frame, uint32_t len, uint8_t *lat)
{
    if (len >= ETHF_ETH_LEN && frame[12] == 0x89 && frame[13] == 0x15) {
        /* RoCE: the header rides in a message's first frame (roce_frame.h) */
        uint32_t off = roce_header_len(ROCE_WRITE_FIRST);
        if (len < off + WIRE_HEADER_SIZE || !roce_op_is_first(frame[ROCE_ETH_LEN + ROCE_GRH_LEN])) {
            *lat = LAT_AGG_INT;
            return NULL;
        }
        return frame + off;
    }
    if (len < ETHF_UDP_HDR_LEN + WIRE_HEADER_SIZE) {
        *lat = LAT_NONE;
        return NULL;
    }
    return frame + ETHF_UDP_HDR_LEN;
}

uint8_t fabric_result_class(resend_ent_t *resend, const uint8_t *h)
{
    uint32_t job = be16(h + WIRE_OFF_JOB), rank = be16(h + WIRE_OFF_RANK);
    uint32_t slot = be32(h + WIRE_OFF_SLOT), round = be32(h + WIRE_OFF_ROUND);
    uint32_t tag = (job * 0x9e3779b1u) ^ (slot * 0x85ebca6bu) ^ (rank * 0xc2b2ae35u);
    resend_ent_t *e = &resend[tag & (RESEND_SLOTS - 1)];
    if (h[WIRE_OFF_TYPE] == WIRE_RESULT && e->tag == tag && e->round == round)
        return LAT_RESEND;
    e->tag = tag;
    e->round = round;
    return h[WIRE_OFF_DTYPE] == WIRE_FLOAT32 || h[WIRE_OFF_DTYPE] == WIRE_CODED ? LAT_AGG_FLOAT
                                                                                : LAT_AGG_INT;
}
