#!/usr/bin/env bash
# tests/cli_l2fabric.sh - `inagg switch --l2`, the L2 forwarding and aggregating fabric, in
# network namespaces this test creates (three hosts on veths to a switch namespace): usage
# errors; MAC learning and flooding; ageing; ping and a TCP stream through the fabric; an
# allreduce aggregated in the fabric with verified results; aggregation ports and the add
# mode changed while it runs (FABRIC control lines); malformed and foreign frames
# forwarded or counted and dropped; the per-port link delay seen by ping (300us, and 25us
# against a fabric without delay); --xdp on refused and auto falling back on a port
# without XDP. INAGG_FABRIC_XDP=on|auto|off (default off) is the fabric's --xdp for every
# case; with it on, the fast path's frames are seen arriving through AF_XDP. Skips, saying
# why, where network namespaces cannot be made. Every command runs under `timeout`; about
# 90 seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=${INAGG:-build/inagg}  # INAGG=build-san/inagg runs it under the sanitizers
PY=/usr/bin/python3
XDP=${INAGG_FABRIC_XDP:-off}
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
P=inagg-l2t$$
P=${P:0:16}
SUB=10.78.$(( $$ % 200 + 20 ))
SW_IP=$SUB.254
swpid=""
cleanup() {
    [ -n "$swpid" ] && kill "$swpid" 2>/dev/null && wait "$swpid" 2>/dev/null
    for n in sw h1 h2 h3 nx; do ip netns del "$P-$n" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t=usage_errors
rcs=""
for args in "--l2 p1 --listen 127.0.0.1:7000" "--l2 p1 --listen 10.0.0.1:0" \
    "--link-delay 25us" "--l2 p1,p1 --l2-ip 10.0.0.1" "--l2 p1 --l2-ip 10.0.0.1 --link-delay 25parsecs" \
    "--l2 p1 --l2-ip 10.0.0.1 --link-delay nope=25us" "--l2 p1 --l2-ip 300.0.0.1" \
    "--l2 p1 --l2-ip 10.0.0.1 --l2-mac 01:00:00:00:00:01" "--l2 no-such-if0 --l2-ip 10.0.0.1" \
    "--link-loss 0.1" "--loss-seed 3" "--l2 lo --l2-ip 10.0.0.1 --link-loss 1.5" \
    "--l2 lo --l2-ip 10.0.0.1 --link-loss lo=often" "--l2 lo --l2-ip 10.0.0.1 --loss-seed -1" \
    "--l2 lo --l2-ip 10.0.0.1 --fabric-threads 3" "--fabric-threads 2" "--aggregation-threads" \
    "--l2 lo --l2-ip 10.0.0.1 --agg-ports p7" "--l2 lo --l2-ip 10.0.0.1 --add-mode double" \
    "--l2 lo --l2-ip 10.0.0.1 --roce-result-buffer 4x" "--l2 lo --l2-ip 10.0.0.1 --roce-result-buffer 0x8" \
    "--l2 lo --l2-ip 10.0.0.1 --roce-result-buffer 1000x1000" "--roce-result-buffer 4x128" \
    "--xdp on" "--l2 lo --l2-ip 10.0.0.1 --xdp maybe"; do
    timeout 10 $INAGG switch $args >/dev/null 2>"$tmp/err"
    rc=$?
    { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } || rcs+=" [$args]=$rc"
    [ -s "$tmp/err" ] || rcs+=" [$args: no message]"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=fabric_ctl_on_a_switch_without_fabric
timeout 20 $INAGG switch --listen 127.0.0.1:0 --ready-fd 3 3>"$tmp/port" >/dev/null 2>&1 &
plain=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
out=$(timeout 10 $INAGG switch --fabric-ctl 127.0.0.1:$(cat "$tmp/port") --add-mode fixed 2>&1); rc=$?
kill $plain 2>/dev/null; wait $plain 2>/dev/null
{ [ $rc -eq 1 ] && grep -q "without an L2 fabric" <<<"$out"; } && ok $t || bad $t "exit $rc: $out"

# Can namespaces be built here?
if [ "$(id -u)" != 0 ] || ! ip netns add "$P-sw" 2>"$tmp/err"; then
    skp namespaces "cannot create network namespaces here (root and CAP_SYS_ADMIN needed): $(cat "$tmp/err" 2>/dev/null)"
    finish
fi
up() {
    ip netns exec "$P-sw" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
    ip -n "$P-sw" link set lo up
    for i in 1 2 3; do
        ip netns add "$P-h$i" &&
        ip -n "$P-sw" link add p$i mtu 9000 type veth peer name tb0 netns "$P-h$i" &&
        ip -n "$P-sw" link set p$i up &&
        ip netns exec "$P-h$i" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 &&
        ip -n "$P-h$i" link set tb0 mtu 9000 &&
        ip -n "$P-h$i" addr add $SUB.$i/24 dev tb0 &&
        ip -n "$P-h$i" link set tb0 up && ip -n "$P-h$i" link set lo up || return 1
    done
}
if ! up 2>"$tmp/err"; then
    skp namespaces "cannot build veths between namespaces: $(cat "$tmp/err")"
    finish
fi
inh() { local h=$1; shift; timeout 30 ip netns exec "$P-$h" "$@"; }

start_switch() { # extra args
    [ -n "$swpid" ] && kill "$swpid" 2>/dev/null && wait "$swpid" 2>/dev/null
    ip netns exec "$P-sw" timeout 600 $INAGG switch --l2 p1,p2,p3 --listen $SW_IP:7000 \
        --threads 2 --xdp "$XDP" "$@" >"$tmp/sw.out" 2>"$tmp/sw.err" &
    swpid=$!
    for _ in $(seq 50); do
        inh sw $INAGG switch --stats $SW_IP:7000 >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "switch did not come up: $(cat "$tmp/sw.err")"
    return 1
}
# One allreduce job of three ranks, one per host, through the switch: JOB ELEMS DTYPE ITERS
# OUT SUFFIX; rank r's JSON goes to OUT<r>SUFFIX. Waits for the ranks' own pids (`jobs -p` in
# a pipeline may see an empty job table).
allreduce3() {
    local job=$1 elems=$2 dt=$3 iters=$4 out=$5 sfx=${6:-} pkt=${7:-2048} r ranks=""
    for r in 0 1 2; do
        inh h$((r + 1)) $INAGG bench allreduce --switch $SW_IP:7000 --rank $r --world 3 \
            --job "$job" --elems "$elems" --packet-elems "$pkt" --dtype "$dt" --iters "$iters" \
            --rto-min-us 20000 >"$out$r$sfx" 2>&1 &
        ranks+=" $!"
    done
    wait $ranks
}
stats() { inh sw $INAGG switch --stats $SW_IP:7000 --json; }
# fabric counter K of the last stats (or a python expression on d)
fget() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); f=d['fabric']; print(eval(sys.argv[2]))" "$tmp/st.json" "$1"; }

