#!/usr/bin/env bash
# tests/cli_hier.sh - two levels and shards from the command line: the usage errors of
# `inagg switch --upstream` and of `inagg bench allreduce --leaves/--hosts-per-leaf/--shards`;
# verified loopback runs with a spine and two leaves (both protocols, with loss) and with a
# job sharded over two and three switches; and, where testbeds can be built, a two-level
# testbed (2 leaves x 2 hosts) with 1% loss on every link, host links and leaf uplinks,
# int32 verified, and a 3-host testbed with the job over two switches, leaving nothing behind. Every command runs under `timeout`; about a minute.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
json_get() { python3 -c "import json,sys; d=json.load(open(sys.argv[2])); print(eval('d' + sys.argv[1]))" "$1" "$2"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; finish; }

t=switch_upstream_usage_errors_exit_2
rcs=""
for args in "--upstream 127.0.0.1:1" "--leaves 2" "--upstream 127.0.0.1:1 --leaves x" \
    "--upstream 127.0.0.1:1 --leaves 2 --l2 a,b"; do
    timeout 10 $INAGG switch $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs+=" [$args]=$rc"
done
for args in "--upstream nohost --leaves 2" "--upstream 127.0.0.1:1 --leaves 2 --leaf-index 2"; do
    timeout 10 $INAGG switch --listen 127.0.0.1:0 $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q upstream "$tmp/err" || rcs+=" [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit or no message:$rcs"

t=bench_hier_usage_errors_exit_2
rcs=""
for args in "--leaves 2" "--hosts-per-leaf 2" "--leaves 9 --hosts-per-leaf 1" \
    "--leaves 2 --hosts-per-leaf 2 --workers 3" "--testbed 5 --leaves 2 --hosts-per-leaf 2" \
    "--leaves 2 --hosts-per-leaf 2 --shards 2" "--leaves 2 --hosts-per-leaf 2 --compress fp16" \
    "--shards 0" "--shards 9" "--shards 2 --switch 127.0.0.1:1" "--testbed 2 --pin-switches" \
    "--testbed 4 --leaves 2 --hosts-per-leaf 2 --fabric inagg" "--switch-cpu-share 0" \
    "--switch-cpu-share 101" "--testbed 2 --switch-cpu-share 30" \
    "--switch 127.0.0.1:1 --switch-cpu-share 30"; do
    timeout 10 $INAGG bench allreduce $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs+=" [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit or no message:$rcs"

for proto in switchml p4sgd; do
    t=bench_two_levels_loopback_${proto}_lossy_verified
    timeout 120 $INAGG bench allreduce --leaves 2 --hosts-per-leaf 2 --protocol $proto \
        --elems 200000 --dtype int32 --iters 3 --loss 0.01 --json "$tmp/h.json" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(json_get '["verified"]' "$tmp/h.json")" = True ] &&
        [ "$(json_get '["leaves"]' "$tmp/h.json")" = 2 ] && grep -q 'two levels' "$tmp/out"; then
        ok $t
    else
        bad $t "exit $rc: $(tail -n 3 "$tmp/out")"
    fi
done

for k in 2 3; do
    t=bench_shards_${k}_loopback_verified
    timeout 120 $INAGG bench allreduce --shards $k --workers 3 --elems 300000 --dtype int32 \
        --iters 3 --loss 0.01 --json "$tmp/s.json" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(json_get '["verified"]' "$tmp/s.json")" = True ] &&
        [ "$(json_get '["shards"]' "$tmp/s.json")" = $k ] &&
        [ "$(json_get '["switch_cpu_s"].__len__()' "$tmp/s.json")" = $k ]; then
        ok $t
    else
        bad $t "exit $rc: $(tail -n 3 "$tmp/out")"
    fi
done

# --switch-cpu-share: each shard runs in a CPU cgroup of its own with the quota asked for,
# the run verifies, and the groups are gone afterwards
t=bench_shards_cpu_share_capped_and_cleaned
timeout 120 $INAGG bench allreduce --shards 2 --switch-cpu-share 30 --switch-threads 1 \
    --workers 2 --elems 4000000 --dtype int32 --iters 20 --json "$tmp/cap.json" >"$tmp/out" 2>&1 &
bpid=$!
seen=""
ipid=""
for _ in $(seq 1 200); do
    [ -z "$ipid" ] && ipid=$(pgrep -P $bpid | head -n 1)
    for d in /sys/fs/cgroup/inagg-cap-$ipid-1 /sys/fs/cgroup/cpu/inagg-cap-$ipid-1; do
        if [ -z "$seen" ] && [ -d "$d" ] && grep -q . "$d/cgroup.procs"; then
            if [ -f "$d/cpu.max" ]; then seen=$(cat "$d/cpu.max")
            else seen="$(cat "$d/cpu.cfs_quota_us") $(cat "$d/cpu.cfs_period_us")"; fi
        fi
    done
    [ -n "$seen" ] && break
    kill -0 $bpid 2>/dev/null || break
    sleep 0.02
done
wait $bpid
rc=$?
left=$(ls -d /sys/fs/cgroup/inagg-cap-$ipid-* /sys/fs/cgroup/cpu/inagg-cap-$ipid-* 2>/dev/null)
if [ $rc -ne 0 ] && grep -q "no CPU cgroup" "$tmp/out"; then
    skp $t "$(grep -m1 'no CPU cgroup' "$tmp/out")"
elif [ $rc -eq 0 ] && [ "$(json_get '["verified"]' "$tmp/cap.json")" = True ] &&
    [ "$(json_get '["switch_cpu_share_pct"]' "$tmp/cap.json")" = 30 ] &&
    [ "$seen" = "3000 10000" ] && [ -z "$left" ]; then
    ok $t
else
    bad $t "exit $rc, quota seen '$seen' (want '3000 10000'), left behind '$left': $(tail -n 3 "$tmp/out")"
fi

t=testbed_two_levels_lossy_int32_verified
crc=0
tools/testbed check >"$tmp/check" 2>&1 || crc=$?
if [ $crc -ne 0 ]; then
    skp $t "$(tail -n 1 "$tmp/check") (tools/testbed check exit $crc)"
else
    timeout 300 $INAGG bench allreduce --testbed 4 --leaves 2 --hosts-per-leaf 2 \
        --link-rate 200mbit --loss 0.01 --elems 300000 --dtype int32 --iters 2 --warmup 1 \
        --json "$tmp/tb.json" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(json_get '["verified"]' "$tmp/tb.json")" = True ] &&
        [ "$(json_get '["hosts_per_leaf"]' "$tmp/tb.json")" = 2 ]; then
        ok $t
    else
        bad $t "exit $rc: $(tail -n 5 "$tmp/out")"
    fi
    t=testbed_shards_2_int32_verified
    timeout 300 $INAGG bench allreduce --testbed 3 --shards 2 --link-rate 200mbit \
        --elems 300000 --dtype int32 --iters 2 --warmup 1 --json "$tmp/tbs.json" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && [ "$(json_get '["verified"]' "$tmp/tbs.json")" = True ] &&
        [ "$(json_get '["shards"]' "$tmp/tbs.json")" = 2 ]; then
        ok $t
    else
        bad $t "exit $rc: $(tail -n 5 "$tmp/out")"
    fi
    pid_traces=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^inagg-tb-b[0-9]+-l[0-9]+$" |
        while read -r ns; do p=${ns#inagg-tb-b}; p=${p%%-*}; [ -d "/proc/$p" ] || echo "$ns"; done)
    t=testbed_two_levels_leaves_nothing_behind
    [ -z "$pid_traces" ] && ok $t || bad $t "left: $pid_traces"
fi
finish
