#!/usr/bin/env bash
# cli_ompi.sh - the Open MPI component coll/inagg (src/apps/ompi/, docs/INTEGRATIONS.md), as a
# user meets it: built by `make ompi-coll`, exporting one symbol, listed with its parameters by
# `ompi_info --param coll inagg --level 9`, installed by `make install` into Open MPI's
# component directory, and selected by `--mca coll_inagg_priority 100` under an unmodified
# program (tests/ompi_check.c: every allreduce result checked, 1 element to 4 MiB) with a
# switch on loopback:
#   - the one-host rule overridden: the sums, blocking and MPI_Iallreduce, go through the switch
#     (per-call lines, switch counters), every result right, MPI_MAX and MPI_DOUBLE with MPI;
#   - the same under MPI_THREAD_MULTIPLE, where a duplicate communicator is set up inside
#     Open MPI's progress engine (its job is joined at its first call, not then);
#   - the default route: four ranks on one host stay with MPI, nothing reaches the switch;
#   - the size threshold: calls under it stay with MPI, saying so and where it came from
#     (coll_inagg_min_bytes, over the calibration file coll_inagg_calibration names, over the
#     default 1 MiB); an unusable calibration file: one warning, the default;
#   - a switch that does not answer: one warning, every result right through MPI;
#   - no switch configured: the component stays out, silently;
#   - mpi4py's tests of the collectives (tools/mpi4py-suite) pass plain, with the component and
#     with the interposer, the sums going through the switch both ways.
# Without mpicc, mpirun or Open MPI's development headers the cases skip, naming the package.
#
#   bash tests/cli_ompi.sh    (from the repository root, after make)
set -u
ROOT=$PWD
pass=0 fail=0 skip=0
ok()   { echo "ok      $1"; pass=$((pass + 1)); }
bad()  { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp()  { echo "skip    $1: $2"; skip=$((skip + 1)); }
missing() { if [ "${CI:-}" = true ]; then bad "$1" "$2 is missing in CI (tools/setup installs it)"
            else skp "$1" "$2 not installed (Debian: apt-get install $3)"; fi; }
tmp=$(mktemp -d)
swpid=""
trap '[ -n "$swpid" ] && kill $swpid 2>/dev/null; rm -rf "$tmp"' EXIT
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ "$fail" = 0 ]; exit $?; }

COMP=$ROOT/build/mca_coll_inagg.so
t=ompi_coll_builds_and_exports_only_its_component
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1 ||
   ! command -v ompi_info >/dev/null 2>&1; then
    missing $t "Open MPI (mpicc, mpirun, ompi_info)" "openmpi-bin libopenmpi-dev"; finish
elif ! timeout 300 make -s ompi-coll >"$tmp/make.log" 2>&1; then
    if grep -q 'development headers' "$tmp/make.log"; then
        missing $t "Open MPI's development headers" "libopenmpi-dev"; finish
    fi
    bad $t "make ompi-coll: $(tail -n 5 "$tmp/make.log")"; finish
else
    syms=$(nm -D --defined-only "$COMP" | awk '{print $3}' | tr '\n' ' ')
    if [ "$syms" = "mca_coll_inagg_component " ]; then ok $t
    else bad $t "exports [ $syms]"; fi
fi

# Open MPI's own components, then ours: a component path replaces the default one.
pkglibdir=$(ompi_info --path pkglibdir --parsable | sed -n 's/^path:pkglibdir://p')
export OMPI_MCA_mca_base_component_path=$pkglibdir:$ROOT/build

t=ompi_info_lists_the_component_and_its_parameters
info=$(timeout 60 ompi_info --param coll inagg --level 9 2>&1)
params="switch priority min_bytes calibration one_host float_mode verbose connect_ms timeout_ms"
absent=""
for p in $params; do grep -q "parameter \"coll_inagg_$p\"" <<<"$info" || absent="$absent $p"; done
if grep -q 'MCA coll: inagg (MCA v2.1.0, API v2.0.0' <<<"$info" && [ -z "$absent" ] &&
   grep -q '"coll_inagg_min_bytes" (current value: ""' <<<"$info"; then ok "$t ($params)"
