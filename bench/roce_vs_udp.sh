#!/usr/bin/env bash
# bench/roce_vs_udp.sh - allreduce throughput over the RoCE v1 transport against the UDP
# transport on ONE testbed (same hosts, same inagg fabric, same link rate), runs interleaved:
# udp, roce, udp, roce, ... Each run is 4 ranks (`bench allreduce --rank`, one per host) of
# ELEMS int32 for ITERS iterations; a run's time is the median over its ranks of their median
# iteration time. Prints one line per run and the ratio of the medians (roce throughput /
# udp throughput). Results are verified by every rank (a run that is not fails the script).
# Both transports run with the retransmission floor of 20 ms that `bench allreduce --testbed`
# uses (a shared machine's scheduling stalls otherwise cause spurious resends).
#
# Usage: bench/roce_vs_udp.sh [--name NAME] [--rate R] [--elems N] [--iters K] [--reps R]
#                             [--packet-elems P]
# Defaults: --name roceb$$ --rate 1gbit --elems 1000000 --iters 10 --reps 5 --packet-elems 2048.
# Needs root (network namespaces); takes the testbed down at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
INAGG=${INAGG:-build/inagg}
PY=/usr/bin/python3
NAME=roceb$(( $$ % 100000 )) RATE=1gbit ELEMS=1000000 ITERS=10 REPS=5 PE=2048
while [ $# -gt 0 ]; do
    case $1 in
    --name) NAME=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --elems) ELEMS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --reps) REPS=$2; shift 2 ;;
    --packet-elems) PE=$2; shift 2 ;;
    *) echo "usage: $0 [--name NAME] [--rate R] [--elems N] [--iters K] [--reps R] [--packet-elems P]" >&2; exit 2 ;;
    esac
done
tmp=$(mktemp -d)
trap 'timeout 60 tools/testbed down "$NAME" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
timeout 60 tools/testbed up 4 --name "$NAME" --fabric inagg --link-rate "$RATE" --mtu 9000 \
    >"$tmp/up" 2>&1 || { echo "tools/testbed up failed: $(tail -n 2 "$tmp/up")" >&2; exit 3; }
SW=$(tools/testbed show "$NAME" | sed -n 's/^ *sw .* \([0-9.]*\) (inagg0.*/\1/p')

run() { # TRANSPORT JOB -> prints the run's median iteration time in seconds
    local tr=$1 job=$2 pids=""
    for r in 0 1 2 3; do
        timeout 300 tools/testbed exec "$NAME" h$((r + 1)) -- $INAGG bench allreduce \
            --switch "$SW:7000" --rank $r --world 4 --job "$job" --elems "$ELEMS" \
            --packet-elems "$PE" --dtype int32 --iters "$ITERS" --transport "$tr" \
            --rto-min-us 20000 \
            >"$tmp/$job.$r" 2>&1 &
        pids+=" $!"
    done
    wait $pids
    $PY - "$tmp/$job" <<'EOF'
import json, statistics, sys
meds = []
for r in range(4):
    d = json.load(open('%s.%d' % (sys.argv[1], r)))
    if not d['verified']:
        sys.exit('rank %d not verified: %s' % (r, d.get('error')))
    meds.append(statistics.median(d['times_s']))
print(statistics.median(meds))
EOF
}

echo "testbed $NAME: 4 hosts, fabric inagg, link $RATE, MTU 9000; $ELEMS int32 x $ITERS iterations, packets of $PE elements; load: $(uptime | sed 's/.*load average: //')"
declare -a U R
for i in $(seq "$REPS"); do
    u=$(run udp "u$i") || { echo "udp run $i failed: $u" >&2; exit 1; }
    r=$(run roce "r$i") || { echo "roce run $i failed: $r" >&2; exit 1; }
    U+=("$u") R+=("$r")
    $PY -c "import sys; u, r, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]); print('run %d: udp %.2f ms (%.3f Gbit/s), roce %.2f ms (%.3f Gbit/s)' % (int(sys.argv[4]), u * 1e3, n * 32 / u / 1e9, r * 1e3, n * 32 / r / 1e9))" "$u" "$r" "$ELEMS" "$i"
done
$PY - "$ELEMS" "${U[*]}" "${R[*]}" <<'EOF'
import statistics, sys
n = int(sys.argv[1])
u = statistics.median(float(x) for x in sys.argv[2].split())
r = statistics.median(float(x) for x in sys.argv[3].split())
print('median: udp %.2f ms (%.3f Gbit/s per worker), roce %.2f ms (%.3f Gbit/s); roce/udp throughput ratio %.3f'
      % (u * 1e3, n * 32 / u / 1e9, r * 1e3, n * 32 / r / 1e9, u / r))
EOF
echo "load after: $(uptime | sed 's/.*load average: //')"
