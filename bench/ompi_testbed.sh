#!/usr/bin/env bash
# bench/ompi_testbed.sh - Open MPI's coll/inagg component against Open MPI's own allreduce, in
# the same run, size by size, on the two places a user meets it:
#   - testbed: HOSTS hosts of a testbed (tools/testbed, links at RATE, the default inagg
#     fabric, whose switch serves jobs at the switch namespace's address, port 7000), one rank
#     per host, mpirun started in h1 with tools/testbed-rsh as its rsh agent, TCP on the
#     testbed subnet only, mpi_yield_when_idle 1 (ranks may outnumber the cores);
#   - one host: HOSTS ranks on this machine (shared memory), a switch on loopback configured,
#     the component left at its default route (a communicator on one host stays with MPI).
# Each (size, place) runs build/inagg-mpi-bench --mode latency (every result of every call
# checked on every rank) twice per repeat, interleaved: Open MPI alone (`--mca coll ^inagg`)
# and the component selected (`--mca coll_inagg_priority 100 --mca coll_inagg_switch ...`, no
# LD_PRELOAD), with the component read from build/ after Open MPI's own. The component's
# verbose line (calls through the switch / with MPI) says which way the calls went.
# A time is a run's median call (the slowest rank's); a cell is the median over REPEATS runs.
# Prints a table: Open MPI ms, coll/inagg ms, speedup (Open MPI / inagg), the route, and the
# target it is held to (>= 1.3x from 1 MiB up on the testbed; at most 10% slower, >= 0.9x,
# below the routing threshold and on one host). Exit 0 when every result verified (the
# targets are reported, not enforced: a shared machine's numbers are not a verdict). Needs
# root (namespaces); holds /tmp/inagg-measure.lock while it measures.
#
#   bash bench/ompi_testbed.sh [--hosts N] [--rate R] [--sizes "BYTES ..."] [--repeats K]
#                              [--iters I] [--place testbed|one-host|both] [--json FILE]
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTS=4 RATE=1gbit REPEATS=3 ITERS=10 PLACE=both JSON=""
SIZES="4096 16384 65536 262144 1048576 4194304 16777216"
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "ompi_testbed: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --hosts) HOSTS=${2:?}; shift 2 ;;
        --rate) RATE=${2:?}; shift 2 ;;
        --sizes) SIZES=${2:?}; shift 2 ;;
        --repeats) REPEATS=${2:?}; shift 2 ;;
        --iters) ITERS=${2:?}; shift 2 ;;
        --place) PLACE=${2:?}; shift 2 ;;
        --json) JSON=${2:?}; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        *) die "unknown argument '$1' (--help)" ;;
    esac
done
[[ $HOSTS =~ ^[2-9]$ ]] || die "--hosts must be 2..9"
[[ $REPEATS =~ ^[1-9][0-9]?$ ]] || die "--repeats must be 1..99"
[[ $ITERS =~ ^[1-9][0-9]{0,3}$ ]] || die "--iters must be 1..9999"
[[ $PLACE =~ ^(testbed|one-host|both)$ ]] || die "--place must be testbed, one-host or both"
for s in $SIZES; do [[ $s =~ ^[1-9][0-9]*$ ]] && [ $((s % 4)) = 0 ] && [ "$s" -le 268435456 ] ||
    die "size '$s' is not a multiple of 4 bytes up to 256 MiB"; done
for f in build/inagg build/inagg-mpi-bench build/mca_coll_inagg.so; do
    [ -e "$f" ] || die "$f is missing (make; make ompi-coll)"; done
command -v mpirun >/dev/null && command -v ompi_info >/dev/null || die "Open MPI missing (openmpi-bin)"
[ "$(id -u)" = 0 ] || die "needs root (network namespaces)"

