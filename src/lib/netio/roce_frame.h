/*
 * roce_frame.h - RoCE v1 framing of RDMA Write frames: Ethernet (type 0x8915), GRH (40 bytes,
 * next header 0x1B), BTH (12 bytes), RETH (16 bytes) on the first frame of a message, an
 * immediate (4 bytes) on "with immediate" frames, the payload padded to 4 bytes, and the
 * 4-byte invariant CRC (ICRC) the InfiniBand specification defines. Writing and parsing only;
 * nothing here does I/O. Used by the `roce` transport (roce.c), the fabric's classifier, the
 * bench's capture checks and the fuzz harness.
 *
 * ICRC: CRC-32 (the Ethernet polynomial, reflected, initial and final value all ones) over
 * 8 bytes of 0xFF standing for the absent LRH, then the GRH with traffic class, flow label
 * and hop limit set to all ones, the BTH with its reserved byte (resv8a, the FECN/BECN byte of
 * RoCE v2) set to all ones, then everything up to the ICRC. Stored least significant byte
 * first, as the Ethernet FCS is.
 */
#ifndef INAGG_NETIO_ROCE_FRAME_H
#define INAGG_NETIO_ROCE_FRAME_H

#include <stdint.h>

#define ROCE_ETHERTYPE 0x8915u
#define ROCE_ETH_LEN 14u
#define ROCE_GRH_LEN 40u
#define ROCE_BTH_LEN 12u
#define ROCE_RETH_LEN 16u
#define ROCE_IMM_LEN 4u
#define ROCE_ICRC_LEN 4u
#define ROCE_GRH_NEXT_HDR 0x1Bu /* IBA transport: a BTH follows */
/* The path MTU (payload bytes of every First and Middle frame of a message) is one of
 * InfiniBand's five, chosen by the sender per QP as an RC QP's path_mtu is (the worker: from
 * its interface's MTU, roce_mtu_for_link); the receiver takes it from each message's First
 * frame and holds the message's other frames to it (roce_flow.h). */
#define ROCE_MTU_MIN 256u
#define ROCE_MTU_MAX 4096u
#define ROCE_MTU_DEFAULT 1024u /* where nothing says otherwise (the usual RoCE default) */
#define ROCE_PSN_MASK 0xffffffu
#define ROCE_QP_MASK 0xffffffu
#define ROCE_DEFAULT_PKEY 0xffffu
/* the largest frame this module writes: headers, a full payload, ICRC */
#define ROCE_MAX_FRAME                                                                             \
    (ROCE_ETH_LEN + ROCE_GRH_LEN + ROCE_BTH_LEN + ROCE_RETH_LEN + ROCE_IMM_LEN + ROCE_MTU_MAX +    \
     ROCE_ICRC_LEN)

/* BTH opcodes of the Reliable Connected transport that carry RDMA Writes. */
enum roce_opcode {
    ROCE_WRITE_FIRST = 0x06,
    ROCE_WRITE_MIDDLE = 0x07,
    ROCE_WRITE_LAST = 0x08,
    ROCE_WRITE_LAST_IMM = 0x09,
    ROCE_WRITE_ONLY = 0x0a,
    ROCE_WRITE_ONLY_IMM = 0x0b,
};

/* Why a frame was rejected (counters name them with roce_reason_name). ROCE_OK is 0. */
enum roce_reason {
    ROCE_OK = 0,
    ROCE_NOT_ROCE, /* another Ethernet type */
    ROCE_TRUNCATED, /* shorter than its headers, or than the GRH payload length says */
    ROCE_BAD_GRH, /* IP version not 6, or next header not 0x1B */
    ROCE_BAD_LENGTH, /* longer than the GRH payload length says */
    ROCE_BAD_BTH, /* transport header version not 0 */
    ROCE_NOT_WRITE, /* a well-formed RoCE frame whose opcode is not an RC RDMA Write */
    ROCE_BAD_PAYLOAD, /* payload length wrong for the opcode (First/Middle: an InfiniBand
                           MTU, no pad; Last: 1..ROCE_MTU_MAX; Only: 0..ROCE_MTU_MAX) */
    ROCE_BAD_ICRC, /* the invariant CRC does not match */
    ROCE_REASON_COUNT
};

const char *roce_reason_name(enum roce_reason r);
const char *roce_opcode_name(uint8_t opcode);

static inline int roce_op_is_first(uint8_t op)
{
    return op == ROCE_WRITE_FIRST || op == ROCE_WRITE_ONLY || op == ROCE_WRITE_ONLY_IMM;
}
static inline int roce_op_is_last(uint8_t op)
{
    return op == ROCE_WRITE_LAST || op == ROCE_WRITE_LAST_IMM || op == ROCE_WRITE_ONLY ||
           op == ROCE_WRITE_ONLY_IMM;
}
static inline int roce_op_has_imm(uint8_t op)
{
    return op == ROCE_WRITE_LAST_IMM || op == ROCE_WRITE_ONLY_IMM;
}
static inline int roce_op_is_write(uint8_t op) { return op >= 0x06 && op <= 0x0b; }