t=xdp_on_refused_and_auto_falls_back_without_xdp
# a bridge device has no native XDP: --xdp on names the cause and exits; auto logs one line
# and the port receives through AF_PACKET (its own namespace, so no other fabric is near)
why=""
if ip netns add "$P-nx" && ip -n "$P-nx" link set lo up &&
    ip -n "$P-nx" link add brx type bridge && ip -n "$P-nx" link set brx up; then
    ip netns exec "$P-nx" timeout 10 $INAGG switch --l2 brx --listen $SUB.250:7000 --xdp on \
        >/dev/null 2>"$tmp/xon.err"
    rc=$?
    { [ $rc -eq 1 ] && grep -q "port brx: --xdp on: no XDP support on brx: " "$tmp/xon.err"; } ||
        why+=" [--xdp on: exit $rc: $(head -c 200 "$tmp/xon.err")]"
    ip netns exec "$P-nx" timeout 60 $INAGG switch --l2 brx --listen $SUB.250:7000 --xdp auto \
        >/dev/null 2>"$tmp/xauto.err" &
    xpid=$!
    for _ in $(seq 50); do
        timeout 5 ip netns exec "$P-nx" $INAGG switch --stats $SUB.250:7000 >"$tmp/xauto.st" 2>&1 && break
        sleep 0.1
    done
    kill $xpid 2>/dev/null; wait $xpid 2>/dev/null
    [ "$(grep -c "fabric: port brx receives through AF_PACKET: no XDP support on brx: " "$tmp/xauto.err")" = 1 ] ||
        why+=" [--xdp auto: no one log line: $(head -c 200 "$tmp/xauto.err")]"
    grep -q "^fabric port brx path: af_packet (no XDP support on brx: " "$tmp/xauto.st" ||
        why+=" [--xdp auto: stats: $(grep path "$tmp/xauto.st")]"
else
    why="cannot build a bridge in a namespace"
fi
[ -z "$why" ] && ok $t || bad $t "$why"

t=switch_starts_and_answers_on_its_address
if start_switch --mac-age 400 >"$tmp/why"; then ok $t; else bad $t "$(cat "$tmp/why")"; finish; fi

