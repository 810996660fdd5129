#!/usr/bin/env bash
# bench/fabric_ping_delay.sh - how much round-trip time the fabric's link delay adds, seen by
# ping: two 2-host testbeds with the inagg fabric, one without delay and one with
# --link-delay D, pinged in alternation (so both see the same load), ROUNDS rounds of COUNT
# pings each. For each path, the p50 (and minimum) round trip with and without delay, the
# time added and the expected: a ping crosses 2 links to the switch's own address (h1's, in
# and out: +2D) and 4 to another host (h1's and h2's, each both ways: +4D). Prints one line
# per path and, with --json, one JSON object (bounded: COUNT pings of 1 s timeout each).
# Pings go every millisecond by default: with longer gaps an idle machine's CPUs sleep between
# pings, and their wake-ups (tens of us on a VM) land unevenly on the two testbeds.
#   bash bench/fabric_ping_delay.sh [--delay 25us] [--rounds 5] [--count 200]
#        [--interval 0.001] [--name fabpd] [--json FILE|-]
# Needs root (network namespaces) and build/inagg.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
delay=25us rounds=5 count=200 interval=0.001 name=fabpd json=""
while [ $# -gt 0 ]; do
    case $1 in
    --delay) delay=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --count) count=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "fabric_ping_delay.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
case $rounds$count in *[!0-9]*) echo "fabric_ping_delay.sh: --rounds and --count are integers" >&2; exit 2 ;; esac
delay_ns=$($PY -c "
import re,sys
m=re.fullmatch(r'([0-9.]+)(ns|us|ms|s)', sys.argv[1])
print(int(float(m[1])*{'ns':1,'us':1e3,'ms':1e6,'s':1e9}[m[2]]) if m else -1)" "$delay")
case $name in ""|*[!a-z0-9]*) echo "fabric_ping_delay.sh: --name is 1-11 of [a-z0-9]" >&2; exit 2 ;; esac
[ ${#name} -le 11 ] || { echo "fabric_ping_delay.sh: --name is 1-11 of [a-z0-9]" >&2; exit 2; }
[ "$delay_ns" -gt 0 ] || { echo "fabric_ping_delay.sh: bad --delay '$delay' (e.g. 25us)" >&2; exit 2; }
A=${name}0 B=${name}1
tmp=$(mktemp -d)
cleanup() { tools/testbed down $A >/dev/null 2>&1; tools/testbed down $B >/dev/null 2>&1; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
tools/testbed up 2 --name $A --fabric inagg --mtu 9000 --json >"$tmp/a.json" 2>"$tmp/err" &&
tools/testbed up 2 --name $B --fabric inagg --mtu 9000 --link-delay "$delay" --json >"$tmp/b.json" 2>>"$tmp/err" || {
    rc=$?; echo "fabric_ping_delay.sh: testbed: $(tail -n 2 "$tmp/err")" >&2; exit $rc; }
addr() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['switch']['addr'] if sys.argv[2]=='sw' else d['hosts'][int(sys.argv[2][1:])-1]['addr'])" "$1" "$2"; }
pings() { # TESTBED TARGET OUT: append the round trips in us
    timeout 60 tools/testbed exec $1 h1 -- ping -c "$count" -i "$interval" -W 1 "$2" 2>/dev/null |
        sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | awk '{printf "%.1f\n", $1 * 1000}' >>"$3"
}
for tb in a b; do
    t=$([ $tb = a ] && echo $A || echo $B)
    for tgt in sw h2; do tools/testbed exec $t h1 -- ping -c 3 -i 0.05 -W 1 "$(addr "$tmp/$tb.json" $tgt)" >/dev/null 2>&1; done
done
for r in $(seq "$rounds"); do
    for tgt in sw h2; do
        pings $A "$(addr "$tmp/a.json" $tgt)" "$tmp/a.$tgt"
        pings $B "$(addr "$tmp/b.json" $tgt)" "$tmp/b.$tgt"
    done
done
late=$(tools/testbed exec $B sw -- ./build/inagg switch --stats "$(addr "$tmp/b.json" sw):7000" --json 2>/dev/null |
    $PY -c "import json,sys; print(json.load(sys.stdin)['fabric']['latency']['delay_release_late']['p50_us'])" 2>/dev/null || echo -1)
$PY - "$tmp" "$delay_ns" "$late" "$json" "$rounds" "$count" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PYEOF'
import json, statistics, sys
tmp, d_ns, late, out, rounds, count, load = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
d = d_ns / 1000
res = {"delay_us": d, "rounds": int(rounds), "pings_per_round": int(count), "load_avg": load,
       "delay_release_late_p50_us": late, "paths": {}}
for tgt, crossings in (("sw", 2), ("h2", 4)):
    a = [float(x) for x in open(f"{tmp}/a.{tgt}") if x.strip()]
    b = [float(x) for x in open(f"{tmp}/b.{tgt}") if x.strip()]
    if not a or not b:
        print(f"no replies on the path to {tgt}", file=sys.stderr); sys.exit(1)
    pa, pb = statistics.median(a), statistics.median(b)
    exp = crossings * d
    res["paths"]["h1_to_" + ("switch" if tgt == "sw" else "h2")] = {
        "link_crossings": crossings, "p50_no_delay_us": pa, "p50_delay_us": pb,
        "added_us": round(pb - pa, 1), "expected_us": exp, "error_us": round(pb - pa - exp, 1),
        "n": [len(a), len(b)], "min_no_delay_us": min(a), "min_delay_us": min(b)}
    print(f"h1 to {'the switch' if tgt == 'sw' else 'h2':10s}: p50 {pa:.1f} us without delay, {pb:.1f} us with {d:g} us per link: "
          f"+{pb - pa:.1f} us (expected +{exp:g}, error {pb - pa - exp:+.1f} us; min {min(a):.1f} / {min(b):.1f})")
print(f"delay lines release late by {late} us at p50; load average {load}")
if out:
    text = json.dumps(res)
    (sys.stdout.write(text + "\n") if out == "-" else open(out, "w").write(text + "\n"))
PYEOF
