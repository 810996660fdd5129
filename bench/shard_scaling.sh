#!/usr/bin/env bash
# bench/shard_scaling.sh - does spreading one job's slots over K switch processes lift the
# switch's limit? Runs `inagg bench allreduce` on loopback with 1 and with K shards,
# interleaved, REPEATS times each, every switch process single-threaded and pinned to its own
# CPU (--pin-switches), a large int32 tensor and few workers. Prints the median TAT of each,
# their ratio (wall-clock speedup), and the capacity ratio: the one switch's CPU seconds over
# the busiest shard's (what a CPU-bound switch can carry, per shard).
#
# SHARE=PCT (or a list, e.g. SHARE="0 25") also runs the comparison with each switch process
# capped at PCT% of one CPU (--switch-cpu-share, a CPU cgroup; 0: uncapped): a switch of fixed
# capacity, so that the switch is the bottleneck even where the workers and the kernel share
# the same few cores (on a 2-core machine an uncapped switch competes with its own workers).
# Default: SHARE="0 25". Capping needs root.
# Take the measure lock around it on a shared machine:
#   flock /tmp/inagg-measure.lock bash bench/shard_scaling.sh
set -euo pipefail
INAGG=${INAGG:-$(dirname "$0")/../build/inagg}
K=${K:-2}
REPEATS=${REPEATS:-3}
WORKERS=${WORKERS:-2}
ELEMS=${ELEMS:-8000000}
ITERS=${ITERS:-10}
WINDOW=${WINDOW:-64}
SHARE=${SHARE:-0 25}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "shard_scaling: $WORKERS workers, $ELEMS int32, $ITERS iterations, window $WINDOW, 1 against $K shards, $REPEATS repeats; load: $(uptime | sed 's/.*load average: //')"
for share in $SHARE; do
    cap=()
    # a capped switch stalls for the rest of each 10 ms period: a retransmission floor above
    # that keeps its stalls from turning into spurious resends
    [ "$share" != 0 ] && cap=(--switch-cpu-share "$share" --rto-min-us 20000)
    for r in $(seq 1 "$REPEATS"); do
        for k in 1 "$K"; do
            "$INAGG" bench allreduce --shards "$k" --pin-switches --switch-threads 1 "${cap[@]}" \
                --workers "$WORKERS" --elems "$ELEMS" --dtype int32 --iters "$ITERS" \
                --window "$WINDOW" --json "$out/s$share-k$k-r$r.json" >"$out/log" 2>&1 ||
                { echo "shard_scaling: the run with $k shard(s), share $share, failed:" >&2
                  tail -n 3 "$out/log" >&2; exit 1; }
        done
    done
    /usr/bin/python3 - "$out" "$K" "$REPEATS" "$share" <<'PY'
import json, statistics, sys
d, K, R, share = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
def load(k):
    return [json.load(open(f"{d}/s{share}-k{k}-r{r}.json")) for r in range(1, R + 1)]
one, many = load(1), load(K)
assert all(j["verified"] for j in one + many), "a run did not verify"
t1 = statistics.median(j["tat_ms"]["median"] for j in one)
tk = statistics.median(j["tat_ms"]["median"] for j in many)
c1 = statistics.median(j["switch_cpu_s"][0] for j in one)
ck = statistics.median(max(j["switch_cpu_s"]) for j in many)
cap = "uncapped" if share == "0" else f"each switch capped at {share}% of a CPU"
print(f"[{cap}]")
print(f"  1 shard : TAT median {t1:.2f} ms (runs: {[round(j['tat_ms']['median'], 2) for j in one]}), "
      f"switch CPU {c1:.3f} s")
print(f"  {K} shards: TAT median {tk:.2f} ms (runs: {[round(j['tat_ms']['median'], 2) for j in many]}), "
      f"busiest switch CPU {ck:.3f} s (all: {[[round(x, 3) for x in j['switch_cpu_s']] for j in many]})")
print(f"  wall-clock speedup {t1 / tk:.2f}x; switch capacity ratio {c1 / ck:.2f}x")
PY
done
echo "load after: $(uptime | sed 's/.*load average: //')"