t=ping_learning_and_flooding
if inh h1 ping -c 3 -i 0.2 -W 2 -q $SUB.2 >"$tmp/ping" 2>&1 && stats >"$tmp/st.json"; then
    learned=$(fget "f['mac_learned']")
    flooded=$(fget "f['flooded']")
    fwd=$(fget "f['forwarded']")
    p3tx=$(fget "[p['tx'] for p in f['ports'] if p['name']=='p3'][0]")
    if [ "$learned" -ge 2 ] && [ "$flooded" -ge 1 ] && [ "$fwd" -ge 4 ] && [ "$p3tx" -ge 1 ]; then ok $t
    else bad $t "learned=$learned flooded=$flooded forwarded=$fwd p3_tx=$p3tx"; fi
else bad $t "ping failed: $(cat "$tmp/ping")"; fi

t=ping_the_switch_itself
inh h3 ping -c 2 -i 0.2 -W 2 -q $SW_IP >"$tmp/ping" 2>&1 && ok $t || bad $t "$(cat "$tmp/ping")"

t=mac_ageing
# h1 keeps h2's ARP entry, so its next ping goes unicast to a MAC the fabric has forgotten
stats >"$tmp/st.json"; before=$(fget "f['unknown_flooded']"); aged0=$(fget "f['mac_aged']")
sleep 0.6
inh h1 ping -c 1 -W 2 -q $SUB.2 >/dev/null 2>&1
stats >"$tmp/st.json"; after=$(fget "f['unknown_flooded']"); aged1=$(fget "f['mac_aged']")
if [ "$after" -gt "$before" ] && [ "$aged1" -gt "$aged0" ]; then ok $t
else bad $t "unknown_flooded $before -> $after, mac_aged $aged0 -> $aged1"; fi

t=tcp_stream_through_the_fabric
inh h2 $PY tests/l2_frames.py sink 5001 20000000 >"$tmp/sink" 2>&1 &
sinkpid=$!
sleep 0.5
inh h1 $PY tests/l2_frames.py source $SUB.2 5001 20000000 >"$tmp/source" 2>&1
wait $sinkpid
if [ -s "$tmp/sink" ] && [ "$(cat "$tmp/sink")" = "$(cat "$tmp/source")" ]; then ok $t
else bad $t "sink '$(cat "$tmp/sink")' source '$(cat "$tmp/source")'"; fi

t=allreduce_aggregated_in_the_fabric
for dt in int32 float32; do
    allreduce3 t$dt 50000 $dt 3 "$tmp/r" .$dt
done
stats >"$tmp/st.json"
nver=$(cat "$tmp"/r*.int32 "$tmp"/r*.float32 | grep -c '"verified":true')
aggin=$(fget "f['agg_in']"); aggout=$(fget "f['agg_out']")
pin=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['packets_in'])" "$tmp/st.json" 2>/dev/null || echo 0)
where=$(fget "f['aggregation']")
# a rank's results of a pass leave its port as one UDP GSO super-frame (tx_gso)
txgso=$(fget "sum(p['tx_gso'] for p in f['ports'])")
if [ "$nver" -eq 6 ] && [ "$aggin" -gt 0 ] && [ "$aggout" -gt 0 ] && [ "$pin" -ge "$aggin" ] &&
    [ "$where" = inline ] && [ "$txgso" -gt 0 ]; then ok $t
else bad $t "verified ranks $nver/6, agg_in=$aggin agg_out=$aggout switch packets_in=$pin aggregation=$where tx_gso=$txgso: $(head -c 300 "$tmp/r0.int32")"; fi

t=udp_gso_contributions_cut_into_aggregation_frames
# INAGG_UDP_GSO=1: a worker hands the kernel runs of same-size datagrams as one UDP_SEGMENT
# send, which veth delivers to the fabric's port as one frame; the fabric cuts it into its
# datagrams for the aggregation (agg_gso_frames), and every result verifies (with AF_XDP on
# the ports, veth cuts GSO sends itself before the XDP program: only the results are checked)
g0=$(fget "f['agg_gso_frames']")
INAGG_UDP_GSO=1 allreduce3 tg 200000 int32 3 "$tmp/g" .int32 1024
stats >"$tmp/st.json"
nver=$(cat "$tmp"/g?.int32 | grep -c '"verified":true')
gso=$(( $(fget "f['agg_gso_frames']") - g0 ))
if [ "$nver" -eq 3 ] && { [ "$XDP" = on ] || [ "$gso" -gt 0 ]; }; then ok $t
else bad $t "verified $nver/3 agg_gso_frames=$gso: $(head -c 300 "$tmp/g0.int32")"; fi

