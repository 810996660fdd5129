#!/usr/bin/env bash
# tests/cli_pmpi_fallback.sh - an MPI job outlives its switch without any other switch: an
# unmodified MPI program (tests/mpi/allreduce_sizes.c: every size up to 256 KiB as MPI_INT and
# MPI_FLOAT, then 256 KiB of MPI_INT 1500 times more, every element of every result checked on
# every rank) runs under libinagg-pmpi.so with 4 ranks on loopback, fail-over off
# (INAGG_FAILOVER=0), and the switch is killed (SIGKILL) mid-run:
#   - never restarted: the interrupted allreduce is finished over MPI, every later one runs on
#     MPI, the job ends with 0 wrong results, each rank logs one fall-back line; the same
#     with the library's fail-over on and spent (one round of 300 ms);
#   - restarted on the same port 0.5 s later: the same, and the ranks return to the switch
#     (INAGG_PMPI_RETRY_MS=200): each rank logs one return line, the restarted switch admits
#     the job's "-r1" generation, and rank 0's summary counts 1 fall-back and 1 return;
#   - restarted 0.5 s later with the library's fail-over on: the job rejoins it, never needs
#     MPI, and each rank logs one fail-over warning without any INAGG_LOG set.
# Then the Open MPI component (coll/inagg) with the switch killed: the same finish over MPI, the
# later calls with MPI (it does not return). Skips, saying why, without Open MPI. Every
# command runs under `timeout`; about 30 seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
INAGG=${INAGG:-build/inagg}
PMPI=${INAGG_PMPI:-$ROOT/build/libinagg-pmpi.so}
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
swpid=""
trap '[ -n "$swpid" ] && { kill -9 $swpid; wait $swpid; } 2>/dev/null; rm -rf "$tmp"' EXIT

if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    skp pmpi_fallback "Open MPI (mpicc, mpirun) not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)"
    finish
fi
[ -f "$PMPI" ] || timeout 300 make -s pmpi >/dev/null 2>&1
if ! timeout 120 mpicc -O2 tests/mpi/allreduce_sizes.c -o "$tmp/sizes" 2>"$tmp/mpicc.err"; then
    bad pmpi_fallback "mpicc: $(head -n 3 "$tmp/mpicc.err")"
    finish
fi
MPIRUN=(mpirun --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader,tcp
        --mca btl_tcp_if_include lo -n 4)
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root "${MPIRUN[@]:1}")

# start_switch LISTEN LOG: the switch in the background (its pid in swpid, its port in
# $tmp/ready); not in a subshell, so that swpid is this shell's
start_switch() {
    exec 3>"$tmp/ready"
    INAGG_LOG=info "$INAGG" switch --listen "$1" --ready-fd 3 >/dev/null 2>"$2" &
    swpid=$! # the switch itself (the trap ends it), for its SIGKILL
    exec 3>&-
    for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
}

# run_job NAME RESTART [FAILOVER [WAY]]: the job, the switch killed once rank 0 printed 40
# results; RESTART 1 starts it again on the same port 0.5 s later. FAILOVER 1: the library's
# fail-over on, given one round of 300 ms to find the switch (spent before the fall-back), else
# off. WAY: pmpi (the interposer, default) or coll (the Open MPI component). Leaves the job's
# output in $tmp/NAME.
run_job() {
    local name=$1 restart=$2 failover=${3:-0} way=${4:-pmpi} port
    local -a via=(-x LD_PRELOAD="$PMPI")
    start_switch 127.0.0.1:0 "$tmp/$name.sw1"
    port=$(head -n1 "$tmp/ready" 2>/dev/null)
    [ -n "$port" ] || { echo "the switch did not start: $(cat "$tmp/$name.sw1")" >"$tmp/$name"; return 1; }
    [ "$way" = coll ] && via=(--mca coll_inagg_priority 100 --mca coll_inagg_switch "127.0.0.1:$port"
                              --mca coll_inagg_one_host switch --mca coll_inagg_min_bytes 0)
    INAGG_SWITCH=127.0.0.1:$port INAGG_VERBOSE=1 INAGG_ONE_HOST=switch INAGG_MIN_BYTES=0 \
        INAGG_FAILOVER=$failover INAGG_REJOIN_MS=${REJOIN_MS:-300} INAGG_FAILOVER_MAX=1 INAGG_PMPI_RETRY_MS=200 \
        timeout 240 "${MPIRUN[@]}" -x INAGG_SWITCH -x INAGG_VERBOSE -x INAGG_ONE_HOST \
        -x INAGG_MIN_BYTES -x INAGG_FAILOVER -x INAGG_REJOIN_MS -x INAGG_FAILOVER_MAX \
        -x INAGG_PMPI_RETRY_MS "${via[@]}" "$tmp/sizes" 262144 1500 >"$tmp/$name" 2>&1 &
    local job=$!
    for _ in $(seq 600); do
        [ "$(grep -c '^ok ' "$tmp/$name")" -ge 40 ] && break
        sleep 0.05
    done
    kill -9 "$swpid" 2>/dev/null
    wait "$swpid" 2>/dev/null
    swpid=""
    if [ "$restart" = 1 ]; then
        sleep 0.5
        start_switch "127.0.0.1:$port" "$tmp/$name.sw2"
    fi
    wait $job
    local rc=$?
    # the restarted switch: stopped here, or the next run's would leave it running
    [ -n "$swpid" ] && { kill -9 "$swpid"; wait "$swpid"; } 2>/dev/null
    swpid=""
    return $rc
}

