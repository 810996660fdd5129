#!/usr/bin/env bash
# tests/cli_poll.sh - `inagg switch --poll` and `--cpu`: usage errors exit 2 naming the cause;
# a sleeping switch never polls without waiting (empty_polls 0) and uses no CPU when idle; a
# busy one polls on (empty_polls > 0) while idle; an adaptive one sleeps while idle but spins
# after traffic (an allreduce through it); --cpu pins the dataplane thread; allreduces through
# every mode verify; without --poll the switch is adaptive:200. About 15 seconds; switches on
# loopback only.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
sw=""
trap '[ -n "$sw" ] && kill $sw 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; finish; }

t=usage_errors_exit_2
rcs=""
for args in "--poll fast" "--poll adaptive:0" "--poll adaptive:x" "--poll adaptive:2000000" \
    "--poll busy:5" "--cpu 64" "--cpu 3-1" "--cpu 1,1" "--cpu a" "--cpu 1," \
    "--l2 2 --cpu 0"; do
    timeout 10 $INAGG switch $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -qE "poll|CPU" "$tmp/err" || rcs+=" [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "$rcs"

# start_switch [--poll MODE] [EXTRA...]: a switch in the background ($sw), its port in $port
start_switch() {
    $INAGG switch --listen 127.0.0.1:0 "$@" --ready-fd 3 3>"$tmp/ready" >"$tmp/stats" 2>"$tmp/sw.err" &
    sw=$!
    for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
    port=$(grep -oE '[0-9]+' "$tmp/ready" | head -n 1)
}
# stop_switch: SIGTERM, its counters (printed as it stops) in $tmp/stats
stop_switch() { kill -TERM $sw; wait $sw; sw=""; }
empty_polls() { grep -hoE 'empty_polls=[0-9]+' "$tmp/stats" "$tmp/sw.err" | cut -d= -f2; }
cpu_ticks() { awk '{print $14 + $15}' /proc/$sw/stat; }
allreduce() { timeout 60 $INAGG bench latency --switch 127.0.0.1:$port --workers 2 --iters 50 --warmup 5 >"$tmp/lat" 2>&1; }

t=sleep_mode_never_spins
start_switch --poll sleep
sleep 1
ticks=$(cpu_ticks)
allreduce; arc=$?
stop_switch
n=$(empty_polls)
if [ "$arc" -eq 0 ] && [ "$n" = 0 ] && [ "$ticks" -le 10 ]; then ok $t
else bad $t "allreduce exit $arc, empty_polls '$n', idle cpu ticks $ticks"; fi

t=busy_mode_polls_while_idle_and_is_pinned
start_switch --poll busy --cpu 0
sleep 1
pinned=$(grep -h Cpus_allowed_list /proc/$sw/task/*/status | awk '$2 == "0"' | wc -l)
allreduce; arc=$?
stop_switch
n=$(empty_polls)
if [ "$arc" -eq 0 ] && [ "${n:-0}" -gt 1000 ] && [ "$pinned" -eq 1 ] && grep -q "poll mode=busy" "$tmp/stats"; then ok $t
else bad $t "allreduce exit $arc, empty_polls '$n', threads pinned to CPU 0: $pinned"; fi

t=adaptive_mode_sleeps_idle_and_spins_after_traffic
start_switch --poll adaptive:2000
sleep 1
kill -USR1 $sw   # the counters, and it carries on
for _ in $(seq 50); do [ -n "$(empty_polls)" ] && break; sleep 0.1; done
idle=$(empty_polls | head -n 1)
allreduce; arc=$?
stop_switch
busy=$(empty_polls | tail -n 1)
if [ "$arc" -eq 0 ] && [ "${idle:-x}" = 0 ] && [ "${busy:-0}" -gt 0 ]; then ok $t
else bad $t "allreduce exit $arc, empty_polls idle '$idle', after traffic '$busy'"; fi

t=default_mode_is_adaptive_200
start_switch
allreduce; arc=$?
stop_switch
if [ "$arc" -eq 0 ] && grep -q "poll mode=adaptive spin_us=200 " "$tmp/stats"; then ok $t
else bad $t "allreduce exit $arc, $(grep -h 'poll mode' "$tmp/stats" "$tmp/sw.err")"; fi

finish