else bad $t "missing:$absent: $(head -n 3 <<<"$info")"; fi

t=make_install_puts_the_component_in_open_mpi_s_directory
# a system prefix: Open MPI's own directory (under DESTDIR); another prefix: its lib/openmpi
if timeout 300 make -s install DESTDIR="$tmp/dest" PREFIX=/usr/local >"$tmp/install.log" 2>&1 &&
   cmp -s "$COMP" "$tmp/dest$pkglibdir/mca_coll_inagg.so" &&
   timeout 300 make -s install PREFIX="$tmp/prefix" >>"$tmp/install.log" 2>&1 &&
   cmp -s "$COMP" "$tmp/prefix/lib/openmpi/mca_coll_inagg.so"; then
    ok "$t ($pkglibdir; PREFIX/lib/openmpi under another prefix)"
else bad $t "$(tail -n 3 "$tmp/install.log"; ls "$tmp/dest$pkglibdir" "$tmp/prefix/lib/openmpi" 2>&1)"; fi

if ! timeout 120 mpicc -O2 -Wall -Wextra -Werror tests/ompi_check.c -o "$tmp/check" 2>"$tmp/cc.err"; then
    bad ompi_check_builds "mpicc: $(head -n 3 "$tmp/cc.err")"; finish
fi

# One switch on loopback for every case.
exec 3>"$tmp/ready"
timeout 300 ./build/inagg switch --listen 127.0.0.1:0 --ready-fd 3 >"$tmp/sw.out" 2>"$tmp/sw.err" &
swpid=$!
exec 3>&-
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
port=$(head -n1 "$tmp/ready" 2>/dev/null)
if [ -z "$port" ]; then bad switch_starts "$(cat "$tmp/sw.err")"; finish; fi
SW=127.0.0.1:$port

MPIRUN=(mpirun --oversubscribe --mca mpi_yield_when_idle 1 --mca btl self,vader,tcp
        --mca btl_tcp_if_include lo -n 4 --mca coll_inagg_priority 100)
[ "$(id -u)" = 0 ] && MPIRUN=(mpirun --allow-run-as-root "${MPIRUN[@]:1}")
# run LOG MCA-ARGS...: the checked program with the component; its status. LOG gets each
# rank's output whole, one rank after another (mpirun's own copy of the ranks' streams can cut
# one rank's line with another's), or mpirun's output when no rank wrote any.
run() {
    local log=$1 rc; shift
    rm -rf "$log.d"
    timeout 120 "${MPIRUN[@]}" --output-filename "$log.d" "$@" "$tmp/check" >"$log.mpirun" 2>&1
    rc=$?
    cat "$log.d"/*/rank.*/std* >"$log" 2>/dev/null || cp "$log.mpirun" "$log"
    return $rc
}
packets_in() { ./build/inagg switch --stats "$SW" | sed -n 's/^packets in=\([0-9]*\) .*/\1/p'; }
summary() { grep -E '^ompi_check: [0-9]+ passed, [0-9]+ failed$' "$1" | tail -n1; }
passed() { grep -qE '^ompi_check: [1-9][0-9]* passed, 0 failed$' "$1"; }
# per-call lines: "coll/inagg: rank R: allreduce of N TYPE (sum) on COMM -> inagg|MPI (why)"
routes() { grep -c "^coll/inagg: rank [0-9]: i\?allreduce of .* -> $2" "$1"; }

# What `inagg model calibrate` writes, cut to the route's threshold: 64 KiB.
printf '{"what": "inagg model parameters (inagg model calibrate)", "hop_s": 7.65e-05, "route_min_bytes": 65536, "route_link_bps": 1000000000}\n' >"$tmp/cal.json"
printf '{"what": "inagg model parameters (inagg model calibrate)", "hop_s": 7.65e-05}\n' >"$tmp/nocal.json"
# the explicit threshold (0) wins over the calibration file's
t=ompi_coll_sums_through_the_switch_every_result_right
before=$(packets_in)
run "$tmp/sw1" --mca coll_inagg_switch "$SW" --mca coll_inagg_one_host switch \
    --mca coll_inagg_min_bytes 0 --mca coll_inagg_calibration "$tmp/cal.json" \
    --mca coll_inagg_verbose 2; rc=$?
