#!/usr/bin/env python3
"""gen_roce_seeds.py - write the seed inputs of the `roce` fuzz target into
tests/fuzz/corpus/roce/ (the files are kept in git; rerun only to change them).

Input format (fuzz_roce.c): frames, each a little-endian 16-bit length and the bytes. Frame
layout: src/lib/netio/roce_frame.h; the ICRC is computed here with zlib.
"""
import os
import struct
import zlib

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "roce")
FIRST, MIDDLE, LAST, LAST_IMM, ONLY, ONLY_IMM = 6, 7, 8, 9, 10, 11


def frame(op, psn, payload, qp=0x1234, dma_len=0, imm=0):
    pad = (4 - len(payload) % 4) % 4
    ext = b''
    if op in (FIRST, ONLY, ONLY_IMM):
        ext += struct.pack('>QII', 0, 0, dma_len)
    if op in (LAST_IMM, ONLY_IMM):
        ext += struct.pack('>I', imm)
    bth = bytes([op, pad << 4]) + b'\xff\xff\x00' + qp.to_bytes(3, 'big') + b'\x00' + \
        (psn & 0xffffff).to_bytes(3, 'big')
    body = bth + ext + payload + b'\x00' * pad
    grh = struct.pack('>IHBB', 6 << 28, len(body) + 4, 0x1b, 1) + b'\xfe\x80' + b'\x00' * 14 + \
        b'\xfe\x80' + b'\x00' * 13 + b'\x01'
    m = bytearray(grh + body)
    m[0] |= 0x0f
    m[1] = m[2] = m[3] = 0xff
    m[7] = 0xff
    m[44] = 0xff
    icrc = zlib.crc32(b'\xff' * 8 + bytes(m)) & 0xffffffff
    eth = b'\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x89\x15'
    return eth + grh + body + struct.pack('<I', icrc)


def seq(*frames):
    return b''.join(struct.pack('<H', len(f)) + f for f in frames)


def message(psn, n):
    data = bytes((i * 7) & 0xff for i in range(n))
    if n <= 1024:
        return [frame(ONLY, psn, data, dma_len=n)]
    fs, off, k = [], 0, 0
    while off < n:
        chunk = data[off:off + 1024]
        op = FIRST if off == 0 else (LAST if off + 1024 >= n else MIDDLE)
        fs.append(frame(op, psn + k, chunk, dma_len=n))
        off += 1024
        k += 1
    return fs


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        'message-3-frames': seq(*message(100, 2500)),
        'message-across-wrap': seq(*message(0xfffffe, 3000)),
        'only-and-duplicate': seq(*(message(5, 64) * 2)),
        'gap-then-first': seq(message(10, 2500)[0], message(10, 2500)[2], *message(20, 1500)),
        'immediates': seq(frame(ONLY_IMM, 1, b'abcd', dma_len=4, imm=7),
                          frame(FIRST, 2, b'x' * 1024, dma_len=1030),
                          frame(LAST_IMM, 3, b'yz' * 3, imm=9)),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
