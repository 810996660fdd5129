#!/usr/bin/env bash
# tests/cli_failover.sh - a job outlives its switch (docs/OPERATIONS.md, "Upgrades and
# failures"), the short version of bench/switch_chaos.sh: `inagg bench allreduce --switch` with
# 4 ranks, int32 and float32 in fixed point, the switch SIGKILLed and restarted on its port
# (5 runs), stopped with SIGTERM and restarted as `systemctl restart` does (3 runs), SIGKILLed
# with a standby listed (5 runs) and SIGSTOPped for 4 s with a standby listed (3 runs): every
# run ends verified with the fault-free run's checksum, and in each mode the fault landed
# mid-run at least once. Also: a malformed switch list and a bad INAGG_SWITCH_TIMEOUT_MS are
# refused, naming the cause. Loopback only; about 100 seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; exit 1; }

t=failover_malformed_switch_list_is_refused
out=$(timeout 30 $INAGG bench allreduce --switch '127.0.0.1:7000;;127.0.0.1:7001' --workers 2 \
    --elems 1000 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "bad switch list .*an empty entry" <<<"$out"; then ok $t
else bad $t "rc $rc: $out"; fi

t=failover_bad_switch_timeout_is_refused
out=$(INAGG_SWITCH_TIMEOUT_MS=soon timeout 30 $INAGG bench allreduce --workers 2 --elems 1000 2>&1); rc=$?
if [ $rc -ne 0 ] && grep -q "INAGG_SWITCH_TIMEOUT_MS='soon' is not a number" <<<"$out"; then ok $t
else bad $t "rc $rc: $out"; fi

# mode runs: the chaos harness's verdict line for one mode, checked
chaos() {
    local t=$1 mode=$2 runs=$3
    timeout 240 bash bench/switch_chaos.sh "--$mode" --runs "$runs" --seed 41 --elems 400000 \
        --iters 30 --stop-s 4 --out "$tmp/$mode" >"$tmp/$mode.out" 2>&1
    local rc=$? line
    line=$(grep "^switch_chaos $mode:" "$tmp/$mode.out")
    if [ $rc -eq 0 ] && grep -q "$runs/$runs passed ([1-9][0-9]* with a fail-over" <<<"$line"; then
        ok "$t ($line)"
    else bad $t "rc $rc: $(tail -n 6 "$tmp/$mode.out")"; fi
}
chaos failover_switch_killed_and_restarted restart 5
chaos failover_switch_restarted_by_sigterm term 3
chaos failover_switch_killed_standby_listed standby 5
chaos failover_switch_stopped_standby_listed stop 3

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
