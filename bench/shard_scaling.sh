#!/usr/bin/env bash
# bench/shard_scaling.sh - does spreading one job's slots over K switch processes lift the
# switch's limit? Runs `inagg bench allreduce` on loopback with 1 and with K shards,
# interleaved, REPEATS times each, every switch process single-threaded and pinned to its own
# CPU (--pin-switches), a large int32 tensor and few workers, so the switch binds. Prints the
# median TAT of each, their ratio (wall-clock speedup), and the capacity ratio: the one
# switch's CPU seconds over the busiest shard's (what a CPU-bound switch can carry, per shard).
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
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$REPEATS"); do
    for k in 1 "$K"; do
        "$INAGG" bench allreduce --shards "$k" --pin-switches --switch-threads 1 \
            --workers "$WORKERS" --elems "$ELEMS" --dtype int32 --iters "$ITERS" \
            --window "$WINDOW" --json "$out/k$k-r$r.json" >/dev/null 2>&1 ||
            { echo "shard_scaling: the run with $k shard(s) failed" >&2; exit 1; }
    done
done
/usr/bin/python3 - "$out" "$K" "$REPEATS" <<'PY'
import json, statistics, sys
d, K, R = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(k):
    return [json.load(open(f"{d}/k{k}-r{r}.json")) for r in range(1, R + 1)]
one, many = load(1), load(K)
assert all(j["verified"] for j in one + many), "a run did not verify"
t1 = statistics.median(j["tat_ms"]["median"] for j in one)
tk = statistics.median(j["tat_ms"]["median"] for j in many)
c1 = statistics.median(j["switch_cpu_s"][0] for j in one)
ck = statistics.median(max(j["switch_cpu_s"]) for j in many)
print(f"1 shard : TAT median {t1:.2f} ms (runs: {[round(j['tat_ms']['median'], 2) for j in one]}), "
      f"switch CPU {c1:.3f} s")
print(f"{K} shards: TAT median {tk:.2f} ms (runs: {[round(j['tat_ms']['median'], 2) for j in many]}), "
      f"busiest switch CPU {ck:.3f} s (all: {[j['switch_cpu_s'] for j in many]})")
print(f"wall-clock speedup {t1 / tk:.2f}x; switch capacity ratio {c1 / ck:.2f}x")
PY