/* 1 when mtu is one of InfiniBand's path MTUs: 256, 512, 1024, 2048 or 4096. */
static inline int roce_mtu_valid(uint32_t mtu)
{
    return mtu >= ROCE_MTU_MIN && mtu <= ROCE_MTU_MAX && (mtu & (mtu - 1)) == 0;
}

/* The largest path MTU whose frames fit an interface of MTU if_mtu (the IP-level MTU: the
 * frame without its Ethernet header), as a RoCE NIC derives its active MTU; ROCE_MTU_MIN when
 * none fits. */
uint32_t roce_mtu_for_link(uint32_t if_mtu);

/* The frames of a message of msg_len bytes at path MTU mtu. */
static inline uint32_t roce_frames_for(uint32_t msg_len, uint32_t mtu)
{
    return msg_len <= mtu ? 1 : (msg_len + mtu - 1) / mtu;
}

/* The fields of one frame: what roce_write_frame takes and roce_parse fills. */
typedef struct roce_hdr {
    uint8_t dst_mac[6], src_mac[6];
    uint8_t sgid[16], dgid[16];
    uint8_t tclass; /* GRH traffic class (masked in the ICRC) */
    uint32_t flow; /* GRH flow label, 20 bits (masked) */
    uint8_t hop_limit; /* GRH hop limit (masked) */
    uint8_t opcode;
    uint16_t pkey;
    uint32_t qp; /* destination QP, 24 bits */
    uint32_t psn; /* 24 bits */
    uint8_t ack_req; /* BTH A bit */
    uint64_t va; /* RETH (First / Only): virtual address, key, DMA length */
    uint32_t rkey;
    uint32_t dma_len;
    uint32_t imm; /* immediate data (... with Immediate) */
} roce_hdr_t;

/* A parsed frame: its header fields and where its payload is. */
typedef struct roce_frame {
    roce_hdr_t h;
    const uint8_t *payload;
    uint32_t payload_len; /* without the pad */
} roce_frame_t;

/* Header bytes before the payload for an opcode (Ethernet to the end of RETH / immediate). */
uint32_t roce_header_len(uint8_t opcode);

/* Write a frame of opcode h->opcode carrying a (alen bytes) then b (blen bytes) into buf
 * (room for roce_header_len + alen + blen + 3 + ROCE_ICRC_LEN bytes): headers, payload, pad to
 * 4 bytes, ICRC. Returns the frame's length. The caller keeps the payload lengths legal for
 * the opcode (roce_parse's rules). */
uint32_t roce_write_frame(uint8_t *buf, const roce_hdr_t *h, const void *a, uint32_t alen,
                          const void *b, uint32_t blen);

/* Parse and check frame f of len bytes: ROCE_OK with *out filled, or the first failing check
 * in the order of enum roce_reason. ROCE_NOT_WRITE still fills out->h (addresses, opcode, QP,
 * PSN) so that a classifier can forward the frame. check_icrc = 0 skips the ICRC (a
 * forwarding decision that does not need it). */
enum roce_reason roce_parse(const uint8_t *f, uint32_t len, int check_icrc, roce_frame_t *out);

/* The ICRC of a frame whose GRH starts at grh and whose ICRC starts at grh + len. */
uint32_t roce_icrc(const uint8_t *grh, uint32_t len);

/* CRC-32 (reflected 0xEDB88320) continuing from crc (start: 0xffffffff; finish with ~). */
uint32_t roce_crc32_update(uint32_t crc, const uint8_t *p, uint32_t n);

/* 24-bit sequence arithmetic: a - b in -2^23 .. 2^23-1. */
static inline int32_t roce_psn_diff(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & ROCE_PSN_MASK;
    return d & 0x800000u ? (int32_t)d - 0x1000000 : (int32_t)d;
}
static inline uint32_t roce_psn_add(uint32_t psn, uint32_t n) { return (psn + n) & ROCE_PSN_MASK; }

/* Payload efficiency of a full frame of this opcode at path MTU mtu: data bytes over the
 * frame's bytes from the Ethernet header to the ICRC (as the AllReduce-Switch paper's Table IV
 * counts), where a First / Only frame's payload also holds an aggregation header of agg_header
 * bytes. */
double roce_payload_efficiency(uint8_t opcode, uint32_t mtu, uint32_t agg_header);

/* A message of msg_len bytes as frames at path MTU mtu: how many (*frames), and data_bytes
 * over the bytes of all its frames from the Ethernet header to the ICRC. */
double roce_message_efficiency(uint32_t msg_len, uint32_t mtu, uint32_t data_bytes,
                               uint32_t *frames);

#endif /* INAGG_NETIO_ROCE_FRAME_H */
