#!/usr/bin/python3
"""One rank of the Gloo allreduce baseline: PyTorch's torch.distributed with the gloo backend.

Every rank runs this script on its own host (a testbed namespace, or a real machine) with the
same options and its own --rank; rank 0 also serves the TCPStore the ranks rendezvous through
(--master is rank 0's address). Each rank fills a tensor with values every rank can recompute,
runs warmup + timed dist.all_reduce(SUM) calls, each after a barrier, verifies every result
against the exact sum, and prints one line of JSON with its own per-iteration times; the
launcher takes, per iteration, the slowest rank's (bench/testbed_run.py).

    tools/testbed exec NAME h2 -- /usr/bin/python3 tools/gloo_allreduce.py --rank 1 --world 4 \\
        --master 10.77.0.1:29500 --ifname tb0 --elems 4000000 --dtype int32

Gloo picks its interface from GLOO_SOCKET_IFNAME; --ifname sets it, so the data goes over
the testbed link. Needs python3-torch (Debian's, 1.13, CPU). Exit: 0 verified, 1 not, 2 usage.
"""
import argparse
import datetime
import json
import os
import sys
import time
import zlib


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True, help="HOST:PORT of rank 0's TCPStore")
    ap.add_argument("--ifname", default=None, help="interface for Gloo (GLOO_SOCKET_IFNAME)")
    ap.add_argument("--elems", type=int, default=4000000)
    ap.add_argument("--dtype", choices=["int32", "float32"], default="int32")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=120.0)
    a = ap.parse_args()
    if not (0 <= a.rank < a.world) or a.elems < 1 or a.iters < 1 or a.warmup < 0:
        print("gloo_allreduce: need 0 <= rank < world, elems >= 1, iters >= 1", file=sys.stderr)
        return 2
    if a.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        print(f"gloo_allreduce: PyTorch is not installed ({e}): apt-get install python3-torch",
              file=sys.stderr)
        return 2
    torch.set_num_threads(1)  # one rank per host, as many hosts as the machine has cores or more

    def tensor_of(rank):
        g = torch.Generator().manual_seed(a.seed * 1000003 + rank)
        if a.dtype == "int32":  # sums of 64 ranks stay far from overflow
            return torch.randint(-(1 << 24), 1 << 24, (a.elems,), generator=g, dtype=torch.int32)
        return torch.rand(a.elems, generator=g, dtype=torch.float32) * 2 - 1

    mine = tensor_of(a.rank)
    if a.dtype == "int32":
        expect = torch.zeros(a.elems, dtype=torch.int64)
        for r in range(a.world):
            expect += tensor_of(r).to(torch.int64)
        expect = expect.to(torch.int32)
    else:
        expect = torch.zeros(a.elems, dtype=torch.float64)
        for r in range(a.world):
            expect += tensor_of(r).to(torch.float64)

    host, port = a.master.rsplit(":", 1)
    timeout = datetime.timedelta(seconds=a.timeout_s)
    store = dist.TCPStore(host, int(port), a.world, a.rank == 0, timeout)
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.world, timeout=timeout)

    times, wrong = [], 0
    t_start = t_end = cpu0 = cpu1 = 0.0
    buf = mine.clone()
    for it in range(a.warmup + a.iters):
        buf.copy_(mine)
        dist.barrier()
        if it == a.warmup:
            t_start, cpu0 = time.time(), time.process_time()
        t0 = time.perf_counter()
        dist.all_reduce(buf, op=dist.ReduceOp.SUM)
        t1 = time.perf_counter()
        if it >= a.warmup:
            times.append(t1 - t0)
        if it + 1 == a.warmup + a.iters:
            t_end, cpu1 = time.time(), time.process_time()
        if a.dtype == "int32":
            wrong += int((buf != expect).sum())
        else:
            err = (buf.to(torch.float64) - expect).abs()
            wrong += int((err > a.world * 2.0 ** -22 * (expect.abs() + a.world)).sum())
    dist.destroy_process_group()
    rep = {
        "name": "gloo", "rank": a.rank, "world": a.world, "elems": a.elems, "dtype": a.dtype,
        "verified": wrong == 0, "wrong": wrong,
        "checksum": "%08x" % zlib.crc32(buf.numpy().tobytes()),
        "t_start": t_start, "t_end": t_end, "cpu_s": cpu1 - cpu0,
        "times_s": [round(t, 6) for t in times],
    }
    print(json.dumps(rep), flush=True)
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
