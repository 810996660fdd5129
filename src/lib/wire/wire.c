/* wire.c - encode and validate packet headers (see wire.h for the layout). */
#include "lib/wire/wire.h"

#include <arpa/inet.h>
#include <string.h>

#include "inagg/version.h"
#include "lib/base/util.h"

static const char *const status_names[WIRE_STATUS_COUNT] = {
    [WIRE_OK] = "ok",
    [WIRE_SHORT] = "short",
    [WIRE_BAD_MAGIC] = "bad_magic",
    [WIRE_BAD_VERSION] = "bad_version",
    [WIRE_BAD_TYPE] = "bad_type",
    [WIRE_BAD_DTYPE] = "bad_dtype",
    [WIRE_BAD_FLAGS] = "bad_flags",
    [WIRE_BAD_LENGTH] = "bad_length",
};

const char *wire_status_name(enum wire_status s)
{
    return util_name_of(status_names, WIRE_STATUS_COUNT, (unsigned)s);
}

static void put16(uint8_t *p, uint16_t v)
{
    v = htons(v);
    memcpy(p, &v, 2);
}

static void put32(uint8_t *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint16_t get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return ntohs(v);
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

void wire_encode_header(const wire_header_t *h, void *buf)
{
    uint8_t *p = buf;
    put16(p + 0, WIRE_MAGIC);
    p[2] = h->version;
    p[3] = h->type;
    put16(p + 4, h->job);
    put16(p + 6, h->rank);
    put64(p + 8, h->token);
    put32(p + 16, h->slot);
    put32(p + 20, h->round);
    put32(p + 24, h->chunk);
    put16(p + 28, h->count);
    p[30] = h->flags;
    p[31] = h->dtype;
    put16(p + 32, (uint16_t)h->exp);
    put16(p + 34, (uint16_t)h->next_exp);
}

enum wire_status wire_decode(const void *buf, size_t len, wire_header_t *h)
{
    const uint8_t *p = buf;
    if (len < WIRE_HEADER_SIZE)
        return WIRE_SHORT;
    if (get16(p) != WIRE_MAGIC)
        return WIRE_BAD_MAGIC;
    h->version = p[2];
    if (h->version != INAGG_PROTOCOL_VERSION)
        return WIRE_BAD_VERSION;
    h->type = p[3];
    if (h->type < WIRE_CONTRIB || h->type > WIRE_CONFIRM)
        return WIRE_BAD_TYPE;
    h->job = get16(p + 4);
    h->rank = get16(p + 6);
    h->token = (uint64_t)get32(p + 8) << 32 | get32(p + 12);
    h->slot = get32(p + 16);
    h->round = get32(p + 20);
    h->chunk = get32(p + 24);
    h->count = get16(p + 28);
    h->flags = p[30];
    h->dtype = p[31];
    h->exp = (int16_t)get16(p + 32);
    h->next_exp = (int16_t)get16(p + 34);
    if (h->dtype >= WIRE_DTYPE_COUNT)
        return WIRE_BAD_DTYPE;
    if ((h->flags & ~WIRE_FLAGS_KNOWN) != 0 ||
        (h->flags & WIRE_FLAG_VER) != wire_ver_of_round(h->round))
        return WIRE_BAD_FLAGS;
    if (len != wire_header_len(h) + (size_t)h->count * 4u)
        return WIRE_BAD_LENGTH;
    if ((h->type == WIRE_ACK || h->type == WIRE_CONFIRM) && h->count != 0)
        return WIRE_BAD_LENGTH; /* acknowledgements carry no payload */
    return WIRE_OK;
}
