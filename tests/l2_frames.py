#!/usr/bin/python3
"""tests/l2_frames.py - raw Ethernet frames for tests/cli_l2fabric.sh: sends malformed and
foreign frames from inside a host namespace (AF_PACKET on IFACE), or runs a TCP sink /
source to check a stream crosses the fabric intact.

  l2_frames.py bad IFACE SWITCH_MAC SWITCH_IP AGG_PORT     one frame of each bad kind
  l2_frames.py sink PORT BYTES                             accept one TCP stream, print sha256
  l2_frames.py source HOST PORT BYTES                      send BYTES, print sha256
"""
import hashlib
import socket
import struct
import sys


def mac_bytes(text):
    return bytes(int(x, 16) for x in text.split(":"))


def ip_header(src, dst, proto, payload_len, ihl=5, frag=0x4000):
    h = struct.pack("!BBHHHBBH4s4s", (4 << 4) | ihl, 0, 20 + payload_len, 1, frag, 64, proto, 0,
                    socket.inet_aton(src), socket.inet_aton(dst))
    s = sum(struct.unpack("!10H", h))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return h[:10] + struct.pack("!H", ~s & 0xFFFF) + h[12:]


def bad(iface, sw_mac, sw_ip, agg_port):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    me = s.getsockname()[4][:6]
    my_ip = socket.inet_ntoa(socket.inet_aton("0.0.0.0"))
    dst = mac_bytes(sw_mac)
    eth = lambda d, src=me, t=0x0800: d + src + struct.pack("!H", t)
    udp = lambda dport, body: struct.pack("!HHHH", 40000, dport, 8 + len(body), 0) + body
    # 1. malformed: an IPv4 header claiming 12 bytes (ihl 3)
    s.send(eth(dst) + ip_header(my_ip, sw_ip, 17, 8, ihl=3) + udp(agg_port, b""))
    # 2. an IPv4 fragment of a UDP datagram to the switch (more fragments set)
    body = udp(agg_port, b"x" * 64)
    s.send(eth(dst) + ip_header(my_ip, sw_ip, 17, len(body), frag=0x2000) + body)
    # 3. a multicast source MAC
    s.send(eth(b"\xff" * 6, src=b"\x01\x00\x5e\x00\x00\x01") + b"\x00" * 46)
    # 4. foreign: UDP to the switch's IP on a port that is not aggregation (to its stack)
    body = udp(9, b"hello")
    s.send(eth(dst) + ip_header(my_ip, sw_ip, 17, len(body)) + body)
    # 5. garbage on the aggregation port: to the dataplane, which drops it (bad magic)
    body = udp(agg_port, b"\x00" * 40)
    s.send(eth(dst) + ip_header(my_ip, sw_ip, 17, len(body)) + body)
    # 6. an unknown ethertype to an unknown unicast MAC: flooded unchanged
    s.send(eth(b"\x02\x00\x00\x00\x00\x99", t=0x88B5) + b"\x00" * 46)
    print("sent 6")


def sink(port, nbytes):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(20)
    c, _ = srv.accept()
    c.settimeout(20)
    h, got = hashlib.sha256(), 0
    while got < nbytes:
        b = c.recv(1 << 16)
        if not b:
            break
        h.update(b)
        got += len(b)
    print(got, h.hexdigest())


def source(host, port, nbytes):
    import time
    deadline = time.time() + 10  # the sink may still be starting
    while True:
        try:
            c = socket.create_connection((host, port), timeout=20)
            break
        except ConnectionRefusedError:
            if time.time() > deadline:
                raise
            time.sleep(0.1)
    h, sent, i = hashlib.sha256(), 0, 0
    while sent < nbytes:
        blk = hashlib.sha256(str(i).encode()).digest() * 2048
        blk = blk[: nbytes - sent]
        c.sendall(blk)
        h.update(blk)
        sent += len(blk)
        i += 1
    c.close()
    print(sent, h.hexdigest())


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "bad" and len(a) == 5:
        bad(a[1], a[2], a[3], int(a[4]))
    elif a and a[0] == "sink" and len(a) == 3:
        sink(int(a[1]), int(a[2]))
    elif a and a[0] == "source" and len(a) == 4:
        source(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit(__doc__)