t=fast_path_frames_arrive_through_af_xdp
# INAGG_FABRIC_XDP=on: every port receives through AF_XDP, and frames that fit a UMEM chunk
# (--packet-elems 512: 2 KiB datagrams) are steered there (redirected), results verified;
# the 8 KiB datagrams above were larger than a chunk and went to AF_PACKET (too_big)
if [ "$XDP" = on ]; then
    xsum() { fget "sum(p.get('$1', 0) for p in f['port_paths'])"; }
    paths=$(fget "','.join(sorted(set(p['path'] for p in f['port_paths'])))")
    big=$(xsum too_big); red0=$(xsum redirected); in0=$(fget "f['agg_in']")
    allreduce3 tx 50000 int32 3 "$tmp/x" .int32 512
    stats >"$tmp/st.json"
    nver=$(cat "$tmp"/x?.int32 | grep -c '"verified":true')
    red=$(( $(xsum redirected) - red0 )); aggin=$(( $(fget "f['agg_in']") - in0 ))
    if [ "$paths" = af_xdp ] && [ "$nver" -eq 3 ] && [ "$aggin" -gt 0 ] && [ "$red" -ge "$aggin" ] &&
        [ "$big" -gt 0 ]; then ok $t
    else bad $t "paths=$paths verified $nver/3 redirected=$red agg_in=$aggin too_big=$big: $(head -c 300 "$tmp/x0.int32")"; fi
fi

t=aggregation_on_dataplane_threads
# --aggregation-threads: the slot protocols on the switch's own threads, fed by queues (the
# default runs them on the fabric's receive thread); both dtypes still verify
if start_switch --aggregation-threads >"$tmp/why"; then
    for dt in int32 float32; do
        allreduce3 d$dt 50000 $dt 2 "$tmp/d" .$dt
    done
    stats >"$tmp/st.json"
    nver=$(cat "$tmp"/d?.int32 "$tmp"/d?.float32 | grep -c '"verified":true')
    where=$(fget "f['aggregation']")
    grep -q "^fabric aggregation: threads" <<<"$(inh sw $INAGG switch --stats $SW_IP:7000)" || where+=" (no text line)"
    if [ "$nver" -eq 6 ] && [ "$where" = threads ]; then ok $t
    else bad $t "verified ranks $nver/6, aggregation=$where: $(head -c 300 "$tmp/d0.int32")"; fi
else bad $t "$(cat "$tmp/why")"; fi

t=agg_ports_and_add_mode_change_while_running
# FABRIC lines on the running switch's control port (inagg switch --fabric-ctl): a host may
# ask for the settings but not change them; from the switch's own namespace p3 stops
# aggregating (a job whose ranks sit on h3 then gets nothing aggregated: its frames are
# counted agg_port_off and dropped, and it fails within its timeout) while h1 and h2 still
# aggregate; add=float stops int32 contributions (agg_add_off) and lets native float32 pass.
job() { # NAME DTYPE HOST0 HOST1 [extra args]: prints how many ranks verified
    local name=$1 dt=$2 h0=$3 h1=$4 pids="" r=0
    shift 4
    for h in $h0 $h1; do
        inh $h $INAGG bench allreduce --switch $SW_IP:7000 --rank $r --world 2 --job $name \
            --elems 20000 --packet-elems 2048 --dtype $dt --iters 2 --rto-min-us 20000 \
            --timeout-ms 3000 "$@" >"$tmp/j$name$r" 2>&1 &
        pids+=" $!"; r=$((r + 1))
    done
    wait $pids
    cat "$tmp/j${name}0" "$tmp/j${name}1" | grep -c '"verified":true'
}
why=""
ctl() { local h=$1; shift; inh $h $INAGG switch --fabric-ctl $SW_IP:7000 "$@" 2>&1; }
out=$(ctl h1); [ "$out" = "FABRIC_STATE agg_ports=all add=any" ] || why+=" [query from h1: $out]"
out=$(ctl h1 --agg-ports p1); rc=$?
{ [ $rc -eq 1 ] && grep -q "own host" <<<"$out"; } || why+=" [change from h1 not refused: $rc $out]"
out=$(ctl sw --agg-ports p9); rc=$?
{ [ $rc -eq 1 ] && grep -q "not one of" <<<"$out"; } || why+=" [unknown port: $rc $out]"
out=$(ctl sw --add-mode double); [ $? -eq 2 ] || why+=" [bad add mode accepted: $out]"
out=$(ctl sw --agg-ports p1,p2); [ "$out" = "FABRIC_STATE agg_ports=p1,p2 add=any" ] || why+=" [set: $out]"
stats >"$tmp/st.json"; off0=$(fget "f['agg_port_off']"); in0=$(fget "f['agg_in']")
n=$(job pa int32 h1 h2); [ "$n" -eq 2 ] || why+=" [h1+h2 with p1,p2 aggregating: $n/2 verified]"
stats >"$tmp/st.json"; in1=$(fget "f['agg_in']")
n=$(job pb int32 h3 h3); [ "$n" -eq 0 ] || why+=" [h3 job verified $n ranks with p3 not aggregating]"
stats >"$tmp/st.json"; off1=$(fget "f['agg_port_off']"); in2=$(fget "f['agg_in']")
[ "$off1" -gt "$off0" ] && [ "$in2" -eq "$in1" ] || why+=" [agg_port_off $off0->$off1, agg_in $in1->$in2 over the h3 job]"
[ "$in1" -gt "$in0" ] || why+=" [agg_in did not grow over the h1+h2 job]"
out=$(ctl sw --agg-ports all --add-mode float); [ "$out" = "FABRIC_STATE agg_ports=all add=float" ] || why+=" [set float: $out]"
stats >"$tmp/st.json"; add0=$(fget "f['agg_add_off']")
n=$(job pc int32 h1 h3); [ "$n" -eq 0 ] || why+=" [int32 verified $n ranks with add=float]"
n=$(job pd float32 h1 h3 --float-mode native); [ "$n" -eq 2 ] || why+=" [native float32 with add=float: $n/2 verified]"
out=$(ctl sw --add-mode fixed); [ "$out" = "FABRIC_STATE agg_ports=all add=fixed" ] || why+=" [set fixed: $out]"
n=$(job pe int32 h2 h3); [ "$n" -eq 2 ] || why+=" [int32 with add=fixed: $n/2 verified]"
stats >"$tmp/st.json"; add1=$(fget "f['agg_add_off']"); chg=$(fget "f['settings_changed']")
[ "$add1" -gt "$add0" ] || why+=" [agg_add_off $add0->$add1 over the int32 job under add=float]"
[ "$chg" -eq 3 ] || why+=" [settings_changed $chg, expected 3]"
grep -q "^fabric settings: agg_ports=all add=fixed" <<<"$(inh sw $INAGG switch --stats $SW_IP:7000)" ||
    why+=" [text stats lack the settings line]"
