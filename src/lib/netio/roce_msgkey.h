/*
 * roce_msgkey.h - what names a RoCE message for retransmission: its inagg header's job,
 * slot, round and type, the same for a contribution and its result. The worker's replay
 * table (transport/roce_replay.h) and the switch's result buffer (fabric/roce_resbuf.h)
 * both key their entries by it.
 */
#ifndef INAGG_NETIO_ROCE_MSGKEY_H
#define INAGG_NETIO_ROCE_MSGKEY_H

#include <stdint.h>

typedef struct roce_msg_key {
    uint64_t slot_round; /* slot << 32 | round */
    uint16_t job;
    uint8_t type; /* enum wire_type */
} roce_msg_key_t;

/* The key of a message of len bytes starting with its inagg header at msg (at least the
 * header's bytes there). 0, or -EPROTO when the bytes are not a valid inagg header. */
int roce_msg_key(const uint8_t *msg, uint32_t len, roce_msg_key_t *k);

static inline int roce_key_eq(const roce_msg_key_t *a, const roce_msg_key_t *b)
{
    return a->slot_round == b->slot_round && a->job == b->job && a->type == b->type;
}

#endif /* INAGG_NETIO_ROCE_MSGKEY_H */
