#!/usr/bin/env bash
# bench/loss_recovery.sh - the cost of loss recovery, as SwitchML's Fig. 6: median tensor
# aggregation time at 0.1% and 1% loss per direction divided by the lossless median, all
# in one invocation, each point the median of R runs' medians.
# Usage: bash bench/loss_recovery.sh [--workers N] [--elems E] [--dtype T] [--repeats R]
set -euo pipefail
cd "$(dirname "$0")/.."
workers=4 elems=8000000 dtype=int32 repeats=3
while [ $# -gt 0 ]; do
    case "$1" in
    --workers) workers=$2; shift 2 ;; --elems) elems=$2; shift 2 ;;
    --dtype) dtype=$2; shift 2 ;; --repeats) repeats=$2; shift 2 ;;
    *) echo "usage: $0 [--workers N] [--elems E] [--dtype T] [--repeats R]" >&2; exit 2 ;;
    esac
done
run() { # loss -> median TAT (ms) of one run, after checking it verified
    local out
    out=$(INAGG_LOG=error ./build/inagg bench allreduce --workers "$workers" --elems "$elems" \
          --dtype "$dtype" --iters 10 --loss "$1" --seed "$2" --json -)
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["verified"], d; print(d["tat_ms"]["median"], d["retransmissions"])' "$out"
}
declare -A med
for loss in 0 0.001 0.01; do
    vals=()
    for r in $(seq "$repeats"); do
        read -r t rt < <(run "$loss" "$r")
        vals+=("$t")
        echo "loss $loss run $r: median TAT $t ms, $rt retransmissions" >&2
    done
    med[$loss]=$(printf '%s\n' "${vals[@]}" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
done
python3 - "${med[0]}" "${med[0.001]}" "${med[0.01]}" "$workers" "$elems" "$dtype" <<'PY'
import json, sys
l0, l1, l2 = map(float, sys.argv[1:4])
print(json.dumps({"workers": int(sys.argv[4]), "elems": int(sys.argv[5]), "dtype": sys.argv[6],
                  "tat_ms_median": {"0": l0, "0.001": l1, "0.01": l2},
                  "inflation": {"0.001": round(l1 / l0, 3), "0.01": round(l2 / l0, 3)}}))
PY
