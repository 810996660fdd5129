#!/usr/bin/env python3
"""gloo_bench.py - torch.distributed's Gloo allreduce on the tensor `inagg bench allreduce` uses,
as a baseline: N local ranks on loopback, warmups then timed iterations, every result verified.

    python3 tools/gloo_bench.py --workers 4 --elems 4000000 --dtype float32 --json -

The tensor contents are src/bench/benchdata.h's (the same stateless hash of seed, rank and
index), so a baseline run and an inagg run with the same --seed reduce the same numbers.
Each iteration's time is the slowest rank's (max over ranks, measured outside the timed part);
the JSON has the same names as `inagg bench allreduce --json`:
    {"baseline": "gloo", "workers", "elems", "dtype", "iters", "warmup", "seed", "verified",
     "max_rel_err", "tat_ms": {"median", "min", "max"}, "ate_per_s", "goodput_gbps"}
Exit status: 0 verified, 1 a wrong result, 2 usage, 3 torch or Gloo unavailable.
float32 check: |gloo - exact| <= (world-1) * 2^-24 * sum|x_r| + tiny, any summation order.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import tempfile
import time

M64 = (1 << 64) - 1


def bench_values(seed, rank, n, dtype):
    """benchdata.h's bench_value_i32 / bench_value_f32 for elements 0..n-1 of `rank`."""
    import numpy as np
    i = np.arange(n, dtype=np.uint64)

    def hash_(seed_, rank_, idx):
        with np.errstate(over="ignore"):
            base = np.uint64(seed_ ^ ((rank_ * 0x9E3779B97F4A7C15) & M64))
            s = base ^ (idx * np.uint64(0xD1B54A32D192ED03))
            z = s + np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            return z ^ (z >> np.uint64(31))

    h = hash_(seed, rank, i)
    if dtype == "int32":
        return ((h >> np.uint64(39)).astype(np.int64) - (1 << 24)).astype(np.int32)
    blk = hash_(seed ^ 0x5BD1E9955BD1E995, 0xFFFFFFFF, i // np.uint64(1024))
    block_exp = -20 + (blk % np.uint64(41)).astype(np.int64)
    exp = block_exp - (h & np.uint64(7)).astype(np.int64)
    bits = (((h >> np.uint64(63)) << np.uint64(31)) |
            ((exp + 127).astype(np.uint64) << np.uint64(23)) |
            ((h >> np.uint64(8)) & np.uint64(0x7FFFFF)))
    return bits.astype(np.uint32).view(np.float32)


def worker(rank, args, port, out):
    import numpy as np
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=args.workers)
    mine = torch.from_numpy(bench_values(args.seed, rank, args.elems, args.dtype))
    buf = mine.clone()
    times = []
    for it in range(args.warmup + args.iters):
        buf.copy_(mine)
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        dt = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.all_reduce(dt, op=dist.ReduceOp.MAX)
        if it >= args.warmup:
            times.append(dt.item())
    # Verify this rank's result (every rank holds the whole sum; rank 0 checks it).
    ok, rel = True, 0.0
    if rank == 0:
        got = buf.numpy()
        if args.dtype == "int32":
            want = np.zeros(args.elems, dtype=np.int64)
            for r in range(args.workers):
                want += bench_values(args.seed, r, args.elems, "int32")
            ok = bool((got.astype(np.int64) == want).all())
        else:
            want = np.zeros(args.elems, dtype=np.float64)
            mag = np.zeros(args.elems, dtype=np.float64)
            for r in range(args.workers):
                v = bench_values(args.seed, r, args.elems, "float32").astype(np.float64)
                want += v
                mag += np.abs(v)
            err = np.abs(got.astype(np.float64) - want)
            bound = (args.workers - 1) * 2.0 ** -24 * mag + 1e-45
            ok = bool((err <= bound * 1.0001 + 2.0 ** -24 * np.abs(want)).all())
            rel = float(np.max(err / np.maximum(mag, 1e-38)))
        med = statistics.median(times)
        res = {"baseline": "gloo", "workers": args.workers, "elems": args.elems,
               "dtype": args.dtype, "iters": args.iters, "warmup": args.warmup,
               "seed": args.seed, "verified": ok, "max_rel_err": rel,
               "tat_ms": {"median": med * 1e3, "min": min(times) * 1e3, "max": max(times) * 1e3},
               "ate_per_s": args.elems / med, "goodput_gbps": args.elems * 4 * 8 / med / 1e9,
               "torch": torch.__version__}
        with open(out, "w") as f:
            json.dump(res, f)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description="Gloo allreduce baseline on benchdata.h's tensor")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--elems", type=int, default=4000000)
    ap.add_argument("--dtype", choices=["int32", "float32"], default="float32")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", metavar="FILE|-")
    args = ap.parse_args()
    if args.workers < 1 or args.elems < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--workers, --elems and --iters must be positive")
    try:
        import numpy  # noqa: F401
        import torch.distributed as dist
        import torch.multiprocessing as mp
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed has no Gloo")
    except ImportError as e:
        print("gloo_bench.py: %s" % e, file=sys.stderr)
        return 3
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        mp.spawn(worker, args=(args, port, tmp.name), nprocs=args.workers)
        res = json.load(open(tmp.name))
    print("gloo: %d workers, %d %s, median TAT %.3f ms, %.3g elements/s, verified %s" % (
        args.workers, args.elems, args.dtype, res["tat_ms"]["median"], res["ate_per_s"],
        res["verified"]), file=sys.stderr)
    if args.json == "-":
        print(json.dumps(res))
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(res, f)
    return 0 if res["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
