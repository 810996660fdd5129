#!/usr/bin/env bash
# bench/switch_chaos.sh - a job outlives its switch: `inagg bench allreduce --switch` with 4
# ranks, the switch stopped at a random moment of each run, and every run must end verified,
# exit 0, with a result bit-identical to a fault-free run's (the bench verifies each iteration
# itself - int32 exactly, float32 within the fixed-point bound - and prints a checksum of the
# last result, compared here with the fault-free run's checksum).
#
# Modes (one or more; default --restart):
#   --restart   SIGKILL the switch, start it again on the same port 0.5 s later
#   --term      a planned restart (what `systemctl restart inagg-switch` does): SIGTERM (the
#               switch tells its jobs SHUTDOWN), and a new switch on the same port once the
#               old one exited
#   --standby   SIGKILL it and never restart it: a standby switch is listed
#               (--switch A;B), and the ranks move to it
#   --stop      SIGSTOP it for 10 s (--stop-s), then SIGCONT: the ranks move on (a standby is listed)
#               and no result of the old generation may be accepted (the ranks count them
#               as stale and drop them; a wrong result would fail the run's check)
# Per run the moment is drawn (seeded, printed) as a number of the switch's aggregation rounds
# for the job, uniformly within the first 80% of the rounds a fault-free run takes; the script
# polls the switch's counters (`inagg switch --stats`) and strikes once the job has done that
# many, so every run is hit while its allreduces are in flight, however loaded the machine. Reports N/N passed per mode and the
# stall's p50/p99 (the longest of the ranks' "fail-over: ... stall N ms" log lines per run).
#
# Usage: bash bench/switch_chaos.sh [--restart] [--standby] [--stop] [--runs N (100)]
#            [--seed S] [--dtype int32|float32|both (both)] [--elems E (1000000)]
#            [--iters K (40)] [--stop-s S (10)] [--out DIR]
# Environment: CHAOS_INAGG (the inagg binary, ./build/inagg). Loopback only. Exit 0 when
# every run passed.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=${CHAOS_INAGG:-./build/inagg}
modes=() runs=100 seed=$(( $(date +%s) % 100000 )) dtypes="int32 float32" elems=1000000 iters=40
stop_s=10
OUT=""
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --restart|--term|--standby|--stop) modes+=("${1#--}") ;;
        --runs) runs=$2; shift ;;
        --seed) seed=$2; shift ;;
        --dtype) case $2 in both) dtypes="int32 float32" ;; int32|float32) dtypes=$2 ;; *) usage ;; esac; shift ;;
        --elems) elems=$2; shift ;;
        --iters) iters=$2; shift ;;
        --stop-s) stop_s=$2; shift ;;
        --out) OUT=$2; shift ;;
        -h|--help) usage ;;
        *) echo "switch_chaos: unknown argument '$1'" >&2; usage ;;
    esac
    shift
