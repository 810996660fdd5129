#!/usr/bin/python3
"""bench/fabric_coexist.py - a bulk TCP stream and inagg's allreduce sharing the fabric.

On a running testbed (tools/testbed up N --fabric inagg|bridge ...): a bulk TCP stream h1 -> h2
(it shares h1's uplink and h2's downlink with the allreduce) and inagg's allreduce across all
hosts, each alone and then together. Two overlapped phases, so that each measurement lies
entirely inside the other's activity:
  A. the allreduce runs (--iters), and the stream runs --bulk-seconds in its middle: the
     stream's rate under the allreduce;
  B. the stream runs, and the allreduce runs entirely inside it: the allreduce's TAT under the
     stream.
Prints one JSON object: each rate / TAT alone and together, and their ratios ("kept"); every
allreduce is verified (a run whose results are wrong fails). With --up N the script builds its
own testbed (and takes it down on every exit), runs --repeats times and adds a summary: the
median of each kept ratio and whether both kept at least 40% (AllReduce-Switch's claim that a
bulk stream and aggregation share an output port without starving each other).

  bench/fabric_coexist.py --testbed NAME [--elems 4000000] [--iters 6] [--bulk-seconds 4]
  bench/fabric_coexist.py --up 4 [--link-rate 100mbit] [--fabric inagg|bridge] [--arbitration]
                          [--repeats 3] [--elems 1000000] ...
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(ROOT, "bench", "testbed_run.py")
TB = os.path.join(ROOT, "tools", "testbed")
PY = "/usr/bin/python3"


def texec(tb, host, argv):
    return subprocess.Popen([TB, "exec", tb, host, "--"] + argv, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no report: " + text[-300:])


def bulk_start(tb, hosts, port, secs):
    recv = texec(tb, "h2", [PY, RUN, "--bulk-recv", f"{hosts[1]['addr']}:{port}",
                            "--bulk-seconds", str(secs)])
    time.sleep(0.5)
    send = texec(tb, "h1", [PY, RUN, "--bulk-send", f"{hosts[1]['addr']}:{port}",
                            "--bulk-seconds", str(secs)])
    return recv, send


def bulk_rate(procs, secs):
    recv, send = procs
    _, serr = send.communicate(timeout=secs + 60)
    out, err = recv.communicate(timeout=60)
    try:
        return last_json(out)["mbit_s"]
    except (RuntimeError, ValueError, KeyError) as e:
        raise RuntimeError(f"bulk stream: {e}; receiver: {err[-300:]}; sender: {serr[-300:]}")


def allreduce(a):
    p = subprocess.run([PY, RUN, "--testbed", a.testbed, "--system", "inagg", "--elems",
                        str(a.elems), "--iters", str(a.iters), "--warmup", "1"],
                       capture_output=True, text=True, timeout=600)
    r = last_json(p.stdout)
    if not r.get("verified"):
        raise RuntimeError("allreduce not verified: " + json.dumps(r)[:300])
    return r


def measure(a):
    tb = json.loads(subprocess.run([TB, "show", a.testbed, "--json"], capture_output=True,
                                   text=True, check=True).stdout)
    hosts = tb["hosts"]
    if len(hosts) < 2:
        sys.exit("fabric_coexist: needs 2 hosts or more")
    bulk_solo = bulk_rate(bulk_start(a.testbed, hosts, a.port, a.bulk_seconds), a.bulk_seconds)
    solo = allreduce(a)
    tat_solo = solo["tat_s"]["median"]
    # A: the stream inside the allreduce
    ar = subprocess.Popen([PY, RUN, "--testbed", a.testbed, "--system", "inagg", "--elems",
                           str(a.elems), "--iters", str(a.iters * 3), "--warmup", "1"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(min(2.0, tat_solo * 2 + 1.0))
    bulk_with = bulk_rate(bulk_start(a.testbed, hosts, a.port + 1, a.bulk_seconds),
                          a.bulk_seconds)
    ar_out, _ = ar.communicate(timeout=600)
    ar_running = ar.returncode is not None and ar.returncode == 0
    # B: the allreduce inside the stream
    span = tat_solo * (a.iters + 2) * 3 + 3.0
    procs = bulk_start(a.testbed, hosts, a.port + 2, span)
    time.sleep(1.5)
    with_bulk = allreduce(a)
    bulk_rate(procs, span)
    tat_with = with_bulk["tat_s"]["median"]
    return {
        "testbed": a.testbed, "fabric": tb.get("fabric", "bridge"),
        "link_rate_bps": tb["link_rate_bps"], "hosts": len(hosts), "elems": a.elems,
        "bulk_mbit_s_alone": bulk_solo, "bulk_mbit_s_with_allreduce": bulk_with,
        "bulk_kept": round(bulk_with / bulk_solo, 3) if bulk_solo else None,
        "allreduce_tat_s_alone": tat_solo, "allreduce_tat_s_with_bulk": tat_with,
        "allreduce_kept": round(tat_solo / tat_with, 3) if tat_with else None,
        "allreduce_phase_a_ok": ar_running and last_json(ar_out).get("verified", False),
        "verified": True,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--testbed", help="a running testbed's name")
    ap.add_argument("--up", type=int, metavar="N", help="build a testbed of N hosts for the run")
    ap.add_argument("--link-rate", default="100mbit", help="with --up (default 100mbit)")
    ap.add_argument("--fabric", default="inagg", choices=("inagg", "bridge"), help="with --up")
    ap.add_argument("--arbitration", action="store_true", help="with --up (fabric inagg)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--elems", type=int, default=4000000)
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--bulk-seconds", type=float, default=4.0)
    ap.add_argument("--port", type=int, default=7400)
    a = ap.parse_args()
    if (a.testbed is None) == (a.up is None):
        ap.error("give --testbed NAME (a running testbed) or --up N (build one)")
    if not 1 <= a.repeats <= 10 or a.elems < 1 or not 1 <= a.iters <= 100:
        ap.error("--repeats 1..10, --elems >= 1, --iters 1..100")
    if a.up is not None and not 2 <= a.up <= 16:
        ap.error("--up: 2..16 hosts")
    built = None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        if a.up is not None:
            built = a.testbed = f"fabco{os.getpid() % 1000000}"
            cmd = [TB, "up", str(a.up), "--name", built, "--fabric", a.fabric, "--link-rate",
                   a.link_rate, "--mtu", "9000"] + (["--arbitration"] if a.arbitration else [])
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if p.returncode != 0:
                sys.stderr.write(p.stderr[-800:])
                sys.exit(p.returncode)
        runs = []
        for r in range(a.repeats):
            res = measure(a)
            runs.append(res)
            print(json.dumps(res), flush=True)
        if a.repeats > 1 or a.up is not None:
            bk = statistics.median(x["bulk_kept"] for x in runs)
            ak = statistics.median(x["allreduce_kept"] for x in runs)
            print(json.dumps({"summary": True, "repeats": a.repeats, "fabric": runs[0]["fabric"],
                              "arbitration": a.arbitration,
                              "bulk_mbit_s_alone": statistics.median(x["bulk_mbit_s_alone"] for x in runs),
                              "bulk_mbit_s_with_allreduce": statistics.median(x["bulk_mbit_s_with_allreduce"] for x in runs),
                              "allreduce_tat_s_alone": statistics.median(x["allreduce_tat_s_alone"] for x in runs),
                              "allreduce_tat_s_with_bulk": statistics.median(x["allreduce_tat_s_with_bulk"] for x in runs),
                              "bulk_kept_median": bk, "allreduce_kept_median": ak,
                              "both_keep_40pct": bk >= 0.4 and ak >= 0.4, "verified": True}))
    finally:
        if built:
            subprocess.run([TB, "down", built], capture_output=True, timeout=120)


if __name__ == "__main__":
    main()
