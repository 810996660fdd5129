#!/usr/bin/env python3
"""tests/roce_pcap.py - check the RoCE v1 frames of a pcap file independently of inagg's C code.

For every frame of Ethernet type 0x8915: the ICRC, computed here with zlib.crc32 over 8 bytes of
0xff, the GRH with traffic class, flow label and hop limit set to ones, the BTH with its reserved
byte set to ones, and the rest up to the ICRC (stored least significant byte first); the GRH
payload length against the frame's length; and, per flow (source MAC, destination QP), that PSNs
advance by one frame at a time modulo 2^24 (a gap is a frame missing from the capture), except
for retransmissions at old PSNs (go-back-N, PROTOCOL.md 13.4): a frame behind the flow's highest
PSN is `psn_resent` when it is byte for byte the frame seen before at that PSN, else
`psn_backwards`.

Usage: roce_pcap.py FILE   prints one JSON object:
  {"frames": N, "roce": N, "bad_icrc": N, "bad_length": N, "opcodes": {"6": N, ...},
   "flows": N, "psn_gaps": N, "psn_backwards": N, "psn_resent": N, "wrapped_flows": N,
   "qps": [...], "mtus": [...]}
where "mtus" are the distinct payload lengths of First and Middle frames: the path MTUs in use.
"""
import json
import struct
import sys
import zlib


def frames(path):
    with open(path, 'rb') as f:
        hdr = f.read(24)
        magic = struct.unpack('<I', hdr[:4])[0]
        end = '<' if magic == 0xa1b2c3d4 else '>'
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            _, _, incl, _ = struct.unpack(end + 'IIII', rec)
            yield f.read(incl)


def icrc(frame):
    grh = bytearray(frame[14:-4])
    grh[0] |= 0x0f
    grh[1] = grh[2] = grh[3] = 0xff
    grh[7] = 0xff
    grh[44] = 0xff
    return zlib.crc32(b'\xff' * 8 + bytes(grh)) & 0xffffffff


def main():
    out = {'frames': 0, 'roce': 0, 'bad_icrc': 0, 'bad_length': 0, 'opcodes': {}, 'flows': 0,
           'psn_gaps': 0, 'psn_backwards': 0, 'psn_resent': 0, 'wrapped_flows': 0, 'qps': []}
    mtus = set()
    last = {}
    seen = {}
    wrapped = set()
    for fr in frames(sys.argv[1]):
        out['frames'] += 1
        if len(fr) < 14 or fr[12:14] != b'\x89\x15':
            continue
        out['roce'] += 1
        if len(fr) < 14 + 40 + 12 + 4 or struct.unpack('>H', fr[18:20])[0] != len(fr) - 54:
            out['bad_length'] += 1
            continue
        if icrc(fr) != struct.unpack('<I', fr[-4:])[0]:
            out['bad_icrc'] += 1
        bth = fr[54:66]
        op = bth[0]
        qp = int.from_bytes(bth[5:8], 'big')
        psn = int.from_bytes(bth[9:12], 'big')
        out['opcodes'][str(op)] = out['opcodes'].get(str(op), 0) + 1
        if op in (6, 7):  # First (with its 16-byte RETH) and Middle carry one MTU, no pad
            mtus.add(len(fr) - 14 - 40 - 12 - (16 if op == 6 else 0) - 4)
        key = (fr[6:12], qp)
        if key in last:
            d = (psn - last[key]) & 0xffffff
            if d == 0 or d >= 0x800000:
                if seen.get((key, psn)) == fr:
                    out['psn_resent'] += 1
                else:
                    out['psn_backwards'] += 1
                continue
            if d > 1:
                out['psn_gaps'] += 1
            if psn < last[key]:
                wrapped.add(key)
        last[key] = psn
        seen[(key, psn)] = fr
    out['flows'] = len(last)
    out['wrapped_flows'] = len(wrapped)
    out['qps'] = sorted({'0x%06x' % k[1] for k in last})
    out['mtus'] = sorted(mtus)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
