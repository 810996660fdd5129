/*
 * wire.h - the packet format of the aggregation dataplane. The only module that knows bytes.
 *
 * Every datagram is a 36-byte header in network byte order, then (flag bit 3, a job with an
 * authenticated dataplane) a 28-byte MAC (wire/dpauth.h), then `count` 32-bit elements, also
 * in network byte order (protocol version 3; version 2 had no MAC, version 1 a 32-bit
 * token):
 *
 *   off size field     meaning
 *    0   2   magic     0x4941 ("IA")
 *    2   1   version   INAGG_PROTOCOL_VERSION
 *    3   1   type      WIRE_CONTRIB (worker->switch), WIRE_RESULT (switch->worker); p4sgd
 *                      also WIRE_ACK (worker->switch: "I have the result of this round") and
 *                      WIRE_CONFIRM (switch->worker: "every rank acknowledged; slot free")
 *    4   2   job       job id assigned by the switch at join
 *    6   2   rank      sender's rank (contribution) or receiver's rank (result;
 *                      WIRE_RANK_ALL for one sent to the job's multicast group)
 *    8   8   token     the job's token, 64 random bits (getrandom) given at JOINED: packets
 *                      of another or an old job, or guessed by a stranger, are dropped
 *   16   4   slot      slot index inside the job's pool
 *   20   4   round     per-slot use counter; its low bit is the pool version (shadow copy)
 *   24   4   chunk     index of the tensor chunk carried (informational, echoed back)
 *   28   2   count     elements in the payload (0 for an exponent probe; always 0 for
 *                      WIRE_ACK and WIRE_CONFIRM)
 *   30   1   flags     bit 0: pool version (must equal round & 1); bit 1: int32 overflow
 *                      happened in this result; bit 2: parameter upload (in-switch optimizer
 *                      jobs: this round's sum becomes the parameters, no step); bit 3:
 *                      a MAC follows the header; other bits must be zero
 *   31   1   dtype     WIRE_INT32, WIRE_FIXED32 (float32 as block fixed point), WIRE_FLOAT32,
 *                      WIRE_CODED (float32 in the job's codec; count = the chunk's words)
 *   32   2   exp       block exponent the payload was scaled with (fixed point)
 *   34   2   next_exp  look-ahead: exponent of the next chunk on this slot (contribution),
 *                      or the maximum over all workers (result)
 *   36  28   mac       only with flag bit 3: the packet's nonce (12) and tag (16) under the
 *                      rank's up key or the job's down key (wire/dpauth.h), over bytes
 *                      0..47 (a RESULT's rank as zero) and the payload
 *
 * In a p4sgd job, `chunk`, `exp` and `next_exp` of contributions and results carry a
 * piggybacked acknowledgement (worker->switch) or confirmation (switch->worker) instead:
 * chunk = acknowledged/confirmed slot + 1 (0: none), exp:next_exp = its round (high:low 16
 * bits). The slot must be served by the same switch thread as the packet's own slot.
 *
 * wire_decode() checks everything a header can check alone; the receiver then checks the
 * fields that need context (job, token, rank, slot range, round).
 */
#ifndef INAGG_WIRE_H
#define INAGG_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_MAGIC 0x4941u
#define WIRE_RANK_ALL                                                                              \
    0xffffu /* a RESULT's rank when it went to the job's multicast group:
                                 every rank's (PROTOCOL.md 9.6) */
#define WIRE_HEADER_SIZE 36u /* the fixed header; a MAC may follow it */
#define WIRE_MAC_BYTES 28u /* nonce (12) and tag (16): wire/dpauth.h */
#define WIRE_HEADER_MAX (WIRE_HEADER_SIZE + WIRE_MAC_BYTES)
#define WIRE_MAX_DATAGRAM 65507u
#define WIRE_MAX_ELEMS ((WIRE_MAX_DATAGRAM - WIRE_HEADER_SIZE) / 4u)
#define WIRE_MAX_ELEMS_AUTH ((WIRE_MAX_DATAGRAM - WIRE_HEADER_MAX) / 4u)

