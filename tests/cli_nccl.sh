#!/usr/bin/env bash
# cli_nccl.sh - the NCCL plugin libnccl-net-inagg.so (src/apps/nccl/, docs/INTEGRATIONS.md)
# without NCCL or a GPU: built by `make nccl-plugin`, it exports exactly ncclNetPlugin_v8 and
# ncclCollNetPlugin_v8 (nm -D), and tests/nccl_harness.c loads it with dlopen and drives both
# tables as NCCL would against a switch on loopback:
#   - matrix: 4 ranks, every reduction reduceSupport claims from 1 element to 64 MiB, each
#     result checked; requests in flight; a reduction not claimed refused with its reason;
#   - the same with lost, duplicated and reordered packets (INAGG_FAULTS), up to 4 MiB;
#   - net: the point-to-point table, 4 ranks in a ring;
#   - errors: no switch configured, damaged handles, a switch that does not answer, a net
#     peer that is not there: each a clear error, none a hang;
#   - cuda: CUDA buffers staged through pinned memory (skipped, saying why, without a GPU).
# With SAN=1 it uses the ASan+UBSan build (build-san/).
#
#   bash tests/cli_nccl.sh [PART...]    (from the repository root, after make; PART: matrix,
#                                        faults, net, errors, cuda; default all)
set -u
ROOT=$PWD
B=build
[ "${SAN:-0}" = 1 ] && B=build-san
pass=0 fail=0 skip=0
ok()  { echo "ok      $1"; pass=$((pass + 1)); }
bad() { echo "FAIL    $1: $2"; fail=$((fail + 1)); }
skp() { echo "skip    $1: $2"; skip=$((skip + 1)); }
tmp=$(mktemp -d)
swpid=""
trap '[ -n "$swpid" ] && kill $swpid 2>/dev/null; rm -rf "$tmp"' EXIT
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ "$fail" = 0 ]; exit $?; }

PLUGIN=$ROOT/$B/libnccl-net-inagg.so
t=nccl_plugin_builds_and_exports_its_two_tables
if ! timeout 600 nice make -s "$B/libnccl-net-inagg.so" "$B/nccl-harness" \
        $([ "$B" = build-san ] && echo SAN=1) >"$tmp/make.log" 2>&1; then
    bad $t "make nccl-plugin: $(tail -n 5 "$tmp/make.log")"; finish
fi
syms=$(nm -D --defined-only "$PLUGIN" | awk '{print $3}' | sort | tr '\n' ' ')
if [ "$syms" = "ncclCollNetPlugin_v8 ncclNetPlugin_v8 " ]; then ok "$t ($syms)"
else bad $t "exports [ $syms]"; fi

exec 3>"$tmp/ready"
INAGG_LOG=warn timeout 600 ./build/inagg switch --listen 127.0.0.1:0 --ready-fd 3 \
    >"$tmp/sw.out" 2>"$tmp/sw.err" &
swpid=$!
exec 3>&-
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
port=$(head -n1 "$tmp/ready" 2>/dev/null)
if [ -z "$port" ]; then bad switch_starts "$(cat "$tmp/sw.err")"; finish; fi
SW=127.0.0.1:$port
# a port nobody answers on: bound, then closed (the kernel refuses connections to it)
dead=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}:protect_shadow_gap=0
want() { [ ${#PARTS[@]} -eq 0 ] && return 0; local p; for p in "${PARTS[@]}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
PARTS=("$@")
harness() { # PART NAME LOG ARGS...: the harness's part (when asked for), its summary judged
    local name=$2 log=$3 rc
    want "$1" || return 0
    shift 3
    timeout 570 "./$B/nccl-harness" "$PLUGIN" "$@" >"$log" 2>"$log.err"; rc=$?
    local line
    line=$(grep -E '^(ok  |skip) ' "$log" | tail -n 1)
    if [ $rc = 0 ] && grep -q '^1 passed, 0 failed, 0 skipped$' "$log"; then ok "$name (${line#ok   })"
    elif [ $rc = 0 ] && grep -q '^0 passed, 0 failed, 1 skipped$' "$log"; then skp "$name" "${line#skip }"
    else bad "$name" "rc $rc: $(grep FAIL "$log" | head -n 5) $(grep -v '^log' "$log.err" | tail -n 3)"; fi
}

harness matrix nccl_collnet_every_claimed_reduction_1_element_to_64_MiB "$tmp/matrix" "$SW" matrix
INAGG_FAULTS=drop=0.01,dup=0.01,reorder=0.01,seed=11 \
    harness faults nccl_collnet_with_lost_packets_up_to_4_MiB "$tmp/faults" "$SW" matrix 1048576
# the losses happened: rank 0's plugin counted them when it left the job
if want faults && ! grep -qE '^ok   matrix .* [1-9][0-9]* packets lost' "$tmp/faults"; then
    bad nccl_collnet_packets_were_lost "no packet lost: $(grep -E '^(ok|FAIL)' "$tmp/faults" | tail -n 1)"
fi
harness net nccl_net_ring_of_4_ranks "$tmp/net" "$SW" net
harness errors nccl_errors_are_clear_and_bounded "$tmp/errors" "$SW;127.0.0.1:$dead" errors
[ -f "$tmp/errors" ] && grep '^ok   ' "$tmp/errors" | grep -v '^ok   errors' | sed 's/^ok   /        /'
harness cuda nccl_collnet_cuda_buffers_staged "$tmp/cuda" "$SW" cuda

finish
