#!/usr/bin/env bash
# tests/cli_roce.sh - the RoCE v1 transport end to end on testbeds with the inagg fabric:
# usage errors; a 4-host allreduce over --transport roce whose capture (--pcap) decodes in
# tshark as RDMA Write First/Middle/Last with the expected QPs and PSNs and whose every frame's
# ICRC is valid by this test's own code (tests/roce_pcap.py, zlib); 1% loss on every link with
# int32 results bit-identical and the switch's answers from its result buffer counted (and,
# with a buffer too small to keep a result, its evictions counted and recovered from); a run
# whose PSNs start just below the 24-bit wrap; 4096-byte frames both ways on jumbo links (and
# --roce-mtu's choice); each case of the fabric's Table VI
# classification (tests/roce_frames.py) counted; a switched port that does not answer ARP for
# the switch's address itself (a host that learned the port's MAC never got its RoCE frames
# aggregated); float32 over roce. Skips, saying why, where testbeds cannot be
# built; the tshark check skips (the ICRC check does not) when tshark is absent (Debian:
# apt-get install tshark). INAGG_FABRIC_XDP=on|auto|off (default off) is the fabric's --xdp
# on every testbed; with it on, the RoCE frames are seen arriving through AF_XDP. About 2
# minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=${INAGG:-build/inagg}
PY=/usr/bin/python3
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
TB=roce$(( $$ % 100000 ))
cleanup() {
    timeout 60 tools/testbed down "$TB" >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
jget() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

t=usage_errors
rcs=""
for args in "--transport tcp" "--transport roce" "--pcap $tmp/x.pcap" "--roce-psn 5" \
    "--transport roce --roce-psn 16777216 --testbed 2" "--testbed 2 --fabric bridge --transport roce" \
    "--roce-mtu 1024" "--transport roce --roce-mtu 3000 --testbed 2"; do
    timeout 10 $INAGG bench allreduce $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] || rcs+=" [$args]=$rc"
    [ -s "$tmp/err" ] || rcs+=" [$args: no message]"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

if ! timeout 20 tools/testbed check >"$tmp/check" 2>&1; then
    skp testbeds "testbeds cannot be built here: $(tail -n 1 "$tmp/check")"
    finish
fi

# bench run: 4 hosts over roce with a capture; $1 = tag, rest = extra flags
run_bench() {
    local tag=$1; shift
    INAGG_LOG=warn timeout 240 $INAGG bench allreduce --testbed 4 --fabric inagg \
        --link-rate 1gbit --transport roce --pcap "$tmp/$tag.pcap" --elems 30000 --iters 2 \
        --dtype int32 --json "$tmp/$tag.json" "$@" >"$tmp/$tag.out" 2>"$tmp/$tag.err"
}

t=capture_decodes_as_rdma_writes_with_valid_icrc
# packets of 2048 int32 (the RoCE default at this MTU, 2032, is two whole frames): First,
# Middle and Last frames
if run_bench cap --packet-elems 2048; then
    $PY tests/roce_pcap.py "$tmp/cap.pcap" >"$tmp/cap.check"
    why=""
    [ "$(jget "$tmp/cap.json" "d['verified']")" = True ] || why+=" results not verified;"
    [ "$(jget "$tmp/cap.check" "d['roce'] > 100")" = True ] || why+=" few RoCE frames;"
    [ "$(jget "$tmp/cap.check" "d['bad_icrc'] + d['bad_length']")" = 0 ] || why+=" bad ICRC/length;"
    [ "$(jget "$tmp/cap.check" "d['psn_gaps'] + d['psn_backwards']")" = 0 ] || why+=" PSNs not consecutive per QP;"
    [ "$(jget "$tmp/cap.check" "all(d['opcodes'].get(k, 0) > 0 for k in ('6', '7', '8'))")" = True ] || why+=" opcodes $(jget "$tmp/cap.check" "d['opcodes']");"
    [ "$(jget "$tmp/cap.check" "len(d['qps']) >= 4")" = True ] || why+=" QPs $(jget "$tmp/cap.check" "d['qps']");"
    pmtu=$(jget "$tmp/cap.json" "d['roce_payload_efficiency']['path_mtu']")
    [ "$(jget "$tmp/cap.check" "d['mtus']")" = "[$pmtu]" ] || why+=" path MTUs $(jget "$tmp/cap.check" "d['mtus']"), the bench says $pmtu;"
    [ -z "$why" ] && ok $t || bad $t "$why $(cat "$tmp/cap.check")"
