#!/usr/bin/python3
"""The table of bench/ompi_testbed.sh: reads its runs' reports (DIR/PLACE.SYSTEM.BYTES.REPEAT
.out: inagg-mpi-bench's JSON line; .err: coll/inagg's per-communicator line) and prints, per
place and size, the median over the repeats of each run's median call for Open MPI alone and
for the component, the speedup (Open MPI / coll/inagg), where the component's calls went, and
the target each row is held to. Fails (exit 1) when a run did not verify or lacks its report.

  bench/ompi_table.py DIR PLACE REPEATS HOSTS RATE JSON-FILE|"" BYTES...
"""
import json
import re
import statistics
import sys

ROUTE = re.compile(r"^coll/inagg: MPI_COMM_WORLD: (\d+) allreduce through the switch, (\d+) with MPI$",
                   re.M)
THRESHOLD = 1 << 20  # the route's default threshold (ROUTE_MIN_BYTES_DEFAULT, src/apps/mpi/route.h)


def run(d, place, system, size, rep):
    base = f"{d}/{place}.{system}.{size}.{rep}"
    lines = [l for l in open(base + ".out").read().splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"ompi_table: {base}.out has no report")
    r = json.loads(lines[-1])
    if not r["verified"]:
        sys.exit(f"ompi_table: {base}: a result was wrong")
    m = ROUTE.search(open(base + ".err").read())
    return r["tat_ms"]["median"], (int(m.group(1)), int(m.group(2))) if m else None


def target(place, size):
    if place == "one-host":
        return ">= 0.9x", 0.9
    if size >= 1 << 20:
        return ">= 1.3x", 1.3
    if size < THRESHOLD:
        return ">= 0.9x", 0.9
    return "-", None


def human(n):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def main():
    d, places, reps, hosts, rate, json_out = sys.argv[1:7]
    sizes = [int(s) for s in sys.argv[7:]]
    places = ["testbed", "one-host"] if places == "both" else [places]
    rows = []
    print(f"{'place':9} {'size':>8} {'Open MPI ms':>12} {'coll/inagg ms':>14} {'speedup':>8} "
          f"{'route (switch/MPI calls)':>25}  target")
    for place in places:
        for size in sizes:
            o = [run(d, place, "ompi", size, r)[0] for r in range(1, int(reps) + 1)]
            i_runs = [run(d, place, "inagg", size, r) for r in range(1, int(reps) + 1)]
            i = [t for t, _ in i_runs]
            routes = [rt for _, rt in i_runs]
            mo, mi = statistics.median(o), statistics.median(i)
            speedup = mo / mi if mi > 0 else float("inf")
            what, bound = target(place, size)
            met = "" if bound is None else (" met" if speedup >= bound else " NOT met")
            rt = routes[-1]
            route = "no line" if rt is None else f"{rt[0]}/{rt[1]}"
            print(f"{place:9} {human(size):>8} {mo:12.3f} {mi:14.3f} {speedup:7.2f}x {route:>25}  "
                  f"{what}{met}")
            rows.append({"place": place, "bytes": size, "ompi_ms": o, "inagg_ms": i,
                         "ompi_median_ms": mo, "inagg_median_ms": mi, "speedup": speedup,
                         "route_switch_mpi": routes, "target": what, "met": met.strip() or None})
    print(f"({hosts} ranks; testbed links {rate}; medians of {reps} runs, each the median call; "
          "every result of every call verified)")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"hosts": int(hosts), "rate": rate, "repeats": int(reps), "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
