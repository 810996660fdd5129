#!/usr/bin/env bash
# tests/testbed.sh - the multi-host testbed (tools/testbed): builds testbeds of 2-3 host
# namespaces behind a switch namespace, aggregates through `inagg switch` in the switch
# namespace with verified results (and Open MPI and Gloo across the same namespaces when they
# are installed), checks loss, coexistence, and that `down` leaves no namespace, veth, qdisc,
# nftables table, mount or process behind, also after a run killed with SIGKILL and after an
# interrupted `up`. Skips, saying why, where network namespaces cannot be made (not root, a
# container without CAP_SYS_ADMIN). Every command runs under `timeout`; about a minute.
set -uo pipefail
cd "$(dirname "$0")/.."
TB=tools/testbed
RUN=bench/testbed_run.py
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
json_get() { python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(eval('d' + sys.argv[1]))" "$1"; }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
base=t$$                   # testbed names of this run: ${base}a, ${base}b, ...
base=${base:0:10}
A=${base}a B=${base}b C=${base}c D=${base}d E=${base}e
cleanup() {
    for n in $A $B $C $D $E; do timeout 30 $TB down "$n" >/dev/null 2>&1; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# What a testbed NAME may leave behind, one line per thing (empty: nothing). Compared with the
# machine's own namespace as it was before this test ($tmp/root.*).
snapshot() {
    ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort >"$tmp/root.$1.links"
    tc qdisc show | sort >"$tmp/root.$1.qdisc"
    nft list tables 2>/dev/null | sort >"$tmp/root.$1.nft"
}
leftovers() { # NAME
    local n=$1
    ip netns list | awk '{print $1}' | grep -E "^inagg-tb-$n-" | sed 's/^/netns /'
    local p
    for p in $(ip netns list | awk '{print $1}' | grep -E '^inagg-tb-probe[0-9]+$'); do
        [ -d "/proc/${p#inagg-tb-probe}" ] || echo "netns $p (a probe whose tools/testbed is gone)"
    done
    [ ! -e "/run/inagg-testbed/$n" ] || echo "state /run/inagg-testbed/$n"
    grep -F "/run/inagg-testbed/$n/" /proc/mounts | sed 's/^/mount /'
    nft list tables 2>/dev/null | grep -F "inagg_tb_$n" | sed 's/^/nft /'
    snapshot now
    comm -13 "$tmp/root.before.links" "$tmp/root.now.links" | sed 's/^/link in the root namespace /'
    comm -13 "$tmp/root.before.qdisc" "$tmp/root.now.qdisc" | sed 's/^/qdisc in the root namespace /'
    comm -13 "$tmp/root.before.nft" "$tmp/root.now.nft" | sed 's/^/nft table in the root namespace /'
}

t=help_and_usage_errors
rcs=""
timeout 5 $TB --help | grep -c >/dev/null "tools/testbed up N" || rcs+=" [--help]"
for args in "" "up" "up 0" "up 2 --name Bad!" "up 2 --mtu 100" "up 2 --link-rate fast" \
    "up 2 --loss 2" "bogus"; do
    timeout 10 $TB $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || [ $rc -eq 3 ] || rcs+=" [$args]=$rc"
    [ -s "$tmp/err" ] || rcs+=" [$args: no message]"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=not_root_gives_a_clear_error
if [ "$(id -u)" != 0 ]; then
    timeout 10 $TB up 2 --name $A >/dev/null 2>"$tmp/err"
    rc=$?
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups bash $TB up 2 --name $A >/dev/null 2>"$tmp/err"
    rc=$?
else
    rc=skip
fi
if [ "$rc" = skip ]; then skp $t "cannot drop privileges here (setpriv)"
elif [ "$rc" = 3 ] && grep -q "needs root" "$tmp/err"; then ok $t
else bad $t "exit $rc: $(cat "$tmp/err")"; fi

# Can testbeds be built here at all? If not, say why and skip the rest.
if ! timeout 20 $TB check >"$tmp/check" 2>&1; then
    echo "skip    testbed: $(tail -n 1 "$tmp/check")"
    skip=$((skip + 1))
    finish
fi
command -v nft >/dev/null || { echo "skip    testbed: nftables is not installed (apt-get install nftables)"; skip=$((skip + 1)); finish; }
if [ ! -x build/inagg ] || [ ! -f build/libinagg.a ]; then make -s -j2 >/dev/null || { bad build "make failed"; finish; }; fi
snapshot before

t=up_builds_hosts_links_and_rate_limits
json=$(timeout 30 $TB up 3 --name $A --link-rate 200mbit --mtu 9000 --json 2>"$tmp/err")
if [ $? -ne 0 ]; then bad $t "$(cat "$tmp/err")"; else
    why=""
    [ "$(echo "$json" | json_get "['mtu']")" = 9000 ] || why+=" mtu"
    [ "$(echo "$json" | json_get "['link_rate_bps']")" = 200000000 ] || why+=" rate"
    names=""
    for h in h1 h2 h3; do names+="$(timeout 10 $TB exec $A $h -- hostname) "; done
    [ "$names" = "tb-$A-h1 tb-$A-h2 tb-$A-h3 " ] || why+=" hostnames [$names]"
    timeout 10 $TB exec $A h2 -- tc qdisc show dev tb0 | grep -c >/dev/null "tbf.*rate 200Mbit" || why+=" host-side tbf"
    timeout 10 $TB exec $A sw -- tc qdisc show dev p2 | grep -c >/dev/null "tbf.*rate 200Mbit" || why+=" switch-side tbf"
    timeout 10 $TB exec $A h1 -- ip -o addr show dev tb0 | grep -c >/dev/null "$(echo "$json" | json_get "['hosts'][0]['addr']")/24" || why+=" address"
    ip -o addr show | grep -c >/dev/null "$(echo "$json" | json_get "['subnet']" | cut -d/ -f1 | sed 's/\.0$/./')" && why+=" subnet visible in the root namespace"
    [ -z "$why" ] && ok $t || bad $t "wrong:$why"
fi

t=aggregates_through_the_switch_namespace
timeout 10 $TB stats $A --json >"$tmp/s0" 2>/dev/null
i32=$(timeout 120 $RUN --testbed $A --system inagg --elems 300000 --iters 2 --dtype int32 2>"$tmp/err")
rc1=$?
f32=$(timeout 120 $RUN --testbed $A --system inagg --elems 300000 --iters 2 --dtype float32 2>>"$tmp/err")
rc2=$?
timeout 10 $TB stats $A --json >"$tmp/s1" 2>/dev/null
crossed=$(python3 - "$tmp/s0" "$tmp/s1" <<'EOF'
import json, sys
a, b = (json.load(open(p))["links"] for p in sys.argv[1:3])
# every host sent and received at least its tensors (2 runs x 3 iterations x 1.2 MB) on its link
need = 2 * 3 * 300000 * 4
print(all(y["up_bytes"] - x["up_bytes"] >= need and y["down_bytes"] - x["down_bytes"] >= need
          for x, y in zip(a, b)))
EOF
)
if [ $rc1 -ne 0 ] || [ $rc2 -ne 0 ]; then bad $t "$(tail -n 3 "$tmp/err") $i32 $f32"
elif [ "$(echo "$i32" | json_get "['verified']")" != True ] || [ "$(echo "$f32" | json_get "['verified']")" != True ]; then bad $t "not verified: $i32 $f32"
elif [ "$crossed" != True ]; then bad $t "the tensors did not cross every link both ways"
else ok $t; fi
lossless_sum=$(echo "$i32" | json_get "['checksum']" 2>/dev/null)

t=loss_rules_drop_and_int32_stays_bit_identical
if timeout 10 $TB loss $A 5% >/dev/null 2>"$tmp/err"; then
    out=$(timeout 120 $RUN --testbed $A --system inagg --elems 300000 --iters 2 --dtype int32 2>"$tmp/err")
    rc=$?
    drops=$(timeout 10 $TB stats $A --json | json_get "['loss_drops']")
    timeout 10 $TB loss $A 0 >/dev/null
    if [ $rc -ne 0 ] || [ "$(echo "$out" | json_get "['verified']")" != True ]; then bad $t "$(tail -n 3 "$tmp/err") $out"
    elif [ "$(echo "$out" | json_get "['checksum']")" != "$lossless_sum" ]; then bad $t "checksum differs from the lossless run"
    elif [ "${drops:-0}" -le 0 ] || [ "$(echo "$out" | json_get "['retransmissions']")" -le 0 ]; then bad $t "no frame was dropped ($drops)"
    else ok $t; fi
else bad $t "tools/testbed loss failed: $(cat "$tmp/err")"; fi

t=mpi_across_namespaces
if ! command -v mpirun >/dev/null || [ ! -x build/inagg-mpi-bench ]; then skp $t "Open MPI is not installed"; else
    out=$(timeout 120 $RUN --testbed $A --system mpi-ring --elems 300000 --iters 2 2>"$tmp/err")
    [ $? -eq 0 ] && [ "$(echo "$out" | json_get "['verified']")" = True ] && ok $t || bad $t "$(tail -n 3 "$tmp/err") $out"
fi

t=gloo_across_namespaces
if ! /usr/bin/python3 -c "import torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null; then skp $t "python3-torch with Gloo is not installed"; else
    out=$(timeout 150 $RUN --testbed $A --system gloo --elems 300000 --iters 2 2>"$tmp/err")
    [ $? -eq 0 ] && [ "$(echo "$out" | json_get "['verified']")" = True ] && ok $t || bad $t "$(tail -n 3 "$tmp/err") $out"
fi

t=two_testbeds_coexist
if out=$(timeout 30 $TB up 2 --name $B --json 2>"$tmp/err"); then
    sa=$(timeout 10 $TB show $A --json | json_get "['subnet']")
    sb=$(echo "$out" | json_get "['subnet']")
    timeout 30 $TB down $B
    still=$(ip netns list | grep -c "^inagg-tb-$A-")
    if [ "$sa" = "$sb" ]; then bad $t "both use $sa"
    elif [ "$still" != 4 ]; then bad $t "down $B touched $A ($still of its 4 namespaces left)"
    elif [ -n "$(leftovers $B)" ]; then bad $t "down $B left: $(leftovers $B | tr '\n' ';')"
    else ok $t; fi
else bad $t "$(cat "$tmp/err")"; fi

t=down_leaves_nothing
timeout 30 $TB down $A
left=$(leftovers $A)
[ -z "$left" ] && ok $t || bad $t "$(echo "$left" | tr '\n' ';')"

t=down_after_a_killed_run_leaves_nothing
if timeout 30 $TB up 2 --name $C --link-rate 20mbit --loss 1% >/dev/null 2>"$tmp/err"; then
    # a run of many seconds at 20 Mbit/s, killed with SIGKILL while its ranks are busy
    setsid $RUN --testbed $C --system inagg --elems 4000000 --iters 5 >/dev/null 2>&1 &
    runner=$!
    busy=0
    for _ in $(seq 1 100); do
        [ "$(ip netns pids inagg-tb-$C-h2 2>/dev/null | wc -l)" -gt 0 ] &&
            [ "$(ip netns pids inagg-tb-$C-sw 2>/dev/null | wc -l)" -gt 0 ] && { busy=1; break; }
        sleep 0.1
    done
    sleep 1
    kill -9 $runner 2>/dev/null
    wait $runner 2>/dev/null
    orphans=$(for ns in sw h1 h2; do ip netns pids inagg-tb-$C-$ns; done 2>/dev/null | sort -u)
    timeout 60 $TB down $C
    alive=""
    for p in $orphans; do # a zombie (not yet reaped by pid 1) is dead
        st=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
        [ -n "$st" ] && [ "$st" != Z ] && alive+=" $p:$(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-60)"
    done
    left=$(leftovers $C)
    if [ $busy != 1 ]; then bad $t "the run never started its switch and ranks"
    elif [ -z "$orphans" ]; then bad $t "the killed run left no process to clean up (test did not test)"
    elif [ -n "$alive" ]; then bad $t "processes of the killed run still alive:$alive"
    elif [ -n "$left" ]; then bad $t "$(echo "$left" | tr '\n' ';')"
    else ok $t; fi
else bad $t "$(cat "$tmp/err")"; fi

t=interrupted_up_leaves_nothing
timeout 60 $TB up 24 --name $D >/dev/null 2>&1 &
uppid=$!
sleep 0.5
kill -TERM $uppid 2>/dev/null
wait $uppid
rc=$?
if [ $rc = 0 ]; then
    timeout 30 $TB down $D
    skp $t "up finished before the signal"
else
    left=$(leftovers $D)
    [ -z "$left" ] && ok $t || bad $t "exit $rc, left: $(echo "$left" | tr '\n' ';')"
fi

t=down_removes_leftovers_by_prefix
ip netns add inagg-tb-$E-h1 && ip netns add inagg-tb-$E-sw
timeout 10 $TB list | grep -c >/dev/null "leftover namespaces of '$E'" || lst=no
timeout 30 $TB down $E
left=$(leftovers $E)
if [ "${lst:-}" = no ]; then bad $t "list did not report the leftovers"
elif [ -n "$left" ]; then bad $t "$(echo "$left" | tr '\n' ';')"
else ok $t; fi

finish
