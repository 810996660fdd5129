#!/usr/bin/env bash
# bench/mpi_failover_testbed.sh - an unmodified MPI program outlives its switch across a testbed.
#
# tests/mpi/allreduce_sizes.c (it knows nothing of inagg: every size from 4 B to 256 KiB as
# MPI_INT and MPI_FLOAT, then 256 KiB of MPI_INT --calls times more, every element of every
# result checked on every rank) runs under libinagg-pmpi.so with 4 ranks, one per host of
# `tools/testbed up 4 --fabric bridge --link-rate RATE` (a Linux bridge forwards, so MPI's own
# traffic does not depend on the aggregation switch), every call through the switch
# (INAGG_MIN_BYTES=0). The switch, `inagg switch` in the testbed's switch namespace, is killed
# with SIGKILL once rank 0 has printed a drawn number of results (seeded, within the first
# half of the run's calls, so that a return has calls left to return to), in each of three ways:
#   restart   restarted on the same address 0.5 s later; the library's fail-over (on by
#             default) takes the job back to it under a new generation
#   fallback  never restarted; the fail-over finds no switch (INAGG_REJOIN_MS, 1000 here),
#             the interposer finishes the interrupted call over MPI and stays there
#   return    fail-over off (INAGG_FAILOVER=0), restarted 0.5 s later: the interposer falls
#             back to MPI and returns to the switch (INAGG_PMPI_RETRY_MS=500)
# A run passes when mpirun exits 0, rank 0's summary counts 0 wrong results, and each rank
# logged the way it went (a fail-over line, a fall-back line, a fall-back and a return line).
# Reports N/N per way and, per run, the ranks' longest stall as their log lines give it.
# Needs root, Open MPI and a build (make; make pmpi). Holds /tmp/inagg-measure.lock.
#
#   bash bench/mpi_failover_testbed.sh [--runs N (5)] [--ways "restart fallback return"]
#                                      [--rate R (1gbit)] [--calls K (1500)] [--seed S]
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
INAGG=$ROOT/build/inagg PMPI=$ROOT/build/libinagg-pmpi.so TB=$ROOT/tools/testbed
RUNS=5 WAYS="restart fallback return" RATE=1gbit CALLS=1500 SEED=$(($(date +%s) % 100000))
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "mpi_failover_testbed: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=${2:?}; shift 2 ;;
        --ways) WAYS=${2:?}; shift 2 ;;
        --rate) RATE=${2:?}; shift 2 ;;
        --calls) CALLS=${2:?}; shift 2 ;;
        --seed) SEED=${2:?}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument '$1' (--help)" ;;
    esac
done
[[ $RUNS =~ ^[1-9][0-9]{0,2}$ ]] || die "--runs must be 1..999"
[[ $CALLS =~ ^[1-9][0-9]{2,5}$ ]] || die "--calls must be 100..999999"
[[ $SEED =~ ^[0-9]+$ ]] || die "--seed must be a number"
for w in $WAYS; do [[ $w =~ ^(restart|fallback|return)$ ]] || die "unknown way '$w' (restart, fallback, return)"; done
[ -x "$INAGG" ] && [ -f "$PMPI" ] || die "build first (make; make pmpi)"
command -v mpicc >/dev/null && command -v mpirun >/dev/null || die "Open MPI missing (openmpi-bin libopenmpi-dev)"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"

