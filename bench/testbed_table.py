#!/usr/bin/python3
"""Summarize bench/testbed_sweep.sh results (JSON lines {"tag", "args", "run"}, "run" being one
`inagg bench allreduce --testbed N --json -` report) into markdown tables.

  bench/testbed_table.py RESULTS.jsonl

Rows group runs by tag; a cell is the median over the tag's runs of each run's median TAT (the
slowest rank's time per iteration, median over iterations). speedup vs X = X's TAT / inagg's;
theory = 2(n-1)/n; goodput_fraction = tensor bytes / TAT / link rate (a ring allreduce cannot
pass n / (2(n-1))). The sweep's sizes are listed per size. int32 results: the checksums of
runs with the same hosts and elements must all be equal (lossy or not, every system).
"""
import json
import statistics
import sys
from collections import defaultdict

SYSTEMS = ("inagg", "mpi", "mpi_ring", "gloo")


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, fmt="{:.3f}"):
    return "-" if x is None else fmt.format(x)


def tat(size, s):
    x = size.get(s)
    return x["tat_s"]["median"] if x and x.get("verified") else None


def main():
    runs = defaultdict(list)
    order = []
    for line in open(sys.argv[1]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if r["tag"] not in runs:
            order.append(r["tag"])
        runs[r["tag"]].append(r["run"])

    print("| run | hosts | link Mbit/s | MTU | loss | dtype | runs | inagg TAT s "
          "| inagg goodput_fraction | MPI default TAT s | MPI ring TAT s | Gloo TAT s "
          "| speedup vs MPI default | vs MPI ring | vs Gloo | theory 2(n-1)/n "
          "| MPI ring / Gloo goodput_fraction | inagg CPU % switch / worker | box busy % before |")
    print("|" + "---|" * 19)
    for tag in order:
        rs = [r for r in runs[tag] if "sizes" in r]
        if not rs or tag == "sizes":
            continue
        r0 = rs[0]
        tb = r0.get("testbed", {})
        n = r0["workers"]
        last = [r["sizes"][-1] for r in rs]
        t = {s: med([tat(x, s) for x in last]) for s in SYSTEMS}
        sp = {s: (t[s] / t["inagg"] if t[s] and t["inagg"] else None) for s in SYSTEMS}
        gf = {s: med([x.get(s, {}).get("goodput_fraction") for x in last]) for s in SYSTEMS}
        cs = med([x["inagg"]["cpu"]["switch"] for x in last])
        cw = med([x["inagg"]["cpu"]["workers"] for x in last])
        busy = med([r.get("machine_busy_before_pct") for r in rs])
        print(f"| {tag} | {n} | {tb.get('link_rate_bps', 0) / 1e6:g} | {tb.get('mtu')} "
              f"| {tb.get('loss', 0):g} | {r0['dtype']} | {len(rs)} | {f(t['inagg'])} "
              f"| {f(gf['inagg'], '{:.2f}')} | {f(t['mpi'])} | {f(t['mpi_ring'])} | {f(t['gloo'])} "
              f"| {f(sp['mpi'], '{:.2f}')} | {f(sp['mpi_ring'], '{:.2f}')} | {f(sp['gloo'], '{:.2f}')} "
              f"| {2 * (n - 1) / n:.2f} | {f(gf['mpi_ring'], '{:.2f}')} / {f(gf['gloo'], '{:.2f}')} "
              f"| {f(cs, '{:.0f}')} / {f(cw, '{:.0f}')} | {f(busy, '{:.0f}')} |")

    for r in runs.get("sizes", []):
        if "sizes" not in r:
            continue
        tb = r.get("testbed", {})
        print(f"\n--sizes sweep, {r['workers']} hosts, {tb.get('link_rate_bps', 0) / 1e6:g} Mbit/s, "
              f"MTU {tb.get('mtu')}, {r['dtype']}: busBw Gbit/s (TAT s)\n")
        print("| size per rank | iters | inagg | MPI default | MPI ring | Gloo | speedup vs ring | vs Gloo "
              "| inagg goodput_fraction |")
        print("|" + "---|" * 9)
        for x in r["sizes"]:
            def cell(s):
                y = x.get(s)
                if not y or not y.get("verified"):
                    return "-"
                return f"{y['bus_bw_gbps']:.4f} ({y['tat_s']['median']:.4g})"
            sr = x.get("speedups", {})
            print(f"| {x['bytes']} | {x['iters']} | {cell('inagg')} | {cell('mpi')} | {cell('mpi_ring')} "
                  f"| {cell('gloo')} | {f(sr.get('mpi_ring'), '{:.2f}')} | {f(sr.get('gloo'), '{:.2f}')} "
                  f"| {f(x.get('goodput_fraction'), '{:.2f}')} |")

    # int32: every system's result, every run with the same hosts and elements, one checksum
    sums = defaultdict(lambda: defaultdict(set))
    for tag in order:
        for r in runs[tag]:
            if r.get("dtype") != "int32" or "sizes" not in r:
                continue
            for x in r["sizes"]:
                for s in SYSTEMS:
                    y = x.get(s)
                    if y and y.get("verified") and y.get("checksum"):
                        sums[(r["workers"], x["elems"])][y["checksum"]].add(f"{tag}/{s}")
    for (n, e), cs in sums.items():
        same = "identical" if len(cs) == 1 else "DIFFERENT"
        desc = "; ".join(f"{c} in {len(t)} results ({', '.join(sorted(set(t)))})"
                         for c, t in cs.items())
        print(f"\nint32 results, {n} hosts, {e} elements: {same} ({desc})")

    if "lossless" in runs and "loss1pct" in runs:
        parts = []
        for s in ("inagg", "mpi_ring", "gloo"):
            a = med([tat(r["sizes"][-1], s) for r in runs["lossless"] if "sizes" in r])
            b = med([tat(r["sizes"][-1], s) for r in runs["loss1pct"] if "sizes" in r])
            if a and b:
                parts.append(f"{s} {b / a:.2f} ({a:.3f} s -> {b:.3f} s)")
        rt = med([r.get("retransmissions") for r in runs["loss1pct"]])
        print(f"\n1% loss on every link, TAT with loss / lossless: {', '.join(parts)}; "
              f"inagg retransmissions per run (all ranks): {rt}")
    for tag in order:
        for r in runs[tag]:
            if not r.get("verified"):
                print(f"\nNOT VERIFIED or failed: {tag}: {json.dumps(r)[:400]}")


if __name__ == "__main__":
    main()
