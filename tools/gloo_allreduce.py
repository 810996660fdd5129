#!/usr/bin/python3
"""The Gloo allreduce baseline: PyTorch's torch.distributed (gloo backend) on the tensor
`inagg bench allreduce` uses, either as N local ranks on loopback or as one rank of a job whose
ranks run on different hosts (testbed namespaces, or real machines).

  one rank per host (every rank with the same options and its own --rank; rank 0 serves the
  TCPStore at --master):
    gloo_allreduce.py --rank R --world W --master HOST:PORT [--ifname IF] [options]
  N local ranks on loopback, one report for the job:
    gloo_allreduce.py --workers N [options] [--json FILE|-]

The tensor contents are src/apps/bench/benchdata.h's (a stateless hash of seed, rank and index), so
a Gloo run and an inagg run with the same --seed, --elems and --dtype reduce the same numbers.
Each rank runs warmup + timed dist.all_reduce(SUM) calls, each after a barrier, and verifies
the last result (every result with --verify-all; Open MPI's baseline also checks the last, and
`inagg bench allreduce` checks every one of its own): int32 exactly, float32 within
W * 2^-24 * sum|x| (float additions in any order).
`checksum` is benchdata.h's bench_checksum of the last result (sum of word[i] *
(splitmix64(i) | 1) mod 2^64 over its 32-bit words): an int32 result that is bit-identical
to inagg's or Open MPI's has the same checksum.

Rank mode prints one JSON line: name, rank, world, elems, dtype, verified, wrong, max_err,
checksum, t_start/t_end (wall clock around the timed iterations), cpu_s (this process's CPU time
over them), times_s (this rank's time per timed iteration). The launcher takes, per iteration,
the slowest rank's (`inagg bench allreduce --baseline gloo` does that, on loopback and with
--testbed). Local mode prints {"baseline":"gloo", "workers", "elems", "dtype", "iters",
"warmup", "seed", "verified", "checksum", "tat_ms":{"median","min","max"}, "ate_per_s",
"goodput_gbps", "times_s", "cpu_s_max", "torch"} (--json, or a summary line on stderr).

Needs python3-torch (Debian's, CPU) and numpy. --ifname sets GLOO_SOCKET_IFNAME, so the data
goes over that interface (tb0 on the testbed, lo locally).
Exit: 0 verified, 1 not (or a rank failed), 2 usage, 3 torch or Gloo unavailable.
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import time

M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
CHUNK = 1 << 20  # elements per step when filling and verifying: bounded memory at any size


def _mix(z):
    """splitmix64's finaliser on a uint64 array (wrapping arithmetic)."""
    import numpy as np
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _hash(seed, rank, idx):
    """benchdata.h's bench_hash(seed, rank, i) for the uint64 index array idx."""
    import numpy as np
    with np.errstate(over="ignore"):
        s = np.uint64((seed ^ ((rank * GAMMA) & M64)) & M64) ^ (idx * np.uint64(0xD1B54A32D192ED03))
        return _mix(s + np.uint64(GAMMA))