done
[ ${#modes[@]} -gt 0 ] || modes=(restart)
[[ $runs =~ ^[0-9]+$ ]] && [ "$runs" -ge 1 ] || { echo "switch_chaos: --runs must be >= 1" >&2; exit 2; }
[[ $seed =~ ^[0-9]+$ ]] || { echo "switch_chaos: --seed must be a number" >&2; exit 2; }
[[ $stop_s =~ ^[0-9]+$ ]] || { echo "switch_chaos: --stop-s must be whole seconds" >&2; exit 2; }
[ -x "$INAGG" ] || { echo "switch_chaos: build first (make)" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/inagg-chaos-XXXXXX)}
mkdir -p "$OUT"
RANDOM=$seed
echo "switch_chaos: seed $seed, modes ${modes[*]}, $runs runs each, dtypes $dtypes, $elems elements x $iters iterations, 4 ranks (logs in $OUT)"

sw_pids=()
cleanup() {
    for p in "${sw_pids[@]}"; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT

# A free loopback port: bind a switch to port 0 and read the port it got, then stop it.
# start_switch PORT LOG: a switch on PORT (waits until it listens); its pid in $swpid.
start_switch() {
    local port=$1 log=$2 ready
    ready=$(mktemp "$OUT/ready-XXXXXX")
    INAGG_LOG=info $INAGG switch --listen "127.0.0.1:$port" --worker-timeout 5000 --ready-fd 3 \
        3>"$ready" >"$log" 2>&1 &
    swpid=$!
    sw_pids+=("$swpid")
    for _ in $(seq 200); do [ -s "$ready" ] && break; kill -0 $swpid 2>/dev/null || break; sleep 0.02; done
    local got; got=$(head -n1 "$ready" 2>/dev/null); rm -f "$ready"
    [ -n "$got" ] || { echo "switch_chaos: the switch did not start on $port: $(tail -n 3 "$log")" >&2; return 1; }
    lastport=$got
}
free_port() {
    start_switch 0 "$OUT/probe.log" || exit 1
    kill -KILL "$swpid"; wait "$swpid" 2>/dev/null
    echo "$lastport"
}

# run_bench DTYPE SWITCH JSON ERR: the bench, in the background; its pid in $bpid.
run_bench() {
    INAGG_LOG=warn INAGG_REJOIN_MS=${CHAOS_REJOIN_MS:-12000} timeout 180 "$INAGG" bench allreduce \
        --switch "$2" --workers 4 --elems "$elems" --iters "$iters" --dtype "$1" \
        --float-mode fixed --json "$3" >"$3.txt" 2>"$4" &
    bpid=$!
}
json_field() { grep -o "\"$2\":\"\{0,1\}[a-z0-9.]*" "$1" 2>/dev/null | head -n1 | sed 's/.*:"\{0,1\}//'; }

# Wait (bounded) until the switch's log says a job is active; 0 when it did.
wait_active() {
    for _ in $(seq 1500); do
        grep -E "job '.*' \(id [0-9]+\) active" "$1" >/dev/null 2>&1 && return 0
        kill -0 "$bpid" 2>/dev/null || return 1
        sleep 0.01
    done
    return 1
}

# The job's aggregation rounds so far, from the switch at 127.0.0.1:PORT (empty when none).
job_rounds() {
    timeout 5 "$INAGG" switch --stats "127.0.0.1:$1" --json 2>/dev/null |
        grep -o '"rounds":[0-9]*' | head -n1 | cut -d: -f2
}
# Wait (bounded, 120 s) until the job on PORT has done ROUNDS rounds; 0 when it did.
wait_rounds() {
    local r
    for _ in $(seq 6000); do
        r=$(job_rounds "$1")
        [ -n "$r" ] && [ "$r" -ge "$2" ] && return 0
        kill -0 "$bpid" 2>/dev/null || return 1
        sleep 0.02
    done
    return 1
}

# Fault-free runs: each dtype's checksum, and how many rounds its allreduces take.
declare -A base_sum base_ms base_rounds
p0=$(free_port)
for dt in $dtypes; do
    start_switch "$p0" "$OUT/base-$dt.switch.log" || exit 1
    s=$swpid
    run_bench "$dt" "127.0.0.1:$p0" "$OUT/base-$dt.json" "$OUT/base-$dt.err"
    wait_active "$OUT/base-$dt.switch.log"
    t0=$(date +%s%N) rounds=0
    while kill -0 "$bpid" 2>/dev/null; do
        r=$(job_rounds "$p0"); [ -n "$r" ] && rounds=$r
        sleep 0.02
    done
    wait "$bpid"; rc=$?
    t1=$(date +%s%N)
    kill -TERM "$s"; wait "$s" 2>/dev/null
    [ $rc -eq 0 ] && [ "$(json_field "$OUT/base-$dt.json" verified)" = true ] || {
        echo "switch_chaos: the fault-free $dt run failed (rc $rc): $(tail -n 3 "$OUT/base-$dt.err")" >&2; exit 1; }
    base_sum[$dt]=$(json_field "$OUT/base-$dt.json" checksum)
    base_ms[$dt]=$(( (t1 - t0) / 1000000 ))
    base_rounds[$dt]=$rounds
    [ "$rounds" -ge 10 ] || { echo "switch_chaos: the fault-free $dt run was seen at only $rounds rounds (more --iters)" >&2; exit 1; }
    echo "fault-free $dt: checksum ${base_sum[$dt]}, ${base_ms[$dt]} ms and at least $rounds rounds from the job's start to its end"
done

# percentile P of the numbers on stdin (nearest rank)
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {if (NR==0) {print "-"; exit} i=int((p*NR+99)/100); if (i<1) i=1; print a[i]}'; }

all_ok=1
for mode in "${modes[@]}"; do
    passed=0 failed=0 stale_total=0 faulted=0
    stalls=()
    for i in $(seq "$runs"); do
        dt=$(echo $dtypes | tr ' ' '\n' | sed -n "$(( (i - 1) % $(echo $dtypes | wc -w) + 1 ))p")
        d="$OUT/$mode-$i"
        pa=$(free_port) pb=""
        start_switch "$pa" "$d.switch.log" || exit 1
        main=$swpid addr="127.0.0.1:$pa"
        if [ "$mode" = standby ] || [ "$mode" = stop ]; then
            pb=$(free_port)
            start_switch "$pb" "$d.standby.log" || exit 1
            standby=$swpid addr="127.0.0.1:$pa;127.0.0.1:$pb"
        fi
        run_bench "$dt" "$addr" "$d.json" "$d.err"
        window=$(( base_rounds[$dt] * 8 / 10 ))
        at=$(( 1 + (RANDOM * 32768 + RANDOM) % window ))
        how="no fault (the job did not reach round $at)"
        if wait_active "$d.switch.log" && wait_rounds "$pa" "$at"; then
            case $mode in
                restart)
                    kill -KILL "$main"; wait "$main" 2>/dev/null; sleep 0.5
                    start_switch "$pa" "$d.switch2.log" || exit 1
                    main=$swpid how="SIGKILL at round $at, restarted 0.5 s later" ;;
                term)
                    kill -TERM "$main"; wait "$main" 2>/dev/null
                    start_switch "$pa" "$d.switch2.log" || exit 1
                    main=$swpid how="SIGTERM at round $at, restarted once it exited" ;;
                standby)
                    kill -KILL "$main"; wait "$main" 2>/dev/null
                    how="SIGKILL at round $at, standby listed" ;;
                stop)
                    kill -STOP "$main"; sleep "$stop_s"; kill -CONT "$main"
                    how="SIGSTOP at round $at for $stop_s s" ;;
            esac
        fi
        wait "$bpid"; rc=$?
        for p in $main ${standby:-}; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
        standby=""
        verified=$(json_field "$d.json" verified) sum=$(json_field "$d.json" checksum)
        stall=$(grep -o 'fail-over: .* stall [0-9]* ms' "$d.err" | sed 's/.* stall \([0-9]*\) ms/\1/' | sort -n | tail -n1)
        nfo=$(grep -c 'fail-over: .* stall' "$d.err")
        stale=$(json_field "$d.json" stale_dropped); stale=${stale:-0}
        stale_total=$(( stale_total + stale ))
        if [ $rc -eq 0 ] && [ "$verified" = true ] && [ "$sum" = "${base_sum[$dt]}" ]; then
            passed=$((passed + 1)); result=ok
        else
            failed=$((failed + 1)); result="FAILED (rc $rc, verified ${verified:-?}, checksum ${sum:-none} vs ${base_sum[$dt]}): $(grep -v '^$' "$d.err" | tail -n 2 | tr '\n' ' ')"
        fi
        [ -n "$stall" ] && stalls+=("$stall") && faulted=$((faulted + 1))
        echo "$mode run $i/$runs $dt: $how: $result; $nfo fail-over lines, stall ${stall:--} ms, stale $stale"
    done
    p50=$(printf '%s\n' "${stalls[@]}" | pct 50) p99=$(printf '%s\n' "${stalls[@]}" | pct 99)
    echo "switch_chaos $mode: $passed/$runs passed ($faulted with a fail-over, $((runs - faulted)) without: the run ended before its round); stall p50 $p50 ms, p99 $p99 ms; stale results dropped $stale_total"
    [ $failed -eq 0 ] || all_ok=0
done
[ $all_ok -eq 1 ]
