/*
 * roce_replay.c - the worker's replay table (see roce_replay.h).
 */
#include "lib/transport/roce_replay.h"

uint32_t roce_replay_psn(roce_replay_t *r, const roce_msg_key_t *key, uint32_t len,
                         uint32_t next_psn, int *replay)
{
    uint64_t h = (key->slot_round ^ ((uint64_t)key->job << 48)) * 0x9e3779b97f4a7c15ull;
    roce_replay_ent_t *e = &r->e[(h >> 40) % ROCE_REPLAY_SLOTS];
    if (e->sends == 1 && e->len == len && roce_key_eq(&e->key, key)) {
        e->sends = 2; /* once: a further retransmission takes new PSNs */
        *replay = 1;
        return e->psn;
    }
    e->key = *key;
    e->len = len;
    e->psn = next_psn;
    e->sends = 1;
    *replay = 0;
    return next_psn;
}