ctl sw --add-mode any >/dev/null
[ -z "$why" ] && ok $t || bad $t "$why"

t=malformed_and_foreign_frames
stats >"$tmp/st.json"
swmac=$(fget "f['mac']")
declare -A b4
for k in malformed agg_fragment bad_source_mac to_switch_stack agg_in unknown_flooded; do b4[$k]=$(fget "f['$k']"); done
p3b=$(fget "[p['tx'] for p in f['ports'] if p['name']=='p3'][0]")
inh h1 $PY tests/l2_frames.py bad tb0 "$swmac" $SW_IP 7000 >"$tmp/bad" 2>&1
sleep 0.3
stats >"$tmp/st.json"
why=""
for k in malformed agg_fragment bad_source_mac to_switch_stack agg_in unknown_flooded; do
    v=$(fget "f['$k']")
    [ "$v" -gt "${b4[$k]}" ] || why+=" $k ${b4[$k]}->$v"
done
p3a=$(fget "[p['tx'] for p in f['ports'] if p['name']=='p3'][0]")
[ "$p3a" -gt "$p3b" ] || why+=" p3 tx $p3b->$p3a (flooded frame did not reach p3)"
grep -q "sent 6" "$tmp/bad" || why+=" sender: $(cat "$tmp/bad")"
inh h1 ping -c 1 -W 2 -q $SUB.3 >/dev/null 2>&1 || why+=" ping after bad frames failed"
[ -z "$why" ] && ok $t || bad $t "$why"

t=link_delay_seen_by_ping
# baseline RTT to the switch's own address, then with 300us each way on every link: the
# RTT grows by 2 x 300us (into and out of h1's port); 60 pings each. The fabric's own release
# error (delay_release_late) must be within 25us at p50 (2-3us on this box at load 10-15, 12us
# at load 40; the issue's 10us is measured in docs/PERFORMANCE.md). The round trip also carries the hosts'
# wake-ups on a shared machine, and those differ with and without delay (the forwarding
# thread spins while a delayed frame is due, so the reply finds it awake): the minimum round
# trip must grow by 600us within -100 .. +200us (the p50 is printed too).
rtts() { inh h1 ping -c 60 -i 0.01 -W 2 $SW_IP 2>/dev/null | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -n | awk '{a[NR]=$1} END {print (NR ? a[1] " " a[int((NR+1)/2)] : "-1 -1")}'; }
read -r bmin bp50 < <(rtts)
if start_switch --link-delay 300us >"$tmp/why"; then
    inh h1 ping -c 2 -i 0.1 -q $SW_IP >/dev/null 2>&1
    read -r wmin wp50 < <(rtts)
    stats >"$tmp/st.json"
    late=$(fget "f['latency']['delay_release_late']['p50_us']")
    dmin=$($PY -c "print(round(($wmin - $bmin) * 1000, 1))")
    dp50=$($PY -c "print(round(($wp50 - $bp50) * 1000, 1))")
    echo "        ping min/p50 ${bmin}/${bp50} ms without delay, ${wmin}/${wp50} ms with 300us per link: +${dmin}/+${dp50} us (expected +600); releases late by ${late} us at p50"
    if $PY -c "import sys; sys.exit(0 if 500 <= $dmin <= 800 and $late <= 25 else 1)"; then ok $t
    else bad $t "minimum RTT grew by ${dmin} us (expected 600), releases late by ${late} us at p50"; fi