ROOT=$PWD
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
COMPONENTS=(--mca mca_base_component_path "$pkglibdir:$ROOT/build")
out=$(mktemp -d)
tb="" swpid=""
cleanup() {
    [ -n "$swpid" ] && kill "$swpid" 2>/dev/null
    [ -n "$tb" ] && timeout 60 tools/testbed down "$tb" >/dev/null 2>&1
    rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
exec 9>/tmp/inagg-measure.lock
flock -w 1800 9 || die "another measurement holds /tmp/inagg-measure.lock"

# measure PLACE SYSTEM BYTES REPEAT CMD...: one checked run; its report to $out, one line.
measure() {
    local place=$1 sys=$2 bytes=$3 rep=$4 f
    shift 4
    f=$out/$place.$sys.$bytes.$rep
    if ! timeout 600 "$@" --elems $((bytes / 4)) --dtype float32 --mode latency \
        --iters "$ITERS" --warmup 2 >"$f.out" 2>"$f.err"; then
        echo "ompi_testbed: $place $sys $bytes bytes failed:" >&2
        tail -n 8 "$f.err" "$f.out" >&2
        exit 1
    fi
}

# sweep PLACE OMPI-CMD... :: INAGG-CMD...: every size, REPEATS times, both interleaved.
sweep() {
    local place=$1 ompi=() inagg=() r s
    shift
    while [ "$1" != :: ]; do ompi+=("$1"); shift; done
    shift
    inagg=("$@")
    for r in $(seq 1 "$REPEATS"); do
        for s in $SIZES; do
            measure "$place" ompi "$s" "$r" "${ompi[@]}"
            measure "$place" inagg "$s" "$r" "${inagg[@]}"
        done
        echo "   $place: repeat $r of $REPEATS done" >&2
    done
}

MPI_COMMON=(--bind-to none --mca mpi_yield_when_idle 1 --mca coll_inagg_verbose 1 "${COMPONENTS[@]}")
if [ "$PLACE" != one-host ]; then
    tb=ob$$
    tb=${tb:0:10}
    echo "== testbed $tb: $HOSTS hosts, links $RATE" >&2
    timeout 300 tools/testbed up "$HOSTS" --name "$tb" --link-rate "$RATE" --json >"$out/tb.json" ||
        die "tools/testbed up failed"
    read -r subnet hosts sw < <(/usr/bin/python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))
print(t["subnet"], ",".join(h["addr"] for h in t["hosts"]), t["switch"]["addr"] + ":" + str(t["fabric_port"]))
' "$out/tb.json")
    MPIRUN=(tools/testbed exec "$tb" h1 -- env INAGG_TESTBED="$tb" mpirun --allow-run-as-root
            --mca plm_rsh_agent "$ROOT/tools/testbed-rsh" --host "$hosts" -np "$HOSTS"
            --map-by node --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$subnet"
            --mca oob_tcp_if_include "$subnet" "${MPI_COMMON[@]}")
    sweep testbed "${MPIRUN[@]}" --mca coll ^inagg "$ROOT/build/inagg-mpi-bench" :: \
        "${MPIRUN[@]}" --mca coll_inagg_priority 100 --mca coll_inagg_switch "$sw" "$ROOT/build/inagg-mpi-bench"
    timeout 60 tools/testbed down "$tb" >/dev/null 2>&1 || true
    tb=""
fi
if [ "$PLACE" != testbed ]; then
    echo "== one host: $HOSTS ranks, shared memory" >&2
    exec 3>"$out/ready"
    timeout 3600 build/inagg switch --listen 127.0.0.1:0 --ready-fd 3 >/dev/null 2>"$out/switch.err" &
    swpid=$!
    exec 3>&-
    for _ in $(seq 100); do [ -s "$out/ready" ] && break; sleep 0.05; done
    port=$(head -n 1 "$out/ready")
    [ -n "$port" ] || die "the loopback switch did not start: $(cat "$out/switch.err")"
    LOCAL=(mpirun --allow-run-as-root --oversubscribe -np "$HOSTS" --mca btl self,vader "${MPI_COMMON[@]}")
    sweep one-host "${LOCAL[@]}" --mca coll ^inagg "$ROOT/build/inagg-mpi-bench" :: \
        "${LOCAL[@]}" --mca coll_inagg_priority 100 --mca coll_inagg_switch "127.0.0.1:$port" "$ROOT/build/inagg-mpi-bench"
fi
/usr/bin/python3 bench/ompi_table.py "$out" "$PLACE" "$REPEATS" "$HOSTS" "$RATE" "$JSON" $SIZES