else
    bad $t "bench failed: $(tail -n 3 "$tmp/cap.err")"
fi

t=tshark_decodes_first_middle_last_qps_and_psns
if ! command -v tshark >/dev/null 2>&1; then
    skp $t "tshark is not installed (Debian: apt-get install tshark)"
elif [ -s "$tmp/cap.pcap" ]; then
    tshark -r "$tmp/cap.pcap" -Y infiniband -T fields -e infiniband.bth.opcode \
        -e infiniband.bth.destqp -e infiniband.bth.psn 2>/dev/null >"$tmp/ts.txt"
    tshark -r "$tmp/cap.pcap" -Y infiniband 2>/dev/null >"$tmp/ts.sum"
    # the decoder's opcodes, QPs and PSNs agree with the test's own reading of the same frames
    res=$($PY - "$tmp/ts.txt" "$tmp/cap.check" <<'EOF'
import json, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().split('\n') if l.strip()]
mine = json.load(open(sys.argv[2]))
ops = {}
for r in rows:
    ops[r[0]] = ops.get(r[0], 0) + 1
qps = sorted({'0x%06x' % int(r[1], 16) for r in rows})
psn_ok = all(0 <= int(r[2]) < (1 << 24) for r in rows)
print('ok' if ops == mine['opcodes'] and qps == mine['qps'] and psn_ok and len(rows) == mine['roce']
      else 'tshark %s %s, ours %s %s' % (ops, qps, mine['opcodes'], mine['qps']))
EOF
)
    names=$(grep -c "RDMA Write First" "$tmp/ts.sum")/$(grep -c "RDMA Write Middle" "$tmp/ts.sum")/$(grep -c "RDMA Write Last" "$tmp/ts.sum")
    if [ "$res" = ok ] && ! grep -q "\b0\b" <<<"$names"; then ok $t
    else bad $t "$res; First/Middle/Last lines $names"; fi
else
    bad $t "no capture"
fi

t=psn_start_just_below_the_wrap
if run_bench wrap --roce-psn 16777200; then
    $PY tests/roce_pcap.py "$tmp/wrap.pcap" >"$tmp/wrap.check"
    if [ "$(jget "$tmp/wrap.json" "d['verified']")" = True ] &&
       [ "$(jget "$tmp/wrap.check" "d['wrapped_flows'] >= 4 and d['bad_icrc'] == 0 and d['psn_gaps'] == 0")" = True ]; then ok $t
    else bad $t "verified=$(jget "$tmp/wrap.json" "d['verified']") $(cat "$tmp/wrap.check")"; fi
else
    bad $t "bench failed: $(tail -n 3 "$tmp/wrap.err")"
fi

t=path_mtu_4096_on_jumbo_links_both_ways
# at a link MTU of 9000 the workers send, and the switch answers, in 4096-byte frames (a
# packet of 2048 int32 in 3 frames rather than 9); --roce-mtu picks another (512 here, on a
# 1500-byte link whose own choice would be 1024)
if run_bench jumbo --mtu 9000 --packet-elems 2048 && run_bench j2k --mtu 1500 --roce-mtu 512; then
    $PY tests/roce_pcap.py "$tmp/jumbo.pcap" >"$tmp/jumbo.check"
    $PY tests/roce_pcap.py "$tmp/j2k.pcap" >"$tmp/j2k.check"
    why=""
    [ "$(jget "$tmp/jumbo.json" "d['verified'] and d['roce_payload_efficiency']['path_mtu'] == 4096 and d['roce_payload_efficiency']['packet_frames'] == 3")" = True ] || why+=" jumbo: not verified or not 4096;"
    [ "$(jget "$tmp/jumbo.check" "d['mtus'] == [4096] and d['bad_icrc'] + d['bad_length'] + d['psn_gaps'] == 0")" = True ] || why+=" jumbo capture: $(cat "$tmp/jumbo.check");"
    [ "$(jget "$tmp/j2k.check" "d['mtus'] == [512] and d['bad_icrc'] == 0")" = True ] || why+=" --roce-mtu 512 capture: $(jget "$tmp/j2k.check" "d['mtus']");"
    [ "$(jget "$tmp/j2k.json" "d['verified'] and d['roce_payload_efficiency']['path_mtu'] == 512")" = True ] || why+=" --roce-mtu 512 not verified;"
    grep -q "path MTU 4096" "$tmp/jumbo.out" || why+=" no 'path MTU 4096' in the table;"
    [ -z "$why" ] && ok $t || bad $t "$why"
