/*
 * roce_replay.h - the worker's replay table (PROTOCOL.md 13.4): it remembers the PSNs each
 * recent contribution went out with, so that its first retransmission reuses them (as an RC
 * requester's go-back-N does, and the switch answers it from its result buffer) and later
 * ones take new PSNs.
 */
#ifndef INAGG_TRANSPORT_ROCE_REPLAY_H
#define INAGG_TRANSPORT_ROCE_REPLAY_H

#include <stdint.h>

#include "lib/netio/roce_msgkey.h"

#define ROCE_REPLAY_SLOTS 256u

typedef struct roce_replay_ent {
    roce_msg_key_t key;
    uint32_t psn, len;
    uint8_t sends; /* 0: empty */
} roce_replay_ent_t;

typedef struct roce_replay {
    roce_replay_ent_t e[ROCE_REPLAY_SLOTS];
} roce_replay_t;

/* The first PSN for a contribution with key of len bytes: the one its previous sending used
 * (*replay = 1) when this is its first retransmission, else next_psn (*replay = 0; recorded). */
uint32_t roce_replay_psn(roce_replay_t *r, const roce_msg_key_t *key, uint32_t len,
                         uint32_t next_psn, int *replay);

#endif /* INAGG_TRANSPORT_ROCE_REPLAY_H */