summary() { grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n1; }
lines() { grep -c "$2" "$1"; }

t=pmpi_switch_killed_job_finishes_on_mpi
run_job killed 0; rc=$?
if [ $rc -eq 0 ] && [ "$(summary "$tmp/killed" | cut -d' ' -f3)" = 0 ] &&
   [ "$(lines "$tmp/killed" '^inagg-pmpi: rank [0-3]: fall-back to MPI: job .* lost the switch')" = 4 ] &&
   [ "$(lines "$tmp/killed" 'return to the switch')" = 0 ] &&
   grep -q '^inagg-pmpi: 1 fall-backs to MPI, 0 returns to the switch' "$tmp/killed"; then
    ok "$t ($(summary "$tmp/killed"); $(grep -m1 'fall-back to MPI' "$tmp/killed" | sed 's/.*); //'))"
else bad $t "rc $rc, '$(summary "$tmp/killed")': $(grep -v '^ok ' "$tmp/killed" | tail -n 8)"; fi

t=pmpi_switch_killed_fail_over_spent_job_finishes_on_mpi
run_job spent 0 1; rc=$?
if [ $rc -eq 0 ] && [ "$(summary "$tmp/spent" | cut -d' ' -f3)" = 0 ] &&
   [ "$(lines "$tmp/spent" '^inagg-pmpi: rank [0-3]: fall-back to MPI: job .* no switch of the list took the job back')" = 4 ]; then
    ok "$t ($(summary "$tmp/spent"); $(grep -m1 'fall-back to MPI' "$tmp/spent" | sed 's/.*); //'))"
else bad $t "rc $rc, '$(summary "$tmp/spent")': $(grep -v '^ok ' "$tmp/spent" | tail -n 8)"; fi

t=pmpi_switch_restarted_job_returns_to_it
run_job restarted 1; rc=$?
if [ $rc -eq 0 ] && [ "$(summary "$tmp/restarted" | cut -d' ' -f3)" = 0 ] &&
   [ "$(lines "$tmp/restarted" '^inagg-pmpi: rank [0-3]: fall-back to MPI')" = 4 ] &&
   [ "$(lines "$tmp/restarted" '^inagg-pmpi: rank [0-3]: return to the switch .*-r1 after')" = 4 ] &&
   grep -q '^inagg-pmpi: 1 fall-backs to MPI, 1 returns to the switch' "$tmp/restarted" &&
   grep -q -- '-r1' "$tmp/restarted.sw2"; then
    ok "$t ($(summary "$tmp/restarted"); $(grep '^inagg-pmpi: 1 fall-backs' "$tmp/restarted"))"
else bad $t "rc $rc, '$(summary "$tmp/restarted")': $(grep -v '^ok ' "$tmp/restarted" | tail -n 8); switch: $(tail -n 3 "$tmp/restarted.sw2" 2>/dev/null)"; fi

# Fail-over on with time to rejoin (3 s) and the switch restarted 0.5 s later: the library
# takes the job back to it, MPI is never needed, and each rank says so in one warning, which
# the library prints without any INAGG_LOG (its default level in a user's program is warn).
t=pmpi_switch_restarted_fail_over_logs_each_rank_once
REJOIN_MS=3000 run_job failover 1 1; rc=$?
if [ $rc -eq 0 ] && [ "$(summary "$tmp/failover" | cut -d' ' -f3)" = 0 ] &&
   [ "$(lines "$tmp/failover" 'warn: fail-over: job .* rank [0-3]: switch .* lost .* stall [0-9]* ms')" = 4 ] &&
   [ "$(lines "$tmp/failover" 'fall-back to MPI')" = 0 ]; then
    ok "$t ($(summary "$tmp/failover"); $(grep -m1 'warn: fail-over' "$tmp/failover" | sed 's/.*generation/generation/'))"
else bad $t "rc $rc, '$(summary "$tmp/failover")': $(grep -v '^ok ' "$tmp/failover" | tail -n 8)"; fi

# The Open MPI component: the same finish over MPI (the module it displaced), no return.
t=ompi_coll_switch_killed_job_finishes_on_mpi
if ! command -v ompi_info >/dev/null 2>&1; then
    skp $t "ompi_info not installed (Debian: apt-get install openmpi-bin)"
elif ! timeout 300 make -s ompi-coll >"$tmp/make.log" 2>&1; then
    if grep -q 'development headers' "$tmp/make.log"; then
        skp $t "Open MPI's development headers not installed (Debian: apt-get install libopenmpi-dev)"
    else bad $t "make ompi-coll: $(tail -n 5 "$tmp/make.log")"; fi
else
    pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
    OMPI_MCA_mca_base_component_path=$pkglibdir:$ROOT/build run_job coll 0 0 coll; rc=$?
    if [ $rc -eq 0 ] && [ "$(summary "$tmp/coll" | cut -d' ' -f3)" = 0 ] &&
       [ "$(lines "$tmp/coll" '^coll/inagg: rank [0-3]: fall-back to MPI: .* lost the switch')" = 4 ]; then
        ok "$t ($(summary "$tmp/coll"); $(grep -m1 'fall-back to MPI' "$tmp/coll" | sed 's/.*); //'))"
    else bad $t "rc $rc, '$(summary "$tmp/coll")': $(grep -v '^ok ' "$tmp/coll" | tail -n 8)"; fi
fi

finish
