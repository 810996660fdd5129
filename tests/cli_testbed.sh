#!/usr/bin/env bash
# tests/cli_testbed.sh - `inagg bench allreduce` across hosts and against Gloo: usage errors of
# the testbed flags; the Gloo baseline on loopback reducing the very tensor inagg reduces (same
# checksum); a 3-host testbed built by the command itself, aggregating through `inagg switch`
# in the switch namespace with verified results and Open MPI (default and ring) and Gloo
# across the same namespaces; loss on the links with a bit-identical int32 result; a --sizes
# sweep with its plot; `inagg bench latency` and `inagg train` (inagg and the MPI backend)
# through the inagg fabric with a link delay (and their usage errors); a real Prometheus in the
# switch namespace scraping the testbed switch's /metrics during a run, its packet counter
# equal to the switch's STATS; a run interrupted with SIGTERM, and one SIGKILLed (its sentinel
# takes the testbed down); and that nothing of any testbed is left behind. Skips, saying why,
# where testbeds cannot be built (exit 3: not root, no network namespaces). Every command runs
# under `timeout`; about 3 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=./build/inagg
TB=tools/testbed
PY=${INAGG_PYTHON:-/usr/bin/python3}
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
# json_get EXPR < file-or-stdin: the value of d<EXPR> of the last JSON line
json_get() { python3 -c "import json,sys; d=json.loads([l for l in sys.stdin.read().splitlines() if l.startswith('{')][-1]); print(eval('d' + sys.argv[1]))" "$1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
[ -x $INAGG ] || make -s -j2 >/dev/null || { bad build "make failed"; finish; }
have_torch=0
"$PY" -c "import numpy, torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null && have_torch=1
have_mpi=0
command -v mpirun >/dev/null && [ -x build/inagg-mpi-bench ] && have_mpi=1

# Everything a testbed of this command (named b<PID>) could leave: namespaces, state, nftables
# tables, mounts.
testbed_traces() {
    ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^inagg-tb-b[0-9]+-' | sed 's/^/netns /'
    ls /run/inagg-testbed 2>/dev/null | grep -E '^b[0-9]+$' | sed 's/^/state /'
    grep -E '/run/inagg-testbed/b[0-9]+/' /proc/mounts | awk '{print "mount " $2}'
    nft list tables 2>/dev/null | grep -E 'inagg_tb_b[0-9]+' | sed 's/^/nft /'
}
# Traces of testbeds whose owner (inagg, pid in the name b<pid>) still runs belong to another
# run on this machine, not to this script, whose runs have all ended when it looks.
not_of_live_runs() {
    local line pid
    while IFS= read -r line; do
        pid=$(echo "$line" | grep -oE '(inagg-tb-|inagg-testbed/|inagg_tb_|state )b[0-9]+' | head -n 1 | grep -oE '[0-9]+$')
        if [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -qx inagg "/proc/$pid/comm" 2>/dev/null; then continue; fi
        echo "$line"
    done
}

t=testbed_usage_errors_exit_2
rcs=""
for args in "--testbed 0" "--testbed x" "--testbed 65" "--testbed 2 --link-rate fast" \
    "--testbed 2 --link-rate -5mbit" "--testbed 2 --mtu 100" "--testbed 2 --mtu 9000x" \
    "--link-rate 100mbit" "--mtu 1500" "--testbed 2 --workers 3" "--testbed 2 --switch 10.0.0.1:7000" \
    "--baseline mpi,tf" "--baseline gloo,gloo" "--sizes=3" "--sizes 4K" "--plot a.png" \
    "--rank 0 --world 2" "--rank 2 --world 2 --switch 127.0.0.1:1 --job j" "--testbed 2 --loss 1.5"; do
    timeout 10 $INAGG bench allreduce $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs+=" [$args]=$rc"
done
timeout 5 $INAGG bench allreduce --help | grep -c >/dev/null -- "--testbed N" || rcs+=" [--help lacks --testbed]"
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=latency_testbed_usage_errors_exit_2
rcs=""
for args in "--testbed 0" "--testbed 65" "--testbed 2 --workers 3" "--testbed 2 --switch 10.0.0.1:7000" \
    "--fabric inagg" "--link-delay 25us" "--link-rate 1gbit" "--testbed 2 --fabric nope" \
    "--rank 0" "--rank 2 --workers 2 --switch 127.0.0.1:1 --job j --report-file $tmp/r" \
    "--job j" "--report-file $tmp/r" "--rank 0 --workers 2 --switch 127.0.0.1:1 --job j --report-file $tmp/r --baseline mpi"; do
    timeout 10 $INAGG bench latency $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs+=" [$args]=$rc"
done
timeout 5 $INAGG bench latency --help | grep -c >/dev/null -- "--testbed N" || rcs+=" [--help lacks --testbed]"
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=train_testbed_usage_errors_exit_2
rcs=""
for args in "--testbed 0" "--testbed 2 --workers 3" "--testbed 2 --switch 10.0.0.1:7000 --rank 0 --world 2" \
    "--testbed 2 --mode single" "--fabric inagg" "--link-delay 25us" "--link-rate 1gbit" \
    "--testbed 2 --fabric nope" "--report-lines"; do
    timeout 10 $INAGG train $args >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 2 ] && [ -s "$tmp/err" ] || rcs+=" [$args]=$rc"
done
[ -z "$rcs" ] && ok $t || bad $t "wrong exit codes or no message:$rcs"

t=gloo_baseline_on_loopback_reduces_the_same_tensor
if [ $have_torch = 0 ]; then skp $t "python3-torch with Gloo (and numpy) is not installed for $PY"; else
    out=$(timeout 120 $INAGG bench allreduce --workers 2 --elems 50000 --dtype int32 --iters 2 \
        --warmup 1 --baseline gloo --json - 2>"$tmp/err")
    rc=$?
    if [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 3 "$tmp/err")"
    elif [ "$(echo "$out" | json_get "['baseline']['name']")" != gloo ] ||
         [ "$(echo "$out" | json_get "['baselines']['gloo']['verified']")" != True ]; then bad $t "no verified gloo baseline: $out"
    elif [ "$(echo "$out" | json_get "['baseline']['checksum'] == d['checksum']")" != True ]; then bad $t "Gloo's int32 sum differs from inagg's: $out"
    elif [ "$(echo "$out" | json_get "['speedup'] > 0")" != True ]; then bad $t "no speedup"
    else ok $t; fi
fi

t=not_root_exits_3_with_the_reason
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    setpriv --reuid=65534 --regid=65534 --clear-groups true 2>/dev/null; then
    timeout 20 setpriv --reuid=65534 --regid=65534 --clear-groups $INAGG bench allreduce \
        --testbed 2 --elems 1000 >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 3 ] && grep -q "needs root" "$tmp/err" && ok $t || bad $t "exit $rc: $(cat "$tmp/err")"
