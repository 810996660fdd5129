#!/usr/bin/env python3
"""backend_overhead.py - the `inagg` torch.distributed backend's per-operation overhead: back-to-
back 4-byte all_reduce through init_process_group("inagg") against the C library's own small
allreduce (`inagg bench latency`), same ranks, protocol and loopback, in one invocation.

    /usr/bin/python3 bench/backend_overhead.py [--iters 10000] [--protocol switchml|p4sgd]
                                               [--repeats 3] [--no-gloo] [--json FILE|-]

Each repeat runs `build/inagg bench latency --workers 2 --elems 1 --iters N --protocol P`
(p50 of the slower rank's latency, each operation lined up by an untimed one) and then 2 ranks
of init_process_group("inagg") (embedded switch, tcp:// store on 127.0.0.1) doing N
back-to-back dist.all_reduce of one float32 each, every result checked exactly; an
operation's latency is the slower rank's (in a back-to-back run that includes how long the
rank that came first waited for the other). The same ranks then run N more timed the way
`inagg bench latency` times them, each after an untimed one that lines the ranks up
("lined up"). Then the same two loops on a Gloo group of 2 ranks (unless --no-gloo): what
torch.distributed itself costs a call on this machine. Prints the p50s per repeat, their
medians, and ratio = backend back-to-back p50 / C p50 (and lined_up_ratio, ratio_to_gloo). Exit
1 when a result was wrong, an all_reduce did not go through the switch (the backend's counter),
or a run failed.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def c_p50(iters, protocol):
    """The C library's small-allreduce p50 (us) from `inagg bench latency`."""
    cmd = [os.path.join(ROOT, "build", "inagg"), "bench", "latency", "--workers", "2",
           "--elems", "1", "--iters", str(iters), "--protocol", protocol, "--json", "-"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd), out.returncode, out.stderr[-500:]))
    j = json.loads(out.stdout.strip().splitlines()[-1])
    if not j.get("verified"):
        raise RuntimeError("inagg bench latency did not verify its results")
    return float(j["latency_us"]["p50"])


def rank_main(rank, world, port, iters, warmup, out, backend="inagg"):
    import torch
    import torch.distributed as dist
    import inagg.torch  # noqa: F401  registers "inagg"
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank,
                            world_size=world)
    t = torch.zeros(1, dtype=torch.float32)
    times = torch.zeros(iters, dtype=torch.int64)
    wrong = 0
    clock = time.perf_counter_ns
    lined = torch.zeros(iters, dtype=torch.int64)
    for i in range(warmup + iters):
        t[0] = float(rank + 1 + (i % 1000))  # exact in float32: sum 3 + 2 * (i % 1000)
        t0 = clock()
        dist.all_reduce(t)
        t1 = clock()
        wrong += int(t[0].item() != 3.0 + 2.0 * (i % 1000))
        if i >= warmup:
            times[i - warmup] = t1 - t0
    up = torch.zeros(1, dtype=torch.float32)
    for i in range(iters):
        dist.all_reduce(up)  # untimed: lines the ranks up, as `inagg bench latency` does
        t[0] = float(rank + 1 + (i % 1000))
        t0 = clock()
        dist.all_reduce(t)
        t1 = clock()
        wrong += int(t[0].item() != 3.0 + 2.0 * (i % 1000))
        lined[i] = t1 - t0
    # all of them went through the switch (Gloo: none to count)
    switch_calls = inagg.torch.backend_stats()["switch"] if backend == "inagg" else 0
    def slowest(mine):
        gathered = [torch.zeros(iters, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(gathered, mine)  # Gloo's (delegated), after the timing
        return torch.stack(gathered).max(dim=0).values.double() / 1000.0
    b2b, up_times = slowest(times), slowest(lined)
    w = torch.tensor([wrong], dtype=torch.int64)
    dist.all_reduce(w)
    if rank == 0:
        out.put({"p50": float(b2b.median()), "mean": float(b2b.mean()),
                 "lined_p50": float(up_times.median()), "wrong": int(w[0]),
                 "switch_calls": switch_calls})
    dist.destroy_process_group()


def backend_p50(iters, warmup, protocol, backend="inagg"):
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    os.environ["INAGG_PROTOCOL"] = protocol
    os.environ.pop("INAGG_SWITCH", None)
    q = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, 2, port, iters, warmup, q, backend))
             for r in range(2)]
    for p in procs:
        p.start()
    try:
        res = q.get(timeout=600)
    finally:
        for p in procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()
    if any(p.exitcode != 0 for p in procs):
        raise RuntimeError("a rank exited %s" % [p.exitcode for p in procs])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=10000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--protocol", choices=["switchml", "p4sgd"], default="switchml")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-gloo", dest="gloo", action="store_false",
                    help="skip the same loop on a Gloo group (the torch.distributed floor: "
                    "Python, dispatch and the flight recorder's hook, which Gloo pays too)")
    ap.add_argument("--json", help="also write the summary as JSON (- for stdout)")
    a = ap.parse_args()
    if a.iters < 1 or a.repeats < 1:
        ap.error("--iters and --repeats must be at least 1")
    rows, ok = [], True
    for r in range(a.repeats):
        c = c_p50(a.iters, a.protocol)
        b = backend_p50(a.iters, a.warmup, a.protocol)
        g = backend_p50(a.iters, a.warmup, a.protocol, "gloo") if a.gloo else None
        ok &= b["wrong"] == 0 and b["switch_calls"] == a.warmup + 3 * a.iters
        ok &= g is None or g["wrong"] == 0
        rows.append((c, b, g))
        print("repeat %d: C small allreduce p50 %.1f us; backend all_reduce back-to-back p50 "
              "%.1f us (mean %.1f), lined up p50 %.1f us; switch calls %s; wrong results %d%s"
              % (r + 1, c, b["p50"], b["mean"], b["lined_p50"], b["switch_calls"], b["wrong"],
                 "; Gloo back-to-back p50 %.1f us, lined up %.1f us, wrong %d"
                 % (g["p50"], g["lined_p50"], g["wrong"]) if g else ""),
              file=sys.stderr)
    cm = statistics.median(c for c, _, _ in rows)
    bm = statistics.median(b["p50"] for _, b, _ in rows)
    lm = statistics.median(b["lined_p50"] for _, b, _ in rows)
    summary = {"protocol": a.protocol, "iters": a.iters, "repeats": a.repeats,
               "c_p50_us": round(cm, 1), "backend_p50_us": round(bm, 1),
               "backend_lined_up_p50_us": round(lm, 1), "ratio": round(bm / cm, 3),
               "lined_up_ratio": round(lm / cm, 3), "verified": ok}
    gloo = ""
    if a.gloo:
        gm = statistics.median(g["p50"] for _, _, g in rows)
        glm = statistics.median(g["lined_p50"] for _, _, g in rows)
        summary.update({"gloo_p50_us": round(gm, 1), "gloo_lined_up_p50_us": round(glm, 1),
                        "ratio_to_gloo": round(bm / gm, 3)})
        gloo = "; Gloo back-to-back p50 %.1f us (backend/Gloo %.2f), lined up %.1f us" % (
            gm, bm / gm, glm)
    print("protocol %s, %d ops x %d repeats (medians): C p50 %.1f us, backend back-to-back p50 "
          "%.1f us (ratio %.2f), lined up p50 %.1f us (ratio %.2f)%s%s"
          % (a.protocol, a.iters, a.repeats, cm, bm, bm / cm, lm, lm / cm, gloo,
             "" if ok else ", WRONG RESULTS"))
    if a.json:
        text = json.dumps(summary)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as f:
                f.write(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
