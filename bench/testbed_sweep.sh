#!/usr/bin/env bash
# bench/testbed_sweep.sh - the testbed measurements of docs/TESTBED.md, each one invocation of
# `inagg bench allreduce --testbed N` (which builds its testbed, runs inagg and the baselines
# across it with every result verified, and takes it down): 4 hosts at 100 Mbit/s, 8 hosts at
# 50 Mbit/s, 1% loss against lossless, MTU 1500, other link rates, and the --sizes sweep with
# its plot. A table cell is the median over --repeats runs.
#
#   bash bench/testbed_sweep.sh [main|hosts8|loss|mtu|rates|sizes|all]... [--repeats R]
#        [--rates "50 200 400"] [--elems E] [--out FILE] [--plot FILE.png]
#
# Runs as root. Results go to FILE (JSON lines {"tag", "run": the command's JSON}, default
# build/testbed/sweep-DATE.jsonl) and a markdown table to stdout (bench/testbed_table.py).
set -euo pipefail
cd "$(dirname "$0")/.."
phases="" repeats=3 rates="50 200 400 800" elems=4000000 out="" plot=docs/img/testbed-sizes.png
while [ $# -gt 0 ]; do
    case $1 in
    main | hosts8 | loss | mtu | rates | sizes) phases+=" $1" ;;
    all) phases=" main hosts8 loss mtu sizes" ;;
    --repeats) repeats=$2; shift ;;
    --rates) rates=$2; shift ;;
    --elems) elems=$2; shift ;;
    --out) out=$2; shift ;;
    --plot) plot=$2; shift ;;
    -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "testbed_sweep: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
phases=${phases:- main hosts8 loss}
[ -x build/inagg ] && [ -x build/inagg-mpi-bench ] || { echo "testbed_sweep: build first (make)" >&2; exit 2; }
mkdir -p build/testbed
out=${out:-build/testbed/sweep-$(date +%Y%m%d-%H%M%S).jsonl}
trap 'exit 130' INT TERM

run() { # TAG ARGS... : one invocation, its JSON line tagged into $out
    local tag=$1 json rc=0
    shift
    echo "== $tag: inagg bench allreduce $*" >&2
    json=$(./build/inagg bench allreduce "$@" --json - 2> >(tail -n 12 >&2)) || rc=$?
    [ -n "$json" ] || json='{"verified":false,"error":"no report (exit '"$rc"')"}'
    printf '{"tag":"%s","args":"%s","run":%s}\n' "$tag" "$*" "$json" >>"$out"
}

{
    echo "# machine: $(uname -r), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
        "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
    echo "# $(date -u +%FT%TZ) $0$phases repeats=$repeats elems=$elems"
} >>"$out"

all3=mpi,mpi-ring,gloo
for phase in $phases; do
    case $phase in
    main)
        for _ in $(seq 1 "$repeats"); do
            run h4-100mbit --testbed 4 --link-rate 100mbit --elems "$elems" --baseline $all3
        done ;;
    hosts8)
        for _ in $(seq 1 "$repeats"); do
            run h8-50mbit --testbed 8 --link-rate 50mbit --elems "$elems" --baseline $all3
        done ;;
    loss)
        for _ in $(seq 1 "$repeats"); do
            run lossless --testbed 4 --link-rate 100mbit --elems "$elems" --dtype int32 --baseline mpi-ring,gloo
            run loss1pct --testbed 4 --link-rate 100mbit --elems "$elems" --dtype int32 --loss 0.01 --baseline mpi-ring,gloo
        done ;;
    mtu)
        for _ in $(seq 1 "$repeats"); do
            run mtu1500 --testbed 4 --link-rate 100mbit --mtu 1500 --elems "$elems" --baseline mpi-ring
        done ;;
    rates)
        for r in $rates; do
            for _ in $(seq 1 "$repeats"); do
                run "h4-${r}mbit" --testbed 4 --link-rate "${r}mbit" --elems "$elems" --baseline $all3
            done
        done ;;
    sizes)
        mkdir -p "$(dirname "$plot")"
        run sizes --testbed 4 --link-rate 100mbit --sizes --baseline $all3 --plot "$plot" ;;
    esac
done
echo "results: $out" >&2
bench/testbed_table.py "$out"