elif [ "$(id -u)" != 0 ]; then
    timeout 20 $INAGG bench allreduce --testbed 2 --elems 1000 >/dev/null 2>"$tmp/err"
    rc=$?
    [ $rc -eq 3 ] && ok $t || bad $t "exit $rc: $(cat "$tmp/err")"
else skp $t "cannot drop privileges here (setpriv)"; fi

# Can testbeds be built here at all? If not, say why and skip the rest.
timeout 20 $TB check >"$tmp/check" 2>&1
crc=$?
if [ $crc -ne 0 ]; then
    echo "skip    testbed runs: $(tail -n 1 "$tmp/check") (tools/testbed check exit $crc)"
    skip=$((skip + 1))
    finish
fi
before=$(testbed_traces)

t=three_hosts_aggregate_through_the_switch_namespace_with_baselines
base=""
[ $have_mpi = 1 ] && base="mpi,mpi-ring"
[ $have_torch = 1 ] && base="${base:+$base,}gloo"
timeout 150 $INAGG bench allreduce --testbed 3 --link-rate 200mbit --elems 250000 --dtype int32 \
    --iters 2 --warmup 1 ${base:+--baseline $base} --json "$tmp/three.json" >"$tmp/three.txt" 2>"$tmp/err"
rc=$?
check=$(python3 - "$tmp/three.json" "$base" <<'EOF'
import json, math, sys
d = json.load(open(sys.argv[1]))
base = [b for b in sys.argv[2].split(",") if b]
why = []
s = d["sizes"][0]
if not d["verified"] or not s["inagg"]["verified"]: why.append("not verified")
if d["testbed"]["hosts"] != 3 or d["workers"] != 3: why.append("not 3 hosts")
if d["packet_elems"] != 2048 or d["window"] < 4: why.append("no link-aware defaults %s/%s" % (d["packet_elems"], d["window"]))
if abs(s["theory_ratio"] - 4 / 3) > 1e-9: why.append("theory_ratio %s" % s["theory_ratio"])
g = s["goodput_fraction"]
if not (0.3 < g <= 1.05): why.append("goodput_fraction %s" % g)
if abs(s["bus_bw_gbps"] - s["alg_bw_gbps"] * 4 / 3) > 1e-6: why.append("busBw is not algBw*2(n-1)/n")
if abs(s["alg_bw_gbps"] - 250000 * 4 * 8 / s["tat_s"] / 1e9) > 1e-6: why.append("algBw is not bytes/TAT")
# the switch's CPU is in clock ticks: a short run through a quiet switch may measure 0
sw = s["cpu"]["switch"]
if not (isinstance(sw, (int, float)) and not isinstance(sw, bool) and sw >= 0 and s["cpu"]["workers"] > 0): why.append("no CPU %s" % s["cpu"])
if not d["checksums_agree"]: why.append("the ranks' results differ")
for b in base:
    k = b.replace("-", "_")
    x = s[k]
    if not x["verified"]: why.append(b + " not verified: " + x.get("error", ""))
    elif x["checksum"] != s["inagg"]["checksum"]: why.append(b + "'s int32 sum differs from inagg's")
    if not (s["speedups"][k] > 0): why.append(b + " speedup %s" % s["speedups"].get(k))
if base and d["baseline"]["name"] != base[0]: why.append("baseline is not the first named")
if base and abs(d["speedup"] - s["speedups"][base[0].replace("-", "_")]) > 1e-9: why.append("speedup is not against the first baseline")
print("; ".join(why))
EOF
)
if [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 5 "$tmp/err")"
elif [ -n "$check" ]; then bad $t "$check"
else ok $t; fi
[ -n "$base" ] || skp baselines_across_namespaces "neither Open MPI nor python3-torch is installed"
lossless=$(json_get "['checksum']" <"$tmp/three.json" 2>/dev/null)