def bench_values(seed, rank, start, n, dtype):
    """bench_value_i32 / bench_value_f32 of elements start..start+n-1 on `rank`."""
    import numpy as np
    i = np.arange(start, start + n, dtype=np.uint64)
    h = _hash(seed, rank, i)
    if dtype == "int32":
        return ((h >> np.uint64(39)).astype(np.int64) - (1 << 24)).astype(np.int32)
    blk = _hash(seed ^ 0x5BD1E9955BD1E995, 0xFFFFFFFF, i // np.uint64(1024))
    block_exp = -20 + (blk % np.uint64(41)).astype(np.int64)
    exp = block_exp - (h & np.uint64(7)).astype(np.int64)
    bits = (((h >> np.uint64(63)) << np.uint64(31)) |
            ((exp + 127).astype(np.uint64) << np.uint64(23)) |
            ((h >> np.uint64(8)) & np.uint64(0x7FFFFF)))
    return bits.astype(np.uint32).view(np.float32)


def bench_checksum(arr):
    """benchdata.h's bench_checksum of a 4-byte-element array."""
    import numpy as np
    words = arr.view(np.uint32)
    total = np.uint64(0)
    with np.errstate(over="ignore"):
        for off in range(0, len(words), CHUNK):
            w = words[off:off + CHUNK].astype(np.uint64)
            idx = np.arange(off, off + len(w), dtype=np.uint64)
            weight = _mix(idx + np.uint64(GAMMA)) | np.uint64(1)
            total = total + np.sum(w * weight, dtype=np.uint64)
    return "%016x" % int(total)


def verify(got, a):
    """(wrong elements, worst error relative to its bound) of a result, chunk by chunk."""
    import numpy as np
    wrong, worst = 0, 0.0
    for off in range(0, a.elems, CHUNK):
        n = min(CHUNK, a.elems - off)
        g = got[off:off + n]
        if a.dtype == "int32":
            want = np.zeros(n, dtype=np.int64)
            for r in range(a.world):
                want += bench_values(a.seed, r, off, n, "int32")
            wrong += int(np.count_nonzero(g.astype(np.int64) != want))
            continue
        want = np.zeros(n, dtype=np.float64)
        mag = np.zeros(n, dtype=np.float64)
        for r in range(a.world):
            v = bench_values(a.seed, r, off, n, "float32").astype(np.float64)
            want += v
            mag += np.abs(v)
        err = np.abs(g.astype(np.float64) - want)
        bound = a.world * 2.0 ** -24 * mag + 1e-30
        bad = ~(err <= bound)
        wrong += int(np.count_nonzero(bad))
        if not bad.all():
            worst = max(worst, float(np.max(np.where(bad, 0.0, err / bound))))
    return wrong, worst


def run_rank(a):
    if a.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = a.ifname
    try:
        import numpy as np
        import torch
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("this torch has no torch.distributed with Gloo")
    except ImportError as e:
        print(f"gloo_allreduce: {e} (apt-get install python3-torch)", file=sys.stderr)
        return 3
    torch.set_num_threads(1)  # one rank per core or fewer cores than ranks: no oversubscription
    mine = np.empty(a.elems, dtype=np.int32 if a.dtype == "int32" else np.float32)
    for off in range(0, a.elems, CHUNK):
        n = min(CHUNK, a.elems - off)
        mine[off:off + n] = bench_values(a.seed, a.rank, off, n, a.dtype)
    mine = torch.from_numpy(mine)

    host, port = a.master.rsplit(":", 1)
    timeout = datetime.timedelta(seconds=a.timeout_s)
    store = dist.TCPStore(host, int(port), a.world, a.rank == 0, timeout)
    dist.init_process_group("gloo", store=store, rank=a.rank, world_size=a.world, timeout=timeout)

    times, wrong, worst = [], 0, 0.0
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
        if a.verify_all or it + 1 == a.warmup + a.iters:
            w, x = verify(buf.numpy(), a)
            wrong, worst = wrong + w, max(worst, x)
    dist.barrier()  # nobody leaves (and closes its sockets) while another still verifies
    dist.destroy_process_group()
    rep = {
        "name": "gloo", "rank": a.rank, "world": a.world, "elems": a.elems, "dtype": a.dtype,
        "verified": wrong == 0, "wrong": wrong, "max_err": worst,
        "checksum": bench_checksum(buf.numpy()),
        "t_start": t_start, "t_end": t_end, "cpu_s": round(cpu1 - cpu0, 4),
        "times_s": [round(t, 6) for t in times], "torch": torch.__version__,
    }
    print(json.dumps(rep), flush=True)
    return 0 if wrong == 0 else 1


def run_local(a, argv):
    """--workers N: N ranks of this script on loopback, one report."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    keep = []  # this invocation's options minus --workers/--json: every rank gets them
    skip = 0
    for i, x in enumerate(argv):
        if skip:
            skip -= 1
            continue
        if x in ("--workers", "--json"):
            skip = 1
            continue
        if x.startswith("--workers=") or x.startswith("--json="):
            continue
        keep.append(x)
    me = os.path.abspath(__file__)
    procs = [subprocess.Popen([sys.executable, me, "--rank", str(r), "--world", str(a.workers),
                               "--master", f"127.0.0.1:{port}", "--ifname", "lo"] + keep,
                              stdout=subprocess.PIPE, text=True)
             for r in range(a.workers)]
    reps, rc = [], 0
    for p in procs:
        out, _ = p.communicate()
        rc = max(rc, p.returncode)
        lines = [x for x in out.splitlines() if x.startswith("{")]
        if lines:
            reps.append(json.loads(lines[-1]))
    if rc == 3:
        return 3
    if len(reps) != a.workers:
        print("gloo_allreduce: a rank failed (see above)", file=sys.stderr)
        return 1
    times = [max(r["times_s"][i] for r in reps) for i in range(a.iters)]
    med = statistics.median(times)
    res = {"baseline": "gloo", "workers": a.workers, "elems": a.elems, "dtype": a.dtype,
           "iters": a.iters, "warmup": a.warmup, "seed": a.seed,
           "verified": all(r["verified"] for r in reps),
           "checksum": reps[0]["checksum"],
           "checksums_agree": len({r["checksum"] for r in reps}) == 1,
           "tat_ms": {"median": med * 1e3, "min": min(times) * 1e3, "max": max(times) * 1e3},
           "ate_per_s": a.elems / med, "goodput_gbps": a.elems * 4 * 8 / med / 1e9,
           "times_s": times, "cpu_s_max": max(r["cpu_s"] for r in reps),
           "torch": reps[0].get("torch")}
    print("gloo: %d workers, %d %s, median TAT %.3f ms, %.3g elements/s, verified %s" % (
        a.workers, a.elems, a.dtype, res["tat_ms"]["median"], res["ate_per_s"],
        res["verified"]), file=sys.stderr)
    if a.json == "-":
        print(json.dumps(res))
    elif a.json:
        with open(a.json, "w") as f:
            json.dump(res, f)
            f.write("\n")
    return 0 if res["verified"] and rc == 0 else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--workers", type=int, help="N local ranks on loopback, one report")
    ap.add_argument("--rank", type=int, help="this rank (one rank per host)")
    ap.add_argument("--world", type=int, help="the number of ranks (with --rank)")
    ap.add_argument("--master", help="HOST:PORT of rank 0's TCPStore (with --rank)")
    ap.add_argument("--ifname", default=None, help="interface for Gloo (GLOO_SOCKET_IFNAME)")
    ap.add_argument("--elems", type=int, default=4000000)
    ap.add_argument("--dtype", choices=["int32", "float32"], default="float32")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--verify-all", action="store_true",
                    help="verify every iteration's result (default: the last one)")
    ap.add_argument("--timeout-s", type=float, default=120.0)
    ap.add_argument("--json", metavar="FILE|-", help="local mode: write the report here")
    a = ap.parse_args()
    if a.elems < 1 or a.iters < 1 or a.warmup < 0 or not 0 <= a.seed <= M64:
        ap.error("--elems and --iters must be positive, --warmup >= 0, --seed a uint64")
    if a.workers is not None:
        if a.rank is not None or a.master:
            ap.error("--workers (local ranks) and --rank/--master (one rank) exclude each other")
        if not 1 <= a.workers <= 64:
            ap.error("--workers must be 1..64")
        return run_local(a, sys.argv[1:])
    if a.rank is None or a.world is None or not a.master:
        ap.error("give --workers N, or --rank, --world and --master")
    if not (1 <= a.world <= 64 and 0 <= a.rank < a.world):
        ap.error("need 1 <= world <= 64 and 0 <= rank < world")
    return run_rank(a)


if __name__ == "__main__":
    sys.exit(main())
