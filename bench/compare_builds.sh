#!/usr/bin/env bash
# bench/compare_builds.sh - is a change faster or slower? Runs the acceptance benchmarks of
# two builds interleaved (A B A B ...), so a noisy stretch of a shared host hits both alike,
# each with its OpenMPI baseline in the same invocation, and prints the medians per build and
# the ratio of the ratios: `bench allreduce --baseline mpi` speedup and `bench latency
# --baseline mpi` speedup_p50, and with --testbed N the testbed's `bench allreduce --testbed N
# --link-rate RATE --baseline mpi-ring` speedup (each build with its own tree's tools/testbed;
# root). Every run must report verified results.
# Usage: bash bench/compare_builds.sh OLD_BUILD_DIR NEW_BUILD_DIR [--repeats R]
#        [--elems E] [--workers N] [--testbed N [--link-rate RATE] [--testbed-elems E]]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR [--repeats R] [--elems E] [--workers N]" >&2; exit 2; }
old=$1 new=$2; shift 2
repeats=5 elems=25000000 workers=4 testbed=0 link_rate=1gbit tb_elems=4000000
while [ $# -gt 0 ]; do
    case "$1" in
    --repeats) repeats=$2; shift 2 ;; --elems) elems=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --testbed) testbed=$2; shift 2 ;; --link-rate) link_rate=$2; shift 2 ;;
    --testbed-elems) tb_elems=$2; shift 2 ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
    esac
done
for b in "$old" "$new"; do
    [ -x "$b/inagg" ] && [ -x "$b/inagg-mpi-bench" ] || { echo "$0: $b has no inagg and inagg-mpi-bench" >&2; exit 2; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq "$repeats"); do
    for side in old new; do
        b=$old; [ $side = new ] && b=$new
        timeout 600 env INAGG_LOG=error "$b/inagg" bench allreduce --workers "$workers" \
            --elems "$elems" --dtype float32 --baseline mpi --json - >"$out/ar-$side-$r.json"
        timeout 600 env INAGG_LOG=error "$b/inagg" bench latency --workers "$workers" \
            --baseline mpi --json - >"$out/lat-$side-$r.json"
        if [ "$testbed" -gt 0 ]; then
            tree=$(cd "$b/.." && pwd)
            timeout 900 env INAGG_LOG=error INAGG_TESTBED_TOOL="$tree/tools/testbed" \
                INAGG_BIN="$(cd "$b" && pwd)/inagg" "$b/inagg" bench allreduce --testbed "$testbed" \
                --link-rate "$link_rate" --elems "$tb_elems" --dtype int32 --baseline mpi-ring \
                --json - >"$out/tb-$side-$r.json"
        fi
        echo "repeat $r $side done" >&2
    done
done
python3 - "$out" "$repeats" "$old" "$new" "$elems" "$workers" "$testbed" <<'PY'
import json, statistics, sys
d, R, old, new, elems, workers = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
testbed = int(sys.argv[7])
res = {}
for side in ("old", "new"):
    ar = [json.load(open(f"{d}/ar-{side}-{r}.json")) for r in range(1, R + 1)]
    lat = [json.load(open(f"{d}/lat-{side}-{r}.json")) for r in range(1, R + 1)]
    assert all(x["verified"] for x in ar + lat), "a run did not verify"
    res[side] = {
        "allreduce_tat_ms": statistics.median(x["tat_ms"]["median"] for x in ar),
        "allreduce_speedup": statistics.median(x["speedup"] for x in ar),
        "latency_p50_us": statistics.median(x["latency_us"]["p50"] for x in lat),
        "latency_speedup_p50": statistics.median(x["speedup_p50"] for x in lat),
        "allreduce_speedups": [round(x["speedup"], 3) for x in ar],
        "latency_speedups": [round(x["speedup_p50"], 3) for x in lat],
    }
    if testbed:
        tb = [json.load(open(f"{d}/tb-{side}-{r}.json")) for r in range(1, R + 1)]
        assert all(x["verified"] for x in tb), "a testbed run did not verify"
        res[side]["testbed_tat_ms"] = statistics.median(x["tat_ms"]["median"] for x in tb)
        res[side]["testbed_speedup"] = statistics.median(x["speedup"] for x in tb)
        res[side]["testbed_speedups"] = [round(x["speedup"], 3) for x in tb]
keys = ["allreduce_speedup", "latency_speedup_p50"] + (["testbed_speedup"] if testbed else [])
res["new_over_old"] = {k: round(res["new"][k] / res["old"][k], 3) for k in keys}
res.update({"old": {**res["old"], "build": old}, "new": {**res["new"], "build": new},
            "repeats": R, "elems": int(elems), "workers": int(workers), "testbed_hosts": testbed})
print(json.dumps(res, indent=1))
PY