t=loss_on_the_links_and_int32_stays_bit_identical
out=$(timeout 90 $INAGG bench allreduce --testbed 3 --link-rate 200mbit --loss 0.02 --elems 250000 \
    --dtype int32 --iters 2 --warmup 1 --json - 2>"$tmp/err")
rc=$?
if [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 5 "$tmp/err")"
elif [ "$(echo "$out" | json_get "['testbed']['loss']")" != 0.02 ]; then bad $t "the links had no loss: $out"
elif [ "$(echo "$out" | json_get "['retransmissions'] > 0")" != True ]; then bad $t "nothing was retransmitted"
elif [ -z "$lossless" ] || [ "$(echo "$out" | json_get "['checksum']")" != "$lossless" ]; then bad $t "checksum differs from the lossless run ($lossless)"
else ok $t; fi

t=sizes_sweep_draws_the_plot
if ! command -v gnuplot >/dev/null; then skp $t "gnuplot is not installed"; else
    sb=""
    [ $have_mpi = 1 ] && sb="--baseline mpi-ring"
    out=$(timeout 90 $INAGG bench allreduce --testbed 2 --link-rate 400mbit --sizes=4K,64K,1M \
        --dtype int32 --iters 2 $sb --plot "$tmp/sweep.png" --json - 2>"$tmp/err")
    rc=$?
    if [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 5 "$tmp/err")"
    elif [ "$(echo "$out" | json_get "['sizes'] and [x['bytes'] for x in d['sizes']]")" != "[4096, 65536, 1048576]" ]; then bad $t "sizes: $out"
    elif [ "$(head -c 4 "$tmp/sweep.png" | od -An -c | tr -d ' ')" != "211PNG" ]; then bad $t "no PNG written"
    else ok $t; fi
