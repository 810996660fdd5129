#!/usr/bin/env python3
"""gen_wire_seeds.py - write the hand-made seed inputs of the `wire` fuzz target into
tests/fuzz/corpus/wire/ (the files are kept in git; rerun only to change them).

Input format (fuzz_wire.c): byte 0 = world - 1, byte 1 = elements per packet - 1, then
datagrams as a little-endian 16-bit length and the bytes. Header layout: src/lib/wire/wire.h.
"""
import os
import struct

CONTRIB, RESULT, ACK, CONFIRM = 1, 2, 3, 4
INT32, FIXED32, FLOAT32 = 0, 1, 2
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "wire")


def pkt(typ=CONTRIB, rank=0, slot=0, rnd=0, chunk=0, payload=(), flags=None, dtype=INT32,
        exp=0, next_exp=0, job=1, token=0x123456789abcdef0, magic=0x4941, version=2, count=None,
        raw_payload=None):
    if flags is None:
        flags = rnd & 1
    if count is None:
        count = len(payload)
    hdr = struct.pack(">HBBHHQIIIHBBhh", magic, version, typ, job, rank, token, slot, rnd,
                      chunk, count, flags, dtype, exp, next_exp)
    if raw_payload is not None:
        body = raw_payload
    elif dtype == FLOAT32:
        body = b"".join(struct.pack(">f", v) for v in payload)
    else:
        body = b"".join(struct.pack(">i", v) for v in payload)
    return hdr + body


def seed(name, world, elems, datagrams):
    data = bytes([world - 1, elems - 1])
    for d in datagrams:
        data += struct.pack("<H", len(d)) + d
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)


def main():
    os.makedirs(OUT, exist_ok=True)
    # switchml: PROTOCOL.md 2.6 (SwitchML Appendix A) with 3 ranks on one slot.
    seq = []
    for r in (0, 1):
        seq.append(pkt(rank=r, rnd=0, payload=(r + 1, -r, 7)))
    seq.append(pkt(rank=0, rnd=0, payload=(1, 0, 7)))          # dup to an open round
    seq.append(pkt(rank=2, rnd=0, payload=(3, -2, 7)))         # completes round 0
    seq.append(pkt(rank=0, rnd=0, payload=(1, 0, 7)))          # resend
    for r in (1, 2, 0):
        seq.append(pkt(rank=r, rnd=1, chunk=4, payload=(r, r, r)))
    seq.append(pkt(rank=2, rnd=2, chunk=8, payload=(5, 5, 5)))  # copy 0 reused
    seq.append(pkt(rank=0, rnd=0, payload=(1, 0, 7)))          # stale
    seq.append(pkt(rank=1, rnd=4, payload=(1, 1, 1)))          # ahead
    seed("switchml-appendix-a", 3, 4, seq)
    # int32 overflow, then a count mismatch within a round
    seed("switchml-overflow", 2, 2, [
        pkt(rank=0, payload=(0x7fffffff, -5)), pkt(rank=1, payload=(1, -0x7fffffff)),
        pkt(rank=0, rnd=1, payload=(1,)), pkt(rank=1, rnd=1, payload=(1, 2))])
    # block fixed point: a probe round, then data with the agreed exponent and look-ahead
    seed("switchml-fixed-probe", 2, 4, [
        pkt(rank=0, dtype=FIXED32, exp=-32768, next_exp=3),
        pkt(rank=1, dtype=FIXED32, exp=-32768, next_exp=5),
        pkt(rank=0, rnd=1, dtype=FIXED32, exp=5, next_exp=-32768, payload=(100, -100)),
        pkt(rank=1, rnd=1, dtype=FIXED32, exp=4, next_exp=2, payload=(1, 1)),
        pkt(rank=1, rnd=1, dtype=FIXED32, exp=5, next_exp=32767, payload=(1, 1))])
    # native float32, with a NaN and an infinity
    seed("switchml-float", 2, 3, [
        pkt(rank=0, dtype=FLOAT32, payload=(1.5, float("inf"), 0.1)),
        pkt(rank=1, dtype=FLOAT32, payload=(-1.5, float("-inf"), float("nan")))])
    # world 64, two slots
    seed("switchml-world64", 64, 1, [pkt(rank=r, slot=r % 2, payload=(r,)) for r in range(64)])
    # p4sgd: both contribute, both acknowledge, round 1 with an acknowledgement riding on it
    seed("p4sgd-two-phase", 2, 2, [
        pkt(rank=0, payload=(1, 2)), pkt(rank=1, payload=(3, 4)),
        pkt(rank=0, payload=(1, 2)),                                # resend of the result
        pkt(typ=ACK, rank=0), pkt(typ=ACK, rank=0),                 # duplicate ack
        pkt(typ=ACK, rank=1),                                       # confirmed
        pkt(typ=ACK, rank=1),                                       # resend confirm
        pkt(rank=0, slot=1, chunk=1, exp=0, next_exp=1, payload=(9, 9)),  # ack rides
        pkt(rank=1, rnd=1, payload=(5, 6)),
        pkt(typ=ACK, rank=0, rnd=5)])                               # ahead
    seed("p4sgd-piggyback", 2, 1, [
        pkt(rank=0, slot=0, payload=(1,)), pkt(rank=1, slot=0, payload=(2,)),
        pkt(rank=0, slot=1, chunk=1, exp=0, next_exp=0, payload=(3,)),
        pkt(rank=1, slot=1, chunk=1, exp=0, next_exp=0, payload=(4,)),
        pkt(rank=0, slot=0, rnd=1, chunk=2, exp=0, next_exp=0, payload=(5,))])
    # invalid datagrams, one per wire_decode() status, plus results and confirmations
    good = pkt(rank=0, payload=(1,))
    seed("invalid", 2, 2, [
        b"", good[:35], pkt(magic=0x4142), pkt(version=1), pkt(typ=0), pkt(typ=5),
        pkt(dtype=3), pkt(flags=0x08), pkt(rnd=1, flags=0), pkt(count=2, payload=(1,)),
        pkt(typ=ACK, payload=(1,)), pkt(typ=CONFIRM, count=1, raw_payload=b"\0\0\0\0"),
        pkt(typ=RESULT, payload=(1,)), pkt(typ=CONFIRM), good + b"\0",
        pkt(rank=7, payload=(1,)), pkt(payload=(1, 2, 3))])


if __name__ == "__main__":
    main()