else bad $t "$(cat "$tmp/why")"; fi

t=two_thread_pipeline_forwards_aggregates_and_delays
# --fabric-threads 2: the transmit stage on its own thread, fed through the ring. Ping and a
# TCP stream cross it, an allreduce aggregates through it (results reach the transmit stage
# from the dataplane), 50us per link still shows in the minimum round trip h1 -> h2 (4
# crossings: +200us over the no-delay minimum measured above), and the stages say which
# thread ran them.
if start_switch --fabric-threads 2 --link-delay 50us >"$tmp/why"; then
    why=""
    pmin=$(inh h1 ping -c 20 -i 0.01 -W 2 $SUB.2 2>/dev/null | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | sort -n | head -1)
    [ -n "$pmin" ] && $PY -c "import sys; sys.exit(0 if 0.19 <= $pmin <= 0.6 else 1)" ||
        why+=" [h1->h2 minimum RTT ${pmin:-none} ms with 50us per link, expected 0.2 + the hop]"
    inh h2 $PY tests/l2_frames.py sink 5002 5000000 >"$tmp/sink2" 2>&1 &
    sinkpid=$!
    sleep 0.5
    inh h1 $PY tests/l2_frames.py source $SUB.2 5002 5000000 >"$tmp/source2" 2>&1
    wait $sinkpid
    { [ -s "$tmp/sink2" ] && [ "$(cat "$tmp/sink2")" = "$(cat "$tmp/source2")" ]; } || why+=" [TCP stream differs]"
    allreduce3 tt 30000 int32 2 "$tmp/tt"
    n=$(cat "$tmp"/tt0 "$tmp"/tt1 "$tmp"/tt2 | grep -c '"verified":true')
    [ "$n" -eq 3 ] || why+=" [allreduce: $n/3 ranks verified]"
    stats >"$tmp/st.json"
    chk=$(fget "(f['threads'], f['stages']['transmit']['thread'], f['stages']['classify']['thread'], f['stages']['transmit']['frames'] > 0, f['stages']['transmit']['results'] > 0, f['stages']['classify']['transmit_queue_full'], len(f['thread_loops']))")
    [ "$chk" = "(2, 1, 0, True, True, 0, 2)" ] || why+=" [stages (threads, tx thread, classify thread, tx frames, tx results, queue full, loops): $chk]"
    grep -q "^fabric stage transmit: thread=1 " <<<"$(inh sw $INAGG switch --stats $SW_IP:7000)" || why+=" [no text stage line]"
    [ -z "$why" ] && ok $t || bad $t "$why"
else bad $t "$(cat "$tmp/why")"; fi

t=link_loss_drops_ipv4_counted_and_arp_passes
# 10% loss on every link, each way: a ping from h1 to h2 crosses four links (h1 in, h2 out,
# h2 in, h1 out), so about 34% of 200 are lost; each lost ping lost exactly one IPv4 frame,
# so the fabric's loss_drops add up to the pings lost. ARP is never dropped (h1 reaches h2).
if start_switch --link-loss 0.1 --loss-seed 7 >"$tmp/why"; then
    got=$(inh h1 ping -c 200 -i 0.005 -W 1 $SUB.2 2>/dev/null | sed -n 's/.* \([0-9]*\) received.*/\1/p')
    sleep 1.2 # late replies land
    stats >"$tmp/st.json"
    drops=$(fget "sum(p['loss_drops'] for p in f['ports'])")
    cpu=$(fget "[p['loss_drops'] for p in f['ports'] if p['switch_stack']][0]")
    echo "        $got of 200 pings came back through 10% loss per link; the fabric dropped $drops frames"
    if [ -z "$got" ]; then bad $t "ping printed no summary"
    elif [ "$got" -lt 95 ] || [ "$got" -gt 170 ]; then bad $t "$got of 200 came back (expected about 131)"
    elif [ "$drops" != $((200 - got)) ]; then bad $t "loss_drops $drops, but $((200 - got)) pings were lost"
    elif [ "$cpu" != 0 ]; then bad $t "the switch's own port lost frames ($cpu)"
    else ok $t; fi