after=$(packets_in)
n_inagg=$(routes "$tmp/sw1" inagg) n_mpi=$(routes "$tmp/sw1" MPI)
if [ $rc -eq 0 ] && passed "$tmp/sw1" && [ "$n_inagg" -gt 0 ] &&
   [ $((after - before)) -gt "$n_inagg" ] &&
   grep -q 'allreduce of 1 MPI_INT (sum) on MPI_COMM_WORLD -> inagg (4 bytes reach the threshold of 0 bytes, set by coll_inagg_min_bytes)$' "$tmp/sw1" &&
   grep -q 'allreduce of 1048576 MPI_FLOAT (sum) on MPI_COMM_WORLD -> inagg (4194304 bytes reach the threshold of 0 bytes, set by coll_inagg_min_bytes)$' "$tmp/sw1" &&
   grep -q 'rank 0: iallreduce of 100003 MPI_FLOAT (sum) on MPI_COMM_WORLD -> inagg (400012 bytes reach' "$tmp/sw1" &&
   grep -q 'rank 0: iallreduce of 1 MPI_INT (not sum) on MPI_COMM_WORLD -> MPI (the op' "$tmp/sw1" &&
   grep -q 'allreduce of 1 MPI_INT (not sum) on .* -> MPI (the op is not MPI_SUM)$' "$tmp/sw1" &&
   grep -q 'MPI_DOUBLE (sum) on .* -> MPI (the datatype is not a 4-byte int or float' "$tmp/sw1" &&
   [ "$(grep -c '^coll/inagg: .*: job ompi-.* on switch '"$SW"', [24] ranks$' "$tmp/sw1")" = 4 ]; then
    ok "$t ($(summary "$tmp/sw1"); $n_inagg calls through the switch, $n_mpi with MPI; $((after - before)) packets in)"
else bad $t "rc $rc, $n_inagg inagg, $n_mpi MPI, packets $before -> $after: $(grep -v '^coll/inagg: rank' "$tmp/sw1" | tail -n 5)"; fi

# MPI_THREAD_MULTIPLE (mpi4py's default): Open MPI then enables a duplicate's modules inside
# its progress engine, where a collective never returns; the job is joined at the first call.
t=ompi_coll_thread_multiple_comm_dup_joins_at_the_first_call
rm -rf "$tmp/mt.d"
timeout 120 "${MPIRUN[@]}" --output-filename "$tmp/mt.d" --mca coll_inagg_switch "$SW" \
    --mca coll_inagg_one_host switch --mca coll_inagg_min_bytes 0 --mca coll_inagg_verbose 1 \
    "$tmp/check" --thread-multiple >"$tmp/mt.mpirun" 2>&1
rc=$?
cat "$tmp/mt.d"/*/rank.*/std* >"$tmp/mt" 2>/dev/null || cp "$tmp/mt.mpirun" "$tmp/mt"
if [ $rc -eq 0 ] && passed "$tmp/mt" &&
   grep -q '^coll/inagg: MPI COMMUNICATOR [0-9]* DUP FROM 0: [1-9][0-9]* allreduce through the switch' "$tmp/mt"; then
    ok "$t ($(summary "$tmp/mt"); $(grep -c ' allreduce through the switch' "$tmp/mt") communicators used the switch)"
else bad $t "rc $rc$([ $rc = 124 ] && echo ': hung'): $(grep -v '^coll/inagg: rank' "$tmp/mt" | tail -n 5)"; fi

t=ompi_coll_default_route_one_host_stays_with_mpi
before=$(packets_in)
run "$tmp/dr" --mca coll_inagg_switch "$SW" --mca coll_inagg_verbose 2; rc=$?
after=$(packets_in)
n_mpi=$(routes "$tmp/dr" 'MPI (every rank is on one host')
if [ $rc -eq 0 ] && passed "$tmp/dr" && [ "$(routes "$tmp/dr" inagg)" = 0 ] && [ "$n_mpi" -gt 0 ] &&
   [ "$n_mpi" = "$(routes "$tmp/dr" '')" ] && [ "$after" = "$before" ] &&
   grep -q '^coll/inagg: MPI_COMM_WORLD: every rank is on one host: no switch job' "$tmp/dr"; then
    ok "$t ($(summary "$tmp/dr"); $n_mpi calls with MPI, none through the switch)"
