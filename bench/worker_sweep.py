#!/usr/bin/python3
"""bench/worker_sweep.py - AllReduce-Switch's worker sweep (its Fig. 18) through the inagg
fabric: for each host count N, `inagg bench allreduce --testbed N --fabric inagg --baseline
mpi-ring` (every result verified by the command), and the Open MPI ring's time over inagg's
beside the theory 2(N-1)/N: where the link binds, the ring moves 2(N-1)/N times the tensor
over every link and inagg moves it once each way.

  bench/worker_sweep.py [--hosts 2-8] [--link-rate 100mbit] [--elems 4000000] [--iters 3]
                        [--repeats 1] [--lock /tmp/inagg-measure.lock] [--json FILE|-]

A cell is the median over --repeats runs (the repeats loop outside the host counts, so a
slow spell of the machine spreads over all N). "within" is |ratio / theory - 1| <= 10%; the
table also gives each system's goodput_fraction (1.0: the link binds inagg; the ring's
ceiling is N/(2(N-1))), which says whether the link or the machine bound the run: the link
binds ("binds": yes) when inagg reaches 0.9 of the link and the ring 0.9 of its ceiling. Needs root
(network namespaces), build/inagg and Open MPI. With --lock every run holds that flock.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INAGG = os.path.join(ROOT, "build", "inagg")


def host_range(text):
    try:
        lo, _, hi = text.partition("-")
        lo, hi = int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError("expected N or N-M, e.g. 2-8")
    if not 2 <= lo <= hi <= 16:
        raise argparse.ArgumentTypeError("host counts are 2..16, low to high")
    return list(range(lo, hi + 1))


def run_one(n, a, tmpdir):
    out = os.path.join(tmpdir, f"h{n}.json")
    cmd = [INAGG, "bench", "allreduce", "--testbed", str(n), "--fabric", "inagg",
           "--link-rate", a.link_rate, "--elems", str(a.elems), "--dtype", "int32",
           "--iters", str(a.iters), "--baseline", "mpi-ring", "--json", out]
    if a.lock:
        cmd = ["flock", a.lock] + cmd
    env = dict(os.environ, INAGG_LOG="warn")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=env, timeout=900)
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-1500:])
        raise SystemExit(f"worker_sweep: {n} hosts: exit {p.returncode}" +
                         (" (testbeds cannot be built here)" if p.returncode == 3 else ""))
    d = json.load(open(out))
    ring = d["baselines"]["mpi_ring"]
    if not (d["verified"] and ring["verified"]):
        raise SystemExit(f"worker_sweep: {n} hosts: a result was not verified")
    return {"inagg_tat_s": d["tat_s"], "ring_tat_s": ring["tat_s"]["median"],
            "inagg_goodput_fraction": d["goodput_fraction"],
            "ring_goodput_fraction": ring["goodput_fraction"],
            "machine_busy_before_pct": d.get("machine_busy_before_pct"),
            "switch_cpu_pct": (d.get("cpu") or {}).get("switch"),
            "load_avg": open("/proc/loadavg").read().split()[0]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=host_range, default=host_range("2-8"))
    ap.add_argument("--link-rate", default="100mbit")
    ap.add_argument("--elems", type=int, default=4000000)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--lock", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.elems < 1 or not 1 <= a.iters <= 100 or not 1 <= a.repeats <= 10:
        ap.error("--elems >= 1, --iters 1..100, --repeats 1..10")
    runs = {n: [] for n in a.hosts}
    with tempfile.TemporaryDirectory() as tmpdir:
        for r in range(a.repeats):
            for n in a.hosts:
                res = run_one(n, a, tmpdir)
                runs[n].append(res)
                print(f"repeat {r + 1}: {n} hosts: inagg {res['inagg_tat_s']:.3f} s, ring "
                      f"{res['ring_tat_s']:.3f} s", file=sys.stderr, flush=True)
    rows = []
    med = lambda n, k: statistics.median(x[k] for x in runs[n])
    for n in a.hosts:
        ti, tr = med(n, "inagg_tat_s"), med(n, "ring_tat_s")
        theory = 2 * (n - 1) / n
        ratio = tr / ti
        rows.append({"hosts": n, "inagg_tat_s": ti, "ring_tat_s": tr, "ratio": ratio,
                     "theory": theory, "ratio_over_theory": ratio / theory,
                     "within_10pct": abs(ratio / theory - 1) <= 0.10,
                     "link_binds": med(n, "inagg_goodput_fraction") >= 0.9 and
                                   med(n, "ring_goodput_fraction") >= 0.9 * n / (2 * (n - 1)),
                     "inagg_goodput_fraction": med(n, "inagg_goodput_fraction"),
                     "ring_goodput_fraction": med(n, "ring_goodput_fraction"),
                     "ring_ceiling": n / (2 * (n - 1)), "runs": runs[n]})
    print(f"worker sweep: {a.link_rate} per link, {a.elems} int32 per rank "
          f"({a.elems * 4 / 1e6:g} MB), {a.iters} timed iterations, median of {a.repeats}")
    print("hosts  inagg TAT s  ring TAT s  ring/inagg  2(n-1)/n  ratio/theory  within 10%  "
          "goodput inagg / ring (ceiling)  link binds")
    for x in rows:
        print(f"{x['hosts']:5d}  {x['inagg_tat_s']:11.3f}  {x['ring_tat_s']:10.3f}  "
              f"{x['ratio']:10.2f}  {x['theory']:8.2f}  {x['ratio_over_theory']:12.2f}  "
              f"{'yes' if x['within_10pct'] else 'no':>10s}  {x['inagg_goodput_fraction']:.2f} / "
              f"{x['ring_goodput_fraction']:.2f} ({x['ring_ceiling']:.2f})          "
              f"{'yes' if x['link_binds'] else 'no'}")
    report = {"link_rate": a.link_rate, "elems": a.elems, "dtype": "int32", "iters": a.iters,
              "repeats": a.repeats, "fabric": "inagg", "rows": rows}
    if a.json == "-":
        print(json.dumps(report))
    elif a.json:
        with open(a.json, "w") as f:
            f.write(json.dumps(report) + "\n")


if __name__ == "__main__":
    main()
