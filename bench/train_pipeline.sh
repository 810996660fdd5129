#!/usr/bin/env bash
# bench/train_pipeline.sh - what micro-batch pipelining buys model-parallel training (P4SGD
# Fig. 2(c) / Alg. 1): the same job (--synthetic rcv1, 4 workers, batch 64, micro-batch 8)
# pipelined over inagg's p4sgd protocol, not pipelined (--no-pipeline, the paper's vanilla
# model parallelism), over MPI (the paper's CPUSync: MPI_Iallreduce per micro-batch, pipelined,
# and not), and data-parallel (switchml, the D-float gradient per mini-batch). Each row: the
# median over R runs of the run's mean training seconds per epoch (evaluation excluded) and
# its share of time blocked in communication. Ends with the ratio no-pipeline / pipelined.
# Repeats interleave the configurations; each run's hypervisor steal time goes to stderr.
# Usage: bash bench/train_pipeline.sh [--workers N] [--epochs E] [--repeats R] [--spec SPEC]
set -euo pipefail
cd "$(dirname "$0")/.."
workers=4 epochs=4 repeats=3 spec=rcv1
while [ $# -gt 0 ]; do
    case "$1" in
    --workers) workers=$2; shift 2 ;; --epochs) epochs=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;; --spec) spec=$2; shift 2 ;;
    *) echo "usage: $0 [--workers N] [--epochs E] [--repeats R] [--spec SPEC]" >&2; exit 2 ;;
    esac
done
have_mpi=0
command -v mpirun >/dev/null && [ -x build/inagg-mpi-train ] && have_mpi=1
base="--synthetic $spec --workers $workers --batch 64 --micro-batch 8 --epochs $epochs"
errf=$(mktemp)
trap 'rm -f "$errf"' EXIT
run() { # extra flags -> "mean_epoch_seconds comm_share final_objective" of one run
    local out
    if ! out=$(INAGG_LOG=error ./build/inagg train $base "$@" --json - 2>"$errf"); then
        echo "train_pipeline.sh: inagg train $base $* failed:" >&2
        tail -n 5 "$errf" >&2
        exit 1
    fi
    python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["mean_epoch_seconds"], d["comm_share"], d["final_objective"])' "$out"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
steal() { awk '/^cpu /{print $9}' /proc/stat; } # hypervisor-stolen ticks, all cores
# The configurations, interleaved: each repeat runs every one of them once, so a slow patch
# of this shared machine lands on all of them alike rather than on one configuration.
names=("inagg model, pipelined" "inagg model, --no-pipeline")
flags=("" "--no-pipeline")
if [ $have_mpi = 1 ]; then
    names+=("mpi model, pipelined" "mpi model, --no-pipeline")
    flags+=("--backend mpi" "--backend mpi --no-pipeline")
fi
names+=("inagg data (switchml)")
flags+=("--mode data")
declare -A times shares objs
hz=$(getconf CLK_TCK)
steal_ms=0 wall_ms=0
for r in $(seq "$repeats"); do
    for k in "${!names[@]}"; do
        s0=$(steal) w0=$(date +%s%N)
        # shellcheck disable=SC2086 # flags are words
        read -r t c o < <(run ${flags[$k]})
        s1=$(steal) w1=$(date +%s%N)
        steal_ms=$(( steal_ms + (s1 - s0) * 1000 / hz )) wall_ms=$(( wall_ms + (w1 - w0) / 1000000 ))
        times[$k]+="$t "; shares[$k]+="$c "; objs[$k]=$o
        echo "run $r, ${names[$k]}: $t s/epoch, comm share $c, objective $o," \
             "hypervisor steal $(( (s1 - s0) * 1000 / hz )) ms" >&2
    done
done
rows=()
for k in "${!names[@]}"; do
    rows+=("${names[$k]}|$(printf '%s\n' ${times[$k]} | median)|$(printf '%s\n' ${shares[$k]} | median)|${objs[$k]}|${flags[$k]}")
done
python3 - "$spec" "$workers" "$epochs" "$repeats" "$steal_ms" "$wall_ms" "$(nproc)" "${rows[@]}" <<'PY'
import sys
spec, workers, epochs, repeats = sys.argv[1:5]
steal_ms, wall_ms, ncpu = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
rows = [r.split("|") for r in sys.argv[8:]]
print(f"train pipeline bench: --synthetic {spec}, {workers} workers, batch 64, micro-batch 8, "
      f"{epochs} epochs, median of {repeats} runs")
print(f"{'configuration':30} {'s/epoch':>9} {'comm share':>11} {'final objective':>16}  flags")
t = {}
for name, sec, comm, obj, flags in rows:
    t[name] = float(sec)
    print(f"{name:30} {float(sec):9.3f} {100 * float(comm):10.1f}% {float(obj):16.6f}  {flags}")
p, n = t["inagg model, pipelined"], t["inagg model, --no-pipeline"]
print(f"no-pipeline / pipelined (inagg): {n / p:.2f}x")
if "mpi model, pipelined" in t:
    print(f"no-pipeline / pipelined (mpi):   "
          f"{t['mpi model, --no-pipeline'] / t['mpi model, pipelined']:.2f}x")
    print(f"mpi / inagg, pipelined:          {t['mpi model, pipelined'] / p:.2f}x")
share = steal_ms / (ncpu * max(wall_ms, 1))  # of what the cores could have run
print(f"hypervisor steal: {steal_ms / 1000:.1f} s over {wall_ms / 1000:.0f} s of runs "
      f"({100 * share:.1f}% of {ncpu} cores)"
      + ("; the host was busy, so repeat before trusting these numbers" if share > 0.05 else ""))
PY