else bad $t "rc $rc, packets $before -> $after: $(grep -v '^coll/inagg: rank' "$tmp/dr" | tail -n 5)"; fi

t=ompi_coll_calls_under_the_default_threshold_stay_with_mpi
run "$tmp/th" --mca coll_inagg_switch "$SW" --mca coll_inagg_one_host switch \
    --mca coll_inagg_verbose 2; rc=$?
if [ $rc -eq 0 ] && passed "$tmp/th" &&
   grep -q 'allreduce of 262143 MPI_FLOAT (sum) on MPI_COMM_WORLD -> MPI (1048572 bytes are below the threshold of 1048576 bytes, the default)$' "$tmp/th" &&
   grep -q 'allreduce of 262144 MPI_FLOAT (sum) on MPI_COMM_WORLD -> inagg (1048576 bytes reach the threshold of 1048576 bytes, the default)$' "$tmp/th"; then
    ok "$t ($(routes "$tmp/th" inagg) through the switch, $(routes "$tmp/th" MPI) with MPI)"
else bad $t "rc $rc: $(grep -v '^coll/inagg: rank' "$tmp/th" | tail -n 5)"; fi

t=ompi_coll_threshold_from_the_calibration_file
run "$tmp/cal" --mca coll_inagg_switch "$SW" --mca coll_inagg_one_host switch \
    --mca coll_inagg_calibration "$tmp/cal.json" --mca coll_inagg_verbose 2; rc=$?
if [ $rc -eq 0 ] && passed "$tmp/cal" &&
   grep -q "allreduce of 16383 MPI_FLOAT (sum) on MPI_COMM_WORLD -> MPI (65532 bytes are below the threshold of 65536 bytes, from calibration $tmp/cal.json)\$" "$tmp/cal" &&
   grep -q "allreduce of 16384 MPI_FLOAT (sum) on MPI_COMM_WORLD -> inagg (65536 bytes reach the threshold of 65536 bytes, from calibration $tmp/cal.json)\$" "$tmp/cal"; then
    ok "$t ($(routes "$tmp/cal" inagg) through the switch, $(routes "$tmp/cal" MPI) with MPI)"
else bad $t "rc $rc: $(grep -v '^coll/inagg: rank' "$tmp/cal" | tail -n 5)"; fi

# a calibration without route_min_bytes (written without a testbed): rank 0 says so, once
t=ompi_coll_unusable_calibration_one_warning_then_the_default
run "$tmp/nocal" --mca coll_inagg_switch "$SW" --mca coll_inagg_one_host switch \
    --mca coll_inagg_calibration "$tmp/nocal.json"; rc=$?
if [ $rc -eq 0 ] && passed "$tmp/nocal" && [ "$(grep -c '^coll/inagg:' "$tmp/nocal")" = 1 ] &&
   grep -q "^coll/inagg: coll_inagg_calibration=$tmp/nocal.json has no route_min_bytes .*; the threshold is 1048576 bytes, the default\$" "$tmp/nocal"; then
    ok "$t ($(summary "$tmp/nocal"))"
else bad $t "rc $rc: $(grep '^coll/inagg:' "$tmp/nocal" | head -n 5)"; fi

# The PMPI interposer runs the same checked program: its nonblocking allreduces go through the
# same generalized requests (src/apps/mpi/greq.c) as the component's.
t=pmpi_interposer_same_checks_iallreduce_through_the_switch_calibrated_threshold
# Its threshold from the calibration file INAGG_CALIBRATION names (no INAGG_MIN_BYTES).
run "$tmp/pm" --mca coll ^inagg -x LD_PRELOAD="$PWD/build/libinagg-pmpi.so" -x INAGG_SWITCH="$SW" \
    -x INAGG_ONE_HOST=switch -x INAGG_CALIBRATION="$tmp/cal.json" -x INAGG_VERBOSE=2; rc=$?
