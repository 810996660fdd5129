#!/usr/bin/env bash
# tests/cli_mcast.sh - results sent once to a job's multicast group (`inagg switch --multicast`,
# PROTOCOL.md 9.6): bad groups exit 2 naming the flag; a switch whose group cannot leave its
# host, or whose dataplane is not udp, refuses to start and says why; on loopback a p4sgd job
# gets its results from the group (results_multicast > 0) and a job whose ranks do not offer
# it (INAGG_MULTICAST=0) does not, and so does a switchml job whose ranks run one engine
# thread and not one whose ranks run two; through a 2-host bridge testbed `bench latency` multicasts
# by default and not with --switch-multicast off, and so does `bench allreduce` (switchml; the
# switch's counters, printed with $INAGG_BENCH_SWITCH_STATS).
# The testbed part skips, saying why, where testbeds cannot be built (exit 3). Every command
# runs under `timeout`; about 40 seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
sw="" ns=inagg-mcast-$$
trap '[ -n "$sw" ] && kill $sw 2>/dev/null; ip netns del $ns 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; finish; }
port=$((20000 + RANDOM % 20000))
gport=$((port + 100))
# the JSON stats' number for key in the job named $2 (retired or running), else -1
job_stat() {
    python3 -c "
import json, sys
d = json.load(sys.stdin)
for j in d.get('jobs', []) + d.get('retired_jobs', []):
    if j.get('name') == sys.argv[2]:
        print(j.get(sys.argv[1], -1)); break
else:
    print(-1)" "$1" "$2"
}

t=usage_errors_exit_2
rcs=""
for args in "--multicast 10.1.2.3" "--multicast 239.77.0.0:0" "--multicast 240.0.0.0:x" \
    "--multicast nonsense"; do
    timeout 10 $INAGG switch $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--multicast" "$tmp/err" || rcs+=" [$args]=$rc"
done
for args in "--switch-multicast 239.77.0.0" "--testbed 2 --fabric inagg --switch-multicast off" \
    "--testbed 2 --fabric bridge --switch-multicast 10.0.0.1"; do
    timeout 10 $INAGG bench latency $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--switch-multicast" "$tmp/err" || rcs+=" [bench latency $args]=$rc"
done
for args in "--switch-multicast 239.77.0.0" "--testbed 2 --switch-multicast 239.77.0.0" \
    "--testbed 2 --fabric bridge --switch-multicast 10.0.0.1" \
    "--testbed 4 --fabric bridge --shards 2 --switch-multicast 239.77.0.0"; do
    timeout 10 $INAGG bench allreduce $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--switch-multicast" "$tmp/err" || rcs+=" [bench allreduce $args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "$rcs"

t=multicast_needs_the_udp_dataplane
timeout 10 $INAGG switch --listen 127.0.0.1:0 --afpacket lo --multicast 239.77.0.0 \
    >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -ne 0 ] && grep -q "need the udp dataplane" "$tmp/err" && ok $t || bad $t "exit $rc: $(cat "$tmp/err")"

t=unroutable_group_refused_at_start
if ! ip netns add $ns 2>/dev/null; then
    skp $t "cannot make a network namespace here (not root?)"
else
    ip -n $ns link set lo up
    # no route and --listen on any address: a group's datagrams have no way out
    timeout 10 ip netns exec $ns $INAGG switch --listen 0.0.0.0:0 --multicast 239.77.0.0 \
        >/dev/null 2>"$tmp/err"
    rc=$?
    if [ $rc -ne 0 ] && grep -q "cannot leave this host" "$tmp/err" && grep -q "route 224.0.0.0/4" "$tmp/err"
    then ok $t; else bad $t "exit $rc: $(cat "$tmp/err")"; fi
fi

t=loopback_results_multicast_only_when_every_rank_offers
INAGG_LOG=info timeout 60 $INAGG switch --listen 127.0.0.1:$port --multicast 239.77.0.0:$gport \
    >/dev/null 2>"$tmp/sw.err" &
sw=$!
for _ in $(seq 1 50); do $INAGG switch --stats 127.0.0.1:$port >/dev/null 2>&1 && break; sleep 0.1; done
why=""
for mode in on off; do
    env=(); [ $mode = off ] && env=(INAGG_MULTICAST=0)
    if ! env "${env[@]}" timeout 60 $INAGG bench latency --switch 127.0.0.1:$port --workers 3 \
            --iters 300 --warmup 20 --json "$tmp/lat_$mode.json" >/dev/null 2>"$tmp/lat.err"; then
        why+=" [$mode: bench failed: $(tail -n 2 "$tmp/lat.err")]"
    fi