else bad $t "$(cat "$tmp/why")"; fi

t=testbed_fabric_usage_errors
rcs=""
for args in "up 2 --fabric hub" "up 2 --fabric bridge --link-delay 25us" "up 2 --fabric inagg --link-delay soon" \
    "up 2 --fabric inagg --loss 1.5" "up 2 --fabric bridge --arbitration --link-rate 100mbit" \
    "up 2 --fabric inagg --arbitration" "up 2 --fabric inagg --fabric-threads 3" \
    "up 2 --fabric bridge --fabric-threads 2"; do
    timeout 10 tools/testbed $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || rcs+=" [$args]=$rc"
    [ -s "$tmp/err" ] || rcs+=" [$args: no message]"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=bench_allreduce_on_a_testbed_with_the_fabric
INAGG_LOG=warn timeout 150 $INAGG bench allreduce --testbed 2 --fabric inagg --link-delay 25us \
    --link-rate 1gbit --elems 20000 --iters 2 --dtype int32 --json "$tmp/tb.json" \
    >"$tmp/tb.out" 2>"$tmp/tb.err"
rc=$?
if [ $rc -eq 3 ]; then skp $t "testbeds cannot be built here: $(tail -n 1 "$tmp/tb.err")"
elif [ $rc -eq 0 ] && grep -q '"verified":true' "$tmp/tb.json" && grep -q "fabric inagg" "$tmp/tb.err"; then ok $t
else bad $t "exit $rc: $(tail -n 3 "$tmp/tb.err")"; fi

t=link_delay_25us_seen_by_ping
# The acceptance's delay, 25us per link, against a fabric without delay pinged in alternation
# (bench/fabric_ping_delay.sh, two 2-host testbeds, 5 x 100 pings per path): to the switch's
# address +50us (2 crossings), to h2 +100us (4). The minimum round trip shows the fabric's own
# accuracy (-1..+18us off the expected in most runs at load 10-23, but -17, -31 and -33us when a
# slow spell hit every baseline ping of a short run): the minimum's or the p50's added delay must
# be within -30..+30us of the expected, which a missing delay (-50/-100us) or a doubled one
# (+50/+100us) misses both ways. The p50 on a loaded
# 2-core box carries the hosts' and the kernel's scheduling (-81..+110us off between runs,
# either sign, at load 15-23): only bounded to -150..+200us here; the acceptance's 10us at p50
# is a quiet-machine number (docs/PERFORMANCE.md).
PD=pd$$
PD=${PD:0:11}
timeout 200 bash bench/fabric_ping_delay.sh --name "$PD" --rounds 5 --count 100 --interval 0.003 \
    --json "$tmp/pd.json" >"$tmp/pd.out" 2>"$tmp/pd.err"
rc=$?
sed 's/^/        /' "$tmp/pd.out"
if [ $rc -eq 3 ]; then skp $t "testbeds cannot be built here: $(tail -n 1 "$tmp/pd.err")"
elif [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 3 "$tmp/pd.err")"
elif $PY -c "
import json,sys
d=json.load(open(sys.argv[1]))['paths']
near=lambda e: -30 <= e <= 30
bad=[k for k,p in d.items() if not ((near(p['min_delay_us']-p['min_no_delay_us']-p['expected_us'])
                                     or near(p['error_us'])) and -150 <= p['error_us'] <= 200)]
sys.exit(1 if bad else 0)" "$tmp/pd.json"; then ok $t
else bad $t "added delay off the expected: $(cat "$tmp/pd.out")"; fi

t=bulk_stream_and_allreduce_share_the_fabric
# bench/fabric_coexist.py --up: its own 2-host testbed, a bulk TCP stream and a verified
# allreduce alone and together, a summary line, and the testbed gone afterwards. Small sizes:
# this checks the tool, docs/PERFORMANCE.md has the measurement.
timeout 240 $PY bench/fabric_coexist.py --up 2 --elems 20000 --iters 2 --bulk-seconds 1 \
    >"$tmp/co.out" 2>"$tmp/co.err"
rc=$?
if [ $rc -eq 3 ]; then skp $t "testbeds cannot be built here: $(tail -n 1 "$tmp/co.err")"
elif [ $rc -eq 0 ] && tail -n 1 "$tmp/co.out" | $PY -c "
import json,sys; d=json.load(sys.stdin)
sys.exit(0 if d['summary'] and d['verified'] and d['bulk_mbit_s_alone'] > 0 and d['allreduce_tat_s_with_bulk'] > 0 else 1)" &&
    cname=$(head -n 1 "$tmp/co.out" | $PY -c "import json,sys; print(json.load(sys.stdin)['testbed'])") &&
    ! tools/testbed list 2>/dev/null | grep "^testbed $cname:" >/dev/null; then ok $t
