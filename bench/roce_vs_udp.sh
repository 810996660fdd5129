#!/usr/bin/env bash
# bench/roce_vs_udp.sh - allreduce throughput over the RoCE v1 transport against the UDP
# transport on ONE testbed (same hosts, same inagg fabric, same link rate), runs interleaved:
# udp, roce, udp, roce, ... Each run is 4 ranks (`bench allreduce --rank`, one per host) of
# ELEMS int32 for ITERS iterations; a run's time is the median over its ranks of their median
# iteration time. Prints one line per run and the ratio of the medians (roce throughput /
# udp throughput). Results are verified by every rank (a run that is not fails the script).
# Both transports run with the retransmission floor of 20 ms that `bench allreduce --testbed`
# uses (a shared machine's scheduling stalls otherwise cause spurious resends).
# Each run also reports the fabric switch's CPU (its process's user + system time, from
# /proc): in % of one core over the run, and in CPU seconds per GB of contributions summed
# (4 ranks x ELEMS x 4 bytes x ITERS), and the hosts' CPU per GB (the ranks' own cpu_s over
# their timed iterations, summed: on a veth the kernel's receive work at the fabric's port,
# AF_PACKET or XDP, runs in the sending host's context and is charged to it). --xdp is the fabric's receive path (tools/testbed --xdp:
# off = AF_PACKET, on = AF_XDP for the RoCE and aggregation UDP frames that fit a chunk).
#
# Usage: bench/roce_vs_udp.sh [--name NAME] [--rate R] [--elems N] [--iters K] [--reps R]
#                             [--packet-elems P] [--xdp auto|on|off]
# Defaults: --name roceb$$ --rate 1gbit --elems 1000000 --iters 10 --reps 5 --packet-elems 2048.
# Needs root (network namespaces); takes the testbed down at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=${INAGG:-build/inagg}
PY=/usr/bin/python3
NAME=roceb$(( $$ % 100000 )) RATE=1gbit ELEMS=1000000 ITERS=10 REPS=5 PE=2048 XDP=off
while [ $# -gt 0 ]; do
    case $1 in
    --name) NAME=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --elems) ELEMS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --packet-elems) PE=$2; shift 2 ;;
    --xdp) XDP=$2; shift 2 ;;
    *) echo "usage: $0 [--name NAME] [--rate R] [--elems N] [--iters K] [--reps R] [--packet-elems P] [--xdp auto|on|off]" >&2; exit 2 ;;
    esac
done
tmp=$(mktemp -d)
trap 'timeout 60 tools/testbed down "$NAME" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
timeout 60 tools/testbed up 4 --name "$NAME" --fabric inagg --link-rate "$RATE" --mtu 9000 \
    --xdp "$XDP" --json >"$tmp/up" 2>&1 || { echo "tools/testbed up failed: $(tail -n 2 "$tmp/up")" >&2; exit 3; }
SW=$(tools/testbed show "$NAME" | sed -n 's/^ *sw .* \([0-9.]*\) (inagg0.*/\1/p')
FPID=$($PY -c "import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])['fabric_pid'])" "$tmp/up")
[ "${FPID:-0}" -gt 0 ] || { echo "no fabric process in the testbed's JSON" >&2; exit 3; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$FPID/stat"; } # the fabric's user + system

run() { # TRANSPORT JOB -> prints the run's median iteration time in seconds, the fabric's
         # CPU in % of a core over the run, and its CPU seconds per GB of contributions
    local tr=$1 job=$2 pids="" c0 c1 t0 t1
    c0=$(cpu_ticks); t0=$(date +%s.%N)
    for r in 0 1 2 3; do
        timeout 300 tools/testbed exec "$NAME" h$((r + 1)) -- $INAGG bench allreduce \
            --switch "$SW:7000" --rank $r --world 4 --job "$job" --elems "$ELEMS" \
            --packet-elems "$PE" --dtype int32 --iters "$ITERS" --transport "$tr" \
            --rto-min-us 20000 \
            >"$tmp/$job.$r" 2>&1 &
        pids+=" $!"
    done
    wait $pids
    c1=$(cpu_ticks); t1=$(date +%s.%N)
    $PY - "$tmp/$job" "$(( c1 - c0 ))" "$(getconf CLK_TCK)" "$t0" "$t1" "$ELEMS" "$ITERS" <<'EOF'
import json, statistics, sys
ticks, hz, t0, t1, n, iters = int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
cpu = ticks / hz
meds = []
hosts_cpu = 0.0
for r in range(4):
    d = json.load(open('%s.%d' % (sys.argv[1], r)))
    hosts_cpu += d.get('cpu_s', 0.0)
    if not d['verified']:
        sys.exit('rank %d not verified: %s' % (r, d.get('error')))
    meds.append(statistics.median(d['times_s']))
gb = 4 * n * 4 * iters / 1e9
print(statistics.median(meds), 100 * cpu / (t1 - t0), cpu / gb, hosts_cpu / gb)
EOF
}

echo "testbed $NAME: 4 hosts, fabric inagg (--xdp $XDP), link $RATE, MTU 9000; $ELEMS int32 x $ITERS iterations, packets of $PE elements; load: $(uptime | sed 's/.*load average: //')"
declare -a U R UC RC UH RH
for i in $(seq "$REPS"); do
    ul=$(run udp "u$i") || { echo "udp run $i failed: $ul" >&2; exit 1; }
    rl=$(run roce "r$i") || { echo "roce run $i failed: $rl" >&2; exit 1; }
    read -r u ucpu ugb uh <<<"$ul"
    read -r r rcpu rgb rh <<<"$rl"
    U+=("$u") R+=("$r") UC+=("$ugb") RC+=("$rgb") UH+=("$uh") RH+=("$rh")
    $PY -c "import sys; u, r, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]); print('run %d: udp %.2f ms (%.3f Gbit/s), roce %.2f ms (%.3f Gbit/s); fabric CPU udp %.0f%% (%.2f s/GB), roce %.0f%% (%.2f s/GB)' % (int(sys.argv[4]), u * 1e3, n * 32 / u / 1e9, r * 1e3, n * 32 / r / 1e9, float(sys.argv[5]), float(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])))" "$u" "$r" "$ELEMS" "$i" "$ucpu" "$ugb" "$rcpu" "$rgb"
done
$PY -c "import statistics, sys; m = [statistics.median(map(float, a.split())) for a in sys.argv[1:]]; print('CPU per GB of contributions (median): fabric udp %.2f s, roce %.2f s; hosts udp %.2f s, roce %.2f s' % tuple(m))" "${UC[*]}" "${RC[*]}" "${UH[*]}" "${RH[*]}"
$PY - "$ELEMS" "${U[*]}" "${R[*]}" <<'EOF'
import statistics, sys
n = int(sys.argv[1])
u = statistics.median(float(x) for x in sys.argv[2].split())
r = statistics.median(float(x) for x in sys.argv[3].split())
print('median: udp %.2f ms (%.3f Gbit/s per worker), roce %.2f ms (%.3f Gbit/s); roce/udp throughput ratio %.3f'
      % (u * 1e3, n * 32 / u / 1e9, r * 1e3, n * 32 / r / 1e9, u / r))
EOF
echo "load after: $(uptime | sed 's/.*load average: //')"