fi

t=latency_through_the_fabric_with_link_delay
lb=""
[ $have_mpi = 1 ] && lb="--baseline mpi"
out=$(timeout 120 $INAGG bench latency --testbed 2 --fabric inagg --link-delay 25us --iters 200 \
    --warmup 20 $lb --json - 2>"$tmp/err")
rc=$?
check=$(echo "$out" | python3 -c '
import json, sys
d = json.loads([l for l in sys.stdin.read().splitlines() if l.startswith("{")][-1])
why = []
if not d["verified"]: why.append("not verified")
if d["workers"] != 2 or d["testbed"]["hosts"] != 2 or d["testbed"]["fabric"] != "inagg": why.append("not 2 hosts behind the inagg fabric")
if d["protocol"] != "p4sgd" or d["elems"] != 8: why.append("not 8 elements with p4sgd")
# one round trip through the switch crosses two links of 25 us each way
if not d["latency_us"]["p50"] >= 50: why.append("p50 %s us is below the links 50 us" % d["latency_us"]["p50"])
if sys.argv[1] == "1":
    b = d.get("baseline", {})
    if not b.get("verified"): why.append("the MPI baseline did not verify")
    elif not b["latency_us"]["p50"] >= 50: why.append("MPI p50 %s us is below the links 50 us" % b["latency_us"]["p50"])
    elif not d["speedup_p50"] > 0: why.append("speedup_p50 %s" % d["speedup_p50"])
print("; ".join(why))' $have_mpi 2>&1)
if [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 5 "$tmp/err")"
elif [ -n "$check" ]; then bad $t "$check"
else ok $t; fi

t=train_across_the_testbed_inagg_and_mpi_agree
# the same model-parallel job, one rank per host through the inagg fabric, then over Open MPI
# one rank per host on the same kind of testbed: the same trajectory, each verified by the other
tr="--synthetic sparse:2000x300:0.05 --epochs 3 --testbed 2 --fabric inagg --link-delay 25us"
timeout 120 $INAGG train $tr --json "$tmp/tr_inagg.json" >/dev/null 2>"$tmp/err"
rc=$?
mrc=0
[ $have_mpi = 1 ] && { timeout 120 $INAGG train $tr --backend mpi --json "$tmp/tr_mpi.json" >/dev/null 2>"$tmp/err_mpi"; mrc=$?; }
check=$(python3 - "$tmp/tr_inagg.json" "$tmp/tr_mpi.json" $have_mpi <<'EOF2'
import json, sys
why = []
a = json.load(open(sys.argv[1]))
if a["workers"] != 2 or a.get("testbed", {}).get("hosts") != 2 or a["testbed"]["fabric"] != "inagg": why.append("not 2 hosts behind the inagg fabric")
if len(a["epochs"]) != 3: why.append("%d epochs" % len(a["epochs"]))
if sys.argv[3] == "1":
    b = json.load(open(sys.argv[2]))
    if b["backend"] != "mpi" or b.get("testbed", {}).get("hosts") != 2: why.append("the MPI run was not on the testbed")
    fa, fb = a["final_objective"], b["final_objective"]
    if not abs(fa - fb) <= 1e-5 * abs(fb): why.append("objectives differ: inagg %s, mpi %s" % (fa, fb))
print("; ".join(why))
EOF2
)
if [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 5 "$tmp/err")"
elif [ $mrc -ne 0 ]; then bad $t "--backend mpi exit $mrc: $(tail -n 5 "$tmp/err_mpi")"
elif [ -n "$check" ]; then bad $t "$check"
else ok $t; fi

# A real Prometheus in the switch namespace (the testbed subnet exists only there) scrapes the
# testbed switch's --metrics ($INAGG_TESTBED_SWITCH_METRICS) every 200 ms during a 2-host run;
# a scrape taken mid-run passes promtool, and once the run printed the switch's STATS
# ($INAGG_BENCH_SWITCH_STATS) the query API's packet counter equals STATS' "packets in" (the
# switch lingers, $INAGG_TESTBED_SWITCH_LINGER_MS, for the last scrapes).
t=prometheus_scrapes_the_testbed_switch_and_agrees_with_stats
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null ||
    ! command -v curl >/dev/null; then
    if [ "${CI:-}" = true ]; then bad $t "prometheus, promtool or curl is not installed"
    else skp $t "prometheus, promtool or curl is not installed (apt-get install prometheus curl)"; fi
else
    INAGG_TESTBED_SWITCH_METRICS=9464 INAGG_TESTBED_SWITCH_LINGER_MS=6000 INAGG_BENCH_SWITCH_STATS=1 \
        timeout 150 $INAGG bench allreduce --testbed 2 --fabric bridge --link-rate 20mbit \
        --elems 1000000 --dtype int32 --iters 3 --warmup 1 >"$tmp/pm.out" 2>"$tmp/pm.err" &
    runner=$!
    why="" ns="" swip="" prom="" mid=""
    for _ in $(seq 1 300); do # the switch namespace of this run and its address on br0
        child=$(pgrep -P $runner | head -n 1)
        [ -n "$child" ] && ns=inagg-tb-b$child-sw &&
            swip=$(ip -n "$ns" -4 -o addr show br0 2>/dev/null | awk '{print $4}' | cut -d/ -f1)
        [ -n "$swip" ] && break
        sleep 0.1
    done
    if [ -z "$swip" ]; then why="the testbed's switch namespace never came up"
    else
        for _ in $(seq 1 200); do # the switch's metrics listener
            ip netns exec "$ns" curl -sf -m 1 "http://$swip:9464/metrics" >/dev/null 2>&1 && break
            sleep 0.1
        done
        if ! ip netns exec "$ns" curl -sf -m 1 "http://$swip:9464/metrics" >/dev/null 2>&1; then
            why="no /metrics on the testbed switch ($swip:9464)"
        else
            cat >"$tmp/prom.yml" <<YML
global: {scrape_interval: 200ms, scrape_timeout: 150ms}
scrape_configs: [{job_name: testbed-switch, static_configs: [{targets: ['$swip:9464']}]}]
YML
            ip netns exec "$ns" prometheus --config.file="$tmp/prom.yml" \
                --storage.tsdb.path="$tmp/promdata" --web.listen-address="$swip:9090" \
                >"$tmp/prom.log" 2>&1 &
            prom=$!
        fi
    fi
    q() { ip netns exec "$ns" curl -sf -m 2 "http://$swip:9090/api/v1/query" --data-urlencode "query=$1" |
        "$PY" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'; }
    if [ -z "$why" ]; then # mid-run: packets flowing, STATS not yet printed
        for _ in $(seq 1 300); do
            grep -q "counters at the end of the run" "$tmp/pm.err" && break
            ip netns exec "$ns" curl -sf -m 1 "http://$swip:9464/metrics" >"$tmp/scrape.txt" 2>/dev/null &&
                n=$(awk '$1 == "inagg_switch_packets_received_total" {print $2}' "$tmp/scrape.txt") &&
                [ "${n:-0}" -gt 0 ] 2>/dev/null && ! grep -q "counters at the end" "$tmp/pm.err" &&
                mid=$n && break
            sleep 0.1
        done
        [ -n "$mid" ] || why="no scrape showed packets before the run ended"
    fi
    if [ -z "$why" ]; then # the run is over and the switch lingers: Prometheus against STATS
        for _ in $(seq 1 900); do
            grep -q "keeping the testbed switch up" "$tmp/pm.err" && break
            kill -0 $runner 2>/dev/null || break
            sleep 0.1
        done
        stats=$(sed -n 's/^packets in=\([0-9]*\) .*/\1/p' "$tmp/pm.err" | head -n 1)
        sleep 1 # five scrapes after the last packet
        got=$(q inagg_switch_packets_received_total 2>/dev/null)
        up=$(q 'up{job="testbed-switch"}' 2>/dev/null)
        if [ -z "$stats" ]; then why="no STATS at the end of the run: $(tail -n 3 "$tmp/pm.err")"
        elif [ "$up" != 1 ]; then why="Prometheus's up is '$up': $(tail -n 3 "$tmp/prom.log")"
        elif [ "$got" != "$stats" ]; then why="Prometheus says $got packets, STATS $stats"
        elif ! lint=$(promtool check metrics <"$tmp/scrape.txt" 2>&1); then why="promtool: $lint"
        fi
    fi
    [ -n "$prom" ] && kill $prom 2>/dev/null && wait $prom 2>/dev/null
    wait $runner
    rc=$?
    if [ -n "$why" ]; then bad $t "$why"
    elif [ $rc -ne 0 ]; then bad $t "exit $rc: $(tail -n 5 "$tmp/pm.err")"
    else echo "        mid-run scrape: $mid packets; Prometheus = STATS = $got"; ok $t; fi
fi

t=sigterm_takes_the_testbed_down
timeout 60 $INAGG bench allreduce --testbed 2 --link-rate 10mbit --elems 4000000 --dtype int32 \
    --iters 3 >/dev/null 2>"$tmp/err" &
runner=$!
busy=0
for _ in $(seq 1 150); do
    ns=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^inagg-tb-b[0-9]+-h2$' | head -n 1)
    if [ -n "$ns" ] && [ "$(ip netns pids "$ns" 2>/dev/null | wc -l)" -gt 0 ]; then busy=1; break; fi
    sleep 0.1
done
sleep 1
kill -TERM $runner 2>/dev/null
wait $runner
rc=$?
left=$(comm -13 <(echo "$before" | sort) <(testbed_traces | not_of_live_runs | sort))
if [ $busy != 1 ]; then bad $t "the run never started its ranks: $(tail -n 3 "$tmp/err")"
elif [ $rc -ne 143 ]; then bad $t "exit $rc after SIGTERM (expected 143)"
elif ! grep -q "taking testbed b[0-9]* down" "$tmp/err"; then bad $t "no message about the teardown"
elif [ -n "$left" ]; then bad $t "left behind: $(echo "$left" | tr '\n' ';')"
else ok $t; fi

# SIGKILL, which no handler sees: the sentinel the run started takes its testbed down.
t=sigkill_takes_the_testbed_down
timeout 60 $INAGG bench allreduce --testbed 2 --link-rate 10mbit --elems 4000000 --dtype int32 \
    --iters 3 >/dev/null 2>"$tmp/err" &
runner=$!
busy=0
for _ in $(seq 1 150); do
    ns=$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^inagg-tb-b[0-9]+-h2$' | head -n 1)
    if [ -n "$ns" ] && [ "$(ip netns pids "$ns" 2>/dev/null | wc -l)" -gt 0 ]; then busy=1; break; fi
    sleep 0.1
done
sleep 1
inagg_pid=$(cat /proc/$runner/task/*/children 2>/dev/null | awk '{print $1}')
[ -n "$inagg_pid" ] && kill -KILL "$inagg_pid" 2>/dev/null
wait $runner
rc=$?
for _ in $(seq 1 300); do # its teardown: at most 30 s
    left=$(comm -13 <(echo "$before" | sort) <(testbed_traces | not_of_live_runs | sort))
    [ -z "$left" ] && break
    sleep 0.1
done
if [ $busy != 1 ]; then bad $t "the run never started its ranks: $(tail -n 3 "$tmp/err")"
elif [ $rc -ne 137 ]; then bad $t "exit $rc after SIGKILL (expected 137)"
elif ! grep "is gone: taking it down" "$tmp/err" >/dev/null; then bad $t "no message about the teardown"
elif [ -n "$left" ]; then bad $t "left behind after 30 s: $(echo "$left" | tr '\n' ';')"
else ok $t; fi

t=nothing_left_behind
left=$(comm -13 <(echo "$before" | sort) <(testbed_traces | not_of_live_runs | sort))
[ -z "$left" ] && ok $t || bad $t "$(echo "$left" | tr '\n' ';')"

finish