done
$INAGG switch --stats 127.0.0.1:$port --json >"$tmp/stats.json" 2>/dev/null
names=$(python3 -c "
import json; d = json.load(open('$tmp/stats.json'))
print(' '.join(j['name'] for j in d.get('jobs', []) + d.get('retired_jobs', [])))")
set -- $names
if [ $# -ne 2 ]; then why+=" [jobs '$names', expected two]"
else
    on=$(job_stat results_multicast "$1" <"$tmp/stats.json")
    off=$(job_stat results_multicast "$2" <"$tmp/stats.json")
    rounds_on=$(job_stat rounds "$1" <"$tmp/stats.json")
    sent_off=$(job_stat results_sent "$2" <"$tmp/stats.json")
    rounds_off=$(job_stat rounds "$2" <"$tmp/stats.json")
    [ "$on" -gt 0 ] && [ "$on" -le "$rounds_on" ] 2>/dev/null ||
        why+=" [offered: results_multicast '$on' of '$rounds_on' rounds]"
    [ "$off" = 0 ] && [ "$sent_off" -ge $((3 * rounds_off)) ] 2>/dev/null ||
        why+=" [declined: results_multicast '$off', results_sent '$sent_off' for '$rounds_off' rounds]"
fi
grep -q "multicast group 239.77.0.1:$gport" "$tmp/sw.err" || why+=" [no log line naming the group]"
kill $sw 2>/dev/null; wait $sw 2>/dev/null >/dev/null; sw=""
[ -z "$why" ] && ok $t || bad $t "$why"

t=loopback_switchml_results_multicast_with_one_engine
port2=$((port + 1)) gport2=$((gport + 1))
timeout 60 $INAGG switch --listen 127.0.0.1:$port2 --multicast 239.77.0.0:$gport2 \
    >/dev/null 2>"$tmp/sw2.err" &
sw=$!
for _ in $(seq 1 50); do $INAGG switch --stats 127.0.0.1:$port2 >/dev/null 2>&1 && break; sleep 0.1; done
why=""
for threads in 1 2; do # two engine threads: the ranks do not offer the group
    if ! timeout 60 $INAGG bench allreduce --switch 127.0.0.1:$port2 --workers 3 --elems 100000 \
            --dtype int32 --iters 3 --threads $threads --json "$tmp/ar_$threads.json" \
            >/dev/null 2>"$tmp/ar.err"; then
        why+=" [threads $threads: bench failed: $(tail -n 2 "$tmp/ar.err")]"
    fi
done
$INAGG switch --stats 127.0.0.1:$port2 --json >"$tmp/stats2.json" 2>/dev/null
names=$(python3 -c "
import json; d = json.load(open('$tmp/stats2.json'))
print(' '.join(j['name'] for j in d.get('jobs', []) + d.get('retired_jobs', [])))")
set -- $names
if [ $# -ne 2 ]; then why+=" [jobs '$names', expected two]"
else
    one=$(job_stat results_multicast "$1" <"$tmp/stats2.json")
    rounds_one=$(job_stat rounds "$1" <"$tmp/stats2.json")
    two=$(job_stat results_multicast "$2" <"$tmp/stats2.json")
    [ "$one" -gt 0 ] && [ "$one" -le "$rounds_one" ] 2>/dev/null ||
        why+=" [one engine: results_multicast '$one' of '$rounds_one' rounds]"
    [ "$two" = 0 ] || why+=" [two engines: results_multicast '$two']"
fi
kill $sw 2>/dev/null; wait $sw 2>/dev/null >/dev/null; sw=""
[ -z "$why" ] && ok $t || bad $t "$why"

for mode in default off; do
t=testbed_bridge_allreduce_multicast_$mode
mc=(); [ $mode = off ] && mc=(--switch-multicast off)
INAGG_BENCH_SWITCH_STATS=1 timeout 300 $INAGG bench allreduce --testbed 2 --fabric bridge \
    --elems 100000 --dtype int32 --iters 2 "${mc[@]}" --json "$tmp/ar.json" >/dev/null 2>"$tmp/ar.err"
rc=$?
if [ $rc -eq 3 ]; then skp $t "testbeds cannot be built here: $(tail -n 1 "$tmp/ar.err")"
elif [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 3 "$tmp/ar.err")"
else
    n=$(grep -o "results_multicast=[0-9]*" "$tmp/ar.err" | head -n 1 | cut -d= -f2)
    said=$(python3 -c "import json; print(json.load(open('$tmp/ar.json'))['testbed']['switch_multicast'])")
    if [ $mode = default ] && [ "${n:-0}" -gt 0 ] && [ "$said" = 239.77.0.0 ]; then ok $t
    elif [ $mode = off ] && [ "$n" = 0 ] && [ "$said" = off ]; then ok $t
    else bad $t "results_multicast '$n', switch_multicast '$said': $(grep -i "retired\|counters" "$tmp/ar.err")"; fi
fi
done

for mode in default off; do
t=testbed_bridge_multicast_$mode
mc=(); [ $mode = off ] && mc=(--switch-multicast off)
INAGG_BENCH_SWITCH_STATS=1 timeout 300 $INAGG bench latency --testbed 2 --fabric bridge \
    --iters 300 --warmup 20 "${mc[@]}" --json "$tmp/tb.json" >/dev/null 2>"$tmp/tb.err"
rc=$?
if [ $rc -eq 3 ]; then skp $t "testbeds cannot be built here: $(tail -n 1 "$tmp/tb.err")"
elif [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 3 "$tmp/tb.err")"
else
    n=$(grep -o "results_multicast=[0-9]*" "$tmp/tb.err" | head -n 1 | cut -d= -f2)
    said=$(python3 -c "import json; print(json.load(open('$tmp/tb.json'))['testbed']['switch_multicast'])")
    if [ $mode = default ] && [ "${n:-0}" -gt 0 ] && [ "$said" = 239.77.0.0 ]; then ok $t
    elif [ $mode = off ] && [ "$n" = 0 ] && [ "$said" = off ]; then ok $t
    else bad $t "results_multicast '$n', switch_multicast '$said': $(grep -i "retired\|counters" "$tmp/tb.err")"; fi
fi
done
finish