else bad $t "exit $rc: $(tail -c 300 "$tmp/co.out") $(tail -n 3 "$tmp/co.err")"; fi

t=arbitration_classes_results_apart_from_forwarded_frames
# --arbitration: the switch ports' downlinks send results (1:11) and forwarded frames (1:20)
# in their own classes, and a host's uplink sends its contributions in class 1:10
ARB=l2a$$
ARB=${ARB:0:12}
if timeout 60 tools/testbed up 2 --name "$ARB" --fabric inagg --arbitration --link-rate 100mbit \
    --mtu 9000 >/dev/null 2>"$tmp/arb.err"; then
    timeout 120 $PY bench/testbed_run.py --testbed "$ARB" --system inagg --elems 50000 --iters 2 \
        >"$tmp/arb.json" 2>&1
    timeout 10 tools/testbed exec "$ARB" sw -- tc -s class show dev p1 >"$tmp/arb.tc" 2>&1
    timeout 10 tools/testbed exec "$ARB" h1 -- tc -s class show dev tb0 >"$tmp/arb.up" 2>&1
    timeout 60 tools/testbed down "$ARB" >/dev/null 2>&1
    sent() { awk -v c="class htb $1 " 'index($0, c) == 1 {getline; print $4; exit}' "${2:-$tmp/arb.tc}"; }
    r=$(sent 1:11); f=$(sent 1:20); u=$(sent 1:10 "$tmp/arb.up")
    if grep -q '"verified": true' "$tmp/arb.json" && [ "${r:-0}" -gt 0 ] && [ "${f:-0}" -gt 0 ] &&
        [ "${u:-0}" -gt 0 ]; then ok $t
    else bad $t "results class sent ${r:-?} packets, forwarded class ${f:-?}, h1's uplink aggregation class ${u:-?}: $(tail -c 300 "$tmp/arb.json")"; fi
else
    timeout 60 tools/testbed down "$ARB" >/dev/null 2>&1
    bad $t "tools/testbed up --arbitration failed: $(tail -n 2 "$tmp/arb.err")"
fi

t=stops_on_sigterm_with_counters
kill -TERM "$swpid"; wait "$swpid"; rc=$?; swpid=""
if [ $rc -eq 0 ] && grep -q "^fabric port p1" "$tmp/sw.out"; then ok $t
else bad $t "exit $rc, output: $(head -c 300 "$tmp/sw.out") $(head -c 300 "$tmp/sw.err")"; fi
t=standalone_afpacket_transport
# the AF_PACKET transport on its own (no fabric): a switch taking its aggregation packets off
# p1 (which holds the address; the kernel keeps TCP control and ARP), two ranks in h1
ip -n "$P-sw" addr add $SW_IP/24 dev p1
# h1 still maps the address to the fabric's own MAC, which left with the fabric: forget it
ip -n "$P-h1" neigh flush all
ip netns exec "$P-sw" timeout 60 $INAGG switch --afpacket p1 --listen $SW_IP:7100 \
    >"$tmp/sa.out" 2>"$tmp/sa.err" &
sapid=$!
for _ in $(seq 50); do inh sw $INAGG switch --stats $SW_IP:7100 >/dev/null 2>&1 && break; sleep 0.1; done
ranks=""
for r in 0 1; do
    inh h1 $INAGG bench allreduce --switch $SW_IP:7100 --rank $r --world 2 --job sa \
        --elems 20000 --packet-elems 2048 --dtype int32 --iters 2 --rto-min-us 20000 \
        >"$tmp/sa$r" 2>&1 &
    ranks+=" $!"
done
wait $ranks
pin=$(inh sw $INAGG switch --stats $SW_IP:7100 --json | $PY -c "import json,sys; print(json.load(sys.stdin)['packets_in'])" 2>/dev/null)
kill "$sapid" 2>/dev/null; wait "$sapid" 2>/dev/null
nver=$(cat "$tmp"/sa0 "$tmp"/sa1 | grep -c '"verified":true')
if [ "$nver" -eq 2 ] && [ "${pin:-0}" -gt 0 ]; then ok $t
else bad $t "verified ranks $nver/2, switch packets_in=${pin:-?}: $(tail -c 300 "$tmp/sa0") $(tail -c 300 "$tmp/sa1") $(head -c 200 "$tmp/sa.err")"; fi
finish
