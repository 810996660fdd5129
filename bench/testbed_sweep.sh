#!/usr/bin/env bash
# bench/testbed_sweep.sh - inagg against Open MPI (default and ring) and Gloo across a testbed
# of network namespaces with rate-limited links (tools/testbed), at several link rates, at 8
# hosts, with 1% loss, and at MTU 1500. Every result is verified; each system's TAT is the
# median of its timed iterations, and a table cell is the median over --repeats runs.
#
#   bash bench/testbed_sweep.sh [rates|hosts8|loss|mtu|all] [--repeats R] [--rates "50 100"]
#                               [--elems E] [--iters K] [--out FILE]
#
# Runs as root (tools/testbed needs it); builds a testbed named `sweep` and removes it on
# exit, also when interrupted. Results go to FILE (JSON lines, default
# build/testbed/sweep-DATE.jsonl) and a markdown table to stdout (bench/testbed_table.py).
set -euo pipefail
cd "$(dirname "$0")/.."
phase=all repeats=2 rates="50 100 200 400 800" elems=4000000 iters=3 out=""
while [ $# -gt 0 ]; do
    case $1 in
    rates | hosts8 | loss | mtu | all) phase=$1 ;;
    --repeats) repeats=$2; shift ;;
    --rates) rates=$2; shift ;;
    --elems) elems=$2; shift ;;
    --iters) iters=$2; shift ;;
    --out) out=$2; shift ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "testbed_sweep: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ -x build/inagg ] && [ -x build/inagg-mpi-bench ] || { echo "testbed_sweep: build first (make)" >&2; exit 2; }
mkdir -p build/testbed
out=${out:-build/testbed/sweep-$(date +%Y%m%d-%H%M%S).jsonl}
name=sweep
trap 'tools/testbed down $name' EXIT
trap 'exit 130' INT TERM

run() { # TAG SYSTEM [driver args...]
    local tag=$1 sys=$2
    shift 2
    echo "== $tag $sys $*" >&2
    bench/testbed_run.py --testbed $name --system "$sys" --elems "$elems" --iters "$iters" \
        --tag "$tag" "$@" | tee -a "$out" >&2 || true
}

up() { # N RATE MTU
    tools/testbed down $name
    tools/testbed up "$1" --name $name --link-rate "$2" --mtu "$3" >&2
}

{
    echo "# machine: $(uname -r), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
        "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "# $(date -u +%FT%TZ) $0 $phase repeats=$repeats elems=$elems iters=$iters"
} >>"$out"

if [ $phase = rates ] || [ $phase = all ]; then
    up 4 "${rates%% *}mbit" 9000
    for r in $rates; do
        tools/testbed rate $name "${r}mbit" >&2
        for rep in $(seq 1 "$repeats"); do
            # rotate the order so no system always runs right after another's load
            case $((rep % 2)) in
            1) order="linkcheck inagg mpi mpi-ring gloo" ;;
            0) order="gloo mpi-ring mpi inagg linkcheck" ;;
            esac
            for s in $order; do run rates "$s"; done
        done
    done
fi

if [ $phase = hosts8 ] || [ $phase = all ]; then
    up 8 50mbit 9000
    for rep in $(seq 1 "$repeats"); do
        for s in linkcheck inagg mpi mpi-ring gloo; do run hosts8 "$s"; done
    done
fi

if [ $phase = loss ] || [ $phase = all ]; then
    up 4 100mbit 9000
    for rep in $(seq 1 "$repeats"); do
        tools/testbed loss $name 0 >&2
        for s in inagg mpi-ring gloo; do run lossless "$s"; done
        tools/testbed loss $name 1% >&2
        for s in inagg mpi-ring gloo; do run loss1pct "$s"; done
        tools/testbed stats $name >&2
    done
fi

if [ $phase = mtu ] || [ $phase = all ]; then
    up 4 100mbit 1500
    for rep in $(seq 1 "$repeats"); do
        run mtu1500-pe256 inagg --packet-elems 256
        run mtu1500-pe2048 inagg --packet-elems 2048
        run mtu1500-pe16368 inagg --packet-elems 16368 --window 4
        run mtu1500 mpi-ring
        run mtu1500 linkcheck
    done
fi

echo "results: $out" >&2
bench/testbed_table.py "$out"