n_i=$(grep -c '^inagg-pmpi: rank [0-9]: iallreduce of .* -> inagg (' "$tmp/pm")
if [ $rc -eq 0 ] && passed "$tmp/pm" && [ "$n_i" -gt 0 ] &&
   grep -q "^inagg-pmpi: rank 0: allreduce of 16383 MPI_FLOAT (sum) on MPI_COMM_WORLD -> MPI (65532 bytes are below the threshold of 65536 bytes, from calibration $tmp/cal.json)\$" "$tmp/pm" &&
   grep -q "^inagg-pmpi: rank 0: iallreduce of 100003 MPI_FLOAT (sum) on MPI_COMM_WORLD -> inagg (400012 bytes reach the threshold of 65536 bytes, from calibration $tmp/cal.json)\$" "$tmp/pm"; then
    ok "$t ($(summary "$tmp/pm"); $n_i nonblocking calls through the switch)"
else bad $t "rc $rc, $n_i nonblocking through the switch: $(grep -v '^inagg-pmpi: rank' "$tmp/pm" | tail -n 5)"; fi

t=ompi_coll_switch_that_does_not_answer_one_warning_then_mpi
run "$tmp/dead" --mca coll_inagg_switch 127.0.0.1:1 --mca coll_inagg_one_host switch; rc=$?
if [ $rc -eq 0 ] && passed "$tmp/dead" && [ "$(grep -c '^coll/inagg:' "$tmp/dead")" = 1 ] &&
   grep -q '^coll/inagg: switch 127.0.0.1:1 not usable (rank 0: cannot connect to 127.0.0.1:1.*); allreduce stays with MPI$' "$tmp/dead"; then
    ok "$t ($(summary "$tmp/dead"))"
else bad $t "rc $rc: $(head -n 5 "$tmp/dead")"; fi

t=ompi_coll_without_a_switch_stays_out_silently
(unset INAGG_SWITCH; run "$tmp/none" --mca coll_inagg_verbose 2); rc=$?
if [ $rc -eq 0 ] && passed "$tmp/none" && ! grep -q '^coll/inagg:' "$tmp/none"; then
    ok "$t ($(summary "$tmp/none"))"
else bad $t "rc $rc: $(head -n 5 "$tmp/none")"; fi

# mpi4py's own tests of the collectives (tools/mpi4py-suite; the whole suite is its own
# command), three ways: every test passes with the component and the interposer as without.
t=mpi4py_collective_tests_pass_plain_component_and_interposer
if ! dpkg-query -W -f='${Status}' python3-mpi4py 2>/dev/null | grep -q 'ok installed'; then
    missing $t "python3-mpi4py" "python3-mpi4py"
else
    timeout 900 tools/mpi4py-suite -n 2 --tests "test_cco_buf test_cco_nb_buf" >"$tmp/m4.out" 2>"$tmp/m4.err"
    rc=$?
    row() { awk -v k="$1" 'index($0, k) == 1 { print $(NF-2), $(NF-1), $NF }' "$tmp/m4.out"; }
    read -r t_p t_c t_i <<<"$(row tests)"
    read -r p_p p_c p_i <<<"$(row passed)"
    read -r _ s_c s_i <<<"$(row 'allreduce via switch')"
    if [ $rc = 2 ] && grep -q 'cannot fetch' "$tmp/m4.err"; then
        skp $t "mpi4py's test sources could not be fetched: $(tail -n 1 "$tmp/m4.err")"
    elif [ $rc = 0 ] && [ "${t_p:-0}" -gt 0 ] && [ "$t_p" = "$t_c" ] && [ "$t_p" = "$t_i" ] &&
         [ "$p_p" = "$t_p" ] && [ "$p_c" = "$t_p" ] && [ "$p_i" = "$t_p" ] &&
         [ "${s_c:-0}" -gt 0 ] && [ "${s_i:-0}" -gt 0 ]; then
        ok "$t ($t_p tests each way; $s_c allreduce through the switch with the component, $s_i with the interposer)"
    else bad $t "rc $rc: $(cat "$tmp/m4.out" "$tmp/m4.err" | tail -n 12)"; fi
fi

finish
