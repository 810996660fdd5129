#!/usr/bin/python3
"""Summarize bench/testbed_run.py reports (JSON lines) into markdown tables.

  bench/testbed_table.py RESULTS.jsonl

Rows group runs by (tag, hosts, link rate, MTU, loss); a cell is the median over repeats of
each run's median TAT. speedup vs X = X's TAT / inagg's TAT; theory = 2(n-1)/n, what a link-
bound ring allreduce would need more than a link-bound in-network aggregation. ring-ideal =
the fraction of the link ring allreduce can reach as goodput_fraction, n / (2(n-1)).
"""
import json
import statistics
import sys
from collections import defaultdict


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, fmt="{:.3f}"):
    return "-" if x is None else fmt.format(x)


def main():
    rows = defaultdict(lambda: defaultdict(list))
    order = []
    for line in open(sys.argv[1]):
        line = line.strip()
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "error" in r:
            key = (r.get("tag", ""), None, None, None, None)
        else:
            key = (r.get("tag", ""), r["hosts"], r["link_rate_bps"], r["mtu"], r["loss"])
        if key not in rows:
            order.append(key)
        rows[key][r["system"] + r.get("variant", "")].append(r)

    print("| run | hosts | rate Mbit/s | MTU | loss | link check Mbit/s (min of streams) "
          "| inagg TAT s | inagg goodput_fraction | MPI default TAT s | MPI ring TAT s "
          "| Gloo TAT s | speedup vs MPI default | vs MPI ring | vs Gloo | theory 2(n-1)/n "
          "| MPI ring goodput_fraction (ideal) | inagg CPU % switch / busiest host | machine CPU % inagg / linkcheck | machine busy % before runs (others' load) |")
    print("|" + "---|" * 19)
    for key in order:
        if key[1] is None:
            continue
        tag, n, bps, mtu, loss = key
        g = rows[key]

        def tat(sysname):
            return med([r["tat_s"]["median"] for r in g.get(sysname, []) if r.get("verified")])

        def cpu(sysname, field):
            return med([(r.get("cpu") or {}).get(field) for r in g.get(sysname, [])])
        ti, tm, tr, tg = tat("inagg"), tat("mpi"), tat("mpi-ring"), tat("gloo")
        lc = med([min(r["stream_mbit_s"]) for r in g.get("linkcheck", [])])
        gi = med([r.get("goodput_fraction") for r in g.get("inagg", [])])
        gr = med([r.get("goodput_fraction") for r in g.get("mpi-ring", [])])
        sp = [(None if (x is None or ti is None) else x / ti) for x in (tm, tr, tg)]
        print(f"| {tag} | {n} | {bps / 1e6:g} | {mtu} | {loss:g} | {f(lc, '{:.0f}')} | {f(ti)} "
              f"| {f(gi, '{:.2f}')} | {f(tm)} | {f(tr)} | {f(tg)} | {f(sp[0], '{:.2f}')} "
              f"| {f(sp[1], '{:.2f}')} | {f(sp[2], '{:.2f}')} | {2 * (n - 1) / n:.2f} "
              f"| {f(gr, '{:.2f}')} ({n / (2 * (n - 1)):.2f}) "
              f"| {f(cpu('inagg', 'switch_pct'), '{:.0f}')} / {f(cpu('inagg', 'hosts_max_pct'), '{:.0f}')} "
              f"| {f(cpu('inagg', 'machine_pct'), '{:.0f}')} / {f(cpu('linkcheck', 'machine_pct'), '{:.0f}')} "
              f"| {f(med([r.get('machine_busy_before_pct') for v in g.values() for r in v]), '{:.0f}')} |")
    # int32 results must be bit-identical whatever the loss: one checksum per (hosts, elems)
    sums = defaultdict(lambda: defaultdict(set))
    for k in order:
        for r in rows[k].get("inagg", []):
            if r.get("dtype") == "int32" and "checksum" in r:
                sums[(r["hosts"], r["elems"])][r["checksum"]].add(r.get("tag", ""))
    for (n, e), cs in sums.items():
        same = "identical" if len(cs) == 1 else "DIFFERENT"
        desc = "; ".join(f"{c} in {', '.join(sorted(t))}" for c, t in cs.items())
        print(f"\ninagg int32 results, {n} hosts, {e} elements: {same} across runs ({desc})")
    # loss: TAT with loss over TAT without, per system
    by_tag = {k[0]: rows[k] for k in order}
    if "lossless" in by_tag and "loss1pct" in by_tag:
        parts = []
        for s_ in ("inagg", "mpi-ring", "gloo"):
            a_ = med([r["tat_s"]["median"] for r in by_tag["lossless"].get(s_, []) if "tat_s" in r])
            b_ = med([r["tat_s"]["median"] for r in by_tag["loss1pct"].get(s_, []) if "tat_s" in r])
            if a_ and b_:
                parts.append(f"{s_} {b_ / a_:.2f}")
        rt = med([r.get("retransmissions") for r in by_tag["loss1pct"].get("inagg", [])])
        print(f"\n1% loss on every host link, TAT with loss / lossless: {', '.join(parts)}"
              f" (inagg retransmissions per run, all ranks: {rt})")
    errs = [r for k in order for v in rows[k].values() for r in v if "error" in r]
    unverified = [r for k in order for v in rows[k].values() for r in v
                  if "error" not in r and not r.get("verified")]
    for r in errs:
        print(f"\nfailed: {r.get('tag')} {r['system']}: {r['error'][:300]}")
    for r in unverified:
        print(f"\nNOT VERIFIED: {r.get('tag')} {r['system']}")


if __name__ == "__main__":
    main()
