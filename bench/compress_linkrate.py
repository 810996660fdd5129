#!/usr/bin/python3
"""compress_linkrate.py - link-rate sweep of compressed against uncompressed allreduce on the
testbed: at each link rate, `inagg bench allreduce --testbed N` runs once uncompressed and
once with --compress MODE (same invocation of this script, back to back), and the script
prints both median TATs, the speedup (uncompressed / compressed), the load average and how
busy the machine was before each run, then the break-even rate: where the speedup crosses 1
(linear in log rate between the two measured rates around the crossing).

usage: bench/compress_linkrate.py [--rates 20,40,60,100,200,400] [--hosts 4]
           [--elems 25000000] [--mode zfp:rate=8] [--iters 3] [--warmup 1]
           [--inagg build/inagg] [--out DIR]
Needs root (network namespaces). Every run's JSON is kept in DIR (default
/tmp/inagg-linkrate); a run that fails or does not verify stops the sweep with exit 1.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time


def run_one(args, rate, mode, path):
    cmd = [args.inagg, "bench", "allreduce", "--testbed", str(args.hosts), "--link-rate",
           str(rate), "--elems", str(args.elems), "--iters", str(args.iters), "--warmup",
           str(args.warmup), "--json", path]
    if mode:
        cmd += ["--compress", mode]
    load = os.getloadavg()[0]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=args.run_timeout)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-2000:])
        raise SystemExit("run failed (exit %d): %s" % (p.returncode, " ".join(cmd)))
    with open(path) as f:
        d = json.load(f)
    if not d.get("verified"):
        raise SystemExit("result not verified: %s" % " ".join(cmd))
    return {"cmd": " ".join(cmd), "tat_s": d["tat_s"], "busy": d.get("machine_busy_before_pct"),
            "load": load, "wall_s": wall, "retransmissions": d.get("retransmissions")}


def break_even(rows):
    """The rate where the speedup falls through 1, or a text saying it was not crossed."""
    for a, b in zip(rows, rows[1:]):
        if a["speedup"] >= 1.0 > b["speedup"]:
            la, lb = math.log(a["rate"]), math.log(b["rate"])
            t = (a["speedup"] - 1.0) / (a["speedup"] - b["speedup"])
            return "%.0f Mbit/s (between %g and %g)" % (math.exp(la + t * (lb - la)),
                                                       a["rate"], b["rate"])
    if all(r["speedup"] >= 1.0 for r in rows):
        return "above %g Mbit/s (compression paid at every rate measured)" % rows[-1]["rate"]
    if all(r["speedup"] < 1.0 for r in rows):
        return "below %g Mbit/s (compression paid at no rate measured)" % rows[0]["rate"]
    return "not monotonic: see the table"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="20,40,60,100,200,400")
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--elems", type=int, default=25000000)
    ap.add_argument("--mode", default="zfp:rate=8")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--inagg", default="build/inagg")
    ap.add_argument("--out", default="/tmp/inagg-linkrate")
    ap.add_argument("--run-timeout", type=int, default=900)
    args = ap.parse_args()
    try:
        rates = sorted(float(x) for x in args.rates.split(","))
    except ValueError:
        raise SystemExit("--rates: comma-separated Mbit/s, e.g. 20,40,60")
    if not rates or any(r <= 0 for r in rates):
        raise SystemExit("--rates: positive Mbit/s")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for rate in rates:
        r = "%g" % rate
        plain = run_one(args, r, None, os.path.join(args.out, "none-%s.json" % r))
        coded = run_one(args, r, args.mode, os.path.join(args.out, "coded-%s.json" % r))
        row = {"rate": rate, "none": plain, "coded": coded,
               "speedup": plain["tat_s"] / coded["tat_s"]}
        rows.append(row)
        print("%8s Mbit/s  none %8.3f s (load %.1f, busy %.0f%%)  %s %8.3f s (load %.1f, busy "
              "%.0f%%, %s retx)  speedup %.2fx" % (r, plain["tat_s"], plain["load"],
                                                  plain["busy"] or 0, args.mode, coded["tat_s"],
                                                  coded["load"], coded["busy"] or 0,
                                                  coded["retransmissions"], row["speedup"]),
              flush=True)
    print("break-even: %s" % break_even(rows))
    with open(os.path.join(args.out, "sweep.json"), "w") as f:
        json.dump({"mode": args.mode, "hosts": args.hosts, "elems": args.elems, "rows": rows,
                   "break_even": break_even(rows)}, f, indent=1)


if __name__ == "__main__":
    main()
