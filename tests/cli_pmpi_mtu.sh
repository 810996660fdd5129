#!/usr/bin/env bash
# tests/cli_pmpi_mtu.sh - packets sized to the path, across the testbed: an unmodified MPI
# program (tests/mpi/allreduce_sizes.c: every size from 4 bytes to 8 MiB, doubling, as
# MPI_INT and MPI_FLOAT, every element of every result checked on every rank) runs under
# libinagg-pmpi.so with 4 ranks, one per host of `tools/testbed up 4 --link-rate 1gbit
# --fabric inagg` (the L2 fabric, whose aggregation path takes whole frames only), at MTU
# 1500 and at 9000: every size right, its 44 allreduces through the switch (the 44 that
# gather the checks' verdicts, MPI_LONG sums, pass through to MPI), no IP fragment dropped
# by the fabric. Then the MTU of one host is lowered under a running job: its datagrams leave
# as fragments, which the fabric drops (agg_fragment, shown by `inagg top`), and the failure
# every rank reports says so. Skips, saying why, without Open MPI or where network
# namespaces cannot be made. Every command runs under `timeout`; about 30 seconds.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
TB=tools/testbed
INAGG=${INAGG:-build/inagg}
PMPI=${INAGG_PMPI:-$ROOT/build/libinagg-pmpi.so}  # INAGG_PMPI=... runs another build of it
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ $fail -eq 0 ]; exit $?; }
tmp=$(mktemp -d)
base=m$$
base=${base:0:10}
cleanup() {
    for m in 1500 9000; do timeout 30 $TB down "$base$m" >/dev/null 2>&1; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# mpirun in h1 of testbed NAME over its 4 hosts, the program under the interposer, every size
# through the switch (INAGG_MIN_BYTES=0: by default calls under 1 MiB stay with MPI):
# run NAME LOG TIMEOUT_MS PROGRAM ARGS...
run() {
    local name=$1 log=$2 tmo=$3 net hosts
    shift 3
    net=$(timeout 10 $TB show "$name" --json | sed -n 's/.*"subnet":"\([0-9.]*\)\.0\/24".*/\1/p')
    hosts=$net.1,$net.2,$net.3,$net.4
    timeout 120 $TB exec "$name" h1 -- env INAGG_TESTBED="$name" INAGG_SWITCH="$net.254:7000" \
        INAGG_TIMEOUT_MS="$tmo" INAGG_VERBOSE=1 INAGG_MIN_BYTES=0 \
        mpirun --allow-run-as-root --mca plm_rsh_agent "$ROOT/tools/testbed-rsh" --host "$hosts" \
        -np 4 --map-by node --bind-to none --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
        --mca mpi_yield_when_idle 1 -x INAGG_SWITCH -x INAGG_TIMEOUT_MS -x INAGG_VERBOSE -x INAGG_MIN_BYTES \
        -x LD_PRELOAD="$PMPI" "$@" >"$log" 2>&1
}
# the fabric's counter NAME of testbed $1
fabric_count() {
    local net
    net=$(timeout 10 $TB show "$1" --json | sed -n 's/.*"subnet":"\([0-9.]*\)\.0\/24".*/\1/p')
    timeout 10 $TB exec "$1" sw -- "$ROOT/$INAGG" switch --stats "$net.254:7000" |
        sed -n "s/^fabric frames:.* $2=\([0-9]*\).*/\1/p"
}

why_skip=""
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
    why_skip="Open MPI is not installed (openmpi-bin libopenmpi-dev)"
elif [ ! -f "$PMPI" ] || [ ! -x "$INAGG" ]; then why_skip="build/libinagg-pmpi.so or $INAGG is not built"
elif ! timeout 30 $TB check >/dev/null 2>&1; then why_skip="testbeds cannot be built here (tools/testbed check)"
elif ! timeout 120 mpicc -O2 tests/mpi/allreduce_sizes.c -o "$tmp/sizes" 2>"$tmp/mpicc.err"; then
    bad mpicc "$(head -n 3 "$tmp/mpicc.err")"
    finish
fi
if [ -n "$why_skip" ]; then
    for t in pmpi_every_size_at_mtu_1500 pmpi_every_size_at_mtu_9000 pmpi_fragments_named_on_failure; do
        skp $t "$why_skip"
    done
    finish
fi

for mtu in 1500 9000; do
    t=pmpi_every_size_at_mtu_$mtu
    name=$base$mtu
    if ! timeout 60 $TB up 4 --name "$name" --link-rate 1gbit --mtu $mtu --fabric inagg >/dev/null 2>"$tmp/up"; then
        bad $t "testbed up: $(tail -n 3 "$tmp/up")"
        continue
    fi
    run "$name" "$tmp/run$mtu" 10000 "$tmp/sizes"
    rc=$?
    frags=$(fabric_count "$name" agg_fragment)
    agg=$(fabric_count "$name" agg_in)
    summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$tmp/run$mtu")
    if [ $rc -eq 0 ] && [ "$summary" = "44 passed, 0 failed" ] &&
       grep -q '^inagg-pmpi: 44 allreduce accelerated, 44 passed through$' "$tmp/run$mtu" &&
       [ "$frags" = 0 ] && [ "${agg:-0}" -gt 0 ]; then
        ok "$t (4 B to 8 MiB, int and float; $(sed -n 's/^ok   8388608 bytes MPI_FLOAT //p' "$tmp/run$mtu") for 8 MiB)"
    else
        bad $t "rc $rc, '$summary', fabric agg_fragment=$frags agg_in=$agg: $(grep -v '^ok ' "$tmp/run$mtu" | tail -n 4)"
    fi
done

# One host's MTU falls from 9000 to 1500 under a running job: its 8972-byte datagrams leave as
# fragments, which the fabric drops; the switch fails the job for the silent rank and every
# rank's reason names the dropped fragments.
t=pmpi_fragments_named_on_failure
name=${base}9000
if ! timeout 10 $TB show "$name" >/dev/null 2>&1; then bad $t "no testbed $name"
else
    run "$name" "$tmp/shrink" 3000 "$tmp/sizes" 8388608 300 &
    job=$!
    for _ in $(seq 150); do grep -qs '^ok   8388608 bytes MPI_FLOAT' "$tmp/shrink" && break; sleep 0.2; done
    timeout 10 $TB exec "$name" h1 -- ip link set tb0 mtu 1500
    wait $job
    rc=$?
    named=$(grep -c "allreduce through the switch failed: .*the switch's L2 fabric has dropped [0-9]* IP fragments sent to it (agg_fragment)" "$tmp/shrink")
    net=$(timeout 10 $TB show "$name" --json | sed -n 's/.*"subnet":"\([0-9.]*\)\.0\/24".*/\1/p')
    top=$(timeout 10 $TB exec "$name" sw -- "$ROOT/$INAGG" top "$net.254:7000" --once --interval 100 2>&1)
    if [ $rc -ne 0 ] && [ "$named" = 4 ] &&
       grep -q "this rank's, up to 8972 bytes, now exceed its path MTU 1500 (9000 when they were sized)" "$tmp/shrink" &&
       grep -Eq '^fabric: IP fragments dropped [1-9][0-9]* ' <<<"$top"; then
        ok "$t (4 ranks name agg_fragment=$(fabric_count "$name" agg_fragment), as inagg top shows)"
    else
        bad $t "rc $rc, $named of 4 ranks named the fragments, top: '$(grep '^fabric' <<<"$top")': $(grep -v '^ok ' "$tmp/shrink" | tail -n 4)"
    fi
fi
finish
