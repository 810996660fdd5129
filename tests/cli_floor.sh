#!/usr/bin/env bash
# tests/cli_floor.sh - the medium's floor of `inagg bench latency --testbed N`: its UDP echo
# and ping roles on loopback (a real echo verifies; an echo server that changes one byte, or
# none at all, fails the ping with a clear error), host k's rank and floor client pinned to
# the (k-1)-th CPU (--pin-hosts, and its flags' usage errors), then a 2-host testbed
# through the bridge and one through the inagg fabric, whose reports carry floor_us {p50, p99}
# and floor_ratio_p50 = inagg p50 / floor p50.
# The testbed part skips, saying why, where testbeds cannot be built (exit 3). Every command
# runs under `timeout`; about 30 seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
json_get() { python3 -c "import json,sys; d=json.loads([l for l in sys.stdin.read().splitlines() if l.startswith('{')][-1]); print(eval('d' + sys.argv[1]))" "$1"; }
tmp=$(mktemp -d)
pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; finish; }
port=$((20000 + RANDOM % 20000))

t=floor_ping_against_a_real_echo
timeout 20 $INAGG bench latency --floor-echo 127.0.0.1:$port --floor-life-ms 15000 2>"$tmp/echo.err" &
pids+=" $!"
if timeout 20 $INAGG bench latency --floor-ping 127.0.0.1:$port --floor-size 96 --floor-host 1 \
        --iters 200 --warmup 5 --report-file "$tmp/rep" 2>"$tmp/err"; then
    n=$(python3 -c "import struct,sys; b=open(sys.argv[1],'rb').read(); n,l=struct.unpack('II',b[:8]); v=struct.unpack('%dd'%n,b[8:]); print(n if all(x>0 for x in v) else -1)" "$tmp/rep")
    [ "$n" = 200 ] && ok $t || bad $t "report holds '$n' positive round trips, expected 200"
else bad $t "exit $?: $(cat "$tmp/err")"; fi

t=floor_ping_rejects_an_echo_that_changes_a_byte
cport=$((port + 1))
python3 - $cport <<'PY' &
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.settimeout(15)
try:
    while True:
        b, a = s.recvfrom(70000)
        b = bytearray(b); b[-1] ^= 0x01   # same length and sequence number, one bit off
        s.sendto(bytes(b), a)
except socket.timeout:
    pass
PY
pids+=" $!"
sleep 0.3
timeout 20 $INAGG bench latency --floor-ping 127.0.0.1:$cport --floor-size 96 --iters 5 \
    --report-file "$tmp/rep2" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "echo differs from the ping" "$tmp/err" && [ ! -s "$tmp/rep2" ]; then ok $t
else bad $t "exit $rc: $(cat "$tmp/err")"; fi

t=floor_ping_without_a_server_fails_in_bounded_time
start=$(date +%s)
timeout 40 $INAGG bench latency --floor-ping 127.0.0.1:$((port + 2)) --floor-size 96 --iters 5 \
    --report-file "$tmp/rep3" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "did not answer" "$tmp/err" && [ $(( $(date +%s) - start )) -lt 30 ]; then ok $t
else bad $t "exit $rc: $(cat "$tmp/err")"; fi

# --pin-hosts (default on): host k's rank and the floor's client in host k run on the
# (k-1)-th CPU (mod their number); seen in /proc while a long run is on
t=testbed_pins_host_k_to_the_k-1th_cpu
timeout 300 $INAGG bench latency --testbed 2 --fabric bridge --iters 150000 --warmup 10 \
    --json "$tmp/pin.json" >/dev/null 2>"$tmp/pin.err" &
