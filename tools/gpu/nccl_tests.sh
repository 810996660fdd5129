#!/usr/bin/env bash
# nccl_tests.sh - the NCCL plugin on a GPU machine: nccl-tests' all_reduce_perf in its checking
# mode (-c 1) with NCCL_NET_PLUGIN=inagg, NCCL_COLLNET_ENABLE=1 and a switch on loopback, each
# result checked by nccl-tests itself. Needs a CUDA device, NCCL (libnccl.so and nccl.h, from
# the CUDA toolkit or NCCL_HOME) and nccl-tests: built binaries in $NCCL_TESTS_DIR, or a source
# tree in $NCCL_TESTS_SRC that this script builds (the GPU machines have no network to fetch
# one). Without a CUDA device it prints "no CUDA device" and exits 1; without nccl-tests it
# says which variable to set and exits 1.
#
# NCCL puts an allreduce on CollNet only across nodes (ranks on two or more hosts); one GPU on
# one host runs the checked allreduces without it, and the log then shows the plugin loaded and
# CollNet set up but not used. The script says which happened (NCCL_DEBUG=INFO lines).
#
#   bash tools/gpu/nccl_tests.sh    (from the repository root, after make)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 1
tmp=$(mktemp -d)
swpid=""
trap '[ -n "$swpid" ] && kill $swpid 2>/dev/null; rm -rf "$tmp"' EXIT

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "nccl_tests: no CUDA device (nvidia-smi lists no GPU): nothing run"
    exit 1
fi
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
if [ ! -e "$NCCL_HOME/include/nccl.h" ]; then
    echo "nccl_tests: no nccl.h under $NCCL_HOME/include: set NCCL_HOME to NCCL's install"
    exit 1
fi
if ! timeout 600 make -s build/libnccl-net-inagg.so build/inagg >"$tmp/make.log" 2>&1; then
    echo "nccl_tests: make failed: $(tail -n 5 "$tmp/make.log")"
    exit 1
fi

bin=${NCCL_TESTS_DIR:-}
if [ -z "$bin" ] && [ -n "${NCCL_TESTS_SRC:-}" ]; then
    if ! timeout 900 make -s -C "$NCCL_TESTS_SRC" CUDA_HOME="$CUDA_HOME" NCCL_HOME="$NCCL_HOME" \
            >"$tmp/nccl-tests.log" 2>&1; then
        echo "nccl_tests: building nccl-tests in $NCCL_TESTS_SRC failed: $(tail -n 5 "$tmp/nccl-tests.log")"
        exit 1
    fi
    bin=$NCCL_TESTS_SRC/build
fi
if [ -z "$bin" ] || [ ! -x "$bin/all_reduce_perf" ]; then
    echo "nccl_tests: no all_reduce_perf: set NCCL_TESTS_DIR to nccl-tests' build directory, or"
    echo "  NCCL_TESTS_SRC to a source tree of github.com/NVIDIA/nccl-tests to build (no network here)"
    exit 1
fi

exec 3>"$tmp/ready"
timeout 600 ./build/inagg switch --listen 127.0.0.1:0 --ready-fd 3 >"$tmp/sw.out" 2>"$tmp/sw.err" &
swpid=$!
exec 3>&-
for _ in $(seq 100); do [ -s "$tmp/ready" ] && break; sleep 0.05; done
port=$(head -n1 "$tmp/ready" 2>/dev/null)
if [ -z "$port" ]; then echo "nccl_tests: the switch did not start: $(cat "$tmp/sw.err")"; exit 1; fi

# NCCL looks for libnccl-net-<NCCL_NET_PLUGIN>.so on the library path.
LD_LIBRARY_PATH="$ROOT/build:$NCCL_HOME/lib64:$NCCL_HOME/lib:${LD_LIBRARY_PATH:-}" \
NCCL_NET_PLUGIN=inagg NCCL_COLLNET_ENABLE=1 INAGG_SWITCH="127.0.0.1:$port" \
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,COLL \
    timeout 600 "$bin/all_reduce_perf" -b 4 -e 64M -f 4 -c 1 -g "${NGPUS:-1}" >"$tmp/out" 2>&1
rc=$?
grep -vE 'NCCL INFO' "$tmp/out"
loaded=$(grep -c 'Loaded collnet plugin inagg\|NET/Plugin.*inagg' "$tmp/out")
errors=$(sed -n 's/^# Out of bounds values : \([0-9]*\).*/\1/p' "$tmp/out" | tail -n 1)
echo "nccl_tests: all_reduce_perf exit $rc, out-of-bounds values ${errors:-unknown}," \
     "plugin lines in NCCL's log: $loaded"
grep -m 3 'inagg' "$tmp/out"
[ $rc = 0 ] && [ "${errors:-1}" = 0 ] && [ "$loaded" -gt 0 ]