enum wire_type { WIRE_CONTRIB = 1, WIRE_RESULT = 2, WIRE_ACK = 3, WIRE_CONFIRM = 4 };
/* WIRE_CODED: float32 compressed in the job's codec (agreed at JOIN, src/lib/codec/codec.h): the
 * payload is one codec chunk, `count` 32-bit words long, holding up to the job's elements per
 * packet values. */
enum wire_dtype {
    WIRE_INT32 = 0,
    WIRE_FIXED32 = 1,
    WIRE_FLOAT32 = 2,
    WIRE_CODED = 3,
    WIRE_DTYPE_COUNT = 4
};

#define WIRE_FLAG_VER 0x01u
#define WIRE_FLAG_OVERFLOW 0x02u
#define WIRE_FLAG_SET 0x04u
#define WIRE_FLAG_MAC 0x08u
#define WIRE_FLAGS_KNOWN (WIRE_FLAG_VER | WIRE_FLAG_OVERFLOW | WIRE_FLAG_SET | WIRE_FLAG_MAC)

typedef struct wire_header {
    uint8_t version;
    uint8_t type;
    uint16_t job;
    uint16_t rank;
    uint64_t token;
    uint32_t slot;
    uint32_t round;
    uint32_t chunk;
    uint16_t count;
    uint8_t flags;
    uint8_t dtype;
    int16_t exp;
    int16_t next_exp;
} wire_header_t;

/* Why a datagram was rejected by wire_decode(). WIRE_OK is 0. */
enum wire_status {
    WIRE_OK = 0,
    WIRE_SHORT, /* shorter than the header */
    WIRE_BAD_MAGIC, /* not an inagg packet */
    WIRE_BAD_VERSION, /* another protocol version */
    WIRE_BAD_TYPE, /* unknown packet type */
    WIRE_BAD_DTYPE, /* unknown element type */
    WIRE_BAD_FLAGS, /* unknown flag bits, or version bit disagrees with round */
    WIRE_BAD_LENGTH, /* datagram length != header + count * 4 */
    WIRE_STATUS_COUNT
};

const char *wire_status_name(enum wire_status s);

/* Write the header in network order into buf (WIRE_HEADER_SIZE bytes). */
void wire_encode_header(const wire_header_t *h, void *buf);

/* Parse and validate a datagram of `len` bytes. On WIRE_OK, *h holds the header and the
 * payload (h->count elements) starts at buf + WIRE_HEADER_SIZE. */
enum wire_status wire_decode(const void *buf, size_t len, wire_header_t *h);

static inline uint8_t wire_ver_of_round(uint32_t round) { return (uint8_t)(round & 1u); }

/* Bytes before the payload: the header, and the MAC when the packet carries one. */
static inline size_t wire_header_len(const wire_header_t *h)
{
    return WIRE_HEADER_SIZE + ((h->flags & WIRE_FLAG_MAC) ? WIRE_MAC_BYTES : 0u);
}

/* p4sgd: an acknowledgement (worker->switch, on a contribution) or a confirmation
 * (switch->worker, on a result) riding on a packet: chunk = slot + 1 (0: none), exp:next_exp =
 * the round (high:low 16 bits). These two are the only code that packs or unpacks it. */
static inline void wire_put_piggyback(wire_header_t *h, uint32_t slot, uint32_t round)
{
    h->chunk = slot + 1u;
    h->exp = (int16_t)(uint16_t)(round >> 16);
    h->next_exp = (int16_t)(uint16_t)round;
}

/* 1 and the slot and round when h carries one, else 0. */
static inline int wire_get_piggyback(const wire_header_t *h, uint32_t *slot, uint32_t *round)
{
    if (h->chunk == 0)
        return 0;
    *slot = h->chunk - 1u;
    *round = ((uint32_t)(uint16_t)h->exp << 16) | (uint16_t)h->next_exp;
    return 1;
}

#endif /* INAGG_WIRE_H */