runner=$!
mapfile -t cpus < <(python3 -c "import os; print('\n'.join(map(str, sorted(os.sched_getaffinity(0)))))")
seen="" fseen=""
# "index:CPUs" of each process of kind $1 (rank: --rank-cpu K; floor: --floor-cpu K)
pinned() {
    for pid in $(pgrep -f "inagg bench latency .*--$1-cpu"); do
        k=$(tr '\0' ' ' </proc/$pid/cmdline 2>/dev/null | sed -n "s/.*--$1-cpu \([0-9]*\).*/\1/p")
        list=$(awk '/Cpus_allowed_list/ {print $2}' /proc/$pid/status 2>/dev/null)
        [ -n "$k" ] && [ -n "$list" ] && echo -n " $k:$list"
    done
}
want0=${cpus[0]} want1=${cpus[$((1 % ${#cpus[@]}))]}
# a process pins itself once it has read its flags: look until each was seen pinned
all_pinned() { [[ "$1" == *" 0:$want0"* ]] && [[ "$1" == *" 1:$want1"* ]]; }
for _ in $(seq 1 600); do
    all_pinned "$seen" || seen+=$(pinned rank)
    all_pinned "$fseen" || fseen+=$(pinned floor)
    all_pinned "$seen" && all_pinned "$fseen" && break
    kill -0 $runner 2>/dev/null || break
    sleep 0.1
done
kill $runner 2>/dev/null; wait $runner 2>/dev/null
if grep -q "cannot be built" "$tmp/pin.err"; then skp $t "testbeds cannot be built here"
elif all_pinned "$seen" && all_pinned "$fseen"; then ok $t
else bad $t "ranks seen as index:CPUs '$(echo $seen | tr ' ' '\n' | sort -u | tr '\n' ' ')', floor clients '$(echo $fseen | tr ' ' '\n' | sort -u | tr '\n' ' ')'; want 0:$want0 and 1:$want1"; fi

t=pin_flags_usage_errors_exit_2
rcs=""
for args in "--pin-hosts maybe --testbed 2" "--pin-hosts on" "--rank-cpu 1" \
    "--rank 0 --workers 2 --switch 127.0.0.1:1 --job j --report-file $tmp/r --rank-cpu x"; do
    timeout 10 $INAGG bench latency $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--pin-hosts\|--rank-cpu" "$tmp/err" || rcs+=" [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "$rcs"

for fabric in bridge inagg; do
t=testbed_latency_reports_the_floor_$fabric
# through the inagg fabric also --switch-poll (the fabric's `inagg switch --l2 --poll`)
sp=(); [ $fabric = inagg ] && sp=(--switch-poll adaptive:300)
timeout 300 $INAGG bench latency --testbed 2 --fabric $fabric --iters 300 --warmup 50 "${sp[@]}" \
    --json - >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 3 ]; then skp $t "testbeds cannot be built here: $(tail -n 1 "$tmp/err")"
elif [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 3 "$tmp/err")"
else
    f50=$(json_get "['floor_us']['p50']" <"$tmp/out")
    f99=$(json_get "['floor_us']['p99']" <"$tmp/out")
    fn=$(json_get "['floor_us']['samples']" <"$tmp/out")
    ratio=$(json_get "['floor_ratio_p50']" <"$tmp/out")
    p50=$(json_get "['latency_us']['p50']" <"$tmp/out")
    spj=$(json_get "['testbed']['switch_poll']" <"$tmp/out")
    pin=$(json_get "['testbed']['pin_hosts']" <"$tmp/out")
    if python3 -c "import sys; f50,f99,n,r,p=map(float,sys.argv[1:]); sys.exit(0 if 0<f50<=f99 and n==600 and abs(r-p/f50)<1e-6*r+1e-9 else 1)" \
            "$f50" "$f99" "$fn" "$ratio" "$p50" && grep -q "floor (UDP) *p50" "$tmp/err" &&
        { [ $fabric = bridge ] || [ "$spj" = adaptive:300 ]; } && [ "$pin" = True ]; then
        ok $t
    else bad $t "floor p50 '$f50' p99 '$f99' samples '$fn' ratio '$ratio' inagg p50 '$p50' switch_poll '$spj' pin_hosts '$pin'"; fi
fi
done
finish
