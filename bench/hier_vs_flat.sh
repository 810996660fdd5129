#!/usr/bin/env bash
# bench/hier_vs_flat.sh - a two-level tree against one switch at the same host link rate, on
# the testbed: `inagg bench allreduce --testbed N` (N hosts on one switch) and `--testbed N
# --leaves L --hosts-per-leaf H` (L leaf switches of H hosts under a spine, leaf uplinks at the
# host link rate), interleaved, REPEATS times each. Prints each one's median TAT and the ratio
# two-level / flat. LOSS applies to every link of both (host links and leaf uplinks). Needs
# root; take the measure lock around it on a shared machine:
#   flock /tmp/inagg-measure.lock bash bench/hier_vs_flat.sh
set -euo pipefail
INAGG=${INAGG:-$(dirname "$0")/../build/inagg}
LEAVES=${LEAVES:-2}
HPL=${HPL:-4}
N=$((LEAVES * HPL))
RATE=${RATE:-100mbit}
ELEMS=${ELEMS:-1000000}
ITERS=${ITERS:-5}
REPEATS=${REPEATS:-3}
LOSS=${LOSS:-0}
PROTOCOL=${PROTOCOL:-switchml}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(--testbed "$N" --link-rate "$RATE" --fabric bridge --elems "$ELEMS" --dtype int32
        --iters "$ITERS" --protocol "$PROTOCOL")
[ "$LOSS" = 0 ] || common+=(--loss "$LOSS")
for r in $(seq 1 "$REPEATS"); do
    "$INAGG" bench allreduce "${common[@]}" --json "$out/flat-$r.json" >/dev/null 2>&1 ||
        { echo "hier_vs_flat: the flat run failed" >&2; exit 1; }
    "$INAGG" bench allreduce "${common[@]}" --leaves "$LEAVES" --hosts-per-leaf "$HPL" \
        --json "$out/hier-$r.json" >/dev/null 2>&1 ||
        { echo "hier_vs_flat: the two-level run failed" >&2; exit 1; }
done
/usr/bin/python3 - "$out" "$REPEATS" "$N" "$LEAVES" "$HPL" "$RATE" "$LOSS" <<'PY'
import json, statistics, sys
d, R, N, L, H, rate, loss = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
flat = [json.load(open(f"{d}/flat-{r}.json")) for r in range(1, R + 1)]
hier = [json.load(open(f"{d}/hier-{r}.json")) for r in range(1, R + 1)]
assert all(j["verified"] for j in flat + hier), "a run did not verify"
assert all(j["leaves"] == int(L) for j in hier)
tf = statistics.median(j["tat_ms"]["median"] for j in flat)
th = statistics.median(j["tat_ms"]["median"] for j in hier)
print(f"flat {N} hosts       : TAT median {tf:.1f} ms (runs {[round(j['tat_ms']['median'], 1) for j in flat]}), verified")
print(f"two-level {L}x{H} hosts: TAT median {th:.1f} ms (runs {[round(j['tat_ms']['median'], 1) for j in hier]}), verified")
print(f"links {rate}, loss {loss}: two-level / flat = {th / tf:.3f}")
PY