else
    bad $t "bench failed: $(tail -n 3 "$tmp/jumbo.err" "$tmp/j2k.err" 2>/dev/null)"
fi

# One int32 allreduce job over roce, four ranks, one per testbed host: JOB OUT; rank r's JSON
# goes to $tmp/OUT<r>.json. Waits for the ranks' own pids.
roce_job4() {
    local job=$1 out=$2 r ranks=""
    for r in 0 1 2 3; do
        timeout 120 tools/testbed exec "$TB" h$((r + 1)) -- $INAGG bench allreduce \
            --switch "$SW:7000" --rank $r --world 4 --job "$job" --elems 100000 \
            --packet-elems 2048 --dtype int32 --iters 4 --rto-min-us 5000 --transport roce \
            >"$tmp/$out$r.json" 2>&1 &
        ranks+=" $!"
    done
    wait $ranks
}

t=loss_one_percent_bit_identical_with_result_buffer_answers
# our own testbed, so the switch's counters can be read after the run. Its MTU is 9000 (a
# 4096-byte path MTU), with the fabric on AF_XDP 3000 (2048): the fabric steers RoCE into an
# XSK only on ports whose every frame fits a chunk (docs/FABRIC.md), and the af_xdp case below
# wants them there
TBMTU=9000
[ "${INAGG_FABRIC_XDP:-off}" = on ] && TBMTU=3000
if timeout 60 tools/testbed up 4 --name "$TB" --fabric inagg --link-rate 1gbit --mtu $TBMTU \
    --loss 0.01 >"$tmp/up.out" 2>&1; then
    SW=$(tools/testbed show "$TB" | sed -n 's/^ *sw .* \([0-9.]*\) (inagg0.*/\1/p')
    roce_job4 loss l
    timeout 10 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" >"$tmp/l.stats" 2>&1
    nver=$(cat "$tmp"/l?.json | grep -c '"verified":true')
    sums=$(cat "$tmp"/l?.json | sed -n 's/.*"checksum":"\([0-9a-f]*\)".*/\1/p' | sort -u | wc -l)
    resends=$(sed -n 's/.* name=loss .* resends=\([0-9]*\).*/\1/p' "$tmp/l.stats" | head -n 1)
    lost=$(sed -n 's/^fabric port p[0-9].* loss_drops=\([0-9]*\).*/\1/p' "$tmp/l.stats" | awk '{s += $1} END {print s + 0}')
    answered=$(sed -n 's/^fabric roce.* resbuf_answered=\([0-9]*\).*/\1/p' "$tmp/l.stats")
    # each rank's own RoCE counters (inagg_get_transport_stats of its communicator): every
    # repeat the switch answered was a retransmission some rank replayed at its old PSNs
    replayed=$($PY -c "
import json, sys
t = 0
for f in sys.argv[1:]:
    d = [json.loads(l) for l in open(f) if l.startswith('{')][-1]
    assert d['roce']['messages_out'] > 0
    t += d['roce']['replayed']
print(t)" "$tmp"/l?.json 2>/dev/null)
    echo "        4 ranks verified: $nver, distinct checksums: $sums, frames lost on links: ${lost:-?}, repeats answered from the RoCE result buffer: ${answered:-0}, replayed by the ranks: ${replayed:-?}, results resent by the slots: ${resends:-?}"
    grep "fabric roce" "$tmp/l.stats" | sed 's/^/        /'
    if [ "$nver" -eq 4 ] && [ "$sums" -eq 1 ] && [ "${answered:-0}" -gt 0 ] && [ "${lost:-0}" -gt 0 ] &&
        [ "${replayed:-0}" -ge "${answered:-0}" ]; then ok $t
    else bad $t "verified $nver/4, checksums $sums, answered ${answered:-0}, replayed ${replayed:-?}, lost ${lost:-?}: $(head -c 300 "$tmp/l0.json") $(head -c 400 "$tmp/l.stats")"; fi
    if [ "${INAGG_FABRIC_XDP:-off}" = on ]; then
        t=roce_frames_arrive_through_af_xdp
        paths=$(sed -n 's/^fabric port p[0-9]* path: \([a-z_]*\).*/\1/p' "$tmp/l.stats" | sort -u | tr '\n' ' ')
        red=$(sed -n 's/^fabric port p[0-9]* path: af_xdp.* redirected=\([0-9]*\).*/\1/p' "$tmp/l.stats" | awk '{s += $1} END {print s + 0}')
        steered=$(sed -n 's/^fabric roce: .* steered=\([0-9]*\).*/\1/p' "$tmp/l.stats")
        roce=$(sed -n 's/^fabric port p[0-9]* path: af_xdp.* roce=\([a-z_]*\).*/\1/p' "$tmp/l.stats" | sort -u | tr '\n' ' ')
        if [ "$paths" = "af_xdp " ] && [ "$roce" = "xsk " ] && [ "$red" -ge "${steered:-1}" ]; then ok $t
        else bad $t "paths '$paths', roce '$roce', redirected $red, RoCE frames steered ${steered:-?}"; fi
    fi
    t=table_vi_cases_forwarded_or_dropped_and_counted
    timeout 60 tools/testbed loss "$TB" 0 >/dev/null 2>&1 # no frame of these may be lost
    for _ in $(seq 50); do
        timeout 5 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" >/dev/null 2>&1 && break
        sleep 0.1
    done
    timeout 10 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" --json >"$tmp/b.json" 2>&1
    swmac=$(jget "$tmp/b.json" "d['fabric']['mac']")
    h2mac=$(tools/testbed exec "$TB" h2 -- cat /sys/class/net/tb0/address)
    tools/testbed exec "$TB" h1 -- $PY tests/roce_frames.py tb0 "$swmac" "$h2mac" >"$tmp/rf.out" 2>&1
    sleep 0.3
    timeout 10 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" --json >"$tmp/a.json" 2>&1
    why=""
    for k in not_write no_match no_flow malformed; do
        b=$(jget "$tmp/b.json" "d['fabric']['roce']['$k']"); a=$(jget "$tmp/a.json" "d['fabric']['roce']['$k']")
        [ "$a" = $((b + 1)) ] || why+=" $k $b->$a;"
    done
    b=$(jget "$tmp/b.json" "d['fabric']['forwarded'] + d['fabric']['unknown_flooded']")
    a=$(jget "$tmp/a.json" "d['fabric']['forwarded'] + d['fabric']['unknown_flooded']")
    [ "$a" -gt "$b" ] || why+=" RoCE to another MAC not switched ($b->$a);"
    b=$(jget "$tmp/b.json" "d['fabric']['to_switch_stack']"); a=$(jget "$tmp/a.json" "d['fabric']['to_switch_stack']")
    [ "$a" -ge $((b + 3)) ] || why+=" forwarded cases did not reach the switch's stack ($b->$a);"
    grep -q "sent 5" "$tmp/rf.out" || why+=" sender: $(cat "$tmp/rf.out");"
    [ -z "$why" ] && ok $t || bad $t "$why"

    # The switch's namespace owns the switch's address (on inagg0), and Linux answers ARP for
    # it on any interface: from a switched port pN itself, with pN's MAC, ahead of inagg0's
    # answer through the fabric. A host that kept that answer reaches the TCP listener anyway
    # but its RoCE frames (to pN's MAC) were never aggregated: "rank 0 sent nothing". The
    # fabric turns ARP off on its ports (portarp.h). Here p1 has it on again and the fabric
    # restarts, and h1 resolves the switch's address while the switch already knows h1 (the
    # order in which the kernel's own answer from p1 used to win every time).
    t=switched_port_does_not_answer_arp_and_float32_job_verifies
    tools/testbed exec "$TB" sw -- ip link set p1 arp on
    timeout 60 tools/testbed loss "$TB" 0 >/dev/null 2>&1 # restarts the fabric
    for _ in $(seq 50); do
        timeout 5 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" >/dev/null 2>&1 && break
        sleep 0.1
    done
    tools/testbed exec "$TB" sw -- ping -c 1 -W 1 "${SW%.*}.1" >/dev/null 2>&1 # the switch knows h1
    tools/testbed exec "$TB" h1 -- ip neigh flush all
    tools/testbed exec "$TB" h1 -- bash -c "exec 3<>/dev/tcp/$SW/9" 2>/dev/null
    h1sees=$(tools/testbed exec "$TB" h1 -- ip neigh show "$SW" | sed -n 's/.* lladdr \([0-9a-f:]*\).*/\1/p')
    p1flags=$(tools/testbed exec "$TB" sw -- ip link show p1 | head -n 1)
    for r in 0 1; do
        INAGG_LOG=warn timeout 60 tools/testbed exec "$TB" h$((r + 1)) -- $INAGG bench allreduce \
            --switch "$SW:7000" --rank $r --world 2 --job arp$$ --elems 30000 --dtype float32 \
            --iters 2 --timeout-ms 5000 --transport roce >"$tmp/arp$r.json" 2>&1 &
    done
    wait
    nver=$(cat "$tmp"/arp?.json | grep -c '"verified":true')
    if [ "$h1sees" = "$swmac" ] && [ "$nver" -eq 2 ] && [[ "$p1flags" == *NOARP* ]]; then ok $t
    else bad $t "h1 resolves the switch ($SW) to '$h1sees' (the switch's MAC is $swmac); p1: $p1flags; verified $nver/2: $(grep -ho '"error":"[^"]*"' "$tmp"/arp?.json | head -n 1)"; fi

    # a result buffer too small for any message (1 flow x 1 frame; at this testbed's 4096-byte
    # path MTU a 2048-element result is 3 frames, the tensor's short last packet 2; at 2048, 5
    # and 4): every
    # repeat finds its result evicted, is counted and dropped, and the workers' next timeout
    # recovers with new PSNs; results stay bit-identical
    t=evicted_results_counted_and_recovered_by_timeout
    INAGG_FABRIC_ARGS="--roce-result-buffer 1x1" timeout 60 tools/testbed loss "$TB" 0.01 >/dev/null 2>&1
    for _ in $(seq 50); do
        timeout 5 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" >/dev/null 2>&1 && break
        sleep 0.1
    done
    roce_job4 evict e
    timeout 10 tools/testbed exec "$TB" sw -- $INAGG switch --stats "$SW:7000" >"$tmp/e.stats" 2>&1
    nver=$(cat "$tmp"/e?.json | grep -c '"verified":true')
    esums=$(cat "$tmp"/e?.json | sed -n 's/.*"checksum":"\([0-9a-f]*\)".*/\1/p' | sort -u)
    lsums=$(cat "$tmp"/l?.json | sed -n 's/.*"checksum":"\([0-9a-f]*\)".*/\1/p' | sort -u)
    evicted=$(sed -n 's/^fabric roce.* resbuf_evicted=\([0-9]*\).*/\1/p' "$tmp/e.stats")
    answered=$(sed -n 's/^fabric roce.* resbuf_answered=\([0-9]*\).*/\1/p' "$tmp/e.stats")
    grep "fabric roce" "$tmp/e.stats" | sed 's/^/        /'
    if [ "$nver" -eq 4 ] && [ "$esums" = "$lsums" ] && [ "${evicted:-0}" -gt 0 ] &&
        [ "${answered:-0}" -eq 0 ]; then ok $t
    else bad $t "verified $nver/4, checksums '$esums' vs '$lsums', evicted ${evicted:-0}, answered ${answered:-0}"; fi
else
    bad $t "tools/testbed up failed: $(tail -n 2 "$tmp/up.out")"
fi

t=float32_over_roce
if INAGG_LOG=warn timeout 240 $INAGG bench allreduce --testbed 2 --fabric inagg --link-rate 1gbit \
    --transport roce --elems 30000 --iters 2 --dtype float32 --json "$tmp/f.json" \
    >"$tmp/f.out" 2>"$tmp/f.err" && [ "$(jget "$tmp/f.json" "d['verified']")" = True ]; then ok $t
else bad $t "$(tail -n 3 "$tmp/f.err")"; fi

t=int32_bit_identical_under_worker_loss_duplication_reordering
# the fault-injection transport wraps the roce endpoints: whole messages dropped, duplicated
# and reordered both ways, on top of the frames' own checks
if INAGG_LOG=warn timeout 240 $INAGG bench allreduce --testbed 2 --fabric inagg --link-rate 1gbit \
    --transport roce --elems 30000 --iters 3 --dtype int32 --rto-min-us 5000 \
    --faults drop=0.02,dup=0.02,reorder=0.02,seed=5 --json "$tmp/fz.json" \
    >"$tmp/fz.out" 2>"$tmp/fz.err" && [ "$(jget "$tmp/fz.json" "d['verified']")" = True ] &&
    [ "$(jget "$tmp/fz.json" "d['checksums_agree']")" = True ] &&
    [ "$(jget "$tmp/fz.json" "d['retransmissions'] > 0")" = True ]; then ok $t
else bad $t "$(tail -n 3 "$tmp/fz.err") $(head -c 300 "$tmp/fz.json" 2>/dev/null)"; fi
finish
