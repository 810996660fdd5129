#!/usr/bin/env bash
# bench/roce_stress.sh - the float32-over-RoCE job of tests/cli_roce.sh (`bench allreduce
# --testbed 2 --fabric inagg --link-rate 1gbit --transport roce --elems 30000 --iters 2
# --dtype float32`) N times in a row, each on a fresh testbed, to show that an intermittent
# failure is gone (the acceptance is 200 in a row). Runs niced. Stops at the first failure
# (ROCE_STRESS_KEEP_GOING=1: runs all N), keeping that run's output (with the switch's and
# the fabric's counters at its end) in OUT_DIR, and prints
# one summary line with the runs, the failures and the load average before and after.
# Usage: sudo bash bench/roce_stress.sh [N (default 200)] [OUT_DIR (default a temp dir)]
# Environment: ROCE_STRESS_INAGG (the inagg binary, ./build/inagg), ROCE_STRESS_ARGS (more
# bench arguments, e.g. "--roce-psn 16777200").
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-200}
OUT=${2:-$(mktemp -d /tmp/inagg-roce-stress-XXXXXX)}
mkdir -p "$OUT"
INAGG=${ROCE_STRESS_INAGG:-./build/inagg}
[ -x "$INAGG" ] || { echo "roce_stress: build first (make)"; exit 2; }
# a copied binary (ROCE_STRESS_INAGG) runs the ranks and the fabric, so a rebuild meanwhile
# does not disturb the loop
case $INAGG in /*) ;; *) INAGG=$PWD/$INAGG ;; esac
export INAGG_TESTBED_TOOL=${INAGG_TESTBED_TOOL:-$PWD/tools/testbed} INAGG_BIN=${INAGG_BIN:-$INAGG}
export INAGG_BENCH_SWITCH_STATS=1 # a failed run's evidence: the switch's and fabric's counters
[ "$(id -u)" = 0 ] || { echo "roce_stress: the testbed needs root"; exit 2; }
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
ok=0 failed=0
for i in $(seq 1 "$N"); do
    # shellcheck disable=SC2086
    INAGG_LOG=warn timeout 240 nice -n 10 "$INAGG" bench allreduce --testbed 2 --fabric inagg \
        --link-rate 1gbit --transport roce --elems 30000 --iters 2 --dtype float32 \
        ${ROCE_STRESS_ARGS:-} --json "$OUT/run.json" >"$OUT/run.out" 2>"$OUT/run.err"
    rc=$?
    verified=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['verified'])" \
               "$OUT/run.json" 2>/dev/null)
    if [ $rc -eq 0 ] && [ "$verified" = True ]; then
        ok=$((ok + 1))
        [ $((i % 10)) -ne 0 ] || echo "roce_stress: $i runs, $failed failed, load $(cut -d' ' -f1 /proc/loadavg)"
        continue
    fi
    failed=$((failed + 1))
    for f in run.json run.out run.err; do [ -f "$OUT/$f" ] && cp "$OUT/$f" "$OUT/fail$i.${f#run.}"; done
    echo "roce_stress: run $i failed (exit $rc, verified ${verified:-?}): $(tail -n 2 "$OUT/run.err" | tr '\n' ' ')"
    [ "${ROCE_STRESS_KEEP_GOING:-0}" = 1 ] || break
done 2>&1
echo "roce_stress: $((ok + failed)) runs, $ok passed, $failed failed in $(( $(date +%s) - t0 )) s; load average before $load0, after $(cut -d' ' -f1-3 /proc/loadavg); output in $OUT"
[ $failed -eq 0 ]
