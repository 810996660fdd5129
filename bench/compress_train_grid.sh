#!/usr/bin/env bash
# bench/compress_train_grid.sh - training quality per compression mode and strength (GCOW's
# Fig. 3.2): `inagg train --mode data --compress MODE` on a dataset over three ZFP modes x four
# strengths, with and without error feedback, plus zfp:reversible, fp16 and no compression.
# Prints one line per run: mode, feedback, final objective (or where it diverged).
#
# Usage: bash bench/compress_train_grid.sh [DATASET] [EXTRA TRAIN ARGS...]
#        (default ../shared/datasets/a9a relative to the repository)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-$root/../shared/datasets/a9a}
shift || true
inagg=${INAGG:-$root/build/inagg}
run() { # MODE FEEDBACK(on|off)
    local mode=$1 fb=$2
    shift 2
    local a=(train --mode data --data "$data" --json -)
    [ "$mode" != none ] && a+=(--compress "$mode")
    [ "$fb" = off ] && [ "$mode" != none ] && a+=(--no-error-feedback)
    local out
    out=$("$inagg" "${a[@]}" "${EXTRA[@]}" 2>/tmp/compress_grid.err)
    local obj
    obj=$(printf '%s' "$out" | /usr/bin/python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
    print("%.6f" % d["final_objective"])
except Exception:
    print("failed")' 2>/dev/null)
    if [ "$obj" = failed ] || [ -z "$obj" ]; then
        obj="diverged/failed: $(grep -o 'diverged[^;]*\|non-finite[^(]*' /tmp/compress_grid.err | head -n 1)"
    fi
    printf '%-22s feedback %-3s  %s\n' "$mode" "$fb" "$obj"
}
EXTRA=("$@")
run none on
run zfp:reversible off
for fb in on off; do
    run fp16 "$fb"
    for r in 4 8 16 32; do run "zfp:rate=$r" "$fb"; done
    for p in 4 8 16 32; do run "zfp:precision=$p" "$fb"; done
    for a in 1e-1 1e-3 1e-6 1e-9; do run "zfp:accuracy=$a" "$fb"; done
done
