#!/usr/bin/env python3
"""tests/roce_frames.py - send one RoCE v1 frame of each Table VI case to the fabric's MAC from
interface IF (run inside a testbed host), for tests/cli_roce.sh:

  not_write   an RC Send Only (opcode 0x04): RoCE, not an RDMA Write       -> forwarded
  no_match    a Write Only whose payload is not an inagg header           -> forwarded
  no_flow     a Write Middle on a QP no Write First opened                 -> forwarded
  malformed   a frame of type 0x8915 too short for a BTH                   -> dropped
  other_mac   a Write Only to another MAC (PEER_MAC)                      -> switched as any frame

Usage: roce_frames.py IF SWITCH_MAC PEER_MAC   prints "sent 5". ICRCs by zlib (PROTOCOL.md 13.1).
"""
import socket
import struct
import sys
import zlib


def mac(text):
    return bytes(int(x, 16) for x in text.split(':'))


def frame(dst, src, op, qp, psn, payload, reth=True):
    ext = struct.pack('>QII', 0, 0, len(payload)) if reth else b''
    pad = (4 - len(payload) % 4) % 4
    bth = bytes([op, pad << 4]) + b'\xff\xff\x00' + qp.to_bytes(3, 'big') + b'\x80' + \
        psn.to_bytes(3, 'big')
    body = bth + ext + payload + b'\x00' * pad
    grh = struct.pack('>IHBB', 6 << 28, len(body) + 4, 0x1b, 1) + b'\xfe\x80' + b'\x00' * 14 + \
        b'\xfe\x80' + b'\x00' * 14
    m = bytearray(grh + body)
    m[0] |= 0x0f
    m[1] = m[2] = m[3] = 0xff
    m[7] = 0xff
    m[44] = 0xff
    icrc = zlib.crc32(b'\xff' * 8 + bytes(m)) & 0xffffffff
    return dst + src + b'\x89\x15' + grh + body + struct.pack('<I', icrc)


def main():
    ifname, sw, peer = sys.argv[1], mac(sys.argv[2]), mac(sys.argv[3])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    me = s.getsockname()[4][:6]
    frames = [
        frame(sw, me, 0x04, 0x777, 1, b'send', reth=False),
        frame(sw, me, 0x0a, 0x778, 1, b'not an inagg header, just bytes'),
        frame(sw, me, 0x07, 0x779, 5, b'm' * 1024, reth=False),
        sw + me + b'\x89\x15' + b'\x60' + b'\x00' * 20,
        frame(peer, me, 0x0a, 0x77a, 1, b'for the other host'),
    ]
    for f in frames:
        s.send(f)
    print('sent %d' % len(frames))


if __name__ == '__main__':
    main()
