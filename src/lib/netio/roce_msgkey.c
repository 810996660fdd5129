/*
 * roce_msgkey.c - a RoCE message's key from its inagg header (see roce_msgkey.h).
 */
#include "lib/netio/roce_msgkey.h"

#include <errno.h>

#include "lib/wire/wire.h"

int roce_msg_key(const uint8_t *msg, uint32_t len, roce_msg_key_t *k)
{
    wire_header_t h;
    if (wire_decode(msg, len, &h) != WIRE_OK)
        return -EPROTO;
    k->slot_round = (uint64_t)h.slot << 32 | h.round;
    k->job = h.job;
    k->type = h.type;
    return 0;
}