out=$(mktemp -d /tmp/inagg-mpifo-XXXXXX)
tb="" swpidf=$out/switch.pid
stop_switch() { [ -s "$swpidf" ] && kill -9 "$(cat "$swpidf")" 2>/dev/null; rm -f "$swpidf"; }
cleanup() {
    stop_switch
    [ -n "$tb" ] && timeout 60 "$TB" down "$tb" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM
exec 9>/tmp/inagg-measure.lock
flock -w 1800 9 || die "another measurement holds /tmp/inagg-measure.lock"
timeout 120 mpicc -O2 tests/mpi/allreduce_sizes.c -o "$out/sizes" 2>"$out/mpicc.err" ||
    die "mpicc: $(head -n 3 "$out/mpicc.err")"

tb=mf$$
tb=${tb:0:10}
timeout 120 "$TB" up 4 --name "$tb" --fabric bridge --link-rate "$RATE" >/dev/null 2>"$out/up" ||
    die "tools/testbed up: $(tail -n 3 "$out/up")"
net=$(timeout 10 "$TB" show "$tb" --json | sed -n 's/.*"subnet":"\([0-9.]*\)\.0\/24".*/\1/p')
SW=$net.254:7100
echo "mpi_failover_testbed: seed $SEED, testbed $tb (4 hosts, bridge, $RATE), switch $SW, $RUNS runs per way, $CALLS calls of 256 KiB after the sizes (logs in $out)"

# start_switch LOG: `inagg switch` on $SW in the switch namespace; waits until it listens.
start_switch() {
    # in a subshell: its SIGKILL is not reported as a job of this shell
    ("$TB" exec "$tb" sw -- sh -c 'echo $$ >"$1"; shift; exec "$@"' sh "$swpidf" \
        env INAGG_LOG=info "$INAGG" switch --listen "$SW" --worker-timeout 5000 >"$1" 2>&1 &)
    for _ in $(seq 100); do grep -q 'listening' "$1" 2>/dev/null && return 0; sleep 0.05; done
    echo "mpi_failover_testbed: the switch did not start: $(tail -n 3 "$1")" >&2
    return 1
}

# run_job LOG FAILOVER: the program across the testbed, in the background (its pid in job).
run_job() {
    "$TB" exec "$tb" h1 -- env INAGG_TESTBED="$tb" INAGG_SWITCH="$SW" INAGG_VERBOSE=1 INAGG_LOG=warn \
        INAGG_MIN_BYTES=0 INAGG_FAILOVER="$2" INAGG_REJOIN_MS=1000 INAGG_PMPI_RETRY_MS=500 \
        timeout 600 mpirun --allow-run-as-root --mca plm_rsh_agent "$ROOT/tools/testbed-rsh" \
        --host "$net.1,$net.2,$net.3,$net.4" -np 4 --map-by node --bind-to none --mca pml ob1 \
        --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
        --mca mpi_yield_when_idle 1 -x INAGG_SWITCH -x INAGG_VERBOSE -x INAGG_LOG -x INAGG_MIN_BYTES \
        -x INAGG_FAILOVER -x INAGG_REJOIN_MS -x INAGG_PMPI_RETRY_MS -x LD_PRELOAD="$PMPI" \
        "$out/sizes" 262144 "$CALLS" >"$1" 2>&1 &
    job=$!
}

RANDOM=$SEED
all=0 allok=0
for way in $WAYS; do
    passed=0 stalls=()
    for i in $(seq "$RUNS"); do
        log=$out/$way-$i
        failover=1
        [ "$way" = return ] && failover=0
        start_switch "$log.sw1" || exit 1
        at=$((20 + (RANDOM * 32768 + RANDOM) % (CALLS / 2)))
        run_job "$log" $failover
        struck=0
        for _ in $(seq 12000); do # 600 s at most
            [ "$(grep -c '^ok ' "$log")" -ge "$at" ] && { struck=1; break; }
            kill -0 "$job" 2>/dev/null || break
            sleep 0.05
        done
        stop_switch
        if [ "$way" != fallback ] && [ $struck = 1 ]; then
            sleep 0.5
            start_switch "$log.sw2" || exit 1
        fi
        wait "$job"
        rc=$?
        stop_switch
        summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n1)
        wrong=$(echo "$summary" | cut -d' ' -f3)
        case $way in
            restart) want=$(grep -c 'fail-over: .* stall' "$log") ;;
            fallback) want=$(grep -c '^inagg-pmpi: rank [0-3]: fall-back to MPI' "$log") ;;
            return) want=$(($(grep -c '^inagg-pmpi: rank [0-3]: return to the switch' "$log") >= 4 ?
                            $(grep -c '^inagg-pmpi: rank [0-3]: fall-back to MPI' "$log") : 0)) ;;
        esac
        stall=$(grep -o 'stall [0-9]* ms' "$log" | sed 's/stall \([0-9]*\) ms/\1/' | sort -n | tail -n1)
        all=$((all + 1))
        if [ $rc -eq 0 ] && [ $struck = 1 ] && [ "$wrong" = 0 ] && [ "$want" -ge 4 ]; then
            passed=$((passed + 1)) allok=$((allok + 1)) result=ok
            [ -n "$stall" ] && stalls+=("$stall")
        else
            result="FAILED (rc $rc, struck $struck, '$summary', $want rank lines): $(grep -v '^ok ' "$log" | tail -n 3 | tr '\n' ' ')"
        fi
        echo "$way run $i/$RUNS: switch killed after result $at: $result; $summary; longest stall ${stall:--} ms"
    done
    p50=$(printf '%s\n' "${stalls[@]}" | sort -n | awk '{a[NR]=$1} END {print NR ? a[int((NR+1)/2)] : "-"}')
    echo "mpi_failover_testbed $way: $passed/$RUNS passed (mpirun exit 0, 0 wrong results, every rank logged the way); stall median ${p50} ms"
done
[ "$allok" = "$all" ]
