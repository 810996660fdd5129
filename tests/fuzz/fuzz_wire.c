/*
 * fuzz_wire.c - packet decode (src/lib/wire/wire.c) and, behind it, the slot state machines
 * (slots.c). libFuzzer entry point; also builds under AFL++ (afl-clang-fast -fsanitize=fuzzer).
 *
 * Input: byte 0 picks the world (1..64), byte 1 the job's elements per packet (1..16); then
 * datagrams, each a little-endian 16-bit length and that many bytes (at most 256 datagrams).
 * Every datagram goes through wire_decode() in a buffer of exactly its length (so ASan sees
 * any read past it). Checked: the status is the first failing check of PROTOCOL.md 1.3, and
 * a decoded header re-encodes to the same 36 bytes; accepted packets drive the slots.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inagg/version.h"
#include "lib/wire/wire.h"
#include "slots.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, __LINE__, #cond);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }

/* PROTOCOL.md 1.3, written out independently of wire.c. */
static enum wire_status expected_status(const uint8_t *p, size_t len)
{
    if (len < WIRE_HEADER_SIZE)
        return WIRE_SHORT;
    if (be16(p) != WIRE_MAGIC)
        return WIRE_BAD_MAGIC;
    if (p[2] != INAGG_PROTOCOL_VERSION)
        return WIRE_BAD_VERSION;
    if (p[3] < WIRE_CONTRIB || p[3] > WIRE_CONFIRM)
        return WIRE_BAD_TYPE;
    if (p[31] >= WIRE_DTYPE_COUNT)
        return WIRE_BAD_DTYPE;
    if ((p[30] & ~WIRE_FLAGS_KNOWN) != 0 || (p[30] & 1u) != (be32(p + 20) & 1u))
        return WIRE_BAD_FLAGS;
    uint32_t count = be16(p + 28);
    size_t mac = (p[30] & WIRE_FLAG_MAC) ? WIRE_MAC_BYTES : 0u; /* a MAC follows the header */
    if (len != WIRE_HEADER_SIZE + mac + (size_t)count * 4u)
        return WIRE_BAD_LENGTH;
    if ((p[3] == WIRE_ACK || p[3] == WIRE_CONFIRM) && count != 0)
        return WIRE_BAD_LENGTH;
    return WIRE_OK;
}

static void one_datagram(const uint8_t *src, size_t len)
{
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return;
    memcpy(buf, src, len);
    wire_header_t h;
    memset(&h, 0xa5, sizeof(h));
    enum wire_status st = wire_decode(buf, len, &h);
    CHECK((unsigned)st < WIRE_STATUS_COUNT);
    CHECK(st == expected_status(buf, len));
    CHECK(wire_status_name(st) != NULL);
    if (st == WIRE_OK) {
        uint8_t again[WIRE_HEADER_SIZE];
        wire_encode_header(&h, again);
        CHECK(memcmp(again, buf, WIRE_HEADER_SIZE) == 0);
        CHECK(h.count <= WIRE_MAX_ELEMS);
        const uint32_t *payload = (const uint32_t *)(const void *)(buf + wire_header_len(&h));
        h.flags &= (uint8_t)~WIRE_FLAG_MAC; /* as the switch hands it on after the MAC check */
        slots_feed(&h, payload);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    slots_reset(1u + (data[0] & 63u), 1u + (data[1] % FUZZ_MAX_ELEMS));
    size_t pos = 2;
    for (int n = 0; n < 256 && pos + 2 <= size; n++) {
        size_t len = (size_t)data[pos] | (size_t)data[pos + 1] << 8;
        pos += 2;
        if (len > size - pos)
            len = size - pos;
        one_datagram(data + pos, len);
        pos += len;
    }
    return 0;
}
