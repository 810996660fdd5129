#!/usr/bin/env bash
# bench/optimizer.sh - the in-switch optimizer matrix of docs/PERFORMANCE.md (its runs: docs/perf-log/2026-11-21-training-pipelining-optimizer.md): every optimizer,
# 1M and 10M parameters, 0% and 1% loss, 4 workers, each run verified against torch.optim (SGD,
# AdaGrad, Adam; python3-torch) or the independent reference (SMORMS3), with the speedup over
# allreduce + a local step on every worker (torch.optim where torch has the optimizer, the C
# kernels otherwise), measured in the same invocation.
# Usage: bash bench/optimizer.sh [--workers N] [--steps K] [extra flags for bench optimizer]
set -euo pipefail
cd "$(dirname "$0")/.."
workers=4 steps=5
while [ $# -gt 0 ]; do
    case "$1" in
    --workers) workers=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) break ;;
    esac
done
printf "%-8s %9s %5s %9s %-11s %9s %12s %-22s %12s %12s %12s %8s\n" optimizer params loss verified reference max_rel in-switch/s baseline baseline/s local-C/s sum-only/s speedup
for opt in sgd adagrad adam smorms3; do
    for elems in 1000000 10000000; do
        for loss in 0 0.01; do
            out=$(INAGG_LOG=error ./build/inagg bench optimizer --optimizer "$opt" --elems "$elems" \
                  --workers "$workers" --steps "$steps" --loss "$loss" --baseline torch --json - "$@" 2>/dev/null) || true
            python3 -c '
import json, sys
d = json.loads(sys.argv[1])
print("%-8s %9d %5g %9s %-11s %9.2g %12.4g %-22s %12.4g %12.4g %12.4g %7.2fx" % (d["optimizer"], d["elems"], d["loss"],
      d["verified"], d["reference"], d["max_rel_err"] or 0, d["params_per_s"] or 0, d["baseline"]["name"],
      d["baseline"]["params_per_s"] or 0, d["local_c"]["params_per_s"] or 0, d["sum_only"]["params_per_s"] or 0,
      d["speedup"] or 0))' "$out"
        done
    done
done
